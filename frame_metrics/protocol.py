"""``fm.split``: the evaluation protocol's splits, filters and report (sheet section 10).

The caller's frame is read at the edge (:mod:`frame_metrics.frames`), labelled by the
polars plan of :mod:`frame_metrics.splits`, and given back in its own kind: a LazyFrame
gives LazyFrames and nothing is collected until the caller collects (its data checks run
then, inside the plan); an eager frame is labelled once, here, and its checks run first.
Spark and Dask frames are split by their engine, each user's rows on one partition.

Examples
--------
>>> import polars as pl
>>> import frame_metrics as fm
>>> events = pl.DataFrame({
...     "user": [1, 1, 1, 2, 2, 3],
...     "item": ["a", "b", "c", "a", "c", "c"],
...     "day": [1, 2, 3, 1, 2, 0],
... })
>>> train, test = fm.split(events, "last_n", time="day")
>>> test.sort("user").rows()
[(1, 'c', 3), (2, 'c', 2)]

User 3 has one event: it stays in train (``min_train=1``), counted in the report.
"""

from __future__ import annotations

import datetime as dt
import difflib
import math
from collections.abc import Iterator, Sequence
from dataclasses import replace
from functools import cached_property
from typing import Any, Final, Literal, Protocol, cast, overload

import polars as pl

from frame_metrics import splits
from frame_metrics.columns import as_names
from frame_metrics.errors import (
    EmptySplitWarning,
    InvalidOptionError,
    InvalidValueError,
    Keyword,
    MissingColumnsError,
    Pass,
    shown,
    warn,
)
from frame_metrics.frames import Source, kind_of, to_lazy
from frame_metrics.numerics import check_seed, is_int, is_real
from frame_metrics.splits import FOLD, METHODS, Plan, SplitOptions

__all__ = ["Folds", "Report", "Split", "split"]

#: The options each method reads besides the keys and filters (ir_measures' idea:
#: each declares its parameters); a non-default value of any other is an error.
READS: dict[str, frozenset[str]] = {
    "last_n": frozenset({"time", "n", "order", "ties", "min_train", "seed"}),
    "ratio": frozenset({"time", "test_share", "order", "ties", "min_train", "seed"}),
    "time": frozenset({"time", "at", "test_share"}),
    "random": frozenset({"time", "test_share", "seed"}),
    "user_kfold": frozenset(
        {"time", "n", "test_share", "n_folds", "order", "ties", "min_train", "seed"}
    ),
    "time_windows": frozenset({"time", "n_folds", "window", "end"}),
}
_DEFAULTS: dict[str, object] = {
    "time": None,
    "n": None,
    "test_share": None,
    "at": None,
    "n_folds": None,
    "window": None,
    "end": None,
    "order": "time",
    "ties": "item",
    "min_train": 1,
    "seed": 0,
}
_CHOICES: dict[str, tuple[str, ...]] = {
    "order": ("time", "random"),
    "ties": ("item", "random"),
    "cold_users": ("drop", "keep"),
    "cold_items": ("drop", "keep"),
    "seen": ("drop", "keep"),
}
#: The engine of the collects done here (eager input, reports): polars' own choice, its
#: streaming engine (measured at 5M rows: 1.3-2x faster than in-memory for every method,
#: since the plan's aggregates are one-row frames joined in). A LazyFrame's caller
#: collects with the engine of their choice.
ENGINE: Final = "auto"
#: The column of ``Folds.test`` naming each row's fold.
FOLD_COLUMN = splits.FOLD_COLUMN


