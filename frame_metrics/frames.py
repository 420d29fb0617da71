"""The edge: recognise the caller's frame kind, convert to a LazyFrame and back.

Libraries the caller never imported are never imported here: pandas and DuckDB are looked
up in ``sys.modules``, so a polars-only user pays nothing for their support, and pyarrow
is imported only for Arrow input (to read the columns a call needs) and results.

Only the columns a call reads are converted (:func:`to_lazy`): an unused column of a type
polars cannot read (a DuckDB INTERVAL, an Arrow decimal256) costs nothing and is no error;
a read one is an error naming the column and its type.

Kinds and what comes back:

- polars DataFrame -> DataFrame; LazyFrame -> LazyFrame;
- pandas DataFrame -> pandas DataFrame (pyarrow dtypes if the input had any);
- pyarrow Table, or any object with ``__arrow_c_stream__`` (a RecordBatchReader, a
  nanoarrow stream, ...) -> ``pyarrow.Table``; a stream is read once, here;
- DuckDB relation -> a relation on DuckDB's default connection (``duckdb.from_arrow``):
  DuckDB does not tell which connection a relation belongs to, so to join the result
  with tables of another connection ``con``, bring it there with
  ``con.from_arrow(result.arrow())``.

Examples
--------
>>> import pyarrow as pa
>>> import frame_metrics as fm
>>> recs = pa.table({"user": [1, 1], "item": ["a", "b"], "rank": [1, 2]})
>>> truth = pa.table({"user": [1], "item": ["b"], "relevance": [1]})
>>> fm.evaluate(recs, truth, metrics="recall", k=[1, 2]).to_pylist()
[{'user': 1, 'recall@1': 0.0, 'recall@2': 1.0}]
>>> import duckdb
>>> result = fm.evaluate(duckdb.sql("select * from recs"), truth, metrics="mrr", k=2)
>>> type(result).__name__, result.fetchall()
('DuckDBPyRelation', [(1, 0.5)])
"""

from __future__ import annotations

import functools
import importlib
import sys
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any, Literal

import polars as pl

from frame_metrics.errors import InvalidOptionError, InvalidValueError, MissingDependencyError

__all__ = ["FrameKind", "Source", "kind_of", "to_lazy"]

FrameKind = Literal["polars", "polars-lazy", "pandas", "arrow", "duckdb"]

#: What each kind that goes through Arrow is given back as, for messages.
_ARROW_RESULTS = {"arrow": "a pyarrow Table result", "duckdb": "a DuckDB relation result"}


@dataclass(frozen=True)
class Source:
    """A caller's frame as a LazyFrame, with what is needed to give results back in kind."""

    lazy: pl.LazyFrame
    kind: FrameKind
    arrow_backed: bool = False
    #: Every column of the caller's frame that converts, converted when called: the
    #: columns the call does not read are only placeholders in ``lazy``, and an error's
    #: hint may look at them. None: ``lazy`` holds them all.
    every_column: Callable[[], pl.LazyFrame] | None = None

    def give_back(self, result: pl.DataFrame | pl.LazyFrame) -> Any:
        """Return ``result`` in the kind of frame the caller passed in.

        A pyarrow Table for Arrow input; for a DuckDB relation, a relation on DuckDB's
        default connection, reading a pyarrow Table. Both need pyarrow, imported only here.
        """
        if self.kind == "polars-lazy":
            return result.lazy()
        frame = result if isinstance(result, pl.DataFrame) else result.collect()
        if self.kind == "polars":
            return frame
        if self.kind == "pandas":
            return _without_int128(frame, "pandas").to_pandas(
                use_pyarrow_extension_array=self.arrow_backed
            )
        try:
            importlib.import_module("pyarrow")
        except ImportError:
            raise MissingDependencyError("pyarrow", _ARROW_RESULTS[self.kind], self.kind) from None
        table = _without_int128(frame, "Arrow").to_arrow()
        if self.kind == "arrow":
            return table
        _check_duckdb_names(frame.columns)
        # The caller passed a relation, so duckdb is imported; the table is held by the
        # relation, which can be read any number of times.
        return sys.modules["duckdb"].from_arrow(table)


