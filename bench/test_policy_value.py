"""Tests of the policy_value benchmark's data, jobs and tables (no timing asserts).

Run with ``python -m pytest bench/test_policy_value.py -q``; obp's jobs skip without it.
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

import harness
import policy_value as bench

fm = pytest.importorskip("frame_metrics")
N_USERS = 300
PARAMS = {"users": N_USERS, "seed": 5}


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("policy-value") / "data"
    info = bench.make_data(out, PARAMS)
    assert info["logged_rows"] == N_USERS * bench.ROWS_PER_USER
    assert info["rec_rows"] == N_USERS * bench.K
    return out


def worker(name: str, data_dir: Path) -> dict[str, Any]:
    """The report of job ``name``, run in this process."""
    return harness.worker(bench.SUITE, name, data_dir, PARAMS, extras=True)


def test_make_arrays_is_deterministic_and_well_formed() -> None:
    a, b = bench.make_arrays(50, seed=1), bench.make_arrays(50, seed=1)
    assert all(np.array_equal(a[n], b[n]) for n in a)
    assert not np.array_equal(a["logs.item"], bench.make_arrays(50, seed=2)["logs.item"])
    assert ((a["logs.pscore"] > 0) & (a["logs.pscore"] <= 1)).all()
    recs = pl.DataFrame({n: a[f"recs.{n}"] for n in ("user", "item", "rank")})
    assert recs.select("user", "item").is_unique().all()
    per_user = recs.group_by("user").agg(pl.col("rank").sort())
    assert all(r == list(range(1, bench.K + 1)) for r in per_user["rank"].to_list())


def test_the_conversion_gives_obp_its_arrays(data_dir: Path) -> None:
    inputs = bench.load(data_dir, "polars", PARAMS)
    arrays = bench.obp_arrays(inputs.logs, inputs.recs, with_q=True)
    n = N_USERS * bench.ROWS_PER_USER
    assert arrays["action_dist"].shape == (n, bench.N_ITEMS, 1)
    assert np.allclose(arrays["action_dist"].sum(axis=1), 1.0)  # a distribution per round
    # π_e of the logged item: 1/K when it is in the user's top K.
    top = set(inputs.recs.select("user", "item").iter_rows())
    logged = list(inputs.logs.select("user", "item").iter_rows())
    pi = arrays["action_dist"][np.arange(n), arrays["action"], 0]
    assert pi.tolist() == [1 / bench.K if pair in top else 0.0 for pair in logged]


def test_fm_jobs_and_obp_agree(data_dir: Path) -> None:
    ours = {job: worker(job, data_dir)["values"] for job in ("fm-ips", "fm-snips", "fm-dr")}
    interval = worker("fm-snips-interval", data_dir)["values"]
    assert interval["value"] == ours["fm-snips"]["value"]
    assert interval["ci_low"] <= interval["value"] <= interval["ci_high"]
    pytest.importorskip("obp", reason="obp 0.5.7 declares Python < 3.11: see bench/README.md")
    for mine, peer in bench.PAIRS:
        theirs = worker(peer, data_dir)["values"]
        assert math.isclose(theirs["value"], ours[mine]["value"], rel_tol=bench.TOLERANCE)


def test_tables_flag_mismatches() -> None:
    def result(name: str, values: dict[str, float], t: float = 1.0) -> harness.Result:
        return harness.Result(
            name, bench.BIG, times=[t], cpu=[t], other_cores=[0.0], values=values, peaks=[100.0]
        )

    results = [
        result("fm-snips", {"value": 0.25, "n_rows": 10.0}),
        result("obp-snipw", {"value": 0.25 * (1 + 1e-15), "n_rows": 10.0}, 2.0),
        result("fm-ips", {"value": 0.5, "n_rows": 10.0}, 3.0),
        result("obp-ipw", {"value": 0.6, "n_rows": 10.0}, 2.0),
    ]
    verdicts = {row[1]: row[-1] for row in bench.checks_table(results)[1:]}
    assert verdicts == {
        "obp SelfNormalizedInverseProbabilityWeighting": "equal",
        "obp InverseProbabilityWeighting": "MISMATCH",
    }
    targets = {
        row[1]: row[-1] for row in harness.targets_table(bench.SUITE, results, bench.TARGETS)[1:]
    }
    assert targets["policy_value faster than obp: fm-snips / obp-snipw"] == "PASS"  # 1 s / 2 s
    assert targets["policy_value faster than obp: fm-ips / obp-ipw"] == "FAIL"  # 3 s / 2 s
    assert bench.values_table(results)[1][:4] == [f"{bench.BIG:,}", "10", "0.5", "0.25"]
