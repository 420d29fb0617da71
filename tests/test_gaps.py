"""``fm.gaps``: group means and gaps written out by hand, Welch's test against scipy, the
bootstrap against a slow reference and its coverage, the default active/inactive split by
hand, ``by`` models, every frame kind, and errors with their exact messages.
"""

from __future__ import annotations

import math
import re
import statistics
import warnings
from typing import Any

import numpy as np
import polars as pl
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import frame_metrics as fm
from frame_metrics.errors import (
    DuplicateRowsError,
    IgnoredOptionWarning,
    InvalidOptionError,
    InvalidValueError,
    MissingColumnsError,
    Pass,
)
from frame_metrics.stats import welch_t_test
from tests.conftest import Constructor, assert_kind, is_pandas_numpy, recmetrics, to_polars

scipy_stats = pytest.importorskip("scipy.stats")

#: Six users in two countries; user 6 has no ndcg (undefined for them).
SMALL = pl.DataFrame(
    {
        "user": [1, 2, 3, 4, 5, 6],
        "country": ["fr", "de", "fr", "de", "fr", "de"],
        "ndcg@10": [0.5, 0.25, 1.0, 0.75, 0.0, None],
        "recall@5": [1.0, 0.5, 0.0, 0.5, 0.5, 1.0],
    }
)


def welch_p(a: list[float], b: list[float]) -> float:
    return float(scipy_stats.ttest_ind(a, b, equal_var=False).pvalue)


def test_two_groups_by_hand(constructor: Constructor) -> None:
    out = fm.gaps(constructor(SMALL), "country", n_resamples=500)
    assert_kind(out, constructor)
    got = to_polars(out)
    assert got.columns == [
        "metric",
        "k",
        "group",
        "n_users",
        "mean",
        "diff",
        "diff_low",
        "diff_high",
        "p_value",
        "mean_abs_diff",
        "range",
    ]
    # de: ndcg 0.25, 0.75 (user 6 undefined); recall 0.5, 0.5, 1.0.
    # fr: ndcg 0.5, 1.0, 0.0; recall 1.0, 0.0, 0.5. Sorted groups: de first.
    de_ndcg, fr_ndcg = (0.25 + 0.75) / 2, (0.5 + 1.0 + 0.0) / 3
    de_recall, fr_recall = (0.5 + 0.5 + 1.0) / 3, (1.0 + 0.0 + 0.5) / 3
    assert got.select("metric", "k", "group", "n_users", "mean").rows() == [
        ("ndcg", 10, "de", 2, de_ndcg),
        ("ndcg", 10, "fr", 3, fr_ndcg),
        ("recall", 5, "de", 3, de_recall),
        ("recall", 5, "fr", 3, fr_recall),
    ]
    ndcg = got.filter(metric="ndcg")
    recall = got.filter(metric="recall")
    assert ndcg["diff"].to_list() == [de_ndcg - fr_ndcg] * 2
    assert recall["diff"].to_list() == [de_recall - fr_recall] * 2
    assert ndcg["mean_abs_diff"].to_list() == [abs(de_ndcg - fr_ndcg)] * 2
    assert ndcg["range"].to_list() == [abs(de_ndcg - fr_ndcg)] * 2
    assert ndcg["p_value"][0] == pytest.approx(welch_p([0.25, 0.75], [0.5, 1.0, 0.0]), rel=1e-9)
    assert recall["p_value"][0] == pytest.approx(
        welch_p([0.5, 0.5, 1.0], [1.0, 0.0, 0.5]), rel=1e-9
    )
    for part in (ndcg, recall):
        low, high = part["diff_low"][0], part["diff_high"][0]
        assert low <= part["diff"][0] <= high
        assert part["diff_low"].n_unique() == 1  # one summary per (metric, k)


def test_three_groups_by_hand() -> None:
    frame = pl.DataFrame(
        {
            "user": range(7),
            "tier": ["a", "a", "b", "b", "c", "c", "c"],
            "hit_rate@1": [1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0],
        }
    )
    got = fm.gaps(frame, "tier", n_resamples=100)
    means = [0.5, 1.0, 1 / 3]
    assert got["mean"].to_list() == means
    assert got["n_users"].to_list() == [2, 2, 3]
    pairwise = [abs(0.5 - 1.0), abs(0.5 - 1 / 3), abs(1.0 - 1 / 3)]
    assert got["mean_abs_diff"].to_list() == pytest.approx([sum(pairwise) / 3] * 3, rel=1e-15)
    assert got["range"].to_list() == [1.0 - 1 / 3] * 3
    for column in ("diff", "diff_low", "diff_high", "p_value"):
        assert got[column].to_list() == [None] * 3


