"""fm.policy_value (spec section 9.5): values by hand, a pure-Python reference, every kind.

The reference below is the spec's formulas written out on lists of rows, with
``math.fsum`` for every sum; hypothesis draws logs and policies and compares. The
bootstrap interval is checked against the draw scheme its docstring documents.
"""

from __future__ import annotations

import importlib
import json
import math
import re
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import frame_metrics as fm
from frame_metrics.errors import (
    DuplicateRowsError,
    FrameMetricsError,
    IgnoredOptionWarning,
    InvalidOptionError,
    InvalidValueError,
    MissingColumnsError,
)
from tests.conftest import Constructor, assert_kind, recmetrics, to_polars

#: The module (fm.policy_value is the function of the same name).
pv_module = importlib.import_module("frame_metrics.policy_value")

# Two users. The logging policy showed user 1 items a (pscore 0.5, reward 1) and b
# (0.25, 0); user 2 items a (0.2, 1) and c (0.8, 0). The evaluated policy ranks
# a, c, d for user 1 and c, b for user 2; q is a reward model's estimate per row.
LOGS = pl.DataFrame(
    {
        "user": [1, 1, 2, 2],
        "item": ["a", "b", "a", "c"],
        "reward": [1.0, 0.0, 1.0, 0.0],
        "pscore": [0.5, 0.25, 0.2, 0.8],
    }
)
RECS = pl.DataFrame(
    {
        "user": [1, 1, 1, 2, 2],
        "item": ["a", "c", "d", "c", "b"],
        "rank": [1, 2, 3, 1, 2],
        "q": [0.6, 0.3, 0.9, 0.2, 0.4],
        "p": [0.7, 0.3, 0.0, 1.0, 0.0],
    }
)
# k = 2: pi_e = 1/2 on user 1's a and c, user 2's c and b. The weights pi_e / pi_b of
# the logged rows: user 1 a 0.5/0.5 = 1, b 0 (not shown), user 2 a 0, c 0.5/0.8.
W = [1.0, 0.0, 0.0, 0.5 / 0.8]
REWARDS = [1.0, 0.0, 1.0, 0.0]
# The direct method's term per user: Σ_a pi_e(a|u) q̂(u, a) over the top 2.
DM = {1: 0.5 * 0.6 + 0.5 * 0.3, 2: 0.5 * 0.2 + 0.5 * 0.4}
Q_LOGGED = [0.6, 0.0, 0.0, 0.2]  # q̂ of the logged item where w > 0 (else unread)


def _value(out: Any) -> float:
    value = to_polars(out)["value"].item()
    assert isinstance(value, float)
    return value


# -- values by hand ------------------------------------------------------------------------


def test_ips() -> None:
    out = fm.policy_value(LOGS, RECS, k=2, estimator="ips", n_resamples=0)
    assert out.row(0) == (
        2,
        4,
        (1.0 * 1.0 + 0.625 * 0.0) / 4,
        None,
        None,
        (1.0 + 0.625) ** 2 / (1.0**2 + 0.625**2),
        2 / 4,
        1.0,
    )
    assert out.columns == [
        "n_users",
        "n_rows",
        "value",
        "ci_low",
        "ci_high",
        "ess",
        "share_shown",
        "largest_weight",
    ]


def test_snips_is_the_default() -> None:
    want = (1.0 * 1.0 + 0.625 * 0.0) / (1.0 + 0.625)
    assert _value(fm.policy_value(LOGS, RECS, k=2, n_resamples=0)) == want
    assert _value(fm.policy_value(LOGS, RECS, k=2, estimator="snips", n_resamples=0)) == want


def test_matching_is_the_mean_reward_of_the_shown_rows() -> None:
    # Shown within the top 2: user 1's a (reward 1) and user 2's c (reward 0).
    out = fm.policy_value(LOGS, RECS, k=2, estimator="matching", n_resamples=0)
    assert _value(out) == (1.0 + 0.0) / 2
    # k = 1: user 1's a and user 2's c are still each user's first item.
    assert _value(fm.policy_value(LOGS, RECS, k=1, estimator="matching", n_resamples=0)) == 0.5
    # k = 3 adds user 1's d, which was not logged: the same rows.
    assert _value(fm.policy_value(LOGS, RECS, k=3, estimator="matching", n_resamples=0)) == 0.5


def test_dr() -> None:
    out = fm.policy_value(LOGS, RECS, k=2, estimator="dr", reward_model="q", n_resamples=0)
    terms = [
        DM[1] + 1.0 * (1.0 - 0.6),
        DM[1] + 0.0,
        DM[2] + 0.0,
        DM[2] + 0.625 * (0.0 - 0.2),
    ]
    assert math.isclose(_value(out), sum(terms) / 4, rel_tol=1e-15)


def test_max_weight_clips_the_weights() -> None:
    # User 1's a has w = 1, clipped at 0.8; user 2's c has 0.625, below.
    ips = fm.policy_value(LOGS, RECS, k=2, estimator="ips", max_weight=0.8, n_resamples=0)
    assert _value(ips) == (0.8 * 1.0 + 0.625 * 0.0) / 4
    # ess and largest_weight are of the weights before clipping.
    assert ips["largest_weight"].item() == 1.0
    assert ips["ess"].item() == (1.0 + 0.625) ** 2 / (1.0 + 0.625**2)
    snips = fm.policy_value(LOGS, RECS, k=2, max_weight=0.8, n_resamples=0)
    assert _value(snips) == 0.8 / (0.8 + 0.625)
    # dr: only the correction term's weight; the direct method keeps pi_e.
    dr = fm.policy_value(
        LOGS, RECS, k=2, estimator="dr", reward_model="q", max_weight=0.8, n_resamples=0
    )
    terms = [DM[1] + 0.8 * (1.0 - 0.6), DM[1], DM[2], DM[2] + 0.625 * (0.0 - 0.2)]
    assert math.isclose(_value(dr), sum(terms) / 4, rel_tol=1e-15)


