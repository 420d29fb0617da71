"""The edge: recognise the caller's frame kind, convert to a LazyFrame and back.

Libraries the caller never imported are never imported here: pandas is looked up in
``sys.modules``, so a polars-only user pays nothing for pandas support.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Literal

import polars as pl

from frame_metrics.errors import InvalidOptionError, InvalidValueError

__all__ = ["FrameKind", "Source", "kind_of", "to_lazy"]

FrameKind = Literal["polars", "polars-lazy", "pandas"]


@dataclass(frozen=True)
class Source:
    """A caller's frame as a LazyFrame, with what is needed to give results back in kind."""

    lazy: pl.LazyFrame
    kind: FrameKind
    arrow_backed: bool = False

    def give_back(self, result: pl.DataFrame | pl.LazyFrame) -> Any:
        """Return ``result`` in the kind of frame the caller passed in."""
        if self.kind == "polars-lazy":
            return result.lazy()
        frame = result if isinstance(result, pl.DataFrame) else result.collect()
        if self.kind == "polars":
            return frame
        return _without_int128(frame).to_pandas(use_pyarrow_extension_array=self.arrow_backed)


def _without_int128(frame: pl.DataFrame) -> pl.DataFrame:
    """Int128 keys (Int64 ids met UInt64 ids) in a dtype pandas has: Int64 or UInt64.

    Arrow has no 128-bit integers. The values came from Int64 and UInt64 columns, so
    one of the two holds them all unless both negative and beyond-Int64 ids were given.
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
                f"expected ids that pandas can hold in column {name!r} (Int64 or UInt64), found "
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
    >>> kind_of([1, 2])
    Traceback (most recent call last):
    ...
    frame_metrics.errors.InvalidOptionError: expected a polars DataFrame, polars LazyFrame or pandas DataFrame, got list
    """
    if isinstance(frame, pl.DataFrame):
        return "polars"
    if isinstance(frame, pl.LazyFrame):
        return "polars-lazy"
    pd = sys.modules.get("pandas")
    if pd is not None and isinstance(frame, pd.DataFrame):
        return "pandas"
    raise InvalidOptionError(
        "expected a polars DataFrame, polars LazyFrame or pandas DataFrame, "
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
    """Convert a supported frame to a :class:`Source` holding a ``LazyFrame``."""
    kind = kind_of(frame)
    if kind == "polars":
        assert isinstance(frame, pl.DataFrame)
        return Source(frame.lazy(), kind)
    if kind == "polars-lazy":
        assert isinstance(frame, pl.LazyFrame)
        return Source(frame, kind)
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
