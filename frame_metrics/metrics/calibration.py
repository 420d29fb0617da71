"""Calibration (spec section 9.1): whether a list reflects the mix of a user's interests.

Steck's miscalibration ("Calibrated Recommendations", RecSys 2018) compares two
category distributions of one user: ``p(g|u)`` over the user's train history and
``q(g|u)`` over the list's top k, each a weighted mean of the items' own distributions
``p(g|i) = w(i, g) / Σ_g w(i, g)`` (from ``item_features=``). The engine builds one row
per (user, category) with ``p``, the numerators of ``q`` and the user's denominators
(:mod:`frame_metrics.families.calibration`); the builder here reads them through a
:class:`CalibrationContext`, inside a ``group_by(user).agg``, and sums over the
categories in fixed point (:func:`fixed_sum`), so the value does not depend on the
order rows arrived in.

The scale: 0 bits is a perfectly calibrated list, log2(1/α) (6.64 bits at α = 0.01) the
most a list can score, the value of a list without any categorised item; the
Jensen-Shannon variant (``divergence="js"``) lies in [0, 1].
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from dataclasses import dataclass

import polars as pl

from frame_metrics.metrics.registry import Metric, register
from frame_metrics.options import CalibrationWeight, MetricOptions

__all__ = [
    "CATEGORY",
    "FIRST_RANK",
    "FIXED_BITS",
    "HISTORY_SHARE",
    "CalibrationCase",
    "CalibrationContext",
    "divergence_term",
    "divided",
    "fixed_sum",
    "fixed_units",
    "history_share",
    "list_denominator",
    "list_numerator",
    "list_share",
    "rank_weight",
    "ref_rank_weight",
]

#: A category, as text (categorical and integer categories are cast, so that the sum
#: over categories runs in one order whatever the input's dictionary).
CATEGORY = "_fm_category"
#: ``p(g|u)``: the category's share of the user's history (null: not in the history).
HISTORY_SHARE = "_fm_history_share"


def list_numerator(weight: str, k: int) -> str:
    """The column of ``Σ_{r<=k} w_r p(g|L[r])`` for one category (rank weight ``weight``)."""
    return f"_fm_qnum_{weight}@{k}"


def list_denominator(weight: str, k: int) -> str:
    """The column of ``Σ_{r<=k} w_r`` over the user's categorised items within k."""
    return f"_fm_qden_{weight}@{k}"


#: The best rank of the user's list, categorised item or not: the user has a list
#: within k when it is <= k.
FIRST_RANK = "_fm_cal_first_rank"


def rank_weight(rank: pl.Expr, weight: CalibrationWeight) -> pl.Expr:
    """``w_r`` of ``calibration_weight``: 1, 1/r or 1/log2(r + 1), as Float64."""
    r = rank.cast(pl.Float64)
    if weight == "reciprocal":
        return pl.lit(1.0) / r
    if weight == "log":
        return pl.lit(1.0) / (r + 1.0).log(2)
    return r * 0.0 + 1.0


def ref_rank_weight(rank: int, weight: str) -> float:
    """The pure-Python twin of :func:`rank_weight`."""
    if weight == "reciprocal":
        return 1.0 / rank
    if weight == "log":
        return 1.0 / math.log2(rank + 1)
    return 1.0


#: The fixed point of calibration's sums: values are rounded to multiples of 2^-62 and
#: summed as Int128, which is exact in any order (no sort) and, for the values summed
#: here (shares and weights in [0, 1], divergence terms below 2^10 in magnitude), holds
#: every bit a float of magnitude 2^-9 or more has.
FIXED_BITS = 62


def fixed_units(values: pl.Expr) -> pl.Expr:
    """``values`` (in [0, 1]) in fixed point: Int128 multiples of 2^-:data:`FIXED_BITS`."""
    return (values * 2.0**FIXED_BITS).round().cast(pl.Int128, strict=False)


def fixed_sum(values: pl.Expr) -> pl.Expr:
    """Σ ``values`` as an exact Int128 sum in fixed point (see :data:`FIXED_BITS`), as Float64.

    The same bits whatever the order of the rows: a float sum would need a sort first,
    which inside ``group_by().agg`` over millions of small groups costs 3x the sum.
    """
    # Dividing by a power of two is exact, whichever way polars divides.
    return fixed_units(values).sum().cast(pl.Float64) / 2.0**FIXED_BITS


def history_share(category: str = "") -> pl.Expr:
    """``p(g|u)`` per (user, category) row (0 for a category outside the history).

    ``category``: the suffix of the category's own column, when the rows are one per
    user with a column per category (see :class:`CalibrationContext`).
    """
    return pl.col(HISTORY_SHARE + category).fill_null(0.0)