def _options(method: object, given: dict[str, Any]) -> SplitOptions:
    """Check a call's options against what ``method`` reads; fill its defaults."""
    if method not in METHODS:
        hint = difflib.get_close_matches(str(method), METHODS, n=1, cutoff=0.5)
        suffix = f" (did you mean {hint[0]!r}?)" if hint else ""
        raise InvalidOptionError(
            f"expected one of {', '.join(map(repr, METHODS))}, got {shown(method)}{suffix}",
            option="method",
        )
    reads = READS[str(method)]
    for name, default in _DEFAULTS.items():
        value = given[name]
        if name not in reads and value is not default and value != default:
            raise InvalidOptionError(
                f"method {method!r} does not read it (it reads "
                f"{', '.join(sorted(reads))}), got {shown(value)}",
                option=name,
            )
    for name, choices in _CHOICES.items():
        if given[name] not in choices:
            raise InvalidOptionError(
                f"expected one of {', '.join(map(repr, choices))}, got {shown(given[name])}",
                option=name,
            )
    n, share, n_folds = given["n"], given["test_share"], given["n_folds"]
    if n is not None and (not is_int(n) or n < 1):
        raise InvalidOptionError(f"expected an integer >= 1, got {shown(n)}", option="n")
    if share is not None:
        if not is_real(share) or not 0 < float(share) < 1:
            raise InvalidOptionError(
                f"expected a share of the rows in (0, 1), got {shown(share)}",
                option="test_share",
            )
        share = float(share)
    if n_folds is not None and (not is_int(n_folds) or n_folds < 2):
        raise InvalidOptionError(
            f"expected an integer >= 2 (the number of folds), got {shown(n_folds)}",
            option="n_folds",
        )
    min_train = given["min_train"]
    if not is_int(min_train) or min_train < 0:
        raise InvalidOptionError(
            f"expected an integer >= 0, got {shown(min_train)}", option="min_train"
        )
    # Any integer: the seeded hash takes it modulo 2^64.
    seed = check_seed(given["seed"], negative=True)
    if method in ("ratio", "random") and share is None:
        raise InvalidOptionError(
            f"expected the share of rows to test for method {method!r}, e.g. 0.2, got None",
            option="test_share",
        )
    if method == "time" and (given["at"] is None) == (share is None):
        said = "both" if share is not None else "neither"
        raise InvalidOptionError(
            f"expected one of at= (a time: rows from it on are test) and test_share= "
            f"(the latest share of rows) for method 'time', got {said}",
            option="at" if share is None else "test_share",
        )
    if method == "user_kfold" and n is not None and share is not None:
        raise InvalidOptionError(
            "expected one of n= (each user's last n rows) and test_share= (each user's "
            "last share) for method 'user_kfold', got both",
            option="n",
        )
    if method == "time_windows":
        if n_folds is None:
            raise InvalidOptionError(
                "expected the number of windows for method 'time_windows', got None",
                option="n_folds",
            )
        if given["window"] is None:
            raise InvalidOptionError(
                "expected the length of each window (a duration such as '7d' or a "
                "datetime.timedelta, or a number in the time column's unit), got None",
                option="window",
            )
    if method == "user_kfold" and n_folds is None:
        n_folds = 5
    if method in ("last_n", "user_kfold") and n is None and share is None:
        n = 1
    order = given["order"]
    time = given["time"]
    if time is not None and not isinstance(time, str):
        raise InvalidOptionError(f"expected a column name, got {shown(time)}", option="time")
    return SplitOptions(
        method=cast("splits.Method", method),
        user=as_names(given["user"], "user"),
        item=_column_name(given["item"], "item"),
        time=time,
        n=n if method in ("last_n", "user_kfold") else None,
        test_share=share,
        at=given["at"],
        n_folds=n_folds or 1,
        window=given["window"],
        end=given["end"],
        order=order,
        ties=given["ties"],
        min_train=int(min_train),
        cold_users=given["cold_users"],
        cold_items=given["cold_items"],
        seen=given["seen"],
        seed=seed,
    )


def _column_name(value: object, option: str) -> str:
    if not isinstance(value, str):
        raise InvalidOptionError(f"expected a column name, got {shown(value)}", option=option)
    return value


def _needs_time(options: SplitOptions) -> bool:
    if options.method in ("time", "time_windows"):
        return True
    return options.method in splits.PER_USER and options.order == "time"


