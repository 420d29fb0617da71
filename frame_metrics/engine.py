"""The one-pass runner: a call's plan collected once, with its checks, on one machine.

The planner (:mod:`frame_metrics.planner`) builds one lazy plan for everything the
caller asked; this module runs it: the input checks first (for eager input in the same
batch as the result, so both share one pass over the data), then the result in the
caller's frame kind. ``diagnose`` counts who is left out, tied or deduplicated.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import polars as pl

from frame_metrics.diagnostics import Diagnostics
from frame_metrics.family import ENGINE, Context, DiagnosticCount
from frame_metrics.id_match import IdScreen
from frame_metrics.inputs import Inputs
from frame_metrics.metrics.context import RankingContext
from frame_metrics.planner import families_of, query
from frame_metrics.prepare import RANK, REL, Prepared, prepare_ratings
from frame_metrics.screens import CoverageScreen, RelevanceScreen, Screen
from frame_metrics.spec import Spec
from frame_metrics.validation import run_checks

if TYPE_CHECKING:
    from polars._typing import EngineType

__all__ = [
    "DEFAULT_ENGINE",
    "diagnose",
    "evaluate",
    "family_counts",
    "report",
    "screens",
    "unseen_items",
]

#: The polars engine of the final collect; ``bench/ranking.py`` measures both.
DEFAULT_ENGINE: EngineType = ENGINE


def evaluate(spec: Spec, inputs: Inputs, *, aggregate: bool) -> Any:
    """Run the call and give the result back in the caller's frame kind.

    The input checks run first; for eager input they are collected in the same batch as
    the result, so both share one pass over the data and nothing is returned unless
    every check passed. A LazyFrame stays lazy: its checks run now, its metrics when
    the caller collects.
    """
    plan, result = query(spec, inputs, aggregate=aggregate)
    if plan.first_checks:
        run_checks(plan.first_checks, engine=DEFAULT_ENGINE)
    truth = None if inputs.truth is None else inputs.truth.lazy
    top = None if plan.ctx.prepared is None else plan.ctx.prepared.top
    looks = screens(spec, inputs.source.lazy, truth, top=top)
    screening = [[*s.queries()] for s in looks]
    queries = [q for qs in screening for q in qs]
    if inputs.source.kind == "polars-lazy":
        screened = run_checks(plan.checks, with_queries=queries, engine=DEFAULT_ENGINE)
        report(looks, screening, screened)
        return inputs.source.give_back(result)
    frame, *screened = run_checks(
        plan.checks, with_queries=[result, *queries], engine=DEFAULT_ENGINE
    )
    report(looks, screening, screened)
    return inputs.source.give_back(frame)


def screens(
    spec: Spec,
    recs: pl.LazyFrame,
    truth: pl.LazyFrame | None,
    *,
    within: pl.Expr | None = None,
    top: pl.LazyFrame | None = None,
) -> list[Screen]:
    """The looks at the data that may warn (ids, star ratings, users without lists).

    Input checks, as the others: none with ``validate=False``. ``recs`` and ``truth``
    are the typed inputs (``truth`` None for a long table, whose relevance ``recs``
    carries, a null rank marking a relevant item not recommended). ``within``: the ids
    screen samples the users this filter keeps (a bucketed run's first bucket).
    ``top``: the prepared rows within the largest cutoff, which the result's query reads
    too: who has a recommendation the metrics read (one the metrics never read leaves
    the user at 0 as none does), without another pass over every row of recs.
    """
    if not spec.validate or "truth" not in spec.needs:
        return []
    c = spec.columns
    out: list[Screen] = []
    if truth is not None:
        truth_by = [b for b in c.by if b in truth.collect_schema()]
        out.append(IdScreen(recs, truth, [*truth_by, *c.user], c.item, within=within))
    judged = recs if truth is None else truth
    if c.relevance not in judged.collect_schema():
        return out
    if not spec.relevance_said:
        out.append(
            RelevanceScreen(judged, c.relevance, spec.source_label if truth is None else "truth")
        )
    if any(
        q.metric.family == "ranking"
        and q.metric.population == "relevant"
        and q.options.users in ("all", "truth")
        for q in spec.requests
    ):
        t = spec.options.threshold
        rel = pl.col(c.relevance)
        relevant = judged.filter(rel > 0 if t is None else rel >= t)
        # A long table's recommended rows are those with a rank.
        listed = recs if truth is not None else recs.filter(pl.col(c.rank).is_not_null())
        listed = listed if top is None else top
        out.append(CoverageScreen(listed, relevant, c.user))
    return out


def report(
    looks: Sequence[Screen],
    queries: Sequence[Sequence[pl.LazyFrame]],
    frames: Sequence[pl.DataFrame],
) -> None:
    """Each screen's report on its own collected queries (``frames``, in order).

    Ids that do not match leave users without recommendations: said once, as ids.
    """
    at, unmatched = 0, False
    for look, own in zip(looks, queries, strict=True):
        mine = frames[at : at + len(own)]
        at += len(own)
        if not (unmatched and isinstance(look, CoverageScreen)):
            warned = look.report(mine)
            unmatched |= warned and isinstance(look, IdScreen)


def family_counts(spec: Spec, inputs: Inputs, prepared: Prepared) -> list[DiagnosticCount]:
    """What the call's metric families leave out (``Family.diagnostics``), in plan order."""
    ctx = Context(spec, inputs, prepared, None)
    return [count for family in families_of(spec) for count in family.diagnostics(ctx)]


def counted(count: DiagnosticCount) -> pl.LazyFrame:
    """One family count as one row, one column ``n`` (a value's partial as it is)."""
    if count.finish is not None:
        return count.frame
    if count.distinct:
        return count.frame.unique().select(pl.len().cast(pl.Int64).alias("n"))
    return count.frame.select(pl.col("n").sum().cast(pl.Int64))


def diagnose(spec: Spec, inputs: Inputs, *, families: bool = True) -> Diagnostics:
    """Count who is left out, scored zero, deduplicated or tied at a cutoff.

    With rating metrics, also the (user, item) pairs on one side only: a prediction
    without a true rating, or a rating without a prediction. ``families``: with the
    families' own counts (a partition leaves them to :func:`family_counts`, whose rows
    its runner merges).
    """
    one_sided = {"pairs_without_rating": 0, "pairs_without_prediction": 0}
    if "rating" in spec.families:
        ratings = prepare_ratings(
            inputs.source.lazy,
            None if inputs.truth is None else inputs.truth.lazy,
            spec.columns,
            validate=spec.validate,
        )
        (sided,) = run_checks(
            ratings.checks,
            with_queries=[ratings.one_sided.select(pl.col(list(one_sided)).sum())],
        )
        one_sided = {name: int(sided[name][0] or 0) for name in one_sided}
        if spec.families == {"rating"}:
            n_pairs_users = ratings.matched.select(spec.columns.keys).unique()
            n = n_pairs_users.select(pl.len()).collect().item()
            return Diagnostics(
                n_users=int(n),
                users_without_relevant=0,
                users_without_recommendations=0,
                duplicates_resolved={},
                ties_at_cutoff={},
                per_group=pl.DataFrame(),
                pairs_without_rating=one_sided["pairs_without_rating"],
                pairs_without_prediction=one_sided["pairs_without_prediction"],
            )
    ties_wanted = spec.cutoffs if spec.columns.score is not None else ()
    prepared = inputs.prepared(tie_cutoffs=ties_wanted)
    run_checks(prepared.checks)
    keys, by = spec.columns.keys, list(spec.columns.by)
    ctx = RankingContext.from_columns(RANK, REL, spec.options)
    users = prepared.all_keys.join(
        prepared.long.group_by(keys).agg(
            ctx.n_relevant().alias("n_rel"),
            pl.col(RANK).is_not_null().any().alias("has_recs"),
        ),
        on=keys,
        how="left",
        nulls_equal=True,
    ).with_columns(pl.col("n_rel").fill_null(0), pl.col("has_recs").fill_null(False))
    in_truth = pl.lit(True)
    if prepared.truth_user_keys is not None:
        users = users.join(
            prepared.truth_user_keys.with_columns(pl.lit(True).alias("_fm_in_truth")),
            on=keys,
            how="left",
            nulls_equal=True,
        )
        in_truth = pl.col("_fm_in_truth").fill_null(False)
    counts = [
        (pl.col("n_rel") > 0).sum().alias("users_with_relevant"),
        (pl.col("n_rel") == 0).sum().alias("users_without_relevant"),
        ((pl.col("n_rel") > 0) & ~pl.col("has_recs")).sum().alias("users_without_recommendations"),
        # Every key is in recs or in truth: one not in truth is only in recs.
        (~in_truth).sum().alias("users_not_in_truth"),
    ]
    per_group_q = users.group_by(by).agg(counts).sort(by) if by else users.select(counts)
    sample = spec.columns.sample
    recs = inputs.source.lazy
    queries = [per_group_q, prepared.duplicates, _list_counts(prepared, spec.cutoffs, recs, sample)]
    excluding = prepared.excluded is not None
    if excluding:
        assert prepared.excluded is not None
        # The lists as given, beside the lists without the excluded pairs.
        given = inputs.prepared(excluding=False)
        ranking = keys if sample is None else [*keys, sample]
        queries.append(prepared.excluded.select(pl.col("n").sum().alias("excluded")))
        queries.append(_fell_short(given.top, prepared.top, ranking, spec.cutoffs))
    if prepared.ties is not None:
        queries.append(
            prepared.ties.select(
                *(pl.col(f"tie@{k}").sum() for k in ties_wanted),
                *(pl.col(f"within@{k}").sum() for k in ties_wanted),
            )
        )
    results = pl.collect_all(queries)
    excluded_rows, fell = None, {}
    if excluding:
        excluded_rows = int(results[3]["excluded"][0] or 0)
        fell = {k: int(results[4][f"fell@{k}"][0] or 0) for k in spec.cutoffs}
        results = [*results[:3], *results[5:]]
    per_group = results[0].with_columns(pl.exclude(by).cast(pl.Int64))
    totals = per_group.select(pl.exclude(by).sum()).row(0, named=True)
    n_users = totals["users_with_relevant"]
    if spec.options.empty == "zero":
        n_users += totals["users_without_relevant"]
    dups = dict(zip(results[1]["frame"], results[1]["rows_dropped"], strict=True))
    lists = results[2].row(0, named=True)
    ties, within = {}, {}
    if prepared.ties is not None:
        ties = {k: int(results[3][f"tie@{k}"][0]) for k in ties_wanted}
        within = {k: int(results[3][f"within@{k}"][0]) for k in ties_wanted}
    samples = None
    if sample is not None:
        # How many rankings each user got: expected exposure averages over them.
        per_user = recs.group_by(keys).agg(pl.col(sample).n_unique().alias("_fm_n"))
        fewest, most = (
            per_user.select(pl.col("_fm_n").min().alias("lo"), pl.col("_fm_n").max().alias("hi"))
            .collect()
            .row(0)
        )
        samples = None if fewest is None else (int(fewest), int(most))
    unseen = None
    if "popularity" in spec.needs:
        unseen = int(unseen_items(spec, inputs, prepared).select(pl.len()).collect().item())
    extra = family_counts(spec, inputs, prepared) if families else []
    found = pl.collect_all([counted(c) for c in extra])
    return Diagnostics(
        n_users=int(n_users),
        users_without_relevant=int(totals["users_without_relevant"]),
        users_without_recommendations=int(totals["users_without_recommendations"]),
        duplicates_resolved={str(f): int(n) for f, n in dups.items()},
        ties_at_cutoff=ties,
        per_group=per_group,
        items_not_in_train=unseen,
        ties_within_cutoff=within,
        pairs_without_rating=one_sided["pairs_without_rating"],
        pairs_without_prediction=one_sided["pairs_without_prediction"],
        users_not_in_truth=int(totals["users_not_in_truth"]),
        short_lists={k: int(lists[f"short@{k}"]) for k in spec.cutoffs},
        longest_list=None if lists["longest"] is None else int(lists["longest"]),
        lists_with_rank_gaps=int(lists["gaps"]),
        samples_per_user=samples,
        counts={c.name: _value(c, f) for c, f in zip(extra, found, strict=True)},
        count_labels={c.name: c.label for c in extra},
        excluded_rows=excluded_rows,
        short_after_exclude=fell,
    )


def _fell_short(
    given: pl.LazyFrame, kept: pl.LazyFrame, lists: list[str], cutoffs: tuple[int, ...]
) -> pl.LazyFrame:
    """One row of ``fell@k`` per cutoff: lists with k items within k as given, fewer kept.

    ``given`` and ``kept``: the prepared top rows without and with ``exclude=``.
    """

    def within(top: pl.LazyFrame, name: str) -> pl.LazyFrame:
        return top.group_by(lists).agg(
            (pl.col(RANK) <= k).sum().cast(pl.Int64).alias(f"{name}@{k}") for k in cutoffs
        )

    both = within(given, "_fm_given").join(
        within(kept, "_fm_kept"), on=lists, how="left", nulls_equal=True
    )
    return both.select(
        ((pl.col(f"_fm_given@{k}") >= k) & (pl.col(f"_fm_kept@{k}").fill_null(0) < k))
        .sum()
        .alias(f"fell@{k}")
        for k in cutoffs
    )


def _value(count: DiagnosticCount, found: pl.DataFrame) -> float | None:
    """A family count's number from its collected frame (:func:`counted`)."""
    if count.finish is not None:
        return count.finish(found)
    return int(found["n"][0] or 0)


def _list_counts(
    prepared: Prepared, cutoffs: tuple[int, ...], recs: pl.LazyFrame, sample: str | None
) -> pl.LazyFrame:
    """How full the lists are: one row of ``short@k`` per cutoff, ``longest`` and ``gaps``.

    ``short@k``: lists (keys with a recommendation, at any rank) with fewer than k items
    ranked within k; ``longest``: the most items a list has within the largest cutoff
    (null without cutoffs); ``gaps``: lists whose ranks within it skip a position (ranks
    1, 2, 5). Each empty position is read as a miss: precision@k still divides by k.
    With a ``sample`` column, a list is one (user, sample) ranking of ``recs``.
    """
    keys = prepared.keys if sample is None else [*prepared.keys, sample]
    deepest = max(cutoffs, default=None)
    top = prepared.top if deepest is None else prepared.top.filter(pl.col(RANK) <= deepest)
    per_list = top.group_by(keys).agg(
        *((pl.col(RANK) <= k).sum().alias(f"_fm_n@{k}") for k in cutoffs),
        pl.len().alias("_fm_n"),
        pl.col(RANK).max().alias("_fm_last"),
    )
    if sample is not None:
        listed = recs.select(keys).unique()
    elif prepared.recs_keys is not None:
        listed = prepared.recs_keys
    else:
        listed = top.select(keys).unique()
    per_list = listed.join(per_list, on=keys, how="left", nulls_equal=True)
    n = pl.col("_fm_n").fill_null(0)
    return per_list.select(
        *((pl.col(f"_fm_n@{k}").fill_null(0) < k).sum().alias(f"short@{k}") for k in cutoffs),
        (n.max() if cutoffs else pl.lit(None, pl.Int64)).alias("longest"),
        (pl.col("_fm_last") > n).sum().alias("gaps"),
    )


def unseen_items(spec: Spec, inputs: Inputs, prepared: Prepared) -> pl.LazyFrame:
    """The distinct recommended (``by`` train carries, item) rows no train user had."""
    c = spec.columns
    train = inputs.extra("train", [*c.user, c.item])
    on = [*train.by, c.item]
    shared = inputs.shared
    known = (
        train.frame.select(on)
        if shared is None or shared.popularity is None
        else shared.popularity.lazy().select(on)  # every partition's train items
    )
    return prepared.top.select(on).unique().join(known.unique(), on=on, how="anti")
