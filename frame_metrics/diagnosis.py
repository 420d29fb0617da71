"""What ``fm.diagnose`` counts, and the looks at the data that may warn: for every runner.

A diagnosis is a list of :class:`Partial` frames (:func:`partials`): who is evaluated
per ``by`` group, the duplicates dropped, how full the lists are, what ``exclude=``
removed, the ties a tie rule decided, the samples per user, the items no train user had,
and each family's own counts (``Family.diagnostics``). Each partial says how it adds up
over parts of the users (:data:`Merge`): the one-pass engine collects them once; a
partitioned run (Spark, Dask) collects them on every partition, stacks them and adds
them up by the same rule (:func:`merged`); :func:`finish` turns the added-up frames into
one :class:`~frame_metrics.diagnostics.Diagnostics`. No runner counts anything itself.

The screens (:func:`screens`, :func:`report`) are the looks at the data that may warn
(ids that do not meet, star ratings, users without lists); the one-pass engine and the
bucket runner run them with their checks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import polars as pl

from frame_metrics.diagnostics import GROUP_COUNTS, Diagnostics
from frame_metrics.family import ENGINE, Context, DiagnosticCount
from frame_metrics.id_match import IdScreen
from frame_metrics.inputs import Inputs
from frame_metrics.metrics.context import RankingContext
from frame_metrics.planner import families_of
from frame_metrics.prepare import RANK, REL, Prepared, RatingPairs, prepare_ratings
from frame_metrics.screens import CoverageScreen, RelevanceScreen, Screen
from frame_metrics.spec import Spec
from frame_metrics.validation import CheckedFrame, run_checks

__all__ = [
    "Merge",
    "Partial",
    "diagnose",
    "finish",
    "merged",
    "partials",
    "report",
    "screens",
]

#: How a partial adds up over parts of the users: ``sum`` (its count columns summed,
#: per its ``by`` columns; ``least`` and ``most`` columns by min and max), ``distinct``
#: (its rows' union: items counted once), ``stack`` (its rows as they are, for a
#: family value's ``finish``).
Merge = Literal["sum", "distinct", "stack"]


@dataclass(frozen=True)
class Partial:
    """One diagnosis frame of one part of the users, and how parts add up."""

    name: str
    frame: pl.LazyFrame
    merge: Merge = "sum"
    by: tuple[str, ...] = ()
    least: tuple[str, ...] = ()
    most: tuple[str, ...] = ()
    #: The family count it carries (its name, label and finish), if any.
    count: DiagnosticCount | None = None


def _ratings(spec: Spec, inputs: Inputs) -> RatingPairs:
    """The call's (rating, prediction) pairs, and the pairs on one side only."""
    return prepare_ratings(
        inputs.source.lazy,
        None if inputs.truth is None else inputs.truth.lazy,
        spec.columns,
        validate=spec.validate,
    )


def _prepared(spec: Spec, inputs: Inputs, *, excluding: bool = True) -> Prepared:
    """The call's prepared rows, with the ties at each cutoff for score input."""
    ties = spec.cutoffs if spec.columns.score is not None else ()
    return inputs.prepared(tie_cutoffs=ties, excluding=excluding)


