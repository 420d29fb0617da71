"""miscalibration@k (spec section 9.1): worked examples, a reference, exactness, errors.

The expected values are arithmetic written out here, a pure-Python reference of the
spec's formulas written in this file (not the registry's), and the KL function of the
reference calibration notebook (ethen8181/machine-learning, ``recsys/calibration``),
transcribed below because it cannot be installed.
"""

from __future__ import annotations

import io
import math
import random
from collections.abc import Hashable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import frame_metrics as fm
import frame_metrics.families.calibration as calibration_family
from frame_metrics.cli import main
from frame_metrics.errors import DuplicateRowsError, InvalidOptionError, InvalidValueError
from frame_metrics.extras import ExtraFrame
from tests.conftest import Constructor, to_polars

LOG2_100 = math.log2(1 / 0.01)


def _kl(p: Mapping[str, float], q: Mapping[str, float], alpha: float = 0.01) -> float:
    return sum(
        pg * math.log2(pg / ((1 - alpha) * q.get(g, 0.0) + alpha * pg))
        for g, pg in p.items()
        if pg > 0
    )


def _js(p: Mapping[str, float], q: Mapping[str, float]) -> float:
    total = 0.0
    for g in set(p) | set(q):
        pg, qg = p.get(g, 0.0), q.get(g, 0.0)
        m = (pg + qg) / 2
        total += 0.5 * (pg * math.log2(pg / m) if pg else 0.0)
        total += 0.5 * (qg * math.log2(qg / m) if qg else 0.0)
    return math.sqrt(max(total, 0.0))


# --- worked examples ------------------------------------------------------------------------

# History {a: [x], b: [y]}; items a2 and c are [x], d is [x, y], e has no category.
FEATURES = pl.DataFrame(
    {
        "item": ["a", "b", "a2", "c", "d", "e"],
        "features": [["x"], ["y"], ["x"], ["x"], ["x", "y"], []],
    },
    schema={"item": pl.String, "features": pl.List(pl.String)},
)
TRAIN = pl.DataFrame({"user": [1, 1, 2, 3], "item": ["a", "b", "d", "e"]})


def _evaluate(recs: pl.DataFrame, **kwargs: Any) -> pl.DataFrame:
    kwargs.setdefault("train", TRAIN)
    kwargs.setdefault("item_features", FEATURES)
    return to_polars(fm.evaluate(recs, **kwargs))


def test_a_list_of_one_category_against_a_history_of_two() -> None:
    # p = {x: 1/2, y: 1/2}; the list [a, a2] is all x, so q = {x: 1}.
    recs = pl.DataFrame({"user": [1, 1], "item": ["a", "a2"], "rank": [1, 2]})
    out = _evaluate(recs, metrics=["miscalibration@2", "miscalibration(divergence=js)@2"])
    kl = 0.5 * math.log2(0.5 / (0.99 * 1 + 0.01 * 0.5)) + 0.5 * math.log2(0.5 / (0.01 * 0.5))
    # m = {x: 3/4, y: 1/4}: JSD = 1/2 (1/2 log2(2/3) + 1/2 log2 2) + 1/2 (1 log2(4/3)).
    jsd = 0.5 * (0.5 * math.log2(0.5 / 0.75) + 0.5 * math.log2(2)) + 0.5 * math.log2(4 / 3)
    assert out["miscalibration@2"].item() == pytest.approx(kl, rel=1e-15)
    assert out["miscalibration(divergence=js)@2"].item() == pytest.approx(math.sqrt(jsd), rel=1e-15)


def test_rank_weights_and_items_in_two_categories() -> None:
    # User 2's history is d = {x: 1/2, y: 1/2}; the list [b, a, d]: b = y, a = x, d = half each.
    recs = pl.DataFrame({"user": [2, 2, 2], "item": ["b", "a", "d"], "rank": [1, 2, 3]})
    metrics = [
        "miscalibration@3",
        "miscalibration(calibration_weight=reciprocal)@3",
        "miscalibration(calibration_weight=log)@3",
        "miscalibration(calibration_alpha=0.5)@2",
    ]
    row = _evaluate(recs, metrics=metrics).row(0, named=True)
    p = {"x": 0.5, "y": 0.5}
    # Uniform: q(y) = (1 + 0 + 1/2) / 3 = 1/2: perfectly calibrated, exactly 0.
    assert row[metrics[0]] == 0.0
    # 1/r: weights 1, 1/2, 1/3 (sum 11/6); q(y) = (1 + 1/6) / (11/6) = 7/11.
    assert row[metrics[1]] == pytest.approx(_kl(p, {"x": 4 / 11, "y": 7 / 11}), rel=1e-14)
    # 1/log2(r + 1): 1, 1/log2 3, 1/2.
    w = [1, 1 / math.log2(3), 0.5]
    q_y = (w[0] + w[2] / 2) / sum(w)
    assert row[metrics[2]] == pytest.approx(_kl(p, {"x": 1 - q_y, "y": q_y}), rel=1e-14)
    # k = 2, alpha = 1/2: q = {x: 1/2, y: 1/2} again.
    assert row[metrics[3]] == 0.0


