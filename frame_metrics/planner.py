"""The planner: one lazy plan for a call, from the families its Spec needs.

It loops over the families (:mod:`frame_metrics.families`) in their order: each adds
its per-user columns (joined on the user key), its checks, and for metrics with one
value per group, its group frame. What is generic lives here: which frames and columns
are read, the roles of recs' columns, the groups the inputs show, the exact sums over
users and the aggregate finished from them. Every runner (one pass, buckets, Spark,
Dask) builds its queries from a :class:`Plan`; none holds family logic.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

import polars as pl

from frame_metrics.columns import check_roles, key_roles
from frame_metrics.dtypes import whole_number_check
from frame_metrics.errors import InvalidOptionError
from frame_metrics.families import FAMILIES, Family
from frame_metrics.family import GROUP_USERS, Context
from frame_metrics.inputs import Inputs
from frame_metrics.keywords import EXTRA_INPUTS, ROLES
from frame_metrics.metrics.registry import Requested
from frame_metrics.numerics import exact_partials, exact_totals
from frame_metrics.prepare import prepare_ratings
from frame_metrics.spec import Spec
from frame_metrics.validation import CheckedFrame

__all__ = ["SEEN", "Plan", "check_call", "families_of", "query", "reads"]

#: Per ``by`` group: how many input frames show it (see :meth:`Plan.seen_groups`).
SEEN = "_fm_seen"

#: The order of recs' roles in a message about two roles sharing a column.
_ROLE_ORDER = ("score", "rank", "prediction", "relevance")


def families_of(spec: Spec) -> list[Family]:
    """The families the Spec's metrics belong to, in plan order."""
    unknown = sorted(spec.families - set(FAMILIES))
    if unknown:
        raise InvalidOptionError(
            f"metrics: expected metric families among {', '.join(FAMILIES)}, "
            f"got {', '.join(unknown)} (a registry entry without its family module)"
        )
    return [f for name, f in FAMILIES.items() if name in spec.families]


def reads(spec: Spec) -> dict[str, set[str]]:
    """The columns the call reads of each frame, by role: only those are converted.

    Each ``by`` column in every frame (a frame may lack it); the rank or score column
    in recs; relevance in truth (in recs for a long table); the roles each extra input
    declares (``EXTRA_INPUTS``); what each family adds (prediction for rating metrics).

    Examples
    --------
    >>> from frame_metrics.spec import build_spec
    >>> got = reads(build_spec({"truth"}, metrics="ndcg@5", score="s"))
    >>> sorted(got["recs"]), sorted(got["truth"])
    (['item', 's', 'user'], ['item', 'relevance', 'user'])
    """
    c = spec.columns
    keys = {*c.by, *c.user, c.item}
    order = {c.order[1]}
    recs = keys | order
    if spec.long_table:
        recs |= {c.rank, c.relevance}
    # A role an input reads: its column, if named (by and user: every column of the key).
    roles = {r.name: {name} for r in ROLES if not r.several and (name := c.column(r.name))}
    roles |= {"by": set(c.by), "user": set(c.user), "order": order}
    out = {"recs": recs, "truth": keys | {c.relevance}}
    for extra in EXTRA_INPUTS:
        out[extra.name] = set().union(*(roles[role] for role in extra.reads))
    for family in families_of(spec):
        for frame, columns in family.reads(spec).items():
            out[frame] |= set(columns)
    return out


def check_call(spec: Spec, *, aggregate: bool, outputs: Mapping[str, str] | None = None) -> None:
    """What the call asks that no frame can answer: checked before reading any row.

    Each family's refusals (corpus metrics need ``aggregate=True``), then no column in
    two roles of one frame, reserved, or named like an output column. Every runner
    calls it. ``outputs``: the result's columns, each with what it is, when the result
    is not evaluate's (``fm.group_exposure``'s table): default, the metric columns and, with
    ``aggregate``, the counts.
    """
    families = families_of(spec)
    for family in families:
        family.check_call(spec, aggregate=aggregate)
    c = spec.columns
    keys = key_roles(c.user, c.by)
    keys["item"] = c.item
    roles: dict[str, str] = {}
    for family in families:
        roles |= family.recs_roles(spec)
    recs = dict(keys) | {role: roles[role] for role in _ROLE_ORDER if role in roles}
    frames = {spec.source_label: recs}
    if not spec.long_table:
        frames["truth"] = {**keys, "relevance": c.relevance}
    named = dict(outputs or {})
    if outputs is None:
        named = {name: "a metric" for name in spec.metric_columns}
        if aggregate:
            named |= {"n_users": "the number of users averaged", "n_pairs": "rated pairs"}
    check_roles(frames, named)


