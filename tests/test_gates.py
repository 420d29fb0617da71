"""``fm.check`` and the command line's ``--fail-under`` / ``--max-drop`` (sheet 12).

Every expected value is read off a result built by hand (means written out) or off the
columns of the ``fm.compare`` result the gate reads; every pass or fail is the
comparison written out.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import frame_metrics as fm
from tests.conftest import Constructor, assert_kind, recmetrics, to_polars

#: Means of three models, in eighths (exact in binary): the gates' arithmetic is exact.
MEANS = pl.DataFrame(
    {
        "model": ["a", "b", "c"],
        "n_users": [8, 8, 8],
        "ndcg@10": [0.375, 0.25, 0.5],
        "rmse": [0.875, 1.125, None],
    }
)


def test_gates_on_means_every_frame_kind(constructor: Constructor) -> None:
    got = fm.check(constructor(MEANS), {"ndcg@10": ">= 0.3", "rmse": "<= 1"})
    assert_kind(got, constructor)
    assert to_polars(got).rows() == [
        ("ndcg@10 >= 0.3", "a", 0.375, True),
        ("ndcg@10 >= 0.3", "b", 0.25, False),
        ("ndcg@10 >= 0.3", "c", 0.5, True),
        ("rmse <= 1", "a", 0.875, True),
        ("rmse <= 1", "b", 1.125, False),
        ("rmse <= 1", "c", None, False),  # undefined: fails
    ]


def test_the_ways_of_writing_a_gate_agree() -> None:
    want = fm.check(MEANS, {"ndcg@10": ">= 0.375"})
    assert_frame_equal(fm.check(MEANS, {"ndcg@10": 0.375}), want)  # a number: at least
    assert_frame_equal(fm.check(MEANS, "ndcg@10 >= 0.375"), want)
    assert_frame_equal(fm.check(MEANS, ["ndcg@10>=0.375"]), want)
    assert want["passed"].to_list() == [True, False, True]  # 0.375 >= 0.375
    strict = fm.check(MEANS, "ndcg@10 > 0.375")
    assert strict["passed"].to_list() == [False, False, True]


def test_max_drop_from_a_baseline_model() -> None:
    got = fm.check(MEANS, max_drop={"ndcg@10": 0.125}, baseline_model="a")
    # b: 0.375 - 0.25 = 0.125 (allowed, <=), c: 0.375 - 0.5 = -0.125 (a gain)
    assert got.rows() == [
        ("drop(ndcg@10) <= 0.125", "b", 0.125, True),
        ("drop(ndcg@10) <= 0.125", "c", -0.125, True),
    ]
    tight = fm.check(MEANS, max_drop={"ndcg@10": 0.0625}, baseline_model="a")
    assert tight["passed"].to_list() == [False, True]
    by_segment = pl.concat([MEANS.with_columns(segment=pl.lit(s)) for s in ("x", "y")]).select(
        "segment", *MEANS.columns
    )
    by_segment = by_segment.with_columns(
        pl.when((pl.col("segment") == "y") & (pl.col("model") == "a"))
        .then(0.625)
        .otherwise(pl.col("ndcg@10"))
        .alias("ndcg@10")
    )
    got = fm.check(by_segment, max_drop={"ndcg@10": 0.125}, baseline_model="a")
    # Within each segment: y's baseline is 0.625, so b drops 0.375 and c 0.125.
    assert got.select("segment", "model", "value").rows() == [
        ("x", "b", 0.125), ("x", "c", -0.125), ("y", "b", 0.375), ("y", "c", 0.125)
    ]  # fmt: skip


def _per_user() -> pl.DataFrame:
    values = {"a": [0.0, 0.5, 1.0, 0.5], "b": [0.25, 0.5, 1.0, 0.75], "c": [0.0, 0.0, 0.5, 0.25]}
    return pl.DataFrame(
        {"model": [m for m in values for _ in range(4)], "user": list(range(4)) * 3,
         "ndcg@10": [v for vs in values.values() for v in vs]}
    )  # fmt: skip


def test_gates_on_compare_intervals() -> None:
    comparison = fm.compare(_per_user(), baseline_model="a", n_resamples=200, seed=0)
    got = fm.check(comparison, {"ci_low(ndcg@10)": ">= 0.2", "ndcg@10": ">= 0.2"})
    lows = dict(comparison.select("model", "ci_low").iter_rows())
    means = dict(comparison.select("model", "mean").iter_rows())
    assert got.select("gate", "model", "value", "passed").rows() == [
        *(("ci_low(ndcg@10) >= 0.2", m, lows[m], lows[m] >= 0.2) for m in "abc"),
        *(("ndcg@10 >= 0.2", m, means[m], means[m] >= 0.2) for m in "abc"),
    ]
    # The mean of c is 0.1875: below; a's interval reaches below 0.2 though its mean
    # (0.5) does not.
    assert means["c"] == 0.1875
    assert lows["a"] < 0.2 < means["a"]
    # In baseline mode the drop is read from the comparison's baseline.
    drop = fm.check(comparison, max_drop={"ndcg@10": 0.25})
    assert drop.select("model", "value", "passed").rows() == [
        ("b", 0.5 - 0.625, True), ("c", 0.5 - 0.1875, False)
    ]  # fmt: skip
    # Every pair: a model is on several rows, judged once; the drop needs its baseline.
    pairs = fm.compare(_per_user(), n_resamples=200, seed=0)
    assert fm.check(pairs, "ndcg@10 >= 0.2")["model"].to_list() == ["a", "b", "c"]
    with pytest.raises(fm.InvalidOptionError, match="pass baseline_model="):
        fm.check(pairs, max_drop={"ndcg@10": 0.1})
    assert fm.check(pairs, max_drop={"ndcg@10": 0.1}, baseline_model="b")["model"].to_list() == [
        "a",
        "c",
    ]


def test_raise_on_fail_lists_every_failure() -> None:
    with pytest.raises(fm.GateFailedError) as failed:
        fm.check(MEANS, {"ndcg@10": ">= 0.3", "rmse": "<= 1"}, raise_on_fail=True)
    assert str(failed.value) == (
        "gates: 3 of 6 failed: ndcg@10 >= 0.3 for model='b': 0.25; rmse <= 1 for "
        "model='b': 1.125; rmse <= 1 for model='c': undefined (null)"
    )
    assert failed.value.failed.height == 3
    assert isinstance(failed.value, fm.FrameMetricsError)
    assert fm.check(MEANS, "ndcg@10 >= 0.25", raise_on_fail=True)["passed"].all()


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: fm.check(MEANS, "ndgc@10 >= 0.3"), fm.InvalidOptionError,
         "gates: expected a metric of the result in a gate, got 'ndgc@10' (did you mean "
         "'ndcg@10'?), not computed; the result's metrics: 'ndcg@10', 'rmse'"),
        (lambda: fm.check(MEANS, "ndcg@10 => 0.3"), fm.InvalidOptionError,
         "expected a gate such as 'ndcg@10 >= 0.30'"),
        (lambda: fm.check(MEANS, {"ndcg@10": "at least 0.3"}), fm.InvalidOptionError,
         "expected a condition such as '>= 0.30'"),
        (lambda: fm.check(MEANS, "ci_lo(ndcg@10) >= 0.3"), fm.InvalidOptionError,
         "expected one of mean, ci_low, ci_high of a metric in a gate, got 'ci_lo' (did you "
         "mean 'ci_low'?)"),
        (lambda: fm.check(MEANS, "ci_low(ndcg@10) >= 0.3"), fm.InvalidOptionError,
         "ci_low and ci_high are fm.compare's"),
        (lambda: fm.check(MEANS), fm.InvalidOptionError, "expected at least one gate"),
        (lambda: fm.check(MEANS, max_drop={"ndcg@10": -1}), fm.InvalidOptionError,
         "max_drop: expected a number >= 0"),
        (lambda: fm.check(MEANS, max_drop={"ndcg@10": 0.1}, baseline_model="z"),
         fm.InvalidOptionError, "expected one of the models 'a', 'b', 'c', got 'z'"),
        (lambda: fm.check(MEANS.drop("n_users"), "ndcg@10 >= 0.3"), fm.InvalidValueError,
         "expected the means of fm.evaluate(..., aggregate=True)"),
        (lambda: fm.check(MEANS, "ndcg@10 >= inf"), fm.InvalidOptionError,
         "expected a gate such as"),
    ],
)  # fmt: skip
def test_bad_gates_are_clear_errors(call: object, error: type, message: str) -> None:
    with pytest.raises(error) as raised:
        call()  # type: ignore[operator]
    assert message in str(raised.value)


def test_empty_result_gives_an_empty_typed_frame() -> None:
    got = fm.check(MEANS.clear(), "ndcg@10 >= 0.3")
    assert got.height == 0
    assert got.schema == pl.Schema(
        {"gate": pl.String, "model": pl.String, "value": pl.Float64, "passed": pl.Boolean}
    )


# --- the command line ---------------------------------------------------------------------


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "frame_metrics", *args], capture_output=True, text=True, check=False
    )


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str, pl.DataFrame]:
    recs, truth = fm.datasets.synthetic(n_users=200)
    folder = tmp_path_factory.mktemp("gates")
    recs.write_parquet(folder / "recs.parquet")
    truth.write_parquet(folder / "truth.parquet")
    means = fm.evaluate(
        recs, truth, metrics=["ndcg@10", "recall@10"], by="model", aggregate=True, threshold=4
    )
    return str(folder / "recs.parquet"), str(folder / "truth.parquet"), means


def test_cli_fail_under_exit_3_with_a_line_per_failure(
    files: tuple[str, str, pl.DataFrame],
) -> None:
    recs, truth, means = files
    ndcg = dict(means.select("model", "ndcg@10").iter_rows())
    between = (ndcg["popularity"] + ndcg["personal"]) / 2  # one passes, one fails
    base = ["evaluate", recs, truth, "-m", "ndcg@10,recall@10", "--by", "model",
            "--threshold", "4", "--format", "csv"]  # fmt: skip
    done = _cli(*base, "--fail-under", f"ndcg@10={between}")
    assert done.returncode == 3, done.stderr
    assert pl.read_csv(done.stdout.encode()).equals(means)  # written as usual
    low = "personal" if ndcg["personal"] < between else "popularity"
    assert done.stderr.splitlines() == [
        f"frame-metrics: gate failed: ndcg@10 >= {between:g} for model={low!r}: {ndcg[low]:.6g}"
    ]
    ok = _cli(*base, "--fail-under", f"ndcg@10={min(ndcg.values())}")
    assert (ok.returncode, ok.stderr) == (0, "")
    drop = _cli(*base, "--max-drop", "ndcg@10=0", "--baseline-model", "personal")
    worse = ndcg["personal"] - ndcg["popularity"]
    assert drop.returncode == (3 if worse > 0 else 0)
    typo = _cli(*base, "--fail-under", "ndgc@10=0.1")
    assert typo.returncode == 2
    assert (
        "--fail-under/--max-drop: expected a metric of the result in a gate, got 'ndgc@10' "
        "(did you mean 'ndcg@10'?)" in typo.stderr
    )
    assert typo.stdout == ""  # judged before anything is written
    per_user = _cli(*base, "--per-user", "--fail-under", "ndcg@10=0.1")
    assert per_user.returncode == 2
    assert "leave it out" in per_user.stderr
    bad = _cli(*base, "--fail-under", "ndcg@10>=0.1")
    assert bad.returncode == 2
    assert "expected METRIC=X" in bad.stderr


def test_cli_compare_gates_on_intervals(files: tuple[str, str, pl.DataFrame]) -> None:
    recs, truth, _ = files
    base = ["compare", recs, truth, "-m", "ndcg", "-k", "10", "--threshold", "4",
            "--resamples", "200", "--baseline-model", "personal", "--format", "csv"]  # fmt: skip
    done = _cli(*base, "--fail-under", "ci_low(ndcg@10)=0")
    assert (done.returncode, done.stderr) == (0, "")
    comparison = pl.read_csv(done.stdout.encode())
    lows = dict(comparison.select("model", "ci_low").iter_rows())
    high = max(lows.values())
    failed = _cli(*base, "--fail-under", f"ci_low(ndcg@10)={high}")
    assert failed.returncode == 3
    low = min(lows, key=lambda m: lows[m])
    assert failed.stderr.splitlines() == [
        f"frame-metrics: gate failed: ci_low(ndcg@10) >= {high:g} for model={low!r}: "
        f"{lows[low]:.6g}"
    ]


def test_a_ci_script_gates_a_pipeline(tmp_path: Path, files: tuple[str, str, pl.DataFrame]) -> None:
    """The docs' shell script: set -e stops the pipeline at a failed gate (status 3)."""
    recs, truth, _ = files
    script = tmp_path / "gate.sh"
    script.write_text(
        "set -e\n"
        f'"{sys.executable}" -m frame_metrics evaluate {recs} {truth} -m ndcg@10 --by model '
        "--threshold 4 --fail-under ndcg@10=$1 -o means.csv\n"
        "echo deployed\n"
    )
    passed = subprocess.run(
        ["bash", str(script), "0"], check=False, cwd=tmp_path, capture_output=True, text=True
    )
    assert (passed.returncode, passed.stdout) == (0, "deployed\n")
    stopped = subprocess.run(
        ["bash", str(script), "0.99"], check=False, cwd=tmp_path, capture_output=True, text=True
    )
    assert (stopped.returncode, stopped.stdout) == (3, "")
    assert (tmp_path / "means.csv").exists()  # the result is still written


def test_the_namespace_forwards_check_and_report(constructor: Constructor) -> None:
    """``.recmetrics.check`` in a chain; ``.recmetrics.report`` on the recommendations."""
    recs, truth = fm.datasets.synthetic(n_users=60)
    means = recmetrics(constructor(recs)).evaluate(
        constructor(truth), metrics="ndcg@5", by="model", aggregate=True, threshold=4
    )
    chained = to_polars(recmetrics(means).check({"ndcg@5": ">= 0.2"}))
    assert_frame_equal(chained, fm.check(to_polars(means), {"ndcg@5": ">= 0.2"}))
    shared = recmetrics(constructor(recs)).report(
        constructor(truth), metrics="ndcg@5", threshold=4, n_resamples=50
    )
    assert_frame_equal(
        shared.means, fm.report(recs, truth, metrics="ndcg@5", threshold=4, n_resamples=50).means
    )
