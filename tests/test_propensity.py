"""Propensity-scored ranking metrics (spec 9.4): weights 1/P, SNIPS and IPS, every metric.

- Worked examples with the arithmetic written out (Yang et al.'s SNIPS recall with weights
  2 and 4 is 2 / (2 + 4)).
- A pure-Python transcription of spec 9.4 (``reference``), against the engine under
  hypothesis: graded relevance, lists shorter than k, users without relevant items, rank
  gaps, several k, both estimators, clipping.
- The spec's identity: equal propensities per user under SNIPS, or P = 1 under IPS, give
  every ranking metric's unweighted value to the bit.
- Bits across frame kinds, row order, buckets and Dask (Spark once).
- LensKit's ``IPSRBP`` with ``PopularityPropensity`` (lenskit/lkpy), transcribed: LensKit
  cannot be installed with the test suite (it pins torch and pandas < 3), and the one
  release at hand (2025.8.1) predates ``IPSRBP``; its plain ``RBP``, to which ``IPSRBP``
  reduces under uniform propensities without normalisation, was run and is recorded.
"""

from __future__ import annotations

import math
import random
import warnings
from collections.abc import Hashable, Mapping, Sequence
from typing import Any, Literal

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import frame_metrics as fm
from frame_metrics.errors import (
    IgnoredOptionWarning,
    InvalidOptionError,
    InvalidValueError,
    MissingInputError,
    SmallSampleWarning,
    UnmatchedIdsWarning,
)
from frame_metrics.metrics.registry import REGISTRY
from tests.conftest import Constructor, evaluate_as_polars, to_polars

# -- the spec's formulas, in plain Python -----------------------------------------------------


def weights(
    relevant: Mapping[Hashable, float], ips: str, max_weight: float | None
) -> dict[Hashable, float]:
    """w̃ of each relevant item: w = min(1/P, max_weight); snips: w·|R| / Σ_R w (spec 9.4)."""
    w = {
        i: 1.0 / p if max_weight is None else min(1.0 / p, max_weight) for i, p in relevant.items()
    }
    if ips == "ips":
        return w
    total = math.fsum(w.values())
    return {i: v * len(w) / total for i, v in w.items()}


def reference(  # noqa: PLR0911 (one return per metric, as the spec's table)
    metric: str,
    ranks: Mapping[Hashable, int],
    rel: Mapping[Hashable, float],
    prop: Mapping[Hashable, float],
    k: int,
    *,
    ips: str = "snips",
    max_weight: float | None = None,
    g_max: float = 3.0,
    persistence: float = 0.8,
) -> float | None:
    """One user's propensity-scored metric, as spec 9.4 writes it (None: not evaluated)."""
    relevant = {i: prop[i] for i, r in rel.items() if r > 0}
    if not relevant:
        return None
    wt = weights(relevant, ips, max_weight)
    mass = math.fsum(wt.values())
    listed = sorted(ranks, key=lambda i: ranks[i])
    hits = [i for i in listed if i in wt and ranks[i] <= k]
    h = math.fsum(wt[i] for i in hits)
    if metric == "precision":
        return h / k
    if metric == "recall":
        return h / mass
    if metric == "f1":
        p, r = h / k, h / mass
        return 0.0 if p + r == 0 else 2 * p * r / (p + r)
    if metric == "hit_rate":
        return 1.0 if hits else 0.0
    if metric == "mrr":
        return 1.0 / ranks[hits[0]] if hits else 0.0
    if metric == "ap":
        total, running = 0.0, 0.0
        for i in hits:
            running += wt[i]
            total += wt[i] * running / ranks[i]
        return total / min(mass, k)
    if metric in ("dcg", "ndcg"):
        dcg = math.fsum(wt[i] * rel[i] / math.log2(ranks[i] + 1) for i in hits)
        if metric == "dcg":
            return dcg
        ideal = sorted((wt[i] * rel[i] for i in wt), reverse=True)[:k]
        idcg = math.fsum(g / math.log2(pos + 2) for pos, g in enumerate(ideal))
        return dcg / idcg if idcg > 0 else 0.0
    if metric == "err":
        total, still = 0.0, 1.0
        for i in listed:
            if ranks[i] > k:
                break
            stop = (2.0 ** rel.get(i, 0.0) - 1.0) / 2.0**g_max if i in wt else 0.0
            total += still * stop / ranks[i] * wt.get(i, 0.0)
            still *= 1.0 - stop
        return total
    if metric == "rbp":
        return (1 - persistence) * math.fsum(
            wt[i] * persistence ** (ranks[i] - 1) for i in listed if i in wt
        )
    if metric == "r_precision":
        cut = len(relevant)  # the cutoff counts positions: the number of relevant items
        return math.fsum(wt[i] for i in listed if i in wt and ranks[i] <= cut) / mass
    raise AssertionError(metric)


