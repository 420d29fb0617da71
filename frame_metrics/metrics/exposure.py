"""Exposure and provider fairness (spec section 9.2): one registry entry each.

A browsing model gives the attention ``e(r)`` rank r receives (``exposure=``): ``"log"``
``1/log2(r+1)``, ``"rbp"`` ``p^(r-1)`` (``persistence``, 0.8 when unset), ``"uniform"``
1. An item's exposure is ``E(i) = Σ_u e(rank_u(i))`` over the lists holding i within k.

- ``exposure_gini@k`` (corpus): the Gini coefficient of E over the catalog, as ``gini@k``
  (its ``exposure="uniform"`` case).
- ``exposure_parity@k`` (corpus): ``1 - JS(s, t)``, the Jensen-Shannon distance (log2)
  between the item groups' exposure shares s and a target t (``parity_target``).
- ``list_parity@k``: the same per list, averaged over the users with a grouped item
  within k; the target is the corpus-level one.

The engine (:mod:`frame_metrics.families.exposure`) builds E from integer counts of
users per (item, rank) and group exposure from counts per (group, rank): counts add up
over partitions, and the float sums over ranks, items and groups are taken in a fixed
order, so every value is the same to the bit whatever the row order or the runner.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from frame_metrics.metrics.diversity import ordered_sum
from frame_metrics.metrics.registry import Metric, register
from frame_metrics.options import RBP_PERSISTENCE, MetricOptions

__all__ = [
    "EXPOSURE",
    "GROUP",
    "SHARE",
    "TARGET",
    "ExposureContext",
    "attention",
    "js_distance",
    "reference_shares",
]

#: An item's exposure E(i) (gini rows), or a group's exposure (parity rows).
EXPOSURE = "_fm_xp_exposure"
#: The item group of a parity row.
GROUP = "_fm_xp_group"
#: A group's share of exposure, and its target share (parity rows; null: undefined).
SHARE = "_fm_xp_share"
TARGET = "_fm_xp_target"
#: The catalog size, on every gini row of its group.
N_CATALOG = "_fm_xp_catalog_size"


def attention(options: MetricOptions, rank: int) -> float:
    """``e(r)``, the attention rank ``rank`` receives under ``options.exposure``.

    The engine reads its weights from here too (a table of ranks 1..k), so that the
    pure-Python references and the engine multiply the same floats.

    Examples
    --------
    >>> attention(MetricOptions(), 3)
    0.5
    >>> attention(MetricOptions(exposure="rbp"), 3)  # 0.8 ** 2
    0.6400000000000001
    >>> attention(MetricOptions(exposure="uniform"), 7)
    1.0
    """
    if options.exposure == "log":
        return 1.0 / math.log2(rank + 1)
    if options.exposure == "rbp":
        return float(options.persistence_or(RBP_PERSISTENCE) ** (rank - 1))
    return 1.0


@dataclass(frozen=True)
class ExposureContext:
    """The rows a metric reads: of a ``by`` group, or of one user's groups.

    exposure_gini: one per exposed item; exposure_parity: one per item group;
    list_parity: one per item group of the user's ``by`` group.
    """

    def exposure(self) -> pl.Expr:
        """E(i) of an item row (the gini rows)."""
        return pl.col(EXPOSURE)

    def catalog_size(self) -> pl.Expr:
        """``n``: the catalog's items."""
        return pl.col(N_CATALOG).first().cast(pl.Int64)

    def share(self) -> pl.Expr:
        """A group's share of exposure, the rows sorted by group."""
        return pl.col(SHARE).sort_by(pl.col(GROUP))

    def target(self) -> pl.Expr:
        """A group's target share, the rows sorted by group."""
        return pl.col(TARGET).sort_by(pl.col(GROUP))


def _exposure_gini(ctx: ExposureContext, k: int) -> pl.Expr:
    # gini@k's formula over E: Σ_j (2j - n - 1) E_(j) / (n Σ E), E ascending over the n
    # catalog items; unexposed items sort first and add 0, so only the m exposed ones
    # are summed, at positions n - m + 1 .. n. Sums in ascending order of E: the sorted
    # values are the same whatever the row order, and so are their sums.
    e = ctx.exposure().cast(pl.Float64)
    exposed = e.filter(e > 0).sort()
    m = exposed.len().cast(pl.Int64)
    n = ctx.catalog_size()
    position = n - m + exposed.cum_count().cast(pl.Int64)
    weighted = ordered_sum((2 * position - n - 1).cast(pl.Float64) * exposed)
    total = ordered_sum(exposed)
    return pl.when(total > 0).then(weighted / (n.cast(pl.Float64) * total)).otherwise(None)


def _ref_exposure_gini(
    lists: Mapping[Hashable, Sequence[Hashable]], k: int, n: int, options: MetricOptions
) -> float | None:
    exposure: dict[Hashable, float] = {}
    for items in lists.values():
        for r, i in enumerate(items[:k], start=1):
            exposure[i] = exposure.get(i, 0.0) + attention(options, r)
    e = sorted([0.0] * (n - len(exposure)) + list(exposure.values()))
    total = sum(e)
    if not total > 0:
        return None
    return sum((2 * j - n - 1) * x for j, x in enumerate(e, start=1)) / (n * total)