def test_probability_column() -> None:
    # pi_e from p: user 1's a 0.7, user 2's c 1.0; every other logged item 0.
    w = [0.7 / 0.5, 0.0, 0.0, 1.0 / 0.8]
    out = fm.policy_value(LOGS, RECS, estimator="ips", probability="p", n_resamples=0)
    assert _value(out) == (w[0] * 1.0 + w[3] * 0.0) / 4
    assert out["largest_weight"].item() == 0.7 / 0.5
    assert out["share_shown"].item() == 2 / 4
    dr = fm.policy_value(
        LOGS, RECS, estimator="dr", probability="p", reward_model="q", n_resamples=0
    )
    dm = {1: 0.7 * 0.6 + 0.3 * 0.3 + 0.0 * 0.9, 2: 1.0 * 0.2 + 0.0 * 0.4}
    terms = [dm[1] + w[0] * (1.0 - 0.6), dm[1], dm[2], dm[2] + w[3] * (0.0 - 0.2)]
    assert math.isclose(_value(dr), sum(terms) / 4, rel_tol=1e-15)


def test_probability_needs_no_rank_except_for_matching() -> None:
    recs = RECS.drop("rank")
    out = fm.policy_value(LOGS, recs, estimator="snips", probability="p", n_resamples=0)
    assert _value(out) == (1.4 * 1.0) / (1.4 + 1.25)
    with pytest.raises(MissingColumnsError, match=r"^recs: expected column 'rank'"):
        fm.policy_value(LOGS, recs, estimator="matching", probability="p")


def test_the_default_policy_is_probability_one_over_k() -> None:
    recs = RECS.with_columns(p=pl.when(pl.col("rank") <= 2).then(0.5).otherwise(0.0))
    for estimator in ("ips", "snips", "matching"):
        a = fm.policy_value(LOGS, recs, k=2, estimator=estimator, n_resamples=50)
        b = fm.policy_value(LOGS, recs, k=2, estimator=estimator, probability="p", n_resamples=50)
        assert a.equals(b), estimator
    a = fm.policy_value(LOGS, recs, k=2, estimator="dr", reward_model="q", n_resamples=50)
    b = fm.policy_value(
        LOGS, recs, k=2, estimator="dr", reward_model="q", probability="p", n_resamples=50
    )
    assert a.equals(b)


def test_scores_rank_as_evaluate_ranks_them() -> None:
    # Equal scores: item ascending by default, so user 1's top 1 is a (then c).
    scored = RECS.with_columns(s=pl.Series([0.5, 0.5, 0.1, 0.9, 0.2])).drop("rank")
    out = fm.policy_value(LOGS, scored, k=1, score="s", estimator="ips", n_resamples=0)
    # pi_e = 1 on user 1's a (w = 1/0.5) and user 2's c (w = 1/0.8).
    assert _value(out) == (2.0 * 1.0 + 1.25 * 0.0) / 4
    desc = fm.policy_value(
        LOGS, scored, k=1, score="s", ties="item_desc", estimator="ips", n_resamples=0
    )
    # Item descending: user 1's top 1 is c, which was not logged.
    assert _value(desc) == (0.0 + 1.25 * 0.0) / 4


def test_undefined_values_are_null() -> None:
    # The policy shows nothing logged: snips and matching divide by 0; ips is 0.
    recs = pl.DataFrame({"user": [1], "item": ["z"], "rank": [1]})
    snips = fm.policy_value(LOGS, recs, k=1)
    assert snips.select("value", "ci_low", "ci_high", "ess", "share_shown").row(0) == (
        None,
        None,
        None,
        None,
        0.0,
    )
    assert fm.policy_value(LOGS, recs, k=1, estimator="matching")["value"].item() is None
    assert _value(fm.policy_value(LOGS, recs, k=1, estimator="ips")) == 0.0


def test_a_repeated_logged_item_counts_each_time() -> None:
    logs = pl.concat([LOGS, LOGS.head(1).with_columns(reward=pl.lit(0.0))])
    out = fm.policy_value(logs, RECS, k=2, estimator="ips", n_resamples=0)
    assert _value(out) == (1.0 * 1.0 + 1.0 * 0.0) / 5
    assert out.select("n_users", "n_rows", "share_shown").row(0) == (2, 5, 3 / 5)


def test_composite_user_key() -> None:
    logs = LOGS.with_columns(session=pl.lit(7))
    recs = RECS.with_columns(session=pl.lit(7))
    got = fm.policy_value(logs, recs, k=2, user=["user", "session"], n_resamples=20)
    assert got.equals(fm.policy_value(LOGS, RECS, k=2, n_resamples=20))


# -- by ------------------------------------------------------------------------------------


def _two_models() -> pl.DataFrame:
    # Model "x" is RECS; model "y" ranks each user's list in reverse.
    y = RECS.with_columns(rank=pl.col("rank").max().over("user") + 1 - pl.col("rank"))
    return pl.concat([RECS.with_columns(model=pl.lit("x")), y.with_columns(model=pl.lit("y"))])


