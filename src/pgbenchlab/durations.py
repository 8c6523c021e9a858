"""A duration as a reader reads it, the same in the terminal, the reports and the plans written
for studies: "45 s", "3 min 5 s", "2 h 10 min" (whole units alone: "3 min", "2 h")."""

from __future__ import annotations


def duration_text(seconds: float) -> str:
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        minutes, rest = divmod(whole, 60)
        return f"{minutes} min {rest} s" if rest else f"{minutes} min"
    hours, minutes = divmod(whole // 60, 60)
    return f"{hours} h {minutes} min" if minutes else f"{hours} h"
