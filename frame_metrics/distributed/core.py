"""The polars side of a distributed run, shared by the Spark and Dask adapters.

A distributed run is the single-machine plan run once per bucket of user keys, from the
call's :class:`~frame_metrics.spec.Spec` (carried by a :class:`Job`):

1. every frame keyed by user (recommendations, truth, the keyed extra inputs: train, a
   baseline) gets a bucket column, a hash of its user key in the key dtype all frames
   share (:func:`with_bucket`), and the adapter co-partitions them by it;
2. item tables (catalog, item features) go whole to every partition;
3. tables over every user (the ``by`` groups truth applies to, and each family's:
   train popularity, the items seen) are computed first and handed to each partition
   (:class:`GlobalTables`, :meth:`Family.global_tables`);
4. each partition runs the plan on its users (:func:`partition_result`): per-user rows,
   or, for ``aggregate=True``, what adds up over partitions (counts, exact partial sums
   of the per-user values, each group-level family's partials), in one frame;
5. the adapter stacks those and :func:`finish` adds them up and finishes them as
   :meth:`~frame_metrics.planner.Plan.aggregate` does (``Family.combine``,
   ``Family.finish_groups``): no family logic lives here.

Checks run the same way (:func:`partition_checks`): each partition counts its failures,
the adapter sums the counts of each check, and :func:`raise_first` raises the error the
single-machine engine would.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import polars as pl

from frame_metrics import errors
from frame_metrics.diagnostics import Diagnostics
from frame_metrics.dtypes import unify_keys
from frame_metrics.engine import DEFAULT_ENGINE, diagnose, family_counts, unseen_items
from frame_metrics.families import FAMILIES
from frame_metrics.family import Partitioned
from frame_metrics.global_tables import GlobalTables
from frame_metrics.inputs import Inputs
from frame_metrics.keywords import EXTRA_INPUTS
from frame_metrics.options import other_tie_rules
from frame_metrics.planner import SEEN, Plan, check_call, families_of, reads
from frame_metrics.spec import Spec
from frame_metrics.validation import Failure, dump_parts, find_failures, load_parts

__all__ = [
    "BUCKET",
    "TAG",
    "Job",
    "failure_columns",
    "finish",
    "global_tables",
    "merge_diagnostics",
    "partition_checked_result",
    "partition_checks",
    "partition_diagnostics",
    "partition_result",
    "raise_first",
    "result_after_checks",
    "result_schema",
    "row_filter",
    "run_diagnostics",
    "split_inputs",
    "unified_job",
    "with_bucket",
]

#: The bucket of a row's user key; frames are co-partitioned by it.
BUCKET = "_fm_bucket"

#: Which kind of rows a row of a partition's aggregate frame holds (see ``_sums``):
#: ``counts``, ``exact`` (the exact partial sums) or a family's name (its partials).
KIND = "_fm_kind"
_FAILURE_SCHEMA = {
    "index": pl.Int64,
    "error": pl.String,
    "label": pl.String,
    "message": pl.String,
    "n": pl.Int64,
    "example": pl.String,
    "more": pl.String,
}


@dataclass(frozen=True)
class Job:
    """One distributed call: its Spec, the item tables and the tables over every user.

    ``schemas``: the polars schema of each partitioned frame (so that empty partitions
    are typed); ``broadcast``: the item tables as polars frames.
    """

    spec: Spec
    aggregate: bool
    schemas: Mapping[str, pl.Schema]
    broadcast: Mapping[str, pl.DataFrame] = field(default_factory=dict)
    shared: GlobalTables = field(default_factory=GlobalTables)

    def inputs(self, frames: Mapping[str, pl.DataFrame], *, validate: bool) -> Inputs:
        """One partition's frames as the families' inputs (checked when ``validate``)."""
        typed = {
            name: frame.select(pl.col(n).cast(d) for n, d in self.schemas[name].items())
            for name, frame in frames.items()
        }
        spec = (
            self.spec if validate == self.spec.validate else replace(self.spec, validate=validate)
        )
        extras = {e.name: (typed if e.keyed else self.broadcast).get(e.name) for e in EXTRA_INPUTS}
        return Inputs.read(
            spec, typed["recs"], typed.get("truth"), extras, reads(spec), shared=self.shared
        )

    def plan(self, frames: Mapping[str, pl.DataFrame], *, validate: bool) -> Plan:
        """The plan of one partition's frames."""
        inputs = self.inputs(frames, validate=validate)
        return Plan(inputs.spec, inputs)

    def empty(self) -> dict[str, pl.DataFrame]:
        """Empty, typed partition frames."""
        return {name: pl.DataFrame(schema=schema) for name, schema in self.schemas.items()}


