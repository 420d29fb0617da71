"""The edge: recognise the caller's frame kind, convert to a LazyFrame and back.

Libraries the caller never imported are never imported here: pandas and DuckDB are looked
up in ``sys.modules``, so a polars-only user pays nothing for their support, and pyarrow
is imported only to give a result back as Arrow.

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

import importlib
import sys
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
                "metrics: expected names that differ in more than case for a DuckDB result "
                f"(DuckDB matches column names case-insensitively), got {first!r} and "
                f"{name!r}; ask for them in two calls"
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
                f"ids from {lo} to {hi}; pass polars frames to keep them"
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


def _unreadable(pandas_frame: Any, name: str, exc: Exception) -> str:
    """Name the pandas column polars could not read (a mixed str/int object column)."""
    for column in pandas_frame.columns:
        try:
            pl.from_pandas(pandas_frame[[column]])
        except Exception as inner:  # any failure names the column
            dtype = pandas_frame[column].dtype
            kinds = sorted({type(v).__name__ for v in pandas_frame[column].head(1000)})
            return (
                f"{name}: expected column {column!r} to hold values of one kind, found dtype "
                f"{dtype} holding {', '.join(kinds)} values ({inner}); convert it first, e.g. "
                f"df[{column!r}].astype(str)"
            )
    return f"{name}: expected columns polars can read from pandas, got an error: {exc}"


def to_lazy(frame: object, name: str) -> Source:
    """Convert a supported frame to a :class:`Source` holding a ``LazyFrame``.

    Arrow input is read here, once (a stream such as a RecordBatchReader can be read only
    once); a DuckDB relation runs its query here, once.

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
    """
    kind = kind_of(frame)
    if kind == "polars":
        assert isinstance(frame, pl.DataFrame)
        return Source(frame.lazy(), kind)
    if kind == "polars-lazy":
        assert isinstance(frame, pl.LazyFrame)
        return Source(frame, kind)
    if kind == "arrow":
        stream: Any = frame  # any object with __arrow_c_stream__
        try:
            converted = pl.DataFrame(stream)
        except Exception as exc:  # a stream of something other than table rows
            raise InvalidValueError(
                f"{name}: expected an Arrow stream of table rows (columns in a struct), got "
                f"an error from polars: {exc}"
            ) from exc
        return Source(converted.lazy(), kind)
    if kind == "duckdb":
        relation: Any = frame  # duckdb is not imported here, so not typed either
        result = relation.pl()
        assert isinstance(result, pl.DataFrame)
        return Source(result.lazy(), kind)
    # Named index levels (``df.set_index("user")``, a groupby result) are columns to a
    # caller; an unnamed RangeIndex is not, and polars leaves it out.
    pandas_frame: Any = frame  # pandas is not imported here, so not typed either
    index_names = {n for n in pandas_frame.index.names if n is not None}
    include_index = bool(index_names) and not index_names & set(pandas_frame.columns)
    names = [str(c) for c in pandas_frame.columns]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise InvalidValueError(
            f"{name}: expected distinct column names, found {', '.join(map(repr, repeated))} "
            "more than once"
        )
    try:
        converted = pl.from_pandas(frame, include_index=include_index)  # type: ignore[call-overload]
    except Exception as exc:
        raise InvalidValueError(_unreadable(pandas_frame, name, exc)) from exc
    assert isinstance(converted, pl.DataFrame)
    if converted.height == 0:
        # An empty object column (pd.DataFrame(columns=[...])) holds no value of any
        # dtype; polars reads it as String, which would refuse empty integer ids.
        objects = [str(n) for n, d in pandas_frame.dtypes.items() if str(d) == "object"]
        converted = converted.with_columns(pl.col(objects).cast(pl.Null))
    return Source(converted.lazy(), kind, arrow_backed=_pandas_is_arrow_backed(frame))
