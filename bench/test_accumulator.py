"""Tests of the accumulator benchmark's data and jobs (no timing asserts).

Run with ``python -m pytest bench/test_accumulator.py -q``; torchmetrics' job runs only
where torch and torchmetrics install.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import polars as pl
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import accumulator as bench
import harness

fm = pytest.importorskip("frame_metrics")
PARAMS = {"users": 400, "seed": 3, "updates": 7}


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("accumulator") / "data"
    info = bench.make_data(out, PARAMS)
    assert info["rows"] > 400 * bench.LISTED
    return out


def worker(name: str, data_dir: Path) -> dict[str, Any]:
    """The report of job ``name``, run in this process."""
    return harness.worker(bench.SUITE, name, data_dir, PARAMS, extras=True)


def test_the_batches_hold_every_user_once(data_dir: Path) -> None:
    recs, truth, batches, _ = bench.load(data_dir, "polars", PARAMS)
    assert len(batches) == PARAMS["updates"]
    assert sum(b[0].height for b in batches) == recs.height
    assert sum(b[1].height for b in batches) == truth.height
    users = [set(b[0]["user"]) for b in batches]
    assert all(not (a & b) for i, a in enumerate(users) for b in users[i + 1 :])
    # Every user lists LISTED distinct items ranked 1..LISTED.
    assert recs.group_by("user").agg(pl.col("item").n_unique())["item"].min() == bench.LISTED


def test_the_accumulator_jobs_give_the_one_call_values(data_dir: Path) -> None:
    once = worker("fm-evaluate", data_dir)["values"]
    assert worker("fm-accumulator", data_dir)["values"] == once
    assert worker("fm-accumulator-unchecked", data_dir)["values"] == once


def test_torchmetrics_gives_the_torchmetrics_convention(data_dir: Path) -> None:
    pytest.importorskip("torchmetrics", reason="torchmetrics is not part of the dev install")
    theirs = worker("torchmetrics", data_dir)["values"]
    ours = worker("fm-accumulator-as-torchmetrics", data_dir)["values"]
    assert theirs == pytest.approx(ours, rel=1e-6)  # float32 scores and sums there