def js_distance(s: Sequence[float], t: Sequence[float]) -> float:
    """The Jensen-Shannon distance (log2) of two distributions over the same groups.

    Examples
    --------
    >>> js_distance([1.0, 0.0], [0.0, 1.0]), js_distance([0.5, 0.5], [0.5, 0.5])
    (1.0, 0.0)
    """
    jsd = 0.0
    for a, b in zip(s, t, strict=True):
        m = (a + b) / 2
        if a > 0:
            jsd += 0.5 * a * math.log2(a / m)
        if b > 0:
            jsd += 0.5 * b * math.log2(b / m)
    return math.sqrt(max(jsd, 0.0))


def _parity(ctx: ExposureContext, k: int) -> pl.Expr:
    # 1 - √JSD(s, t), log2: the terms of the groups in group order, summed in that order.
    # A group's term ½[s·log2(2s/(s+t)) + t·log2(2t/(s+t))] is written with log1p of
    # d = (s - t)/(s + t): for s ≈ t the two halves cancel to O(d²) without leaving a
    # rounding error of O(ε), whose square root would show as 1 - 1e-8 for equal shares.
    s, t = ctx.share(), ctx.target()
    d = (s - t) / (s + t)
    both = 0.5 * (s * d.log1p() + t * (-d).log1p()) / math.log(2)
    terms = pl.when((s > 0) & (t > 0)).then(both).otherwise(0.5 * (s + t))
    jsd = ordered_sum(terms)
    defined = s.is_not_null().all() & t.is_not_null().all() & (s.len() > 0)
    return pl.when(defined).then(1.0 - jsd.clip(0.0, None).sqrt()).otherwise(None)


def reference_shares(values: Mapping[Hashable, float]) -> dict[Hashable, float] | None:
    """Each group's value over the sum of the groups' (None when the sum is 0)."""
    total = sum(values.values())
    if not total > 0:
        return None
    return {g: v / total for g, v in values.items()}


def _ref_parity(
    exposure: Mapping[Hashable, float], target: Mapping[Hashable, float]
) -> float | None:
    """``1 - JS(s, t)`` from each group's exposure and target weight (same groups)."""
    s, t = reference_shares(exposure), reference_shares(target)
    if s is None or t is None:
        return None
    groups = sorted(target, key=lambda g: (type(g).__name__, g))
    return 1.0 - js_distance([s[g] for g in groups], [t[g] for g in groups])


_NOTES_PARITY = (
    "TREC Fair Ranking 2022's AWRF is in the same spirit and differs: 1 - the JS "
    "divergence in nats (not the distance in bits), discount 1/log2(max(r, 2)), relevant "
    "items only; no option reproduces it. Elliot's popularity-group metrics and "
    "RecBole-FairRec compare groups otherwise."
)

# persistence is the call's (a metric string may not set it: its row of the option
# table lists rbp alone).
_EXPOSURE_OPTIONS = frozenset({"exposure", "persistence"})


def _reference(*args: Any) -> Any:
    """Group-level references take the groups' weights: :func:`_ref_parity`."""
    return _ref_parity(*args)


register(
    Metric(
        "exposure_gini",
        _exposure_gini,
        _ref_exposure_gini,
        "Gini index of item exposure E(i) = Σ_u e(rank_u(i)) over the catalog: "
        "Σ_j (2j - n - 1) E_(j) / (n Σ E), E sorted ascending",
        higher_is_better=False,
        needs=frozenset({"catalog_size"}),
        notes="LensKit ExposureGini: the same Gini of item exposure with geometric weights "
        "of patience 0.85, i.e. exposure='rbp' with persistence=0.85, over items= catalog "
        "items (catalog= here); LensKit 2025.8 sums exposure in float32, so it agrees to "
        "about 1e-7, not to the bit (tests/test_exposure_peers.py). With "
        "exposure='uniform' it is gini@k exactly.",
        family="exposure",
        population="corpus",
        options=_EXPOSURE_OPTIONS,
    )
)
register(
    Metric(
        "exposure_parity",
        _parity,
        _reference,
        "1 - JS(s, t): Jensen-Shannon distance (log2) between the item groups' shares s of "
        "exposure within k and the target shares t (parity_target)",
        needs=frozenset(),
        notes=_NOTES_PARITY,
        family="exposure",
        population="corpus",
        options=_EXPOSURE_OPTIONS | {"parity_target", "threshold"},
    )
)
register(
    Metric(
        "list_parity",
        _parity,
        _reference,
        "1 - JS(s_u, t): exposure_parity of one list L[:k], the target the corpus-level one",
        needs=frozenset(),
        notes=_NOTES_PARITY,
        family="exposure",
        population="listed",
        options=_EXPOSURE_OPTIONS | {"parity_target", "threshold"},
    )
)