def partials(
    spec: Spec, inputs: Inputs, checks: list[list[CheckedFrame]] | None = None
) -> list[Partial]:
    """Every count of a diagnosis as frames of this part of the users (see :data:`Merge`).

    ``checks``: where the input checks of the rows the counts read go, a batch each, in
    the order to run them (each batch raises its first failure).
    """
    out: list[Partial] = []
    if "rating" in spec.families:
        ratings = _ratings(spec, inputs)
        if checks is not None:
            checks.append(ratings.checks)
        sided = ratings.one_sided.select(
            pl.col("pairs_without_rating", "pairs_without_prediction").sum().cast(pl.Int64)
        )
        out.append(Partial("pairs", sided))
        if spec.families == {"rating"}:
            # Rating metrics alone: the users are those with a rated pair.
            keys = spec.columns.keys
            rated = ratings.matched.select(keys).unique().select(pl.len().cast(pl.Int64).alias("n"))
            return [*out, Partial("rated_users", rated)]
    prepared = _prepared(spec, inputs)
    if checks is not None:
        checks.append(prepared.checks)
    c = spec.columns
    keys, by = c.keys, list(c.by)
    # One pass over the top rows for both: the lists' counts, and who has a list.
    per_list = _per_list(prepared.top, keys, spec.cutoffs)
    out.append(Partial("users", _users(spec, prepared, per_list), by=tuple(by)))
    out.append(Partial("duplicates", prepared.duplicates, by=("frame",)))
    lists = (
        _list_counts(prepared, per_list, spec.cutoffs)
        if c.sample is None
        # A list is one (user, sample) ranking.
        else _list_counts(
            prepared,
            _per_list(prepared.top, [*keys, c.sample], spec.cutoffs),
            spec.cutoffs,
            inputs.source.lazy.select(*keys, c.sample).unique(),
        )
    )
    out.append(Partial("lists", lists, most=("longest",)))
    if prepared.excluded is not None:
        given = _prepared(spec, inputs, excluding=False)
        ranking = keys if c.sample is None else [*keys, c.sample]
        out.append(
            Partial("excluded", prepared.excluded.select(pl.col("n").sum().alias("excluded")))
        )
        out.append(Partial("fell", _fell_short(given.top, prepared.top, ranking, spec.cutoffs)))
    if prepared.ties is not None:
        ties = spec.cutoffs
        out.append(
            Partial(
                "ties",
                prepared.ties.select(
                    *(pl.col(f"tie@{k}").sum() for k in ties),
                    *(pl.col(f"within@{k}").sum() for k in ties),
                ),
            )
        )
    if c.sample is not None:
        # How many rankings each user got: expected exposure averages over them. A
        # user's rows are in one part, so the least and most add up by min and max.
        per_user = inputs.source.lazy.group_by(keys).agg(pl.col(c.sample).n_unique().alias("_fm_n"))
        spread = per_user.select(
            pl.col("_fm_n").min().alias("lo"), pl.col("_fm_n").max().alias("hi")
        )
        out.append(Partial("samples", spread, least=("lo",), most=("hi",)))
    if "popularity" in spec.needs:
        out.append(Partial("unseen", _unseen_items(spec, inputs, prepared), merge="distinct"))
    ctx = Context(spec, inputs, prepared, None)
    for i, count in enumerate(f for family in families_of(spec) for f in family.diagnostics(ctx)):
        if count.finish is not None:
            out.append(Partial(f"count:{i}", count.frame, merge="stack", count=count))
        elif count.distinct:
            out.append(Partial(f"count:{i}", count.frame.unique(), merge="distinct", count=count))
        else:
            frame = count.frame.select(pl.col("n").sum().cast(pl.Int64))
            out.append(Partial(f"count:{i}", frame, count=count))
    return out


def merged(found: Sequence[Partial], frames: Mapping[str, pl.DataFrame]) -> dict[str, pl.DataFrame]:
    """Each partial's frames of every part (stacked), added up by its :data:`Merge`."""
    out: dict[str, pl.DataFrame] = {}
    for partial in found:
        rows = frames[partial.name]
        if partial.merge == "stack":
            out[partial.name] = rows
        elif partial.merge == "distinct":
            out[partial.name] = rows.unique()
        else:
            by = list(partial.by)
            summed = [
                pl.col(n).min()
                if n in partial.least
                else pl.col(n).max()
                if n in partial.most
                else pl.col(n).sum()
                for n in rows.columns
                if n not in by
            ]
            out[partial.name] = (
                rows.group_by(by, maintain_order=True).agg(summed) if by else rows.select(summed)
            )
    return out