def _check_schema(options: SplitOptions, schema: pl.Schema, name: str) -> SplitOptions:
    """Columns present, a time column where the method orders by time, of a usable type."""
    available = schema.names()
    wanted = [*options.user, options.item]
    if options.time is not None:
        wanted.append(options.time)
    missing = [c for c in wanted if c not in schema]
    if missing:
        raise MissingColumnsError(name, missing, available)
    if options.time is None and _needs_time(options):
        temporal = [c for c in available if schema[c].is_temporal()]
        advice: list[Any] = []
        if len(temporal) == 1:
            advice = ["; ", Pass("time", temporal[0])]
        if options.method in splits.PER_USER:
            advice += [" (or ", Keyword("order", "random"), ")"]
        why = (
            "it orders each user's rows by time"
            if options.method in splits.PER_USER
            else "it cuts by time"
        )
        raise InvalidOptionError(
            f"expected the time column for method {options.method!r} ({why}), got None; "
            f"available columns: {', '.join(map(repr, available))}",
            *advice,
            option="time",
        )
    if options.time is not None:
        dtype = schema[options.time]
        if not splits.orderable(dtype):
            raise InvalidValueError(
                f"expected column {options.time!r} to be a datetime, date, integer "
                f"or float, found {dtype}; convert it first (text: "
                f"pl.col({options.time!r}).str.to_datetime())",
                option="time",
                frame=name,
                columns=[options.time],
            )
        for option in ("at", "end"):
            value = getattr(options, option)
            if value is not None:
                _check_time_value(option, value, options.time, dtype)
        if options.window is not None:
            unfit = splits.window_fits(options.window, dtype)
            if unfit is not None:
                raise InvalidOptionError(
                    f"{unfit} for time column {options.time!r} ({dtype}), got "
                    f"{shown(options.window)}",
                    option="window",
                )
    if options.method in splits.MULTI_FOLD and FOLD_COLUMN in schema:
        raise InvalidValueError(
            f"{name}: expected no column named {FOLD_COLUMN!r} for a split into folds (the "
            f"test rows of every fold get one), found it; rename it first",
            frame=name,
            columns=[FOLD_COLUMN],
        )
    return options


def time_value(value: object, dtype: pl.DataType) -> object:
    """``value`` as a Python value of a time column of ``dtype`` (text parsed as polars does).

    Examples
    --------
    >>> time_value("2024-01-07", pl.Datetime("us"))
    datetime.datetime(2024, 1, 7, 0, 0)
    >>> time_value("2024-01-07", pl.Date), time_value(5, pl.Float64)
    (datetime.date(2024, 1, 7), 5.0)
    """
    literal = pl.lit(value)
    if isinstance(value, str) and isinstance(dtype, pl.Datetime):
        literal = literal.str.to_datetime(time_unit=dtype.time_unit, time_zone=dtype.time_zone)
    elif isinstance(value, str) and dtype == pl.Date:
        literal = literal.str.to_date()
    return pl.select(literal.cast(dtype, strict=True)).item()


def _check_time_value(option: str, value: object, column: str, dtype: pl.DataType) -> None:
    try:
        time_value(value, dtype)
    except Exception:  # polars says why in its words; we say what fits the column
        kind = (
            "a number"
            if dtype.is_numeric()
            else "a datetime.date"
            if dtype == pl.Date
            else "a datetime.datetime"
        )
        raise InvalidOptionError(
            f"expected {kind}, a value of time column {column!r} ({dtype}), got {shown(value)}",
            option=option,
        ) from None


def _aggregates(options: SplitOptions, schema: pl.Schema) -> list[splits.Aggregate]:
    """The values over every row the data checks read (Spark and Dask compute them too)."""
    out = [splits.Aggregate("rows", "rows")]
    for column in [*options.user, options.item, *([options.time] if options.time else [])]:
        out.append(splits.Aggregate(f"nulls:{column}", "nulls", (column,)))
    if options.time is not None:
        if schema[options.time].is_float():
            out.append(splits.Aggregate(f"nans:{options.time}", "nans", (options.time,)))
        out.append(splits.Aggregate("time_min", "min", (options.time,)))
        out.append(splits.Aggregate("time_max", "max", (options.time,)))
    if options.method == "user_kfold":
        out.append(splits.Aggregate("users", "distinct", options.user))
    return out