def test_by_evaluates_each_policy_on_the_same_logs() -> None:
    out = fm.policy_value(LOGS, _two_models(), k=1, estimator="ips", by="model", n_resamples=0)
    assert out["model"].to_list() == ["x", "y"]
    # x's top 1: user 1's a (w 2), user 2's c (w 1.25); y's: user 1's d, user 2's b.
    assert out["value"].to_list() == [(2.0 * 1.0 + 1.25 * 0.0) / 4, 0.0]
    assert out["n_rows"].to_list() == [4, 4]
    for model in ("x", "y"):
        one = _two_models().filter(pl.col("model") == model).drop("model")
        alone = fm.policy_value(LOGS, one, k=1, estimator="ips", n_resamples=30)
        both = fm.policy_value(
            LOGS, _two_models(), k=1, estimator="ips", by="model", n_resamples=30
        )
        # Group p of by draws its own stream: model x is p = 0, as alone.
        if model == "x":
            assert both.filter(pl.col("model") == "x").drop("model").equals(alone)
        else:
            assert both.filter(pl.col("model") == "y")["value"].item() == alone["value"].item()


def test_logs_with_the_by_column_count_in_their_group_only() -> None:
    logs = pl.concat(
        [LOGS.with_columns(model=pl.lit("x")), LOGS.head(2).with_columns(model=pl.lit("y"))]
    )
    out = fm.policy_value(logs, _two_models(), k=1, estimator="ips", by="model", n_resamples=0)
    assert out["n_rows"].to_list() == [4, 2]
    # y's top 1 for user 1 is d: none of user 1's logged items.
    assert out["value"].to_list() == [(2.0 * 1.0) / 4, 0.0]


def test_a_logged_policy_absent_from_recs_is_not_excused() -> None:
    logs = LOGS.with_columns(model=pl.lit("z"))
    out = fm.policy_value(logs, _two_models(), k=1, estimator="ips", by="model", n_resamples=0)
    assert out.select("model", "n_rows", "value", "share_shown").rows() == [("z", 4, 0.0, 0.0)]


@pytest.mark.parametrize("estimator", ["ips", "snips", "dr"])
def test_extreme_finite_weights_give_their_values(constructor: Constructor, estimator: str) -> None:
    # pscores of 1e-300 and 2e-300 on the shown rows (user 1's a, user 2's c): w =
    # 0.5 / 1e-300 and half of it (2e-300 is twice 1e-300, both floats), near 5e299,
    # whose squares overflow a float. Unshown rows keep their pscores (w = 0).
    logs = LOGS.with_columns(pscore=pl.Series([1e-300, 0.25, 0.2, 2e-300]))
    kwargs: dict[str, Any] = {"k": 2, "estimator": estimator, "n_resamples": 0}
    if estimator == "dr":
        kwargs["reward_model"] = "q"
    out = fm.policy_value(constructor(logs), constructor(RECS), **kwargs)
    assert_kind(out, constructor)
    row = to_polars(out).row(0, named=True)
    w = 0.5 / 1e-300
    # ess = (Σw)² / Σw², the same over any scale: (1 + 1/2)² / (1 + 1/4), the weights
    # over the largest.
    assert row["ess"] == (1 + 0.5) ** 2 / (1 + 0.25)
    assert row["largest_weight"] == w
    # Rewards: user 1's a 1, user 2's c 0.
    want = {
        "ips": (w * 1.0 + (w / 2) * 0.0) / 4,
        "snips": (w * 1.0) / (w + w / 2),
        # Spec 9.5's sum (each direct-method term vanishes beside w at this scale).
        "dr": (DM[1] + w * (1.0 - 0.6) + DM[1] + DM[2] + DM[2] + (w / 2) * (0.0 - 0.2)) / 4,
    }[estimator]
    assert row["value"] == pytest.approx(want, rel=1e-15)
    # Equal finite weights give their count exactly: both shown rows at 1e-300.
    equal = logs.with_columns(pscore=pl.Series([1e-300, 0.25, 0.2, 1e-300]))
    same_w = to_polars(fm.policy_value(constructor(equal), constructor(RECS), **kwargs))
    assert same_w["ess"].item() == 2.0


# -- every frame kind, row order ----------------------------------------------------------


def _bigger(seed: int = 3) -> tuple[pl.DataFrame, pl.DataFrame]:
    rng = np.random.default_rng(seed)
    n_users, n_items = 40, 12
    users = rng.integers(0, n_users, 300)
    logs = pl.DataFrame(
        {
            "user": users,
            "item": rng.integers(0, n_items, 300),
            "reward": rng.random(300).round(3),
            "pscore": rng.uniform(0.05, 1.0, 300),
        }
    )
    recs = pl.DataFrame(
        {
            "model": np.repeat(["m1", "m2"], n_users * n_items),
            "user": np.tile(np.repeat(np.arange(n_users), n_items), 2),
            "item": np.tile(np.arange(n_items), 2 * n_users),
            "rank": np.concatenate([rng.permutation(n_items) + 1 for _ in range(2 * n_users)]),
            "q": rng.random(2 * n_users * n_items),
        }
    )
    return logs, recs


