"""``fm.compare`` over every pair of models (definition sheet 12), and the statistics
both modes gained: the paired randomization test, d_z with its interval, win/tie/loss.

The references are independent implementations: scipy's ``permutation_test`` (exact
when every sign assignment fits in ``n_resamples``: equal to the last bits; else within
Monte-Carlo error), ``ttest_rel``, ``wilcoxon`` and ``bootstrap``; ranx's
``fisher_randomization_test`` and ``paired_student_t_test``; d_z and the counts written
out in plain Python (``statistics``).
"""

from __future__ import annotations

import itertools
import math
import statistics
from fractions import Fraction
from typing import Any

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import frame_metrics as fm
from frame_metrics.stats import holm
from tests.conftest import Constructor, to_polars

scipy_stats = pytest.importorskip("scipy.stats")


def _frame(n: int, seed: int, models: str = "abcd", missing: float = 0.1) -> pl.DataFrame:
    """Per-user values of several models on one metric: ties, zeros, a missing share."""
    rng = np.random.default_rng(seed)
    base = rng.random(n)
    parts = []
    for shift, name in enumerate(models):
        kept = rng.random(n) >= (missing if name == models[-1] else 0.0)
        value = np.round(np.clip(base + 0.03 * shift + rng.normal(0, 0.2, n), 0, 1), 1)
        parts.append(
            pl.DataFrame({"model": name, "user": np.arange(n)[kept], "ndcg@10": value[kept]})
        )
    return pl.concat(parts)


def _pair(frame: pl.DataFrame, model: str, baseline: str) -> tuple[np.ndarray, np.ndarray]:
    """The two models' values on the users both have, in user order."""
    m = frame.filter(pl.col("model") == model).select("user", pl.col("ndcg@10").alias("m"))
    b = frame.filter(pl.col("model") == baseline).select("user", pl.col("ndcg@10").alias("b"))
    both = m.join(b, on="user").sort("user")
    return both["m"].to_numpy(), both["b"].to_numpy()


def _mean_diff(x: Any, y: Any, axis: int = -1) -> Any:
    return np.mean(x - y, axis=axis)


def test_every_pair_once_with_its_first_model_in_name_order_as_baseline() -> None:
    frame = _frame(60, 1)
    out = fm.compare(frame, n_resamples=200, seed=1)
    pairs = out.filter(pl.col("model") != pl.col("baseline"))
    assert pairs.select("baseline", "model").rows() == list(itertools.combinations("abcd", 2))
    alone = out.filter(pl.col("model") == pl.col("baseline"))
    assert alone.select("model", "diff", "p_randomization", "wins").rows() == [
        ("a", None, None, None)
    ]
    # Holm over the six comparisons of the call, each test on its own.
    for test in ("p_ttest", "p_wilcoxon", "p_randomization"):
        assert pairs[f"{test}_adj"].to_list() == pytest.approx(
            holm(pairs[test].to_list()), rel=1e-12
        )