class Plan:
    """The pieces of one evaluation: the per-user frame, the aggregate and the checks."""

    def __init__(self, spec: Spec, inputs: Inputs) -> None:
        self.spec = spec
        self.inputs = inputs
        self.families = families_of(spec)
        checks: list[CheckedFrame] = [
            CheckedFrame(f.label, f.frame, [whole_number_check(f)], [f.column])
            for f in inputs.float_keys
        ]
        rows = {f.rows for f in self.families}
        prepared = None
        if "ranked" in rows:
            prepared = inputs.prepared()
            checks += prepared.checks
        ratings = None
        if "rated" in rows:
            ratings = prepare_ratings(
                inputs.source.lazy,
                None if inputs.truth is None else inputs.truth.lazy,
                spec.columns,
                validate=spec.validate,
            )
            checks += ratings.checks
        self.ctx = Context(spec, inputs, prepared, ratings, checks)

    @property
    def checks(self) -> list[CheckedFrame]:
        """The input checks, run in one batch with the result."""
        return self.ctx.checks

    @property
    def first_checks(self) -> list[CheckedFrame]:
        """Checks of small inputs whose bad values would make the query itself fail."""
        return self.ctx.first_checks

    # -- per user --------------------------------------------------------------------------

    def per_user(self) -> pl.LazyFrame:
        """One row per user with a value for at least one per-user metric."""
        spec, ctx = self.spec, self.ctx
        keys = spec.columns.keys
        parts = [
            p
            for f in self.families
            for c in self.tie_contexts(f)
            if (p := f.per_user(c)) is not None
        ]
        if not parts:
            # Metrics with one value per group only (so aggregate=True): the users are
            # those with a recommendation, and only their number is read, so no sort.
            assert ctx.prepared is not None
            return ctx.prepared.top.select(keys).unique()
        frame = parts[0]
        for part in parts[1:]:
            frame = frame.join(part, on=keys, how="full", coalesce=True, nulls_equal=True)
        cols = spec.per_user_columns
        frame = frame.filter(pl.any_horizontal(pl.col(cols).is_not_null()))
        carried = [c for f in self.families for c in f.carried(spec)]
        return frame.select(*keys, *cols, *carried).sort(keys)

    def result(self, per_user: pl.LazyFrame, *, aggregate: bool) -> pl.LazyFrame:
        """The call's result: the per-user rows, or the aggregate."""
        if aggregate:
            return self.aggregate(per_user)
        return per_user.select(*self.spec.columns.keys, *self.spec.metric_columns)

    def tie_contexts(self, family: Family) -> list[Context]:
        """The family's context, and one per tie rule that metric strings set apart.

        Scored recs are ranked once, by the call's tie rule, into the prepared top rows
        that every family reads. A per-user metric not judged against relevance
        (novelty, diversity, calibration, expected exposure, list parity) whose string
        sets another rule (``"novelty(ties=item_desc)@10"``) is computed from top rows
        ranked by that rule, in a context of its own: the same metric as with the
        rule at the call (spec section 8: a string says what the call can). The ranking
        metrics judged against relevance rank by their own rule already.
        """
        spec, ctx = self.spec, self.ctx
        apart = [q for q in spec.of_family(family.name) if _ranked_apart(q, spec)]
        if not apart or ctx.prepared is None:
            return [ctx]
        rest = tuple(q for q in spec.requests if q not in apart)
        contexts = [replace(ctx, spec=replace(spec, requests=rest))]
        for rule in sorted({q.options.ties for q in apart}):
            own = tuple(q for q in apart if q.options.ties == rule)
            prepared = replace(ctx.prepared, top=ctx.prepared.ranked(rule), tie_rule=rule)
            contexts.append(replace(ctx, spec=replace(spec, requests=own), prepared=prepared))
        return contexts

    # -- per group -------------------------------------------------------------------------

    def partials(self) -> dict[str, pl.LazyFrame]:
        """Each group-level family's partial frame (sums over users), by family name."""
        return {f.name: p for f in self.families if (p := f.partials(self.ctx)) is not None}

    def groups_from(self, partials: dict[str, pl.LazyFrame]) -> pl.LazyFrame | None:
        """The group-level metrics per ``by`` group, from (combined) partial frames."""
        by = list(self.spec.columns.by)
        frames = [
            frame
            for f in self.families
            if f.name in partials
            and (frame := f.finish_groups(self.ctx, partials[f.name])) is not None
        ]
        if not frames:
            return None
        out = frames[0]
        for frame in frames[1:]:
            # Every family's groups: a group one family shows and another not keeps its row.
            later = frame.drop(GROUP_USERS)
            out = (
                out.join(later, on=by, how="full", coalesce=True, nulls_equal=True)
                if by
                else _left_join(out, later, by)
            )
        return out

    def seen_groups(self) -> pl.LazyFrame:
        """The ``by`` groups the inputs show, each with ``SEEN`` > 0; without ``by``, one row.

        A group is seen when it has a recommendation the metrics read (within the largest
        cutoff, as a distributed run moves them) or a judged row (truth's rows, a long
        table's rows with a relevance); truth without some of the ``by`` columns applies
        to every group of recs. Every seen group gets a row in the aggregate, with
        ``n_users`` 0 and null means when none of its users is evaluated; empty input
        shows no group, so its aggregate has no rows (spec section 4). Without ``by``,
        ``SEEN`` counts the frames with a row (0: empty input). ``SEEN`` adds up over
        disjoint sets of users (buckets, partitions).
        """
        ctx, inputs = self.ctx, self.inputs
        by = list(self.spec.columns.by)
        sides: list[tuple[pl.LazyFrame, pl.LazyFrame, list[str], pl.LazyFrame | None]] = []
        if ctx.prepared is not None:
            p = ctx.prepared
            # Judged rows, relevance 0 included: a long table's as well as truth's.
            judged = p.truth if p.judged is None else p.judged
            sides.append((p.top, judged, p.truth_keys, p.groups))
        if ctx.ratings is not None:
            recs = inputs.source.lazy
            truth = recs if inputs.truth is None else inputs.truth.lazy
            truth_cols = truth.collect_schema().names()
            missing = [b for b in by if b not in truth_cols]
            groups = recs.select(missing).unique() if missing else None
            sides.append((recs, truth, [b for b in by if b in truth_cols], groups))
        if not by:
            # Whether any frame has a row (a literal alone would make a row of nothing).
            rows = [
                frame.head(1).select(pl.len().cast(pl.Int64).alias(SEEN))
                for recs, truth, _, _ in sides
                for frame in (recs, truth)
            ]
            return pl.concat(rows).select(pl.col(SEEN).sum())
        frames: list[pl.LazyFrame] = []
        for recs, truth, truth_keys, groups in sides:
            frames.append(recs.select(by).unique())
            truth_by = [b for b in by if b in truth_keys]
            # Truth without any by column shows the groups it applies to once it has a row.
            shown = (
                truth.select(truth_by).unique()
                if truth_by
                else truth.head(1).select(pl.len().alias(SEEN)).filter(pl.col(SEEN) > 0)
            )
            if groups is not None:
                shown = shown.join(groups, how="cross")
            frames.append(shown.select(by))
        seen = pl.concat(frames, how="vertical_relaxed").unique()
        return seen.with_columns(pl.lit(1, pl.Int64).alias(SEEN))

    # -- aggregates ------------------------------------------------------------------------

    def aggregate(self, per_user: pl.LazyFrame) -> pl.LazyFrame:
        """Per ``by`` group: ``n_users``, means, pooled rating errors and corpus metrics.

        Each mean is over the users the metric is defined for; rating errors are pooled
        over pairs, reported with ``n_pairs``. Every group :meth:`seen_groups` shows has
        a row.
        """
        groups = self.groups_from(self.partials())
        if not self.spec.per_user_columns:
            assert groups is not None
            return self.finish_groups_only(self.seen_groups(), groups)
        return self.finish_aggregate(self.group_sums(per_user), groups)

    def finish_groups_only(self, seen: pl.LazyFrame, groups: pl.LazyFrame) -> pl.LazyFrame:
        """Group-level metrics alone: one row per seen group.

        ``n_users`` is the users with a recommendation within the largest corpus k,
        which the group frame counts already; a group seen only in truth has 0 and
        null metrics.
        """
        by = list(self.spec.columns.by)
        out = _left_join(seen.filter(pl.col(SEEN) > 0), groups, by)
        out = out.with_columns(pl.col(GROUP_USERS).fill_null(0).alias("n_users"))
        out = out.select(*by, "n_users", *self.spec.metric_columns)
        return out.sort(by) if by else out

    def summed_columns(self) -> list[str]:
        """The per-user columns the aggregate sums: metrics with a mean, then the rest.

        Metric columns in request order; other sums (rating errors) in family order.
        """
        spec = self.spec
        wanted = [c for f in self.families for c in f.summed(spec)]
        metrics = [col for col in spec.metric_columns if col in wanted]
        return [*metrics, *(c for c in wanted if c not in metrics)]

    def count_names(self) -> list[str]:
        """The per-group counts: ``n_users``, then each family's (``n_pairs``)."""
        return ["n_users", *(e.meta.output_name() for e in self._counts())]

    def _counts(self) -> list[pl.Expr]:
        return [e for f in self.families for e in f.counts(self.spec)]

    def group_sums(self, per_user: pl.LazyFrame) -> tuple[pl.LazyFrame, pl.LazyFrame]:
        """Per seen ``by`` group: user and pair counts, ``SEEN``, and the exact partial sums.

        All add up over disjoint sets of users (buckets, partitions).
        """
        by = list(self.spec.columns.by)
        counts: list[pl.Expr] = [pl.len().cast(pl.Int64).alias("n_users"), *self._counts()]
        grouped = per_user.group_by(by).agg(counts) if by else per_user.select(counts)
        seen = self.seen_groups()
        if by:
            grouped = seen.join(grouped, on=by, how="full", coalesce=True, nulls_equal=True)
        else:
            grouped = grouped.join(seen, how="cross")
        grouped = grouped.with_columns(pl.col([*self.count_names(), SEEN]).fill_null(0))
        return grouped, exact_partials(per_user, by, self.summed_columns())

    def finish_aggregate(
        self, sums: tuple[pl.LazyFrame, pl.LazyFrame], groups: pl.LazyFrame | None
    ) -> pl.LazyFrame:
        """The aggregate from :meth:`group_sums` and the group-level metrics.

        The sums are one run's, or several runs' added up; the group frame is
        :meth:`groups_from` of one run's partials, or of partials added up. A seen group
        without an evaluated user has ``n_users`` 0 and null means (and a null pooled
        error without a rated pair); its corpus metrics are its own.
        """
        spec = self.spec
        by = list(spec.columns.by)
        counts, partials = sums
        totals = exact_totals(partials, by, self.summed_columns())
        out = _left_join(counts, totals, by)
        # Empty input has no seen group (and no user), so no row (spec section 4).
        out = out.filter((pl.col("n_users") > 0) | (pl.col(SEEN) > 0))
        finished = {e.meta.output_name(): e for f in self.families for e in f.finished(spec)}
        values = [finished[col] for col in spec.metric_columns if col in finished]
        lead = self.count_names()
        if by:
            out = out.group_by(by).agg(*(pl.col(c).first() for c in lead), *values)
        else:
            out = out.select(*lead, *values)
        # A mean over no user, a pooled error over no pair: null, not 0/0.
        defined = {
            q.column: f.defined_by(spec)
            for f in self.families
            for q in spec.of_family(f.name)
            if q.column in finished
        }
        out = out.with_columns(
            pl.when(pl.col(defined[col]) > 0).then(pl.col(col)).alias(col)
            for col in spec.metric_columns
            if col in defined
        )
        if groups is not None:
            out = _left_join(out, groups, by)
        out = out.select(*by, *lead, *spec.metric_columns)
        return out.sort(by) if by else out


