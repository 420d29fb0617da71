"""``fm.compare``: intervals and p-values against scipy; corrections against references.

scipy is the independent implementation here: ``scipy.stats.bootstrap`` (percentile
intervals, within Monte-Carlo tolerance), ``ttest_rel``, ``wilcoxon(method="approx")``
and ``t.sf``. Holm and Benjamini-Hochberg are checked against the textbook definitions
written out below, one p-value at a time.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import frame_metrics as fm
from frame_metrics.datasets import synthetic
from frame_metrics.errors import (
    DuplicateRowsError,
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
from tests.conftest import Constructor, assert_kind, recmetrics, to_polars

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
    out = fm.compare(frame, baseline_model="a", n_resamples=4000, seed=3)
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
        out = fm.compare(frame, baseline_model="a", n_resamples=500, seed=t, level=0.9)
        row = out.row(0, named=True)
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
    want = fm.compare(frame, baseline_model="b", n_resamples=200, seed=1)
    got = fm.compare(constructor(frame), baseline_model="b", n_resamples=200, seed=1)
    assert_kind(got, constructor)
    assert to_polars(got).rows() == want.rows()
    via_namespace = recmetrics(constructor(frame)).compare(
        baseline_model="b", n_resamples=200, seed=1
    )
    assert to_polars(via_namespace).rows() == want.rows()


def test_from_recommendations_and_truth(constructor: Constructor) -> None:
    recs, truth = synthetic(n_users=300)
    recs = recs.filter(pl.col("rank") <= 10)
    per_user = fm.evaluate(recs, truth, metrics=["ndcg", "recall"], k=[5, 10], by="model")
    want = fm.compare(per_user, baseline_model="popularity", n_resamples=300, seed=2)
    got = fm.compare(
        constructor(recs),
        constructor(truth),
        baseline_model="popularity",
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


def test_metric_strings_as_written(constructor: Constructor) -> None:
    """Each metric is named as requested (spec section 8), split at its last "@"."""
    recs, truth = synthetic(n_users=200)
    metrics = ["map@5", "ap(ap_denominator=relevant)@5", "ndcg(gain={2: 3, 3: 7})@5"]
    got = to_polars(
        fm.compare(constructor(recs), constructor(truth), metrics=metrics, n_resamples=50, seed=3)
    )
    assert sorted(set(got["metric"])) == [
        "ap(ap_denominator=relevant)",
        "map",
        "ndcg(gain={2: 3, 3: 7})",
    ]
    assert set(got["k"]) == {5}
    # The per-user frame of evaluate has those columns, and compare finds them by name.
    per_user = fm.evaluate(recs, truth, metrics=metrics, by="model")
    assert per_user.columns == ["model", "user", *metrics]
    again = fm.compare(per_user, metrics=metrics[:1], n_resamples=50, seed=3)
    assert again["metric"].unique().to_list() == ["map"]
    means = per_user.group_by("model").agg(pl.col("map@5").mean()).sort("model")
    assert again.sort("model")["mean"].to_list() == pytest.approx(means["map@5"].to_list())


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
    only_a = per_user_frame(30).filter(pl.col("model") == "a")
    one = fm.compare(only_a, baseline_model="a", n_resamples=10)
    assert one["model"].to_list() == ["a", "a"]
    assert one["diff"].to_list() == [None, None]
    with pytest.raises(fm.InvalidValueError, match="at least two models to compare every pair"):
        fm.compare(only_a, n_resamples=10)


# --- bad input: one table, every frame kind -------------------------------------------------

#: Three models on three users, every value written out: the frame the bad inputs start from.
SMALL = pl.DataFrame(
    {
        "model": ["a", "a", "a", "b", "b", "b", "c", "c", "c"],
        "user": [1, 2, 3] * 3,
        "ndcg@10": [0.5, 0.25, 1.0, 0.75, 0.5, 1.0, 0.0, 0.25, 0.5],
        "hit_rate@10": [1.0, 0.0, 1.0, 1.0, 1.0, 1.0, 0.0, 1.0, 1.0],
    }
)


def _set(column: str, at: dict[str, Any], value: Any) -> Callable[[pl.DataFrame], pl.DataFrame]:
    """Set ``column`` to ``value`` on the rows matching ``at`` (model/user values)."""

    def change(frame: pl.DataFrame) -> pl.DataFrame:
        where = pl.all_horizontal(pl.col(c) == v for c, v in at.items())
        dtype = frame.schema[column]
        return frame.with_columns(
            pl.when(where).then(pl.lit(value, dtype=dtype)).otherwise(pl.col(column)).alias(column)
        )

    return change


def _unchanged(frame: pl.DataFrame) -> pl.DataFrame:
    return frame


def _int_models(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.with_columns(
        pl.col("model").replace_strict({"a": 0, "b": 1, "c": 2}, return_dtype=pl.Int64)
    )


NAN_MESSAGE = (
    "frame: expected finite numbers or nulls in metric column {column!r}, found {n} NaN or "
    "infinite value(s), e.g. {example}; a null marks a user the metric is undefined for"
)

#: (id, how the frame is changed, keywords, error, exact message)
BAD: list[
    tuple[str, Callable[[pl.DataFrame], pl.DataFrame], dict[str, Any], type[FrameMetricsError], str]
] = [
    # A. values no mean is true with, and rows of nobody
    (
        "nan-value",
        _set("ndcg@10", {"model": "b", "user": 2}, float("nan")),
        {},
        InvalidValueError,
        NAN_MESSAGE.format(column="ndcg@10", n=1, example="model='b', user=2, ndcg@10=nan"),
    ),
    (
        "inf-values",
        lambda f: _set("hit_rate@10", {"user": 3}, -math.inf)(
            _set("hit_rate@10", {"model": "a", "user": 2}, math.inf)(f)
        ),
        {},
        InvalidValueError,
        NAN_MESSAGE.format(column="hit_rate@10", n=4, example="model='a', user=2, hit_rate@10=inf"),
    ),
    (
        "null-model",
        _set("model", {"model": "c", "user": 3}, None),
        {},
        InvalidValueError,
        "frame: expected no nulls in key column 'model', found 1 null row(s), e.g. model=None, user=3",
    ),
    (
        "null-user",
        _set("user", {"model": "a", "user": 1}, None),
        {},
        InvalidValueError,
        "frame: expected no nulls in key column 'user', found 1 null row(s), e.g. model='a', user=None",
    ),
    (
        "repeated-row",
        lambda f: pl.concat([f, f.slice(4, 1)]),
        {},
        DuplicateRowsError,
        "frame: expected one row per (model, user), found 2 rows that repeat one, e.g. model='b', user=2",
    ),
    # B. compare's own keywords: "name: expected X, got Y"
    (
        "level-text",
        _unchanged,
        {"level": "0.9"},
        InvalidOptionError,
        "level: expected a number in (0, 1), got '0.9'",
    ),
    (
        "level-percent",
        _unchanged,
        {"level": 95},
        InvalidOptionError,
        "level: expected a number in (0, 1), got 95",
    ),
    (
        "level-one",
        _unchanged,
        {"level": np.float64(1.0)},
        InvalidOptionError,
        f"level: expected a number in (0, 1), got {np.float64(1.0)!r}",
    ),
    (
        "level-nan",
        _unchanged,
        {"level": math.nan},
        InvalidOptionError,
        "level: expected a number in (0, 1), got nan",
    ),
    (
        "resamples-zero",
        _unchanged,
        {"n_resamples": 0},
        InvalidOptionError,
        "n_resamples: expected an int in [1, 10_000_000], got 0",
    ),
    (
        "resamples-float",
        _unchanged,
        {"n_resamples": 100.0},
        InvalidOptionError,
        "n_resamples: expected an int in [1, 10_000_000], got 100.0",
    ),
    (
        "resamples-bool",
        _unchanged,
        {"n_resamples": True},
        InvalidOptionError,
        "n_resamples: expected an int in [1, 10_000_000], got True",
    ),
    (
        "resamples-huge",
        _unchanged,
        {"n_resamples": 10**12},
        InvalidOptionError,
        "n_resamples: expected an int in [1, 10_000_000], got 1000000000000",
    ),
    (
        "resamples-400-digits",
        _unchanged,
        {"n_resamples": 10**400},
        InvalidOptionError,
        "n_resamples: expected an int in [1, 10_000_000], got "
        "10000000000000000000... (an integer of 401 digits)",
    ),
    (
        "level-400-digits",
        _unchanged,
        {"level": 10**400},
        InvalidOptionError,
        "level: expected a number in (0, 1), got 10000000000000000000... (an integer of 401 digits)",
    ),
    (
        "seed-negative",
        _unchanged,
        {"seed": -1},
        InvalidOptionError,
        "seed: expected an int >= 0, got -1",
    ),
    (
        "seed-numpy-negative",
        _unchanged,
        {"seed": np.int64(-1)},
        InvalidOptionError,
        f"seed: expected an int >= 0, got {np.int64(-1)!r}",
    ),
    (
        "seed-text",
        _unchanged,
        {"seed": "0"},
        InvalidOptionError,
        "seed: expected an int >= 0, got '0'",
    ),
    (
        "correction",
        _unchanged,
        {"correction": "bonferroni"},
        InvalidOptionError,
        "correction: expected one of 'holm', 'bh', got 'bonferroni'",
    ),
    (
        "progress",
        _unchanged,
        {"progress": "yes"},
        InvalidOptionError,
        "progress: expected True, False or None, got 'yes'",
    ),
    (
        "model-not-a-name",
        _unchanged,
        {"model": 3},
        InvalidOptionError,
        "model: expected a column name, got 3",
    ),
    (
        "by-not-a-name",
        _unchanged,
        {"by": 3},
        InvalidOptionError,
        "by: expected a column name or a list of column names, got 3",
    ),
    (
        "user-empty",
        _unchanged,
        {"user": []},
        InvalidOptionError,
        "user: expected at least one column name, got an empty list",
    ),
    (
        "baseline-model-unknown",
        _unchanged,
        {"baseline_model": "z"},
        InvalidOptionError,
        "baseline_model: expected one of the models 'a', 'b', 'c', got 'z'",
    ),
    # C. an integer model column: a model that is not there, as a number and as text
    (
        "baseline-model-int-unknown",
        _int_models,
        {"baseline_model": 5},
        InvalidOptionError,
        "baseline_model: expected one of the models 0, 1, 2, got 5",
    ),
    (
        "baseline-model-int-as-name",
        _int_models,
        {"baseline_model": "a"},
        InvalidOptionError,
        "baseline_model: expected one of the models 0, 1, 2, got 'a'",
    ),
    # D. baseline= is evaluate's frame for serendipity; the model compared with is baseline_model=
    (
        "baseline-is-a-model-name",
        _unchanged,
        {"baseline": "a"},
        InvalidOptionError,
        "baseline: expected a frame of a baseline model's recommendations (serendipity's, "
        "passed to evaluate), got 'a'; to name the model every other one is compared with, "
        "pass baseline_model='a'",
    ),
    # E. the model column is not a segment, nor part of the user key
    (
        "by-model",
        _unchanged,
        {"by": "model"},
        InvalidOptionError,
        "by: expected segment columns other than the model column 'model', got ['model']",
    ),
    (
        "by-user",
        _unchanged,
        {"by": ["user"]},
        InvalidOptionError,
        "by: expected segment columns other than the user key ['user'], got ['user']",
    ),
    (
        "user-model",
        _unchanged,
        {"user": ["user", "model"]},
        InvalidOptionError,
        "user: expected user key columns other than the model column 'model', got ['user', 'model']",
    ),
    # columns that are not there
    (
        "model-column",
        _unchanged,
        {"model": "system"},
        MissingColumnsError,
        "frame: expected column 'system', not found; available columns: 'model', 'user', 'ndcg@10', 'hit_rate@10'",
    ),
    (
        "metric-column",
        _unchanged,
        {"metrics": "ndcg@5"},
        MissingColumnsError,
        "frame: expected column 'ndcg@5' (did you mean 'ndcg@10'?), not found; available columns: 'model', 'user', 'ndcg@10', 'hit_rate@10'",
    ),
]


@pytest.mark.parametrize(
    ("change", "kwargs", "error", "message"), [pytest.param(*c[1:], id=c[0]) for c in BAD]
)
def test_bad_input(
    constructor: Constructor,
    request: pytest.FixtureRequest,
    change: Callable[[pl.DataFrame], pl.DataFrame],
    kwargs: dict[str, Any],
    error: type[FrameMetricsError],
    message: str,
) -> None:
    frame = change(SMALL)
    if request.node.callspec.params["constructor"] == "pandas-numpy" and any(
        frame.select(pl.col(pl.Float64).is_nan().any()).row(0)
    ):
        # pandas with numpy dtypes has no NaN apart from missing: NaN reads as null, a
        # user the metric is undefined for, left out of that metric's mean and pairs.
        want = fm.compare(frame.fill_nan(None), n_resamples=10, **kwargs)
        got = fm.compare(constructor(frame), n_resamples=10, **kwargs)
        assert to_polars(got).rows() == want.rows()
        return
    with pytest.raises(error, match=f"^{re.escape(message)}$"):
        fm.compare(constructor(frame), **{"n_resamples": 10, **kwargs})


def test_numpy_scalars_are_options(constructor: Constructor) -> None:
    want = fm.compare(SMALL, level=0.9, n_resamples=50, seed=3, baseline_model="b")
    got = fm.compare(
        constructor(SMALL),
        level=np.float64(0.9),
        n_resamples=np.int64(50),
        seed=np.uint32(3),
        baseline_model=np.str_("b"),
    )
    assert to_polars(got).rows() == want.rows()


def test_null_value_leaves_the_user_out_of_that_metric(constructor: Constructor) -> None:
    """A null value is a user the metric is undefined for: not in its mean, nor its pairs."""
    frame = _set("ndcg@10", {"model": "b", "user": 2}, None)(SMALL)
    out = to_polars(fm.compare(constructor(frame), n_resamples=20, baseline_model="a"))
    b = out.filter(pl.col("model") == "b").rows_by_key("metric", named=True, unique=True)
    assert (b["ndcg"]["n_users"], b["ndcg"]["n_paired"]) == (2, 2)
    assert b["ndcg"]["mean"] == (0.75 + 1.0) / 2  # users 1 and 3
    assert b["ndcg"]["diff"] == ((0.75 - 0.5) + (1.0 - 1.0)) / 2
    assert (b["hit_rate"]["n_users"], b["hit_rate"]["n_paired"]) == (3, 3)  # the row stays


def test_integer_models(constructor: Constructor) -> None:
    """Models 0 and 1, baseline 1: compared as numbers, and named as numbers or as text."""
    frame = pl.DataFrame(
        {
            "model": [0, 0, 0, 1, 1, 1],
            "user": [1, 2, 3] * 2,
            "hit_rate@5": [0.0, 1.0, 0.5, 1.0, 1.0, 0.0],
        }
    )
    for named in (1, np.int64(1), "1"):
        out = to_polars(fm.compare(constructor(frame), baseline_model=named, n_resamples=50))
        assert out.schema["model"] == out.schema["baseline"] == pl.Int64
        assert out.select("model", "baseline", "n_users").rows() == [(0, 1, 3), (1, 1, 3)]
        zero, one = out.rows(named=True)
        assert zero["mean"] == pytest.approx((0.0 + 1.0 + 0.5) / 3, rel=1e-15)
        assert one["mean"] == pytest.approx((1.0 + 1.0 + 0.0) / 3, rel=1e-15)
        # Differences 0 - 1 per user: -1, 0, 0.5; mean -1/6, sd sqrt(7/12), t = -1/sqrt(7),
        # and Student's t with 2 df has P(|T| > t) = 1 - t / sqrt(2 + t^2) = 1 - 1/sqrt(15).
        assert zero["diff"] == pytest.approx(-1 / 6, rel=1e-12)
        assert zero["p_ttest"] == pytest.approx(1 - 1 / math.sqrt(15), rel=1e-12)
        assert one["diff"] is None
    # The default baseline is the smallest model as a number (2 < 10), not as text.
    tens = frame.with_columns(pl.col("model") * 8 + 2)
    assert to_polars(fm.compare(constructor(tens), n_resamples=10))["baseline"][0] == 2


def test_serendipity_baseline_frame_and_baseline_model(constructor: Constructor) -> None:
    """baseline= is serendipity's frame (passed to evaluate), baseline_model= the model compared with."""
    popularity = {1: ["a", "b"], 2: ["a", "b"], 3: ["a", "b"]}
    personal = {1: ["c", "a"], 2: ["d", "b"], 3: ["a", "e"]}
    recs = pl.DataFrame(
        [
            {"model": model, "user": u, "item": item, "rank": r}
            for model, lists in (("popularity", popularity), ("personal", personal))
            for u, items in lists.items()
            for r, item in enumerate(items, 1)
        ]
    )
    truth = pl.DataFrame(
        {"user": [1, 1, 2, 3, 3], "item": ["a", "c", "b", "e", "f"], "relevance": 1}
    )
    baseline = recs.filter(pl.col("model") == "popularity").drop("model")
    # serendipity@2 = |relevant and not in the baseline's top 2 {a, b}| / 2, per user:
    # popularity is all expected (0, 0, 0); personal: user 1 c (1/2), user 2 none (d is not
    # relevant, b is expected), user 3 e (1/2).
    want_users = {"personal": [0.5, 0.0, 0.5], "popularity": [0.0, 0.0, 0.0]}
    per_user = to_polars(
        fm.evaluate(
            constructor(recs),
            constructor(truth),
            metrics=["serendipity"],
            k=2,
            by="model",
            baseline=constructor(baseline),
        )
    ).sort("model", "user")
    for model, values in want_users.items():
        got = per_user.filter(pl.col("model") == model)["serendipity@2"].to_list()
        assert got == values
    out = fm.compare(
        constructor(recs),
        constructor(truth),
        metrics=["serendipity"],
        k=2,
        baseline=constructor(baseline),
        baseline_model="popularity",
        n_resamples=50,
    )
    assert_kind(out, constructor)
    rows = to_polars(out).rows_by_key("model", named=True, unique=True)
    assert rows["popularity"]["mean"] == 0.0
    assert rows["personal"]["mean"] == pytest.approx((0.5 + 0.0 + 0.5) / 3, rel=1e-15)
    assert rows["personal"]["baseline"] == "popularity"
    assert rows["personal"]["n_paired"] == 3
    assert rows["personal"]["diff"] == pytest.approx(1 / 3, rel=1e-15)
    # Differences 0.5, 0, 0.5: mean 1/3, sd sqrt(1/12), t = (1/3) / (sqrt(1/12) / sqrt(3)) = 2;
    # with 2 df, P(|T| > 2) = 1 - 2 / sqrt(2 + 4).
    assert rows["personal"]["p_ttest"] == pytest.approx(1 - 2 / math.sqrt(6), rel=1e-12)
    # The same from evaluate's own per-user values.
    again = fm.compare(per_user, baseline_model="popularity", n_resamples=50)
    assert again.rows() == to_polars(out).rows()


