"""Exact sums of float columns: now :mod:`frame_metrics.numerics` (this name forwards there).

Kept for :mod:`frame_metrics.families.ranking.weights`, which imports them from here
until it moves; new code imports :mod:`frame_metrics.numerics`.
"""

from __future__ import annotations

from frame_metrics.numerics import NAME, exact_partials, exact_totals, sum_partials

__all__ = ["NAME", "exact_partials", "exact_totals", "sum_partials"]