def _ranked_apart(q: Requested, spec: Spec) -> bool:
    """A per-user metric reading the top rows, whose string sets a tie rule of its own."""
    per_user = q.metric.population in ("listed", "history") or (
        q.metric.population == "relevant" and q.metric.family != "ranking"
    )
    return per_user and spec.columns.score is not None and q.options.ties != spec.options.ties


def _left_join(left: pl.LazyFrame, right: pl.LazyFrame, by: Sequence[str]) -> pl.LazyFrame:
    """``left`` with ``right``'s columns joined on ``by``; without ``by``, on one key.

    Without ``by`` both frames have one row at most, and a cross join would drop
    ``left``'s row when ``right`` has none.
    """
    if by:
        return left.join(right, on=list(by), how="left")
    return left.join(right, left_on=pl.lit(0), right_on=pl.lit(0), how="left")


def query(spec: Spec, inputs: Inputs, *, aggregate: bool) -> tuple[Plan, pl.LazyFrame]:
    """The plan of a call and its result query, not run.

    Every check of names, roles and dtypes (a missing column, a column in two roles, a
    corpus metric per user) raises here, from the frames' schemas alone.
    """
    check_call(spec, aggregate=aggregate)
    plan = Plan(spec, inputs)
    return plan, plan.result(plan.per_user(), aggregate=aggregate)