def test_group_means_are_exact() -> None:
    # 0.1 ten times: a left-to-right float sum gives 0.9999999999999999; the exact mean 0.1.
    frame = pl.DataFrame({"user": range(12), "g": [0] * 10 + [1] * 2, "x@1": [0.1] * 12})
    got = fm.gaps(frame, "g", n_resamples=10)
    assert sum([0.1] * 10) / 10 != 0.1
    assert got["mean"].to_list() == [0.1, 0.1]
    assert got["diff"].to_list() == [0.0, 0.0]


#: Values of the Welch check: scipy computes the degrees of freedom as written, so for
#: variances below ~1e-154 their squares underflow and it falls back to df = 1; ours
#: scales them first (the exact df). Magnitudes below 1e-50 are left to the example.
_WELCH_VALUES = st.floats(-5, 5, allow_subnormal=False).filter(lambda x: x == 0 or abs(x) > 1e-50)


@settings(max_examples=150, deadline=None)
@given(
    a=st.lists(_WELCH_VALUES, min_size=0, max_size=12),
    b=st.lists(_WELCH_VALUES, min_size=0, max_size=12),
)
# Variances of 1e-173: the squares underflow. Here the exact df is n_b - 1 = 1, scipy's
# fallback too, so the two agree.
@example(a=[0.0, 0.0], b=[0.0, 8.225515087208427e-87])
def test_welch_matches_scipy(a: list[float], b: list[float]) -> None:
    t, p = welch_t_test(a, b)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scipy warns on samples too small or constant
        want = scipy_stats.ttest_ind(a, b, equal_var=False)
    if math.isnan(float(want.pvalue)):
        assert math.isnan(p)
        return
    assert p == pytest.approx(float(want.pvalue), rel=1e-7, abs=1e-12)
    if math.isinf(float(want.statistic)):
        assert t == float(want.statistic)
    else:
        assert t == pytest.approx(float(want.statistic), rel=1e-7, abs=1e-9)


def reference_interval(
    groups: list[list[float]], keys: list[tuple[int, int, int]], n_resamples: int, level: float
) -> tuple[float, float]:
    """The documented seed scheme, one resample at a time, with Python's own mean."""
    resampled: list[list[float]] = []
    for values, (p, g, b) in zip(groups, keys, strict=True):
        rng = np.random.default_rng(np.random.SeedSequence(7, spawn_key=(p, g, b)))
        n = len(values)
        means = []
        for _ in range(n_resamples):
            idx = rng.integers(0, n, size=(1, n), dtype=np.int32)[0]
            means.append(statistics.fmean(values[i] for i in idx))
        resampled.append(means)
    diffs = [x - y for x, y in zip(*resampled, strict=True)]
    low, high = np.quantile(diffs, [(1 - level) / 2, (1 + level) / 2])
    return float(low), float(high)


def test_bootstrap_matches_slow_reference() -> None:
    rng = np.random.default_rng(3)
    n = 40
    a = rng.random(n)
    b = np.where(rng.random(n) < 0.3, np.nan, rng.random(n))  # its own null pattern
    frame = pl.DataFrame(
        {
            "model": ["m0"] * n + ["m1"] * n,
            "user": list(range(n)) * 2,
            "g": (["x"] * 15 + ["y"] * 25) * 2,
            "a@1": np.concatenate([a, a[::-1]]),
            "b@1": np.concatenate([b, b]),
        }
    ).with_columns(pl.col("b@1").fill_nan(None))
    got = fm.gaps(frame, "g", by="model", n_resamples=300, seed=7, level=0.9)
    for p, model in enumerate(["m0", "m1"]):
        part = frame.filter(model=model)
        for column, block in (("a@1", 0), ("b@1", 1)):
            groups = [part.filter(g=g)[column].drop_nulls().to_list() for g in ("x", "y")]
            # Block numbers: a@1 has every user (block 0), b@1 fewer (block 1).
            want = reference_interval(groups, [(p, 0, block), (p, 1, block)], 300, 0.9)
            row = got.filter(model=model, metric=column[0]).row(0, named=True)
            assert row["diff_low"] == pytest.approx(want[0], rel=1e-12, abs=1e-15)
            assert row["diff_high"] == pytest.approx(want[1], rel=1e-12, abs=1e-15)


def test_same_seed_same_interval_other_seed_other() -> None:
    frame = models_frame()
    first = fm.gaps(frame, "segment", by="model", n_resamples=200, seed=1)
    assert first.equals(fm.gaps(frame, "segment", by="model", n_resamples=200, seed=1))
    other = fm.gaps(frame, "segment", by="model", n_resamples=200, seed=2)
    assert (
        first["diff_low"][0] != other["diff_low"][0]
        or first["diff_high"][0] != other["diff_high"][0]
    )


