"""Tests of the report benchmark's data and jobs (no timing asserts).

Run with ``python -m pytest bench/test_report.py -q``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import accumulator
import harness
import report as bench

fm = pytest.importorskip("frame_metrics")
PARAMS = {"users": 300, "seed": 5}


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("report") / "data"
    info = bench.make_data(out, PARAMS)
    assert info["rows"] > 300 * accumulator.LISTED * len(bench.MODELS)
    return out


def worker(name: str, data_dir: Path) -> dict[str, Any]:
    """The report of job ``name``, run in this process."""
    return harness.worker(bench.SUITE, name, data_dir, PARAMS, extras=True)


def test_both_jobs_give_the_evaluations_means(data_dir: Path) -> None:
    recs, truth = bench.load(data_dir, "polars", PARAMS)
    means = fm.evaluate(recs, truth, metrics=["ndcg@10", "recall@10"], by="model", aggregate=True)
    row = means.row(0, named=True)
    for job in bench.JOBS:
        got = worker(job, data_dir)
        assert got["values"] == {"ndcg@10": row["ndcg@10"], "recall@10": row["recall@10"]}, job