@pytest.mark.parametrize("estimator", ["ips", "snips", "matching", "dr"])
def test_every_frame_kind_gives_the_same_bits(constructor: Constructor, estimator: str) -> None:
    logs, recs = _bigger()
    kwargs: dict[str, Any] = {"k": 3, "estimator": estimator, "by": "model", "n_resamples": 200}
    if estimator == "dr":
        kwargs["reward_model"] = "q"
    want = fm.policy_value(logs, recs, **kwargs)
    got = fm.policy_value(constructor(logs), constructor(recs), **kwargs)
    assert_kind(got, constructor)
    assert to_polars(got).rows() == want.rows()
    forwarded = recmetrics(constructor(logs)).policy_value(constructor(recs), **kwargs)
    assert to_polars(forwarded).rows() == want.rows()
    assert want["ci_low"].null_count() == 0


@pytest.mark.parametrize("estimator", ["ips", "snips", "matching", "dr"])
def test_shuffled_rows_give_the_same_bits(estimator: str) -> None:
    logs, recs = _bigger(5)
    kwargs: dict[str, Any] = {"k": 4, "estimator": estimator, "by": "model", "n_resamples": 300}
    if estimator == "dr":
        kwargs["reward_model"] = "q"
    want = fm.policy_value(logs, recs, **kwargs)
    for seed in range(3):
        got = fm.policy_value(
            logs.sample(fraction=1.0, shuffle=True, seed=seed),
            recs.sample(fraction=1.0, shuffle=True, seed=seed + 10),
            **kwargs,
        )
        assert got.rows() == want.rows()


def test_lazy_stays_lazy() -> None:
    out = fm.policy_value(LOGS.lazy(), RECS.lazy(), k=2, n_resamples=10)
    assert isinstance(out, pl.LazyFrame)
    assert out.collect().equals(fm.policy_value(LOGS, RECS, k=2, n_resamples=10))


def test_empty_logs_give_an_empty_typed_result(constructor: Constructor) -> None:
    out = to_polars(
        fm.policy_value(constructor(LOGS.head(0)), constructor(_two_models()), by="model")
    )
    assert out.height == 0
    assert out.schema == pl.Schema(
        {
            "model": pl.String,
            "n_users": pl.Int64,
            "n_rows": pl.Int64,
            "value": pl.Float64,
            "ci_low": pl.Float64,
            "ci_high": pl.Float64,
            "ess": pl.Float64,
            "share_shown": pl.Float64,
            "largest_weight": pl.Float64,
        }
    )


def test_dask_frames_give_a_dask_result() -> None:
    import importlib

    dd: Any = importlib.import_module("dask.dataframe")  # untyped: Any
    logs, recs = _bigger()
    want = fm.policy_value(logs, recs, k=3, by="model", n_resamples=50)
    got = fm.policy_value(
        dd.from_pandas(logs.to_pandas(), npartitions=3),
        dd.from_pandas(recs.to_pandas(), npartitions=2),
        k=3,
        by="model",
        n_resamples=50,
    )
    assert isinstance(got, dd.DataFrame)
    assert pl.from_pandas(got.compute()).rows() == want.rows()


# -- the bootstrap ------------------------------------------------------------------------


def _documented_interval(
    a: list[float],
    b: list[float],
    level: float,
    n_resamples: int,
    seed: int,
    p: int,
    cells: int = 4_000_000,
) -> tuple[float, float]:
    """The interval as policy_value's Notes describe it, one resample at a time.

    Users in key order; resamples in blocks of max(1, 4_000_000 // n), block b drawn as
    ``rng.integers(0, n, size=(block size, n), dtype=int32)`` with its own seed
    sequence ``(seed, spawn_key=(p, b))``; each resample's estimate Σ A / Σ B over the
    drawn users (fsum here); numpy's linear percentiles of the defined ones.
    """
    n = len(a)
    chunk = max(1, cells // n)
    estimates: list[float] = []
    for block, start in enumerate(range(0, n_resamples, chunk)):
        rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(p, block)))
        size = min(chunk, n_resamples - start)
        for row in rng.integers(0, n, size=(size, n), dtype=np.int32):
            den = math.fsum(b[i] for i in row)
            estimates.append(math.fsum(a[i] for i in row) / den if den != 0.0 else math.nan)
    defined = np.array([e for e in estimates if not math.isnan(e)])
    low, high = np.quantile(defined, [(1 - level) / 2, (1 + level) / 2])
    return float(low), float(high)


def test_the_interval_is_the_documented_bootstrap_over_users() -> None:
    # Per user (sorted by user), snips' Σ w·r and Σ w over the user's rows:
    a = [1.0 * 1.0 + 0.0, 0.0 + 0.625 * 0.0]
    b = [1.0 + 0.0, 0.0 + 0.625]
    out = fm.policy_value(LOGS, RECS, k=2, level=0.9, n_resamples=400, seed=11)
    low, high = _documented_interval(a, b, 0.9, 400, 11, 0)
    assert math.isclose(out["ci_low"].item(), low, rel_tol=1e-12, abs_tol=1e-15)
    assert math.isclose(out["ci_high"].item(), high, rel_tol=1e-12, abs_tol=1e-15)
    # ips: Σ w·r per user over the user's number of rows.
    ips = fm.policy_value(LOGS, RECS, k=2, estimator="ips", n_resamples=300, seed=2)
    low, high = _documented_interval([1.0, 0.0], [2.0, 2.0], 0.95, 300, 2, 0)
    assert (ips["ci_low"].item(), ips["ci_high"].item()) == pytest.approx((low, high), rel=1e-12)