def _checks(options: SplitOptions, schema: pl.Schema) -> list[pl.Expr]:
    """The aggregates the data checks read, in one select."""
    out = [a.expr() for a in _aggregates(options, schema)]
    if options.method == "time_windows":
        assert options.time is not None
        largest = pl.col(options.time).max()
        edges = splits.window_edges(options, schema[options.time], largest=largest)
        out.append(edges[-1].alias("first_edge"))
    return out


def _run_checks(found: dict[str, Any], options: SplitOptions, name: str) -> None:
    """Raise the first failed data check; warn of an empty side."""
    if not found["rows"]:
        return  # an empty frame gives empty frames
    for key, value in found.items():
        if key.startswith(("nulls:", "nans:")) and value:
            what, column = key.split(":", 1)
            role = "time" if column == options.time else "key"
            raise InvalidValueError(
                f"{name}: expected no {'null' if what == 'nulls' else 'NaN'} values in "
                f"{role} column {column!r}, found {value} of {found['rows']} rows; drop or "
                "fill them first",
                frame=name,
                columns=[column],
            )
    if options.method == "user_kfold" and found["users"] < options.n_folds:
        raise InvalidOptionError(
            f"expected at most one fold per user, got {options.n_folds} folds for "
            f"{found['users']} users",
            option="n_folds",
        )
    if options.method == "time_windows" and found["first_edge"] < found["time_min"]:
        raise InvalidOptionError(
            f"expected {options.n_folds} windows of {shown(options.window)} to leave earlier "
            f"rows to train the first fold on, got windows from {found['first_edge']} while "
            f"the data starts at {found['time_min']}; pass a shorter window or fewer folds",
            option="window",
        )
    if options.method == "time" and options.at is not None:
        if options.at > found["time_max"]:
            warn(
                EmptySplitWarning(
                    f"{shown(options.at)} is after the last time ({found['time_max']}); "
                    "the test split is empty",
                    option="at",
                )
            )
        elif options.at <= found["time_min"]:
            warn(
                EmptySplitWarning(
                    f"{shown(options.at)} is at or before the first time "
                    f"({found['time_min']}); the train split is empty (every test user is "
                    "cold)",
                    option="at",
                )
            )


def _guarded(
    frame: pl.LazyFrame, options: SplitOptions, schema: pl.Schema, name: str
) -> pl.LazyFrame:
    """``frame`` with its data checks inside the plan: they run when it is collected.

    ``frame`` holds the labels: for ``user_kfold`` the users were dealt into folds
    (``USER_FOLD``, the i-th user to fold i mod n_folds), so the largest fold + 1 is the
    number of users when they are fewer than the folds, and n_folds otherwise: what the
    check reads, without counting a million distinct users again (3 s at 100M rows).
    """
    checks = _checks(options, schema)
    if options.method == "user_kfold":
        dealt = (pl.col(splits.USER_FOLD).max().cast(pl.Int64) + 1).fill_null(0).alias("users")
        checks = [dealt if c.meta.output_name() == "users" else c for c in checks]
    names = [c.meta.output_name() for c in checks]

    def guard(values: pl.Series) -> pl.Series:
        row = values.struct.unnest().row(0, named=True)
        _run_checks(dict(zip(names, row.values(), strict=True)), options, name)
        return pl.Series([True])

    predicate = pl.struct(checks).map_batches(guard, return_dtype=pl.Boolean, returns_scalar=True)
    return frame.filter(predicate)


def _fix_at(options: SplitOptions, dtype: pl.DataType | None) -> SplitOptions:
    """``at``/``end`` as Python values of the time column's type, for comparisons."""
    if dtype is None:
        return options
    at = None if options.at is None else time_value(options.at, dtype)
    end = None if options.end is None else time_value(options.end, dtype)
    return replace(options, at=at, end=end)


# --------------------------------------------------------------------------- results