def _check_duckdb_names(columns: list[str]) -> None:
    """Refuse result columns that differ only in case, which DuckDB cannot tell apart.

    DuckDB matches column names case-insensitively: it would rename ``AP@5`` beside
    ``ap@5`` (``AP@5_1``), and the caller could not find what they asked for.

    Examples
    --------
    >>> _check_duckdb_names(["user", "ap@5", "AP@5"])
    Traceback (most recent call last):
    ...
    frame_metrics.errors.InvalidOptionError: metrics: expected names that differ in more than case for a DuckDB result (DuckDB matches column names case-insensitively), got 'ap@5' and 'AP@5'; ask for them in two calls
    """
    seen: dict[str, str] = {}
    for name in columns:
        first = seen.setdefault(name.lower(), name)
        if first != name:
            raise InvalidOptionError(
                "expected names that differ in more than case for a DuckDB result "
                f"(DuckDB matches column names case-insensitively), got {first!r} and "
                f"{name!r}; ask for them in two calls",
                option="metrics",
                columns=[first, name],
            )


def _without_int128(frame: pl.DataFrame, consumer: str) -> pl.DataFrame:
    """Int128 keys (Int64 ids met UInt64 ids) in a dtype ``consumer`` has: Int64 or UInt64.

    Arrow (so pandas, pyarrow and DuckDB by way of Arrow) has no 128-bit integers. The
    values came from Int64 and UInt64 columns, so one of the two holds them all unless
    both negative and beyond-Int64 ids were given.

    Examples
    --------
    >>> ids = pl.DataFrame({"user": pl.Series([-1, 2], dtype=pl.Int128)})
    >>> _without_int128(ids, "Arrow").schema
    Schema([('user', Int64)])
    >>> _without_int128(ids.with_columns(pl.col("user") * 2**62), "Arrow")
    Traceback (most recent call last):
    ...
    frame_metrics.errors.InvalidValueError: expected ids that Arrow can hold in column 'user' (Int64 or UInt64), found ids from -4611686018427387904 to 9223372036854775808; pass polars frames to keep them
    """
    for name, dtype in frame.schema.items():
        if not isinstance(dtype, pl.Int128):
            continue
        column = frame[name]
        lo, hi = int(column.min() or 0), int(column.max() or 0)  # type: ignore[arg-type]
        fits_signed = lo >= -(2**63) and hi < 2**63
        target = pl.Int64 if fits_signed else pl.UInt64
        if not fits_signed and lo < 0:
            raise InvalidValueError(
                f"expected ids that {consumer} can hold in column {name!r} (Int64 or UInt64), found "
                f"ids from {lo} to {hi}; pass polars frames to keep them",
                columns=[name],
            )
        frame = frame.with_columns(column.cast(target))
    return frame


def kind_of(frame: object) -> FrameKind:
    """Name the kind of a supported frame, without importing any library.

    Examples
    --------
    >>> kind_of(pl.DataFrame({"a": [1]}))
    'polars'
    >>> kind_of(pl.LazyFrame({"a": [1]}))
    'polars-lazy'
    >>> import pyarrow as pa
    >>> table = pa.table({"a": [1]})
    >>> kind_of(table), kind_of(pa.RecordBatchReader.from_batches(table.schema, []))
    ('arrow', 'arrow')
    >>> kind_of([1, 2])
    Traceback (most recent call last):
    ...
    frame_metrics.errors.InvalidOptionError: expected a polars DataFrame, polars LazyFrame, pandas DataFrame, pyarrow Table (or other object with __arrow_c_stream__) or DuckDB relation, got list

    A Series is a column, not a frame, though it is an Arrow stream too:

    >>> kind_of(pl.Series("a", [1]))
    Traceback (most recent call last):
    ...
    frame_metrics.errors.InvalidOptionError: expected a polars DataFrame, polars LazyFrame, pandas DataFrame, pyarrow Table (or other object with __arrow_c_stream__) or DuckDB relation, got Series
    """
    # polars and pandas frames (and DuckDB relations) are Arrow streams as well: the
    # specific kinds are recognised first, so they come back as they came.
    if isinstance(frame, pl.DataFrame):
        return "polars"
    if isinstance(frame, pl.LazyFrame):
        return "polars-lazy"
    pd = sys.modules.get("pandas")
    if pd is not None and isinstance(frame, pd.DataFrame):
        return "pandas"
    duckdb = sys.modules.get("duckdb")
    relation = getattr(duckdb, "DuckDBPyRelation", None)
    if relation is not None and isinstance(frame, relation):
        return "duckdb"
    is_series = isinstance(frame, pl.Series) or (pd is not None and isinstance(frame, pd.Series))
    if hasattr(type(frame), "__arrow_c_stream__") and not is_series:
        return "arrow"
    raise InvalidOptionError(
        "expected a polars DataFrame, polars LazyFrame, pandas DataFrame, pyarrow Table "
        "(or other object with __arrow_c_stream__) or DuckDB relation, "
        f"got {type(frame).__name__}"
    )