def test_pairs_match_scipy_and_ranx() -> None:
    frame = _frame(300, 2)
    n_resamples = 4000
    out = fm.compare(frame, n_resamples=n_resamples, seed=5)
    rng = np.random.default_rng(0)
    for row in out.filter(pl.col("model") != pl.col("baseline")).iter_rows(named=True):
        m, b = _pair(frame, row["model"], row["baseline"])
        d = m - b
        assert row["n_paired"] == d.size
        assert row["diff"] == pytest.approx(statistics.fmean(d.tolist()), rel=1e-12)
        assert (row["wins"], row["ties"], row["losses"]) == (
            sum(v > 0 for v in d.tolist()),
            sum(v == 0 for v in d.tolist()),
            sum(v < 0 for v in d.tolist()),
        )
        d_z = statistics.fmean(d.tolist()) / statistics.stdev(d.tolist())
        assert row["d_z"] == pytest.approx(d_z, rel=1e-12)
        assert row["p_ttest"] == pytest.approx(scipy_stats.ttest_rel(m, b).pvalue, rel=1e-8)
        assert row["p_wilcoxon"] == pytest.approx(
            scipy_stats.wilcoxon(m, b, method="approx").pvalue, rel=1e-8
        )
        # Randomized: two Monte-Carlo estimates of one p-value; 5 standard errors apart at
        # most (and 2/N for the +1 that scipy adds and ranx does not).
        p = row["p_randomization"]
        se = math.sqrt(max(p * (1 - p), 1 / n_resamples) / n_resamples)
        scipy_p = scipy_stats.permutation_test(
            (m, b), _mean_diff, permutation_type="samples", n_resamples=n_resamples,
            random_state=rng,
        ).pvalue  # fmt: skip
        assert p == pytest.approx(scipy_p, abs=5 * math.sqrt(2) * se + 2 / n_resamples)
        ranx = pytest.importorskip("ranx.statistical_tests")
        ranx_p, _ = ranx.fisher_randomization_test(b, m, n_permutations=n_resamples)
        assert p == pytest.approx(ranx_p, abs=5 * math.sqrt(2) * se + 2 / n_resamples)
        ranx_t, _ = ranx.paired_student_t_test(b, m)
        assert row["p_ttest"] == pytest.approx(ranx_t, rel=1e-8)
        # d_z's percentile interval: scipy's paired bootstrap of mean / sd.
        interval = scipy_stats.bootstrap(
            (m, b), lambda u, v, axis=-1: np.mean(u - v, axis=axis) / np.std(
                u - v, axis=axis, ddof=1),
            paired=True, n_resamples=n_resamples, method="percentile", random_state=rng,
        ).confidence_interval  # fmt: skip
        width = interval.high - interval.low
        assert row["d_z_low"] == pytest.approx(interval.low, abs=0.1 * width)
        assert row["d_z_high"] == pytest.approx(interval.high, abs=0.1 * width)
        assert row["d_z_low"] <= row["d_z"] <= row["d_z_high"]


@settings(max_examples=40, deadline=None)
@given(
    diffs=st.lists(
        st.sampled_from([-1.0, -0.5, -0.25, 0.0, 0.25, 0.5, 1.0, 0.75]), min_size=2, max_size=11
    ),
    seed=st.integers(0, 2**16),
)
def test_small_pairs_are_exact_and_equal_scipy(diffs: list[float], seed: int) -> None:
    """2**n <= n_resamples: every sign assignment counted, scipy's exact p-value.

    Values in eighths: every difference and sum is exact in binary, so no tie is a
    matter of rounding (see the next test for one that is).
    """
    n = len(diffs)
    base = [i / 8 for i in range(n)]
    frame = pl.DataFrame(
        {"model": ["a"] * n + ["b"] * n, "user": list(range(n)) * 2,
         "ndcg@10": [*base, *(v + d for v, d in zip(base, diffs, strict=True))]}
    )  # fmt: skip
    out = fm.compare(frame, n_resamples=2**n + 1, seed=seed)
    row = out.filter(pl.col("model") == "b").row(0, named=True)
    m, b = _pair(frame, "b", "a")
    want = scipy_stats.permutation_test(
        (m, b), _mean_diff, permutation_type="samples", n_resamples=2**n + 1
    ).pvalue
    assert row["p_randomization"] == pytest.approx(want, rel=1e-12, abs=1e-15)
    # The same by hand, in exact fractions: the share of the 2**n sign assignments at
    # least as far from 0.
    d = [Fraction(v) for v in diffs]
    observed = abs(sum(d, Fraction(0)))
    far = sum(
        abs(sum((s * v for s, v in zip(signs, d, strict=True)), Fraction(0))) >= observed
        for signs in itertools.product((1, -1), repeat=n)
    )
    assert row["p_randomization"] == far / 2**n


def test_a_sum_that_is_zero_but_for_rounding_is_zero() -> None:
    """Differences that sum to 0 (-1 - 0.25 + 3 x 0.5 + 0.75 - 1) on values with binary
    rounding: every assignment is as far from 0, p = 1 (scipy, which takes its tolerance
    from the observed sum, gives less)."""
    diffs = [-1.0, -0.25, 0.5, 0.5, 0.5, 0.75, -1.0]
    base = np.linspace(0, 1, len(diffs))
    frame = pl.DataFrame(
        {"model": ["a"] * 7 + ["b"] * 7, "user": list(range(7)) * 2,
         "ndcg@10": [*base.tolist(), *(base + np.array(diffs)).tolist()]}
    )  # fmt: skip
    m, b = _pair(frame, "b", "a")
    assert (m - b).sum() != 0  # the rounding
    out = fm.compare(frame, n_resamples=1000, seed=0)
    assert out.filter(pl.col("model") == "b")["p_randomization"].item() == 1.0