# -- worked examples, the arithmetic written out ---------------------------------------------

RECS = pl.DataFrame({"user": [1, 1, 1], "item": ["a", "b", "c"], "rank": [1, 2, 3]})
# User 1 likes a (P = 1/2, w = 2) and c (P = 1/4, w = 4); b is not relevant.
TRUTH = pl.DataFrame(
    {"user": [1, 1, 1], "item": ["a", "c", "b"], "relevance": [1, 1, 0], "p": [0.5, 0.25, 1.0]}
)


def _one(metric: str, **kwargs: Any) -> float:
    out = fm.evaluate(RECS, TRUTH, metrics=metric, propensity="p", **kwargs)
    return float(out[metric][0])


def test_snips_recall_is_yang_et_al() -> None:
    # Yang et al. (RecSys 2018): SNIPS recall = Σ_hits 1/P / Σ_R 1/P. Only a is within k=1.
    assert _one("recall@1") == 2 / (2 + 4)
    # Every relevant item within 3: 6/6.
    assert _one("recall@3") == 1.0
    # IPS: |R| is Σ_R w = 6 as well (the weights are not normalised).
    assert _one("recall@1", ips="ips") == 2 / (2 + 4)


def test_precision_counts_each_hit_its_weight() -> None:
    # snips: w̃ = w·|R|/Σw: a = 2·2/6 = 2/3, c = 4·2/6 = 4/3; precision@3 = (2/3 + 4/3) / 3.
    assert _one("precision@3") == pytest.approx((2 / 3 + 4 / 3) / 3, rel=1e-15)
    assert _one("precision@1") == pytest.approx((2 / 3) / 1, rel=1e-15)
    # ips: w as it is, 2 and 4: (2 + 4) / 3.
    assert _one("precision@3", ips="ips") == 2.0
    # Clipped at 3 first: 2 and 3, then normalised: (2·2/5 + 3·2/5) / 3 = 2/3.
    assert _one("precision@3", max_weight=3) == pytest.approx(2 / 3, rel=1e-15)


def test_dcg_ndcg_ap_with_weights() -> None:
    wa, wc = 2 / 3, 4 / 3
    dcg = wa * 1 / math.log2(2) + wc * 1 / math.log2(4)
    assert _one("dcg@3") == pytest.approx(dcg, rel=1e-15)
    # The ideal list sorts the weighted gains: c (4/3) first, then a (2/3).
    idcg = wc / math.log2(2) + wa / math.log2(3)
    assert _one("ndcg@3") == pytest.approx(dcg / idcg, rel=1e-15)
    # AP@3: a at rank 1 adds w̃_a · w̃_a / 1; c at rank 3 adds w̃_c · (w̃_a + w̃_c) / 3;
    # D = min(Σ_R w̃ = 2, 3) = 2.
    ap = (wa * wa / 1 + wc * (wa + wc) / 3) / 2
    assert _one("ap@3") == pytest.approx(ap, rel=1e-15)
    # MRR and hit_rate count no items: unchanged.
    assert _one("mrr@3") == 1.0
    assert _one("hit_rate@3") == 1.0


def test_rbp_err_r_precision_with_weights() -> None:
    wa, wc = 2 / 3, 4 / 3
    # rbp (p = 0.8): (1 - p)(w̃_a p^0 + w̃_c p^2).
    assert _one("rbp") == pytest.approx(0.2 * (wa + wc * 0.8**2), rel=1e-15)
    # err@3, g_max = 1 (the largest relevance): P = 1/2 for a relevant item, 0 for b.
    # a: 1 · 1/2 / 1 · w̃_a; c: (1 - 1/2)(1 - 0) · 1/2 / 3 · w̃_c.
    assert _one("err@3") == pytest.approx(0.5 * wa + 0.5 * 0.5 / 3 * wc, rel=1e-15)
    # r_precision: the cutoff is |R| = 2 positions; a is within it: w̃_a / Σ_R w̃.
    assert _one("r_precision") == pytest.approx(wa / 2, rel=1e-15)


