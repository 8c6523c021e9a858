"""Which commits of a branch's first-parent line a follow measures: a window (since a date, or
a range of refs, both ends included) thinned to every N-th commit or one a day, in the order
the user asked. Every N-th counts from the line's root, so the commits chosen stay the same as
the branch grows: a nightly call measures what is new, never a shifted set."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime

from pgbenchlab.builds.history import BranchCommit
from pgbenchlab.errors import UserError

ORDERS = ("newest", "oldest")


@dataclass(frozen=True)
class Selection:
    every: int | None = None
    daily: bool = False
    since: date | None = None
    range: tuple[str, str] | None = None  # hashes: from and to, both included
    order: str = "newest"

    def __post_init__(self) -> None:
        if self.every is not None and self.every < 1:
            raise UserError("--every must be a whole number of commits, 1 or more")
        if self.every is not None and self.daily:
            raise UserError("give --every or --daily, not both")
        if self.since is not None and self.range is not None:
            raise UserError("give --since or --range, not both")
        if self.order not in ORDERS:
            raise UserError(f"--order must be one of {', '.join(ORDERS)}")


def parse_since(text: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise UserError(f'--since must be a date such as 2026-01-01; got "{text}"') from None


def day_of(commit: BranchCommit) -> date:
    """The commit's author date as a day in UTC."""
    return datetime.fromisoformat(commit.commit.author_date).astimezone(UTC).date()


def select(line: Sequence[BranchCommit], selection: Selection) -> list[BranchCommit]:
    """The commits to measure, in the order asked."""
    window = list(line)
    if selection.range is not None:
        first, last = selection.range
        positions = {c.commit.hash: c.position for c in line}
        low, high = positions[first], positions[last]
        if low > high:
            raise UserError("--range A..B: A must come before B on the branch")
        window = [c for c in line if low <= c.position <= high]
    elif selection.since is not None:
        since = selection.since
        window = [c for c in line if day_of(c) >= since]
    if selection.every is not None:
        every = selection.every
        window = [c for c in window if c.position % every == 0]
    elif selection.daily:
        last_of_day = {day_of(c): c for c in window}  # the line is oldest first
        window = sorted(last_of_day.values(), key=lambda c: c.position)
    return window[::-1] if selection.order == "newest" else window
