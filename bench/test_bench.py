"""Tests of the benchmark's generator, conversions and agreement checks (no timing asserts).

Run with ``python -m pytest bench -q``. The peer checks skip when a peer is not installed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness
import peers
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
    assert peers.nested_dict(users, items, values) == {
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
    for cut in (None, K):
        qrels, run = peers.qrels_and_run(recs.to_pandas(), truth.to_pandas(), cut)
        got = pytrec_eval.RelevanceEvaluator(qrels, peers.pytrec_measures(K)).evaluate(run)
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


def clean_run_output(code: int, capsys: pytest.CaptureFixture[str]) -> str:
    """The printed output of a benchmark run that failed no job and matched every value."""
    out = capsys.readouterr().out
    assert code == 0, out
    assert "FAILED" not in out
    assert "MISMATCH" not in out
    assert "0 mismatch(es)" in out
    return out


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
    out = clean_run_output(code, capsys)
    assert "differs, as expected" in out  # recip_rank without a cutoff vs mrr@10


def test_handwritten_query_agrees_per_user() -> None:
    fm = pytest.importorskip("frame_metrics")
    recs, truth = make_data(2000, seed=5)
    ours = fm.evaluate(recs, truth, metrics=ranking.METRICS, k=K).sort("user")
    hand = peers.handwritten_per_user(recs, truth, K).collect().sort("user")
    assert hand["user"].to_list() == ours["user"].to_list()
    for m in ranking.METRICS:
        diff = (hand[m] - ours[f"{m}@{K}"]).abs().max()
        assert isinstance(diff, float)
        assert diff <= 1e-12, m
    means = peers.handwritten_means(recs, truth, K).collect().row(0, named=True)
    agg = fm.evaluate(recs, truth, metrics=ranking.METRICS, k=K, aggregate=True).row(0, named=True)
    assert means["n_users"] == agg["n_users"] == 2000
    for m in ranking.METRICS:
        assert means[m] == pytest.approx(agg[f"{m}@{K}"], abs=1e-12), m


def test_duckdb_sql_gives_the_packages_means() -> None:
    """The hand-written DuckDB query (a peer of issue 35) under the package's defaults:
    its means are fm.evaluate's, and the end-to-end run finds no mismatch."""
    fm = pytest.importorskip("frame_metrics")
    pytest.importorskip("duckdb")
    recs, truth = make_data(2000, seed=7)
    run = peers.prepare_duckdb(recs, truth, K).run
    assert run is not None
    got = run()
    agg = fm.evaluate(recs, truth, metrics=ranking.METRICS, k=K, aggregate=True).row(0, named=True)
    assert got["n_users"] == agg["n_users"] == 2000
    for m in ranking.METRICS:
        assert got[m] == pytest.approx(agg[f"{m}@{K}"], abs=1e-12), m


@pytest.mark.parametrize(
    ("shape", "query"),
    [
        ("score", {"score": "score"}),
        ("several k", {"k": ranking.MULTI_K}),
        ("by model", {"by": ["model"]}),
    ],
)
def test_duckdb_shapes_give_the_packages_means(shape: str, query: dict[str, Any]) -> None:
    """Each shape's DuckDB SQL (issue 35's peer beside each shape): its means are
    fm.evaluate's for the same call, per cutoff and per model."""
    fm = pytest.importorskip("frame_metrics")
    pytest.importorskip("duckdb")
    import polars as pl

    recs, truth = make_data(1500, seed=3)
    ks = query.pop("k", [K])
    by = query.get("by", [])
    if by:
        recs = ranking.stack_models(recs, 100)
    if "score" in query:
        recs = recs.drop("rank")
    run = peers.prepare_duckdb(recs, truth, ks, read=lambda out: {"frame": out}, **query).run
    assert run is not None
    got = run()["frame"]
    call = {"score": query.get("score"), "by": by or None}
    want = fm.evaluate(recs, truth, metrics=ranking.METRICS, k=ks, aggregate=True, **call)
    assert isinstance(got, pl.DataFrame)
    assert sorted(got.columns) == sorted(want.columns), shape
    assert got.select(*by, "n_users").rows() == want.select(*by, "n_users").rows()
    for column in want.columns[len(by) + 1 :]:
        for a, b in zip(got[column], want[column], strict=True):
            assert a == pytest.approx(b, abs=1e-12), (shape, column)