class Report:
    """What a split did, per fold and side: a frame (``.frame``) and readable text.

    Columns: ``fold``, ``side`` (train, test), ``rows``, ``users``, ``items``,
    ``time_min``, ``time_max`` (the kept rows of that side); on each fold's test row,
    ``dropped_cold_users``, ``dropped_cold_items``, ``dropped_seen`` (test rows each
    filter dropped, a row counted by the first filter that drops it),
    ``users_only_in_train`` (users with train rows and no test row: too few rows under
    ``min_train``, or none in the test rule), ``ties_across_cut`` (test rows whose user
    has a train row at the same time) and ``test_share`` (the fold's test events over
    its train and test events, before the filters).
    """

    def __init__(self, frame: pl.DataFrame, heading: str) -> None:
        self.frame = frame
        self.heading = heading

    def __repr__(self) -> str:
        return self.text()

    def _repr_html_(self) -> str:
        return f"<p>{self.heading}</p>" + self.frame._repr_html_()

    def text(self) -> str:
        """The report as lines of text (what ``print`` shows)."""
        lines = [self.heading]
        multi = self.frame["fold"].n_unique() > 1
        # The counts right-aligned in columns as wide as the report's largest number needs,
        # so that a line fits 80 characters (the printed examples of the docs) where it can.
        width = {
            column: max((len(f"{value:,}") for value in self.frame[column]), default=1)
            for column in ("rows", "users", "items")
        }
        for fold in self.frame["fold"].unique(maintain_order=True).to_list():
            rows = self.frame.filter(pl.col("fold") == fold)
            indent = "  "
            if multi:
                lines.append(f"fold {fold}")
                indent = "    "
            for row in rows.iter_rows(named=True):
                span = (
                    "" if row["time_min"] is None else f"  {row['time_min']} .. {row['time_max']}"
                )
                counts = " ".join(f"{row[column]:>{width[column]},} {column}" for column in width)
                lines.append(f"{indent}{row['side']:<5} {counts}{span}")
            test = rows.filter(pl.col("side") == "test").row(0, named=True)
            lines.append(
                f"{indent}test rows dropped: {test['dropped_cold_users']:,} of cold users, "
                f"{test['dropped_cold_items']:,} of cold items, {test['dropped_seen']:,} "
                "already seen"
            )
            ties, share = test["ties_across_cut"], test["test_share"]
            # no events (an empty frame, a fold without rows): no share to give
            said = "-" if share is None or math.isnan(share) else f"{100 * share:.2f}%"
            lines.append(
                f"{indent}users only in train: {test['users_only_in_train']:,}; ties "
                f"across the cut: {'-' if ties is None else f'{ties:,}'}; test share: "
                f"{said} of events"
            )
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text()


class Sides(Protocol):
    """Where a split's sides come from: the polars plan here, or a Spark or Dask run.

    ``sides(f)``: fold f's train and test in the caller's kind; ``test_rows()``: every
    fold's test rows with a ``fold`` column; ``report(folds)``: the report's frame of
    those folds (:func:`frame_metrics.splits.report_frame`).
    """

    options: SplitOptions

    def sides(self, fold: int) -> tuple[Any, Any]: ...

    def test_rows(self) -> Any: ...

    def report(self, folds: Sequence[int]) -> pl.DataFrame: ...


class _Local:
    """The sides of a polars plan, given back in the caller's kind.

    An eager frame's sides are collected at once (its labels were, at the call); a
    LazyFrame's stay lazy.
    """

    def __init__(self, plan: Plan, source: Source, *, eager: bool) -> None:
        self.options = plan.options
        self._plan = plan
        self._source = source
        self._eager = eager

    def sides(self, fold: int) -> tuple[Any, Any]:
        train, test = self._plan.train(fold), self._plan.test(fold)
        if self._eager:
            train_rows, test_rows = pl.collect_all([train, test], engine=ENGINE)
            return self._source.give_back(train_rows), self._source.give_back(test_rows)
        return self._source.give_back(train), self._source.give_back(test)

    def test_rows(self) -> Any:
        rows = self._plan.test(None).rename({FOLD: FOLD_COLUMN})
        return self._source.give_back(rows.collect(engine=ENGINE) if self._eager else rows)

    def report(self, folds: Sequence[int]) -> pl.DataFrame:
        stats, items = splits.report_parts(self._plan, folds)
        stats_rows, counts = pl.collect_all([stats, splits.item_counts(items)], engine=ENGINE)
        schema = self._plan.labelled.collect_schema()
        return splits.report_frame(stats_rows, counts, self.options, schema)