def test_popularity_propensity() -> None:
    # Train: item a seen by 4 users, c by 1, b by 2. gamma = 1: P = (n / 4)^1.
    train = pl.DataFrame(
        {"user": [1, 2, 3, 4, 5, 6, 7], "item": ["a", "a", "a", "a", "c", "b", "b"]}
    )
    truth = TRUTH.drop("p")
    out = fm.evaluate(
        RECS, truth, metrics="recall@1", propensity="popularity", propensity_gamma=1, train=train
    )
    # w_a = 4/4 = 1, w_c = 4/1 = 4: recall@1 = 1 / (1 + 4).
    assert out["recall@1"][0] == pytest.approx(1 / 5, rel=1e-15)
    # An item no train user had counts as seen by one: d, n = 1, like c.
    truth_d = truth.with_columns(pl.col("item").replace("c", "d"))
    out = fm.evaluate(
        RECS, truth_d, metrics="recall@1", propensity="popularity", propensity_gamma=1, train=train
    )
    assert out["recall@1"][0] == pytest.approx(1 / 5, rel=1e-15)
    # gamma = 3: exponent (3 + 1)/2 = 2, w_c = 4^2 = 16.
    out = fm.evaluate(
        RECS, truth, metrics="recall@1", propensity="popularity", propensity_gamma=3, train=train
    )
    assert out["recall@1"][0] == pytest.approx(1 / 17, rel=1e-14)


def test_popularity_counts_distinct_users_over_the_whole_train() -> None:
    # By groups do not split n_i (spec 9.4): user 1 rates a under two models, counted once.
    train = pl.DataFrame({"model": ["x", "y", "x"], "user": [1, 1, 2], "item": ["a", "a", "c"]})
    recs = pl.concat([RECS.with_columns(model=pl.lit(m)) for m in ("x", "y")])
    out = fm.evaluate(
        recs,
        TRUTH.drop("p"),
        metrics="recall@1",
        by="model",
        propensity="popularity",
        propensity_gamma=1,
        train=train,
    )
    # n_a = 1 (user 1), n_c = 1: equal weights, recall@1 = 1/2 for both models.
    assert out["recall@1"].to_list() == [0.5, 0.5]


# -- the reference under hypothesis ------------------------------------------------------------

METRICS = [
    "precision",
    "recall",
    "f1",
    "hit_rate",
    "mrr",
    "ap",
    "dcg",
    "ndcg",
    "err",
    "rbp",
    "r_precision",
]
PROPENSITIES = [1.0, 0.5, 0.25, 0.1, 0.3, 0.77, 1e-3, 0.9999]


@st.composite
def cases(draw: st.DrawFn) -> tuple[pl.DataFrame, pl.DataFrame]:
    rec_rows, truth_rows = [], []
    for user in range(draw(st.integers(1, 4))):
        items = draw(st.permutations(range(8)))
        n_listed = draw(st.integers(0, 7))  # lists shorter than k too
        rank = 0
        for item in items[:n_listed]:
            rank += draw(st.sampled_from([1, 1, 1, 2]))  # rank gaps now and then
            rec_rows.append((user, item, rank))
        for item in draw(st.lists(st.integers(0, 9), max_size=6, unique=True)):
            relevance = draw(st.sampled_from([0.0, 1.0, 2.0, 3.0]))
            truth_rows.append((user, item, relevance, draw(st.sampled_from(PROPENSITIES))))
    recs = pl.DataFrame(
        rec_rows, schema={"user": pl.Int64, "item": pl.Int64, "rank": pl.Int64}, orient="row"
    )
    truth = pl.DataFrame(
        truth_rows,
        schema={"user": pl.Int64, "item": pl.Int64, "relevance": pl.Float64, "p": pl.Float64},
        orient="row",
    )
    return recs, truth


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    case=cases(),
    ips=st.sampled_from(["snips", "ips"]),
    max_weight=st.sampled_from([None, 3.0, 50.0]),
)
def test_every_metric_against_the_reference(
    case: tuple[pl.DataFrame, pl.DataFrame], ips: Literal["snips", "ips"], max_weight: float | None
) -> None:
    recs, truth = case
    # Small random ids often miss each other: the warning about it is beside the point.
    warnings.simplefilter("ignore", UnmatchedIdsWarning)
    names = [f"{m}@{k}" for m in METRICS if REGISTRY[m].takes_k for k in (1, 3, 5)]
    names += [m for m in METRICS if not REGISTRY[m].takes_k]
    out = fm.evaluate(
        recs,
        truth,
        metrics=names,
        propensity="p",
        ips=ips,
        max_weight=max_weight,
        max_relevance=3,
    )
    for row in out.iter_rows(named=True):
        u = row["user"]
        ranks = {i: r for uu, i, r in recs.iter_rows() if uu == u}
        rel = {i: r for uu, i, r, _ in truth.iter_rows() if uu == u}
        prop = {i: p for uu, i, _, p in truth.iter_rows() if uu == u}
        for name in names:
            metric, _, cut = name.partition("@")
            want = reference(
                metric, ranks, rel, prop, int(cut or 0), ips=ips, max_weight=max_weight
            )
            if want is None:
                assert row[name] is None, (u, name)
            else:
                assert row[name] == pytest.approx(want, rel=1e-12, abs=1e-12), (u, name)


# -- the identity: equal propensities give the unweighted bits ---------------------------------


