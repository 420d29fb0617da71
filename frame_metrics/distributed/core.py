"""The polars side of a distributed run, shared by the Spark and Dask adapters.

A distributed run is the single-machine engine run once per bucket of user keys:

1. every frame keyed by user (recommendations, truth, train, a baseline) gets a bucket
   column, a hash of its user key in the key dtype all frames share (:func:`with_bucket`),
   and the adapter co-partitions them by it;
2. item tables (catalog, item features) go whole to every partition;
3. tables over every user (train popularity, the ``by`` groups truth applies to, the
   catalog) are computed first and handed to each partition (:class:`GlobalTables`);
4. each partition runs the engine on its users (:func:`partition_result`): per-user
   rows, or, for ``aggregate=True``, sums that add up over partitions (per-user metric
   sums and counts, rating error sums, item exposures), in one long frame;
5. the adapter sums those per (group, item, name) and :func:`finish` turns the sums into
   the same means and corpus metrics as :meth:`~frame_metrics.engine.Plan.aggregate`.

Checks run the same way (:func:`partition_checks`): each partition counts its failures,
the adapter sums the counts of each check, and :func:`raise_first` raises the error the
single-machine engine would.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from frame_metrics import errors
from frame_metrics.api import _NOT_OPTIONS, _OPTION_DEFAULTS
from frame_metrics.diagnostics import Diagnostics
from frame_metrics.dtypes import unify_keys
from frame_metrics.engine import (
    DEFAULT_ENGINE,
    SEEN,
    Plan,
    Request,
    diagnose,
    query,
    unseen_items,
)
from frame_metrics.extras import N_TRAIN_USERS, popularity_levels, train_counts
from frame_metrics.global_tables import GlobalTables
from frame_metrics.metrics.corpus import exposure_column, users_column
from frame_metrics.metrics.rating import N_PAIRS
from frame_metrics.options import other_tie_rules
from frame_metrics.validation import Failure, dump_parts, find_failures, load_parts

__all__ = [
    "BUCKET",
    "TAG",
    "Job",
    "failure_columns",
    "finish",
    "merge_diagnostics",
    "partition_checked_result",
    "partition_checks",
    "partition_diagnostics",
    "partition_result",
    "raise_first",
    "row_filter",
    "run_diagnostics",
    "split_kwargs",
    "unified_job",
    "with_bucket",
]

#: The bucket of a row's user key; frames are co-partitioned by it.
BUCKET = "_fm_bucket"

# The long frame of sums: (by..., item, NAME, VALUE); item is null but for exposures.
NAME = "_fm_name"
VALUE = "_fm_value"
#: Which kind of sum a row of a partition's aggregate frame holds (see ``_sums``).
KIND = "_fm_kind"
_EXPOSURE = "exposure:"
_USERS = "users:"
#: evaluate's metric and column options with their defaults (frames and flags apart).
_DEFAULTS = {k: v for k, v in _OPTION_DEFAULTS.items() if k not in _NOT_OPTIONS}
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
    """One distributed call: evaluate's options, the item tables and the global tables.

    ``options`` are :func:`frame_metrics.evaluate`'s keyword arguments other than the
    frames, ``aggregate`` and ``validate``; ``schemas`` the polars schema of each
    partitioned frame (so that empty partitions are typed); ``broadcast`` the item
    tables as polars frames.
    """

    options: Mapping[str, Any]
    aggregate: bool
    schemas: Mapping[str, pl.Schema]
    broadcast: Mapping[str, pl.DataFrame] = field(default_factory=dict)
    shared: GlobalTables = field(default_factory=GlobalTables)

    def request(
        self, frames: Mapping[str, pl.DataFrame], *, validate: bool, final: bool = False
    ) -> Request:
        """The engine's request for one partition's frames (``final``: for :func:`finish`).

        The final request reads the catalog's size: the given catalog, else the items
        seen in every partition.
        """
        catalog = self.broadcast.get("catalog")
        if final and catalog is None:
            catalog = self.shared.seen_items
        typed = {
            name: frame.select(pl.col(n).cast(d) for n, d in self.schemas[name].items())
            for name, frame in frames.items()
        }
        return Request(
            typed["recs"],
            typed.get("truth"),
            **{**_DEFAULTS, **self.options},
            train=typed.get("train"),
            baseline=typed.get("baseline"),
            catalog=catalog,
            item_features=self.broadcast.get("item_features"),
            validate=validate,
            global_tables=self.shared,
        )

    def empty(self) -> dict[str, pl.DataFrame]:
        """Empty, typed partition frames (to learn output schemas)."""
        return {name: pl.DataFrame(schema=schema) for name, schema in self.schemas.items()}

    @property
    def by(self) -> list[str]:
        """The ``by`` columns."""
        by = self.options.get("by")
        return [] if by is None else [by] if isinstance(by, str) else list(by)

    @property
    def user(self) -> list[str]:
        """The user key columns."""
        user = self.options.get("user", "user")
        return [user] if isinstance(user, str) else list(user)


def unified_job(
    schemas: Mapping[str, pl.Schema],
    broadcast: Mapping[str, pl.DataFrame],
    options: Mapping[str, Any],
    aggregate: bool,
    *,
    for_diagnose: bool = False,
) -> Job:
    """The job of a call whose user frames have ``schemas`` as read, keys unified.

    The call is checked first as the single-machine engine checks it, on empty frames of
    these schemas: a missing column, a column in two roles or a bad option raises the
    same error here, before any data is read (``for_diagnose``: as ``fm.diagnose`` does).
    """
    probe = Job(options, aggregate, schemas, broadcast)
    request = probe.request(probe.empty(), validate=False)
    if for_diagnose:
        diagnose(request)
    else:
        query(request, aggregate=aggregate)
    keys = [*probe.by, *probe.user, str(options.get("item", "item"))]
    return Job(options, aggregate, key_dtypes(schemas, keys), broadcast)


def refuse_row_order(job: Job, library: str) -> None:
    """``ties="input"`` reads the input row order, which a Spark or Dask frame has not."""
    request = job.request(job.empty(), validate=False)
    if request.columns.score is None:
        return
    for q in request.requests:
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
    errors are the same. Not when something reads every row: ranking by score, rating
    metrics, the default catalog (items at every rank), ``empty="zero"`` (every user
    seen is evaluated).
    """
    request = job.request(job.empty(), validate=False)
    c = request.columns
    if (
        c.score is not None
        or request.truth is None
        or request.max_k == 0
        or request.depth is None
        or "rating" in request.families()
        or ("catalog_size" in request.needs and "catalog" not in job.broadcast)
        or any(q.options.empty != "skip" or q.options.users != "all" for q in request.requests)
        or any(job.schemas["recs"][col].is_float() for col in [*c.keys, c.item])
    ):
        return None  # (float ids: a whole-number check reads every row)
    rank = pl.col(c.rank)
    keep = (rank <= request.max_k) | pl.any_horizontal(
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
    request = job.request(frames, validate=True)
    plan = Plan(request)
    per_user = plan.per_user()  # building the query registers every check
    if job.aggregate:
        plan.aggregate(per_user)
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
    request = job.request(frames, validate=True)
    plan = Plan(request)
    per_user = plan.per_user()
    keys = request.columns.keys
    if plan.first_checks:
        # Bad values that would make the query itself fail (a ragged vector): alone.
        found, _ = find_failures(plan.first_checks, first_only=False, engine=DEFAULT_ENGINE)
        if found:
            return _failure_frame(found).with_columns(pl.lit("failure").alias(TAG))
    if job.aggregate:
        plan.aggregate(per_user)  # registers the aggregate's checks (corpus inputs)
        result = _sums(plan, per_user)
    else:
        result = per_user.select(*keys, *request.metric_columns)
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


def failure_columns() -> list[str]:
    """The columns of the failure rows."""
    return list(_FAILURE_SCHEMA)


def partition_result(frames: Mapping[str, pl.DataFrame], job: Job) -> pl.DataFrame:
    """One partition's per-user rows, or (``aggregate=True``) its long frame of sums."""
    request = job.request(frames, validate=False)
    plan = Plan(request)
    per_user = plan.per_user()
    keys = request.columns.keys
    if not job.aggregate:
        return per_user.select(*keys, *request.metric_columns).collect(engine=DEFAULT_ENGINE)
    return _sums(plan, per_user).collect(engine=DEFAULT_ENGINE)


def _sums(plan: Plan, per_user: pl.LazyFrame) -> pl.LazyFrame:
    """What adds up over partitions, in one frame of three kinds of rows (``KIND``).

    ``counts``: users, rating pairs and ``SEEN`` per group (``SEEN`` alone for corpus
    metrics alone); ``exact``: the exact partial sums of :mod:`frame_metrics.exact_sums`;
    ``long``: item exposures and users within each corpus k, as (by, item, ``NAME``,
    ``VALUE``), integers held exactly in floats.
    """
    r = plan.request
    by, item = list(r.columns.by), r.columns.item
    item_dtype = plan.prepared.top.collect_schema()[item] if plan.prepared else pl.Int64()
    parts: list[pl.LazyFrame] = []
    if r.per_user_columns:
        counts, partials = plan.group_sums(per_user)
        parts.append(counts.with_columns(pl.lit("counts").alias(KIND)))
        parts.append(partials.with_columns(pl.lit("exact").alias(KIND)))
    else:
        parts.append(plan.seen_groups().with_columns(pl.lit("counts").alias(KIND)))
    exposure = plan.exposures()
    if exposure is not None:
        ks = sorted({q.k for q in r.requests if q.metric.family == "corpus"})
        exp_cols = {exposure_column(k): _EXPOSURE + str(k) for k in ks}
        user_cols = {users_column(k): _USERS + str(k) for k in ks}
        items = exposure.select(
            *by, item, *(pl.col(c).cast(pl.Float64).alias(a) for c, a in exp_cols.items())
        )
        parts.append(_long(items, by, item, item_dtype, with_item=True))
        users = exposure.select(
            *by, *(pl.col(c).cast(pl.Float64).alias(a) for c, a in user_cols.items())
        ).unique()
        parts.append(_long(users, by, item, item_dtype, with_item=False))
    return pl.concat(parts, how="diagonal_relaxed")


def _long(
    frame: pl.LazyFrame, by: list[str], item: str, item_dtype: pl.DataType, *, with_item: bool
) -> pl.LazyFrame:
    if not with_item:
        frame = frame.with_columns(pl.lit(None, item_dtype).alias(item))
    long = frame.unpivot(index=[*by, item], variable_name=NAME, value_name=VALUE)
    return long.select(*by, item, NAME, pl.col(VALUE).cast(pl.Float64), pl.lit("long").alias(KIND))


def finish(sums: pl.DataFrame, job: Job) -> pl.DataFrame:
    """The aggregate from every partition's :func:`partition_result` frames, stacked.

    Counts and exact sums add up, so the means are the one-pass means to the last bit;
    corpus metrics come from the summed item exposures, as the engine computes them.
    """
    request = job.request(job.empty(), validate=False, final=True)
    plan = Plan(request)
    by, item = list(request.columns.by), request.columns.item
    corpus = None
    if any(q.metric.family == "corpus" for q in request.requests):
        long = sums.filter(pl.col(KIND) == "long").select(*by, item, NAME, VALUE)
        totals = long.group_by([*by, item, NAME], maintain_order=True).agg(pl.col(VALUE).sum())
        corpus = _corpus(plan, totals, by, item)
    count_cols = [
        *(["n_users"] if request.per_user_columns else []),
        *([N_PAIRS] if plan.ratings is not None else []),
        SEEN,
    ]
    counts = sums.filter(pl.col(KIND) == "counts").select(*by, *count_cols)
    # A group seen in any partition is seen (SEEN > 0), with the users of every one.
    counts = (
        counts.group_by(by).agg(pl.col(count_cols).sum())
        if by
        else counts.select(pl.col(count_cols).sum())
    )
    if not request.per_user_columns:
        assert corpus is not None
        return plan.finish_corpus(counts.lazy(), corpus.lazy()).collect()
    exact = sums.filter(pl.col(KIND) == "exact").select(
        *by,
        *(c for c in sums.columns if c.startswith("_fm_") and c not in (KIND, NAME, VALUE, SEEN)),
    )
    return plan.finish_aggregate(
        (counts.lazy(), exact.lazy()), None if corpus is None else corpus.lazy()
    ).collect()


def _wide(rows: pl.DataFrame, index: list[str], names: list[str]) -> pl.DataFrame:
    """Long (index..., NAME, VALUE) rows as one row per index value, a column per name."""
    rows = rows.select(*index, NAME, VALUE)
    wide = rows.with_columns(pl.lit(0).alias("_fm_one")).pivot(
        on=NAME, index=[*index, "_fm_one"], values=VALUE
    )
    missing = [n for n in names if n not in wide.columns]
    return wide.with_columns(pl.lit(None, pl.Float64).alias(n) for n in missing).select(
        *index, *names
    )


def _corpus(plan: Plan, totals: pl.DataFrame, by: list[str], item: str) -> pl.DataFrame:
    """Corpus metrics per group from the summed exposures and users within each k."""
    r = plan.request
    ks = sorted({q.k for q in r.requests if q.metric.family == "corpus"})
    renames = {_EXPOSURE + str(k): exposure_column(k) for k in ks}
    renames |= {_USERS + str(k): users_column(k) for k in ks}
    exposures = _wide(
        totals.filter(pl.col(NAME).str.starts_with(_EXPOSURE)),
        [*by, item],
        [_EXPOSURE + str(k) for k in ks],
    )
    users = _wide(
        totals.filter(pl.col(NAME).str.starts_with(_USERS)), by, [_USERS + str(k) for k in ks]
    )
    exposures = exposures.rename(renames, strict=False).with_columns(
        pl.col(exposure_column(k)).fill_null(0).cast(pl.Int64) for k in ks
    )
    users = users.rename(renames, strict=False).with_columns(
        pl.col(users_column(k)).fill_null(0).cast(pl.Int64) for k in ks
    )
    joined = exposures.join(users, on=by, how="left") if by else exposures.join(users, how="cross")
    return plan.corpus_from(joined.lazy()).collect()


def global_tables(
    job: Job,
    collect_sums: Callable[
        [Callable[[Mapping[str, pl.DataFrame]], pl.DataFrame], tuple[str, ...]], pl.DataFrame
    ],
    distinct_groups: Callable[[list[str]], pl.DataFrame],
    *,
    has_recs: Callable[[], bool],
    validate: bool,
) -> GlobalTables:
    """The tables over every user a partition reads (eager: small results only).

    ``collect_sums(fn, names)`` runs ``fn`` on every partition of the frames ``names``
    and returns the results concatenated; ``distinct_groups(cols)`` the distinct values of recs' columns.
    """
    request = job.request(job.empty(), validate=False)
    c = request.columns
    popularity = n_train = groups = None
    if "popularity" in request.needs:
        train_schema = job.schemas["train"]
        train_by = [b for b in c.by if b in train_schema]

        def counts(frames: Mapping[str, pl.DataFrame]) -> pl.DataFrame:
            train = frames["train"].lazy()  # a DataFrame, or a LazyFrame (local buckets)
            per_item, n_users = train_counts(train, train_by, c)
            per_item = per_item.select(
                *train_by, c.item, pl.col("_fm_popularity").cast(pl.Float64).alias(VALUE)
            )
            users = n_users.select(
                *train_by,
                pl.lit(None, train_schema[c.item]).alias(c.item),
                pl.col(N_TRAIN_USERS).cast(pl.Float64).alias(VALUE),
            )
            return pl.concat([per_item, users]).collect(engine=DEFAULT_ENGINE)

        summed = collect_sums(counts, ("train",))
        totals = summed.group_by([*train_by, c.item]).agg(pl.col(VALUE).sum())
        per_item = totals.filter(pl.col(c.item).is_not_null()).select(
            *train_by, c.item, pl.col(VALUE).cast(pl.Int64).alias("_fm_popularity")
        )
        n_train = totals.filter(pl.col(c.item).is_null()).select(
            *train_by, pl.col(VALUE).cast(pl.Int64).alias(N_TRAIN_USERS)
        )
        no_train = n_train.height == 0 or n_train[N_TRAIN_USERS].sum() == 0
        if validate and no_train and has_recs():
            raise errors.InvalidValueError(
                "train: expected at least one row in train (novelty, arp and aplt read item "
                "popularity from it), found an empty frame",
                frame="train",
            )
        head_share = request.options.head_share
        popularity = popularity_levels(per_item.lazy(), train_by, c.item, head_share).collect()
    truth_schema = job.schemas.get("truth")
    missing = [b for b in c.by if truth_schema is not None and b not in truth_schema]
    if missing:
        groups = distinct_groups(missing)
    seen = None
    if "catalog_size" in request.needs and "catalog" not in job.broadcast:

        def items(frames: Mapping[str, pl.DataFrame]) -> pl.DataFrame:
            dtype = job.schemas["recs"][c.item]
            # As the engine's default catalog: the items of recs (every rank), truth, train.
            seen = [f.lazy() for f in frames.values()]
            items = pl.concat(f.select(pl.col(c.item).cast(dtype, strict=False)) for f in seen)
            return items.unique().collect(engine=DEFAULT_ENGINE)

        names = tuple(n for n in ("recs", "truth", "train") if n in job.schemas)
        seen = collect_sums(items, names).unique().drop_nulls()
    largest = None
    if any(q.metric.name == "err" and q.options.max_relevance is None for q in request.requests):
        source = "truth" if "truth" in job.schemas else "recs"

        def most(frames: Mapping[str, pl.DataFrame]) -> pl.DataFrame:
            relevance = pl.col(c.relevance).cast(pl.Float64).max().alias(VALUE)
            return frames[source].lazy().select(relevance).collect(engine=DEFAULT_ENGINE)

        largest = collect_sums(most, (source,)).select(pl.col(VALUE).max()).item()
    return GlobalTables(
        popularity, n_train, groups, seen, None if largest is None else float(largest)
    )


_PART = "_fm_part"
_TOTALS = (
    "n_users",
    "users_without_relevant",
    "users_without_recommendations",
    "pairs_without_rating",
    "pairs_without_prediction",
    "users_not_in_truth",
    "lists_with_rank_gaps",
)


def partition_diagnostics(frames: Mapping[str, pl.DataFrame], job: Job) -> pl.DataFrame:
    """One partition's diagnostics as rows that add up (totals, per group, unseen items)."""
    request = job.request(frames, validate=False)
    found = diagnose(request)
    totals: dict[str, Any] = {name: getattr(found, name) for name in _TOTALS}
    totals |= {f"dup:{f}": n for f, n in found.duplicates_resolved.items()}
    totals |= {f"tie@{k}": n for k, n in found.ties_at_cutoff.items()}
    totals |= {f"within@{k}": n for k, n in found.ties_within_cutoff.items()}
    totals |= {f"short@{k}": n for k, n in found.short_lists.items()}
    totals["longest_list"] = found.longest_list  # a maximum over partitions, not a sum
    # Typed even when None (no list in the partition), so partitions' rows stack.
    parts = [
        pl.DataFrame([totals]).with_columns(
            pl.col("longest_list").cast(pl.Int64), pl.lit("totals").alias(_PART)
        )
    ]
    if found.per_group.width:
        parts.append(found.per_group.with_columns(pl.lit("group").alias(_PART)))
    if "popularity" in request.needs:
        prepared = request.prepared()
        unseen = unseen_items(request, prepared).collect()
        parts.append(unseen.with_columns(pl.lit("unseen").alias(_PART)))
    return pl.concat(parts, how="diagonal_relaxed")


def merge_diagnostics(rows: pl.DataFrame, job: Job) -> Diagnostics:
    """Every partition's :func:`partition_diagnostics` rows as one :class:`Diagnostics`."""
    request = job.request(job.empty(), validate=False)
    by, item = list(request.columns.by), request.columns.item
    totals = rows.filter(pl.col(_PART) == "totals")
    additive = ("dup:", "tie@", "within@", "short@")
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
    if "popularity" in request.needs:
        train_by = [b for b in by if b in job.schemas.get("train", {})]
        seen = rows.filter(pl.col(_PART) == "unseen").select(*train_by, item).unique()
        unseen = seen.height
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
    )


def split_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
    """Evaluate's keywords for an adapter's run: frames and flags apart from options."""
    named = ("validate", "catalog", "train", "item_features", "baseline")
    out = {name: kwargs.pop(name, None) for name in named}
    out["validate"] = True if out["validate"] is None else out["validate"]
    return {**out, "options": kwargs}


Collect = Callable[[Callable[[Mapping[str, pl.DataFrame]], pl.DataFrame]], pl.DataFrame]


def run_diagnostics(collect: Collect, job: Job, *, validate: bool) -> Diagnostics:
    """:func:`frame_metrics.diagnose` over partitions: checks first, then summed counts.

    ``collect(fn)`` runs ``fn`` on every partition now and stacks the results.
    """
    if validate:
        raise_first(collect(lambda frames: partition_checks(frames, job)))
    return merge_diagnostics(collect(lambda frames: partition_diagnostics(frames, job)), job)