def test_the_interval_on_a_larger_sample(monkeypatch: pytest.MonkeyPatch) -> None:
    logs, recs = _bigger(8)
    recs = recs.filter(pl.col("model") == "m1")
    out = fm.policy_value(logs, recs, k=3, estimator="ips", n_resamples=200, seed=4)
    # Per user: Σ w·r and the number of rows, users in key order.
    top = recs.filter(pl.col("rank") <= 3).select("user", "item", pi=pl.lit(1 / 3))
    rows = logs.join(top, on=["user", "item"], how="left").with_columns(pl.col("pi").fill_null(0.0))
    users = sorted(set(rows["user"].to_list()))
    a = [
        math.fsum(
            pi / ps * r
            for u2, pi, ps, r in rows.select("user", "pi", "pscore", "reward").iter_rows()
            if u2 == u
        )
        for u in users
    ]
    b = [float(rows.filter(pl.col("user") == u).height) for u in users]
    low, high = _documented_interval(a, b, 0.95, 200, 4, 0)
    assert out["ci_low"].item() == pytest.approx(low, rel=1e-12)
    assert out["ci_high"].item() == pytest.approx(high, rel=1e-12)
    assert out["ci_low"].item() <= out["value"].item() <= out["ci_high"].item()
    # Many blocks (of 3 resamples here), run on several threads: the same numbers.
    monkeypatch.setattr(pv_module, "_CHUNK_CELLS", 3 * len(users))
    blocks = fm.policy_value(logs, recs, k=3, estimator="ips", n_resamples=200, seed=4)
    low, high = _documented_interval(a, b, 0.95, 200, 4, 0, cells=3 * len(users))
    assert blocks["ci_low"].item() == pytest.approx(low, rel=1e-12)
    assert blocks["ci_high"].item() == pytest.approx(high, rel=1e-12)
    monkeypatch.undo()
    again = fm.policy_value(logs, recs, k=3, estimator="ips", n_resamples=200, seed=4)
    assert again.equals(out)
    other = fm.policy_value(logs, recs, k=3, estimator="ips", n_resamples=200, seed=5)
    assert other["ci_low"].item() != out["ci_low"].item()


# -- a pure-Python reference of spec 9.5 under hypothesis ----------------------------------


def reference(
    logs: list[tuple[int, int, float, float]],
    recs: list[tuple[int, int, int, float, float]],
    *,
    k: int,
    estimator: str,
    max_weight: float | None,
    probability: bool,
) -> dict[str, Any]:
    """Spec 9.5 on lists: logs (user, item, reward, pscore), recs (user, item, rank, p, q)."""
    pi: dict[tuple[int, int], float] = {}
    q: dict[tuple[int, int], float] = {}
    top: set[tuple[int, int]] = set()
    for u, i, rank, p, qhat in recs:
        if rank <= k:
            top.add((u, i))
        pi[(u, i)] = p if probability else (1.0 / k if rank <= k else 0.0)
        q[(u, i)] = qhat
    terms: dict[int, list[float]] = {}
    for (u, i), prob in pi.items():
        terms.setdefault(u, []).append(prob * q[(u, i)])
    dm = {u: math.fsum(t) for u, t in terms.items()}
    w = [pi.get((u, i), 0.0) / ps for u, i, _, ps in logs]
    wc = [x if max_weight is None else min(x, max_weight) for x in w]
    r = [row[2] for row in logs]
    n = len(logs)
    if estimator == "ips":
        value: float | None = math.fsum(x * y for x, y in zip(wc, r, strict=True)) / n
    elif estimator == "snips":
        den = math.fsum(wc)
        value = math.fsum(x * y for x, y in zip(wc, r, strict=True)) / den if den else None
    elif estimator == "matching":
        shown = [row[2] for row in logs if (row[0], row[1]) in top]
        value = math.fsum(shown) / len(shown) if shown else None
    else:
        value = (
            math.fsum(
                dm.get(u, 0.0) + x * (rew - q.get((u, i), 0.0))
                for (u, i, rew, _), x in zip(logs, wc, strict=True)
            )
            / n
        )
    # ess exactly, as the sheet defines it: (Σw)²/Σw² in rationals, since w² of a weight
    # below 1e-162 underflows a float (and above 1e154 overflows it).
    sw = sum(Fraction(x) for x in w)
    sw2 = sum(Fraction(x) ** 2 for x in w)
    return {
        "n_users": len({row[0] for row in logs}),
        "n_rows": n,
        "value": value,
        "ess": float(sw * sw / sw2) if sw2 else None,
        "share_shown": sum(1 for u, i, _, _ in logs if pi.get((u, i), 0.0) > 0) / n,
        "largest_weight": max(w),
    }


@st.composite
def _cases(draw: st.DrawFn) -> tuple[list[Any], list[Any], dict[str, Any]]:
    n_items = draw(st.integers(1, 6))
    recs = []
    for u in range(draw(st.integers(0, 4))):
        items = draw(st.permutations(list(range(n_items))))[: draw(st.integers(1, n_items))]
        for rank, i in enumerate(items, start=1):
            p = draw(st.floats(0.0, 1.0))
            qhat = draw(st.floats(-2.0, 2.0))
            recs.append((u, i, rank, p, qhat))
    logs = draw(
        st.lists(
            st.tuples(
                st.integers(0, 5),
                st.integers(0, n_items),
                st.floats(-3.0, 3.0),
                st.floats(1e-3, 1.0, exclude_min=False),
            ),
            min_size=1,
            max_size=25,
        )
    )
    options = {
        "k": draw(st.integers(1, 4)),
        "estimator": draw(st.sampled_from(["ips", "snips", "matching", "dr"])),
        "max_weight": draw(st.none() | st.floats(0.5, 20.0)),
        "probability": draw(st.booleans()),
    }
    return logs, recs, options