def split_inputs(
    recs: object, truth: object | None, extras: Mapping[str, object | None]
) -> tuple[dict[str, object], dict[str, object]]:
    """The frames split by user (recs, truth, keyed inputs), and the item tables.

    A partitioned run moves the first by user key and gives every partition the second
    whole (``ExtraInput.keyed``); frames not given are left out.
    """
    keyed: dict[str, object] = {"recs": recs}
    if truth is not None:
        keyed["truth"] = truth
    items: dict[str, object] = {}
    for e in EXTRA_INPUTS:
        frame = extras.get(e.name)
        if frame is not None:
            (keyed if e.keyed else items)[e.name] = frame
    return keyed, items


def unified_job(
    spec: Spec,
    schemas: Mapping[str, pl.Schema],
    broadcast: Mapping[str, pl.DataFrame],
    aggregate: bool,
    *,
    for_diagnose: bool = False,
) -> Job:
    """The job of a call whose user frames have ``schemas`` as read, keys unified.

    The frames' schemas are checked as the single-machine engine checks them (a missing
    column, a column in two roles, a dtype), by planning once on empty frames of these
    schemas, before any data is read (``for_diagnose``: as ``fm.diagnose`` does).
    """
    probe = Job(spec, aggregate, schemas, broadcast)
    if for_diagnose:
        diagnose(spec, probe.inputs(probe.empty(), validate=False))
    else:
        check_call(spec, aggregate=aggregate)
        plan = probe.plan(probe.empty(), validate=False)
        plan.result(plan.per_user(), aggregate=aggregate)
    c = spec.columns
    return Job(spec, aggregate, key_dtypes(schemas, [*c.by, *c.user, c.item]), broadcast)


def refuse_row_order(spec: Spec, library: str) -> None:
    """``ties="input"`` reads the input row order, which a Spark or Dask frame has not."""
    if spec.columns.score is None:
        return
    for q in spec.requests:
        if q.options.ties == "input":
            raise errors.InvalidOptionError(
                f"expected {other_tie_rules('input')} for "
                f"{q.column} on {library} (its rows have no order to break ties by), got "
                "'input'",
                *q.set_by("ties"),
                option="ties",
            )


def key_dtypes(schemas: Mapping[str, pl.Schema], keys: list[str]) -> dict[str, pl.Schema]:
    """Each frame's schema with its key columns in the dtype every frame will share."""
    frames = {name: pl.LazyFrame(schema=schema) for name, schema in schemas.items()}
    typed, _ = unify_keys(frames, keys)
    return {name: frame.collect_schema() for name, frame in typed.items()}


def row_filter(job: Job) -> pl.Expr | None:
    """The recommendation rows worth moving to a partition, when some are not.

    Rows ranked below the largest cutoff change no metric, and are most of the rows
    (90 of 100 at k=10). They are left out before the shuffle, except those a check
    would report (a null key or rank, a rank that is not a whole number), so that the
    errors are the same. Not when something reads every row: ranking by score, a
    family that does (rating metrics, the default catalog: items at every rank,
    ``empty="zero"``: every user seen is evaluated), ``exclude=`` (a row below the
    cutoff moves up into it when an item above it is excluded).
    """
    spec = job.spec
    c = spec.columns
    if (
        c.score is not None
        or spec.long_table
        or "exclude" in spec.frames
        or spec.max_k == 0
        or spec.depth is None
        or any(f.reads_every_row(spec, job.broadcast) for f in families_of(spec))
        or any(job.schemas["recs"][col].is_float() for col in [*c.keys, c.item])
    ):
        return None  # (float ids: a whole-number check reads every row)
    rank = pl.col(c.rank)
    keep = (rank <= spec.max_k) | pl.any_horizontal(
        pl.col(col).is_null() for col in [*c.keys, c.item, c.rank]
    )
    if job.schemas["recs"][c.rank].is_float():
        keep = keep | rank.is_nan() | rank.is_infinite() | (rank != rank.floor())
    return keep