class Split:
    """One train/test split: unpacks as ``train, test = split``; ``.report`` says what it did.

    ``train`` and ``test`` are frames of the input's kind (a LazyFrame in, LazyFrames
    out; a Spark or Dask DataFrame in, frames of it out), with the input's columns.
    """

    def __init__(self, sides: Sides, fold: int) -> None:
        self._sides = sides
        self._fold = fold
        self.train: Any
        self.test: Any
        self.train, self.test = sides.sides(fold)

    def __iter__(self) -> Iterator[Any]:
        yield self.train
        yield self.test

    def __len__(self) -> int:
        return 2

    @overload
    def __getitem__(self, index: Literal[0, 1]) -> Any: ...
    @overload
    def __getitem__(self, index: int) -> Any: ...
    def __getitem__(self, index: int) -> Any:
        return (self.train, self.test)[index]

    @cached_property
    def report(self) -> Report:
        """Rows, users, items and times of each side; what each filter dropped (reads the data)."""
        options = self._sides.options
        return Report(self._sides.report([self._fold]), splits.description(options))

    def __repr__(self) -> str:
        return f"Split({splits.description(self._sides.options)}; .train, .test, .report)"


class Folds(Sequence[Split]):
    """The folds of a multi-fold split: ``len``, ``folds[f]``, iteration, ``.test``, ``.report``.

    ``folds[f]`` is fold f's :class:`Split` (made when asked for); ``folds.test`` is every
    fold's test rows in one frame with an integer ``fold`` column (0-based), to evaluate
    all folds in one query: ``fm.evaluate(recs, folds.test, by=["model", "fold"])``.
    """

    def __init__(self, sides: Sides) -> None:
        self._sides = sides
        self._splits: dict[int, Split] = {}

    def __len__(self) -> int:
        return self._sides.options.n_folds

    @overload
    def __getitem__(self, index: int) -> Split: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Split]: ...
    def __getitem__(self, index: int | slice) -> Split | Sequence[Split]:
        if isinstance(index, slice):
            return [self[i] for i in range(len(self))[index]]
        if not is_int(index):
            raise TypeError(f"fold indices are integers, got {type(index).__name__}")
        folds = len(self)
        position = index + folds if index < 0 else index
        if not 0 <= position < folds:
            raise IndexError(f"fold {index} of {folds} folds (0 to {folds - 1})")
        if position not in self._splits:
            self._splits[position] = Split(self._sides, position)
        return self._splits[position]

    def __iter__(self) -> Iterator[Split]:
        for fold in range(len(self)):
            yield self[fold]

    @cached_property
    def test(self) -> Any:
        """Every fold's test rows, with an integer ``fold`` column (0-based)."""
        return self._sides.test_rows()

    @cached_property
    def report(self) -> Report:
        """The report of every fold (reads the data)."""
        frame = self._sides.report(list(range(len(self))))
        return Report(frame, splits.description(self._sides.options))

    def __repr__(self) -> str:
        return f"Folds({splits.description(self._sides.options)}; len, [f], .test, .report)"