def _pandas_is_arrow_backed(frame: Any) -> bool:
    # pandas >= 3 stores plain strings with pyarrow ("str"); that alone is the default,
    # not a choice of the caller, so only explicit ArrowDtype columns count.
    return any(type(dtype).__name__ == "ArrowDtype" for dtype in frame.dtypes)


@dataclass(frozen=True)
class _Columns:
    """A caller's Arrow, DuckDB or pandas frame, converted some of its columns at a time."""

    #: Every column's type, as the library names it, in the frame's order.
    types: dict[str, str]
    #: The named columns as a polars frame (raises what polars raises).
    convert: Callable[[list[str]], pl.DataFrame]
    #: What a column that does not convert was expected to be, and what it was.
    describe: Callable[[str, BaseException], str]


def _attempt(convert: Callable[[], pl.DataFrame]) -> pl.DataFrame | BaseException:
    """The converted frame, or what converting it raised."""
    try:
        return convert()
    except Exception as exc:
        return exc
    except pl.exceptions.PanicException as exc:
        # polars panics on some Arrow types (decimal256): a BaseException, caught here,
        # around the conversion only.
        return exc


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().split("\n")[0]


def _foreign_type(library: str, types: dict[str, str]) -> Callable[[str, BaseException], str]:
    def describe(column: str, exc: BaseException) -> str:
        return (
            f"expected column {column!r} to have a type polars reads, found {library} type "
            f"{types[column]} (polars: {_first_line(exc)}); cast it first"
        )

    return describe


def _convert(columns: _Columns, name: str, read: list[str]) -> pl.DataFrame:
    """The ``read`` columns as a polars frame, or an error naming the one that fails."""
    converted = _attempt(lambda: columns.convert(read))
    if isinstance(converted, pl.DataFrame):
        return converted
    for column in read:
        alone = _attempt(functools.partial(columns.convert, [column]))
        if not isinstance(alone, pl.DataFrame):
            raise InvalidValueError(
                f"{name}: {columns.describe(column, alone)}", frame=name, columns=[column]
            ) from converted
    raise InvalidValueError(
        f"{name}: expected columns polars can read, got an error: {_first_line(converted)}",
        frame=name,
    ) from converted


def _not_read(name: str, column: str, found: str) -> pl.Expr:
    """A column the call does not read: in the schema (messages list it), never converted.

    Reading it is a bug of this package (the call's columns were named wrongly), so it
    raises rather than give nulls. A column keeps its kind in the schema (Float64 for
    floats, String for text, a list of text for lists), so that a message can propose it
    (a score, a features column); any other is of dtype Null.
    """

    def refuse(_: pl.Series) -> pl.Series:
        raise RuntimeError(
            f"{name}: column {column!r} ({found}) was read but not converted; please report "
            "this bug of frame_metrics"
        )

    dtype = _placeholder_dtype(found)
    return pl.lit(None, dtype).map_batches(refuse, return_dtype=dtype).alias(column)