def test_bootstrap_coverage_and_width() -> None:
    # Two normal groups whose true means differ by 0.3: the 90% interval covers 0.3 in
    # about 90% of 200 samples (binomial sd 2.1%), and its width is near the normal
    # interval's, 2 * 1.645 * sqrt(1/60 + 4/90).
    rng = np.random.default_rng(11)
    covered, widths = 0, []
    for trial in range(200):
        x = rng.normal(0.3, 1.0, 60)
        y = rng.normal(0.0, 2.0, 90)
        frame = pl.DataFrame(
            {"user": range(150), "g": ["a"] * 60 + ["b"] * 90, "v": np.concatenate([x, y])}
        )
        row = fm.gaps(frame, "g", n_resamples=400, level=0.9, seed=trial).row(0, named=True)
        covered += row["diff_low"] <= 0.3 <= row["diff_high"]
        widths.append(row["diff_high"] - row["diff_low"])
    assert 0.83 <= covered / 200 <= 0.96
    normal_width = 2 * 1.6448536 * math.sqrt(1 / 60 + 4 / 90)
    assert statistics.fmean(widths) == pytest.approx(normal_width, rel=0.06)


def test_large_groups_count_per_resample() -> None:
    # Above 512 users the counts are drawn one resample at a time: same arithmetic.
    rng = np.random.default_rng(5)
    n = 70_000
    frame = pl.DataFrame({"user": range(n), "g": rng.integers(0, 2, n), "v@3": rng.random(n)})
    row = fm.gaps(frame, "g", n_resamples=20, seed=4).row(0, named=True)
    values = [frame.filter(g=g)["v@3"].to_list() for g in (0, 1)]
    want = reference_interval_seeded(values, 4, 20, 0.95)
    assert row["diff_low"] == pytest.approx(want[0], rel=1e-9)
    assert row["diff_high"] == pytest.approx(want[1], rel=1e-9)


def reference_interval_seeded(
    groups: list[list[float]], seed: int, n_resamples: int, level: float
) -> tuple[float, float]:
    resampled = []
    for g, values in enumerate(groups):
        rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(0, g, 0)))
        arr = np.asarray(values)
        n = arr.size
        resampled.append(
            [
                float(arr[rng.integers(0, n, size=(1, n), dtype=np.int32)[0]].mean())
                for _ in range(n_resamples)
            ]
        )
    diffs = np.asarray(resampled[0]) - np.asarray(resampled[1])
    low, high = np.quantile(diffs, [(1 - level) / 2, (1 + level) / 2])
    return float(low), float(high)


# --- the default split: active and inactive users -----------------------------------------


def test_default_split_by_hand(constructor: Constructor) -> None:
    # 20 users of per_user; ceil(0.05 * 20) = 1 active user: user 3, with 5 train rows.
    # User 19 is not in train (0 rows), user 99 is in train but not evaluated.
    counts = {u: 1 for u in range(19)} | {3: 5, 7: 2, 99: 40}
    train = pl.DataFrame({"user": [u for u, c in counts.items() for _ in range(c)]})
    values = [u / 20 for u in range(20)]
    per_user = pl.DataFrame({"user": range(20), "ndcg@10": values})
    got = to_polars(fm.gaps(constructor(per_user), train=constructor(train), n_resamples=50))
    inactive = [v for u, v in enumerate(values) if u != 3]
    assert got.select("group", "n_users", "mean").rows() == [
        ("active", 1, 3 / 20),
        ("inactive", 19, math.fsum(inactive) / 19),
    ]
    assert got["diff"][0] == 3 / 20 - math.fsum(inactive) / 19
    assert got["p_value"][0] is None  # one active user: no variance, no test


def test_default_split_rounds_up_and_keeps_ties_together() -> None:
    # 100 users, active_share 0.07: ceil(7) = 7 users (not 8, which 0.07 * 100 in floats
    # would give), and users tied with the 7th are active too.
    per_user = pl.DataFrame({"user": range(100), "x@1": [float(u % 2) for u in range(100)]})
    rows = {u: 100 - u for u in range(6)} | {u: 10 for u in range(6, 9)}  # 6, 7, 8 tie
    train = pl.DataFrame({"user": [u for u, c in rows.items() for _ in range(c)]})
    got = fm.gaps(per_user, train=train, active_share=0.07, n_resamples=10)
    assert got.select("group", "n_users").rows() == [("active", 9), ("inactive", 91)]
    untied = {u: 100 - u for u in range(9)}
    train = pl.DataFrame({"user": [u for u, c in untied.items() for _ in range(c)]})
    got = fm.gaps(per_user, train=train, active_share=0.07, n_resamples=10)
    assert got.select("group", "n_users").rows() == [("active", 7), ("inactive", 93)]


