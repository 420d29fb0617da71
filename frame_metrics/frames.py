"""The edge: recognise the caller's frame kind, convert to a LazyFrame and back.

Libraries the caller never imported are never imported here: pandas is looked up in
``sys.modules``, so a polars-only user pays nothing for pandas support.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Literal

import polars as pl

from frame_metrics.errors import FrameMetricsError, InvalidOptionError

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
        return frame.to_pandas(use_pyarrow_extension_array=self.arrow_backed)


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
    try:
        converted = pl.from_pandas(frame, include_index=include_index)  # type: ignore[call-overload]
    except Exception as exc:  # pragma: no cover - depends on exotic pandas dtypes
        raise FrameMetricsError(
            f"{name}: expected columns polars can read from pandas, got an error: {exc}"
        ) from exc
    assert isinstance(converted, pl.DataFrame)
    return Source(converted.lazy(), kind, arrow_backed=_pandas_is_arrow_backed(frame))