def _bits(frame: pl.DataFrame) -> list[tuple[str, bytes, list[bool]]]:
    """Each column's values as bytes (floats bit for bit) and its null mask."""
    out = []
    for name in frame.columns:
        s = frame[name]
        values = s.fill_null(0).to_numpy()
        if s.dtype.is_float():
            values = values.astype(np.float64).view(np.int64)
        out.append((name, values.tobytes(), s.is_null().to_list()))
    return out


def _random_case(seed: int, *, same_p: bool) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    rng = random.Random(seed)
    rec_rows, truth_rows, base_rows = [], [], []
    for user in range(60):
        items = rng.sample(range(30), 12)
        for rank, item in enumerate(items[: rng.randint(0, 12)]):
            rec_rows.append((user, item, rank + 1, float(rng.randint(0, 3))))
        for rank, item in enumerate(rng.sample(range(30), 5)):
            base_rows.append((user, item, rank + 1))
        p = rng.choice([1.0, 0.3, 0.1, 1 / 3, 0.7, 1e-5, 0.123456789])
        for item in rng.sample(range(30), rng.randint(0, 9)):
            truth_rows.append((user, item, float(rng.choice([0, 1, 2, 3])), p if same_p else 1.0))
    recs = pl.DataFrame(rec_rows, schema=["user", "item", "rank", "score"], orient="row")
    truth = pl.DataFrame(truth_rows, schema=["user", "item", "relevance", "p"], orient="row")
    baseline = pl.DataFrame(base_rows, schema=["user", "item", "rank"], orient="row")
    return recs, truth, baseline


#: Every metric judged against relevance (the ranking options' readers).
RANKING_METRICS = sorted(
    m.name for m in REGISTRY.values() if m.family == "ranking" and m.population == "relevant"
)


def _named(metric: str, k: int) -> str:
    return f"{metric}@{k}" if REGISTRY[metric].takes_k else metric


@pytest.mark.parametrize("ips", ["snips", "ips"])
@pytest.mark.parametrize(
    "variant",
    [
        {},
        {"threshold": 2},
        {"gain": "exponential", "ap_denominator": "relevant"},
        {"empty": "zero", "relevant_set": "listed"},
        {"score": "score", "ties": "average"},
        {"rbp_gain": "relevance", "idcg": "k", "gain": "binary", "mrr_cutoff": "none"},
    ],
    ids=["default", "threshold", "exp-gain", "zero-listed", "tie-average", "variants"],
)
def test_equal_propensities_give_the_unweighted_bits(
    ips: Literal["snips", "ips"], variant: dict[str, Any]
) -> None:
    # snips: P equal within each user (different across users); ips: P = 1 everywhere.
    recs, truth, baseline = _random_case(7, same_p=ips == "snips")
    metrics = [_named(m, k) for m in RANKING_METRICS for k in (1, 5, 10)]
    metrics = list(dict.fromkeys(metrics))
    if variant.get("ties") == "average":
        metrics = [m for m in metrics if REGISTRY[m.partition("@")[0]].tie_average]
    call = {"metrics": metrics, "baseline": baseline, **variant}
    if "score" not in variant:
        recs = recs.drop("score")
    plain = fm.evaluate(recs, truth, **call)
    weighted = fm.evaluate(recs, truth, propensity="p", ips=ips, **call)
    assert _bits(weighted) == _bits(plain)
    mean_plain = fm.evaluate(recs, truth, aggregate=True, **call)
    mean_weighted = fm.evaluate(recs, truth, aggregate=True, propensity="p", ips=ips, **call)
    assert _bits(mean_weighted) == _bits(mean_plain)


def test_metric_string_sets_ips() -> None:
    out = fm.evaluate(RECS, TRUTH, metrics=["precision@3", "precision(ips=ips)@3"], propensity="p")
    assert out["precision@3"][0] == pytest.approx(2 / 3, rel=1e-15)
    assert out["precision(ips=ips)@3"][0] == 2.0  # (2 + 4) / 3


# -- a perfect list is exactly at the bound (spec 9, clarified 2026-11-27) -------------------

#: Propensities whose weights 1/P and normalised weights have long binary expansions, so
#: that sums of them in different orders round differently; distinct within a user, so
#: that the list in descending weight is the ideal one.
PERFECT_PROPENSITIES = [0.3, 0.7, 0.9, 0.45, 0.123456789, 1.0, 0.05, 0.61, 1 / 3]


