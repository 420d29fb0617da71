"""``fm.Accumulator``: an exact evaluation updated batch by batch, merged, read any time.

Definition sheet section 11. Each update is evaluated as one partition of a
partitioned run is (:mod:`frame_metrics.distributed.core`): its checks, then the frame
of what adds up over partitions (user counts, the exact partial sums of the means of
:mod:`frame_metrics.numerics`, each group-level family's partials). The state is those
frames, added up as they come (:func:`_compacted`: integers and exact partials, so the
order of the updates and of the merges changes no bit), and ``compute()`` finishes them
as the partitioned run finishes its partitions': the aggregate of ``fm.evaluate`` over
every row, to the bit.

The tables read over every user (``train``, ``catalog``, ``item_features``,
``item_groups``, and ``baseline`` and ``exclude``, which are read per user) are given at
construction; what is computed over every user from them (train popularity, the
propensities from train) is computed once, at the first update. A table built from
update rows that only a family's finish reads (``Family.partition_reads`` leaves it out:
coverage's default catalog) is built at ``compute()`` from every update's share of it
(distinct rows: O(items)). One a user's value reads (err's default g_max, a merit
target, truth without the ``by`` columns) is exact only once every row is in: the rows
read are then kept and evaluated at ``compute()`` (``RowsHeldWarning`` names what to
pass instead).
"""

from __future__ import annotations

import hashlib
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import polars as pl

from frame_metrics import api
from frame_metrics.distributed import adapter_for, core
from frame_metrics.errors import (
    InvalidOptionError,
    InvalidValueError,
    RowsHeldWarning,
    UnknownKeywordError,
    warn,
)
from frame_metrics.family import Partitioned
from frame_metrics.frames import Source, to_lazy
from frame_metrics.global_tables import GlobalTables
from frame_metrics.keywords import EXTRA_INPUTS, keywords
from frame_metrics.numerics import is_int, sum_partials
from frame_metrics.planner import SEEN, families_of, reads

__all__ = ["Accumulator"]

#: evaluate's keywords an accumulator does not take: it always aggregates, one update at
#: a time.
_NOT_TAKEN = ("aggregate", "buckets", "progress")

#: A family's table over every user, from the frames named (``Partitioned.collect``).
Collector = Callable[[Mapping[str, pl.DataFrame]], pl.DataFrame]

#: Updates kept apart before their sums are added up (each a small frame).
_COMPACT_EVERY = 16