def test_a_perfectly_calibrated_list_scores_exactly_zero() -> None:
    # History: one item of each of x, y, z, and one in all three: p = 1/3 each
    # (4/3 of an item per category over 4 items). The list: six single-category items,
    # two of each, q = 2/6: the same distribution, which KL (any alpha) and JS score 0.
    features = pl.DataFrame(
        {
            "item": ["hx", "hy", "hz", "hxyz", "x1", "x2", "y1", "y2", "z1", "z2"],
            "features": [["x"], ["y"], ["z"], ["x", "y", "z"], *[[g] for g in "xxyyzz"]],
        }
    )
    train = pl.DataFrame({"user": [1] * 4, "item": ["hx", "hy", "hz", "hxyz"]})
    recs = pl.DataFrame(
        {"user": [1] * 6, "item": ["x1", "y1", "z1", "x2", "y2", "z2"], "rank": range(1, 7)}
    )
    metrics = [
        "miscalibration@6",
        "miscalibration(calibration_alpha=0.3)@6",
        "miscalibration(divergence=js)@6",
    ]
    row = _evaluate(recs, metrics=metrics, train=train, item_features=features).row(0)
    assert row[1:] == (0.0, 0.0, 0.0)


@pytest.mark.parametrize(
    ("table", "scale"),
    [
        # Lists: w = 1, totals are the list lengths 1, 2 and 3.
        (pl.DataFrame({"item": ["a", "b", "c"], "genre": [["x"], ["x", "y"], ["x", "y", "z"]]}), 6),
        # Long form, whole weights: totals 1 + 3 = 4 and 2 + 4 = 6.
        (
            pl.DataFrame(
                {"item": ["a", "a", "b", "b"], "genre": ["x", "y"] * 2, "w": [1, 3, 2, 4]}
            ),
            12,
        ),
        # A fractional weight: fixed point.
        (pl.DataFrame({"item": ["a", "a"], "genre": ["x", "y"], "w": [0.5, 1.0]}), None),
        # Totals 4099 and 4111 (primes): L = 4099·4111 > 2^24, fixed point.
        (pl.DataFrame({"item": ["a", "b"], "genre": ["x", "x"], "w": [4099, 4111]}), None),
    ],
)
def test_the_units_of_the_sums_are_integers_when_the_weights_allow(
    table: pl.DataFrame, scale: int | None
) -> None:
    weight = "w" if "w" in table.columns else None
    extra = ExtraFrame("item_features", table.lazy(), ())
    cats, _ = calibration_family.category_table(extra, "item", "genre", weight)
    assert calibration_family._item_table_summary(cats)[1] == scale


def test_integer_units_and_fixed_point_agree_to_the_last_bits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    data = _big()
    features = data["item_features"]
    kwargs: dict[str, Any] = {k: v for k, v in _CALL.items() if k != "history_weight"}
    kwargs |= {"train": data["train"], "item_features": features, "by": "model"}
    exact = fm.evaluate(data["recs"], **kwargs)
    monkeypatch.setattr(calibration_family, "EXACT_MAX_SCALE", 0)
    fixed = fm.evaluate(data["recs"], **kwargs)
    assert exact.height == fixed.height > 0
    for name in exact.columns[2:]:
        for a, b in zip(exact[name], fixed[name], strict=True):
            assert a == pytest.approx(b, rel=1e-14, abs=1e-15), name


def test_a_list_without_a_categorised_item_scores_the_maximum() -> None:
    # e has no category: q = 0, so KL = Σ p log2(p / (α p)) = log2(1/α), the bound; the
    # JS distance with q = 0 is sqrt(1/2 Σ p log2(p / (p/2))) = sqrt(1/2).
    recs = pl.DataFrame({"user": [1, 1], "item": ["e", "a"], "rank": [1, 2]})
    out = _evaluate(
        recs,
        metrics=[
            "miscalibration@1",
            "miscalibration(calibration_alpha=0.1)@1",
            "miscalibration(divergence=js)@1",
        ],
    ).row(0)
    assert out[1:3] == (LOG2_100, math.log2(10.0))
    assert out[3] == pytest.approx(math.sqrt(0.5), rel=1e-15)