def split(
    interactions: object,
    method: str,
    *,
    user: str | Sequence[str] = "user",
    item: str = "item",
    time: str | None = None,
    n: int | None = None,
    test_share: float | None = None,
    at: object = None,
    n_folds: int | None = None,
    window: str | dt.timedelta | float | None = None,
    end: object = None,
    order: Literal["time", "random"] = "time",
    ties: Literal["item", "random"] = "item",
    min_train: int = 1,
    cold_users: Literal["drop", "keep"] = "drop",
    cold_items: Literal["drop", "keep"] = "drop",
    seen: Literal["drop", "keep"] = "drop",
    seed: int = 0,
) -> Any:
    """Split interactions into train and test by the definition sheet's section 10.

    Parameters
    ----------
    interactions
        One row per event: the user key, the item, optionally a time column, any other
        columns (kept unchanged). Any frame kind :func:`frame_metrics.evaluate` takes.
        Rows repeating a (user, item, time) are one event, placed together.
    method
        ``"last_n"`` (each user's last ``n`` events; ``n=1`` is leave-one-out),
        ``"ratio"`` (each user's last round_half_up(``test_share`` · n_u) events),
        ``"time"`` (one cut for all: time >= ``at``, or the latest ``test_share`` of
        events, every event at the cut time in test), ``"random"`` (exactly
        round_half_up(``test_share`` · n) events, those of smallest seeded hash),
        ``"user_kfold"`` (users dealt into ``n_folds`` folds by seeded hash; each user of
        fold f gives its last ``n`` or ``test_share`` to fold f's test) or
        ``"time_windows"`` (``n_folds`` consecutive windows of ``window`` ending at the
        largest time or ``end``; fold f tests window f and trains on every row up to its
        left edge). The last two give :class:`Folds`.
    user
        The user key's column, or several (a composite key such as user + session).
    item
        The item column.
    time
        The time column (datetime, date, integer or float), needed where the method
        orders by time.
    n
        ``last_n``, ``user_kfold``: events per user to test (default 1).
    test_share
        ``ratio``, ``time``, ``random``, ``user_kfold``: the share to test, in (0, 1).
    at
        ``time``: rows at or after this time are test (a value of the time column, or
        text polars casts to it: ``"2018-01-01"``).
    n_folds
        ``user_kfold`` (default 5), ``time_windows``: the number of folds, at least 2.
    window
        ``time_windows``: each window's length: a ``datetime.timedelta``, a polars
        duration string (``"7d"``, ``"1mo"``) or a number in the time column's unit.
    end
        ``time_windows``: the last window's right edge (default: the largest time).
    order
        Per-user methods: ``"time"`` (the last events) or ``"random"`` (by the seeded
        hash; no time column needed).
    ties
        Rows of one user at one time: the larger ``"item"`` is the later, or the larger
        seeded hash (``"random"``).
    min_train
        Per-user methods: each user keeps at least this many train events; a user with
        too few stays wholly in train (counted in the report).
    cold_users
        ``"drop"`` (default, as RecTools) or ``"keep"`` (cold-start evaluation): test rows
        of users with no train row in their fold.
    cold_items
        ``"drop"`` (default) or ``"keep"``: test rows of items with no train row in their
        fold.
    seen
        ``"drop"`` (default) or ``"keep"``: test rows of a (user, item) pair already in
        that fold's train.
    seed
        The seed of the seeded hash (splitmix64 of the seed and the key columns).

    Returns
    -------
    Split or Folds
        A :class:`Split` (``train, test = ...``, ``.report``) or :class:`Folds`.

    Notes
    -----
    The sides hold the same rows on every frame kind and engine, not in a promised
    order (as polars' joins): a one-fold train keeps the input's order, test rows and
    the folds' trains need not; sort them when the order matters.

    A Spark or Dask DataFrame is split by its engine, each user's rows in one partition
    and no row brought to the driver: the call computes the values over every row and
    labels the rows (the engine keeps them; on Spark they are cached until the last
    frame given out is dropped), and the sides are DataFrames of the same engine,
    filters of those rows. The report is one more pass, when asked for.

    Examples
    --------
    >>> import polars as pl
    >>> import frame_metrics as fm
    >>> events = pl.DataFrame({
    ...     "user": [1, 1, 1, 1, 2, 2],
    ...     "item": ["a", "b", "c", "d", "a", "b"],
    ...     "t": [1, 2, 2, 3, 1, 2],
    ... })

    Two items at one time: the larger is the later (``ties="item"``), so user 1's last
    two events are d, then c; user 2 keeps one event in train (``min_train=1``) and
    gives b:

    >>> train, test = fm.split(events, "last_n", n=2, time="t", cold_items="keep")
    >>> test.sort("user", "t").rows()
    [(1, 'c', 2), (1, 'd', 3), (2, 'b', 2)]

    By default the test rows of items with no train row are dropped (c and d here),
    and the report counts them:

    >>> split = fm.split(events, "last_n", n=2, time="t")
    >>> split.test.rows()
    [(2, 'b', 2)]
    >>> split.report.frame.select("side", "rows", "dropped_cold_items").rows()
    [('train', 3, None), ('test', 1, 2)]

    Folds of users, evaluated in one query with ``by="fold"``:

    >>> folds = fm.split(events, "user_kfold", n_folds=2, time="t", cold_items="keep")
    >>> len(folds), folds.test.columns
    (2, ['user', 'item', 't', 'fold'])
    """
    given = {
        "user": user,
        "item": item,
        "time": time,
        "n": n,
        "test_share": test_share,
        "at": at,
        "n_folds": n_folds,
        "window": window,
        "end": end,
        "order": order,
        "ties": ties,
        "min_train": min_train,
        "cold_users": cold_users,
        "cold_items": cold_items,
        "seen": seen,
        "seed": seed,
    }
    options = _options(method, given)
    from frame_metrics.distributed import adapter_for

    adapter = adapter_for(interactions)  # imports neither Spark nor Dask
    if adapter is not None:
        return _split_on_engine(adapter, interactions, options, "interactions")
    kind = kind_of(interactions)
    source = to_lazy(interactions, "interactions")
    schema = source.lazy.collect_schema()
    options = _check_schema(options, schema, "interactions")
    options = _fix_at(options, schema[options.time] if options.time else None)
    eager = kind != "polars-lazy"
    frame = source.lazy
    if eager:
        checks = frame.select(_checks(options, schema)).collect(engine=ENGINE)
        _run_checks(checks.row(0, named=True), options, "interactions")
        # The windows' end is read already: the edges are values, not a join.
        found = (
            splits.Globals(end=checks.get_column("time_max")) if splits.reads_end(options) else None
        )
        # The labels in memory first: the two parts are filters and lookups of them.
        base = splits.folds_of_rows(frame, options, schema, found).collect(engine=ENGINE)
        plan = splits.plan_of(base.lazy(), options, schema, found)
        rest, tested = pl.collect_all([plan.rest, plan.tested], engine=ENGINE)
        del base
        plan = Plan(options, rest.lazy(), tested.lazy(), plan.columns, plan.edges)
    else:
        # The checks filter the labelled rows (a guard before the labels trips polars'
        # streaming engine on an empty frame): they run when the caller collects.
        def guard(labelled: pl.LazyFrame) -> pl.LazyFrame:
            return _guarded(labelled, options, schema, "interactions")

        plan = splits.labelled(frame, options, schema, guard=guard)
    return _result(_Local(plan, source, eager=eager))