def test_default_split_ranks_each_user_once_over_models() -> None:
    per_user = pl.DataFrame(
        {"model": ["a"] * 4 + ["b"] * 4, "user": [1, 2, 3, 4] * 2, "x@1": [1.0, 0, 0, 0] * 2}
    )
    train = pl.DataFrame({"user": [1, 1, 2, 3, 4]})
    got = fm.gaps(per_user, train=train, active_share=0.25, by="model", n_resamples=10)
    assert got.select("model", "group", "n_users", "mean").rows() == [
        ("a", "active", 1, 1.0),
        ("a", "inactive", 3, 0.0),
        ("b", "active", 1, 1.0),
        ("b", "inactive", 3, 0.0),
    ]


def test_default_split_every_user_tied() -> None:
    per_user = pl.DataFrame({"user": [1, 2, 3], "x@1": [1.0, 0.0, 0.5]})
    with pytest.raises(
        InvalidValueError,
        match=re.escape(
            "train: expected users with different numbers of train rows for the default split "
            "into the 0.05 most active and the rest, found all 3 users of per_user tied with "
            "the 1-th most active (2 rows each or more); pass group= to give the groups"
        ),
    ):
        fm.gaps(per_user, train=pl.DataFrame({"user": [1, 1, 2, 2, 3, 3]}))


# --- models, frame kinds, group frames, names -----------------------------------------------


def models_frame() -> pl.DataFrame:
    rng = np.random.default_rng(2)
    n = 60
    return pl.DataFrame(
        {
            "model": ["pop"] * n + ["als"] * n,
            "user": list(range(n)) * 2,
            "segment": (["new", "old", "old"] * 20) * 2,
            "ndcg@10": rng.random(2 * n),
            "recall@10": rng.random(2 * n),
        }
    ).with_columns(
        pl.when(pl.col("recall@10") < 0.2)
        .then(None)
        .otherwise(pl.col("recall@10"))
        .alias("recall@10")
    )


def test_by_models_are_each_their_own() -> None:
    frame = models_frame()
    got = fm.gaps(frame, "segment", by="model", n_resamples=100)
    assert got["model"].unique(maintain_order=True).to_list() == ["als", "pop"]
    for model in ("als", "pop"):
        alone = fm.gaps(frame.filter(model=model).drop("model"), "segment", n_resamples=100)
        mine = got.filter(model=model).drop("model")
        columns = ["metric", "k", "group", "n_users", "mean", "diff", "p_value", "range"]
        assert mine.select(columns).equals(alone.select(columns))
        # n_users counts the users with a value: recall@10 leaves some out.
        part = frame.filter(model=model)
        for group in ("new", "old"):
            n = part.filter(segment=group)["recall@10"].drop_nulls().len()
            assert mine.filter(metric="recall", group=group)["n_users"].item() == n


def test_every_kind_gives_the_same_numbers(constructor: Constructor) -> None:
    frame = models_frame()
    want = fm.gaps(frame, "segment", by="model", n_resamples=200)
    got = fm.gaps(constructor(frame), "segment", by="model", n_resamples=200)
    assert_kind(got, constructor)
    assert to_polars(got).rows() == want.rows()
    via_namespace = recmetrics(constructor(frame)).gaps("segment", by="model", n_resamples=200)
    assert to_polars(via_namespace).rows() == want.rows()


def test_group_frame_equals_group_column(constructor: Constructor) -> None:
    frame = models_frame()
    groups = frame.filter(model="pop").select("user", "segment")
    want = fm.gaps(frame, "segment", by="model", n_resamples=100)
    got = fm.gaps(
        constructor(frame.drop("segment")), constructor(groups), by="model", n_resamples=100
    )
    assert to_polars(got).rows() == want.rows()


def test_group_frame_key_dtypes_meet() -> None:
    per_user = pl.DataFrame({"user": [1, 2, 3, 4], "x@1": [1.0, 0.0, 0.5, 0.5]})
    groups = pl.DataFrame(
        {
            "user": pl.Series([1, 2, 3, 4], dtype=pl.Int32),
            "g": pl.Series(["a", "b"] * 2).cast(pl.Categorical),
        }
    )
    got = fm.gaps(per_user, groups, n_resamples=10)
    assert got.schema["group"] == pl.String
    assert got.select("group", "mean").rows() == [("a", 0.75), ("b", 0.25)]