def _close(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-12)


@settings(max_examples=150, deadline=None)
@given(_cases())
def test_against_the_reference(case: tuple[list[Any], list[Any], dict[str, Any]]) -> None:
    logs, recs, options = case
    if options["estimator"] == "matching":
        options["max_weight"] = None  # ignored there (with a warning, tested below)
    logs_frame = pl.DataFrame(logs, schema=["user", "item", "reward", "pscore"], orient="row")
    recs_frame = pl.DataFrame(
        recs,
        schema={
            "user": pl.Int64,
            "item": pl.Int64,
            "rank": pl.Int64,
            "p": pl.Float64,
            "q": pl.Float64,
        },
        orient="row",
    )
    got = fm.policy_value(
        logs_frame,
        recs_frame,
        k=options["k"],
        estimator=options["estimator"],
        max_weight=options["max_weight"],
        probability="p" if options["probability"] else None,
        reward_model="q" if options["estimator"] == "dr" else None,
        n_resamples=0,
    )
    want = reference(logs, recs, **options)
    row = got.row(0, named=True)
    for name, value in want.items():
        assert _close(row[name], value), (name, row[name], value)


# -- bad input ----------------------------------------------------------------------------

same: Callable[[pl.DataFrame], pl.DataFrame] = lambda df: df  # noqa: E731