def with_bucket(
    frame: pl.DataFrame,
    user: list[str],
    schema: pl.Schema,
    n: int,
    keep: pl.Expr | None = None,
) -> pl.DataFrame:
    """``frame`` with its key columns in ``schema``'s dtypes and a ``BUCKET`` of ``n``.

    The hash is of the unified dtypes, so the same user lands in the same bucket in
    every frame, whichever dtype each frame held its ids in. ``keep``: only these rows.
    """
    if keep is not None:
        frame = frame.filter(keep)
    cast = frame.with_columns(
        pl.col(c).cast(schema[c], strict=False) for c in frame.columns if c in schema
    )
    key = pl.col(user[0]) if len(user) == 1 else pl.struct(user)
    return cast.with_columns((key.hash(seed=0) % n).cast(pl.Int64).alias(BUCKET))


def partition_checks(frames: Mapping[str, pl.DataFrame], job: Job) -> pl.DataFrame:
    """Every failed check of one partition, one row each (see :func:`raise_first`)."""
    plan = job.plan(frames, validate=True)
    plan.result(plan.per_user(), aggregate=job.aggregate)  # registers every check
    failures, _ = find_failures(
        [*plan.first_checks, *plan.checks], first_only=False, engine=DEFAULT_ENGINE
    )
    return _failure_frame(failures)


def _failure_frame(failures: list[Failure]) -> pl.DataFrame:
    rows = [
        (f.index, f.error.__name__, f.label, f.message, f.n, f.example, dump_parts(f.more))
        for f in failures
    ]
    return pl.DataFrame(rows, schema=_FAILURE_SCHEMA, orient="row")


def raise_first(failures: pl.DataFrame) -> None:
    """Raise the first failed check over all partitions, its count summed over them.

    ``failures`` holds every partition's rows of :func:`partition_checks`, in partition
    order (the example shown is the first partition's).
    """
    if failures.height == 0:
        return
    index = failures["index"].min()
    rows = failures.filter(pl.col("index") == index)
    first = rows.row(0, named=True)
    error = getattr(errors, first["error"])
    raise Failure(
        int(first["index"]),
        error,
        first["label"],
        first["message"],
        int(rows["n"].sum()),
        first["example"],
        load_parts(first["more"]),
    ).exception()


#: Which rows of :func:`partition_checked_result`'s frame hold what.
TAG = "_fm_rows"


def partition_checked_result(frames: Mapping[str, pl.DataFrame], job: Job) -> pl.DataFrame:
    """One partition's failed checks and its result, in one pass, tagged by ``TAG``.

    The adapters keep this frame (persisted), raise the first failure over every
    partition, and give back the result rows: one pass over the data, as the
    single-machine engine collects checks and result together.
    """
    plan = job.plan(frames, validate=True)
    per_user = plan.per_user()
    if plan.first_checks:
        # Bad values that would make the query itself fail (a ragged vector): alone.
        found, _ = find_failures(plan.first_checks, first_only=False, engine=DEFAULT_ENGINE)
        if found:
            return _failure_frame(found).with_columns(pl.lit("failure").alias(TAG))
    result = _partition_query(plan, per_user, job.aggregate)
    found, (frame,) = find_failures(
        plan.checks, with_queries=[result], first_only=False, engine=DEFAULT_ENGINE
    )
    failures = _failure_frame(found)
    return pl.concat(
        [
            failures.with_columns(pl.lit("failure").alias(TAG)),
            frame.with_columns(pl.lit("result").alias(TAG)),
        ],
        how="diagonal_relaxed",
    )


