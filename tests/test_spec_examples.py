"""The spec's worked examples (section 7), on every frame kind, as written-out arithmetic."""

from __future__ import annotations

import math

import polars as pl
import pytest

import frame_metrics as fm
from frame_metrics.options import GainName as Gain
from tests.conftest import Constructor, assert_kind, recmetrics, to_polars

L2 = math.log2


def recs_of(lists: dict[int, list[str]]) -> pl.DataFrame:
    rows = [(u, i, r) for u, items in lists.items() for r, i in enumerate(items, start=1)]
    return pl.DataFrame(rows, schema=["user", "item", "rank"], orient="row")


def truth_of(rel: dict[int, dict[str, float]]) -> pl.DataFrame:
    rows = [(u, i, float(v)) for u, d in rel.items() for i, v in d.items()]
    return pl.DataFrame(rows, schema=["user", "item", "relevance"], orient="row")


def test_example_1_precision_recall(constructor: Constructor) -> None:
    recs = constructor(recs_of({1: list("abcde")}))
    truth = constructor(truth_of({1: dict.fromkeys("abchij", 1)}))
    out = fm.evaluate(recs, truth, metrics=["precision", "recall"], k=5)
    assert_kind(out, constructor)
    row = to_polars(out).row(0, named=True)
    assert row["precision@5"] == pytest.approx(3 / 5, rel=1e-15)
    assert row["recall@5"] == pytest.approx(3 / 6, rel=1e-15)


def test_example_2_dcg_ndcg_linear(constructor: Constructor) -> None:
    recs = constructor(recs_of({1: list("abc")}))
    truth = constructor(truth_of({1: {"a": 3, "b": 2, "c": 1, "d": 3, "e": 0, "f": 0}}))
    row = to_polars(recmetrics(recs).evaluate(truth, metrics=["dcg", "ndcg"], k=3)).row(
        0, named=True
    )
    dcg = 3 / L2(2) + 2 / L2(3) + 1 / L2(4)
    idcg = 3 / L2(2) + 3 / L2(3) + 2 / L2(4)
    assert dcg == pytest.approx(4.7618595071429155, rel=1e-15)
    assert idcg == pytest.approx(5.892789260714372, rel=1e-15)
    assert row["dcg@3"] == pytest.approx(dcg, rel=1e-15)
    assert row["ndcg@3"] == pytest.approx(0.808082437104775, rel=1e-14)


def test_example_3_ap_min_k_and_map(constructor: Constructor) -> None:
    recs = constructor(recs_of({1: list("ABCDE"), 2: list("ACEBD")}))
    truth = constructor(truth_of({1: dict.fromkeys("BDZ", 1), 2: dict.fromkeys("BDZ", 1)}))
    per_user = to_polars(fm.evaluate(recs, truth, metrics="ap", k=5))
    ap1 = (1 / 2 + 2 / 4) / min(3, 5)
    ap2 = (1 / 4 + 2 / 5) / min(3, 5)
    assert per_user["ap@5"].to_list() == pytest.approx([ap1, ap2], rel=1e-15)
    assert ap1 == pytest.approx(1 / 3)
    assert ap2 == pytest.approx(0.21666666666666667)
    mean = to_polars(fm.evaluate(recs, truth, metrics="map", k=5, aggregate=True))
    assert mean["map@5"].item() == pytest.approx(0.275, rel=1e-15)
    assert mean["n_users"].item() == 2


def test_example_4_ap_denominator_k(constructor: Constructor) -> None:
    recs = constructor(recs_of({1: list("abc"), 2: list("def")}))
    truth = constructor(truth_of({1: dict.fromkeys("afg", 1), 2: dict.fromkeys("bfc", 1)}))
    out = to_polars(fm.evaluate(recs, truth, metrics="ap@3", ap_denominator="k"))
    assert out["ap@3"].to_list() == pytest.approx([(1 / 1) / 3, (1 / 3) / 3], rel=1e-15)
    agg = to_polars(fm.evaluate(recs, truth, metrics="ap@3", ap_denominator="k", aggregate=True))
    assert agg["ap@3"].item() == pytest.approx(0.2222222222222222, rel=1e-15)


def test_example_5_mrr(constructor: Constructor) -> None:
    recs = constructor(recs_of({1: list("xyr"), 2: list("xr"), 3: list("r")}))
    truth = constructor(truth_of({1: {"r": 1}, 2: {"r": 1}, 3: {"r": 1}}))
    agg = to_polars(fm.evaluate(recs, truth, metrics="mrr", k=3, aggregate=True))
    assert agg["mrr@3"].item() == pytest.approx((1 / 3 + 1 / 2 + 1) / 3, rel=1e-15)
    assert agg["mrr@3"].item() == pytest.approx(0.6111111111111112)


@pytest.mark.parametrize(
    ("gain", "dcg", "idcg", "ndcg"),
    [
        ("linear", 9.601615481693072, 10.170938923619678, 0.9440244950636285),
        ("exponential", 23.605836629128788, 28.160424164541645, 0.8382628220086332),
    ],
)
def test_example_6_graded_six_positions(
    constructor: Constructor, gain: Gain, dcg: float, idcg: float, ndcg: float
) -> None:
    rels = [3, 3, 3, 4, 2, 2]
    items = [f"i{n}" for n in range(6)]
    recs = constructor(recs_of({1: items}))
    truth = constructor(truth_of({1: dict(zip(items, rels, strict=True))}))
    row = to_polars(fm.evaluate(recs, truth, metrics=["dcg", "ndcg"], k=6, gain=gain)).row(
        0, named=True
    )

    def g(r: int) -> float:
        return float(r) if gain == "linear" else 2.0**r - 1

    expected_dcg = sum(g(r) / L2(pos + 2) for pos, r in enumerate(rels))
    expected_idcg = sum(g(r) / L2(pos + 2) for pos, r in enumerate(sorted(rels, reverse=True)))
    assert expected_dcg == pytest.approx(dcg, rel=1e-15)
    assert expected_idcg == pytest.approx(idcg, rel=1e-15)
    assert row["dcg@6"] == pytest.approx(dcg, rel=1e-14)
    assert row["ndcg@6"] == pytest.approx(ndcg, rel=1e-14)
    if gain == "linear":  # cumulative gain, the sum of the six relevances
        assert sum(rels) == 17