class Accumulator:
    """Exact metrics over batches of users: ``update``, ``merge``, ``compute`` at any time.

    Parameters
    ----------
    metrics
        As :func:`frame_metrics.evaluate`'s: names, with or without a cutoff and options.
    k
        As :func:`frame_metrics.evaluate`'s: the cutoffs of the names without one.
    check_repeats
        Refuse a user (a (``by`` group, user) pair) seen in an earlier update, or in an
        accumulator merged in: every row of a user belongs in one update. ``False``
        skips the check and the memory of the users seen.
    keep_per_user
        Also keep each user's values, for :meth:`per_user`.
    buffer_rows
        Updates are held back until they hold this many rows (recs and truth), then
        evaluated together, as one partition: many small batches cost about what one
        call on their rows costs. Their input checks run then (an error names the frame
        and an example row, as ``fm.evaluate``'s, and discards the updates held with
        it); ``compute``, ``merge`` and pickling evaluate what is held. 0: every update
        at once. A user repeated within the held updates is refused at its update; one
        seen in an update evaluated before, when the held updates are evaluated.
    **options
        Every other keyword of :func:`frame_metrics.evaluate` but ``aggregate``,
        ``buckets`` and ``progress``: columns, options, a convention, and the tables,
        given here once for every update.

    Examples
    --------
    Spec example 1 in two updates of one user each: user 1 liked a, b, c, h, i, j and
    got [a, b, c, d, e]; user 2 liked a and got [x, a].

    >>> import polars as pl
    >>> import frame_metrics as fm
    >>> acc = fm.Accumulator(["precision", "recall"], k=5)
    >>> acc.update(pl.DataFrame({"user": 1, "item": list("abcde"), "rank": range(1, 6)}),
    ...            pl.DataFrame({"user": 1, "item": list("abchij"), "relevance": 1}))
    >>> acc.update(pl.DataFrame({"user": 2, "item": ["x", "a"], "rank": [1, 2]}),
    ...            pl.DataFrame({"user": 2, "item": ["a"], "relevance": 1}))
    >>> acc.update(pl.DataFrame({"user": 2, "item": ["y"], "rank": [1]}),
    ...            pl.DataFrame({"user": 2, "item": ["y"], "relevance": 1}))
    Traceback (most recent call last):
    ...
    frame_metrics.errors.InvalidValueError: update: expected users not seen in an earlier update (every row of a user in one update), got 1 seen before, e.g. user=2; pass check_repeats=False to skip the check
    >>> acc.compute().row(0)  # precision (3/5 + 1/5) / 2, recall (3/6 + 1/1) / 2
    (2, 0.4, 0.75)
    """

    def __init__(
        self,
        metrics: str | Iterable[str] | None = None,
        k: int | Iterable[int] | None = None,
        *,
        check_repeats: bool = True,
        keep_per_user: bool = False,
        buffer_rows: int = 4_000_000,
        **options: Any,
    ) -> None:
        taken = {kw.name for kw in keywords(builtin=False)} - set(_NOT_TAKEN)
        unknown = sorted(set(options) - taken)
        if unknown:
            raise UnknownKeywordError("Accumulator", unknown, sorted(taken))
        self._arguments: dict[str, Any] = {
            **{n: p for n, p in api._DEFAULTS.items() if n not in _NOT_TAKEN},
            **options,
            "metrics": list(metrics)
            if isinstance(metrics, Iterable) and not isinstance(metrics, str)
            else metrics,
            "k": list(k) if isinstance(k, Iterable) else k,
        }
        self._check_repeats = api._flag("check_repeats", check_repeats)
        self._keep_per_user = api._flag("keep_per_user", keep_per_user)
        if not is_int(buffer_rows) or int(buffer_rows) < 0:
            raise InvalidOptionError(
                f"expected an integer >= 0, got {buffer_rows!r}", option="buffer_rows"
            )
        self._buffer_rows = int(buffer_rows)
        self._pending: list[dict[str, pl.DataFrame]] = []
        self._pending_rows = 0
        self._held_users: list[pl.DataFrame] = []
        # Every option is judged now, before any update: as evaluate with truth judges it.
        spec, _ = api._spec(True, api._arguments(self._arguments, {}))
        # Each table converted once, its columns the call reads: what every update and
        # the digest that tells two accumulators' tables apart read.
        columns = reads(spec)
        for extra in EXTRA_INPUTS:
            frame = self._arguments.get(extra.name)
            if frame is not None:
                source = to_lazy(frame, extra.name, columns[extra.name])
                self._arguments[extra.name] = _read(source, columns[extra.name])
        self._tables = _fingerprints(self._arguments)
        self._long_table: bool | None = None
        self._kind: tuple[str, bool] | None = None
        self._schemas: dict[str, pl.Schema] | None = None
        self._keyed: dict[str, pl.DataFrame] = {}
        self._sums: list[pl.DataFrame] = []
        self._per_user: list[pl.DataFrame] = []
        self._seen: pl.DataFrame | None = None
        self._job: core.Job | None = None
        self._users_job: core.Job | None = None
        # Each table built at the end from every update's share of it (sheet 11: the
        # default catalog's items), and the rows kept when a user's values read a table
        # over rows still to come (err's default g_max, ...).
        self._parts: list[pl.DataFrame] | None = None
        self._holds_rows = False
        self._rows: list[dict[str, pl.DataFrame]] = []

    # -- what it computes from -------------------------------------------------------------

    def _call(self, long_table: bool) -> tuple[Any, dict[str, Any]]:
        """The Spec of the updates (with or without truth) and the extra frames."""
        return api._spec(None if long_table else True, api._arguments(self._arguments, {}))

    def _start(self, long_table: bool, frames: Mapping[str, pl.DataFrame], kind: Source) -> None:
        """The first update: the frames' dtypes, then the job (:meth:`_build`)."""
        spec, extras = self._call(long_table)
        keyed, _ = core.split_inputs(object(), None, extras)
        keyed.pop("recs")
        tables = {name: self._table(name) for name in keyed}
        schemas = {name: frame.schema for name, frame in {**frames, **tables}.items()}
        keys = [*spec.columns.keys, spec.columns.item]
        self._schemas = core.key_dtypes(schemas, keys)
        self._long_table = long_table
        self._kind = (kind.kind, kind.arrow_backed)
        self._build()
        if self._holds_rows:
            warn(RowsHeldWarning(_advice(spec, frames), option="Accumulator"))

    def _table(self, name: str) -> pl.DataFrame:
        """A table given at construction (converted then: the columns the call reads)."""
        table: pl.DataFrame = self._arguments[name]
        return table

    def _build(self) -> None:
        """The jobs of the updates, and the tables over every user, from the state."""
        assert self._long_table is not None
        assert self._schemas is not None
        spec, extras = self._call(self._long_table)
        keyed, items = core.split_inputs(object(), None, extras)
        keyed.pop("recs")
        self._keyed = {name: self._table(name) for name in keyed}
        broadcast = {name: self._table(name) for name in items}
        probe = core.unified_job(spec, self._schemas, broadcast, True)
        shared, later, self._calls = self._global_tables(probe, None)
        if self._parts is None:
            # What the tables given at construction hold of each table built at the end.
            self._parts = [fn(self._shares(names, None)) for fn, names in self._calls]
        # A table over rows still to come that a user's values read: the rows are kept.
        read = [f.partition_reads(spec) for f in families_of(spec)]
        per_user = {"groups"}.union(*(r for r in read if r is not None))
        self._holds_rows = bool(later) and (None in read or bool(later & per_user))
        self._job = core.Job(spec, True, self._schemas, broadcast, shared)
        self._users_job = core.Job(spec, False, self._schemas, broadcast, shared)
        # Planned once: the columns of an update's sums, and those read of each frame.
        self._sums_schema = core.result_schema(self._job)
        self._reads = reads(spec)

    def _global_tables(
        self, job: core.Job, parts: list[pl.DataFrame] | None
    ) -> tuple[GlobalTables, set[str], list[tuple[Collector, tuple[str, ...]]]]:
        """The tables over every user, those built from update rows, and their collects.

        ``parts``: the stacked share of every update of each table built from update rows
        (None: the first build, these tables as if there were no update).
        """
        spec = job.spec
        truth = job.schemas.get("truth")
        missing = [b for b in spec.columns.by if truth is not None and b not in truth]
        later = {"groups"} if missing else set()
        calls: list[tuple[Collector, tuple[str, ...]]] = []

        def collect(fn: Collector, names: tuple[str, ...]) -> pl.DataFrame:
            if all(n in self._keyed for n in names):
                return fn(self._shares(names, None))
            calls.append((fn, names))
            if parts is None:
                return fn(self._shares(names, None))
            return parts[len(calls) - 1]

        run = Partitioned(job.schemas, tuple(job.broadcast), collect, lambda: True)
        found: dict[str, Any] = {"groups": None}
        for family in families_of(spec):
            before = len(calls)
            tables = family.global_tables(spec, run)
            found |= tables
            if len(calls) > before:
                later |= set(tables)
        return GlobalTables.of(found), later, calls

    def _shares(
        self, names: tuple[str, ...], batch: Mapping[str, pl.DataFrame] | None
    ) -> dict[str, pl.DataFrame]:
        """The frames ``names`` of a collect, the others of them empty.

        ``batch`` None: the tables given at construction; else the batch's update rows.
        """
        assert self._schemas is not None
        out = {}
        for name in names:
            if batch is None:
                frame = self._keyed.get(name)
            else:
                frame = None if name in self._keyed else batch.get(name)
            schema = self._schemas[name]
            out[name] = pl.DataFrame(schema=schema) if frame is None else frame.cast(schema)
        return out

    # -- updates -----------------------------------------------------------------------------

    def update(self, recs: object, truth: object | None = None) -> None:
        """Add a batch of whole users: every row of each of them (recs and truth).

        ``recs`` and ``truth``: any frame kind :func:`frame_metrics.evaluate` takes (a
        Spark or Dask batch is collected, the columns read only), or a mapping of column
        names to numpy arrays or (CPU) torch tensors.
        """
        long_table = truth is None
        if self._long_table is not None and long_table != self._long_table:
            raise InvalidOptionError(
                f"expected every update {'without' if self._long_table else 'with'} truth, as "
                f"the first, got one {'without' if long_table else 'with'} it",
                option="truth",
            )
        spec = self._job.spec if self._job is not None else self._call(long_table)[0]
        columns = self._reads if self._job is not None else reads(spec)
        source = to_lazy(_frame(recs, columns["recs"]), spec.source_label, columns["recs"])
        frames = {"recs": _read(source, columns["recs"])}
        if truth is not None:
            local = _frame(truth, columns["truth"])
            frames["truth"] = _read(to_lazy(local, "truth", columns["truth"]), columns["truth"])
        if self._job is None:
            self._start(long_table, frames, source)
            adapter = adapter_for(recs)
            if adapter is not None:  # a Spark or Dask batch: results in its kind
                self._kind = (adapter.__name__.rpartition(".")[2], False)
        job = self._job
        assert job is not None
        users = _users(frames, job.spec.columns.keys)
        if self._check_repeats:
            # Against the users held back here; against those evaluated before, once per
            # evaluation of the held updates (one scan of the users seen, not one per
            # update).
            _new_users(_stacked(self._held_users), users, "update")
        self._held_users.append(users)
        self._pending.append(frames)
        self._pending_rows += sum(frame.height for frame in frames.values())
        if self._pending_rows >= self._buffer_rows:
            self._flush()

    def _flush(self) -> None:
        """Evaluate the updates held back, as one partition (see ``buffer_rows``).

        A check that fails discards them (their users are not seen: they may come again,
        mended); what was evaluated before stays.
        """
        if not self._pending:
            return
        try:
            self._evaluate_held()
        finally:
            self._pending, self._pending_rows, self._held_users = [], 0, []

    def _evaluate_held(self) -> None:
        job = self._job
        assert job is not None
        assert self._schemas is not None
        held = _stacked(self._held_users)
        seen = self._seen
        if self._check_repeats and held is not None:
            seen = _new_users(seen, held, "update")
        names = list(self._pending[0])
        frames = {
            name: pl.concat(
                [p[name].cast(self._schemas[name], strict=False) for p in self._pending],
                how="vertical_relaxed",
            )
            for name in names
        }
        keys = job.spec.columns.keys
        users = held if held is not None else _users(frames, keys)
        for name, table in self._keyed.items():
            # A user's rows of a per-user table (train, baseline, exclude): this batch's.
            on = [k for k in keys if k in table.columns]
            frames[name] = table.join(users.select(on).unique(), on=on, how="semi")
        if self._holds_rows:
            self._check_alone(frames)
            self._rows.append({name: frames[name] for name in names})
            if len(self._rows) >= _COMPACT_EVERY:
                self._rows = [_stacked_rows(self._rows)]
            self._seen = seen
            return
        rows = core.partition_checked_result(frames, job)
        self._sums.append(core.result_after_checks(rows, self._sums_schema))
        if self._keep_per_user:
            assert self._users_job is not None
            self._per_user.append(core.partition_result(frames, self._users_job))
        if len(self._sums) >= _COMPACT_EVERY:
            self._sums = [
                _compacted(pl.concat(self._sums, how="diagonal_relaxed"), job, self._sums_schema)
            ]
        assert self._parts is not None
        self._parts = [
            pl.concat([part, fn(self._shares(names, frames))], how="vertical_relaxed").unique()
            for part, (fn, names) in zip(self._parts, self._calls, strict=True)
        ]
        self._seen = seen

    def _check_alone(self, frames: Mapping[str, pl.DataFrame]) -> None:
        """The input checks of a batch whose rows are kept: ``evaluate`` on it alone.

        Its values are not kept (they read tables over every row); its warnings are
        those the call at ``compute`` gives.
        """
        arguments = {n: v for n, v in self._arguments.items() if n not in ("recs", "truth")}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            api.evaluate(frames["recs"], frames.get("truth"), aggregate=True, **arguments)

    def merge(self, other: Accumulator) -> Accumulator:
        """Add ``other``'s state into this one; returns this one.

        Both must be built with the same metrics, options and tables (an
        :class:`~frame_metrics.errors.InvalidOptionError` names the difference); with
        ``check_repeats``, no user may be in both.
        """
        if not isinstance(other, Accumulator):
            raise InvalidOptionError(f"expected an Accumulator, got {type(other).__name__}")
        for name in sorted(set(self._arguments) | set(other._arguments)):
            if name in self._tables or name in other._tables:
                if self._tables.get(name) != other._tables.get(name):
                    raise InvalidOptionError(
                        f"expected accumulators of the same tables, got two {name} tables",
                        option="merge",
                    )
                continue
            mine, theirs = self._arguments.get(name), other._arguments.get(name)
            if mine != theirs:
                raise InvalidOptionError(
                    f"expected accumulators of the same call, got {name}={mine!r} and "
                    f"{name}={theirs!r}",
                    option="merge",
                )
        if other._job is None:
            return self
        other._flush()
        self._flush()
        if self._job is None:
            self._long_table, self._kind = other._long_table, other._kind
            self._schemas = other._schemas
            self._build()
        if other._long_table != self._long_table:
            raise InvalidOptionError(
                "expected accumulators both with truth or both without, got one of each",
                option="merge",
            )
        if other._holds_rows != self._holds_rows:
            raise InvalidOptionError(
                "expected accumulators that both keep rows or both keep sums, got one of "
                "each (truth with the by columns in one, without them in the other)",
                option="merge",
            )
        job = self._job
        assert job is not None
        if self._check_repeats and other._seen is not None:
            self._seen = _new_users(self._seen, other._seen, "merge")
        if self._holds_rows:
            self._rows = [_stacked_rows([*self._rows, *other._rows])]
            return self
        stacked = pl.concat([*self._sums, *other._sums], how="diagonal_relaxed")
        self._sums = [_compacted(stacked, job, self._sums_schema)]
        self._per_user += other._per_user
        assert self._parts is not None
        assert other._parts is not None
        self._parts = [
            pl.concat([mine, theirs], how="vertical_relaxed").unique()
            for mine, theirs in zip(self._parts, other._parts, strict=True)
        ]
        return self

    # -- results -----------------------------------------------------------------------------

    def compute(self) -> Any:
        """The aggregate (``n_users`` and the means per ``by`` group) of every update so far.

        Bit for bit ``fm.evaluate(all rows, aggregate=True)``; a frame of the kind of the
        first update (polars for a LazyFrame or a mapping of arrays).
        """
        if self._job is None:
            return self._empty(aggregate=True)
        self._flush()
        if self._holds_rows:
            return self._give_back(self._evaluate_rows(aggregate=True))
        job = self._job
        if self._calls:
            # The tables built at the end (the default catalog): every update's share.
            shared, _, _ = self._global_tables(job, self._parts)
            job = replace(job, shared=shared)
        stacked = pl.concat(self._sums, how="diagonal_relaxed") if self._sums else None
        if stacked is None:
            stacked = pl.DataFrame(schema=self._sums_schema)
        return self._give_back(core.finish(stacked, job))

    def _evaluate_rows(self, *, aggregate: bool) -> pl.DataFrame:
        """``evaluate`` on the rows kept (see ``_holds_rows``)."""
        if not self._rows:
            return self._empty(aggregate=aggregate)
        frames = _stacked_rows(self._rows)
        self._rows = [frames]
        arguments = {n: v for n, v in self._arguments.items() if n not in ("recs", "truth")}
        out: pl.DataFrame = api.evaluate(
            frames["recs"], frames.get("truth"), aggregate=aggregate, **arguments
        )
        return out

    def per_user(self) -> Any:
        """Each user's values so far (``keep_per_user=True``), sorted by key."""
        if not self._keep_per_user:
            raise InvalidOptionError(
                "expected an accumulator built with keep_per_user=True, got one without",
                option="keep_per_user",
            )
        if self._job is None:
            return self._empty(aggregate=False)
        self._flush()
        if self._holds_rows:
            rows = self._evaluate_rows(aggregate=False)
            return self._give_back(rows.sort(self._job.spec.columns.keys, nulls_last=True))
        frame = pl.concat(self._per_user, how="vertical_relaxed") if self._per_user else None
        if frame is None:
            frame = pl.DataFrame(schema=core.result_schema(self._users_job))  # type: ignore[arg-type]
        return self._give_back(frame.sort(self._job.spec.columns.keys, nulls_last=True))

    def _give_back(self, frame: pl.DataFrame) -> Any:
        """The result in the kind of the first update's recs (polars for a LazyFrame)."""
        if self._kind is None or self._kind[0] == "polars-lazy":
            return frame
        kind, arrow_backed = self._kind
        if kind in ("spark", "dask"):
            return _distributed_like(kind, frame)
        return Source(frame.lazy(), kind, arrow_backed).give_back(frame)  # type: ignore[arg-type]

    def _empty(self, *, aggregate: bool) -> pl.DataFrame:
        """What evaluate gives on empty input: no row, typed."""
        spec, _ = self._call(False)
        c, columns = spec.columns, reads(spec)
        ints = {*c.by, *c.user, c.item, c.rank, *([c.sample] if c.sample else [])}

        def empty(names: Iterable[str]) -> pl.DataFrame:
            return pl.DataFrame(
                schema={n: pl.Int64 if n in ints else pl.Float64 for n in sorted(names)}
            )

        arguments = {n: v for n, v in self._arguments.items() if n not in ("recs", "truth")}
        recs, truth = empty(columns["recs"]), empty(columns["truth"])
        out: pl.DataFrame = api.evaluate(recs, truth, aggregate=aggregate, **arguments)
        return out

    # -- pickling: the Spec and the jobs are rebuilt from the arguments ----------------------

    def __getstate__(self) -> dict[str, Any]:
        self._flush()  # the state pickled is sums only
        state = dict(self.__dict__)
        for name in ("_job", "_users_job", "_keyed", "_sums_schema", "_reads", "_calls"):
            state.pop(name, None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._job = self._users_job = None
        self._keyed = {}
        if self._long_table is not None:
            self._build()


def _frame(value: object, read: Iterable[str]) -> object:
    """A batch as a local frame, else itself.

    A mapping of numpy arrays or CPU torch tensors: a polars frame. A Spark or Dask
    frame: collected, the columns ``read`` only (every column if one is missing, for the
    checks' error to list them).
    """
    adapter = adapter_for(value)
    if adapter is not None:
        have = list(value.columns)  # type: ignore[attr-defined]
        wanted = [c for c in have if c in set(read)]
        if len(wanted) == len(set(read)):
            value = value.select(wanted) if adapter.__name__.endswith("spark") else value[wanted]  # type: ignore[attr-defined,index]
        return adapter.to_polars(value)
    if not isinstance(value, Mapping):
        return value
    columns: dict[str, Any] = {}
    for name, column in value.items():
        # A torch tensor: its numpy view (CPU; detached, as a metric reads no gradient).
        detach = getattr(column, "detach", None)
        columns[str(name)] = detach().cpu().numpy() if callable(detach) else column
    return pl.DataFrame(columns)


def _distributed_like(kind: str, frame: pl.DataFrame) -> Any:
    """A result as a frame of a Spark or Dask batch's kind (Spark: the active session)."""
    if kind == "dask":
        from frame_metrics.distributed import dask as adapter

        return adapter.like(None, frame)
    from pyspark.sql import SparkSession

    from frame_metrics.distributed import spark as adapter  # type: ignore[no-redef]

    # ``like`` reads its input frame's session only.
    session = SparkSession.getActiveSession() or SparkSession.builder.getOrCreate()
    return adapter.like(SimpleNamespace(sparkSession=session), frame)


def _read(source: Source, columns: Iterable[str]) -> pl.DataFrame:
    """The columns the call reads of a batch, now (others are not converted).

    With one of them missing, every column that converts: the checks' error then lists
    them all.
    """
    schema = source.lazy.collect_schema()
    wanted = [c for c in schema if c in set(columns)]
    if len(wanted) < len(set(columns)):
        whole = source.lazy if source.every_column is None else source.every_column()
        return whole.collect()
    return source.lazy.select(wanted).collect()


def _users(frames: Mapping[str, pl.DataFrame], keys: list[str]) -> pl.DataFrame:
    """The distinct (``by``, user) keys of a batch's recs and truth."""
    parts = [f.select(k for k in keys if k in f.columns) for f in frames.values()]
    full = [p for p in parts if p.width == len(keys)]
    return pl.concat(full, how="vertical_relaxed").unique() if full else pl.DataFrame()


def _new_users(seen: pl.DataFrame | None, batch: pl.DataFrame, where: str) -> pl.DataFrame:
    """``seen`` with ``batch``'s users, which must be new."""
    if seen is None or seen.height == 0:
        return batch
    batch = batch.cast(dict(seen.schema), strict=False)  # type: ignore[arg-type]
    # The batch is the small side: its keys are hashed, the users seen only scanned.
    repeated = seen.join(batch, on=batch.columns, how="semi", nulls_equal=True)
    if repeated.height:
        example = ", ".join(f"{k}={v!r}" for k, v in repeated.row(0, named=True).items())
        raise InvalidValueError(
            f"expected users not seen in an earlier update (every row of a user in one "
            f"update), got {repeated.height} seen before, e.g. {example}; pass "
            "check_repeats=False to skip the check",
            option=where,
        )
    return pl.concat([seen, batch], how="vertical_relaxed")


def _stacked_rows(batches: list[dict[str, pl.DataFrame]]) -> dict[str, pl.DataFrame]:
    """Kept batches of rows as one (each frame stacked)."""
    return {
        name: pl.concat([b[name] for b in batches], how="vertical_relaxed") for name in batches[0]
    }


def _stacked(frames: list[pl.DataFrame]) -> pl.DataFrame | None:
    """Frames of one schema, stacked (None: no frame)."""
    return pl.concat(frames, how="vertical_relaxed") if frames else None


def _compacted(stacked: pl.DataFrame, job: core.Job, schema: pl.Schema) -> pl.DataFrame:
    """Several updates' frames of sums added up, still frames of sums (no bit changes)."""
    spec = job.spec
    by = list(spec.columns.by)
    kind = pl.col(core.KIND)
    parts = []
    from frame_metrics.families import FAMILIES

    plan = job.plan(job.empty(), validate=False)
    counts = stacked.filter(kind == "counts")
    count_cols = [*(plan.count_names() if spec.per_user_columns else []), SEEN]
    parts.append(
        (
            counts.group_by(by).agg(pl.col(count_cols).sum())
            if by
            else counts.select(pl.col(count_cols).sum())
        ).with_columns(pl.lit("counts").alias(core.KIND))
    )
    if spec.per_user_columns:
        exact = stacked.filter(kind == "exact")
        cols = [c for c in exact.columns if c.startswith("_fm_") and c not in (core.KIND, SEEN)]
        partials = exact.select(*by, *cols).lazy()
        parts.append(
            sum_partials(partials, by).collect().with_columns(pl.lit("exact").alias(core.KIND))
        )

    for name, partial in plan.partials().items():
        own = partial.collect_schema()
        rows = stacked.filter(kind == name).select(pl.col(c).cast(d) for c, d in own.items())
        parts.append(FAMILIES[name].combine(spec, rows).with_columns(pl.lit(name).alias(core.KIND)))
    out = pl.concat(parts, how="diagonal_relaxed")
    # The columns of a partition's sums, in order: what finish reads.
    return out.select(
        pl.col(c).cast(d) if c in out.columns else pl.lit(None, d).alias(c)
        for c, d in schema.items()
    )


def _fingerprints(arguments: Mapping[str, Any]) -> dict[str, str]:
    """A digest of each table given (to tell two accumulators' tables apart in merge).

    The tables are the polars frames the constructor converted.
    """
    out = {}
    for extra in EXTRA_INPUTS:
        table = arguments.get(extra.name)
        if table is None:
            continue
        digest = hashlib.sha256(str(table.schema).encode())
        digest.update(table.hash_rows(seed=0).sort().to_numpy().tobytes())
        out[extra.name] = digest.hexdigest()
    return out


def _advice(spec: Any, frames: Mapping[str, pl.DataFrame]) -> str:
    """Why the rows are kept until ``compute``, and what to pass to keep sums only."""
    why, instead = [], []
    err = [q.column for q in spec.requests if "max_relevance" in q.metric.reads()]
    if any(q.options.max_relevance is None for q in spec.requests if q.column in err):
        why.append(f"{', '.join(err)} read g_max, by default the largest relevance of all truth")
        instead.append("max_relevance=")
    if "catalog" not in spec.frames and "exposure" in spec.families:
        why.append("the exposure metrics read the catalog, by default every row's items")
        instead.append("catalog=")
    if any(q.options.parity_target == "merit" for q in spec.requests):
        why.append("parity_target='merit' counts every user's truth rows")
        instead.append("another parity_target")
    truth = frames.get("truth")
    missing = [b for b in spec.columns.by if truth is not None and b not in truth.columns]
    if missing:
        why.append(f"truth without the by columns {missing!r} applies to groups updates bring")
        instead.append("truth with them")
    if not why:
        why.append("a metric reads a table over the rows of every user")
    said = "; ".join(why)
    remedy = f"; pass {', '.join(instead)} to keep sums only" if instead else ""
    return (
        f"{said}: a table over every user's rows, which later updates change, so the rows "
        f"read are kept until compute() (memory grows with them){remedy}"
    )