def result_after_checks(rows: pl.DataFrame, schema: pl.Schema) -> pl.DataFrame:
    """The result rows of every partition's :func:`partition_checked_result`, stacked.

    Raises the first failure over the partitions (:func:`raise_first`) if any; for a
    result small enough to come back whole (an aggregate's sums).
    """
    is_failure = pl.col(TAG) == "failure"
    raise_first(rows.filter(is_failure).select(failure_columns()))
    return rows.filter(~is_failure).select(pl.col(c).cast(d) for c, d in schema.items())


def failure_columns() -> list[str]:
    """The columns of the failure rows."""
    return list(_FAILURE_SCHEMA)


def partition_result(frames: Mapping[str, pl.DataFrame], job: Job) -> pl.DataFrame:
    """One partition's per-user rows, or (``aggregate=True``) its frame of sums."""
    plan = job.plan(frames, validate=False)
    return _partition_query(plan, plan.per_user(), job.aggregate).collect(engine=DEFAULT_ENGINE)


def result_schema(job: Job) -> pl.Schema:
    """The schema of :func:`partition_result`'s frame (planned, not run)."""
    plan = job.plan(job.empty(), validate=False)
    return _partition_query(plan, plan.per_user(), job.aggregate).collect_schema()


def _partition_query(plan: Plan, per_user: pl.LazyFrame, aggregate: bool) -> pl.LazyFrame:
    """The per-user rows, or what adds up over partitions (:func:`_sums`)."""
    if not aggregate:
        return plan.result(per_user, aggregate=False)
    return _sums(plan, per_user)


def _sums(plan: Plan, per_user: pl.LazyFrame) -> pl.LazyFrame:
    """What adds up over partitions, in one frame of kinds of rows (``KIND``).

    ``counts``: users, each family's counts and ``SEEN`` per group (``SEEN`` alone
    without a per-user metric); ``exact``: the exact partial sums of
    :mod:`frame_metrics.numerics`; one kind per group-level family: its partials.
    """
    parts: list[pl.LazyFrame] = []
    if plan.spec.per_user_columns:
        counts, partials = plan.group_sums(per_user)
        parts.append(counts.with_columns(pl.lit("counts").alias(KIND)))
        parts.append(partials.with_columns(pl.lit("exact").alias(KIND)))
    else:
        parts.append(plan.seen_groups().with_columns(pl.lit("counts").alias(KIND)))
    for name, frame in plan.partials().items():
        parts.append(frame.with_columns(pl.lit(name).alias(KIND)))
    return pl.concat(parts, how="diagonal_relaxed")


def finish(sums: pl.DataFrame, job: Job) -> pl.DataFrame:
    """The aggregate from every partition's :func:`partition_result` frames, stacked.

    Counts and exact sums add up, so the means are the one-pass means to the last bit;
    a group-level family adds up its own partials (``Family.combine``) and finishes
    them as the one-pass plan does.
    """
    spec = job.spec
    plan = job.plan(job.empty(), validate=False)
    by = list(spec.columns.by)
    combined: dict[str, pl.LazyFrame] = {}
    for name, partial in plan.partials().items():
        own = partial.collect_schema()
        rows = sums.filter(pl.col(KIND) == name).select(pl.col(c).cast(d) for c, d in own.items())
        combined[name] = FAMILIES[name].combine(spec, rows).lazy()
    groups = plan.groups_from(combined)
    count_cols = [*(plan.count_names() if spec.per_user_columns else []), SEEN]
    counts = sums.filter(pl.col(KIND) == "counts").select(*by, *count_cols)
    # A group seen in any partition is seen (SEEN > 0), with the users of every one.
    counts = (
        counts.group_by(by).agg(pl.col(count_cols).sum())
        if by
        else counts.select(pl.col(count_cols).sum())
    )
    if not spec.per_user_columns:
        assert groups is not None
        return plan.finish_groups_only(counts.lazy(), groups).collect()
    exact = sums.filter(pl.col(KIND) == "exact").select(
        *by,
        *(c for c in sums.columns if c.startswith("_fm_") and c not in (KIND, SEEN)),
    )
    return plan.finish_aggregate((counts.lazy(), exact.lazy()), groups).collect()


