"""Rating-prediction metrics (spec section 5): errors over (rating, prediction) pairs.

The engine sums, per user, the squared and absolute errors of the user's pairs and
counts them; a per-user value divides the user's own sums, and the aggregate pools the
sums of every user of a group (the usual definition: every pair weighs the same, so a
user with many ratings weighs more). The sums are over sorted values, so they do not
depend on the order the rows arrive in.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import polars as pl

from frame_metrics.metrics.registry import Metric, register

__all__ = ["ABS_ERRORS", "N_PAIRS", "SQUARED_ERRORS", "RatingContext"]

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
