"""``fm.compare``: intervals and p-values against scipy; corrections against references.

scipy is the independent implementation here: ``scipy.stats.bootstrap`` (percentile
intervals, within Monte-Carlo tolerance), ``ttest_rel``, ``wilcoxon(method="approx")``
and ``t.sf``. Holm and Benjamini-Hochberg are checked against the textbook definitions
written out below, one p-value at a time.
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import frame_metrics as fm
from frame_metrics.datasets import synthetic
from frame_metrics.errors import (
    FrameMetricsError,
    InvalidOptionError,
    InvalidValueError,
    MissingColumnsError,
)
from frame_metrics.stats import (
    benjamini_hochberg,
    holm,
    normal_sf,
    paired_t_test,
    student_t_sf,
    wilcoxon_signed_rank,
)
from tests.conftest import Constructor, assert_kind, to_polars

scipy_stats = pytest.importorskip("scipy.stats")


def per_user_frame(n: int = 400, seed: int = 0) -> pl.DataFrame:
    """Three models on the same users; model c misses some users."""
    rng = np.random.default_rng(seed)
    base = rng.random(n)
    frames = []
    for name, shift, keep in (("a", 0.0, 1.0), ("b", 0.05, 1.0), ("c", -0.02, 0.9)):
        kept = rng.random(n) < keep
        frames.append(
            pl.DataFrame(
                {
                    "model": name,
                    "user": np.arange(n)[kept],
                    "ndcg@10": np.clip(base + shift + rng.normal(0, 0.1, n), 0, 1)[kept],
                    "hit_rate@10": (rng.random(n) < 0.3 + shift)[kept].astype(float),
                }
            )
        )
    return pl.concat(frames)


# --- the statistics, against scipy --------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(t=st.floats(-50, 50), df=st.integers(1, 500))
def test_student_t_sf_matches_scipy(t: float, df: int) -> None:
    assert student_t_sf(t, df) == pytest.approx(scipy_stats.t.sf(t, df), rel=1e-9, abs=1e-300)


@settings(max_examples=100, deadline=None)
@given(z=st.floats(-30, 30))
def test_normal_sf_matches_scipy(z: float) -> None:
    assert normal_sf(z) == pytest.approx(scipy_stats.norm.sf(z), rel=1e-12, abs=1e-300)


diffs_strategy = st.lists(
    st.sampled_from([-1.0, -0.5, -0.1, 0.0, 0.1, 0.2, 0.5, 1.0, 0.3333333333333333]),
    min_size=2,
    max_size=60,
) | st.lists(st.floats(-1, 1, allow_nan=False), min_size=2, max_size=60)


@pytest.mark.filterwarnings("ignore:Precision loss occurred:RuntimeWarning")
@settings(max_examples=200, deadline=None)
@given(diffs=diffs_strategy)
def test_paired_t_test_matches_scipy(diffs: list[float]) -> None:
    t, p = paired_t_test(diffs)
    with np.errstate(all="ignore"):
        want = scipy_stats.ttest_rel(np.array(diffs), np.zeros(len(diffs)))
    if math.isnan(want.pvalue):
        assert math.isnan(p)
        return
    assert t == pytest.approx(want.statistic, rel=1e-9)
    assert p == pytest.approx(want.pvalue, rel=1e-8, abs=1e-300)


@settings(max_examples=200, deadline=None)
@given(diffs=diffs_strategy)
def test_wilcoxon_matches_scipy(diffs: list[float]) -> None:
    w, p = wilcoxon_signed_rank(diffs)
    if not any(diffs):
        assert math.isnan(p)
        return
    with np.errstate(all="ignore"):
        want = scipy_stats.wilcoxon(np.array(diffs), method="approx")
    assert w == want.statistic
    assert p == pytest.approx(want.pvalue, rel=1e-9)


def holm_reference(p: list[float]) -> list[float]:
    """Holm: the i-th smallest p times (m - i + 1), made monotone, capped at 1."""
    m = len(p)
    order = sorted(range(m), key=lambda i: p[i])
    adjusted = [0.0] * m
    for rank, i in enumerate(order):
        adjusted[i] = min(1.0, max((m - r) * p[order[r]] for r in range(rank + 1)))
    return adjusted


def bh_reference(p: list[float]) -> list[float]:
    """BH: min over j >= i of m / j times the j-th smallest p, capped at 1."""
    m = len(p)
    order = sorted(range(m), key=lambda i: p[i])
    adjusted = [0.0] * m
    for rank, i in enumerate(order):
        adjusted[i] = min(1.0, *(m / (j + 1) * p[order[j]] for j in range(rank, m)))
    return adjusted


@settings(max_examples=200, deadline=None)
@given(p=st.lists(st.floats(0, 1), min_size=1, max_size=30))
def test_corrections_match_references(p: list[float]) -> None:
    assert holm(p) == pytest.approx(holm_reference(p), rel=1e-12)
    assert benjamini_hochberg(p) == pytest.approx(bh_reference(p), rel=1e-12)


def test_corrections_skip_nan() -> None:
    got = holm([0.01, math.nan, 0.04])
    assert got[0] == 0.02
    assert math.isnan(got[1])
    assert got[2] == 0.04


# --- compare ---------------------------------------------------------------------------------


def test_compare_matches_scipy() -> None:
    frame = per_user_frame()
    out = fm.compare(frame, baseline="a", n_resamples=4000, seed=3)
    assert out.columns[:4] == ["metric", "k", "model", "n_users"]
    rng = np.random.default_rng(0)
    for row in out.iter_rows(named=True):
        column = f"{row['metric']}@{row['k']}"
        x = frame.filter(pl.col("model") == row["model"]).sort("user")
        values = x[column].to_numpy()
        assert row["n_users"] == values.size
        assert row["mean"] == pytest.approx(values.mean(), rel=1e-12)
        ci = scipy_stats.bootstrap(
            (values,),
            np.mean,
            n_resamples=4000,
            method="percentile",
            confidence_level=0.95,
            random_state=rng,
        ).confidence_interval
        se = values.std() / math.sqrt(values.size)
        # Two Monte-Carlo estimates of the same quantiles: they agree to a small share of
        # the standard error (4000 resamples: the quantile's own error is ~0.03 se).
        assert row["ci_low"] == pytest.approx(ci.low, abs=0.15 * se)
        assert row["ci_high"] == pytest.approx(ci.high, abs=0.15 * se)
        if row["model"] == "a":
            assert row["diff"] is None
            continue
        base = frame.filter(pl.col("model") == "a").select("user", pl.col(column).alias("b"))
        paired = x.select("user", pl.col(column).alias("m")).join(base, on="user")
        m, b = paired["m"].to_numpy(), paired["b"].to_numpy()
        assert row["n_paired"] == m.size
        assert row["diff"] == pytest.approx((m - b).mean(), rel=1e-12)
        assert row["p_ttest"] == pytest.approx(scipy_stats.ttest_rel(m, b).pvalue, rel=1e-8)
        assert row["p_wilcoxon"] == pytest.approx(
            scipy_stats.wilcoxon(m, b, method="approx").pvalue, rel=1e-8
        )
        dci = scipy_stats.bootstrap(
            (m, b),
            lambda u, v: np.mean(u - v),
            paired=True,
            n_resamples=4000,
            method="percentile",
            random_state=rng,
        ).confidence_interval
        dse = (m - b).std() / math.sqrt(m.size)
        assert row["diff_low"] == pytest.approx(dci.low, abs=0.15 * dse)
        assert row["diff_high"] == pytest.approx(dci.high, abs=0.15 * dse)
    # Holm over the four (model, metric) comparisons, each test separately.
    compared = out.filter(pl.col("model") != "a")
    for test in ("p_ttest", "p_wilcoxon"):
        assert compared[f"{test}_adj"].to_list() == pytest.approx(
            holm_reference(compared[test].to_list()), rel=1e-12
        )


def test_bootstrap_coverage_is_nominal() -> None:
    """Over many samples of a known mean, a 90% interval holds it about 90% of the time."""
    rng = np.random.default_rng(7)
    hits = 0
    trials = 200
    for t in range(trials):
        values = rng.exponential(1.0, 200)  # true mean 1
        frame = pl.DataFrame({"model": "a", "user": np.arange(200), "x@1": values})
        row = fm.compare(frame, n_resamples=500, seed=t, level=0.9).row(0, named=True)
        hits += row["ci_low"] <= 1.0 <= row["ci_high"]
    assert 0.82 <= hits / trials <= 0.96


def test_same_seed_same_result_other_seed_other_interval() -> None:
    frame = per_user_frame(200)
    one = fm.compare(frame, n_resamples=300, seed=5)
    assert one.equals(fm.compare(frame, n_resamples=300, seed=5))
    other = fm.compare(frame, n_resamples=300, seed=6)
    assert other["mean"].equals(one["mean"])
    assert not other["ci_low"].equals(one["ci_low"])


def test_every_kind_gives_the_same_numbers(constructor: Constructor) -> None:
    frame = per_user_frame(150)
    want = fm.compare(frame, baseline="b", n_resamples=200, seed=1)
    got = fm.compare(constructor(frame), baseline="b", n_resamples=200, seed=1)
    assert_kind(got, constructor)
    assert to_polars(got).rows() == want.rows()
    via_namespace = constructor(frame).recmetrics.compare(baseline="b", n_resamples=200, seed=1)
    assert to_polars(via_namespace).rows() == want.rows()


def test_from_recommendations_and_truth(constructor: Constructor) -> None:
    recs, truth = synthetic(n_users=300)
    recs = recs.filter(pl.col("rank") <= 10)
    per_user = fm.evaluate(recs, truth, metrics=["ndcg", "recall"], k=[5, 10], by="model")
    want = fm.compare(per_user, baseline="popularity", n_resamples=300, seed=2)
    got = fm.compare(
        constructor(recs),
        constructor(truth),
        baseline="popularity",
        metrics=["ndcg", "recall"],
        k=[5, 10],
        n_resamples=300,
        seed=2,
    )
    assert to_polars(got).rows() == want.rows()
    # The personal model is better on every metric, and clearly so.
    personal = want.filter(pl.col("model") == "personal")
    assert (personal["diff_low"] > 0).all()
    assert (personal["p_ttest_adj"] < 1e-6).all()


def test_segments_in_one_call() -> None:
    frame = per_user_frame(300).with_columns(
        activity=pl.when(pl.col("user") % 3 == 0).then(pl.lit("heavy")).otherwise(pl.lit("light"))
    )
    out = fm.compare(frame, by="activity", n_resamples=200, seed=0)
    assert out.columns[0] == "activity"
    assert out["activity"].unique().sort().to_list() == ["heavy", "light"]
    for segment in ("heavy", "light"):
        alone = fm.compare(
            frame.filter(pl.col("activity") == segment).drop("activity"), n_resamples=200
        )
        got = out.filter(pl.col("activity") == segment)
        for name in ("n_users", "mean", "n_paired", "diff", "p_ttest", "p_wilcoxon"):
            assert got[name].to_list() == alone[name].to_list(), name
    # One correction family over both segments: 2 segments x 2 models x 2 metrics.
    compared = out.filter(pl.col("model") != "a")
    assert compared["p_ttest_adj"].to_list() == pytest.approx(
        holm_reference(compared["p_ttest"].to_list()), rel=1e-12
    )


def test_benjamini_hochberg_option() -> None:
    out = fm.compare(per_user_frame(200), n_resamples=100, correction="bh")
    compared = out.filter(pl.col("model") != "a")
    assert compared["p_wilcoxon_adj"].to_list() == pytest.approx(
        bh_reference(compared["p_wilcoxon"].to_list()), rel=1e-12
    )


def test_progress_bar_without_tqdm(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "tqdm", None)
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)
    fm.compare(per_user_frame(50), n_resamples=50, progress=True)
    assert "compare: bootstrap" in capsys.readouterr().err
    fm.compare(per_user_frame(50), n_resamples=50)  # small: no bar by default
    assert capsys.readouterr().err == ""


def test_empty_and_single_model() -> None:
    empty = per_user_frame(10).clear()
    out = fm.compare(empty, n_resamples=10)
    assert out.height == 0
    assert "p_ttest_adj" in out.columns
    one = fm.compare(per_user_frame(30).filter(pl.col("model") == "a"), n_resamples=10)
    assert one["model"].to_list() == ["a", "a"]
    assert one["diff"].to_list() == [None, None]


BAD: list[tuple[str, dict[str, Any], type[FrameMetricsError], str]] = [
    (
        "baseline",
        {"baseline": "z"},
        InvalidOptionError,
        "baseline: expected one of the models 'a', 'b', 'c', got 'z'",
    ),
    ("level", {"level": 95}, InvalidOptionError, "level: expected a number in (0, 1), got 95"),
    (
        "resamples",
        {"n_resamples": 0},
        InvalidOptionError,
        "n_resamples: expected an int >= 1, got 0",
    ),
    (
        "correction",
        {"correction": "bonferroni"},
        InvalidOptionError,
        "correction: expected one of 'holm', 'bh', got 'bonferroni'",
    ),
    (
        "model-column",
        {"model": "system"},
        MissingColumnsError,
        "frame: expected column 'system', not found; available columns: 'model', 'user', 'ndcg@10', 'hit_rate@10'",
    ),
    (
        "metric-column",
        {"metrics": "ndcg@5"},
        MissingColumnsError,
        "frame: expected column 'ndcg@5' (did you mean 'ndcg@10'?), not found; available columns: 'model', 'user', 'ndcg@10', 'hit_rate@10'",
    ),
]


@pytest.mark.parametrize(
    ("kwargs", "error", "message"), [pytest.param(*c[1:], id=c[0]) for c in BAD]
)
def test_bad_options(kwargs: dict[str, Any], error: type[FrameMetricsError], message: str) -> None:
    with pytest.raises(error, match=f"^{re.escape(message)}$"):
        fm.compare(per_user_frame(20), **{"n_resamples": 10, **kwargs})


def test_repeated_rows_are_refused() -> None:
    frame = per_user_frame(20)
    with pytest.raises(
        InvalidValueError,
        match=r"^frame: expected one row per \(model, segment, user\), found 2 rows that repeat one$",
    ):
        fm.compare(pl.concat([frame, frame.head(1)]), n_resamples=10)
