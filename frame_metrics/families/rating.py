"""The rating family: errors between a predicted and a true rating.

MSE, RMSE and MAE per user from the user's (rating, prediction) pairs; in the aggregate
they are pooled over every pair of the group (the usual definition), not averaged over
users, so the per-user frame carries each user's error sums and pair count.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import ClassVar, Literal

import polars as pl

from frame_metrics.families.base import Context, Family
from frame_metrics.metrics.diversity import ordered_sum
from frame_metrics.metrics.rating import ABS_ERRORS, N_PAIRS, SQUARED_ERRORS, RatingContext
from frame_metrics.prepare import PREDICTION, REL
from frame_metrics.spec import Spec

__all__ = ["FAMILY", "RatingFamily"]


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


FAMILY = RatingFamily()
