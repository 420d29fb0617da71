"""The recorded result matrix (tests/result_matrix.py) still holds, to the bit.

Local frame kinds and buckets here; Dask and Spark with ``python -m tests.result_matrix
check``. A deliberate change of results is recorded again with ``record``, and said in
the commit.
"""

from __future__ import annotations

import json

from tests import result_matrix


def test_results_equal_the_recorded_matrix() -> None:
    recorded = json.loads(result_matrix.PATH.read_text())
    now = result_matrix.compute(local_only=True)
    diffs, _ = result_matrix.differences(recorded, now)
    assert not diffs, "\n".join(diffs[:20])


def test_every_local_path_agrees_with_polars() -> None:
    # Independent of the recording: lazy (both engines), pandas and buckets give the
    # polars eager result (frames sorted, floats compared as bits).
    now = result_matrix.compute(local_only=True)
    for case, paths in now["results"].items():
        for path, got in paths.items():
            mode = path.split("/")[0]
            assert got == paths[f"{mode}/polars"], (case, path)


def test_the_recorded_dask_and_spark_results_equal_polars() -> None:
    # Recorded with `python -m tests.result_matrix record` (Dask and Spark included):
    # partitioned runs gave the polars bits, dtypes and errors, on every distributed case.
    recorded = json.loads(result_matrix.PATH.read_text())
    seen = 0
    for case, paths in recorded["results"].items():
        for path, got in paths.items():
            mode, engine = path.split("/")
            if engine in ("dask", "spark"):
                seen += 1
                assert got == paths[f"{mode}/polars"], (case, path)
    assert seen == 4 * len(result_matrix.DISTRIBUTED)
