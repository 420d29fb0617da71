"""Spark and Dask for the suites: sessions, clusters and the engines' own floors.

Shared by ``distributed.py`` (metrics) and ``split.py`` (splits): a ``local[2]`` Spark
session, a 2-worker Dask cluster, and the *plumbing* every per-user computation on these
engines does before its first value: hash-partition the rows by user and hand every
partition to Python (Spark: ``mapInArrow`` in batches of 100,000 rows, as frame_metrics'
own Spark jobs; Dask: ``map_partitions`` over the shuffled frames). A job that times the
plumbing alone shows what the engine itself costs on the data.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

#: Rows per Arrow batch of the Spark plumbing (Spark's default is 10,000).
ARROW_BATCH = 100_000


def timed_start(start: Callable[[], Any]) -> tuple[Any, dict[str, float]]:
    """``start()`` and how long it took, as the ``inner`` value ``start s``."""
    t0 = time.perf_counter()
    return start(), {"start s": time.perf_counter() - t0}


def spark_session(partitions: int) -> Any:
    """A ``local[2]`` Spark session with 12 GB driver memory and no UI; its Python workers
    run this interpreter unless ``PYSPARK_PYTHON`` says otherwise (else Spark starts
    whatever ``python3`` is on the PATH, which may lack pyarrow)."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

    builder: Any = SparkSession.builder
    return (
        builder.master("local[2]")
        .config("spark.driver.memory", "12g")
        .config("spark.sql.shuffle.partitions", str(partitions))
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )


def dask_client() -> Any:
    """A ``LocalCluster`` of 2 single-threaded worker processes, 10 GB each."""
    from dask.distributed import Client, LocalCluster

    return Client(LocalCluster(n_workers=2, threads_per_worker=1, memory_limit="10GB"))


def spark_hand_over(frame: Any, key: str, *, keep_rows: bool = False) -> int:
    """Hash-partition ``frame`` by ``key``, hand every partition's rows to Python
    (``mapInArrow``) and count them: the rows it saw.

    ``keep_rows``: Python gives every batch back (as a split returns its rows), and
    Spark counts what comes back; else each partition gives back only its count.
    """
    import pyarrow as pa
    from pyspark.sql import functions as F

    spark = frame.sparkSession
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", str(ARROW_BATCH))
    moved = frame.repartition(F.pmod(F.xxhash64(key), F.lit(1 << 30)))
    if keep_rows:

        def same(batches: Any) -> Any:
            yield from batches

        return int(moved.mapInArrow(same, frame.schema).count())

    def count(batches: Any) -> Any:
        n = sum(b.num_rows for b in batches)
        yield pa.RecordBatch.from_pydict({"rows": [n]})

    return int(moved.mapInArrow(count, "rows long").agg(F.sum("rows")).first()[0])


def dask_hand_over(frames: Sequence[Any], key: str) -> int:
    """Shuffle every frame by ``key`` into as many partitions as the first has, hand the
    aligned partitions to Python (``map_partitions``) and count their rows."""
    import dask.dataframe

    dd: Any = dask.dataframe  # untyped
    n = frames[0].npartitions
    parts = dd.map_partitions(
        lambda *parts: sum(len(p) for p in parts),
        *(frame.shuffle(on=key, npartitions=n) for frame in frames),
        align_dataframes=False,
        meta=int,
    )
    return int(sum(parts.compute()))