def test_integer_groups_sort_as_numbers() -> None:
    per_user = pl.DataFrame({"user": range(6), "g": [10, 2, 10, 2, 10, 2], "x@1": [1.0, 0] * 3})
    got = fm.gaps(per_user, "g", n_resamples=10)
    assert got["group"].to_list() == [2, 10]
    assert got["diff"][0] == 0.0 - 1.0


def test_metric_names_keep_their_options() -> None:
    per_user = pl.DataFrame(
        {
            "user": range(4),
            "g": ["a", "b"] * 2,
            "ndcg(gain=binary)@10": [1.0, 0.5, 0.5, 0.0],
            "rmse": [1.0, 2.0, 3.0, 4.0],
            "P_10": [0.1, 0.2, 0.3, 0.4],
        }
    )
    got = fm.gaps(per_user, "g", n_resamples=10)
    assert got.select("metric", "k").unique(maintain_order=True).rows() == [
        ("ndcg(gain=binary)", 10),
        ("rmse", None),
        ("P_10", None),
    ]


def test_from_evaluate_with_train() -> None:
    recs, truth = fm.datasets.synthetic(n_users=200)
    per_user = fm.evaluate(recs, truth, metrics=["ndcg", "recall"], k=10, by="model")
    got = fm.gaps(per_user, train=truth, by="model", n_resamples=100)
    # The same split by hand: ceil(0.05 * 200) = 10 users, ties at the 10th kept.
    counts = truth.group_by("user").len().sort("len", descending=True)
    threshold = counts["len"][9]
    active = set(counts.filter(pl.col("len") >= threshold)["user"].to_list())
    for (model, metric), part in got.group_by("model", "metric"):
        values = per_user.filter(model=model)
        column = f"{metric}@10"
        for group, keep in (("active", True), ("inactive", False)):
            mine = values.filter(pl.col("user").is_in(list(active)) == keep)[column].drop_nulls()
            row = part.filter(group=group).row(0, named=True)
            assert row["n_users"] == mine.len()
            assert row["mean"] == pytest.approx(math.fsum(mine.to_list()) / mine.len(), rel=1e-15)


def test_empty_input_gives_an_empty_typed_result(constructor: Constructor) -> None:
    empty = pl.DataFrame(
        schema={"model": pl.String, "user": pl.Int64, "g": pl.String, "ndcg@10": pl.Float64}
    )
    got = fm.gaps(constructor(empty), "g", by="model")
    assert_kind(got, constructor)
    frame = to_polars(got)
    assert frame.height == 0
    assert frame.columns == [
        "model",
        "metric",
        "k",
        "group",
        "n_users",
        "mean",
        "diff",
        "diff_low",
        "diff_high",
        "p_value",
        "mean_abs_diff",
        "range",
    ]
    polars_result = fm.gaps(empty, "g", by="model")
    assert polars_result.schema["group"] == pl.String
    assert polars_result.schema["n_users"] == pl.Int64
    assert polars_result.schema["diff"] == pl.Float64


def test_given_groups_ignore_train_with_a_warning() -> None:
    with pytest.warns(
        IgnoredOptionWarning,
        match=r"^train: ignored \(train set the default active/inactive split, and the groups "
        r"are given: country\)$",
    ):
        fm.gaps(SMALL, "country", train=SMALL.select("user"), n_resamples=10)


# --- errors -----------------------------------------------------------------------------