def test_the_population_is_users_with_a_list_and_a_categorised_history() -> None:
    recs = pl.DataFrame(
        {
            # 1: listed within 1 and 3; 3: history only e (uncategorised); 4: no history;
            # 5: a list only below rank 1.
            "user": [1, 1, 3, 4, 5],
            "item": ["a", "b", "a", "a", "a"],
            "rank": [1, 2, 1, 1, 2],
        }
    )
    train = pl.concat([TRAIN, pl.DataFrame({"user": [5], "item": ["b"]})])
    per_user = _evaluate(recs, metrics="miscalibration", k=[1, 3], train=train)
    # User 1 @1: q = {x: 1}; @3: [a, b] = p exactly. User 5 @3: p = {y: 1}, q = {x: 1}.
    assert per_user.rows() == [
        (1, pytest.approx(_kl({"x": 0.5, "y": 0.5}, {"x": 1.0})), pytest.approx(0.0)),
        (5, None, pytest.approx(math.log2(1 / 0.01))),
    ]
    agg = _evaluate(recs, metrics="miscalibration", k=[1, 3], train=train, aggregate=True)
    # n_users: users with a value for some metric; each mean over its own users.
    assert agg.row(0) == (
        2,
        pytest.approx(_kl({"x": 0.5, "y": 0.5}, {"x": 1.0})),
        pytest.approx(math.log2(100) / 2),
    )


def test_long_form_weights_and_history_weights() -> None:
    features = pl.DataFrame(
        {
            "item": ["a", "a", "b", "c", "z"],
            "genre": ["x", "y", "y", "x", "x"],
            "w": [3.0, 1.0, 2.0, 5.0, 0.0],  # a = {x: 3/4, y: 1/4}; z: weights sum to 0
        }
    )
    train = pl.DataFrame({"user": [1, 1, 1], "item": ["a", "b", "z"], "recency": [1.0, 3.0, 9.0]})
    recs = pl.DataFrame({"user": [1, 1, 1], "item": ["z", "c", "a"], "rank": [1, 2, 3]})
    out = _evaluate(
        recs,
        metrics="miscalibration@3",
        train=train,
        item_features=features,
        features="genre",
        feature_weight="w",
        history_weight="recency",
    ).item(0, 1)
    # z is uncategorised (left out of both sides). p = (1·{x: 3/4, y: 1/4} + 3·{y: 1}) / 4;
    # q over c (rank 2) and a (rank 3): ({x: 1} + {x: 3/4, y: 1/4}) / 2.
    p = {"x": 3 / 16, "y": 1 / 16 + 3 / 4}
    q = {"x": 7 / 8, "y": 1 / 8}
    assert out == pytest.approx(_kl(p, q), rel=1e-14)


def test_scalar_categories_and_repeated_list_entries() -> None:
    # Integer categories (the long form), and a list naming a category twice (a set).
    recs = pl.DataFrame({"user": [1, 1], "item": ["a", "b"], "rank": [1, 2]})
    train = pl.DataFrame({"user": [1, 1], "item": ["a", "c"]})
    long_form = pl.DataFrame({"item": ["a", "b", "c", "c"], "features": [1, 2, 1, 2]})
    lists = pl.DataFrame({"item": ["a", "b", "c"], "features": [[1, 1], [2], [1, 2, 2]]})
    p, q = {"1": 0.75, "2": 0.25}, {"1": 0.5, "2": 0.5}
    for features in (long_form, lists):
        got = _evaluate(recs, metrics="miscalibration@2", train=train, item_features=features)
        assert got.item(0, 1) == pytest.approx(_kl(p, q), rel=1e-14)


def test_options_in_metric_strings_and_in_the_call_agree() -> None:
    recs = pl.DataFrame({"user": [2, 2, 2], "item": ["b", "a", "c"], "rank": [1, 2, 3]})
    for option, value in [
        ("divergence", "js"),
        ("calibration_weight", "reciprocal"),
        ("calibration_alpha", 0.2),
    ]:
        string = _evaluate(recs, metrics=f"miscalibration({option}={value})@3").item(0, 1)
        call = _evaluate(recs, metrics="miscalibration@3", **{option: value}).item(0, 1)
        assert string == call
    with pytest.raises(InvalidOptionError, match="expected options miscalibration reads"):
        _evaluate(recs, metrics="miscalibration(threshold=1)@3")


# --- the reference notebook (ethen8181/machine-learning recsys/calibration) ---------------------


class _Item:
    """The notebook's item holder: its genre distribution (1/|G(i)| each)."""

    def __init__(self, genres: list[str]) -> None:
        self.genres = {genre: 1.0 / len(genres) for genre in genres}


def _compute_genre_distr(items: list[_Item]) -> dict[str, float]:
    # The notebook's compute_genre_distr, less its round(..., 3) of each share (which
    # moves its KL in the third decimal; the spec does not round).
    distr: dict[str, float] = {}
    for item in items:
        for genre, score in item.genres.items():
            genre_score = distr.get(genre, 0.0)
            distr[genre] = genre_score + score
    for item_, genre_score in distr.items():
        distr[item_] = genre_score / len(items)
    return distr