def _perfect_lists(seed: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Users whose list holds all their relevant items, heaviest weight first.

    Then two judged non-relevant items (relevance 0). Relevance 1 throughout, so that the
    weighted gains are in the order of the weights: the list is in ideal order.
    """
    rng = random.Random(seed)
    rec_rows, truth_rows = [], []
    for user in range(300):
        props = sorted(rng.sample(PERFECT_PROPENSITIES, rng.randint(1, 7)))
        for rank, p in enumerate(props, start=1):
            # Scores: every two relevant items tie (ties="average" averages within k).
            rec_rows.append((user, rank, rank, float(100 - (rank + 1) // 2)))
            truth_rows.append((user, rank, 1.0, p))
        for j in (1, 2):
            item = 100 + j
            rec_rows.append((user, item, len(props) + j, float(-j)))
            truth_rows.append((user, item, 0.0, 1.0))
    recs = pl.DataFrame(rec_rows, schema=["user", "item", "rank", "score"], orient="row")
    truth = pl.DataFrame(truth_rows, schema=["user", "item", "relevance", "p"], orient="row")
    return recs, truth


@pytest.mark.parametrize("ips", ["snips", "ips"])
def test_a_perfect_list_is_exactly_at_the_bound(
    constructor: Constructor, ips: Literal["snips", "ips"]
) -> None:
    # Recall's numerator is Σ w̃ over the hits, its denominator Σ w̃ over R: one sum over
    # one set when the list holds all of R, so exactly 1 (not 0.9999999999999998); so
    # are R-precision's and bpref's (no judged non-relevant item above a relevant one),
    # NDCG (in ideal order), hit rate and MRR. Each is bounded by 1 under weights.
    recs, truth = _perfect_lists(3)
    metrics = ["recall@10", "r_precision", "bpref", "ndcg@10", "hit_rate@10", "mrr@10"]
    call: dict[str, Any] = {"metrics": metrics, "propensity": "p", "ips": ips}
    got = evaluate_as_polars(constructor, recs.drop("score"), truth, **call)
    assert got.height == 300
    for name in metrics:
        assert got[name].to_list() == [1.0] * 300, name
    # The same lists ranked from scores, equal scores averaged over their orders: every
    # tie group lies within k, so recall is again the whole of R.
    averaged = evaluate_as_polars(
        constructor,
        recs.drop("rank"),
        truth,
        score="score",
        ties="average",
        metrics=["recall@10", "ndcg@10"],
        propensity="p",
        ips=ips,
    )
    assert averaged["recall@10"].to_list() == [1.0] * 300
    mean = fm.evaluate(recs.drop("score"), truth, aggregate=True, **call).row(0, named=True)
    assert mean == {"n_users": 300, **dict.fromkeys(metrics, 1.0)}


# -- every frame kind, row order, buckets, Dask ----------------------------------------------


def _unequal_case() -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    recs, truth, _ = _random_case(11, same_p=True)
    rng = random.Random(3)
    truth = truth.with_columns(p=pl.Series([rng.choice(PROPENSITIES) for _ in range(truth.height)]))
    train = pl.DataFrame(
        {
            "user": [rng.randint(0, 90) for _ in range(400)],
            "item": [rng.randint(0, 35) for _ in range(400)],
        }
    )
    return recs.drop("score"), truth, train


_BITS_METRICS = [
    "precision@5",
    "recall@5",
    "ndcg@5",
    "ap@5",
    "err@5",
    "rbp",
    "r_precision",
    "bpref",
]


@pytest.mark.parametrize(
    "source", [{"propensity": "p"}, {"propensity": "popularity", "propensity_gamma": 1.5}]
)
def test_the_same_bits_on_every_frame_kind(
    constructor: Constructor, source: dict[str, Any]
) -> None:
    recs, truth, train = _unequal_case()
    call = {"metrics": _BITS_METRICS, "train": train, "max_weight": 40.0, **source}
    want = fm.evaluate(recs, truth, **call)
    got = to_polars(fm.evaluate(constructor(recs), constructor(truth), **call))
    assert _bits(got) == _bits(want)
    # Rows shuffled, in buckets, and aggregated.
    shuffled = fm.evaluate(
        recs.sample(fraction=1.0, shuffle=True, seed=1),
        truth.sample(fraction=1.0, shuffle=True, seed=2),
        **call,
    )
    assert _bits(shuffled) == _bits(want)
    bucketed = to_polars(fm.evaluate(recs.lazy(), truth.lazy(), buckets=3, **call))
    assert _bits(bucketed) == _bits(want)
    mean = fm.evaluate(recs, truth, aggregate=True, **call)
    bucketed_mean = fm.evaluate(recs.lazy(), truth.lazy(), aggregate=True, buckets=3, **call)
    assert _bits(to_polars(bucketed_mean)) == _bits(mean)


def test_the_same_bits_on_dask() -> None:
    dd = pytest.importorskip("dask.dataframe", reason="the dask extra is part of the dev install")
    recs, truth, train = _unequal_case()
    for source in ({"propensity": "p"}, {"propensity": "popularity", "propensity_gamma": 2}):
        call: dict[str, Any] = {"metrics": _BITS_METRICS, "train": train, **source}
        want = fm.evaluate(recs, truth, **call)
        mean = fm.evaluate(recs, truth, aggregate=True, **call)
        frames = [dd.from_pandas(f.to_pandas(), npartitions=3) for f in (recs, truth, train)]
        per_user = fm.evaluate(frames[0], frames[1], **(call | {"train": frames[2]}))
        got = pl.from_pandas(per_user.compute()).sort("user")
        assert _bits(got.select(want.columns)) == _bits(want)
        agg = fm.evaluate(frames[0], frames[1], aggregate=True, **(call | {"train": frames[2]}))
        assert _bits(pl.from_pandas(agg.compute()).select(mean.columns)) == _bits(mean)


def test_the_same_bits_on_spark(spark: Any) -> None:
    session = spark  # the session-scoped fixture of conftest.py
    recs, truth, train = _unequal_case()
    call: dict[str, Any] = {
        "metrics": _BITS_METRICS,
        "propensity": "popularity",
        "propensity_gamma": 2,
    }
    want = fm.evaluate(recs, truth, train=train, aggregate=True, **call)
    frames = [session.createDataFrame(f.to_pandas()) for f in (recs, truth, train)]
    got = fm.evaluate(frames[0], frames[1], train=frames[2], aggregate=True, **call)
    out = pl.from_arrow(got.toArrow())
    assert isinstance(out, pl.DataFrame)
    assert _bits(out.select(want.columns)) == _bits(want)


# -- bad input -------------------------------------------------------------------------------


def test_gamma_is_required_with_popularity() -> None:
    with pytest.raises(InvalidOptionError, match=r"^propensity_gamma: expected a finite"):
        fm.evaluate(RECS, TRUTH, propensity="popularity", train=RECS.select("user", "item"))


def test_popularity_needs_train() -> None:
    message = (
        "propensity='popularity': expected train= (reference interactions with the user and "
        "item columns, usually the train split), got None; it counts the distinct train "
        "users of each item"
    )
    with pytest.raises(
        MissingInputError, match=f"^{message.replace('(', '[(]').replace(')', '[)]')}$"
    ):
        fm.evaluate(RECS, TRUTH, propensity="popularity", propensity_gamma=2)


def test_options_that_change_nothing_are_reported() -> None:
    with pytest.warns(IgnoredOptionWarning, match="propensity_gamma: 2.0 ignored"):
        fm.evaluate(RECS, TRUTH, metrics="recall@1", propensity="p", propensity_gamma=2)
    with pytest.warns(IgnoredOptionWarning, match="max_weight: 5.0 ignored"):
        fm.evaluate(RECS, TRUTH, metrics="recall@1", max_weight=5)


def test_empty_train_is_refused() -> None:
    empty = pl.DataFrame(schema={"user": pl.Int64, "item": pl.String})
    with pytest.raises(InvalidValueError, match=r"^train: expected at least one row in train"):
        fm.evaluate(
            RECS,
            TRUTH,
            metrics="recall@1",
            propensity="popularity",
            propensity_gamma=1,
            train=empty,
        )


def test_empty_input_gives_an_empty_typed_result() -> None:
    out = fm.evaluate(RECS.clear(), TRUTH.clear(), metrics=["recall@3", "ndcg@3"], propensity="p")
    assert out.height == 0
    assert out.schema["recall@3"] == pl.Float64
    mean = fm.evaluate(
        RECS.clear(), TRUTH.clear(), metrics="recall@3", propensity="p", aggregate=True
    )
    assert mean.height == 0


def test_no_warning_from_a_plain_weighted_call() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fm.evaluate(RECS, TRUTH, metrics="recall@1", propensity="p")


# -- LensKit's IPSRBP ----------------------------------------------------------------------

# lenskit/lkpy src/lenskit/metrics/ranking/_ips.py (commit aef24fb054223bea8799ddc8a37e7902f758d294)
# and _propensity.py (commit de8fb829a519aedc270f68dbd708b742f8f94382).


def lenskit_popularity_weights(
    train_users: Mapping[str, int], items: Sequence[str], gamma: float
) -> list[float]:
    """``PopularityPropensity(data, gamma=γ).weights``: (top / n_i)^((γ+1)/2), n_i >= 1;
    an item absent from the data: top^((γ+1)/2) (numpy's ``**``)."""
    exponent = (gamma + 1) / 2
    top = float(max(train_users.values()))
    return [
        (top / max(float(train_users[i]), 1.0)) ** exponent if i in train_users else top**exponent
        for i in items
    ]


def lenskit_ipsrbp(
    recs: Sequence[str],
    test: Sequence[str],
    item_weights: Sequence[float],
    *,
    patience: float,
    self_normalized: bool = True,
) -> float:
    """``IPSRBP(propensity=..., patience=p).measure_list``: positions 1..len of the list,
    c(r) = p^(r-1) / series_sum, series_sum = 1/(1-p); Σ_hits w_i c(r_i), over Σ_test w_i
    when self-normalised."""
    weights = dict(zip(test, item_weights, strict=True))
    normalization = 1.0 / (1.0 - patience)
    gain = sum(weights[i] * patience ** (pos - 1) for pos, i in enumerate(recs, 1) if i in weights)
    gain /= normalization
    if not self_normalized:
        return gain
    return gain / sum(item_weights)


def test_lenskit_transcription_reduces_to_its_recorded_rbp() -> None:
    # Uniform propensities without normalisation give LensKit's RBP. The real LensKit
    # 2025.8.1 (it has RBP, not yet IPSRBP), run once:
    #   /tmp/lk/bin/python -c "from lenskit.data import ItemList; from lenskit.metrics import RBP;
    #   print(repr(RBP(patience=0.85).measure_list(ItemList(['a','b','c','d','e'], ordered=True),
    #   ItemList(['b','d','z']))))"
    # printed 0.21961875.
    recorded = 0.21961875
    got = lenskit_ipsrbp(
        list("abcde"), ["b", "d", "z"], [1.0] * 3, patience=0.85, self_normalized=False
    )
    assert got == pytest.approx(recorded, rel=1e-15)
    # frame_metrics' rbp with P = 1 under ips is the same number.
    recs = pl.DataFrame({"user": 1, "item": list("abcde"), "rank": range(1, 6)})
    truth = pl.DataFrame({"user": 1, "item": ["b", "d", "z"], "relevance": 1.0, "p": 1.0})
    out = fm.evaluate(recs, truth, metrics="rbp", persistence=0.85, propensity="p", ips="ips")
    assert out["rbp"][0] == pytest.approx(recorded, rel=1e-15)


@settings(max_examples=40, deadline=None)
@given(
    listed=st.permutations(list("abcdefgh")).map(lambda xs: xs[:6]),
    test=st.lists(st.sampled_from(list("abcdefghij")), min_size=1, max_size=5, unique=True),
    gamma=st.sampled_from([-1.0, 0.5, 1.5, 2.0, 3.0]),
)
def test_lenskit_ipsrbp_with_popularity_propensity(
    listed: list[str], test: list[str], gamma: float
) -> None:
    warnings.simplefilter("ignore", UnmatchedIdsWarning)  # lists that miss the test items
    # Train popularity: distinct users per item (i and j are in no train row: n = 1).
    train_users = {"a": 9, "b": 5, "c": 3, "d": 3, "e": 1, "f": 2, "g": 7, "h": 4}
    train = pl.DataFrame(
        [(f"{item}{u}", item) for item, n in train_users.items() for u in range(n)],
        schema=["user", "item"],
        orient="row",
    )
    recs = pl.DataFrame({"user": "u", "item": listed, "rank": range(1, len(listed) + 1)})
    truth = pl.DataFrame({"user": "u", "item": test, "relevance": 1.0})
    call: dict[str, Any] = {"propensity": "popularity", "propensity_gamma": gamma, "train": train}
    w = lenskit_popularity_weights(train_users, test, gamma)
    # IPS (self_normalized=False): rbp under ips is Σ_hits w (1 - p) p^(r-1), the same.
    ips = fm.evaluate(recs, truth, metrics="rbp", persistence=0.85, ips="ips", **call)
    want = lenskit_ipsrbp(listed, test, w, patience=0.85, self_normalized=False)
    assert ips["rbp"][0] == pytest.approx(want, rel=1e-12)
    # SNIPS: LensKit divides by Σ_R w, spec 9.4 by Σ_R w / |R| (w̃ averages 1): LensKit's
    # value is frame_metrics' over |R| (its "average over all" scale).
    snips = fm.evaluate(recs, truth, metrics="rbp", persistence=0.85, **call)
    want = lenskit_ipsrbp(listed, test, w, patience=0.85)
    assert snips["rbp"][0] / len(test) == pytest.approx(want, rel=1e-12)


# -- diagnostics -----------------------------------------------------------------------------

DIAG_TRUTH = pl.DataFrame(
    {
        "user": [1, 1, 1, 2],
        "item": ["a", "c", "b", "a"],
        "relevance": [1, 1, 0, 1],
        "p": [0.5, 0.25, 1.0, 0.1],
    }
)


def test_diagnose_reports_the_weights() -> None:
    with pytest.warns(SmallSampleWarning, match=r"found 1\.4 \(the least 1\)"):
        d = fm.diagnose(RECS, DIAG_TRUTH, metrics="recall@1", propensity="p")
    # User 1: w = 2, 4: ESS (2 + 4)² / (2² + 4²) = 36/20; user 2: w = 10, ESS 1.
    assert d.propensity_mean_ess == (36 / 20 + 1) / 2
    assert d.propensity_min_ess == 1.0
    assert d.propensity_largest_weight == 10.0
    # 3 relevant rows: the heaviest ceil(1% of 3) = 1 row holds 10 of 2 + 4 + 10.
    assert d.propensity_top1_share == 10 / 16
    # Clipped at 5: w = 2, 4 and 5; ESS 1.8 and 1; the heaviest row holds 5 / 11.
    with pytest.warns(SmallSampleWarning):
        clipped = fm.diagnose(RECS, DIAG_TRUTH, metrics="recall@1", propensity="p", max_weight=5)
    assert clipped.propensity_largest_weight == 5.0
    assert clipped.propensity_top1_share == 5 / 11


def test_no_warning_with_enough_effective_items() -> None:
    # Two users with two equal weights each: ESS 2 per user.
    truth = pl.DataFrame(
        {"user": [1, 1, 2, 2], "item": ["a", "b", "a", "c"], "relevance": 1, "p": 0.5}
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        d = fm.diagnose(RECS, truth, metrics="recall@1", propensity="p")
    assert d.propensity_mean_ess == 2.0
    assert "effective sample size per user, mean:" in str(d)
    # Without propensities, no such line.
    assert "propensity_mean_ess" not in fm.diagnose(RECS, truth, metrics="recall@1").counts


def test_diagnostics_merge_on_dask() -> None:
    dd = pytest.importorskip("dask.dataframe", reason="the dask extra is part of the dev install")
    recs, truth, train = _unequal_case()
    for source in ({"propensity": "p"}, {"propensity": "popularity", "propensity_gamma": 2}):
        call: dict[str, Any] = {"metrics": ["recall@5"], "max_weight": 30.0, **source}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SmallSampleWarning)
            want = fm.diagnose(recs, truth, train=train, **call)
            frames = [dd.from_pandas(f.to_pandas(), npartitions=3) for f in (recs, truth, train)]
            got = fm.diagnose(frames[0], frames[1], train=frames[2], **call)
        assert got.counts == want.counts
        assert want.propensity_mean_ess is not None


# -- one scale for every user, or each user's own: the same weights to the bit ----------


@settings(max_examples=200, deadline=None)
@given(
    rows=st.lists(
        st.tuples(
            st.integers(0, 4),
            st.one_of(
                st.floats(1e-6, 1.0),
                st.floats(1e-300, 1e-200),  # weights past any one scale: each user's
                st.sampled_from([1.0, 0.5, 0.1, 1 / 3]),
            ),
        ),
        min_size=1,
        max_size=40,
    ),
    ips=st.sampled_from(["snips", "ips"]),
    max_weight=st.sampled_from([None, 7.0, 1e250]),
)
def test_one_scale_gives_each_users_weights_to_the_bit(
    rows: list[tuple[int, float]],
    ips: Literal["snips", "ips"],
    max_weight: float | None,
) -> None:
    # Σ_R w is summed exactly as integers: with one scale for all users when one keeps
    # every weight whole and the largest sum within Int128, else with each user's own.
    # Both are the exact sum rounded once, so w̃ has the same bits either way, and the
    # mass is the correctly rounded sum (Fraction arithmetic, written out here).
    from fractions import Fraction

    from frame_metrics.families.ranking import weights
    from frame_metrics.options import MetricOptions
    from frame_metrics.prepare import PROPENSITY

    frame = pl.LazyFrame(
        {"user": [u for u, _ in rows], PROPENSITY: [p for _, p in rows]},
        schema={"user": pl.Int64, PROPENSITY: pl.Float64},
    )
    options = MetricOptions(ips=ips, max_weight=max_weight)
    once = weights.with_weights(frame, ["user"], options).collect()
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(weights, "_common_shift", lambda _: None)
        each = weights.with_weights(frame, ["user"], options).collect()
    assert once.equals(each)
    for user in {u for u, _ in rows}:
        mine = once.filter(pl.col("user") == user)
        raw = mine[weights.RAW_WEIGHT].to_list()
        assert raw == [min(1 / p, max_weight or math.inf) for u, p in rows if u == user]
        if ips == "snips" and min(raw) >= max(raw) * 2.0**-48:
            # (A weight below 2^-48 of the user's largest loses its last bits: the
            # module's stated bound; then only the two paths are compared, above.)
            mass = float(sum(Fraction(w) for w in raw))
            want = [w * len(raw) / mass for w in raw]
            assert mine[weights.WEIGHT].to_list() == want
