"""The one place that turns a request into a query: metrics × k → one lazy plan.

Everything the caller asked for becomes one ``group_by(by + user).agg(...)`` over the
long table, with every metric at every cutoff in the same ``agg``; the aggregate is a
second ``group_by(by)`` on top of it, in the same plan.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import polars as pl

from frame_metrics.columns import Columns, as_names
from frame_metrics.diagnostics import Diagnostics
from frame_metrics.errors import InvalidOptionError
from frame_metrics.frames import Source, to_lazy
from frame_metrics.metrics import DEFAULT_RANKING
from frame_metrics.metrics.context import RankingContext, add_row_features, engine_context
from frame_metrics.metrics.registry import Metric, resolve_requests
from frame_metrics.options import (
    ApDenominator,
    DuplicatePolicy,
    EmptyPolicy,
    Gain,
    MetricOptions,
    validate_k,
)
from frame_metrics.prepare import RANK, REL, Prepared, prepare
from frame_metrics.validation import run_checks

if TYPE_CHECKING:
    from polars._typing import EngineType

__all__ = ["DEFAULT_ENGINE", "Request", "diagnose", "evaluate"]

#: The polars engine of the final collect; ``bench/ranking.py`` measures both.
DEFAULT_ENGINE: EngineType = "streaming"

_N_REL = "_fm_n_relevant"


class Request:
    """A validated call: inputs as LazyFrames, columns, options and (metric, k) pairs."""

    def __init__(
        self,
        recs: object,
        truth: object | None,
        *,
        metrics: str | Iterable[str] | None,
        k: int | Iterable[int] | None,
        user: str | Sequence[str],
        item: str,
        rank: str,
        score: str | None,
        relevance: str,
        by: str | Sequence[str] | None,
        threshold: float | None,
        gain: Gain,
        ap_denominator: ApDenominator,
        empty: EmptyPolicy,
        on_duplicate: DuplicatePolicy,
        validate: bool,
    ) -> None:
        # Options and names first: a typo costs no pass over the data.
        if truth is None and score is not None:
            raise InvalidOptionError(
                "score: expected None for a long table (it carries ranks), got "
                f"{score!r}; pass truth= to rank recommendations by score"
            )
        self.options = MetricOptions(threshold, gain, ap_denominator, empty, on_duplicate)
        self.columns = Columns(
            as_names(user, "user"), item, rank, score, relevance, as_names(by, "by")
        )
        self.requests: list[tuple[Metric, int]] = resolve_requests(metrics, k, DEFAULT_RANKING)
        self.source: Source = to_lazy(recs, "recs" if truth is not None else "long table")
        self.truth: Source | None = None if truth is None else to_lazy(truth, "truth")
        self.validate = validate

    @property
    def max_k(self) -> int:
        """The largest cutoff asked for: rows ranked below it are never read."""
        return max(k for _, k in self.requests)

    @property
    def cutoffs(self) -> tuple[int, ...]:
        """Every distinct cutoff asked for, ascending."""
        return validate_k([k for _, k in self.requests])

    @property
    def metric_columns(self) -> list[str]:
        """Output column names, ``"<metric>@<k>"``, in request order."""
        return [f"{m.name}@{k}" for m, k in self.requests]

    def prepared(self, *, tie_cutoffs: tuple[int, ...] = ()) -> Prepared:
        """The checked long table for this request."""
        return prepare(
            self.source.lazy,
            None if self.truth is None else self.truth.lazy,
            self.columns,
            self.options,
            self.max_k,
            validate=self.validate,
            tie_cutoffs=tie_cutoffs,
        )


def per_user_plan(request: Request, prepared: Prepared) -> pl.LazyFrame:
    """One row per evaluated user: key columns and one column per metric@k."""
    keys = request.columns.keys
    ctx = engine_context(RANK, REL, request.options, request.max_k)
    aggs = [ctx.n_relevant().alias(_N_REL), *(m.expr(ctx, k) for m, k in request.requests)]
    long = add_row_features(prepared.long, keys, ctx, REL)
    scored = long.group_by(keys).agg(aggs)
    cols = request.metric_columns
    if request.options.empty == "skip":
        scored = scored.filter(pl.col(_N_REL) > 0)
    else:
        # Users whose only rows fell below the cutoff have no row yet: they score 0 too.
        scored = prepared.all_keys.join(scored, on=keys, how="left", nulls_equal=True)
        scored = scored.with_columns(pl.col(cols).fill_null(0.0))
    return scored.select(*keys, *cols).sort(keys)


def aggregate_plan(request: Request, per_user: pl.LazyFrame) -> pl.LazyFrame:
    """Means over evaluated users per ``by`` group, with ``n_users``."""
    by = list(request.columns.by)
    cols = request.metric_columns
    # A left-to-right sum over users in key order (cum_sum is sequential by definition)
    # makes the means reproducible to the last bit, whatever the engine's parallelism.
    aggs = [
        pl.len().cast(pl.Int64).alias("n_users"),
        *((pl.col(c).cum_sum().last() / pl.len()).alias(c) for c in cols),
    ]
    if by:
        return per_user.group_by(by).agg(aggs).sort(by)
    # A global mean of nothing is one row of nulls in polars; the spec wants no rows.
    return per_user.select(aggs).filter(pl.col("n_users") > 0)


def evaluate(request: Request, *, aggregate: bool) -> Any:
    """Run the request and give the result back in the caller's frame kind.

    The input checks run first; for eager input they are collected in the same batch as
    the result, so both share one pass over the data and nothing is returned unless
    every check passed. A LazyFrame stays lazy: its checks run now, its metrics when
    the caller collects.
    """
    prepared = request.prepared()
    plan = per_user_plan(request, prepared)
    if aggregate:
        plan = aggregate_plan(request, plan)
    if request.source.kind == "polars-lazy":
        run_checks(prepared.checks, engine=DEFAULT_ENGINE)
        return request.source.give_back(plan)
    (result,) = run_checks(prepared.checks, with_queries=[plan], engine=DEFAULT_ENGINE)
    return request.source.give_back(result)


def diagnose(request: Request) -> Diagnostics:
    """Count who is left out, scored zero, deduplicated or tied at a cutoff."""
    ties_wanted = request.cutoffs if request.columns.score is not None else ()
    prepared = request.prepared(tie_cutoffs=ties_wanted)
    run_checks(prepared.checks)
    keys, by = request.columns.keys, list(request.columns.by)
    ctx = RankingContext.from_columns(RANK, REL, request.options)
    users = prepared.all_keys.join(
        prepared.long.group_by(keys).agg(
            ctx.n_relevant().alias("n_rel"),
            pl.col(RANK).is_not_null().any().alias("has_recs"),
        ),
        on=keys,
        how="left",
        nulls_equal=True,
    ).with_columns(pl.col("n_rel").fill_null(0), pl.col("has_recs").fill_null(False))
    counts = [
        (pl.col("n_rel") > 0).sum().alias("users_with_relevant"),
        (pl.col("n_rel") == 0).sum().alias("users_without_relevant"),
        ((pl.col("n_rel") > 0) & ~pl.col("has_recs")).sum().alias("users_without_recommendations"),
    ]
    per_group_q = users.group_by(by).agg(counts).sort(by) if by else users.select(counts)
    queries = [per_group_q, prepared.duplicates]
    if prepared.ties is not None:
        queries.append(prepared.ties.select(pl.col(f"tie@{k}").sum() for k in ties_wanted))
    results = pl.collect_all(queries)
    per_group = results[0].with_columns(pl.exclude(by).cast(pl.Int64))
    totals = per_group.select(pl.exclude(by).sum()).row(0, named=True)
    n_users = totals["users_with_relevant"]
    if request.options.empty == "zero":
        n_users += totals["users_without_relevant"]
    dups = dict(zip(results[1]["frame"], results[1]["rows_dropped"], strict=True))
    ties = {}
    if prepared.ties is not None:
        ties = {k: int(results[2][f"tie@{k}"][0]) for k in ties_wanted}
    return Diagnostics(
        n_users=int(n_users),
        users_without_relevant=int(totals["users_without_relevant"]),
        users_without_recommendations=int(totals["users_without_recommendations"]),
        duplicates_resolved={str(f): int(n) for f, n in dups.items()},
        ties_at_cutoff=ties,
        per_group=per_group,
    )