BAD_INPUT: list[tuple[str, dict[str, Any], type[Exception], str]] = [
    (
        "level",
        {"group": "country", "level": 95},
        InvalidOptionError,
        "level: expected a number in (0, 1), got 95",
    ),
    (
        "n_resamples",
        {"group": "country", "n_resamples": 0},
        InvalidOptionError,
        "n_resamples: expected an int in [1, 10_000_000], got 0",
    ),
    (
        "active_share",
        {"train": SMALL, "active_share": 5},
        InvalidOptionError,
        "active_share: expected a number in (0, 1), got 5",
    ),
    (
        "seed",
        {"group": "country", "seed": -1},
        InvalidOptionError,
        "seed: expected an int >= 0, got -1",
    ),
    (
        "missing group column",
        {"group": "contry"},
        MissingColumnsError,
        "per_user: expected column 'contry' (did you mean 'country'?), not found; available "
        "columns: 'user', 'country', 'ndcg@10', 'recall@5'",
    ),
    (
        "missing by column",
        {"group": "country", "by": "model"},
        MissingColumnsError,
        "per_user: expected column 'model', not found; available columns: 'user', 'country', "
        "'ndcg@10', 'recall@5'",
    ),
    (
        "neither groups nor train",
        {},
        InvalidOptionError,
        "group: expected a group column or frame, or train= for the default split into active "
        "and inactive users, got neither",
    ),
    (
        "train without the user key",
        {"train": pl.DataFrame({"usr": [1]})},
        MissingColumnsError,
        "train: expected column 'user' (did you mean 'usr'?), not found; available columns: 'usr'",
    ),
    (
        "group frame with two other columns",
        {"group": pl.DataFrame({"user": [1], "a": ["x"], "b": ["y"]})},
        InvalidOptionError,
        "group: expected a frame of the user key ('user') and one group column, got columns "
        "'user', 'a', 'b'",
    ),
    (
        "group frame without the user",
        {"group": pl.DataFrame({"user": [1, 2, 3, 4, 5], "g": ["a", "b", "a", "b", "a"]})},
        InvalidValueError,
        "per_user: expected a group for every user, found 1 row(s) without one (group), e.g. "
        "user=6, group=None; give them a group (such as 'unknown') or leave them out of per_user",
    ),
    (
        "a user in two groups",
        {"group": pl.DataFrame({"user": [1, 1, 2], "g": ["a", "b", "a"]})},
        DuplicateRowsError,
        "group: expected one row per user, found 2 rows that repeat one, e.g. user=1, g='a'; "
        "a user is in one group: give each user one row",
    ),
    (
        "group is not a frame",
        {"group": ["a", "b"]},
        InvalidOptionError,
        "expected a polars DataFrame, polars LazyFrame, pandas DataFrame, pyarrow Table (or "
        "other object with __arrow_c_stream__) or DuckDB relation, got list",
    ),
]


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [case[1:] for case in BAD_INPUT],
    ids=[case[0] for case in BAD_INPUT],
)
def test_bad_input(kwargs: dict[str, Any], error: type[Exception], message: str) -> None:
    # With the groups in a frame, per_user's own country column would be a metric.
    frame = SMALL.drop("country") if isinstance(kwargs.get("group"), pl.DataFrame) else SMALL
    with pytest.raises(error, match=f"^{re.escape(message)}$"):
        fm.gaps(frame, **kwargs)


def test_bad_values() -> None:
    with pytest.raises(
        InvalidValueError,
        match=re.escape(
            "country: expected at least two groups of users, found one: 'fr', every user's"
        ),
    ):
        fm.gaps(SMALL.with_columns(country=pl.lit("fr")), "country")
    with pytest.raises(
        InvalidValueError,
        match=re.escape(
            "per_user: expected finite numbers or nulls in metric column 'recall@5', found 1 "
            "NaN or infinite value(s), e.g. user=2, recall@5=nan"
        ),
    ):
        fm.gaps(
            SMALL.with_columns(pl.Series("recall@5", [1.0, math.nan, 0, 0.5, 0.5, 1])), "country"
        )
    with pytest.raises(
        InvalidValueError,
        match=re.escape(
            "per_user: expected numeric metric columns, found 'note' of dtype String; every "
            "column other than the user key, the by columns and the group column is a metric"
        ),
    ):
        fm.gaps(SMALL.with_columns(note=pl.lit("x")), "country")
    with pytest.raises(
        DuplicateRowsError,
        match=re.escape(
            "per_user: expected one row per (user), found 2 rows that repeat one, e.g. user=1"
        ),
    ):
        fm.gaps(pl.concat([SMALL, SMALL.head(1)]), "country")
    with pytest.raises(
        InvalidValueError,
        match=re.escape(
            "per_user: expected a group for every user, found 1 row(s) without one (country), "
            "e.g. user=1, country=None; give them a group (such as 'unknown') or leave them "
            "out of per_user"
        ),
    ):
        fm.gaps(
            SMALL.with_columns(pl.Series("country", [None, "de", "fr", "de", "fr", "de"])),
            "country",
        )
    with pytest.raises(
        InvalidOptionError,
        match=re.escape(
            "by: expected a column name other than the output column 'group' (a column of "
            "the result), got 'group'; rename the column"
        ),
    ):
        fm.gaps(SMALL.with_columns(group=pl.lit(1)), "country", by="group")


def test_a_nan_group_is_refused_as_a_null_is(constructor: Constructor) -> None:
    # A float group column: user 3's NaN names no group (polars would make the NaNs a
    # group of their own).
    labels = pl.Series("country", [1.0, 2.0, math.nan, 2.0, 1.0, 2.0])
    frame = constructor(SMALL.with_columns(labels))
    # numpy-backed pandas has no missing value but NaN: it arrives as a null.
    label = "None" if is_pandas_numpy(frame) else "nan"
    with pytest.raises(InvalidValueError) as info:
        fm.gaps(frame, "country")
    assert str(info.value) == (
        "per_user: expected a group for every user, found 1 row(s) without one (country), "
        f"e.g. user=3, country={label}; give them a group (such as 'unknown') or leave them "
        "out of per_user"
    )
    # The same labels in a frame of groups: refused as its null would be.
    groups = constructor(SMALL.select("user", labels))
    with pytest.raises(InvalidValueError) as info:
        fm.gaps(constructor(SMALL.drop("country")), groups)
    if is_pandas_numpy(groups):
        want = "expected no nulls in group column 'country', found 1 null row(s)"
    else:
        want = "expected no NaN in group column 'country', found 1 NaN row(s)"
    assert str(info.value) == f"group: {want}, e.g. user=3, country={label}"