def finish(spec: Spec, found: Sequence[Partial], frames: Mapping[str, pl.DataFrame]) -> Diagnostics:
    """The :class:`Diagnostics` of the added-up frames (:func:`merged`)."""
    sided = frames.get("pairs")
    pairs = {
        name: int(sided[name][0] or 0) if sided is not None and sided.height else 0
        for name in ("pairs_without_rating", "pairs_without_prediction")
    }
    if "rated_users" in frames:
        return Diagnostics(
            n_users=int(frames["rated_users"]["n"][0] or 0),
            users_without_relevant=0,
            users_without_recommendations=0,
            duplicates_resolved={},
            ties_at_cutoff={},
            per_group=pl.DataFrame(),
            pairs_without_rating=pairs["pairs_without_rating"],
            pairs_without_prediction=pairs["pairs_without_prediction"],
        )
    by = list(spec.columns.by)
    per_group = frames["users"]
    per_group = (per_group.sort(by) if by else per_group).with_columns(
        pl.col(list(GROUP_COUNTS)).cast(pl.Int64)
    )
    totals = per_group.select(pl.col(list(GROUP_COUNTS)).sum()).row(0, named=True)
    n_users = int(totals["users_with_relevant"] or 0)
    if spec.options.empty == "zero":
        n_users += int(totals["users_without_relevant"] or 0)
    dups = frames["duplicates"]
    lists = frames["lists"].row(0, named=True)
    ties, within = {}, {}
    if "ties" in frames:
        row = frames["ties"].row(0, named=True)
        ties = {k: int(row[f"tie@{k}"] or 0) for k in spec.cutoffs}
        within = {k: int(row[f"within@{k}"] or 0) for k in spec.cutoffs}
    excluded_rows, fell = None, {}
    if "excluded" in frames:
        excluded_rows = int(frames["excluded"]["excluded"][0] or 0)
        row = frames["fell"].row(0, named=True)
        fell = {k: int(row[f"fell@{k}"] or 0) for k in spec.cutoffs}
    samples = None
    if "samples" in frames:
        lo, hi = frames["samples"].row(0)
        samples = None if lo is None else (int(lo), int(hi))
    counts: dict[str, float | None] = {}
    labels: dict[str, str] = {}
    for partial in found:
        count = partial.count
        if count is None:
            continue
        rows = frames[partial.name]
        if count.finish is not None:
            counts[count.name] = count.finish(rows)
        elif count.distinct:
            counts[count.name] = rows.height
        else:
            counts[count.name] = int(rows["n"][0] or 0) if rows.height else 0
        labels[count.name] = count.label
    return Diagnostics(
        n_users=n_users,
        users_without_relevant=int(totals["users_without_relevant"] or 0),
        users_without_recommendations=int(totals["users_without_recommendations"] or 0),
        duplicates_resolved={
            str(f): int(n) for f, n in zip(dups["frame"], dups["rows_dropped"], strict=True)
        },
        ties_at_cutoff=ties,
        per_group=per_group,
        items_not_in_train=frames["unseen"].height if "unseen" in frames else None,
        ties_within_cutoff=within,
        users_not_in_truth=int(totals["users_not_in_truth"] or 0),
        short_lists={k: int(lists[f"short@{k}"] or 0) for k in spec.cutoffs},
        longest_list=None if lists["longest"] is None else int(lists["longest"]),
        lists_with_rank_gaps=int(lists["gaps"] or 0),
        samples_per_user=samples,
        counts=counts,
        count_labels=labels,
        excluded_rows=excluded_rows,
        short_after_exclude=fell,
        pairs_without_rating=pairs["pairs_without_rating"],
        pairs_without_prediction=pairs["pairs_without_prediction"],
    )


def diagnose(spec: Spec, inputs: Inputs) -> Diagnostics:
    """The diagnosis of a call on one machine: checks first, then every count at once."""
    batches: list[list[CheckedFrame]] = []
    found = partials(spec, inputs, batches)
    for batch in batches:
        run_checks(batch)
    frames = pl.collect_all([p.frame for p in found], engine=ENGINE)
    return finish(
        spec, found, merged(found, {p.name: f for p, f in zip(found, frames, strict=True)})
    )