def _placeholder_dtype(found: str) -> pl.DataType:
    """The kind of a foreign column type, as a polars dtype (Null when none is told).

    Examples
    --------
    >>> [_placeholder_dtype(t) for t in ("double", "VARCHAR", "list<item: string>", "int64")]
    [Float64, String, List(String), Null]
    """
    kind = found.lower()
    if "[]" in kind or kind.startswith(("list", "large_list")):
        return pl.List(pl.String())
    if "float" in kind or "double" in kind:
        return pl.Float64()
    if any(word in kind for word in ("string", "utf8", "varchar", "str", "category", "dictionary")):
        return pl.String()
    return pl.Null()


def _read(
    columns: _Columns,
    name: str,
    kind: FrameKind,
    wanted: Collection[str] | None,
    arrow_backed: bool = False,
) -> Source:
    """The columns of ``wanted`` (all with None) converted, the others placeholders."""
    names = list(columns.types)
    read = names if wanted is None else [n for n in names if n in wanted]
    frame = _convert(columns, name, read)
    unread = [n for n in names if n not in frame.columns]
    if not unread:
        return Source(frame.lazy(), kind, arrow_backed)
    lazy = frame.lazy().with_columns(_not_read(name, n, columns.types[n]) for n in unread)
    lazy = lazy.select(names)

    def every_column() -> pl.LazyFrame:
        # One conversion of every column that converts alone, so that rows align (a
        # DuckDB query may give its rows in another order when run again).
        fine = [
            n
            for n in names
            if n in frame.columns
            or isinstance(_attempt(functools.partial(columns.convert, [n])), pl.DataFrame)
        ]
        whole = _attempt(lambda: columns.convert(fine))
        return whole.lazy() if isinstance(whole, pl.DataFrame) else frame.lazy()

    return Source(lazy, kind, arrow_backed, every_column)


def _arrow_columns(table: Any) -> _Columns:
    types = {field.name: str(field.type) for field in table.schema}

    def convert(names: list[str]) -> pl.DataFrame:
        return pl.DataFrame(table.select(names))

    return _Columns(types, convert, _foreign_type("Arrow", types))


def _arrow_table(stream: Any) -> Any:
    """``stream`` as a pyarrow Table (read here, once), or None without pyarrow.

    None too for a stream pyarrow does not read as a table, which polars then names.
    """
    try:
        pa = importlib.import_module("pyarrow")
    except ImportError:
        return None
    if isinstance(stream, pa.Table):
        return stream
    try:
        return pa.table(stream)
    except Exception:  # not a stream of rows (a chunked array): polars says so below
        return None


def _duckdb_columns(relation: Any) -> _Columns:
    types = {str(c): str(t) for c, t in zip(relation.columns, relation.types, strict=True)}

    def convert(names: list[str]) -> pl.DataFrame:
        if not names:
            return pl.DataFrame()
        # A projection: DuckDB computes only these columns.
        quoted = ", ".join('"' + n.replace('"', '""') + '"' for n in names)
        out = relation.project(quoted).pl()
        assert isinstance(out, pl.DataFrame)
        return out

    return _Columns(types, convert, _foreign_type("DuckDB", types))


def _pandas_columns(frame: Any, include_index: bool) -> _Columns:
    """A pandas frame's columns, named index levels first when they count as columns."""
    index = [str(n) for n in frame.index.names if n is not None] if include_index else []
    types = {n: "index" for n in index} | {str(c): str(d) for c, d in frame.dtypes.items()}

    def convert(names: list[str]) -> pl.DataFrame:
        wanted = set(names)
        part = frame[[c for c in frame.columns if str(c) in wanted]]
        with_index = bool(wanted & set(index))
        out = pl.from_pandas(part, include_index=with_index)
        assert isinstance(out, pl.DataFrame)
        if out.height == 0:
            # An empty object column (pd.DataFrame(columns=[...])) holds no value of any
            # dtype; polars reads it as String, which would refuse empty integer ids.
            objects = [str(n) for n, d in part.dtypes.items() if str(d) == "object"]
            out = out.with_columns(pl.col(objects).cast(pl.Null))
        return out

    def describe(column: str, exc: BaseException) -> str:
        """A pandas column polars could not read: a mixed str/int object column."""
        values = frame[column] if column in frame.columns else frame.index.to_series()
        kinds = sorted({type(v).__name__ for v in values.head(1000)})
        return (
            f"expected column {column!r} to hold values of one kind, found dtype "
            f"{values.dtype} holding {', '.join(kinds)} values ({exc}); convert it first, "
            f"e.g. df[{column!r}].astype(str)"
        )

    return _Columns(types, convert, describe)