def test_a_model_column_without_by_proposes_by(constructor: Constructor) -> None:
    # evaluate's per-user output of two models, passed on without by=: the model column
    # is no metric, and the message says which by= to pass.
    per_user = pl.DataFrame(
        {
            "model": ["a", "a", "b", "b"],
            "user": [1, 2, 1, 2],
            "country": ["de", "fr", "de", "fr"],
            "ndcg@10": [0.5, 0.25, 1.0, 0.0],
        }
    )
    with pytest.raises(InvalidValueError) as info:
        fm.gaps(constructor(per_user), "country", n_resamples=10)
    assert str(info.value) == (
        "per_user: expected numeric metric columns, found 'model' of dtype String; every "
        "column other than the user key, the by columns and the group column is a metric; "
        "if 'model' holds several models or segments, pass by='model'"
    )
    proposed = info.value.parts[-1]
    assert isinstance(proposed, Pass)
    assert proposed == Pass("by", "model")
    assert isinstance(proposed.value, str)
    # Doing what it says: each model's groups, de minus fr.
    out = fm.gaps(constructor(per_user), "country", by=proposed.value, n_resamples=10)
    assert_kind(out, constructor)
    assert to_polars(out).select("model", "group", "n_users", "mean", "diff").rows() == [
        ("a", "de", 1, 0.5, 0.5 - 0.25),
        ("a", "fr", 1, 0.25, 0.5 - 0.25),
        ("b", "de", 1, 1.0, 1.0 - 0.0),
        ("b", "fr", 1, 0.0, 1.0 - 0.0),
    ]
    # With by= given, another text column is no model to propose in its place.
    with pytest.raises(InvalidValueError) as info:
        fm.gaps(per_user.with_columns(note=pl.lit("x")), "country", by="model")
    assert str(info.value).endswith("and the group column is a metric")


# --- the plot ---------------------------------------------------------------------------


def test_plot_draws_the_means_and_the_interval(constructor: Constructor) -> None:
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    from tests.test_plot import assert_renders

    frame = models_frame()
    result = fm.gaps(frame, "segment", by="model", n_resamples=200)
    fig = fm.plot.group_gaps(constructor(result), by="model")
    try:
        mean_ax, gap_ax = fig.axes
        labels = [t.get_text() for t in mean_ax.get_yticklabels()]
        assert labels == [
            "ndcg@10  [als]",
            "recall@10  [als]",
            "ndcg@10  [pop]",
            "recall@10  [pop]",
        ]
        # Left: one marker per group and row at the group's mean.
        markers = [(line.get_xdata()[0], line.get_ydata()[0]) for line in mean_ax.get_lines()]
        want = [
            (row["mean"], y)
            for y, part in enumerate(result.partition_by("model", "metric", maintain_order=True))
            for row in part.iter_rows(named=True)
        ]
        assert sorted(markers, key=lambda m: (m[1], m[0])) == sorted(
            want, key=lambda m: (m[1], m[0])
        )
        # Right: the interval of the difference as a segment, the difference as a marker.
        segments = [line for line in gap_ax.get_lines() if len(line.get_xdata()) == 2]
        first = result.row(0, named=True)
        assert list(segments[0].get_xdata()) == [first["diff_low"], first["diff_high"]]
        assert gap_ax.get_xlabel() == "difference of the means, new - old (bootstrap interval)"
        assert_renders(fig)
        # From per-user values, the same figure.
        again = fm.plot.group_gaps(constructor(frame), "segment", by="model", n_resamples=200)
        assert [t.get_text() for t in again.axes[0].get_yticklabels()] == labels
    finally:
        plt.close("all")


def test_plot_more_groups_shows_the_range() -> None:
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    frame = pl.DataFrame(
        {"user": range(6), "tier": ["a", "a", "b", "b", "c", "c"], "x@1": [1.0, 0, 1, 1, 0, 0]}
    )
    fig = fm.plot.group_gaps(frame, "tier", n_resamples=10)
    try:
        gap_ax = fig.axes[1]
        (marker,) = [line for line in gap_ax.get_lines() if line.get_marker() == "o"]
        assert marker.get_xdata()[0] == 1.0 - 0.0  # b's mean 1 minus c's 0
        assert gap_ax.get_xlabel() == "range of the group means (largest - smallest)"
        assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()] == ["a", "b", "c"]
    finally:
        plt.close("all")


