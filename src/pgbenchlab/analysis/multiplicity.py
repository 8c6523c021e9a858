"""Many cells, one answer: p-values adjusted across the comparisons of a campaign.

Each cell's test holds its error rate alone; across 40 cells, about 2 would be called changed
at 95 % when nothing changed. The adjusted p-values below keep the rate across them:

- Holm (the default): the family-wise error rate, the chance of any false call, at most α.
  Sorted p₍₁₎ ≤ … ≤ p₍ₘ₎: adjusted p₍ᵢ₎ = max over j ≤ i of min(1, (m − j + 1)·p₍ⱼ₎).
- Benjamini–Hochberg: the false-discovery rate, the expected share of false calls among the
  calls, at most α; more calls than Holm where many cells changed.
  Adjusted p₍ᵢ₎ = min over j ≥ i of min(1, m·p₍ⱼ₎ / j).

A claim (a change, an equivalence) stands when its adjusted p-value is below α.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum


class Correction(StrEnum):
    HOLM = "holm"
    BH = "bh"

    @property
    def described(self) -> str:
        if self is Correction.HOLM:
            return "Holm (family-wise error rate)"
        return "Benjamini–Hochberg (false-discovery rate)"


DEFAULT_CORRECTION = Correction.HOLM


def adjusted(p_values: Sequence[float], correction: Correction) -> list[float]:
    """The p-values adjusted across the family, in the order given."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    result = [1.0] * m
    if correction is Correction.HOLM:
        running = 0.0
        for rank, i in enumerate(order):
            running = max(running, min(1.0, (m - rank) * p_values[i]))
            result[i] = running
        return result
    running = 1.0
    for rank in range(m - 1, -1, -1):
        i = order[rank]
        running = min(running, min(1.0, m * p_values[i] / (rank + 1)))
        result[i] = running
    return result