# (id, change logs, change recs, kwargs, error class, exact message)
CASES: list[
    tuple[
        str,
        Callable[[pl.DataFrame], pl.DataFrame],
        Callable[[pl.DataFrame], pl.DataFrame],
        dict[str, Any],
        type[FrameMetricsError],
        str,
    ]
] = [
    (
        "unknown-estimator",
        same,
        same,
        {"estimator": "IPS"},
        InvalidOptionError,
        "estimator: expected 'snips', 'ips', 'matching' or 'dr', got 'IPS'",
    ),
    (
        "dr-without-reward-model",
        same,
        same,
        {"estimator": "dr"},
        InvalidOptionError,
        "reward_model: expected a column of recs holding q̂(user, item), the reward model's "
        "estimate, for estimator='dr', got None",
    ),
    (
        "missing-pscore",
        lambda logs: logs.rename({"pscore": "propensity"}),
        same,
        {},
        MissingColumnsError,
        "logs: expected column 'pscore', not found; available columns: 'user', 'item', "
        "'reward', 'propensity'",
    ),
    (
        "misspelt-reward",
        same,
        same,
        {"reward": "rewrd"},
        MissingColumnsError,
        "logs: expected column 'rewrd' (did you mean 'reward'?), not found; available "
        "columns: 'user', 'item', 'reward', 'pscore'",
    ),
    (
        "missing-reward-model",
        same,
        same,
        {"estimator": "dr", "reward_model": "qhat"},
        MissingColumnsError,
        "recs: expected column 'qhat', not found; available columns: 'user', 'item', 'rank', "
        "'q', 'p'",
    ),
    (
        "by-column-recs-lacks",
        lambda logs: logs.with_columns(model=pl.lit("x")),
        same,
        {"by": "model"},
        MissingColumnsError,
        "recs: expected column 'model', not found; available columns: 'user', 'item', 'rank', "
        "'q', 'p'",
    ),
    (
        "pscore-zero",
        lambda logs: logs.with_columns(pscore=pl.Series([0.5, 0.0, 0.2, 0.8])),
        same,
        {},
        InvalidValueError,
        "logs: expected π_b(item | user), a probability the item was shown, in (0, 1] in "
        "column 'pscore', found 1 other value(s), e.g. user=1, item='b', reward=0.0, pscore=0.0",
    ),
    (
        "pscore-above-one",
        lambda logs: logs.with_columns(pscore=pl.Series([0.5, 0.25, 2.0, 0.8])),
        same,
        {},
        InvalidValueError,
        "logs: expected π_b(item | user), a probability the item was shown, in (0, 1] in "
        "column 'pscore', found 1 other value(s), e.g. user=2, item='a', reward=1.0, pscore=2.0",
    ),
    (
        "pscore-null",
        lambda logs: logs.with_columns(pscore=pl.Series([0.5, None, 0.2, 0.8])),
        same,
        {},
        InvalidValueError,
        "logs: expected no nulls in pscore column 'pscore', found 1 null row(s), e.g. "
        "user=1, item='b', reward=0.0, pscore=None",
    ),
    (
        "reward-null",
        lambda logs: logs.with_columns(reward=pl.Series([1.0, None, 1.0, 0.0])),
        same,
        {},
        InvalidValueError,
        "logs: expected no nulls in reward column 'reward', found 1 null row(s), e.g. "
        "user=1, item='b', reward=None, pscore=0.25",
    ),
    (
        "reward-infinite",
        lambda logs: logs.with_columns(reward=pl.Series([1.0, float("inf"), 1.0, 0.0])),
        same,
        {},
        InvalidValueError,
        "logs: expected finite numbers in column 'reward', found 1 NaN or infinite value(s), "
        "e.g. user=1, item='b', reward=inf, pscore=0.25",
    ),
    (
        "reward-text",
        lambda logs: logs.with_columns(reward=pl.lit("yes")),
        same,
        {},
        InvalidValueError,
        "logs: expected column 'reward' (the reward) to hold numbers, found dtype String",
    ),
    (
        "probability-above-one",
        same,
        lambda recs: recs.with_columns(p=pl.Series([0.7, 0.3, 0.0, 1.5, 0.0])),
        {"probability": "p"},
        InvalidValueError,
        "recs: expected π_e(item | user), a probability, in [0, 1] in column 'p', found 1 "
        "other value(s), e.g. user=2, item='c', p=1.5",
    ),
    (
        "probability-negative",
        same,
        lambda recs: recs.with_columns(p=pl.Series([0.7, -0.3, 0.0, 1.0, 0.0])),
        {"probability": "p"},
        InvalidValueError,
        "recs: expected π_e(item | user), a probability, in [0, 1] in column 'p', found 1 "
        "other value(s), e.g. user=1, item='c', p=-0.3",
    ),
    (
        "reward-model-null",
        same,
        lambda recs: recs.with_columns(q=pl.Series([0.6, None, 0.9, 0.2, 0.4])),
        {"estimator": "dr", "reward_model": "q"},
        InvalidValueError,
        "recs: expected no nulls in reward model column 'q', found 1 null row(s), e.g. "
        "user=1, item='c', q=None",
    ),
    (
        "recs-pair-twice",
        same,
        lambda recs: recs.with_columns(item=pl.Series(["a", "c", "a", "c", "b"])),
        {"estimator": "dr", "reward_model": "q"},
        DuplicateRowsError,
        "recs: expected one row per (user, item) pair, found 2 rows that repeat one, e.g. "
        "user=1, item='a', q=0.6",
    ),
    (
        "recs-pair-twice-within-k",
        same,
        lambda recs: recs.with_columns(item=pl.Series(["a", "a", "d", "c", "b"])),
        {},
        DuplicateRowsError,
        "recs: expected one row per (user, item) pair, found 2 rows that repeat one, e.g. "
        "user=1, item='a', rank=1; the rows differ in column(s) 'q', 'p'",
    ),
    (
        "rank-zero",
        same,
        lambda recs: recs.with_columns(rank=pl.Series([0, 2, 3, 1, 2])),
        {},
        InvalidValueError,
        "recs: expected ranks >= 1 in column 'rank' (1 = top), found 1 rank(s) below 1, "
        "e.g. user=1, item='a', rank=0",
    ),
    (
        "null-user-in-logs",
        lambda logs: logs.with_columns(user=pl.Series([1, None, 2, 2])),
        same,
        {},
        InvalidValueError,
        "logs: expected no nulls in key column 'user', found 1 null row(s), e.g. user=None, "
        "item='b', reward=0.0, pscore=0.25",
    ),
    (
        # w = 0.5 / 5e-324 is past the largest float: no value can be estimated with it.
        "pscore-so-small-w-overflows",
        lambda logs: logs.with_columns(pscore=pl.Series([5e-324, 0.25, 0.2, 0.8])),
        same,
        {},
        InvalidValueError,
        "logs: expected π_b(item | user) in column 'pscore' large enough that w = π_e / π_b "
        "is a finite float, found 1 row(s) where w overflows, e.g. user=1, item='a', "
        "pscore=5e-324",
    ),
    (
        "max-weight-zero",
        same,
        same,
        {"max_weight": 0},
        InvalidOptionError,
        "max_weight: expected a number > 0 or None, got 0",
    ),
    (
        "negative-resamples",
        same,
        same,
        {"n_resamples": -1},
        InvalidOptionError,
        "n_resamples: expected an int in [0, 10_000_000], got -1",
    ),
    (
        "level",
        same,
        same,
        {"level": 95},
        InvalidOptionError,
        "level: expected a number in (0, 1), got 95",
    ),
    ("k-zero", same, same, {"k": 0}, InvalidOptionError, "k: expected an int >= 1, got 0"),
    (
        "ties-average",
        same,
        same,
        {"ties": "average"},
        InvalidOptionError,
        "ties: expected 'item', 'item_desc', 'item_desc_text' or 'input' (a top k holds whole "
        "items), got 'average'",
    ),
    (
        "reward-is-pscore",
        same,
        same,
        {"reward": "pscore"},
        InvalidOptionError,
        "reward and pscore: expected different columns of logs, got 'pscore' for both",
    ),
    (
        "user-named-value",
        lambda logs: logs.rename({"user": "value"}),
        lambda recs: recs.rename({"user": "value"}),
        {"user": "value"},
        InvalidOptionError,
        "user: expected a column name other than the output column 'value' (a column of the "
        "result), got 'value'; rename the column",
    ),
]


@pytest.mark.parametrize(
    ("change_logs", "change_recs", "kwargs", "error", "message"),
    [pytest.param(*case[1:], id=case[0]) for case in CASES],
)
def test_bad_input_message(
    constructor: Constructor,
    change_logs: Callable[[pl.DataFrame], pl.DataFrame],
    change_recs: Callable[[pl.DataFrame], pl.DataFrame],
    kwargs: dict[str, Any],
    error: type[FrameMetricsError],
    message: str,
) -> None:
    logs, recs = constructor(change_logs(LOGS)), constructor(change_recs(RECS))
    with pytest.raises(error, match=f"^{re.escape(message)}$"):
        fm.policy_value(logs, recs, **{"k": 2, **kwargs})