def _compute_kl_divergence(
    interacted_distr: dict[str, float], reco_distr: dict[str, float], alpha: float = 0.01
) -> float:
    # The notebook's compute_kl_divergence, as written (np.log2, alpha 0.01 by default).
    kl_div = 0.0
    for genre, score in interacted_distr.items():
        reco_score = reco_distr.get(genre, 0.0)
        reco_score = (1 - alpha) * reco_score + alpha * score
        kl_div += score * np.log2(score / reco_score)
    return float(kl_div)


def test_the_reference_notebook_kl_on_movielens_like_genres() -> None:
    # Where conventions agree (uniform weights, every item categorised, the notebook's
    # alpha 0.01 = the spec's), the values are equal; the notebook rounds the shares.
    rng = random.Random(3)
    genres = ["Action", "Comedy", "Drama", "Horror", "Romance", "Sci-Fi"]
    catalog = {f"m{i}": rng.sample(genres, rng.randint(1, 3)) for i in range(40)}
    features = pl.DataFrame({"item": list(catalog), "features": list(catalog.values())})
    recs_rows, train_rows, want = [], [], {}
    for user in range(20):
        history = rng.sample(list(catalog), rng.randint(1, 12))
        listed = rng.sample(list(catalog), 10)
        train_rows += [(user, i) for i in history]
        recs_rows += [(user, i, r) for r, i in enumerate(listed, 1)]
        want[user] = _compute_kl_divergence(
            _compute_genre_distr([_Item(catalog[i]) for i in history]),
            _compute_genre_distr([_Item(catalog[i]) for i in listed]),
        )
    recs = pl.DataFrame(recs_rows, schema=["user", "item", "rank"], orient="row")
    train = pl.DataFrame(train_rows, schema=["user", "item"], orient="row")
    got = _evaluate(recs, metrics="miscalibration@10", train=train, item_features=features)
    assert dict(got.rows()) == {u: pytest.approx(v, rel=1e-12, abs=1e-14) for u, v in want.items()}


# --- a pure-Python reference of the spec's formulas under hypothesis ----------------------------


def _reference(
    ranks: Mapping[Hashable, int],
    history: Mapping[Hashable, float],
    categories: Mapping[Hashable, Mapping[str, float]],
    k: int,
    alpha: float,
    weight: str,
    divergence: str,
) -> float | None:
    def shares(item: Hashable) -> dict[str, float] | None:
        w = categories.get(item, {})
        total = sum(w.values())
        return {g: v / total for g, v in w.items()} if total > 0 else None

    hist = {i: (s, history[i]) for i in history if (s := shares(i)) is not None}
    h_total = sum(w for _, w in hist.values())
    if h_total <= 0 or not any(r <= k for r in ranks.values()):
        return None
    p: dict[str, float] = {}
    for s, w in hist.values():
        for g, v in s.items():
            p[g] = p.get(g, 0.0) + w * v / h_total

    def rank_w(r: int) -> float:
        if weight == "reciprocal":
            return 1.0 / r
        return 1.0 / math.log2(r + 1) if weight == "log" else 1.0

    top = [(s, rank_w(r)) for i, r in ranks.items() if r <= k and (s := shares(i)) is not None]
    q_total = sum(w for _, w in top)
    q: dict[str, float] = {}
    for s, w in top:
        for g, v in s.items():
            q[g] = q.get(g, 0.0) + w * v / q_total
    if divergence == "js":
        return _js(p, q)
    return math.log2(1 / alpha) if not top else _kl(p, q, alpha)


@st.composite
def _worlds(draw: st.DrawFn) -> dict[str, Any]:
    items = [f"i{n}" for n in range(8)]
    cats = ["g0", "g1", "g2", "g3"]
    categories: dict[str, dict[str, float]] = {}
    # Whole weights (sums in integer units) or not (in fixed point); 0 among them (an
    # item whose weights add to 0).
    values = [0.0, 1.0, 2.0, 3.0] if draw(st.booleans()) else [0.0, 0.5, 1.0, 2.0, 3.0]
    for item in items:
        chosen = draw(st.lists(st.sampled_from(cats), unique=True, max_size=3))
        categories[item] = {g: draw(st.sampled_from(values)) for g in chosen}
    users: dict[int, tuple[dict[str, int], dict[str, float]]] = {}
    for user in range(draw(st.integers(1, 5))):
        listed = draw(st.lists(st.sampled_from(items), unique=True, max_size=6))
        ranks = dict(
            zip(
                listed,
                sorted(
                    draw(st.sets(st.integers(1, 9), min_size=len(listed), max_size=len(listed)))
                ),
                strict=True,
            )
        )
        hist_items = draw(st.lists(st.sampled_from(items), unique=True, max_size=5))
        history = {i: draw(st.sampled_from([0.0, 0.25, 1.0, 4.0])) for i in hist_items}
        users[user] = (ranks, history)
    return {"categories": categories, "users": users}