def test_diagnose_by_model_says_what_it_counts(constructor: Constructor) -> None:
    """2 models: the counts are (user, model) sums, and the printout says so, per group."""
    recs = pl.DataFrame(
        {
            "model": ["a", "a", "b", "b", "b"],
            "user": [1, 2, 1, 2, 3],
            "item": ["x", "y", "x", "y", "z"],
            "rank": [1, 1, 1, 1, 1],
        }
    )
    # Truth per model: a has users 1 and 2, b has users 1, 2 and 3.
    truth = pl.DataFrame(
        {
            "model": ["a", "a", "b", "b", "b"],
            "user": [1, 2, 1, 2, 3],
            "item": ["x", "q", "x", "y", "z"],
            "relevance": [1, 1, 1, 1, 1],
        }
    )
    d = fm.diagnose(constructor(recs), constructor(truth), k=1, by="model")
    assert d.n_users == 2 + 3
    lines = [line.split(":")[0] + ": " + line.split(":")[1].strip() for line in str(d).split("\n")]
    assert lines[:3] == [
        "users evaluated, summed over 2 model groups: 5 (2 to 3 users per group)",
        "users without a relevant item, summed over groups: 0",
        "users without recommendations (scored 0), summed over groups: 0",
    ]
    # One group: the counts are users, and say nothing of groups.
    only_b = [f.filter(pl.col("model") == "b") for f in (recs, truth)]
    one = fm.diagnose(*map(constructor, only_b), k=1, by="model")
    assert str(one).split("\n")[0].split() == ["users", "evaluated:", "3"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        pytest.param(
            {"by": "model"},
            "by: expected segment columns other than the model column 'model', got ['model']",
            id="by-model",
        ),
        pytest.param(
            {"baseline": "popularity"},
            "baseline: expected a frame of a baseline model's recommendations (serendipity's, "
            "passed to evaluate), got 'popularity'; to name the model every other one is "
            "compared with, pass baseline_model='popularity'",
            id="baseline-is-a-model-name",
        ),
    ],
)
def test_bad_input_with_recommendations(
    constructor: Constructor, kwargs: dict[str, Any], message: str
) -> None:
    """The same checks, and messages, from recommendations and truth, and via the namespace."""
    recs, truth = synthetic(n_users=20)
    with pytest.raises(InvalidOptionError, match=f"^{re.escape(message)}$"):
        recmetrics(constructor(recs)).compare(constructor(truth), k=5, n_resamples=10, **kwargs)
    with pytest.raises(InvalidOptionError, match=f"^{re.escape(message)}$"):
        fm.compare(constructor(recs), constructor(truth), k=5, n_resamples=10, **kwargs)