def _users(spec: Spec, prepared: Prepared, per_list: pl.LazyFrame) -> pl.LazyFrame:
    """Per ``by`` group, the users with and without a relevant item, a list, a truth row.

    Counted from sets of keys, without joining them to every key: every key is in
    ``all_keys``, and so is every key with a truth row (``truth_user_keys``) and every
    one with a relevant item (|R| > 0, counted on truth; truth without some ``by``
    columns applies to each of their groups). A user without recommendations is one
    of these without a list (a key of ``per_list``, :func:`_per_list`); a user not in
    truth, a key without a truth row.
    """
    keys, by = spec.columns.keys, list(spec.columns.by)
    ctx = RankingContext.from_columns(RANK, REL, spec.options)
    relevant = (
        prepared.truth.group_by(prepared.truth_keys)
        .agg(ctx.n_relevant().alias("_fm_n_rel"))
        .filter(pl.col("_fm_n_rel") > 0)
        .select(prepared.truth_keys)
    )
    if prepared.groups is not None:
        relevant = relevant.join(prepared.groups, how="cross")
    relevant = relevant.select(keys)

    def count(frame: pl.LazyFrame, name: str) -> pl.LazyFrame:
        n = pl.len().cast(pl.Int64).alias(name)
        return frame.group_by(by).agg(n) if by else frame.select(n)

    parts = [
        count(prepared.all_keys, "_fm_keys"),
        count(relevant, "users_with_relevant"),
        count(relevant.join(per_list, on=keys, how="anti", nulls_equal=True), "_fm_unlisted"),
    ]
    truth_keys = prepared.truth_user_keys
    if truth_keys is not None:
        parts.append(count(truth_keys, "_fm_in_truth"))
    found = parts[0]
    for part in parts[1:]:
        found = (
            found.join(part, on=by, how="left", nulls_equal=True)
            if by
            else pl.concat([found, part], how="horizontal")
        )
    n_keys = pl.col("_fm_keys")
    with_relevant = pl.col("users_with_relevant").fill_null(0)
    in_truth = n_keys if truth_keys is None else pl.col("_fm_in_truth").fill_null(0)
    return found.select(
        *by,
        with_relevant.alias("users_with_relevant"),
        (n_keys - with_relevant).alias("users_without_relevant"),
        pl.col("_fm_unlisted").fill_null(0).alias("users_without_recommendations"),
        (n_keys - in_truth).alias("users_not_in_truth"),
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
        .cast(pl.Int64)
        .alias(f"fell@{k}")
        for k in cutoffs
    )


def _per_list(top: pl.LazyFrame, lists: list[str], cutoffs: tuple[int, ...]) -> pl.LazyFrame:
    """Per list with a top row, its rows within each cutoff and the largest, its last rank.

    Columns ``_fm_n@k``, ``_fm_n`` (within the largest cutoff) and ``_fm_last`` (the
    last rank within it; null if none).
    """
    deepest = max(cutoffs, default=None)
    within = pl.lit(True) if deepest is None else pl.col(RANK) <= deepest
    return top.group_by(lists).agg(
        *((pl.col(RANK) <= k).sum().alias(f"_fm_n@{k}") for k in cutoffs),
        within.sum().alias("_fm_n"),
        # when/then, not filter: polars runs a filter within a group-by far slower.
        pl.when(within).then(pl.col(RANK)).max().alias("_fm_last"),
    )


def _list_counts(
    prepared: Prepared,
    per_list: pl.LazyFrame,
    cutoffs: tuple[int, ...],
    listed: pl.LazyFrame | None = None,
) -> pl.LazyFrame:
    """How full the lists are: one row of ``short@k`` per cutoff, ``longest`` and ``gaps``.

    ``short@k``: lists (keys with a recommendation, at any rank; ``listed`` when given)
    with fewer than k items ranked within k; ``longest``: the most items a list has
    within the largest cutoff (null without cutoffs); ``gaps``: lists whose ranks within
    it skip a position (ranks 1, 2, 5). Each empty position is read as a miss:
    precision@k still divides by k. ``per_list``: :func:`_per_list` of the lists.
    """
    if listed is None:
        listed = (
            per_list.select(prepared.keys) if prepared.recs_keys is None else prepared.recs_keys
        )
    # A list without a top row (every item excluded, or ranked beyond the cutoff) has
    # no row in ``per_list``: it is short at every cutoff and holds 0 items. The lists
    # of ``per_list`` are listed (their top rows are recs' rows): the rest, counted.
    counts = per_list.select(
        *((pl.col(f"_fm_n@{k}") < k).sum().alias(f"_fm_short@{k}") for k in cutoffs),
        pl.col("_fm_n").max().alias("_fm_longest"),
        (pl.col("_fm_last") > pl.col("_fm_n")).sum().cast(pl.Int64).alias("gaps"),
        pl.len().alias("_fm_lists"),
    )
    both = pl.concat([counts, listed.select(pl.len().alias("_fm_listed"))], how="horizontal")
    empty = (pl.col("_fm_listed") - pl.col("_fm_lists")).cast(pl.Int64)
    return both.select(
        *((pl.col(f"_fm_short@{k}").cast(pl.Int64) + empty).alias(f"short@{k}") for k in cutoffs),
        (
            pl.max_horizontal(pl.col("_fm_longest"), pl.when(empty > 0).then(0))
            if cutoffs
            else pl.lit(None, pl.UInt32)
        )
        .cast(pl.Int64)
        .alias("longest"),
        "gaps",
    )


def _unseen_items(spec: Spec, inputs: Inputs, prepared: Prepared) -> pl.LazyFrame:
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