@settings(max_examples=60, deadline=None)
@given(world=_worlds())
def test_against_a_reference_of_the_spec(world: dict[str, Any]) -> None:
    categories, users = world["categories"], world["users"]
    features = pl.DataFrame(
        [(i, g, w) for i, cw in categories.items() for g, w in cw.items()],
        schema={"item": pl.String, "genre": pl.String, "w": pl.Float64},
        orient="row",
    )
    recs = pl.DataFrame(
        [(u, i, r) for u, (ranks, _) in users.items() for i, r in ranks.items()],
        schema={"user": pl.Int64, "item": pl.String, "rank": pl.Int64},
        orient="row",
    )
    train = pl.DataFrame(
        [(u, i, w) for u, (_, hist) in users.items() for i, w in hist.items()],
        schema={"user": pl.Int64, "item": pl.String, "w": pl.Float64},
        orient="row",
    )
    variants = [
        (alpha, weight, divergence)
        for alpha in (0.01, 0.3)
        for weight in ("uniform", "reciprocal", "log")
        for divergence in ("kl", "js")
    ]
    names = [
        f"miscalibration(calibration_alpha={a},calibration_weight={w},divergence={d})"
        for a, w, d in variants
    ]
    ks = [1, 3, 9]
    call: dict[str, Any] = {
        "metrics": names,
        "k": ks,
        "train": train,
        "item_features": features,
        "features": "genre",
        "feature_weight": "w",
    }
    out = fm.evaluate(recs, history_weight="w", **call)
    # The sparse path (rows per (user, category)) and the dense one (a column per
    # category, taken here: 4 categories) give the same bits, with and without weights.
    unweighted = fm.evaluate(recs, **call)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(calibration_family, "DENSE_MAX_CATEGORIES", 0)
        assert fm.evaluate(recs, history_weight="w", **call).equals(out, null_equal=True)
        assert fm.evaluate(recs, **call).equals(unweighted, null_equal=True)
    got = {row["user"]: row for row in out.iter_rows(named=True)}
    for user, (ranks, history) in users.items():
        for (a, w, d), name in zip(variants, names, strict=True):
            for k in ks:
                want = _reference(ranks, history, categories, k, a, w, d)
                value = got.get(user, {}).get(f"{name}@{k}")
                if want is None:
                    assert value is None, (user, name, k)
                elif d == "js":
                    assert value is not None, (user, name, k)
                    # The distance is a square root: near 0 it magnifies the last bits of
                    # p and q (a JSD of 1e-20 is a distance of 1e-10), so compare JSD.
                    assert value**2 == pytest.approx(want**2, rel=1e-12, abs=1e-15), (user, name, k)
                else:
                    assert value == pytest.approx(want, rel=1e-12, abs=1e-12), (user, name, k)


# --- exactness: row order, frame kinds, buckets, Dask, by groups --------------------------------


def _big(seed: int = 11) -> dict[str, pl.DataFrame]:
    rng = random.Random(seed)
    genres = [f"g{n}" for n in range(7)]
    items = [f"m{n}" for n in range(60)]
    features = pl.DataFrame(
        [
            (i, g, float(rng.randint(1, 4)))
            for i in items[:55]
            for g in rng.sample(genres, rng.randint(1, 3))
        ],
        schema=["item", "genre", "w"],
        orient="row",
    )
    recs_rows, train_rows = [], []
    for model in ("a", "b"):
        for user in range(40):
            listed = rng.sample(items, rng.randint(1, 12))
            recs_rows += [(model, user, i, r) for r, i in enumerate(listed, 1)]
    for user in range(45):
        train_rows += [(user, i, rng.random()) for i in rng.sample(items, rng.randint(0, 15))]
    return {
        "recs": pl.DataFrame(recs_rows, schema=["model", "user", "item", "rank"], orient="row"),
        "train": pl.DataFrame(train_rows, schema=["user", "item", "recency"], orient="row"),
        "item_features": features,
    }


_METRICS = [
    "miscalibration",
    "miscalibration(divergence=js)",
    "miscalibration(calibration_weight=log,calibration_alpha=0.05)",
]
_CALL: dict[str, Any] = {
    "metrics": _METRICS,
    "k": [3, 10],
    "by": "model",
    "features": "genre",
    "feature_weight": "w",
    "history_weight": "recency",
}


