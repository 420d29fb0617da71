"""Tests of the scale benchmark on a tiny size (~2000 users; no timing asserts).

Run with ``python -m pytest bench/test_scale.py -q`` (a few seconds).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import polars as pl
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import scale

GEN = scale.Generation(shard_users=1000)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    data = tmp_path_factory.mktemp("scale")
    out = data / "results.json"
    argv = ["--users", "2000", "--data", str(data), "--shard-users", "1000", "--timeout", "120"]
    assert scale.main([*argv, "--json", str(out)]) == 0
    return data, json.loads(out.read_text())


def test_jobs_finish_and_agree(runs: tuple[Path, dict[str, Any]]) -> None:
    _, payload = runs
    (stage,) = payload["stages"]
    assert stage["info"]["rec_rows"] == 2000 * scale.N_RECS
    results = payload["results"]
    assert [r["job"] for r in results] == list(scale.JOBS)
    for r in results:
        assert r["error"] == "", r
        assert len(r["times"]) == 1
        assert r["peaks"][0] > 0
        # The whole process includes the interpreter start and the imports.
        assert r["wall"][0] > r["times"][0]
    reference = results[0]["values"]
    assert set(reference) == {"n_users", *scale.METRICS}
    assert 0 < reference["n_users"] <= 2000
    for r in results[1:]:
        for name, value in reference.items():
            assert r["values"][name] == pytest.approx(value, abs=1e-12, rel=0), (r["job"], name)


def test_shards_are_deterministic_and_shared(
    runs: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    data, _ = runs
    truth_rows = pl.scan_parquet(data / "u2000" / "truth" / "*.parquet").select(pl.len())
    # ~14.5 truth rows per user (~145M at 10M users).
    assert 12 < truth_rows.collect().item() / 2000 < 17
    # A smaller size reuses the full shard; a fresh directory regenerates the same rows.
    scale.generate(data, 1000, GEN, log=False)
    scale.generate(tmp_path, 1000, GEN, log=False)
    first = [scale.shard_paths(d / "u1000", 0)[0] for d in (data, tmp_path)]
    assert first[0].samefile(scale.shard_paths(data / "u2000", 0)[0])
    assert pl.read_parquet(first[0]).equals(pl.read_parquet(first[1]))
    users = pl.read_parquet(scale.shard_paths(data / "u2000", 1)[0])["user"]
    assert (users.min(), users.max()) == (1000, 1999)
    # A directory of another generation is refused.
    with pytest.raises(SystemExit, match="generated with"):
        scale.generate(data, 1000, scale.Generation(shard_users=500), log=False)
