"""The polars side of a distributed run, shared by the Spark and Dask adapters.

A distributed run is the single-machine plan run once per bucket of user keys, from the
call's :class:`~frame_metrics.spec.Spec` (carried by a :class:`Job`):

1. every frame keyed by user (recommendations, truth, the keyed extra inputs: train, a
   baseline) is co-partitioned by a hash of its user key in the key dtype all frames
   share: the engine's own hash where it agrees across the frames (Spark hashes the
   stacked key; Dask its columns when every frame holds them in one dtype), else a
   bucket column (:func:`with_bucket`);
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
import polars.selectors as cs

from frame_metrics import diagnosis, errors
from frame_metrics.diagnostics import Diagnostics
from frame_metrics.dtypes import unify_keys
from frame_metrics.families import FAMILIES
from frame_metrics.family import ENGINE, Partitioned
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
    "Keep",
    "conformed",
    "failure_columns",
    "finish",
    "global_tables",
    "keep_rule",
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
        diagnosis.diagnose(spec, probe.inputs(probe.empty(), validate=False))
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


@dataclass(frozen=True)
class Keep:
    """Which recommendation rows a partitioned run moves to its partitions: one rule.

    A row is kept when its ``rank`` is at most ``max_k``, or when a check would report
    it: a null in one of ``nullable`` (the keys, the item, the rank), or, with
    ``whole``, a rank that is NaN, infinite or not a whole number. :func:`row_filter`
    writes it as a polars filter; Spark's and Dask's adapters translate the same terms
    into their own, applied while reading (polars' then again in each partition).
    """

    rank: str
    max_k: int
    nullable: tuple[str, ...]
    whole: bool


def keep_rule(job: Job) -> Keep | None:
    """The rows worth moving to a partition, when some are not (None: every row).

    Rows ranked below the largest cutoff change no metric, and are most of the rows
    (90 of 100 at k=10). They are left out before the shuffle, except those a check
    would report, so that the errors are the same. Not when something reads every row:
    ranking by score, a family that does (rating metrics, the default catalog: items
    at every rank, ``empty="zero"``: every user seen is evaluated), ``exclude=`` (a row
    below the cutoff moves up into it when an item above it is excluded).
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
    whole = job.schemas["recs"][c.rank].is_float()
    return Keep(c.rank, spec.max_k, (*c.keys, c.item, c.rank), whole)


def row_filter(job: Job) -> pl.Expr | None:
    """:func:`keep_rule` as a polars filter (None: every row is kept).

    Examples
    --------
    >>> from frame_metrics.spec import build_spec
    >>> job = Job(build_spec({"truth"}, metrics="ndcg@5"), False, {"recs": pl.Schema(
    ...     {"user": pl.Int64, "item": pl.Int64, "rank": pl.Int64})})
    >>> keep = row_filter(job)
    >>> pl.DataFrame({"user": [1, 1, None], "item": [1, 2, 3], "rank": [5, 6, 9]}).filter(keep).height
    2
    """
    rule = keep_rule(job)
    if rule is None:
        return None
    rank = pl.col(rule.rank)
    keep = (rank <= rule.max_k) | pl.any_horizontal(pl.col(c).is_null() for c in rule.nullable)
    if rule.whole:
        keep = keep | rank.is_nan() | rank.is_infinite() | (rank != rank.floor())
    return keep


def conformed(frame: pl.DataFrame, schema: pl.Schema, keep: pl.Expr | None = None) -> pl.DataFrame:
    """``frame``'s rows ``keep`` (all: None), its columns in ``schema``'s dtypes."""
    if keep is not None:
        frame = frame.filter(keep)
    return frame.with_columns(
        pl.col(c).cast(schema[c], strict=False) for c in frame.columns if c in schema
    )


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
    cast = conformed(frame, schema, keep)
    key = pl.col(user[0]) if len(user) == 1 else pl.struct(user)
    return cast.with_columns((key.hash(seed=0) % n).cast(pl.Int64).alias(BUCKET))


def partition_checks(frames: Mapping[str, pl.DataFrame], job: Job) -> pl.DataFrame:
    """Every failed check of one partition, one row each (see :func:`raise_first`)."""
    plan = job.plan(frames, validate=True)
    plan.result(plan.per_user(), aggregate=job.aggregate)  # registers every check
    failures, _ = find_failures([*plan.first_checks, *plan.checks], first_only=False, engine=ENGINE)
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
        found, _ = find_failures(plan.first_checks, first_only=False, engine=ENGINE)
        if found:
            return _failure_frame(found).with_columns(pl.lit("failure").alias(TAG))
    result = _partition_query(plan, per_user, job.aggregate)
    found, (frame,) = find_failures(
        plan.checks, with_queries=[result], first_only=False, engine=ENGINE
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
    return _partition_query(plan, plan.per_user(), job.aggregate).collect(engine=ENGINE)


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


#: Which partial of a diagnosis a row of a partition's diagnosis frame belongs to.
_PART = "_fm_part"


def partition_diagnostics(frames: Mapping[str, pl.DataFrame], job: Job) -> pl.DataFrame:
    """One partition's diagnosis partials (:func:`frame_metrics.diagnosis.partials`), stacked.

    Each row is tagged with its partial's name; :func:`merge_diagnostics` adds them up.
    """
    inputs = job.inputs(frames, validate=False)
    found = diagnosis.partials(inputs.spec, inputs)
    collected = pl.collect_all([p.frame for p in found], engine=ENGINE)
    # Counts as Int64: Spark's Arrow exchange has no unsigned integers.
    parts = [
        frame.with_columns(cs.unsigned_integer().cast(pl.Int64), pl.lit(p.name).alias(_PART))
        for p, frame in zip(found, collected, strict=True)
    ]
    return pl.concat(parts, how="diagonal_relaxed")


def merge_diagnostics(rows: pl.DataFrame, job: Job) -> Diagnostics:
    """Every partition's :func:`partition_diagnostics` rows as one :class:`Diagnostics`.

    Which partials there are, and how each adds up, is read from the diagnosis of empty
    partitions of the same schemas.
    """
    probe = job.inputs(job.empty(), validate=False)
    found = diagnosis.partials(job.spec, probe)
    frames = {
        p.name: rows.filter(pl.col(_PART) == p.name).select(p.frame.collect_schema().names())
        for p in found
    }
    return diagnosis.finish(job.spec, found, diagnosis.merged(found, frames))


Collect = Callable[[Callable[[Mapping[str, pl.DataFrame]], pl.DataFrame]], pl.DataFrame]


def run_diagnostics(collect: Collect, job: Job) -> Diagnostics:
    """:func:`frame_metrics.diagnose` over partitions: checks first, then summed counts.

    ``collect(fn)`` runs ``fn`` on every partition now and stacks the results.
    """
    if job.spec.validate:
        raise_first(collect(lambda frames: partition_checks(frames, job)))
    return merge_diagnostics(collect(lambda frames: partition_diagnostics(frames, job)), job)
