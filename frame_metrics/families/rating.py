"""Rating-prediction metrics (spec section 5): errors over (rating, prediction) pairs.

The engine sums, per user, the squared and absolute errors of the user's pairs and
counts them; a per-user value divides the user's own sums, and the aggregate pools the
sums of every user of a group (the usual definition: every pair weighs the same, so a
user with many ratings weighs more). The sums are over sorted values, so they do not
depend on the order the rows arrive in. The per-user frame carries each user's error
sums and pair count, which the pooled aggregate reads.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from typing import ClassVar, Literal

import polars as pl

from frame_metrics.family import Context, Family
from frame_metrics.metrics.registry import Metric, register
from frame_metrics.numerics import ordered_sum
from frame_metrics.prepare import PREDICTION, REL
from frame_metrics.spec import Spec

__all__ = ["ABS_ERRORS", "FAMILY", "N_PAIRS", "SQUARED_ERRORS", "RatingContext", "RatingFamily"]


SQUARED_ERRORS = "_fm_squared_errors"
ABS_ERRORS = "_fm_abs_errors"
N_PAIRS = "n_pairs"


class RatingContext:
    """A user's (or, pooled, a group's) error sums and pair count."""

    def __init__(self, *, pooled: bool = False) -> None:
        self.pooled = pooled

    def _total(self, name: str) -> pl.Expr:
        # Pooled: a left-to-right sum over users in key order, reproducible to the bit.
        return pl.col(name).fill_null(0).cum_sum().last() if self.pooled else pl.col(name)

    def squared(self) -> pl.Expr:
        """Σ (r - r̂)²."""
        return self._total(SQUARED_ERRORS)

    def absolute(self) -> pl.Expr:
        """Σ |r - r̂|."""
        return self._total(ABS_ERRORS)

    def n(self) -> pl.Expr:
        """The number of pairs."""
        return (pl.col(N_PAIRS).fill_null(0).sum() if self.pooled else pl.col(N_PAIRS)).cast(
            pl.Float64
        )


def _mse(ctx: RatingContext, k: int) -> pl.Expr:
    return ctx.squared() / ctx.n()


def _rmse(ctx: RatingContext, k: int) -> pl.Expr:
    return (ctx.squared() / ctx.n()).sqrt()


def _mae(ctx: RatingContext, k: int) -> pl.Expr:
    return ctx.absolute() / ctx.n()


def _ref_mse(pairs: Sequence[tuple[float, float]]) -> float:
    return sum((r - p) ** 2 for r, p in pairs) / len(pairs)


def _ref_rmse(pairs: Sequence[tuple[float, float]]) -> float:
    return math.sqrt(_ref_mse(pairs))


def _ref_mae(pairs: Sequence[tuple[float, float]]) -> float:
    return sum(abs(r - p) for r, p in pairs) / len(pairs)


for _name, _build, _ref, _formula in (
    ("mse", _mse, _ref_mse, "mean over pairs of (r - r̂)²"),
    ("rmse", _rmse, _ref_rmse, "sqrt(mse)"),
    ("mae", _mae, _ref_mae, "mean over pairs of |r - r̂|"),
):
    register(
        Metric(
            _name,
            _build,
            _ref,
            _formula + "; per user over the user's pairs, aggregate pooled over all pairs",
            takes_k=False,
            higher_is_better=False,
            bounds=(0.0, None),
            needs=frozenset({"truth", "prediction"}),
            notes="Recommenders rmse/mae: pooled over the inner join of the two frames on "
            "(user, item), as aggregate=True here, but one-sided pairs vanish unreported. "
            "recmetrics mse/rmse: pooled over two arrays the caller aligned.",
            family="rating",
            population="rated",
        )
    )


# --------------------------------------------------------------------------- the family


class RatingFamily(Family):
    """Rating errors, per user and pooled over a group's pairs."""

    name: ClassVar[str] = "rating"
    rows: ClassVar[Literal["ranked", "rated"]] = "rated"
    order: ClassVar[int] = 30

    def reads(self, spec: Spec) -> Mapping[str, Collection[str]]:
        """The prediction column of recs."""
        return {"recs": {spec.columns.prediction}}

    def recs_roles(self, spec: Spec) -> Mapping[str, str]:
        """Recs' prediction column, and relevance (the true rating) in a long table."""
        c = spec.columns
        roles = {"prediction": c.prediction}
        if spec.long_table:
            roles["relevance"] = c.relevance
        return roles

    def reads_every_row(self, spec: Spec, broadcast: Collection[str]) -> bool:
        """A prediction at any rank is rated."""
        return bool(spec.of_family(self.name))

    def per_user(self, ctx: Context) -> pl.LazyFrame | None:
        """Rating metrics per user, with the sums the pooled aggregate reads."""
        requests = ctx.requests(self.name)
        if not requests:
            return None
        assert ctx.ratings is not None
        err = pl.col(REL) - pl.col(PREDICTION)
        sums = ctx.ratings.matched.group_by(ctx.keys).agg(
            # Summed in sorted order, so the sums do not depend on the row order.
            ordered_sum((err * err).sort()).alias(SQUARED_ERRORS),
            ordered_sum(err.abs().sort()).alias(ABS_ERRORS),
            pl.len().cast(pl.Int64).alias(N_PAIRS),
        )
        rctx = RatingContext()
        return sums.with_columns(q.value(rctx) for q in requests)

    def carried(self, spec: Spec) -> list[str]:
        """Each user's error sums and pair count, for the pooled aggregate."""
        return [SQUARED_ERRORS, ABS_ERRORS, N_PAIRS] if spec.of_family(self.name) else []

    def summed(self, spec: Spec) -> list[str]:
        """The error sums: pooled over a group's pairs, not averaged over users."""
        # Pooled, not averaged: the error sums of every user of the group.
        return [SQUARED_ERRORS, ABS_ERRORS] if spec.of_family(self.name) else []

    def counts(self, spec: Spec) -> list[pl.Expr]:
        """``n_pairs``: the group's rated pairs."""
        if not spec.of_family(self.name):
            return []
        return [pl.col(N_PAIRS).fill_null(0).sum().cast(pl.Int64).alias(N_PAIRS)]

    def finished(self, spec: Spec) -> list[pl.Expr]:
        """The pooled errors, from the group's one row of exact sums."""
        # One row per group holding the exact sums: the pooled value reads them.
        pooled = RatingContext(pooled=True)
        return [q.value(pooled) for q in spec.of_family(self.name)]

    def defined_by(self, spec: Spec) -> str:
        """``n_pairs``: a pooled error over no pair is null, not 0/0."""
        return N_PAIRS

    def partition_reads(self, spec: Spec) -> frozenset[str] | None:
        """No table over every user: each pair's error only."""
        return frozenset()


FAMILY = RatingFamily()