def _shuffled(frame: pl.DataFrame, seed: int) -> pl.DataFrame:
    return frame.sample(fraction=1.0, shuffle=True, seed=seed)


@pytest.mark.parametrize("aggregate", [False, True])
def test_the_same_bits_on_every_frame_kind_and_row_order(
    constructor: Constructor, aggregate: bool
) -> None:
    data = _big()
    want = fm.evaluate(
        data["recs"],
        train=data["train"],
        item_features=data["item_features"],
        aggregate=aggregate,
        **_CALL,
    )
    got = to_polars(
        fm.evaluate(
            constructor(_shuffled(data["recs"], 1)),
            train=constructor(_shuffled(data["train"], 2)),
            item_features=constructor(_shuffled(data["item_features"], 3)),
            aggregate=aggregate,
            **_CALL,
        )
    )
    assert want.height > 0
    assert got.equals(want, null_equal=True)


@pytest.mark.parametrize("table", ["long", "fractional", "lists", "per_model"])
@pytest.mark.parametrize("weighted", [False, True])
def test_the_dense_and_the_sparse_path_give_the_same_bits(
    monkeypatch: pytest.MonkeyPatch, table: str, weighted: bool
) -> None:
    data = _big()
    features = data["item_features"]
    call = {k: v for k, v in _CALL.items() if k != "history_weight" or weighted}
    if table == "fractional":
        # Weights that are not whole numbers: sums in fixed point rather than integers.
        features = features.with_columns(pl.col("w") * 0.5 + 0.25)
    elif table == "lists":
        features = features.group_by("item").agg(pl.col("genre"))
        call = {k: v for k, v in call.items() if k != "feature_weight"}
    elif table == "per_model":
        # The item table names the groups train lacks: a history per (model, user).
        features = pl.concat(
            [
                features.with_columns(model=pl.lit("a")),
                features.filter(pl.col("item") != "m3").with_columns(
                    model=pl.lit("b"), w=pl.col("w") * 2 + 1
                ),
            ]
        )
    kwargs = {"train": data["train"], "item_features": features, **call}
    dense = fm.evaluate(data["recs"], **kwargs)
    monkeypatch.setattr(calibration_family, "DENSE_MAX_CATEGORIES", 0)
    sparse = fm.evaluate(data["recs"], **kwargs)
    assert dense.height > 0
    assert dense.equals(sparse, null_equal=True)


@pytest.mark.parametrize("aggregate", [False, True])
def test_the_same_bits_in_buckets_and_on_dask(aggregate: bool) -> None:
    dd = pytest.importorskip("dask.dataframe")
    data = _big()
    kwargs = {"train": data["train"], "item_features": data["item_features"], **_CALL}
    one_pass = fm.evaluate(data["recs"], aggregate=aggregate, **kwargs)
    buckets = fm.evaluate(data["recs"].lazy(), buckets=3, aggregate=aggregate, **kwargs)
    assert buckets.collect().equals(one_pass, null_equal=True)
    on_dask = fm.evaluate(
        dd.from_pandas(data["recs"].to_pandas(), npartitions=3),
        aggregate=aggregate,
        **(kwargs | {"train": dd.from_pandas(data["train"].to_pandas(), npartitions=2)}),
    ).compute()
    order = ["model"] if aggregate else ["model", "user"]
    assert pl.from_pandas(on_dask).sort(order).equals(one_pass.sort(order), null_equal=True)


def test_by_groups_each_their_own_lists_and_a_shared_history() -> None:
    data = _big()
    both = fm.evaluate(
        data["recs"], train=data["train"], item_features=data["item_features"], **_CALL
    )
    call = {k: v for k, v in _CALL.items() if k != "by"}
    for model in ("a", "b"):
        alone = fm.evaluate(
            data["recs"].filter(pl.col("model") == model).drop("model"),
            train=data["train"],
            item_features=data["item_features"],
            **call,
        )
        assert both.filter(pl.col("model") == model).drop("model").equals(alone)


# --- bad input --------------------------------------------------------------------------------

