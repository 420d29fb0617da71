"""Tests of the benchmark's generator, conversions and agreement checks (no timing asserts).

Run with ``python -m pytest bench -q``. The peer checks skip when a peer is not installed.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import ranking
from generate import make_data

K = ranking.K


@pytest.fixture(scope="module")
def data() -> tuple[pl.DataFrame, pl.DataFrame]:
    return make_data(400, n_recs=30, seed=3)


def test_make_data_is_deterministic() -> None:
    a = make_data(200, n_recs=20, seed=1)
    b = make_data(200, n_recs=20, seed=1)
    c = make_data(200, n_recs=20, seed=2)
    assert a[0].equals(b[0])
    assert a[1].equals(b[1])
    assert not a[0].equals(c[0])


def test_make_data_shapes(data: tuple[pl.DataFrame, pl.DataFrame]) -> None:
    recs, truth = data
    assert recs.schema == pl.Schema(
        {"user": pl.Int64, "item": pl.Int64, "rank": pl.Int32, "score": pl.Float64}
    )
    assert truth.schema == pl.Schema({"user": pl.Int64, "item": pl.Int64, "relevance": pl.Int32})
    per_user = recs.group_by("user").agg(
        pl.col("item").n_unique().alias("distinct"),
        pl.col("rank").sort().alias("ranks"),
        (pl.col("score").sort_by("rank").diff().drop_nulls() < 0).all().alias("descending"),
    )
    assert per_user.height == 400
    assert per_user["distinct"].to_list() == [30] * 400
    assert all(r == list(range(1, 31)) for r in per_user["ranks"].to_list())
    assert per_user["descending"].all()

    counts = truth.group_by("user").len()["len"].to_numpy()
    assert counts.min() >= 1
    assert counts.max() <= 30
    assert truth.select(pl.struct("user", "item").is_unique().all()).item()
    assert set(truth["relevance"].unique().to_list()) <= {1, 2, 3, 4, 5}
    hits = recs.filter(pl.col("rank") <= K).join(truth, on=["user", "item"]).height
    assert 0 < hits < truth.height


def test_nested_dict_groups_unsorted_rows() -> None:
    users = np.array([2, 1, 2, 1])
    items = np.array([10, 11, 12, 13])
    values = np.array([0.5, 0.25, 1.5, 2.0])
    assert ranking.nested_dict(users, items, values) == {
        "1": {"11": 0.25, "13": 2.0},
        "2": {"10": 0.5, "12": 1.5},
    }


def _fm_per_user(
    recs: pl.DataFrame, truth: pl.DataFrame, **opts: Any
) -> dict[str, dict[str, float]]:
    fm = pytest.importorskip("frame_metrics")
    out = fm.evaluate(recs, truth, metrics=ranking.METRICS, k=K, **opts)
    return {str(row["user"]): row for row in out.iter_rows(named=True)}


def test_pytrec_eval_agrees_per_user(data: tuple[pl.DataFrame, pl.DataFrame]) -> None:
    pytrec_eval = pytest.importorskip("pytrec_eval")
    recs, truth = data
    fm = _fm_per_user(recs, truth, ap_denominator="relevant")
    inputs = ranking.Inputs("pandas", recs.to_pandas(), truth.to_pandas(), 30)
    for cut in (None, K):
        qrels, run = ranking.qrels_and_run(inputs, cut)
        got = pytrec_eval.RelevanceEvaluator(qrels, ranking.PYTREC_MEASURES).evaluate(run)
        assert set(got) == set(fm)
        pairs = [
            ("P_10", "precision"),
            ("recall_10", "recall"),
            ("map_cut_10", "ap"),
            ("ndcg_cut_10", "ndcg"),
        ]
        if cut is not None:
            pairs.append(("recip_rank", "mrr"))
        for user, scores in got.items():
            for trec, ours in pairs:
                assert scores[trec] == pytest.approx(fm[user][f"{ours}@{K}"], abs=1e-12), (
                    user,
                    trec,
                )


def test_rectools_agrees_per_user(data: tuple[pl.DataFrame, pl.DataFrame]) -> None:
    pytest.importorskip("rectools")
    from rectools import Columns
    from rectools.metrics import MAP, MRR, NDCG, Precision, Recall

    recs, truth = data
    binary = truth.with_columns(pl.lit(1, dtype=pl.Int32).alias("relevance"))
    fm = _fm_per_user(recs, binary, ap_denominator="relevant")
    reco = recs.to_pandas().rename(columns={"user": Columns.User, "item": Columns.Item})
    inter = truth.to_pandas().rename(columns={"user": Columns.User, "item": Columns.Item})
    metrics = {
        "precision": Precision(k=K),
        "recall": Recall(k=K),
        "ap": MAP(k=K),
        "ndcg": NDCG(k=K, divide_by_achievable=True),
        "mrr": MRR(k=K),
    }
    for name, metric in metrics.items():
        per_user = metric.calc_per_user(reco, inter)
        assert len(per_user) == len(fm)
        for user, value in per_user.items():
            assert value == pytest.approx(fm[str(user)][f"{name}@{K}"], abs=1e-12), (user, name)


def test_end_to_end_run_has_no_mismatch(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("frame_metrics")
    pytest.importorskip("pytrec_eval")
    code = ranking.main(
        [
            "--users",
            "300",
            "--slow-size",
            "0",
            "--repeats",
            "1",
            "--only",
            "fm-pandas-in-memory,pytrec_eval-full",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert "FAILED" not in out
    assert "MISMATCH" not in out
    assert "0 mismatch(es)" in out
    assert "differs, as expected" in out  # recip_rank without a cutoff vs mrr@10
