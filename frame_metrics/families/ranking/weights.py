"""Propensity weights of relevant truth rows (spec 9.4): where P comes from, w and w̃.

Observed relevance is missing not at random: a popular item is more likely to be seen,
so to be rated. Each relevant truth row gets a propensity ``P`` in (0, 1] (a truth
column, or train popularity), a weight ``w = min(1/P, max_weight)`` and, under
``ips="snips"``, the weight normalised over the user's relevant items,
``w̃ = w · |R| / Σ_R w``. The ranking statistics then count each relevant item ``w̃``
times (:mod:`frame_metrics.families.ranking.stats`): the unweighted sums with each 1
replaced by w̃, so weights of exactly 1.0 give the unweighted bits, and a sum over a set
of relevant items taken one way for every set (``|R| = Σ_R w̃`` too).

Exactness: ``Σ_R w`` is summed as integers (each weight scaled by a power of two taken
from the user's largest weight, so that it is a whole number), which is exact and does
not depend on the row order; it is rounded once. So with equal weights ``w`` the sum is
the correctly rounded ``n·w``, the same float as ``w · n``, and ``w̃`` is exactly 1.0.
A weight below 2^-48 of the user's largest loses its bits below the scale's unit (the
sum is then within that of exact, still independent of the row order).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from fractions import Fraction

import polars as pl

from frame_metrics.family import DiagnosticCount
from frame_metrics.numerics import exact_partials, exact_totals, times_two_to
from frame_metrics.options import MetricOptions
from frame_metrics.prepare import PROPENSITY

__all__ = [
    "RAW_WEIGHT",
    "TRAIN_USERS",
    "WEIGHT",
    "diagnostics",
    "popularity_counts",
    "with_popularity_propensity",
    "with_weights",
]

#: w̃ of a relevant truth row: the times it counts in every ranking statistic.
WEIGHT = "_fm_weight"
#: w = min(1/P, max_weight), before any normalisation (diagnostics read it).
RAW_WEIGHT = "_fm_raw_weight"
#: Σ_R w of the row's user, exactly (the snips normalisation's denominator).
_MASS = "_fm_raw_mass"
#: n_i, the distinct train users of an item (``propensity="popularity"``).
TRAIN_USERS = "_fm_propensity_n"
_MOST = "_fm_propensity_most"
_N = "_fm_weight_n"
_SHIFT = "_fm_weight_shift"
#: The largest weight of a user, scaled, is near 2^_TOP: a sum of up to 2^25 of them
#: stays below 2^127, within Int128.
_TOP = 100


def popularity_counts(train: pl.LazyFrame, user: Sequence[str], item: str) -> pl.LazyFrame:
    """(item, ``TRAIN_USERS``): distinct train users per item over the whole frame.

    Not per ``by`` group (spec 9.4): a model's evaluation reads the same propensities as
    another's. Partitions of the users add up (a user's rows are in one partition).
    """
    pairs = train.select(*user, item).unique()
    return pairs.group_by(item).agg(pl.len().cast(pl.Int64).alias(TRAIN_USERS))


def with_popularity_propensity(
    truth: pl.LazyFrame, counts: pl.LazyFrame, item: str, gamma: float
) -> pl.LazyFrame:
    """``truth`` with ``PROPENSITY`` = (n_i / max_j n_j)^((γ + 1) / 2) of its item.

    ``counts``: :func:`popularity_counts` of every train row. An item no train user had
    counts as had by one (Yang et al.). Computed as exp(e·(ln n_i − ln max n)): the most
    popular item gets exactly 1, and ``exp`` and ``log`` take one path for any number of
    rows (polars' ``pow`` does not), so a partition of one row gets the same bits.
    """
    exponent = (gamma + 1.0) / 2.0
    most = counts.select(pl.col(TRAIN_USERS).max().alias(_MOST))
    n = pl.col(TRAIN_USERS).fill_null(1).cast(pl.Float64)
    top = pl.col(_MOST).cast(pl.Float64)
    p = ((n.log() - top.log()) * exponent).exp()
    return (
        truth.join(counts, on=item, how="left")
        .join(most, how="cross")
        .with_columns(p.alias(PROPENSITY))
        .drop(TRAIN_USERS, _MOST)
    )


def _units(w: pl.Expr, shift: int | pl.Expr) -> pl.Expr:
    """``w · 2^shift`` as an Int128: the user's whole units (exact, see the module)."""
    return times_two_to(w, shift).cast(pl.Int128, strict=False)


def _unscaled(units: pl.Expr, shift: int | pl.Expr) -> pl.Expr:
    """``units · 2^-shift`` as a Float64: one rounding (Int128 to Float64), then exact."""
    return times_two_to(units.cast(pl.Float64), -shift)


def _common_shift(rows: pl.LazyFrame) -> int | None:
    """One scale 2^s that makes every weight of ``rows`` a whole number of units, if any.

    Then each user's ``Σ w · 2^s`` is the exact sum scaled, as the user's own scale
    gives it scaled by another power of two: rounded to a float (correctly, so alike
    at any power of two) and scaled back, both give the same float. s makes the
    smallest weight's last bit a unit (a larger weight's last bit is no smaller); it
    must leave the largest possible sum, every row at the largest weight, below 2^127.
    None (each user's own scale) when no s does, or a weight is not a positive normal
    float (invalid input, reported by the checks: the per-user path as before).
    One small query over the rows (their least and largest weight).
    """
    raw = pl.col(RAW_WEIGHT)
    least, most, nan, n = (
        rows.select(
            raw.min().alias("least"),
            raw.max().alias("most"),
            raw.is_nan().any().alias("nan"),
            pl.len(),
        )
        .collect()
        .row(0)
    )
    if least is None or nan or not (least >= 2.0**-1022 and math.isfinite(most)):
        return None
    # least = f · 2^e with f in [0.5, 1): its 53 bits end at 2^(e - 53).
    shift = 53 - math.frexp(least)[1]
    if math.frexp(most)[1] + shift + int(n).bit_length() > 126:
        return None
    return shift


def with_weights(
    relevant: pl.LazyFrame, keys: Sequence[str], options: MetricOptions
) -> pl.LazyFrame:
    """The relevant rows with ``WEIGHT`` (w̃) and ``RAW_WEIGHT`` (w).

    ``relevant`` holds one user's (``keys``) relevant truth rows with ``PROPENSITY``.
    w = 1/P clipped at ``max_weight``; under ``"snips"``, w̃ = w·|R| / Σ_R w with Σ_R w
    exact (see the module): equal weights give w̃ = 1.0 exactly.
    """
    keys = list(keys)
    w = 1.0 / pl.col(PROPENSITY)
    if options.max_weight is not None:
        w = pl.min_horizontal(w, pl.lit(options.max_weight, pl.Float64))
    rows = relevant.with_columns(w.alias(RAW_WEIGHT))
    raw = pl.col(RAW_WEIGHT)
    common = _common_shift(rows)
    if common is not None:
        # One scale for every user (a Python int: one multiplication per row, no window
        # for each user's largest weight): 0.65 -> 0.34 s for 7.5M rows, the query for
        # the scale included. The same exact sums, so the same floats (_common_shift).
        # The sum is added to 0.0 on each row's own weight (a positive mass is
        # unchanged): with one user in the frame, polars holds a window's value as one
        # value for the column and divides by it as a multiplication by its reciprocal
        # (off in the last bit: found by the test against each user's own scale).
        mass = _unscaled(_units(raw, common).sum().over(keys), common) + raw * 0.0
    else:
        # The scale: the user's largest weight near 2^_TOP (its exponent from log2,
        # which may be off by one either way: the headroom allows it).
        shift = _TOP - raw.max().over(keys).log(2).floor().cast(pl.Int64, strict=False)
        rows = rows.with_columns(shift.alias(_SHIFT))
        mass = _unscaled(_units(raw, pl.col(_SHIFT)).sum().over(keys), pl.col(_SHIFT))
    rows = rows.with_columns(mass.alias(_MASS), pl.len().over(keys).cast(pl.Float64).alias(_N))
    # Under snips, w·|R| and Σ_R w are each one correctly rounded operation on the same
    # exact value when the weights are equal: their quotient is then exactly 1.0.
    weight = (raw * pl.col(_N)) / pl.col(_MASS) if options.ips == "snips" else raw
    # (_SHIFT only on the per-user path.)
    return rows.with_columns(weight.alias(WEIGHT)).drop(_SHIFT, _N, _MASS, strict=False)


_ESS = "_fm_ess"
_COUNT = "_fm_n_rows"
#: The share of the rows whose weight mass ``propensity_top1_share`` reports.
TOP_SHARE = 0.01


def _mean_ess(stacked: pl.DataFrame) -> float | None:
    totals = exact_totals(stacked.lazy(), [], [_ESS]).collect()
    return None if totals.height == 0 else totals[f"{_ESS}.mean"][0]


def _least(column: str) -> Callable[[pl.DataFrame], float | None]:
    def least(stacked: pl.DataFrame) -> float | None:
        value = stacked[column].min()
        return None if value is None else float(value)  # type: ignore[arg-type]

    return least


def _largest(stacked: pl.DataFrame) -> float | None:
    value = stacked[RAW_WEIGHT].max()
    return None if value is None else float(value)  # type: ignore[arg-type]


def _top_share(stacked: pl.DataFrame) -> float | None:
    """The heaviest ceil(1%) rows' share of Σw, exactly (the weights as fractions)."""
    counts = (
        stacked.group_by(RAW_WEIGHT).agg(pl.col(_COUNT).sum()).sort(RAW_WEIGHT, descending=True)
    )
    n = int(counts[_COUNT].sum() or 0)
    if n == 0:
        return None
    left = math.ceil(TOP_SHARE * n)
    top, total = Fraction(0), Fraction(0)
    for weight, count in counts.iter_rows():
        mass = Fraction(weight) * int(count)
        total += mass
        taken = min(left, int(count))
        top += Fraction(weight) * taken
        left -= taken
    return float(top / total) if total else None


def diagnostics(relevant: pl.LazyFrame, keys: Sequence[str]) -> list[DiagnosticCount]:
    """The weights' diagnostics (spec 9.4) from the relevant rows with ``RAW_WEIGHT``.

    Each a partial that stacks over partitions of the users: the exact partial sums of
    the per-user effective sample sizes (their mean), the least one, the largest weight,
    and the rows per distinct weight (the heaviest 1%'s share). A user's sums of w and
    w² are taken over its weights in ascending order, so its ESS does not depend on
    the row order.
    """
    keys = list(keys)
    raw = pl.col(RAW_WEIGHT)
    per_user = relevant.group_by(keys).agg(raw.sort().alias("_fm_w"))
    w = pl.col("_fm_w")
    first, second = w.list.sum(), w.list.eval(pl.element() * pl.element()).list.sum()
    ess = per_user.select((first * first / second).alias(_ESS))
    label = "propensity weights: effective sample size per user"
    return [
        DiagnosticCount(
            "propensity_mean_ess",
            f"{label}, mean",
            exact_partials(ess, [], [_ESS]),
            finish=_mean_ess,
        ),
        DiagnosticCount(
            "propensity_min_ess",
            f"{label}, least",
            ess.select(pl.col(_ESS).min()),
            finish=_least(_ESS),
        ),
        DiagnosticCount(
            "propensity_largest_weight",
            "propensity weights: the largest, min(1/P, max_weight)",
            relevant.select(raw.max()),
            finish=_largest,
        ),
        DiagnosticCount(
            "propensity_top1_share",
            "propensity weights: share of the weight mass in the heaviest 1% of rows",
            relevant.group_by(raw).agg(pl.len().cast(pl.Int64).alias(_COUNT)),
            finish=_top_share,
        ),
    ]