_RECS = pl.DataFrame({"user": [1, 1], "item": ["a", "b"], "rank": [1, 2]})
_TRAIN = pl.DataFrame({"user": [1, 1], "item": ["a", "b"], "w": [1.0, 2.0]})
_LONG = pl.DataFrame({"item": ["a", "b"], "features": ["x", "y"], "fw": [1.0, 1.0]})


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        (
            {"item_features": pl.DataFrame({"item": ["a"], "features": [["x", None]]})},
            InvalidValueError,
            "item_features: expected no null category in the lists of column 'features', "
            "found 1 list(s) holding one, e.g. item='a', features=['x', None]",
        ),
        (
            {"item_features": pl.concat([_LONG, _LONG.head(1)])},
            DuplicateRowsError,
            "item_features: expected one row per (item, category), found 2 rows that repeat "
            "one, e.g. item='a', features='x'",
        ),
        (
            {
                "item_features": _LONG.with_columns(fw=pl.Series([1.0, float("nan")])),
                "feature_weight": "fw",
            },
            InvalidValueError,
            "item_features: expected a finite number >= 0 in weight column 'fw' of "
            "item_features, found 1 row(s) without one (null, NaN, infinite or negative), "
            "e.g. item='b', features='y', fw=nan",
        ),
        (
            {"item_features": _LONG.with_columns(features=pl.Series([None, "y"]))},
            InvalidValueError,
            "item_features: expected no nulls in key or category column 'features', found 1 "
            "null row(s), e.g. item='a', features=None",
        ),
        (
            {"item_features": _LONG.with_columns(features=pl.lit(1.5))},
            InvalidValueError,
            "item_features: expected column 'features' to hold a list of categories per item, "
            "or one category per row (text, categorical or integer), found dtype Float64",
        ),
        (
            {
                "item_features": pl.DataFrame({"item": ["a"], "features": [["x"]], "fw": [1]}),
                "feature_weight": "fw",
            },
            InvalidOptionError,
            "feature_weight: expected None with the list column 'features' of item_features "
            "(w = 1 per listed category; a weight needs the long form, one row per (item, "
            "category)), got 'fw'",
        ),
        (
            {"train": _TRAIN.with_columns(w=pl.Series([1.0, -2.0])), "history_weight": "w"},
            InvalidValueError,
            "train: expected a finite number >= 0 in weight column 'w' of train, found 1 "
            "row(s) without one (null, NaN, infinite or negative), e.g. user=1, item='b', "
            "w=-2.0",
        ),
        (
            {"train": pl.concat([_TRAIN, _TRAIN.head(1)]), "history_weight": "w"},
            DuplicateRowsError,
            "train: expected one row per (user, item) pair when history_weight='w' is given, "
            "found 2 rows that repeat one, e.g. user=1, item='a', w=1.0; combine each pair's "
            "weights into one row first",
        ),
        (
            {"train": _TRAIN.with_columns(w=pl.lit("x")), "history_weight": "w"},
            InvalidValueError,
            "train: expected column 'w' (history_weight) to hold numbers, found dtype String",
        ),
    ],
)
def test_bad_input_is_refused_with_a_clear_message(
    kwargs: dict[str, Any], error: type[Exception], message: str
) -> None:
    call = {"train": _TRAIN, "item_features": _LONG} | kwargs
    with pytest.raises(error) as raised:
        fm.evaluate(_RECS, metrics="miscalibration@2", **call)
    assert str(raised.value) == message


# --- diagnose ---------------------------------------------------------------------------------


def test_diagnose_counts_who_and_what_is_left_out() -> None:
    # User 3's history is e only (no category), users 4 and 5 have no history; e (an
    # empty list) and zz (no row) have no category. User 1 is evaluated.
    recs = pl.DataFrame(
        {"user": [1, 1, 3, 4, 5], "item": ["a", "e", "a", "zz", "a"], "rank": [1, 2, 1, 1, 2]}
    )
    found = fm.diagnose(recs, metrics="miscalibration@2", train=TRAIN, item_features=FEATURES)
    assert found.users_without_categorised_history == 3
    assert found.items_without_category == 2
    assert "recommended items (within k=2) without a category:" in str(found)
    assert (
        "items_without_category" not in fm.diagnose(recs, metrics="novelty@2", train=TRAIN).counts
    )
    out = _evaluate(recs, metrics="miscalibration@2")
    assert out["user"].to_list() == [1]


def test_diagnose_counts_are_the_same_on_dask() -> None:
    # Users are split over partitions (their counts add up); an item recommended in two
    # partitions is one item without a category.
    dd = pytest.importorskip("dask.dataframe")
    recs = pl.DataFrame(
        {"user": [1, 1, 3, 4, 5], "item": ["a", "e", "a", "zz", "zz"], "rank": [1, 2, 1, 1, 2]}
    )
    one = fm.diagnose(recs, metrics="miscalibration@2", train=TRAIN, item_features=FEATURES)
    parts = fm.diagnose(
        dd.from_pandas(recs.to_pandas(), npartitions=3),
        metrics="miscalibration@2",
        train=dd.from_pandas(TRAIN.to_pandas(), npartitions=2),
        item_features=FEATURES,
    )
    assert (
        parts.counts
        == one.counts
        == {
            "users_without_categorised_history": 3,
            "items_without_category": 2,
        }
    )