def test_end_to_end_duckdb_job(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("duckdb")
    code = ranking.main(
        ["--users", "300", "--slow-size", "0", "--repeats", "1", "--only", "duckdb-handwritten"]
    )
    out = clean_run_output(code, capsys)
    assert "duckdb-handwritten" in out


def test_handwritten_query_scores_users_without_hits_zero() -> None:
    recs = pl.DataFrame({"user": [1, 1, 2, 2], "item": [10, 11, 20, 21], "rank": [1, 2, 1, 2]})
    truth = pl.DataFrame({"user": [1, 2, 2], "item": [11, 99, 21], "relevance": [2, 1, 0]})
    out = peers.handwritten_per_user(recs, truth, k=2).collect().sort("user")
    assert out.to_dicts() == [
        {
            "user": 1,
            "precision": 0.5,
            "recall": 1.0,
            "ap": 0.5,
            "ndcg": pytest.approx(1 / np.log2(3)),
            "mrr": 0.5,
        },
        {"user": 2, "precision": 0.0, "recall": 0.0, "ap": 0.0, "ndcg": 0.0, "mrr": 0.0},
    ]


def _agree_per_user(hand: pl.LazyFrame, ours: pl.DataFrame, names: dict[str, str]) -> None:
    """``hand``'s columns equal ``ours``' (hand-written name -> fm name), row for row."""
    keys = [c for c in ("model", "user") if c in ours.columns]
    got = hand.collect().sort(keys)
    ours = ours.sort(keys)
    assert got.select(keys).equals(ours.select(keys))
    for h, o in names.items():
        diff = (got[h] - ours[o]).abs().max()
        assert isinstance(diff, float)
        assert diff <= 1e-12, h


def test_handwritten_shapes_agree_per_user() -> None:
    fm = pytest.importorskip("frame_metrics")
    recs, truth = make_data(1500, seed=7)
    metrics = ranking.METRICS
    ks = ranking.MULTI_K
    multi = fm.evaluate(recs, truth, metrics=metrics, k=ks)
    at_k = {f"{m}@{k}": f"{m}@{k}" for m in metrics for k in ks}
    _agree_per_user(peers.handwritten_per_user(recs, truth, ks), multi, at_k)
    single = {f"{m}@100": f"{m}@100" for m in metrics}
    _agree_per_user(peers.handwritten_per_user(recs, truth, [100]), multi, single)
    # Scores rounded to one decimal: many ties within a user, broken by item ascending.
    tied = recs.drop("rank").with_columns(pl.col("score").round(1))
    assert tied.select(pl.struct("user", "score").is_duplicated().any()).item()
    plain = {m: f"{m}@{K}" for m in metrics}
    ours = fm.evaluate(tied, truth, metrics=metrics, k=K, score="score")
    _agree_per_user(peers.handwritten_per_user(tied, truth, K, score="score"), ours, plain)
    stacked = ranking.stack_models(recs, 100)
    ours = fm.evaluate(stacked, truth, metrics=metrics, k=K, by="model")
    hand = peers.handwritten_per_user(stacked, truth, K, by=["model"])
    _agree_per_user(hand, ours, plain)


def test_stack_models_permutes_ranks_within_users(data: tuple[pl.DataFrame, pl.DataFrame]) -> None:
    recs, _ = data
    stacked = ranking.stack_models(recs, 30)
    assert stacked.height == 3 * recs.height
    assert stacked.schema["rank"] == pl.Int32
    assert stacked.filter(pl.col("model") == "a").drop("model").equals(recs)
    ranks = stacked.group_by("model", "user").agg(pl.col("rank").sort())
    assert all(r == list(range(1, 31)) for r in ranks["rank"].to_list())
    b = stacked.filter(pl.col("model") == "b")
    assert b.filter(pl.col("rank") == 1)["item"].equals(
        recs.filter(pl.col("rank") == 28)["item"]  # (28 - 1 + 3) % 30 + 1 = 1
    )


def test_plan_sizes_shapes_and_only() -> None:
    def stages(*argv: str) -> dict[int, list[str]]:
        return {s.users: s.jobs for s in ranking.plan(ranking.parse_args(list(argv)))}

    both = stages("--users", "1000,2000", "--slow-size", "500", "--full-run-max", "1000")
    assert list(both) == [1000, 2000, 500]
    for users in (1000, 2000):
        assert set(ranking.SHAPES) <= set(both[users])
        assert set(ranking.HAND_SHAPES) <= set(both[users])
        assert set(ranking.HANDWRITTEN) <= set(both[users])
        assert set(ranking.SAME_READER) <= set(both[users])
        assert both[users][:2] == [ranking.REFERENCE, ranking.BASELINE]
    assert "pytrec_eval-full" in both[1000]
    assert "pytrec_eval-full" not in both[2000]
    assert not set(ranking.SHAPES) & set(both[500])

    plain = stages("--users", "1000", "--slow-size", "0", "--no-shapes")
    assert not set(ranking.SHAPES) & set(plain[1000])
    assert not set(ranking.HAND_SHAPES) & set(plain[1000])
    assert set(ranking.SAME_READER.values()) <= set(plain[1000])
    only = stages("--users", "1000", "--slow-size", "1000", "--only", "fm-shape-score")
    assert only == {1000: [ranking.REFERENCE, ranking.BASELINE, "fm-shape-k10", "fm-shape-score"]}
    with pytest.raises(SystemExit):
        stages("--users", "1000,x")


def _result(name: str, users: int, median: float, peak: float = 100.0) -> harness.Result:
    return harness.Result(name, users, times=[median], peaks=[peak], base_mib=50.0)


def test_targets_pass_and_fail_where_they_apply() -> None:
    big = 1_000_000
    results = [
        _result(ranking.BASELINE, big, 1.0, peak=900.0),
        _result("fm-pandas-streaming", big, 1.05),
        _result("polars-handwritten", big, 1.5, peak=1000.0),
        _result("pytrec_eval-cut", big, 12.0),
        _result("rectools", big, 9.0),
        _result("fm-shape-k10", big, 1.0),
        _result("fm-shape-by-model", big, 5.4),  # 1.8x per input row
        _result("fm-shape-k100", big, 2.5),
        _result(ranking.BASELINE, 10_000, 1.0),
        _result("rectools", 10_000, 2.0),
    ]
    table = harness.targets_table(ranking.SUITE, results, ranking.TARGETS)
    rows = {(r[0], r[1]): r for r in table[1:]}
    n = f"{big:,}"
    verdicts = {target: row[-1] for (users, target), row in rows.items() if users == n}
    peers_vs_fm = "faster of pytrec_eval (cut to top k) and RecTools / fm"
    assert verdicts == {
        "fm / hand-written query, collect()": "PASS",  # 1.0 / 1.5
        peers_vs_fm: "FAIL",  # rectools 9.0 / 1.0 < 10x
        "fm pandas input / polars input": "PASS",  # 1.05 <= 1.10
        "peak RSS fm / hand-written query": "PASS",  # 900 <= 1000 MiB
        "worst shape / fm-shape-k10": "FAIL",  # k100 2.5 > 2.0 (by-model 5.4 / 3 = 1.8)
    }
    assert rows[(n, peers_vs_fm)][2:4] == ["rectools 9.000 / 1.000 s = 9.00x", ">= 10.00x"]
    assert rows[(n, "worst shape / fm-shape-k10")][2] == "fm-shape-k100 2.500 / 1.000 s = 2.50x"
    small = rows[("10,000", peers_vs_fm)]  # 2.0 / 1.0 against 6x, which applies from 100k
    assert small[3:] == [">= 6.00x", "info (fails; the target is at >= 100,000 users)"]
    shapes = {row[1]: row for row in ranking.shapes_table(results)[1:]}
    assert shapes["fm-shape-by-model"][7] == "1.80x"
    assert shapes["fm-shape-by-model"][-1] == "PASS"


def test_the_spread_and_the_chunked_input_targets() -> None:
    # Spread: (slowest - fastest) / median of each job's fresh processes, fm's over
    # DuckDB's; chunked input: the baseline (as read) over the same frames in one chunk.
    mid = 100_000

    def timed(name: str, times: list[float]) -> harness.Result:
        return harness.Result(name, mid, times=times, peaks=[100.0] * len(times), base_mib=50.0)

    results = [
        timed(ranking.BASELINE, [1.0, 1.3, 1.2]),  # (1.3 - 1.0) / 1.2 = 0.25
        timed("duckdb-handwritten", [1.0, 1.1, 1.05]),  # (1.1 - 1.0) / 1.05 = 0.0952...
        timed("fm-polars-contiguous", [1.0, 1.1, 1.05]),  # 1.2 / 1.05 = 1.14x
    ]
    table = harness.targets_table(ranking.SUITE, results, ranking.TARGETS)
    rows = {r[1]: r for r in table[1:] if r[0] == f"{mid:,}"}
    spread = rows["spread of fm's first calls / DuckDB's ((slowest - fastest) / median)"]
    assert spread[2] == f"{ranking.BASELINE} 0.25 / 0.10 = {0.25 / (0.1 / 1.05):.2f}x"
    assert spread[3:] == ["<= 1.00x", "FAIL"]
    chunked = rows["fm as read (a chunk per row group) / frames in one chunk"]
    assert chunked[2].endswith(f"= {1.2 / 1.05:.2f}x")
    assert chunked[3:] == ["<= 1.10x", "FAIL"]
    # One run each: spreads of 0, no wider.
    once = [timed(ranking.BASELINE, [1.0]), timed("duckdb-handwritten", [1.0])]
    table = harness.targets_table(ranking.SUITE, once, ranking.TARGETS)
    assert {r[1]: r[-1] for r in table[1:]}[spread[1]] == "PASS"


def test_end_to_end_shapes_and_handwritten(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("frame_metrics")
    code = ranking.main(
        [
            "--users",
            "300,400",
            "--slow-size",
            "0",
            "--repeats",
            "1",
            "--only",
            "polars-handwritten,fm-pandas-streaming,fm-shape-multik,fm-shape-by-model,"
            "fm-shape-score,fm-shape-lazy-in-memory",
        ]
    )
    out = clean_run_output(code, capsys)
    assert "\nShapes " in out
    assert "\nTargets (package default engine" in out
    worst = [line.split()[0] for line in out.splitlines() if "worst shape / fm-shape-k10" in line]
    assert worst == ["300", "400"]


def test_end_to_end_same_shape_and_reader_jobs(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Every pair of a frame_metrics job and its hand-written query runs at a tiny size,
    every check of each is made (its value and the reference's exist) and passes."""
    pytest.importorskip("frame_metrics")
    pairs = {**ranking.SAME_SHAPE, **ranking.SAME_READER}
    jobs = sorted({*pairs, *pairs.values()})
    results = tmp_path / "results.json"
    argv = ["--users", "300", "--slow-size", "0", "--repeats", "1", "--json", str(results)]
    out = clean_run_output(ranking.main([*argv, "--only", ",".join(jobs)]), capsys)
    assert "\nEach shape against the hand-written polars query of the same shape" in out
    assert "\nEach reader's frames: " in out
    done = {r["job"]: r for r in json.loads(results.read_text())["results"]}
    assert set(jobs) <= set(done)
    ref = {**done[ranking.REFERENCE]["values"], **done[ranking.REFERENCE]["extras"]}
    for name in jobs:
        got = done[name]["values"]
        for check in ranking.JOBS[name].checks:
            assert check.label in got, (name, check.label)
            assert check.ref in ref, (name, check.ref)
    targets = [line for line in out.splitlines() if "hand-written query, same " in line]
    assert len(targets) == 2 * (len(pairs) - 1)  # speed and memory; k=10 has its own rows


def test_against_runs_the_fm_jobs_on_both_checkouts(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("frame_metrics")
    argv = ["--users", "300", "--slow-size", "0", "--repeats", "1", "--no-shapes"]
    code = ranking.main([*argv, "--only", "polars-handwritten", "--against", "HEAD"])
    out = clean_run_output(code, capsys)
    before = next(line for line in out.splitlines() if line.startswith("before: HEAD (git "))
    assert before.endswith("/checkout/frame_metrics/__init__.py")
    assert f"after: {harness.ROOT} (git " in out
    table = out.split("\nBefore/after: ")[1].split("\n\n")[0].splitlines()
    jobs = [line.split()[1] for line in table[3:]]
    assert jobs == [ranking.BASELINE]  # the only timed frame_metrics job of this run
    assert table[3].split()[-1] == "identical"  # the same commit on both sides
