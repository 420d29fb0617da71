"""Propensity weights of relevant truth rows (spec 9.4): where P comes from, w and w̃.

Observed relevance is missing not at random: a popular item is more likely to be seen,
so to be rated. Each relevant truth row gets a propensity ``P`` in (0, 1] (a truth
column, or train popularity), a weight ``w = min(1/P, max_weight)`` and, under
``ips="snips"``, the weight normalised over the user's relevant items,
``w̃ = w · |R| / Σ_R w``. The ranking statistics then count each relevant item ``w̃``
times (:mod:`frame_metrics.families.ranking.stats`): the same sums, in the same order,
as the unweighted ones, so weights of exactly 1.0 give the unweighted bits.

Exactness: ``Σ_R w`` is summed as integers (each weight scaled by a power of two taken
from the user's largest weight, so that it is a whole number), which is exact and does
not depend on the row order; it is rounded once. So with equal weights ``w`` the sum is
the correctly rounded ``n·w``, the same float as ``w · n``, and ``w̃`` is exactly 1.0.
A weight below 2^-48 of the user's largest loses its bits below the scale's unit (the
sum is then within that of exact, still independent of the row order).
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from frame_metrics.options import MetricOptions
from frame_metrics.prepare import PROPENSITY

__all__ = [
    "MASS",
    "RAW_WEIGHT",
    "TRAIN_USERS",
    "WEIGHT",
    "popularity_counts",
    "with_popularity_propensity",
    "with_weights",
]

#: w̃ of a relevant truth row: the times it counts in every ranking statistic.
WEIGHT = "_fm_weight"
#: w = min(1/P, max_weight), before any normalisation (diagnostics read it).
RAW_WEIGHT = "_fm_raw_weight"
#: Σ_R w̃ of the row's user under ``ips="ips"`` (Σ_R w), on each of its relevant rows.
MASS = "_fm_relevant_mass"
#: n_i, the distinct train users of an item (``propensity="popularity"``).
TRAIN_USERS = "_fm_propensity_n"
_MOST = "_fm_propensity_most"
_UNITS = "_fm_weight_units"
_SHIFT = "_fm_weight_shift"
_N = "_fm_weight_n"
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


def _scaled_units(w: pl.Expr, shift: pl.Expr) -> pl.Expr:
    """``w · 2^shift`` as an Int128 (two power-of-two factors: each is finite)."""
    half = shift // 2
    return (w * pl.lit(2.0).pow(half) * pl.lit(2.0).pow(shift - half)).cast(pl.Int128, strict=False)


def _unscaled(units: pl.Expr, shift: pl.Expr) -> pl.Expr:
    """``units · 2^-shift`` as a Float64: one rounding (Int128 to Float64), then exact."""
    half = shift // 2
    return units.cast(pl.Float64) * pl.lit(2.0).pow(-half) * pl.lit(2.0).pow(half - shift)


def with_weights(
    relevant: pl.LazyFrame, keys: Sequence[str], options: MetricOptions
) -> pl.LazyFrame:
    """The relevant rows with ``WEIGHT`` (w̃), ``RAW_WEIGHT`` (w) and, under ips, ``MASS``.

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
    # The scale: the user's largest weight near 2^_TOP (its exponent from log2, which
    # may be off by one either way: the headroom allows it).
    per_user = rows.group_by(keys).agg(
        (_TOP - raw.max().log(2).floor().cast(pl.Int64, strict=False)).alias(_SHIFT),
        pl.len().cast(pl.Float64).alias(_N),
    )
    rows = rows.join(per_user, on=keys, how="left", nulls_equal=True)
    sums = rows.group_by(keys).agg(
        _scaled_units(raw, pl.col(_SHIFT)).sum().alias(_UNITS), pl.col(_SHIFT).first()
    )
    mass = sums.select(*keys, _unscaled(pl.col(_UNITS), pl.col(_SHIFT)).alias(MASS))
    rows = rows.join(mass, on=keys, how="left", nulls_equal=True)
    # Under snips, w·|R| and Σ_R w are each one correctly rounded operation on the same
    # exact value when the weights are equal: their quotient is then exactly 1.0.
    weight = (raw * pl.col(_N)) / pl.col(MASS) if options.ips == "snips" else raw
    return rows.with_columns(weight.alias(WEIGHT)).drop(_SHIFT, _N)
