"""Spark and Dask: the polars engine per bucket of user keys (see ``core``).

Neither library is imported unless the caller imported it: :func:`adapter_for` looks
in ``sys.modules`` first.
"""

from __future__ import annotations

import sys
from types import ModuleType

__all__ = ["adapter_for", "to_local"]


def adapter_for(frame: object) -> ModuleType | None:
    """The adapter module (``spark`` or ``dask``) for a distributed frame, else None.

    Each adapter has ``evaluate``, ``to_polars`` (collect a small frame to the driver)
    and ``like`` (a local polars frame as a frame of the caller's kind).
    """
    if "dask.dataframe" in sys.modules:
        from frame_metrics.distributed import dask as dask_adapter

        if dask_adapter.is_dask(frame):
            return dask_adapter
    if "pyspark.sql" in sys.modules:
        from frame_metrics.distributed import spark as spark_adapter

        if spark_adapter.is_spark(frame):
            return spark_adapter
    return None


def to_local(frame: object) -> object:
    """A Spark or Dask frame collected to polars; any other frame (or None) as given.

    For the workflows that read every row of their inputs on the driver (gaps,
    policy_value, exposure): their result is small, their inputs are per-user rows or
    logs they resample or join whole.

    Examples
    --------
    >>> import polars as pl
    >>> frame = pl.DataFrame({"user": [1]})
    >>> to_local(frame) is frame, to_local(None)
    (True, None)
    """
    adapter = adapter_for(frame) if frame is not None else None
    return frame if adapter is None else adapter.to_polars(frame)
