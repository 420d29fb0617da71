"""The ranking family: metrics over one user's list and relevant items.

Precision, recall, NDCG, AP, MRR and the rest, and the list metrics that read the same
rows (novelty, arp, aplt, serendipity): per-user statistics (:mod:`.stats`) from the
hits, the truth and the list (:mod:`.query`), then one expression per metric. DCG and
its ideal come from the same terms (``dcg_term``), so an ideal list scores exactly 1.
The registry entries are in :mod:`.ranking` (the classic ones), :mod:`.ir` (the
trec_eval and ir_measures ones) and :mod:`.beyond` (beyond accuracy), one page of the
site each.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, ClassVar

import polars as pl

from frame_metrics import shared_tables
from frame_metrics.errors import InvalidValueError
from frame_metrics.extras import (
    N_TRAIN_USERS,
    baseline_ranks,
    history_pairs,
    item_popularity,
)
from frame_metrics.families.ranking import beyond as beyond
from frame_metrics.families.ranking import ir as ir
from frame_metrics.families.ranking import ranking as ranking
from frame_metrics.families.ranking.query import PackedKey, RankingInputs, user_statistics
from frame_metrics.families.ranking.stats import UserStats
from frame_metrics.families.ranking.weights import (
    diagnostics,
    popularity_counts,
    with_popularity_propensity,
    with_weights,
)
from frame_metrics.family import ENGINE, Context, DiagnosticCount, Family, Partitioned
from frame_metrics.metrics.context import IN_TAIL, POPULARITY, SELF_INFORMATION, is_relevant
from frame_metrics.metrics.registry import Requested
from frame_metrics.options import COMBINATION_OPTIONS, MetricOptions
from frame_metrics.prepare import RANK, REL, Prepared, prepare_baseline
from frame_metrics.shared_tables import EMPTY_TRAIN
from frame_metrics.spec import Spec
from frame_metrics.validation import CheckedFrame, row_check

__all__ = ["FAMILY", "RankingFamily"]

#: A partitioned run's tables: per-item popularity, train users, err's largest relevance.
_VALUE = "_fm_value"


def _stats_options(options: MetricOptions, call: MetricOptions) -> MetricOptions:
    """The options the statistics of a metric depend on (the rest from the call's)."""
    return options.changed(**{name: getattr(call, name) for name in COMBINATION_OPTIONS})


def _nonempty_train_check(train: pl.LazyFrame, top: pl.LazyFrame) -> CheckedFrame:
    """Popularity needs train rows: with none, every item's self-information is -inf."""
    counts = train.select(pl.len().alias("_fm_train_rows")).join(
        top.select(pl.len().alias("_fm_listed_rows")), how="cross"
    )
    empty = (pl.col("_fm_train_rows") == 0) & (pl.col("_fm_listed_rows") > 0)
    check = row_check(
        empty,
        InvalidValueError,
        EMPTY_TRAIN,
    )
    return CheckedFrame("train", counts, [check], [])


class RankingFamily(Family):
    """Ranking metrics, and list metrics computed from the same per-user statistics."""

    name: ClassVar[str] = "ranking"
    order: ClassVar[int] = 10

    def recs_roles(self, spec: Spec) -> Mapping[str, str]:
        """Recs' rank (or score) column, and relevance in a long table."""
        roles = dict(super().recs_roles(spec))
        if spec.long_table:
            roles["relevance"] = spec.columns.relevance
        return roles

    def reads(self, spec: Spec) -> Mapping[str, Collection[str]]:
        """The propensity column (spec 9.4): of truth, or of a long table."""
        column = spec.propensity_column
        if column is None:
            return {}
        return {"recs" if spec.long_table else "truth": {column}}

    def reads_every_row(self, spec: Spec, broadcast: Collection[str]) -> bool:
        """Under ``empty="zero"`` or ``users=`` every user seen is evaluated, at any rank."""
        # empty="zero" and users= evaluate every user seen, at any rank.
        return any(
            q.options.empty != "skip" or q.options.users != "all" for q in spec.of_family(self.name)
        )

    # -- per user ------------------------------------------------------------------------

    def per_user(self, ctx: Context) -> pl.LazyFrame | None:
        """Per-user statistics, then one expression per metric.

        Metrics whose options need other statistics (another threshold, gain, tie rule
        or relevant set) get their own statistics frame; all are joined on the key.
        Options that only change how a metric combines statistics share one frame.
        """
        requests = ctx.requests(self.name)
        if not requests:
            return None
        assert ctx.prepared is not None
        groups: dict[MetricOptions, list[Requested]] = {}
        for q in requests:
            groups.setdefault(_stats_options(q.options, ctx.spec.options), []).append(q)
        parts = [_statistics(ctx, ctx.prepared, options, qs) for options, qs in groups.items()]
        frame = parts[0]
        for part in parts[1:]:
            frame = frame.join(part, on=ctx.keys, how="full", coalesce=True, nulls_equal=True)
        return frame

    # -- diagnostics -----------------------------------------------------------------------

    def diagnostics(self, ctx: Context) -> list[DiagnosticCount]:
        """The propensity weights' effective sample size and concentration (spec 9.4).

        Over the relevant truth rows under the call's options (threshold, relevant set
        from truth), one row per truth user and item.
        """
        spec = ctx.spec
        if spec.options.propensity is None or not ctx.requests(self.name):
            return []
        assert ctx.prepared is not None
        truth = ctx.prepared.truth
        if spec.options.propensity == "popularity":
            truth = _with_propensity(ctx, truth)
        keys = ctx.prepared.truth_keys
        relevant = truth.filter(is_relevant(pl.col(REL), spec.options))
        return diagnostics(with_weights(relevant, keys, spec.options), keys)

    # -- partitioned runs ----------------------------------------------------------------

    def global_tables(self, spec: Spec, run: Partitioned) -> dict[str, Any]:
        """Train popularity over every partition; err's default g_max over all truth."""
        c = spec.columns
        out: dict[str, Any] = {}
        if "popularity" in spec.needs:
            out |= shared_tables.popularity(spec, run)
        if spec.options.propensity == "popularity":
            out[_PROPENSITY_COUNTS] = _propensity_counts(spec, run)
        if any(
            "max_relevance" in q.metric.reads() and q.options.max_relevance is None
            for q in spec.requests
        ):
            source = "recs" if spec.long_table else "truth"

            def most(frames: Mapping[str, pl.DataFrame]) -> pl.DataFrame:
                relevance = pl.col(c.relevance).cast(pl.Float64).max().alias(_VALUE)
                return frames[source].lazy().select(relevance).collect(engine=ENGINE)

            largest = run.collect(most, (source,)).select(pl.col(_VALUE).max()).item()
            out["max_relevance"] = None if largest is None else float(largest)
        return out

    def partition_reads(self, spec: Spec) -> frozenset[str] | None:
        """Train popularity (novelty, propensities) and err's g_max, per user."""
        return frozenset({"popularity", "n_train_users", "max_relevance", _PROPENSITY_COUNTS})


FAMILY = RankingFamily()

#: A partitioned run's table of n_i, the distinct train users of each item (spec 9.4).
_PROPENSITY_COUNTS = "propensity_counts"

_EMPTY_TRAIN_PROPENSITY = (
    "expected at least one row in train (propensity='popularity' reads item popularity "
    "from it), found an empty frame"
)


def _propensity_counts(spec: Spec, run: Partitioned) -> pl.DataFrame:
    """n_i over every partition's train: a user's rows are in one partition, so add up."""
    c = spec.columns

    def counts(frames: Mapping[str, pl.DataFrame]) -> pl.DataFrame:
        train = frames["train"].lazy()
        return popularity_counts(train, c.user, c.item).collect(engine=ENGINE)

    stacked = run.collect(counts, ("train",))
    if spec.validate and stacked.height == 0 and run.has_recs():
        raise InvalidValueError("train: " + _EMPTY_TRAIN_PROPENSITY, frame="train")
    return stacked.group_by(c.item).agg(pl.all().sum())


def _with_propensity(ctx: Context, truth: pl.LazyFrame) -> pl.LazyFrame:
    """Truth with each row's propensity from train popularity (``propensity="popularity"``)."""
    spec, c = ctx.spec, ctx.spec.columns
    gamma = spec.options.propensity_gamma
    assert gamma is not None  # required with "popularity" (spec.build_spec)
    shared = ctx.inputs.shared
    if shared is not None and _PROPENSITY_COUNTS in shared.tables:
        counts = shared.tables[_PROPENSITY_COUNTS].lazy()
    else:
        train = ctx.train()
        counts = popularity_counts(train.frame, c.user, c.item)
        if spec.validate:
            ctx.checks.append(_nonempty_train_for_propensity(train.frame, truth))
    return with_popularity_propensity(truth, counts, c.item, gamma)


def _nonempty_train_for_propensity(train: pl.LazyFrame, truth: pl.LazyFrame) -> CheckedFrame:
    """Popularity propensities need train rows: with none, no item has a popularity."""
    counts = train.select(pl.len().alias("_fm_train_rows")).join(
        truth.select(pl.len().alias("_fm_truth_rows")), how="cross"
    )
    empty = (pl.col("_fm_train_rows") == 0) & (pl.col("_fm_truth_rows") > 0)
    check = row_check(empty, InvalidValueError, _EMPTY_TRAIN_PROPENSITY)
    return CheckedFrame("train", counts, [check], [])


def _listed_rows(ctx: Context, prepared: Prepared) -> pl.LazyFrame:
    """The top-k rows, with the train popularity columns list metrics read."""
    spec, c = ctx.spec, ctx.spec.columns
    top = prepared.top
    if "popularity" not in spec.needs:
        return top
    train = ctx.train()
    shared = ctx.inputs.shared
    if shared is not None and shared.popularity is not None:
        # One partition of a larger run: popularity is over every partition's train
        # (whose emptiness the runner checked).
        assert shared.n_train_users is not None
        items, n_users = shared.popularity.lazy(), shared.n_train_users.lazy()
    else:
        if spec.validate:
            ctx.checks.append(_nonempty_train_check(train.frame, top))
        items, n_users = item_popularity(train, c, spec.options)
    top = top.join(items, on=[*train.by, c.item], how="left")
    top = (
        top.join(n_users, on=list(train.by), how="left")
        if train.by
        else top.join(n_users, how="cross")
    )
    # An item no train user had counts as had by one (RecTools' MeanInvUserFreq):
    # -log2(0) would make the user's novelty infinite.
    return top.with_columns(
        pl.col(POPULARITY).fill_null(0),
        pl.col(IN_TAIL).fill_null(True),
        (
            pl.col(N_TRAIN_USERS).cast(pl.Float64).log(2)
            - pl.max_horizontal(pl.col(POPULARITY).fill_null(0), 1).cast(pl.Float64).log(2)
        ).alias(SELF_INFORMATION),
    )


def _hit_columns(ctx: Context) -> list[tuple[pl.LazyFrame, list[str]]]:
    """Frames joined onto the hit rows: the baseline's ranks, the train history."""
    spec, c = ctx.spec, ctx.spec.columns
    out: list[tuple[pl.LazyFrame, list[str]]] = []
    if "history" in spec.needs:
        train = ctx.train()
        out.append((history_pairs(train, c), [*train.by, *c.user, c.item]))
    if "baseline" in spec.needs:
        baseline = ctx.inputs.extra("baseline", [*c.user, c.item])
        top, checks = prepare_baseline(
            baseline.frame,
            list(baseline.by),
            c,
            spec.max_k,
            validate=spec.validate,
            exclude=ctx.inputs.exclusion(),
        )
        ctx.checks.extend(checks)
        ranks = baseline_ranks(top, baseline.by, c, RANK)
        out.append((ranks, [*baseline.by, *c.user, c.item]))
    return out


def _statistics(
    ctx: Context, prepared: Prepared, options: MetricOptions, requests: list[Requested]
) -> pl.LazyFrame:
    """One statistics frame (one set of statistics options) and its metrics."""
    c, keys = ctx.spec.columns, ctx.keys
    # Building the metrics' expressions records the statistics they read; the query then
    # computes what was recorded, frozen (it adds nothing to the record).
    stats = UserStats(options, tied=options.ties == "average" and c.score is not None)
    exprs = [q.expr(stats.view(q.options)) for q in requests]
    needed = stats.recorded()
    top = prepared.ranked(options.ties)
    truth, truth_keys, groups = prepared.truth, prepared.truth_keys, prepared.groups
    if options.propensity == "popularity":
        truth = _with_propensity(ctx, truth)
    if options.relevant_set == "listed":
        # Only the recommended items (at any rank) can be relevant: what a peer that
        # is handed scored items alone sees.
        if groups is not None:
            truth, truth_keys, groups = truth.join(groups, how="cross"), keys, None
        truth = truth.join(top.select(*keys, c.item), on=[*truth_keys, c.item], how="semi")
    shared = ctx.inputs.shared
    inputs = RankingInputs(
        keys=keys,
        truth_keys=truth_keys,
        item=c.item,
        relevance=REL,
        top=_listed_rows(ctx, prepared) if needed.uses("listed") else top,
        truth=truth,
        groups=groups,
        all_keys=prepared.all_keys,
        hit_columns=_hit_columns(ctx) if needed.uses("hits") else (),
        packed=(
            PackedKey.for_truth(truth, [*truth_keys, c.item])
            if needed.uses("hits") and options.relevant_set == "truth"
            else None
        ),
        judged=prepared.judged,
        recs_keys=prepared.recs_keys,
        truth_user_keys=prepared.truth_user_keys,
        max_relevance=None if shared is None else shared.max_relevance,
        all_truth=prepared.truth,
    )
    return user_statistics(inputs, needed, options).select(*keys, *exprs)