def list_share(weight: CalibrationWeight, k: int, category: str = "") -> pl.Expr:
    """``q(g|u)`` per row: 0 everywhere for a list without a categorised item within k."""
    num = pl.col(list_numerator(weight, k) + category).fill_null(0.0)
    den = pl.col(list_denominator(weight, k)).fill_null(0.0)
    return pl.when(den > 0).then(divided(num, den)).otherwise(0.0)


def divided(num: pl.Expr, den: pl.Expr) -> pl.Expr:
    """``num / den``, an IEEE division on every row.

    polars divides a column by a one-row one as a multiplication by its reciprocal
    (``u / u`` can give 0.9999999999999999), and whether ``den`` reaches the kernel as
    one row depends on the rest of the query: a metric's bits changed with the other
    metrics of the call. ``den`` as a column as long as ``num`` rules that out.
    """
    return num / (num * 0.0 + den)


def divergence_term(options: MetricOptions, k: int, category: str = "") -> pl.Expr:
    """One category's term of the divergence, per (user, category) row.

    With ``category``, the term of that category's columns (``HISTORY_SHARE`` and the
    list numerator with the suffix) on rows of one user each.

    KL: ``p·log2(p / ((1-α)·q + α·p))`` where p > 0, exactly 0 where q = p (the smoothed
    q is then p itself, which ``(1-α)·p + α·p`` can miss by a last bit); JS:
    ``½·p·log2(p/m) + ½·q·log2(q/m)``, m = (p + q)/2. Computed on the rows before grouping (``with_columns``), where every
    operation is elementwise: inside a ``group_by().agg`` polars may divide a group by a
    value it holds constant as a multiplication by its reciprocal, which moves a last
    bit depending on the query around it.
    """
    p = history_share(category)
    q = list_share(options.calibration_weight, k, category)
    if options.divergence == "kl":
        alpha = options.calibration_alpha
        smoothed = q * (1.0 - alpha) + p * alpha
        term = pl.when(p == q).then(0.0).otherwise(p * divided(p, smoothed).log(2))
        return pl.when(p > 0).then(term).otherwise(0.0)
    m = (p + q) * 0.5
    half_p = pl.when(p > 0).then(p * divided(p, m).log(2)).otherwise(0.0)
    half_q = pl.when(q > 0).then(q * divided(q, m).log(2)).otherwise(0.0)
    return (half_p + half_q) * 0.5


@dataclass(frozen=True)
class CalibrationContext:
    """One user's (user, category) rows, read inside ``group_by(user).agg``; or one row.

    ``term``: the column of the metric's :func:`divergence_term` per row; the rows also
    hold, repeated on every row of the user, the list denominators and ``FIRST_RANK``.
    ``options``: the metric's own. ``terms``, when given: the rows are one per user, read
    elementwise (``select``), with the term of each category in its own column, these.
    """

    options: MetricOptions
    term: str
    terms: tuple[str, ...] = ()

    def _first(self, column: str) -> pl.Expr:
        return pl.col(column) if self.terms else pl.col(column).first()

    def divergence_sum(self) -> pl.Expr:
        """Σ of the terms over the user's categories (exact, in fixed point)."""
        if not self.terms:
            return fixed_sum(pl.col(self.term))
        # The same Int128 sum as fixed_sum's over the rows (nulls left out by both).
        units = pl.sum_horizontal(fixed_units(pl.col(t)) for t in self.terms)
        return units.cast(pl.Float64) / 2.0**FIXED_BITS

    def listed(self, k: int) -> pl.Expr:
        """Whether the list has an item within k (else the user is outside the population)."""
        return (self._first(FIRST_RANK) <= k).fill_null(False)

    def categorised(self, k: int) -> pl.Expr:
        """Whether the list has a categorised item within k."""
        den = self._first(list_denominator(self.options.calibration_weight, k))
        return den.fill_null(0.0) > 0


def _miscalibration(ctx: CalibrationContext, k: int) -> pl.Expr:
    total = ctx.divergence_sum()
    if ctx.options.divergence == "kl":
        worst = math.log2(1.0 / ctx.options.calibration_alpha)
        # A list without a categorised item (q = 0) scores the bound itself, log2(1/α),
        # not Σ p·log2(1/α), whose Σ p may round a last bit away from 1.
        value = pl.when(ctx.categorised(k)).then(total.clip(0.0, worst)).otherwise(worst)
    else:
        value = pl.when(pl.lit(True)).then(total.clip(0.0, 1.0).sqrt())
    return pl.when(ctx.listed(k)).then(value)