def _split_on_engine(adapter: Any, frame: Any, options: SplitOptions, name: str) -> Split | Folds:
    """A Spark or Dask frame, split by its engine (:mod:`frame_metrics.distributed.split`).

    The same checks as on one frame, computed by the engine over every row at the call;
    the sides are frames of the input's kind.
    """
    from frame_metrics.distributed import split as on_engine

    schema = adapter.polars_schema(frame)
    options = _check_schema(options, schema, name)
    options = _fix_at(options, schema[options.time] if options.time else None)

    def on_checks(found: pl.DataFrame) -> None:
        _run_checks(_with_first_edge(found, options, schema), options, name)

    sides = on_engine.run(adapter, frame, options, schema, _aggregates(options, schema), on_checks)
    return _result(sides)


def _with_first_edge(
    found: pl.DataFrame, options: SplitOptions, schema: pl.Schema
) -> dict[str, Any]:
    """The engine's check values, and the windows' first edge from the largest time."""
    values = found.row(0, named=True)
    if options.method == "time_windows" and values["rows"]:
        assert options.time is not None
        end = splits.Globals(end=found.get_column("time_max"))
        edges = splits.window_edges(options, schema[options.time], end)
        values["first_edge"] = pl.select(edges[-1]).item()
    return values


def _result(sides: Sides) -> Split | Folds:
    """A :class:`Folds` for a multi-fold method, else fold 0's :class:`Split`."""
    if sides.options.method in splits.MULTI_FOLD:
        return Folds(sides)
    return Split(sides, 0)