def global_tables(
    job: Job,
    collect_sums: Callable[
        [Callable[[Mapping[str, pl.DataFrame]], pl.DataFrame], tuple[str, ...]], pl.DataFrame
    ],
    distinct_groups: Callable[[list[str]], pl.DataFrame],
    *,
    has_recs: Callable[[], bool],
) -> GlobalTables:
    """The tables over every user a partition reads (eager: small results only).

    ``collect_sums(fn, names)`` runs ``fn`` on every partition of the frames ``names``
    and returns the results concatenated; ``distinct_groups(cols)`` the distinct values
    of recs' columns. The ``by`` groups truth lacks are the runner's; every other table
    is a family's (``Family.global_tables``).
    """
    spec = job.spec
    truth_schema = job.schemas.get("truth")
    missing = [b for b in spec.columns.by if truth_schema is not None and b not in truth_schema]
    tables: dict[str, Any] = {"groups": distinct_groups(missing) if missing else None}
    run = Partitioned(job.schemas, tuple(job.broadcast), collect_sums, has_recs)
    for family in families_of(spec):
        tables |= family.global_tables(spec, run)
    return GlobalTables.of(tables)


_PART = "_fm_part"
_TOTALS = (
    "n_users",
    "users_without_relevant",
    "users_without_recommendations",
    "pairs_without_rating",
    "pairs_without_prediction",
    "users_not_in_truth",
    "lists_with_rank_gaps",
    "excluded_rows",
)


def partition_diagnostics(frames: Mapping[str, pl.DataFrame], job: Job) -> pl.DataFrame:
    """One partition's diagnostics as rows that add up (totals, per group, unseen items)."""
    inputs = job.inputs(frames, validate=False)
    found = diagnose(inputs.spec, inputs, families=False)
    totals: dict[str, Any] = {name: getattr(found, name) for name in _TOTALS}
    totals |= {f"dup:{f}": n for f, n in found.duplicates_resolved.items()}
    totals |= {f"tie@{k}": n for k, n in found.ties_at_cutoff.items()}
    totals |= {f"within@{k}": n for k, n in found.ties_within_cutoff.items()}
    totals |= {f"short@{k}": n for k, n in found.short_lists.items()}
    totals |= {f"fell@{k}": n for k, n in found.short_after_exclude.items()}
    totals["longest_list"] = found.longest_list  # a maximum over partitions, not a sum
    # Typed even when None (no list in the partition), so partitions' rows stack.
    parts = [
        pl.DataFrame([totals]).with_columns(
            pl.col("longest_list", "excluded_rows").cast(pl.Int64), pl.lit("totals").alias(_PART)
        )
    ]
    if found.per_group.width:
        parts.append(found.per_group.with_columns(pl.lit("group").alias(_PART)))
    if "popularity" in inputs.spec.needs:
        unseen = unseen_items(inputs.spec, inputs, inputs.prepared()).collect()
        parts.append(unseen.with_columns(pl.lit("unseen").alias(_PART)))
    # The families' counts: a count of users adds up over partitions, distinct rows
    # (items) are merged first; each tagged with its name.
    for i, count in enumerate(family_counts(inputs.spec, inputs, inputs.prepared())):
        if count.finish is not None:
            rows = count.frame  # a partial, stacked over partitions as it is
        elif count.distinct:
            rows = count.frame.unique()
        else:
            rows = count.frame.select(pl.col("n").sum())
        parts.append(rows.collect().with_columns(pl.lit(f"count:{i}").alias(_PART)))
    return pl.concat(parts, how="diagonal_relaxed")


