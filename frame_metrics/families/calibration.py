"""Calibration (spec section 9.1): whether a list reflects the mix of a user's interests.

Steck's miscalibration ("Calibrated Recommendations", RecSys 2018) compares two
category distributions of one user: ``p(g|u)`` over the user's train history and
``q(g|u)`` over the list's top k, each a weighted mean of the items' own distributions
``p(g|i) = w(i, g) / Σ_g w(i, g)`` (from ``item_features=``). The engine builds one row
per (user, category) with ``p``, the numerators of ``q`` and the user's denominators
(:class:`CalibrationFamily`); the builder here reads them through a
:class:`CalibrationContext`, inside a ``group_by(user).agg``, and sums over the
categories in fixed point (:func:`fixed_sum`), so the value does not depend on the
order rows arrived in.

The scale: 0 bits is a perfectly calibrated list, log2(1/α) (6.64 bits at α = 0.01) the
most a list can score, the value of a list without any categorised item; the
Jensen-Shannon variant (``divergence="js"``) lies in [0, 1].

The calibration family: one user's history and list as category distributions.

Per user, ``p(g|u)`` from the user's distinct train items and ``q(g|u)`` from the top k
(spec section 9.1), both from the items' category distributions of ``item_features=``
(:func:`category_table`). The query builds one row per (user, category) with ``p`` and
the numerators of ``q`` for every cutoff and rank weighting asked for, and the user's
denominators; the entries' builders sum over the categories. Every sum over items or categories is exact, so a user's value is the same
bits whatever the order of the rows, the frame kind or the partition the user lands in
(train is split by user with recs, the item table is whole in every partition).

The sums of ``p(g|i)`` are exact in one of two ways, chosen from the item table:

- **integer units** when every category weight is a whole number (always so for list
  columns, w = 1) and the least common multiple L of the items' totals Σ_g w(i, g) is at
  most :data:`EXACT_MAX_SCALE`: ``p(g|i) = u(i, g) / L`` with the integer
  ``u = w(i, g)·(L / Σ_g w(i, g))``, summed as Int64. ``p(g|u)`` and, for uniform rank
  weights, ``q(g|u)`` are then ratios of exact integers, one correctly rounded
  division each: equal distributions have equal bits, and a perfectly calibrated
  list scores exactly 0. Int64 sums also run ~1.5x faster than Int128 ones.
- **fixed point** otherwise (fractional weights, ``history_weight=``, reciprocal or log
  rank weights): values rounded to multiples of 2^-62 and summed as Int128
  (:func:`fixed_units`).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Hashable, Mapping
from dataclasses import dataclass
from typing import ClassVar

import polars as pl

from frame_metrics.errors import InvalidOptionError, InvalidValueError
from frame_metrics.extras import ExtraFrame, require_columns
from frame_metrics.family import Context, DiagnosticCount, Family
from frame_metrics.inputs import Inputs
from frame_metrics.metrics.registry import Metric, Requested, register
from frame_metrics.options import CalibrationWeight, MetricOptions
from frame_metrics.prepare import RANK
from frame_metrics.spec import Spec
from frame_metrics.validation import Check, CheckedFrame, duplicate_check, null_checks, row_check

__all__ = [
    "CATEGORY",
    "DENSE_MAX_CATEGORIES",
    "FAMILY",
    "FIRST_RANK",
    "FIXED_BITS",
    "HISTORY_SHARE",
    "ITEM_SHARE",
    "CalibrationCase",
    "CalibrationContext",
    "CalibrationFamily",
    "category_table",
    "divergence_term",
    "divided",
    "fixed_sum",
    "fixed_units",
    "history_share",
    "history_table",
    "left_out",
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


# --------------------------------------------------------------------------- the family


#: ``p(g|i)``: the category's share of the item.
ITEM_SHARE = "_fm_item_share"
#: w(i, g) and Σ_g w(i, g), as the item table gives them (floats).
_FEATURE_W = "_fm_feature_w"
_FEATURE_TOTAL = "_fm_feature_total"
#: ``p(g|i)`` in the units every sum over items adds: integers of scale L, or fixed point.
_UNITS = "_fm_item_units"
#: ``w_ui``: the weight of a history item (1 without ``history_weight``).
_WEIGHT = "_fm_history_weight"
#: The user's largest weight (``history_weight``), per history list.
_LARGEST = "_fm_history_largest"
#: An integer code per user of the lists; (user, category) as one integer.
_UID = "_fm_cal_user"
_KEY = "_fm_cal_key"
#: The history's fixed-point units of p per row, and their sum per user.
_P = "_fm_p"
_PDEN = "_fm_pden"

#: The most distinct categories of the item table for which a user's sums are one row
#: with a column per category (:func:`_dense_values`) rather than rows per (user,
#: category), grouped by a hash of 10-20x more keys. The same bits either way.
DENSE_MAX_CATEGORIES = 64

#: The largest scale L of integer units: a unit is at most L = 2^24, so a user's Int64
#: sum is exact for up to 2^39 rows (and its Float64 cast for 2^29).
EXACT_MAX_SCALE = 2**24
#: The most distinct item totals whose least common multiple is tried as L.
_EXACT_MAX_TOTALS = 256


def _bad_weights(column: str) -> pl.Expr:
    """Rows whose weight is no finite number >= 0 (null, NaN, ±inf, negative)."""
    w = pl.col(column).cast(pl.Float64)
    return w.is_null() | ~w.is_finite().fill_null(False) | (w < 0).fill_null(False)


def _weight_check(column: str, frame: str) -> Check:
    bad = _bad_weights(column)
    return row_check(
        bad,
        InvalidValueError,
        f"expected a finite number >= 0 in weight column {column!r} of {frame}, found {{n}} "
        "row(s) without one (null, NaN, infinite or negative), e.g. {example}",
    )


def _numeric_weight(extra: ExtraFrame, column: str, option: str) -> None:
    dtype = extra.frame.collect_schema()[column]
    if not dtype.is_numeric():
        raise InvalidValueError(
            f"{extra.label}: expected column {column!r} ({option}) to hold numbers, "
            f"found dtype {dtype}",
            frame=extra.label,
            columns=[column],
        )


def _coded(table: pl.LazyFrame) -> pl.LazyFrame:
    """The categories as integer codes: the (user, category) groups hash 2x faster.

    Any code would do (every sum over categories is order-free); a dense rank over the
    item table, which every partition holds whole, is also the same everywhere.
    """
    return table.with_columns(pl.col(CATEGORY).rank("dense").cast(pl.UInt32))


def category_table(
    features: ExtraFrame, item: str, column: str, weight: str | None
) -> tuple[pl.LazyFrame, list[CheckedFrame]]:
    """Per (by the frame carries, item, ``CATEGORY``): ``ITEM_SHARE`` = w(i,g) / Σ_g w(i,g).

    ``column`` holds either a list of categories per item (w = 1 for each distinct
    category listed: a list is a set, as diversity's Jaccard reads it) or one category
    per row (the long form, one row per (item, category), with the weights in
    ``weight`` or 1). Categories are compared as text. An item whose weights add up to
    0, whose list is empty, or that has no row is uncategorised: it has no row here.
    Refused, by the checks returned: a null key, category or list, a repeated item (list
    form) or (item, category) (long form), a weight that is not a finite number >= 0.
    """
    keys = [*features.by, item]
    schema = require_columns(
        features, [*keys, column, *([weight] if weight else [])], (column, "features")
    )
    dtype = schema[column]
    frame = features.frame
    if isinstance(dtype, (pl.List, pl.Array)):
        if weight is not None:
            raise InvalidOptionError(
                f"expected None with the list column {column!r} of item_features (w = 1 "
                f"per listed category; a weight needs the long form, one row per (item, "
                f"category)), got {weight!r}",
                option="feature_weight",
            )
        values = pl.col(column).cast(pl.List(pl.String))
        null_inside = values.list.eval(pl.element().is_null()).list.any().fill_null(False)
        checks = [
            *null_checks([*keys, column], "key or features"),
            row_check(
                null_inside,
                InvalidValueError,
                f"expected no null category in the lists of column {column!r}, found {{n}} "
                "list(s) holding one, e.g. {example}",
            ),
            duplicate_check(keys, "item"),
        ]
        rows = (
            frame.select(*keys, values.list.unique().alias(CATEGORY))
            .explode(CATEGORY)
            .drop_nulls(CATEGORY)
        )
        counted = pl.len().over(keys).cast(pl.Float64)
        table = rows.select(
            *keys,
            CATEGORY,
            (pl.lit(1.0) / counted).alias(ITEM_SHARE),
            pl.lit(1.0).alias(_FEATURE_W),
            counted.alias(_FEATURE_TOTAL),
        )
        return _coded(table), [CheckedFrame("item_features", frame, checks, [*keys, column])]
    if dtype.is_float() or dtype.is_nested() or dtype == pl.Boolean:
        raise InvalidValueError(
            f"item_features: expected column {column!r} to hold a list of categories per "
            "item, or one category per row (text, categorical or integer), found dtype "
            f"{dtype}",
            frame="item_features",
            columns=[column],
        )
    long_checks = [
        *null_checks([*keys, column], "key or category"),
        duplicate_check([*keys, column], "(item, category)"),
    ]
    w: pl.Expr = pl.lit(1.0)
    if weight is not None:
        _numeric_weight(features, weight, "feature_weight")
        long_checks.append(_weight_check(weight, "item_features"))
        w = pl.col(weight).cast(pl.Float64)
    rows = frame.select(*keys, pl.col(column).cast(pl.String).alias(CATEGORY), w.alias("_fm_w"))
    # Σ_g w(i, g) in category order: the same bits whatever the row order.
    total = pl.col("_fm_w").sort_by(CATEGORY).cum_sum().last()
    table = (
        rows.filter(pl.col(CATEGORY).is_not_null())
        .with_columns(total.over(keys).alias(_FEATURE_TOTAL))
        .filter(pl.col(_FEATURE_TOTAL) > 0)
        .select(
            *keys,
            CATEGORY,
            (pl.col("_fm_w") / pl.col(_FEATURE_TOTAL)).alias(ITEM_SHARE),
            pl.col("_fm_w").alias(_FEATURE_W),
            _FEATURE_TOTAL,
        )
    )
    show = [*keys, column, *([weight] if weight else [])]
    return _coded(table), [CheckedFrame("item_features", frame, long_checks, show)]


def history_table(
    train: ExtraFrame, user: list[str], item: str, weight: str | None
) -> tuple[pl.LazyFrame, list[CheckedFrame]]:
    """The distinct (by train carries, user, item) of train with ``_WEIGHT`` (w_ui).

    With ``weight``, a (user, item) pair may have one row only, whose weight counts: a
    repeated pair is an error (which of its weights counts would be a guess).
    """
    keys = [*train.by, *user, item]
    if weight is None:
        return train.frame.select(keys).unique().with_columns(pl.lit(1.0).alias(_WEIGHT)), []
    require_columns(train, [weight])
    _numeric_weight(train, weight, "history_weight")
    checks = [
        _weight_check(weight, "train"),
        duplicate_check(
            keys,
            f"(user, item) pair when history_weight={weight!r} is given",
            ("; combine each pair's weights into one row first",),
        ),
    ]
    frame = train.frame.select(*keys, pl.col(weight).cast(pl.Float64).alias(_WEIGHT))
    return frame, [CheckedFrame("train", train.frame, checks, [*keys, weight])]


def _history_lists(
    train: ExtraFrame, user: list[str], item: str, weight: str | None
) -> tuple[pl.LazyFrame, list[CheckedFrame]]:
    """Per (by train carries, user): the list of distinct items (and weights, largest).

    A group_by per user with the items as a set is ~2x faster than ``unique()`` on the
    pairs. With ``weight``, the items are listed as they come (a repeated pair is an
    error, see :func:`history_table`) with ``_WEIGHT`` and the user's ``_LARGEST``.
    """
    keys = [*train.by, *user]
    if weight is None:
        return train.frame.group_by(keys).agg(pl.col(item).unique()), []
    _, checks = history_table(train, user, item, weight)
    w = pl.col(weight).cast(pl.Float64)
    lists = train.frame.group_by(keys).agg(pl.col(item), w.alias(_WEIGHT), w.max().alias(_LARGEST))
    return lists, checks


def _history_shares(
    history: pl.LazyFrame,
    cats: pl.LazyFrame,
    top: pl.LazyFrame,
    by: tuple[str, ...],
    user: list[str],
    item: str,
    fb: list[str],
    tb: list[str],
    *,
    weighted_history: bool,
) -> tuple[pl.LazyFrame, pl.LazyFrame, list[str]]:
    """``p(g|u)`` per (history key, ``CATEGORY``), the users' denominators, the history key.

    The history key is the ``by`` columns train or the item table carries, then the user:
    a history applies to every group it does not name. Users whose categorised history
    weighs 0 (or who have none) have no denominator row.
    """
    on_item = [*fb, item]
    hist_by = [b for b in by if b in tb or b in fb]
    if set(fb) - set(tb):
        users = top.select(*hist_by, *user).unique()
        history = history.join(users, on=[*tb, *user], how="inner")
    hk = [*hist_by, *user]
    if weighted_history:
        # Weights as shares of the user's largest, in [0, 1] for the fixed-point sums
        # (p is a ratio of two sums of them: the scale cancels).
        largest = pl.col(_WEIGHT).max().over(hk)
        history = history.with_columns(
            pl.when(largest > 0).then(pl.col(_WEIGHT) / largest).otherwise(0.0).alias(_WEIGHT)
        )
    weighted = history.join(cats, on=on_item, how="inner")
    numerators = weighted.group_by([*hk, CATEGORY]).agg(
        fixed_sum(pl.col(_WEIGHT) * pl.col(ITEM_SHARE)).alias("_fm_pnum")
    )
    denominators = (
        history.join(cats.select(on_item).unique(), on=on_item, how="semi")
        .group_by(hk)
        .agg(fixed_sum(pl.col(_WEIGHT)).alias("_fm_pden"))
        .filter(pl.col("_fm_pden") > 0)
    )
    shares = numerators.join(denominators, on=hk, how="inner").select(
        *hk, CATEGORY, divided(pl.col("_fm_pnum"), pl.col("_fm_pden")).alias(HISTORY_SHARE)
    )
    return shares, denominators, hk


def _item_table_summary(cats: pl.LazyFrame) -> tuple[int, int | None]:
    """The number of categories of the item table (codes 1..n), and the scale L of units.

    L: the least common multiple of the items' totals Σ_g w(i, g) when every weight is
    a whole number and L <= :data:`EXACT_MAX_SCALE`; None (fixed point) otherwise.
    """
    w, total = pl.col(_FEATURE_W), pl.col(_FEATURE_TOTAL)
    found = cats.select(
        pl.col(CATEGORY).max().alias("n"),
        ((w == w.floor()) & (total <= EXACT_MAX_SCALE)).all().alias("whole"),
        total.n_unique().alias("distinct"),
        total.unique().head(_EXACT_MAX_TOTALS).implode().alias("totals"),
    ).collect()
    n = int(found.item(0, "n") or 0)
    if not found.item(0, "whole") or found.item(0, "distinct") > _EXACT_MAX_TOTALS:
        return n, None
    scale = 1
    for t in found.item(0, "totals"):
        scale = math.lcm(scale, int(t))
        if scale > EXACT_MAX_SCALE:
            return n, None
    return n, scale


def _units(scale: int | None) -> pl.Expr:
    """``p(g|i)`` per item-table row in the units of the sums (see the module's docstring)."""
    if scale is None:
        return fixed_units(pl.col(ITEM_SHARE))
    # Whole numbers, the quotient exact: L is a multiple of every total.
    total = pl.col(_FEATURE_TOTAL).cast(pl.Int64)
    return pl.col(_FEATURE_W).cast(pl.Int64) * (pl.lit(scale, pl.Int64) // total)


def _dense_values(
    requests: list[Requested],
    cats: pl.LazyFrame,
    n_categories: int,
    top: pl.LazyFrame,
    history: pl.LazyFrame,
    keys: list[str],
    hk: list[str],
    on_item: list[str],
    within: list[tuple[CalibrationWeight, int]],
    *,
    weighted_history: bool,
    depth: int | None,
) -> pl.LazyFrame:
    """Per user (``keys``): the metrics' values, from one row per user.

    ``history``: the distinct history items, one row each, keyed by ``hk`` (the ``by``
    columns train or the item table carries, then the user), with ``_WEIGHT`` and
    ``_LARGEST`` when ``weighted_history``.

    The item table as one row per item with p(g|i) in a column per category (0 where
    the item has none), so that the sums per user are a ``group_by(user)`` of the
    history's and of the list's rows, and the divergence terms are elementwise across
    the category columns. The same fixed-point units, sums and float operations as the
    rows per (user, category) of the sparse path: a category outside both the history
    and the list adds 0 units to every sum, and a term of exactly 0.
    """
    suffixes = [f"#{code}" for code in range(1, n_categories + 1)]
    shares = [ITEM_SHARE + x for x in suffixes]
    p_units = [_P + x for x in suffixes]

    def per_category(column: str, code: int) -> pl.Expr:
        return pl.col(column).filter(pl.col(CATEGORY) == code).first()

    # The units of p(g|i) once per item: w_ui = 1 and w_r = 1 (uniform) multiply exactly.
    units = cats.group_by(on_item).agg(
        *(
            per_category(ITEM_SHARE, code).fill_null(0.0).alias(s)
            for code, s in enumerate(shares, start=1)
        ),
        *(
            per_category(_UNITS, code).fill_null(0).alias(u)
            for code, u in enumerate(p_units, start=1)
        ),
    )
    items = units.select(*on_item, *shares)
    if not weighted_history:
        from_history = history.join(units, on=on_item, how="inner").select(*hk, *p_units)
    else:
        top_weight = pl.col(_LARGEST)
        weight = pl.when(top_weight > 0).then(pl.col(_WEIGHT) / top_weight).otherwise(0.0)
        from_history = history.join(items, on=on_item, how="inner").select(
            *hk,
            *(
                fixed_units(weight * pl.col(s)).alias(u)
                for s, u in zip(shares, p_units, strict=True)
            ),
        )
    p_sums = (
        from_history.group_by(hk)
        .agg(pl.col(u).sum() for u in p_units)
        .with_columns(pl.sum_horizontal(p_units).alias(_PDEN))
        # The population: users with a list whose history holds a categorised item.
        .filter(pl.col(_PDEN) > 0)
    )

    numerators = {(w, k): [list_numerator(w, k) + x for x in suffixes] for w, k in within}

    def unit(w: CalibrationWeight, k: int, share: str, p_unit: str) -> pl.Expr:
        within_k = pl.col(RANK) <= k
        if w == "uniform":
            # w_r·p(g|i) = 1.0·p(g|i), the same float: its units are the item's; every
            # row of ``top`` is within a k as deep as the lists were cut.
            if depth is not None and k >= depth:
                return pl.col(p_unit)
            return pl.when(within_k).then(pl.col(p_unit)).otherwise(0)
        return fixed_units(
            pl.when(within_k).then(rank_weight(pl.col(RANK), w) * pl.col(share)).otherwise(0.0)
        )

    # Every row of the list, categorised or not (null units: no category), for the
    # first rank.
    from_list = top.join(units, on=on_item, how="left", nulls_equal=True).select(
        *keys,
        RANK,
        *(
            unit(w, k, s, u).alias(n)
            for (w, k), names in numerators.items()
            for s, u, n in zip(shares, p_units, names, strict=True)
        ),
    )
    every_numerator = [n for names in numerators.values() for n in names]
    q_sums = (
        from_list.group_by(keys)
        .agg(pl.col(RANK).min().alias(FIRST_RANK), *(pl.col(n).sum() for n in every_numerator))
        .with_columns(
            pl.sum_horizontal(names).alias(list_denominator(w, k))
            for (w, k), names in numerators.items()
        )
    )
    sums = [*every_numerator, *(list_denominator(w, k) for w, k in within)]
    # A history applies to every group it does not name.
    rows = q_sums.join(p_sums, on=hk, how="inner", nulls_equal=True)
    rows = rows.with_columns(
        *(
            (pl.col(u).cast(pl.Float64) / pl.col(_PDEN).cast(pl.Float64)).alias(HISTORY_SHARE + x)
            for u, x in zip(p_units, suffixes, strict=True)
        ),
        *(pl.col(n).cast(pl.Float64) for n in sums),
    )
    terms = [[f"_fm_cal_term{n}{x}" for x in suffixes] for n in range(len(requests))]
    rows = rows.with_columns(
        divergence_term(q.options, q.k, x).alias(t)
        for q, names in zip(requests, terms, strict=True)
        for x, t in zip(suffixes, names, strict=True)
    )
    return rows.select(
        *keys,
        *(
            q.value(CalibrationContext(q.options, names[0], tuple(names)))
            for q, names in zip(requests, terms, strict=True)
        ),
    )


def left_out(spec: Spec, inputs: Inputs, top: pl.LazyFrame) -> tuple[pl.LazyFrame, pl.LazyFrame]:
    """What ``fm.diagnose`` counts for miscalibration: the users and the items left out.

    ``users_without_categorised_history``: users with a recommendation (within the
    largest k) whose train history holds no categorised item of weight above 0, left
    out of the means; ``items_without_category``: distinct recommended (by the item
    table carries, item) within the largest k without a category, left out of every
    distribution. Checks are not run here (``evaluate`` runs them).
    """
    c = spec.columns
    features = inputs.extra("item_features", [c.item])
    cats, _ = category_table(features, c.item, c.features, c.feature_weight)
    train = inputs.extra("train", [*c.user, c.item])
    history, _ = history_table(train, list(c.user), c.item, c.history_weight)
    fb = list(features.by)
    _, denominators, hk = _history_shares(
        history,
        cats,
        top,
        c.by,
        list(c.user),
        c.item,
        fb,
        list(train.by),
        weighted_history=c.history_weight is not None,
    )
    users = top.select(c.keys).unique().join(denominators, on=hk, how="anti")
    on_item = [*fb, c.item]
    items = top.select(on_item).unique().join(cats.select(on_item).unique(), on=on_item, how="anti")
    return users, items


class CalibrationFamily(Family):
    """Calibration: a user's history and top k as category distributions."""

    name: ClassVar[str] = "calibration"
    order: ClassVar[int] = 50

    def reads(self, spec: Spec) -> Mapping[str, Collection[str]]:
        """The weight columns, when given."""
        c = spec.columns
        out: dict[str, list[str]] = {}
        if c.feature_weight is not None:
            out["item_features"] = [c.feature_weight]
        if c.history_weight is not None:
            out["train"] = [c.history_weight]
        return out

    def diagnostics(self, ctx: Context) -> list[DiagnosticCount]:
        """Users with a list but no categorised history; items without a category."""
        requests = ctx.requests(self.name)
        if not requests:
            return []
        assert ctx.prepared is not None
        deepest = max(q.k for q in requests)
        top = ctx.prepared.top.filter(pl.col(RANK) <= deepest)
        users, items = left_out(ctx.spec, ctx.inputs, top)
        return [
            DiagnosticCount(
                "users_without_categorised_history",
                "users with a list but no categorised history (left out of miscalibration)",
                users.select(pl.len().cast(pl.Int64).alias("n")),
            ),
            DiagnosticCount(
                "items_without_category",
                f"recommended items (within k={deepest}) without a category",
                items,
                distinct=True,
            ),
        ]

    def per_user(self, ctx: Context) -> pl.LazyFrame | None:
        """One row per user of the population with a value per requested metric."""
        requests = ctx.requests(self.name)
        if not requests:
            return None
        assert ctx.prepared is not None
        c, keys = ctx.spec.columns, ctx.keys
        top = ctx.prepared.top
        features = ctx.inputs.extra("item_features", [c.item])
        cats, checks = category_table(features, c.item, c.features, c.feature_weight)
        train = ctx.train()
        ctx.checks.extend(checks)
        fb, tb = list(features.by), list(train.by)
        on_item = [*fb, c.item]
        ks = sorted({q.k for q in requests})
        weightings = sorted({q.options.calibration_weight for q in requests})
        within = [(w, k) for w in weightings for k in ks]
        n_categories, scale = _item_table_summary(cats)
        cats = cats.with_columns(_units(scale).alias(_UNITS))
        weights = [_WEIGHT] if c.history_weight is not None else []
        largest = [_LARGEST] if c.history_weight is not None else []
        if 0 < n_categories <= DENSE_MAX_CATEGORIES:
            # The history key: the by columns train or the item table carries, the user.
            hk = [*(b for b in c.by if b in tb or b in fb), *c.user]
            lists, train_checks = _history_lists(train, list(c.user), c.item, c.history_weight)
            ctx.checks.extend(train_checks)
            if set(fb) - set(tb):
                # The history's categories differ by group: one copy per group listed.
                groups = top.select(hk).unique()
                lists = groups.join(lists, on=[*tb, *c.user], how="inner", nulls_equal=True)
            items = lists.select(*hk, c.item, *weights, *largest).explode([c.item, *weights])
            return _dense_values(
                requests,
                cats,
                n_categories,
                top,
                items,
                keys,
                hk,
                on_item,
                within,
                weighted_history=c.history_weight is not None,
                depth=ctx.spec.depth,
            )
        numerators = [list_numerator(w, k) for w, k in within]
        denominators = [list_denominator(w, k) for w, k in within]

        # The users of the lists, with the first rank of the list, get an integer code,
        # so that every group_by below has
        # one integer key: (user, category) as one UInt64, user alone as the code. Any
        # code would do (every sum is exact in fixed point, so order-free), as long as
        # every reader of the table sees the same one: the users are sorted (the same
        # codes however often the engine computes them) and cached (computed once).
        users = (
            top.group_by(keys)
            .agg(pl.col(RANK).min().alias(FIRST_RANK))
            .sort(keys)
            .with_row_index(_UID)
            .cache()
        )
        key = (pl.col(_UID).cast(pl.UInt64) * 2**32 + pl.col(CATEGORY)).alias(_KEY)

        # The history's (user, category) contributions w_ui·p(g|i), in units. A
        # history (per user and the by columns train carries) applies to every group it
        # does not name: joined to the users, one copy per group.
        history, train_checks = _history_lists(train, list(c.user), c.item, c.history_weight)
        ctx.checks.extend(train_checks)
        per_user = users.select(*keys, _UID).join(
            history, on=[*tb, *c.user], how="inner", nulls_equal=True
        )
        rows = per_user.select(_UID, *fb, c.item, *weights, *largest).explode([c.item, *weights])
        if c.history_weight is None:
            # w_ui = 1: the unit of p(g|i) is the item table's, computed once per item.
            units = cats.select(*on_item, CATEGORY, pl.col(_UNITS).alias(_P))
            from_history = rows.join(units, on=on_item, how="inner")
        else:
            # Weights as shares of the user's largest, in [0, 1] for the fixed point (p
            # is a ratio of two sums of them: the scale cancels).
            top_weight = pl.col(_LARGEST)
            weight = pl.when(top_weight > 0).then(pl.col(_WEIGHT) / top_weight).otherwise(0.0)
            from_history = rows.join(cats, on=on_item, how="inner").with_columns(
                fixed_units(weight * pl.col(ITEM_SHARE)).alias(_P)
            )
        listed = top.join(users.select(*keys, _UID), on=keys, how="inner", nulls_equal=True)
        from_history = from_history.select(_UID, key, _P)

        # The list's items within each cutoff, their rank weights times p(g|i).
        def unit(w: CalibrationWeight, k: int) -> pl.Expr:
            within_k = pl.col(RANK) <= k
            if w == "uniform":
                # w_r·p(g|i) = 1.0·p(g|i), the same float: its units are the item's.
                return pl.when(within_k).then(pl.col(_UNITS)).otherwise(0)
            weighted = rank_weight(pl.col(RANK), w) * pl.col(ITEM_SHARE)
            return fixed_units(pl.when(within_k).then(weighted).otherwise(0.0))

        from_list = listed.join(cats, on=on_item, how="inner").select(
            _UID, key, *(unit(w, k).alias(n) for (w, k), n in zip(within, numerators, strict=True))
        )
        # One group_by adds up the (user, category) contributions; windows over the user
        # code the denominators (the sums over the user's categories: Σ_g p(g|i) = 1)
        # and the first rank of the list, categorised item or not, which each user's
        # row of category code 0 (no category has it) brings.
        firsts = users.select(_UID, (pl.col(_UID).cast(pl.UInt64) * 2**32).alias(_KEY), FIRST_RANK)
        stacked = pl.concat([from_history, from_list, firsts], how="diagonal_relaxed")
        sums = [_P, *numerators]
        user = pl.col(_KEY) // 2**32
        rows = (
            stacked.group_by(_KEY)
            .agg(*(pl.col(n).sum() for n in sums), pl.col(FIRST_RANK).min())
            .with_columns(
                pl.col(FIRST_RANK).min().over(user),
                pl.col(_P).sum().over(user).alias(_PDEN),
                *(
                    pl.col(n).sum().over(user).alias(d)
                    for n, d in zip(numerators, denominators, strict=True)
                ),
            )
            # The population: users with a list whose history holds a categorised item.
            .filter(pl.col(_PDEN) > 0, pl.col(_KEY) % 2**32 != 0)
            .with_columns(user.alias(_UID))
        )
        rows = rows.with_columns(
            divided(pl.col(_P).cast(pl.Float64), pl.col(_PDEN).cast(pl.Float64)).alias(
                HISTORY_SHARE
            ),
            *(pl.col(n).cast(pl.Float64) for n in [*numerators, *denominators]),
        )
        # Each metric's term per (user, category) row first, elementwise; then the sums.
        terms = [f"_fm_cal_term{n}" for n in range(len(requests))]
        rows = rows.with_columns(
            divergence_term(q.options, q.k).alias(t) for q, t in zip(requests, terms, strict=True)
        )
        values = rows.group_by(_UID).agg(
            q.value(CalibrationContext(q.options, t)) for q, t in zip(requests, terms, strict=True)
        )
        return users.select(*keys, _UID).join(values, on=_UID, how="inner").drop(_UID)

    def partition_reads(self, spec: Spec) -> frozenset[str] | None:
        """No table over every user: the tables given and each user's rows."""
        return frozenset()


FAMILY = CalibrationFamily()