def test_baseline_mode_gains_the_new_columns_and_keeps_its_numbers() -> None:
    frame = _frame(80, 3, models="abc")
    all_pairs = fm.compare(frame, n_resamples=300, seed=2)
    against_a = fm.compare(frame, baseline_model="a", n_resamples=300, seed=2)
    # The pairs with a are the same rows (the same draws serve both calls) but for the
    # corrected p-values, which count the comparisons of the call.
    same = ["model", "baseline", "mean", "ci_low", "diff", "diff_low", "d_z", "d_z_high",
            "wins", "ties", "losses", "p_ttest", "p_randomization"]  # fmt: skip
    assert (
        against_a.select(same).rows()
        == all_pairs.filter(pl.col("baseline") == "a").select(same).rows()
    )


def test_identical_models_and_constant_differences() -> None:
    """No difference: p 1, d_z undefined (sd 0), every user a tie; a constant non-zero
    difference: d_z undefined too (sd 0), every user a win."""
    values = [0.0, 0.5, 1.0, 0.25] * 5
    frame = pl.DataFrame(
        {"model": ["a"] * 20 + ["b"] * 20 + ["c"] * 20, "user": list(range(20)) * 3,
         "ndcg@10": values + values + [v + 0.125 for v in values]}
    )  # fmt: skip
    out = fm.compare(frame, n_resamples=500, seed=0)
    rows = {(r["model"], r["baseline"]): r for r in out.iter_rows(named=True)}
    same = rows[("b", "a")]
    assert (same["p_randomization"], same["d_z"], same["ties"]) == (1.0, None, 20)
    assert (same["d_z_low"], same["d_z_high"]) == (None, None)
    shifted = rows[("c", "a")]
    assert (shifted["d_z"], shifted["wins"], shifted["diff"]) == (None, 20, 0.125)
    # Every one of the 500 assignments but all-plus and all-minus is nearer 0 than 20/8:
    # with the +1, (0 + 1) / 501 is the least the randomized p-value can be.
    assert shifted["p_randomization"] == pytest.approx(1 / 501, abs=2 / 501)


def test_all_pairs_on_every_frame_kind(constructor: Constructor) -> None:
    frame = _frame(40, 4, models="abc")
    want = fm.compare(frame, n_resamples=100, seed=3)
    got = to_polars(fm.compare(constructor(frame), n_resamples=100, seed=3))
    assert got.rows() == want.rows()


def test_segments_and_metrics_share_the_correction() -> None:
    frame = _frame(50, 5, models="abc").with_columns(
        segment=pl.col("user") % 2, **{"recall@5": pl.col("ndcg@10") ** 2}
    )
    out = fm.compare(frame, by="segment", n_resamples=100, seed=0, correction="bh")
    pairs = out.filter(pl.col("model") != pl.col("baseline"))
    assert pairs.height == 2 * 2 * 3  # segments x metrics x pairs
    from frame_metrics.stats import benjamini_hochberg

    for test in ("p_ttest", "p_randomization"):
        assert pairs[f"{test}_adj"].to_list() == pytest.approx(
            benjamini_hochberg(pairs[test].to_list()), rel=1e-12
        )


def test_metric_at_k_draws_each_model_once_from_every_pair() -> None:
    pytest.importorskip("matplotlib")
    frame = _frame(30, 6, models="abc").with_columns(**{"ndcg@5": pl.col("ndcg@10") / 2})
    fig = fm.plot.metric_at_k(fm.compare(frame, n_resamples=50), "ndcg")
    lines = fig.axes[0].get_lines()
    assert [line.get_label() for line in lines] == ["a", "b", "c"]
    means = frame.group_by("model").agg(pl.col("ndcg@5").mean(), pl.col("ndcg@10").mean())
    for line, row in zip(lines, means.sort("model").iter_rows(named=True), strict=True):
        assert list(line.get_ydata()) == pytest.approx([row["ndcg@5"], row["ndcg@10"]])
