"""Tests of the beyond-accuracy benchmark's data, checks and tables (no timing asserts).

Run with ``python -m pytest bench/test_beyond.py -q``; the RecTools check skips without it.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import beyond
import harness
import peers

fm = pytest.importorskip("frame_metrics")
K = beyond.K
N_USERS = 300
PARAMS = {"users": N_USERS, "seed": 5}


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("beyond") / "data"
    info = beyond.make_data(out, PARAMS)
    assert info["rec_rows"] == N_USERS * beyond.N_RECS
    assert info["item_pairs"] == N_USERS * 45
    return out


def test_make_arrays_is_deterministic() -> None:
    a = beyond.make_arrays(50, seed=1)
    b = beyond.make_arrays(50, seed=1)
    c = beyond.make_arrays(50, seed=2)
    assert all(np.array_equal(a[n], b[n]) for n in a)
    assert not np.array_equal(a["recs.item"], c["recs.item"])


def test_make_arrays_shapes() -> None:
    cols = beyond.make_arrays(N_USERS, seed=3)
    recs = pl.DataFrame({n: cols[f"recs.{n}"] for n in ("user", "item", "rank")})
    per_user = recs.group_by("user").agg(
        pl.col("item").n_unique().alias("distinct"), pl.col("rank").sort().alias("ranks")
    )
    assert per_user.height == N_USERS
    assert per_user["distinct"].to_list() == [beyond.N_RECS] * N_USERS
    assert all(r == list(range(1, beyond.N_RECS + 1)) for r in per_user["ranks"].to_list())

    train = pl.DataFrame({n: cols[f"train.{n}"] for n in ("user", "item")})
    assert train.is_unique().all()  # distinct (user, item) pairs
    counts = train.group_by("user").len()["len"].to_numpy()
    assert counts.min() >= beyond.TRAIN_MIN
    assert counts.max() <= beyond.TRAIN_MAX

    n_genres = cols["items.n_genres"]
    assert np.array_equal(cols["items.item"], np.arange(beyond.N_ITEMS))
    assert set(np.unique(n_genres).tolist()) <= {1, 2, 3}
    assert len(cols["genres.code"]) == n_genres.sum()
    starts = np.concatenate(([0], np.cumsum(n_genres)[:-1]))
    for start, n in zip(starts[:500], n_genres[:500], strict=True):
        genres = cols["genres.code"][start : start + n]
        assert len(set(genres.tolist())) == n  # distinct within an item
    assert cols["items.vector"].shape == (beyond.N_ITEMS, beyond.DIM)


def test_naive_personalization_small_cases() -> None:
    same = peers.naive_personalization(np.array([1, 1, 2, 2]), np.array([5, 6, 5, 6]))
    apart = peers.naive_personalization(np.array([1, 1, 2, 2]), np.array([5, 6, 7, 8]))
    half = peers.naive_personalization(np.array([1, 1, 2, 2]), np.array([5, 6, 5, 8]))
    assert (same, apart, half) == pytest.approx((0.0, 1.0, 0.5), abs=1e-15)


def worker(name: str, data_dir: Path) -> dict[str, Any]:
    """The report of job ``name``, run in this process."""
    return harness.worker(beyond.SUITE, name, data_dir, PARAMS, extras=True)


def test_frame_kinds_and_families_agree(data_dir: Path) -> None:
    polars_run = worker("fm-all", data_dir)
    pandas_run = worker("fm-all-pandas", data_dir)
    assert polars_run["values"] == pandas_run["values"]
    assert polars_run["values"]["n_users"] == N_USERS
    for job in ("fm-all-no-validate", "fm-corpus", "fm-popularity", "fm-diversity"):
        values = worker(job, data_dir)["values"]
        assert values == {c: polars_run["values"][c] for c in values}, job


def test_naive_check_and_stages(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(beyond, "STAGE_REPEATS", 1)
    naive = worker("naive-check", data_dir)["values"]
    assert naive["naive_personalization"] == pytest.approx(naive[f"personalization@{K}"], abs=1e-12)
    stages = worker("diversity-stages", data_dir)["values"]
    assert stages["replica_diversity"] == pytest.approx(stages[f"diversity@{K}"], abs=1e-12)


def test_rectools_popularity_agrees(data_dir: Path) -> None:
    pytest.importorskip("rectools")
    peer = worker("rectools-popularity", data_dir)["values"]
    ours = worker("fm-rectools-set", data_dir)["values"]
    for col, value in peer.items():
        assert value == pytest.approx(ours[col], abs=1e-9), col


def test_tables_flag_mismatches() -> None:
    def result(name: str, values: dict[str, float], t: float = 1.0) -> harness.Result:
        return harness.Result(
            name, 10, times=[t], cpu=[t], other_cores=[0.0], values=values, peaks=[100.0]
        )

    peer = {f"coverage@{K}": 0.5, f"novelty@{K}": 3.0, f"arp@{K}": 2.0}
    base = {"n_users": 10.0, **peer}
    results = [
        result("fm-all", base),
        result("fm-rectools-set", base, 0.5),
        result("rectools-popularity", {**peer, f"novelty@{K}": 3.1}, 2.0),
    ]
    checks = beyond.checks_table(results)
    verdicts = {row[1]: row[-1] for row in checks[1:]}
    assert verdicts["RecTools MeanInvUserFreq"] == "MISMATCH"
    assert verdicts["RecTools AvgRecPopularity"] == "identical"
    timing = harness.timing_table(beyond.SUITE, results)
    ratios = {row[2]: row[11] for row in timing[1:]}
    assert ratios[beyond.JOBS["rectools-popularity"].label] == "4.00x"  # 2.0 / 0.5
    assert not math.isnan(float(ratios[beyond.JOBS["fm-all"].label].rstrip("x")))