@dataclass(frozen=True)
class CalibrationCase:
    """One user's data in plain Python, for the reference.

    ``ranks`` maps the recommended items to their ranks; ``history`` the user's
    distinct train items to their weights w_ui (1 without ``history_weight``);
    ``categories`` each item to its category weights w(i, g) (an item absent has none).
    """

    ranks: Mapping[Hashable, int]
    history: Mapping[Hashable, float]
    categories: Mapping[Hashable, Mapping[Hashable, float]]

    def item_shares(self, item: Hashable) -> dict[Hashable, float] | None:
        """``p(g|i)``; None for an uncategorised item (no category, or weights summing to 0)."""
        weights = self.categories.get(item, {})
        total = math.fsum(weights.values())
        if total <= 0:
            return None
        return {g: w / total for g, w in weights.items()}

    def history_shares(self) -> dict[Hashable, float] | None:
        """``p(g|u)``; None when no categorised history item has a weight above 0."""
        shares = {i: s for i in self.history if (s := self.item_shares(i)) is not None}
        total = math.fsum(self.history[i] for i in shares)
        if total <= 0:
            return None
        out: dict[Hashable, float] = {}
        for i, s in shares.items():
            for g, share in s.items():
                out[g] = out.get(g, 0.0) + self.history[i] * share
        return {g: v / total for g, v in out.items()}

    def list_shares(self, k: int, weight: str) -> dict[Hashable, float]:
        """``q(g|u)``; empty for a list without a categorised item within k."""
        top = [(i, r) for i, r in self.ranks.items() if r <= k]
        shares = [(s, ref_rank_weight(r, weight)) for i, r in top if (s := self.item_shares(i))]
        total = math.fsum(w for _, w in shares)
        out: dict[Hashable, float] = {}
        for s, w in shares:
            for g, share in s.items():
                out[g] = out.get(g, 0.0) + w * share
        return {g: v / total for g, v in out.items()} if total > 0 else {}


def _ref_miscalibration(u: CalibrationCase, k: int, o: MetricOptions) -> float | None:
    p = u.history_shares()
    if p is None or not any(r <= k for r in u.ranks.values()):
        return None  # outside the population
    q = u.list_shares(k, o.calibration_weight)
    if o.divergence == "kl":
        a = o.calibration_alpha
        if not q:
            return math.log2(1 / a)
        return math.fsum(
            pg * math.log2(pg / ((1 - a) * q.get(g, 0.0) + a * pg))
            for g, pg in p.items()
            if pg > 0 and pg != q.get(g, 0.0)
        )
    jsd = 0.0
    for g in set(p) | set(q):
        pg, qg = p.get(g, 0.0), q.get(g, 0.0)
        m = (pg + qg) / 2
        jsd += 0.5 * (pg * math.log2(pg / m) if pg > 0 else 0.0)
        jsd += 0.5 * (qg * math.log2(qg / m) if qg > 0 else 0.0)
    return math.sqrt(max(jsd, 0.0))


register(
    Metric(
        "miscalibration",
        _miscalibration,
        _ref_miscalibration,
        "Σ_{g: p(g|u)>0} p(g|u)·log2(p(g|u) / ((1-α)·q(g|u) + α·p(g|u))): p the category "
        "distribution of the user's train history, q of L[:k] (rank weights w_r); "
        "divergence='js': sqrt(JSD(p, q)), log2, unsmoothed",
        higher_is_better=False,
        bounds=(0.0, None),
        needs=frozenset({"train", "item_features"}),
        family="calibration",
        population="history",
        options=frozenset({"calibration_alpha", "calibration_weight", "divergence"}),
        scale="In bits. 0: the list's category mix is the history's (perfectly calibrated). "
        "Each history category the list misses costs p(g|u)·log2(1/α), and no term costs "
        "more, so the value is at most log2(1/α), 6.64 bits at the default α = 0.01, which a "
        "list "
        "without any categorised item within k scores (q = 0). divergence='js': the "
        "Jensen-Shannon distance, in [0, 1]: 0 for equal mixes, 1 for a list whose "
        "categories are all outside the history; a list without any categorised item "
        "scores √(1/2) ≈ 0.707.",
        notes="The reference notebook of ethen8181/machine-learning (recsys/calibration): the "
        "same KL (log2, alpha = 0.01, uniform weights, 1/|G(i)| per item), but it rounds each "
        "share to three decimals first. LibRec's MiscalibrationEvaluator reverses the "
        "direction and compares the list with the test set, not the history. RADio smooths "
        "both sides with alpha = 0.001. None is the default here.",
    )
)