def test_a_repeated_train_row_is_one_history_item() -> None:
    # The history is the user's distinct items: a second (1, a) row changes nothing.
    recs = pl.DataFrame({"user": [1], "item": ["a"], "rank": [1]})
    once = _evaluate(recs, metrics="miscalibration@1")
    twice = _evaluate(recs, metrics="miscalibration@1", train=pl.concat([TRAIN, TRAIN.head(1)]))
    assert once.equals(twice)
    assert once.item(0, 1) == pytest.approx(_kl({"x": 0.5, "y": 0.5}, {"x": 1.0}))


# --- the command line -------------------------------------------------------------------------


def test_the_command_line_gives_the_api_numbers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _big()
    for name, frame in data.items():
        frame.write_csv(tmp_path / f"{name}.csv")
    code = main(
        [
            "evaluate",
            str(tmp_path / "recs.csv"),
            "-m",
            "miscalibration(divergence=js)@5,miscalibration@10",
            "--by",
            "model",
            "--train",
            str(tmp_path / "train.csv"),
            "--item-features",
            str(tmp_path / "item_features.csv"),
            "--features-col",
            "genre",
            "--feature-weight",
            "w",
            "--history-weight",
            "recency",
            "--calibration-weight",
            "log",
            "--calibration-alpha",
            "0.05",
            "--format",
            "csv",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    want = fm.evaluate(
        data["recs"],
        metrics=["miscalibration(divergence=js)@5", "miscalibration@10"],
        by="model",
        train=data["train"],
        item_features=data["item_features"],
        features="genre",
        feature_weight="w",
        history_weight="recency",
        calibration_weight="log",
        calibration_alpha=0.05,
        aggregate=True,
    )
    got = pl.read_csv(io.StringIO(out))
    assert got.equals(want)


# --- Spark (one JVM start: run once) ------------------------------------------------------------


@pytest.mark.parametrize("aggregate", [False, True])
def test_the_same_bits_on_spark(spark: Any, aggregate: bool) -> None:
    from frame_metrics.distributed.spark import _arrow

    session = spark  # the session-scoped fixture of conftest.py
    data = _big()
    # A decimal point in a metric string breaks the Spark adapter's per-user select
    # ("rbp(persistence=0.5)" too: a bug of distributed/spark.py), so alpha is the call's.
    metrics = [
        "miscalibration",
        "miscalibration(divergence=js)",
        "miscalibration(calibration_weight=log)",
    ]
    kwargs = {
        "item_features": data["item_features"],
        **_CALL,
        "metrics": metrics,
        "calibration_alpha": 0.05,
    }
    one_pass = fm.evaluate(data["recs"], train=data["train"], aggregate=aggregate, **kwargs)
    on_spark = fm.evaluate(
        session.createDataFrame(_arrow(data["recs"])).repartition(3),
        train=session.createDataFrame(_arrow(data["train"])).repartition(2),
        aggregate=aggregate,
        **kwargs,
    )
    got = pl.from_arrow(on_spark.toArrow())
    assert isinstance(got, pl.DataFrame)
    order = ["model"] if aggregate else ["model", "user"]
    assert got.sort(order).equals(one_pass.sort(order), null_equal=True)


def test_a_metric_has_the_same_bits_alone_and_with_others() -> None:
    # The list's q(g0) = u/u for one user: polars divided by a one-row column as a
    # multiplication by its reciprocal (0.9999999999999999) inside the twelve-metric call
    # and exactly (1.0) alone, so KL@9 was 3.2e-16 there and 0.0 alone. Every share is an
    # IEEE division now: KL = 0 (q = p on g0, the only category of the history), always.
    features = pl.DataFrame(
        {"item": ["i3", "i6", "i6", "i6"], "genre": ["g0", "g0", "g1", "g2"], "w": [0.5, 0.5, 0, 0]}
    )
    recs = pl.DataFrame({"user": [0, 0, 0], "item": ["i0", "i1", "i3"], "rank": [1, 2, 4]})
    train = pl.DataFrame({"user": [0] * 4, "item": ["i0", "i1", "i2", "i6"]})
    names = [
        f"miscalibration(calibration_alpha={a},calibration_weight={w},divergence={d})"
        for a in (0.01, 0.3)
        for w in ("uniform", "reciprocal", "log")
        for d in ("kl", "js")
    ]
    call: dict[str, Any] = {
        "k": [1, 3, 9],
        "train": train,
        "item_features": features,
        "features": "genre",
        "feature_weight": "w",
    }
    together = fm.evaluate(recs, metrics=names, **call)
    for name in names:
        alone = fm.evaluate(recs, metrics=[name], **call)
        for column in alone.columns[1:]:
            assert alone[column].to_list() == together[column].to_list(), column
    assert together[f"{names[4]}@9"].to_list() == [0.0]  # alpha 0.01, log weights, KL