def _distinct_names(names: list[str], name: str) -> None:
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise InvalidValueError(
            f"{name}: expected distinct column names, found {', '.join(map(repr, repeated))} "
            "more than once",
            frame=name,
            columns=repeated,
        )


def to_lazy(frame: object, name: str, columns: Collection[str] | None = None) -> Source:
    """Convert a supported frame to a :class:`Source` holding a ``LazyFrame``.

    Arrow input is read here, once (a stream such as a RecordBatchReader can be read only
    once); a DuckDB relation runs its query here, once.

    ``columns``: the columns the call reads (None: all). Of an Arrow, DuckDB or pandas
    frame only those are converted (a DuckDB relation computes only those); the others
    stay in the schema, so that messages list every column, as placeholders never read.
    A column that is read and does not convert is an error naming it and its type.

    Examples
    --------
    >>> import pyarrow as pa
    >>> table = pa.table({"user": [1, 2], "item": ["a", "b"]})
    >>> reader = pa.RecordBatchReader.from_batches(table.schema, table.to_batches())
    >>> source = to_lazy(reader, "recs")
    >>> source.kind, source.lazy.collect().rows()
    ('arrow', [(1, 'a'), (2, 'b')])
    >>> to_lazy(pa.chunked_array([[1, 2]]), "recs")
    Traceback (most recent call last):
    ...
    frame_metrics.errors.InvalidValueError: recs: expected an Arrow stream of table rows (columns in a struct), got an error from polars: ...

    An unused column of a type polars cannot read is left alone; a used one is named:

    >>> import decimal
    >>> wide = table.append_column(
    ...     "price", pa.array([decimal.Decimal("1.5"), None], pa.decimal256(50, 2)))
    >>> to_lazy(wide, "recs", ["user", "item"]).lazy.select("user", "item").collect().rows()
    [(1, 'a'), (2, 'b')]
    >>> to_lazy(wide, "recs", ["user", "price"])
    Traceback (most recent call last):
    ...
    frame_metrics.errors.InvalidValueError: recs: expected column 'price' to have a type polars reads, found Arrow type decimal256(50, 2) (polars: ...); cast it first
    """
    kind = kind_of(frame)
    if kind == "polars":
        assert isinstance(frame, pl.DataFrame)
        return Source(frame.lazy(), kind)
    if kind == "polars-lazy":
        assert isinstance(frame, pl.LazyFrame)
        return Source(frame, kind)
    if kind == "arrow":
        table = _arrow_table(frame)
        if table is not None:
            _distinct_names(table.column_names, name)
            return _read(_arrow_columns(table), name, kind, columns)
        stream: Any = frame  # any object with __arrow_c_stream__, without pyarrow
        converted = _attempt(lambda: pl.DataFrame(stream))
        if not isinstance(converted, pl.DataFrame):  # a stream of something other than rows
            raise InvalidValueError(
                f"{name}: expected an Arrow stream of table rows (columns in a struct), got "
                f"an error from polars: {_first_line(converted)}",
                frame=name,
            ) from converted
        return Source(converted.lazy(), kind)
    if kind == "duckdb":
        relation: Any = frame  # duckdb is not imported here, so not typed either
        _distinct_names([str(c) for c in relation.columns], name)
        return _read(_duckdb_columns(relation), name, kind, columns)
    # Named index levels (``df.set_index("user")``, a groupby result) are columns to a
    # caller; an unnamed RangeIndex is not, and polars leaves it out.
    pandas_frame: Any = frame  # pandas is not imported here, so not typed either
    index_names = {n for n in pandas_frame.index.names if n is not None}
    include_index = bool(index_names) and not index_names & set(pandas_frame.columns)
    _distinct_names([str(c) for c in pandas_frame.columns], name)
    arrow_backed = _pandas_is_arrow_backed(frame)
    return _read(_pandas_columns(pandas_frame, include_index), name, kind, columns, arrow_backed)
