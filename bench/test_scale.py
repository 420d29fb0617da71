"""Tests of the scale benchmark on a tiny size (~2000 users; no timing asserts).

Run with ``python -m pytest bench/test_scale.py -q`` (a few seconds).
"""

from __future__ import annotations

import sys
from pathlib import Path

import polars as pl
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import scale

GEN = scale.Generation(shard_users=1000)


@pytest.fixture(scope="module")
def runs(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, list[scale.Result]]:
    data = tmp_path_factory.mktemp("scale")
    results, _ = scale.run([2000], data, gen=GEN, timeout=120, log=False)
    return data, results


def test_jobs_finish_and_agree(runs: tuple[Path, list[scale.Result]]) -> None:
    _, results = runs
    assert [r.job for r in results] == list(scale.JOBS)
    for r in results:
        assert r.status == "ok", r
        assert r.rec_rows == 2000 * scale.N_RECS
        assert r.peak_mib is not None
        assert r.peak_mib > 0
    reference = results[0].values
    assert set(reference) == {"n_users", *scale.METRICS}
    assert 0 < reference["n_users"] <= 2000
    for r in results[1:]:
        for name, value in reference.items():
            assert r.values[name] == pytest.approx(value, abs=1e-12, rel=0), (r.job, name)
    assert scale.max_difference(results)[2000] < 1e-12


def test_shards_are_deterministic_and_shared(
    runs: tuple[Path, list[scale.Result]], tmp_path: Path
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