def test_the_old_plot_name_warns_and_draws_the_same(constructor: Constructor) -> None:
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    frame = pl.DataFrame({"user": range(4), "tier": ["a", "a", "b", "b"], "x@1": [1.0, 0, 1, 1]})
    try:
        new = fm.plot.group_gaps(constructor(frame), "tier", n_resamples=10)
        with pytest.warns(FutureWarning, match="renamed fm.plot.group_gaps"):
            old = fm.plot.gaps(constructor(frame), "tier", n_resamples=10)
        # Group a's mean (1 + 0) / 2, b's 1: the same points on both figures.
        means = [[tuple(p) for p in line.get_xydata()] for line in new.axes[0].get_lines()]
        assert means == [[tuple(p) for p in line.get_xydata()] for line in old.axes[0].get_lines()]
        assert sorted(x for line in means for x, _ in line) == [0.5, 1.0]
    finally:
        plt.close("all")


# --- the command line -------------------------------------------------------------------


def test_cli_gives_the_api_numbers(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from frame_metrics.cli import main

    frame = models_frame()
    frame.write_parquet(tmp_path / "per_user.parquet")
    want = fm.gaps(frame, "segment", by="model", n_resamples=300, seed=4)
    args = ["gaps", str(tmp_path / "per_user.parquet"), "--by", "model", "--resamples", "300"]
    code = main([*args, "--group-col", "segment", "--seed", "4", "-o", str(tmp_path / "a.csv")])
    assert code == 0, capsys.readouterr().err
    assert pl.read_csv(tmp_path / "a.csv", schema=want.schema).rows() == want.rows()
    # The groups from a file of (user, group).
    frame.drop("segment").write_parquet(tmp_path / "values.parquet")
    frame.filter(model="pop").select("user", "segment").write_csv(tmp_path / "groups.csv")
    args[1] = str(tmp_path / "values.parquet")
    code = main([*args, "--groups", str(tmp_path / "groups.csv"), "--seed", "4", "-o",
                 str(tmp_path / "b.csv")])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    assert pl.read_csv(tmp_path / "b.csv", schema=want.schema).rows() == want.rows()
    # The default split from a train file.
    train = pl.DataFrame({"user": [u for u in range(60) for _ in range(1 + u % 7)]})
    train.write_csv(tmp_path / "train.csv")
    want = fm.gaps(frame.drop("segment"), train=train, by="model", n_resamples=300)
    code = main([*args, "--train", str(tmp_path / "train.csv"), "-o", str(tmp_path / "c.csv")])
    assert code == 0, capsys.readouterr().err
    assert pl.read_csv(tmp_path / "c.csv", schema=want.schema).rows() == want.rows()


def test_cli_errors(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from frame_metrics.cli import main

    SMALL.write_csv(tmp_path / "per_user.csv")
    code = main(["gaps", str(tmp_path / "per_user.csv"), "--group-col", "country", "--level", "2"])
    assert (code, capsys.readouterr().err) == (
        2,
        "frame-metrics: error: --level: expected a number in (0, 1), got 2.0\n",
    )
    code = main(["gaps", str(tmp_path / "per_user.csv")])
    assert (code, capsys.readouterr().err) == (
        2,
        "frame-metrics: error: group: expected a group column or frame, or train= for the "
        "default split into active and inactive users, got neither\n",
    )
    # The proposal of by= in the command line's words.
    SMALL.with_columns(model=pl.lit("a")).write_csv(tmp_path / "models.csv")
    code = main(["gaps", str(tmp_path / "models.csv"), "--group-col", "country"])
    assert (code, capsys.readouterr().err) == (
        1,
        "frame-metrics: error: per_user: expected numeric metric columns, found 'model' of "
        "dtype String; every column other than the user key, the by columns and the group "
        "column is a metric; if 'model' holds several models or segments, pass --by model\n",
    )


def test_dask_frames_give_a_dask_result() -> None:
    dd = pytest.importorskip("dask.dataframe")
    frame = models_frame()
    groups = frame.filter(model="pop").select("user", "segment")
    want = fm.gaps(frame.drop("segment"), groups, by="model", n_resamples=100)
    got = fm.gaps(
        dd.from_pandas(frame.drop("segment").to_pandas(), npartitions=3),
        dd.from_pandas(groups.to_pandas(), npartitions=2),
        by="model",
        n_resamples=100,
    )
    assert isinstance(got, dd.DataFrame)
    assert pl.from_pandas(got.compute()).rows() == want.rows()