def test_ignored_options_warn() -> None:
    with pytest.warns(IgnoredOptionWarning, match=r"^reward_model: ignored \(estimator='ips'"):
        out = fm.policy_value(LOGS, RECS, k=2, estimator="ips", reward_model="q", n_resamples=0)
    assert out.equals(fm.policy_value(LOGS, RECS, k=2, estimator="ips", n_resamples=0))
    with pytest.warns(IgnoredOptionWarning, match=r"^max_weight: ignored"):
        fm.policy_value(LOGS, RECS, k=2, estimator="matching", max_weight=3.0, n_resamples=0)


# -- the command line -----------------------------------------------------------------------


def test_cli_prints_the_api_numbers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from frame_metrics.cli import main

    logs_path, recs_path = tmp_path / "logs.parquet", tmp_path / "recs.csv"
    LOGS.write_parquet(logs_path)
    _two_models().write_csv(recs_path)
    want = fm.policy_value(
        LOGS,
        _two_models(),
        k=2,
        estimator="dr",
        reward_model="q",
        max_weight=0.9,
        by="model",
        n_resamples=50,
        seed=3,
        level=0.8,
    )
    args = ["policy-value", str(logs_path), str(recs_path), "-k", "2", "--estimator", "dr"]
    args += ["--reward-model-col", "q", "--max-weight", "0.9", "--by", "model"]
    args += ["--resamples", "50", "--seed", "3", "--level", "0.8"]
    assert main([*args, "--format", "json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert [tuple(row.values()) for row in printed] == want.rows()
    out = tmp_path / "out.csv"
    assert main([*args, "-o", str(out)]) == 0, capsys.readouterr().err
    assert pl.read_csv(out, schema=want.schema).rows() == want.rows()
    # The probability column and a score, by their options.
    scored = RECS.rename({"rank": "r"}).with_columns(s=-pl.col("r"))
    scored.write_csv(recs_path)
    want = fm.policy_value(LOGS, scored, score="s", estimator="matching", k=1, n_resamples=0)
    args = ["policy-value", str(logs_path), str(recs_path), "--score-col", "s"]
    assert (
        main([*args, "--estimator", "matching", "-k", "1", "--resamples", "0", "-o", str(out)]) == 0
    )
    assert pl.read_csv(out, schema=want.schema).rows() == want.rows()
    want = fm.policy_value(LOGS, scored, probability="p", estimator="ips", n_resamples=0)
    args = ["policy-value", str(logs_path), str(recs_path), "--probability-col", "p"]
    assert main([*args, "--estimator", "ips", "--resamples", "0", "-o", str(out)]) == 0
    assert pl.read_csv(out, schema=want.schema).rows() == want.rows()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            ["--pscore-col", "p"],
            "logs: expected column 'p', not found; available columns: 'user', 'item', "
            "'reward', 'pscore' (set with --pscore-col)",
        ),
        (
            ["--estimator", "dr"],
            "--reward-model-col: expected a column of recs holding q̂(user, item), the reward "
            "model's estimate, for estimator='dr', got None",
        ),
        (["--max-weight", "-1"], "--max-weight: expected a number > 0 or None, got -1.0"),
    ],
)
def test_cli_errors_name_the_options(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    from frame_metrics.cli import main

    LOGS.write_csv(tmp_path / "logs.csv")
    RECS.write_csv(tmp_path / "recs.csv")
    code = main(["policy-value", str(tmp_path / "logs.csv"), str(tmp_path / "recs.csv"), *extra])
    assert code == 2
    assert capsys.readouterr().err == f"frame-metrics: error: {message}\n"


def test_integer_and_text_ids_give_the_same_bits() -> None:
    """Integer ids are joined as one packed integer key, text ids as columns: same rows."""
    logs, recs = _bigger(6)
    kwargs: dict[str, Any] = {"k": 3, "by": "model", "n_resamples": 100}
    as_text = [pl.col("user").cast(pl.String), pl.col("item").cast(pl.String)]
    for estimator in ("ips", "snips", "matching", "dr"):
        options = {**kwargs, "estimator": estimator}
        if estimator == "dr":
            options["reward_model"] = "q"
        ints = fm.policy_value(logs, recs, **options)
        text = fm.policy_value(logs.with_columns(as_text), recs.with_columns(as_text), **options)
        # Text ids sort differently, but the users (and so the resamples) are the same
        # only when their order is: compare the values, which do not depend on it.
        cols = ["model", "n_users", "n_rows", "value", "ess", "share_shown", "largest_weight"]
        assert ints.select(cols).rows() == text.select(cols).rows(), estimator


def test_spark_frames_give_a_spark_result(spark: Any) -> None:
    sql = pytest.importorskip("pyspark.sql", reason="the spark extra is part of the dev install")
    from frame_metrics.distributed.spark import _arrow

    session = spark  # the session-scoped fixture of conftest.py
    logs, recs = _bigger()
    want = fm.policy_value(logs, recs, k=3, by="model", estimator="dr", reward_model="q")
    got = fm.policy_value(
        session.createDataFrame(_arrow(logs)),
        session.createDataFrame(_arrow(recs)),
        k=3,
        by="model",
        estimator="dr",
        reward_model="q",
    )
    assert isinstance(got, sql.DataFrame)
    back = pl.from_arrow(got.toArrow())
    assert isinstance(back, pl.DataFrame)
    assert back.rows() == want.rows()
