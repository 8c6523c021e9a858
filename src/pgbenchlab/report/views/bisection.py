"""A stored bisection as its page shows it: the commits tested along the range, each with its
figure relative to the good end (measured in the same rounds), what it was like, and the
answer."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pgbenchlab.store import BisectionRecord, Store


@dataclass(frozen=True)
class BisectPoint:
    position: int  # along the first-parent range: 0 the good end
    commit: str
    subject: str
    outcome: str  # like good | like bad | neither | skipped | the ends
    relative_to_good: float | None  # figure / good's figure - 1, same rounds; None: skipped
    detail: str


@dataclass(frozen=True)
class BisectionView:
    name: str
    status: str
    metric: str
    threshold: float
    good: str
    bad: str
    source: str
    commits: int
    points: tuple[BisectPoint, ...]  # the ends first, then the steps in the order made
    first_bad: BisectPoint | None
    change: str | None  # the first bad commit against its parent
    unsplit: tuple[str, ...]  # commits the search could not split (skipped ones)
    stopped: str | None  # why the search stopped before its answer, and what is left
    refused: str | None = None  # why the range could not be searched (a followed change's)

    @property
    def tested(self) -> int:
        return sum(p.outcome not in ("good end", "bad end") for p in self.points)


def load_bisections(store: Store) -> tuple[BisectionView, ...]:
    return tuple(
        bisection_view(found)
        for name in store.bisection_names()
        if (found := store.bisection(name))
    )


def bisection_view(record: BisectionRecord) -> BisectionView:
    commits = record.commits
    ends = next((s for s in record.steps if s.get("step") == "ends"), None)
    points = []
    if ends is not None:
        for position, outcome, relative in (
            (0, "good end", 0.0), (len(commits) - 1, "bad end", ends.get("relative_to_good")),
        ):  # fmt: skip
            points.append(_point(commits[position], position, outcome, relative, ends["detail"]))
    for step in record.steps:
        if step.get("index") is not None:
            position = int(step["index"])
            points.append(
                _point(commits[position], position, step["outcome"],
                       step.get("relative_to_good"), step["detail"])
            )  # fmt: skip
    answer = record.answer or {}
    first = answer.get("first_bad")
    first_point = next((p for p in points if first and p.commit == first["hash"]), None)
    change = (answer.get("change") or {}).get("reason")
    request = record.request
    return BisectionView(
        name=record.name, status=record.status, metric=str(request.get("metric")),
        threshold=float(request.get("threshold", 0)), good=str(request.get("good")),
        bad=str(request.get("bad")), source=str(request.get("source")), commits=len(commits),
        points=tuple(points), first_bad=first_point, change=change,
        unsplit=tuple(answer.get("unsplit", ())),
        stopped=stopped_text(answer["stopped"]) if answer.get("stopped") else None,
        refused=answer.get("refused"),
    )  # fmt: skip


def stopped_text(stopped: Mapping[str, Any]) -> str:
    """A search the budget stopped: where, and how many commits the range still holds."""
    where = ""
    if "step" in stopped:
        where = f" during step {stopped['step']} after {stopped['rounds']} complete round(s)"
    return (
        f"stopped: the budget is spent{where}; {stopped['inside']} commit(s) between the "
        "range's ends remain to search (run again with a larger --budget, or none, to continue)"
    )


def _point(
    commit: object, position: int, outcome: str, relative: object, detail: str
) -> BisectPoint:
    assert isinstance(commit, dict)
    return BisectPoint(
        position, str(commit["hash"]), str(commit["subject"]), outcome,
        None if relative is None else float(relative),  # type: ignore[arg-type]
        detail,
    )  # fmt: skip
