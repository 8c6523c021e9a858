"""What a profile says: the top functions by self and total time per backend type, and what
changed between two runs in CPU time per committed transaction (samples ÷ frequency ÷
transactions), which stays fair when the two runs' throughput differs."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from pgbenchlab.profiles.records import Profile

ALL = "all processes"


@dataclass(frozen=True)
class FunctionTime:
    backend_type: str
    function: str
    self_samples: int
    total_samples: int
    self_share: float  # of the backend type's samples
    total_share: float


@dataclass(frozen=True)
class ProfileDiff:
    function: str
    # CPU µs per transaction in run A, in the function itself (counted profiles: instructions)
    self_a_us: float
    self_b_us: float
    total_a_us: float  # … in the function and what it calls
    total_b_us: float

    @property
    def self_change_us(self) -> float:
        return self.self_b_us - self.self_a_us


def _counts(profile: Profile) -> dict[str, tuple[Counter[str], Counter[str], int]]:
    """Per backend type (and ALL): self counts, total counts, samples."""
    found: dict[str, tuple[Counter[str], Counter[str], int]] = {}
    for frames, count in profile.stacks():
        kind, functions = frames[0], frames[1:] or ["[no stack]"]
        for key in (kind, ALL):
            own, total, n = found.get(key, (Counter(), Counter(), 0))
            own[functions[-1]] += count
            for name in set(functions):
                total[name] += count
            found[key] = (own, total, n + count)
    return found


def backend_samples(profile: Profile) -> dict[str, int]:
    """Samples per backend type, most first."""
    counts = Counter[str]()
    for frames, count in profile.stacks():
        counts[frames[0]] += count
    return dict(counts.most_common())


def top_functions(profile: Profile, limit: int = 15) -> list[FunctionTime]:
    """The functions with the most self time and those with the most total time (up to limit
    of each; self first), over all processes (when there are several backend types) and then
    per backend type, most samples first."""
    found: list[FunctionTime] = []
    counts = _counts(profile)
    kinds = list(backend_samples(profile))
    for kind in [ALL, *kinds] if len(kinds) > 1 else kinds:
        own, total, n = counts[kind]
        names = dict.fromkeys(
            [name for name, _ in own.most_common(limit)]
            + [name for name, _ in total.most_common(limit)]
        )
        rows = [FunctionTime(kind, f, own[f], total[f], own[f] / n, total[f] / n) for f in names]
        found += sorted(rows, key=lambda r: (-r.self_samples, -r.total_samples, r.function))
    return found


def diff(a: Profile, a_transactions: int, b: Profile, b_transactions: int) -> list[ProfileDiff]:
    """Every function's CPU µs per transaction in A and in B (over all processes), the largest
    change in self time first; of two counted profiles, instructions per transaction."""
    own_a, total_a, _ = _counts(a).get(ALL, (Counter(), Counter(), 0))
    own_b, total_b, _ = _counts(b).get(ALL, (Counter(), Counter(), 0))

    if a.counted != b.counted:
        raise ValueError("a counted profile is compared with a counted one only")

    def us(profile: Profile, samples: int, transactions: int) -> float:
        return profile.per_transaction(samples, transactions)

    rows = [
        ProfileDiff(
            name,
            us(a, own_a[name], a_transactions),
            us(b, own_b[name], b_transactions),
            us(a, total_a[name], a_transactions),
            us(b, total_b[name], b_transactions),
        )
        for name in set(total_a) | set(total_b)
    ]
    return sorted(rows, key=lambda r: (-abs(r.self_change_us), r.function))