def merge_diagnostics(rows: pl.DataFrame, job: Job) -> Diagnostics:
    """Every partition's :func:`partition_diagnostics` rows as one :class:`Diagnostics`."""
    spec = job.spec
    by, item = list(spec.columns.by), spec.columns.item
    totals = rows.filter(pl.col(_PART) == "totals")
    additive = ("dup:", "tie@", "within@", "short@", "fell@")
    names = [c for c in totals.columns if c in _TOTALS or c.startswith(additive)]
    total = {c: int(totals[c].fill_null(0).sum()) for c in names}
    has_longest = "longest_list" in totals.columns
    longest = totals.select(pl.col("longest_list").max()).item() if has_longest else None
    group_rows = rows.filter(pl.col(_PART) == "group")
    order = (
        "users_with_relevant",
        "users_without_relevant",
        "users_without_recommendations",
        "users_not_in_truth",
    )
    counts = [c for c in order if c in group_rows.columns]
    per_group = pl.DataFrame()
    if counts:
        summed = group_rows.select(*by, *counts)
        per_group = (
            summed.group_by(by).agg(pl.col(counts).sum()).sort(by)
            if by
            else summed.select(pl.col(counts).sum())
        ).with_columns(pl.col(counts).cast(pl.Int64))
    unseen = None
    if "popularity" in spec.needs:
        train_by = [b for b in by if b in job.schemas.get("train", {})]
        seen = rows.filter(pl.col(_PART) == "unseen").select(*train_by, item).unique()
        unseen = seen.height
    # Which counts the families give, and how they merge: theirs on empty partitions.
    probe = job.inputs(job.empty(), validate=False)
    found: dict[str, float | None] = {}
    labels: dict[str, str] = {}
    for i, count in enumerate(family_counts(spec, probe, probe.prepared())):
        part = rows.filter(pl.col(_PART) == f"count:{i}")
        columns = count.frame.collect_schema().names()
        if count.finish is not None:
            found[count.name] = count.finish(part.select(columns))
        elif count.distinct:
            found[count.name] = part.select(columns).unique().height
        else:
            found[count.name] = int(part["n"].fill_null(0).sum()) if part.height else 0
        labels[count.name] = count.label
    return Diagnostics(
        n_users=total.get("n_users", 0),
        users_without_relevant=total.get("users_without_relevant", 0),
        users_without_recommendations=total.get("users_without_recommendations", 0),
        duplicates_resolved={
            c.removeprefix("dup:"): n for c, n in total.items() if c.startswith("dup:")
        },
        ties_at_cutoff={
            int(c.removeprefix("tie@")): n for c, n in total.items() if c.startswith("tie@")
        },
        per_group=per_group,
        items_not_in_train=unseen,
        ties_within_cutoff={
            int(c.removeprefix("within@")): n for c, n in total.items() if c.startswith("within@")
        },
        pairs_without_rating=total.get("pairs_without_rating", 0),
        pairs_without_prediction=total.get("pairs_without_prediction", 0),
        users_not_in_truth=total.get("users_not_in_truth", 0),
        short_lists={
            int(c.removeprefix("short@")): n for c, n in total.items() if c.startswith("short@")
        },
        longest_list=None if longest is None else int(longest),
        lists_with_rank_gaps=total.get("lists_with_rank_gaps", 0),
        counts=found,
        count_labels=labels,
        excluded_rows=total.get("excluded_rows", 0) if "exclude" in spec.frames else None,
        short_after_exclude={
            int(c.removeprefix("fell@")): n for c, n in total.items() if c.startswith("fell@")
        },
    )


Collect = Callable[[Callable[[Mapping[str, pl.DataFrame]], pl.DataFrame]], pl.DataFrame]


def run_diagnostics(collect: Collect, job: Job) -> Diagnostics:
    """:func:`frame_metrics.diagnose` over partitions: checks first, then summed counts.

    ``collect(fn)`` runs ``fn`` on every partition now and stacks the results.
    """
    if job.spec.validate:
        raise_first(collect(lambda frames: partition_checks(frames, job)))
    return merge_diagnostics(collect(lambda frames: partition_diagnostics(frames, job)), job)
