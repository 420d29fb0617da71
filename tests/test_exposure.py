"""Exposure and provider fairness (spec 9.2): exposure_gini, exposure_parity, list_parity.

Values are checked against arithmetic written out here, against a pure-Python
reference written from the spec (under hypothesis: items in several groups, ungrouped
items, short lists, graded relevance, every target and browsing model, many k), and
for the same bits across row order, frame kinds, buckets and Dask.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from typing import Any, cast

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import frame_metrics as fm
from frame_metrics.errors import InvalidOptionError, InvalidValueError, MissingInputError

from .conftest import Constructor, to_polars

RECS = pl.DataFrame(
    {
        "user": [1, 1, 1, 2, 2],
        "item": ["a", "b", "c", "a", "d"],
        "rank": [1, 2, 3, 1, 2],
    }
)
TRUTH = pl.DataFrame({"user": [1, 2], "item": ["b", "d"], "relevance": [1, 2]})
# d is in two groups; e (in no list) in none.
GROUPS = pl.DataFrame({"item": ["a", "b", "c", "d", "d"], "group": ["x", "x", "y", "y", "z"]})

L2, L3 = 1 / math.log2(3), 1 / math.log2(4)  # e(2), e(3) under the log model: e(1) = 1


def _jsd(s: Sequence[float], t: Sequence[float]) -> float:
    """Jensen-Shannon divergence in bits, written out term by term."""
    out = 0.0
    for a, b in zip(s, t, strict=True):
        m = (a + b) / 2
        out += (0.5 * a * math.log2(a / m) if a else 0.0) + (
            0.5 * b * math.log2(b / m) if b else 0.0
        )
    return out


def _shares(values: Sequence[float]) -> list[float]:
    return [v / sum(values) for v in values]


def test_worked_example_by_hand() -> None:
    # Group exposure (log model, k=3): x = e(1) [1:a] + e(2) [1:b] + e(1) [2:a];
    # y = e(3) [1:c] + e(2) [2:d]; z = e(2) [2:d] (d counts fully in y and in z).
    s = _shares([1 + L2 + 1, L3 + L2, L2])
    # Catalog: the items seen (a, b, c, d): x holds 2, y 2, z 1.
    catalog = _shares([2, 2, 1])
    # Merit: relevant truth rows b (x) and d (y and z).
    merit = _shares([1, 1, 1])
    out = fm.evaluate(
        RECS,
        TRUTH,
        metrics=[
            "exposure_parity@3",
            "exposure_parity(parity_target=merit)@3",
            "exposure_parity(parity_target=uniform)@3",
            "exposure_gini@3",
        ],
        item_groups=GROUPS,
        aggregate=True,
    ).row(0, named=True)
    assert out["exposure_parity@3"] == pytest.approx(1 - math.sqrt(_jsd(s, catalog)), abs=1e-15)
    merit_value = 1 - math.sqrt(_jsd(s, merit))
    assert out["exposure_parity(parity_target=merit)@3"] == pytest.approx(merit_value, abs=1e-15)
    assert out["exposure_parity(parity_target=uniform)@3"] == pytest.approx(merit_value, abs=1e-15)
    # Gini over the 4 catalog items: E = a 2, b e(2), c e(3), d e(2); sorted ascending
    # c (0.5) < b = d (0.63) < a (2), positions 1..4: Σ (2j - n - 1) E_(j) / (n Σ E).
    e = sorted([2.0, L2, L3, L2])
    gini = sum((2 * j - 5) * x for j, x in enumerate(e, start=1)) / (4 * sum(e))
    assert out["exposure_gini@3"] == pytest.approx(gini, abs=1e-15)


def test_list_parity_by_hand() -> None:
    # User 1: x = e(1) + e(2), y = e(3), z = 0; user 2: x = e(1), y = z = e(2).
    target = _shares([2, 2, 1])
    one = 1 - math.sqrt(_jsd(_shares([1 + L2, L3, 0.0]), target))
    two = 1 - math.sqrt(_jsd(_shares([1.0, L2, L2]), target))
    out = fm.evaluate(RECS, TRUTH, metrics="list_parity@3", item_groups=GROUPS)
    assert out.rows() == [(1, pytest.approx(one, abs=1e-15)), (2, pytest.approx(two, abs=1e-15))]
    mean = fm.evaluate(RECS, TRUTH, metrics="list_parity@3", item_groups=GROUPS, aggregate=True)
    assert mean.row(0) == (2, pytest.approx((one + two) / 2, abs=1e-15))


def test_browsing_models_by_hand() -> None:
    # rbp with p = 0.5: e(r) = 0.5^(r-1); uniform: 1. Two groups, one list [a, c].
    recs = pl.DataFrame({"user": [1, 1], "item": ["a", "c"], "rank": [1, 2]})
    groups = pl.DataFrame({"item": ["a", "c"], "group": ["x", "y"]})
    call: dict[str, Any] = {"item_groups": groups, "aggregate": True, "parity_target": "uniform"}
    rbp = fm.evaluate(recs, metrics="exposure_parity@2", exposure="rbp", persistence=0.5, **call)
    assert rbp["exposure_parity@2"][0] == pytest.approx(
        1 - math.sqrt(_jsd([2 / 3, 1 / 3], [0.5, 0.5])), abs=1e-15
    )
    uniform = fm.evaluate(recs, metrics="exposure_parity@2", exposure="uniform", **call)
    assert uniform["exposure_parity@2"][0] == 1.0
    # rbp's default persistence is 0.8: e = 1, 0.8.
    default = fm.evaluate(recs, metrics="exposure_parity@2", exposure="rbp", **call)
    assert default["exposure_parity@2"][0] == pytest.approx(
        1 - math.sqrt(_jsd([1 / 1.8, 0.8 / 1.8], [0.5, 0.5])), abs=1e-15
    )


def test_explicit_target_and_disjoint_support() -> None:
    recs = pl.DataFrame({"user": [1], "item": ["a"], "rank": [1]})
    groups = pl.DataFrame({"item": ["a", "c"], "group": ["x", "y"]})
    out = fm.evaluate(
        recs,
        metrics="exposure_parity@1",
        item_groups=groups,
        aggregate=True,
        parity_target={"x": 0, "y": 3},
    )
    # All exposure on x, all target on y: distance 1, parity 0.
    assert out["exposure_parity@1"][0] == 0.0


def test_uniform_exposure_gini_is_gini_to_the_bit() -> None:
    import random

    rng = random.Random(3)
    rows = [(u, i, r) for u in range(60) for r, i in enumerate(rng.sample(range(40), 7), 1)]
    recs = pl.DataFrame(rows, schema=["user", "item", "rank"], orient="row")
    ks = [1, 3, 7]
    out = fm.evaluate(
        recs, metrics=["gini", "exposure_gini"], k=ks, exposure="uniform", aggregate=True
    )
    for k in ks:
        assert out[f"exposure_gini@{k}"][0] == out[f"gini@{k}"][0], k


def test_default_groups_are_aplts_head_and_tail() -> None:
    # train: a has 3 users, b 1, c 1: 5 pairs; the head holding 20% is {a} (the items
    # more popular than a hold 0 < 20%, those more popular than b hold 3/5 >= 20%).
    train = pl.DataFrame({"user": [1, 2, 3, 4, 5], "item": ["a", "a", "a", "b", "c"]})
    recs = pl.DataFrame({"user": [9, 9], "item": ["a", "z"], "rank": [1, 2]})  # z: unseen, tail
    out = fm.evaluate(
        recs,
        metrics=["exposure_parity@2", "aplt@2"],
        train=train,
        aggregate=True,
        parity_target="uniform",
    )
    assert out["aplt@2"][0] == 0.5
    s = _shares([1.0, L2])  # head, tail
    assert out["exposure_parity@2"][0] == pytest.approx(
        1 - math.sqrt(_jsd(s, [0.5, 0.5])), abs=1e-15
    )
    # The catalog target: items seen a, b, c, z: head {a}, tail {b, c, z}.
    catalog = fm.evaluate(recs, metrics="exposure_parity@2", train=train, aggregate=True)
    assert catalog["exposure_parity@2"][0] == pytest.approx(
        1 - math.sqrt(_jsd(s, [0.25, 0.75])), abs=1e-15
    )


# -- the pure-Python reference ----------------------------------------------------------


def attention(exposure: str, persistence: float | None, r: int) -> float:
    """e(r) as spec 9 writes it."""
    if exposure == "log":
        return 1 / math.log2(r + 1)
    if exposure == "rbp":
        return (0.8 if persistence is None else persistence) ** (r - 1)
    return 1.0


def ref_values(
    lists: Mapping[int, Sequence[Hashable]],
    truth: Sequence[tuple[int, Hashable, float]],
    groups: Mapping[Hashable, set[str]],
    universe: Sequence[str],
    k: int,
    exposure: str,
    persistence: float | None,
    target: str | Mapping[str, float],
    threshold: float | None,
) -> tuple[float | None, float | None, float | None]:
    """(exposure_gini, exposure_parity, mean list_parity) from the spec's words."""
    catalog = {i for items in lists.values() for i in items} | {i for _, i, _ in truth}
    item_exposure: dict[Hashable, float] = dict.fromkeys(catalog, 0.0)
    for items in lists.values():
        for r, i in enumerate(items[:k], start=1):
            item_exposure[i] += attention(exposure, persistence, r)
    e = sorted(item_exposure.values())
    n = len(e)
    gini = (
        sum((2 * j - n - 1) * x for j, x in enumerate(e, start=1)) / (n * sum(e))
        if sum(e) > 0
        else None
    )

    def shares(weights: Mapping[str, float]) -> list[float] | None:
        total = sum(weights[g] for g in universe)
        return None if not total > 0 else [weights[g] / total for g in universe]

    if target == "uniform":
        t = shares(dict.fromkeys(universe, 1.0))
    elif target == "catalog":
        t = shares({g: sum(g in groups.get(i, ()) for i in catalog) for g in universe})
    elif target == "merit":
        relevant = [
            i for _, i, rel in truth if (rel > 0 if threshold is None else rel >= threshold)
        ]
        t = shares({g: sum(g in groups.get(i, ()) for i in relevant) for g in universe})
    else:
        assert not isinstance(target, str)
        t = shares(target)

    def group_exposure(items: Sequence[Hashable]) -> dict[str, float]:
        out = dict.fromkeys(universe, 0.0)
        for r, i in enumerate(items[:k], start=1):
            for g in groups.get(i, ()):
                out[g] += attention(exposure, persistence, r)
        return out

    corpus = dict.fromkeys(universe, 0.0)
    per_user: list[float] = []
    for items in lists.values():
        mine = group_exposure(items)
        for g in universe:
            corpus[g] += mine[g]
        s_u = shares(mine)
        if s_u is not None and t is not None:
            per_user.append(1 - math.sqrt(max(_jsd(s_u, t), 0.0)))
    s = shares(corpus)
    parity = None if s is None or t is None else 1 - math.sqrt(max(_jsd(s, t), 0.0))
    return gini, parity, (sum(per_user) / len(per_user) if per_user else None)


@st.composite
def worlds(draw: st.DrawFn) -> dict[str, Any]:
    items = list("abcdefgh")
    n_users = draw(st.integers(1, 6))
    lists = {
        u: draw(st.lists(st.sampled_from(items), min_size=1, max_size=6, unique=True))
        for u in range(n_users)
    }
    truth = [
        (u, i, float(draw(st.integers(0, 3))))
        for u in range(n_users + 1)
        for i in draw(st.lists(st.sampled_from(items), max_size=3, unique=True))
    ]
    universe = ["g1", "g2", "g3"]
    # An item in no group, one or several.
    groups = {
        i: set(draw(st.lists(st.sampled_from(universe), max_size=3, unique=True))) for i in items
    }
    return {"lists": lists, "truth": truth, "groups": groups, "universe": universe}


def _frames(world: dict[str, Any]) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    recs = pl.DataFrame(
        [(u, i, r) for u, items in world["lists"].items() for r, i in enumerate(items, 1)],
        schema={"user": pl.Int64, "item": pl.String, "rank": pl.Int64},
        orient="row",
    )
    truth = pl.DataFrame(
        world["truth"],
        schema={"user": pl.Int64, "item": pl.String, "relevance": pl.Float64},
        orient="row",
    )
    # Every group has at least one row, so that the groups are the three.
    rows = [(i, g) for i, gs in world["groups"].items() for g in sorted(gs)]
    rows += [("zz", g) for g in world["universe"]]
    groups = pl.DataFrame(rows, schema={"item": pl.String, "group": pl.String}, orient="row")
    return recs, truth, groups


TARGETS: list[str | dict[str, float]] = ["catalog", "merit", "uniform", {"g1": 1, "g2": 2, "g3": 0}]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    world=worlds(),
    exposure=st.sampled_from(["log", "rbp", "uniform"]),
    persistence=st.sampled_from([None, 0.5]),
    target=st.sampled_from(TARGETS),
    threshold=st.sampled_from([None, 2.0]),
)
def test_matches_the_reference(
    world: dict[str, Any],
    exposure: str,
    persistence: float | None,
    target: str | dict[str, float],
    threshold: float | None,
) -> None:
    recs, truth, groups = _frames(world)
    # "zz" is a catalog item of every group: in the reference's catalog and groups too.
    world_groups = dict(world["groups"]) | {"zz": set(world["universe"])}
    ks = [1, 3, 5]
    out = fm.evaluate(
        recs,
        truth,
        metrics=["exposure_gini", "exposure_parity", "list_parity"],
        k=ks,
        item_groups=groups,
        catalog=pl.concat(
            [recs.select("item"), truth.select("item"), pl.DataFrame({"item": ["zz"]})]
        ),
        persistence=persistence,
        threshold=threshold,
        exposure=cast("Any", exposure),
        parity_target=cast("Any", target),
        aggregate=True,
    ).row(0, named=True)
    truth_rows = [*world["truth"], (-1, "zz", 0.0)]  # zz in the catalog, not relevant
    for k in ks:
        gini, parity, listed = ref_values(
            world["lists"],
            truth_rows,
            world_groups,
            world["universe"],
            k,
            exposure,
            persistence,
            target,
            threshold,
        )
        for name, want in (
            ("exposure_gini", gini),
            ("exposure_parity", parity),
            ("list_parity", listed),
        ):
            got = out[f"{name}@{k}"]
            if want is None:
                assert got is None, (name, k, got)
            else:
                # The distance is a square root: a divergence off by a rounding error
                # of 1e-17 moves it by 3e-9. The divergence itself is held to 1e-12.
                assert got == pytest.approx(want, abs=1e-7), (name, k, got, want)
                if name != "exposure_gini":
                    assert (1 - got) ** 2 == pytest.approx((1 - want) ** 2, abs=1e-12)


# -- the same bits everywhere ------------------------------------------------------------


def _big() -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    import random

    rng = random.Random(7)
    rows = [
        (m, u, i, r)
        for m in ("a", "b")
        for u in range(80)
        for r, i in enumerate(rng.sample(range(60), rng.randint(1, 9)), 1)
    ]
    recs = pl.DataFrame(rows, schema=["model", "user", "item", "rank"], orient="row")
    truth = pl.DataFrame(
        [(u, rng.randrange(70), rng.randint(0, 3)) for u in range(90) for _ in range(3)],
        schema=["user", "item", "relevance"],
        orient="row",
    ).unique(["user", "item"])
    groups = pl.DataFrame(
        [(i, f"p{i % 5}") for i in range(70)] + [(i, "extra") for i in range(0, 70, 7)],
        schema=["item", "group"],
        orient="row",
    )
    return recs, truth, groups


METRICS = [
    "exposure_gini",
    "exposure_parity",
    "list_parity",
    "exposure_parity(parity_target=merit)",
    "list_parity(exposure=rbp)",
]


def test_same_bits_across_row_order_frame_kinds_and_buckets(constructor: Constructor) -> None:
    recs, truth, groups = _big()
    call: dict[str, Any] = {
        "metrics": METRICS,
        "k": [3, 10],
        "by": "model",
        "item_groups": groups,
        "aggregate": True,
    }
    one_pass = fm.evaluate(recs, truth, **call)
    shuffled = recs.sample(fraction=1.0, shuffle=True, seed=1)
    got = to_polars(fm.evaluate(constructor(shuffled), constructor(truth), **call))
    assert got.equals(one_pass)
    buckets = fm.evaluate(shuffled.lazy(), truth, buckets=3, **call).collect()
    assert buckets.equals(one_pass)
    per_user = fm.evaluate(recs, truth, **(call | {"aggregate": False, "metrics": ["list_parity"]}))
    per_user_buckets = fm.evaluate(
        shuffled.lazy(),
        truth,
        buckets=3,
        **(call | {"aggregate": False, "metrics": ["list_parity"]}),
    ).collect()
    assert per_user_buckets.equals(per_user)


def test_same_bits_with_default_groups_in_buckets() -> None:
    recs, truth, _ = _big()
    train = truth.select("user", "item")
    call: dict[str, Any] = {
        "metrics": METRICS,
        "k": [3, 10],
        "by": "model",
        "train": train,
        "aggregate": True,
    }
    one_pass = fm.evaluate(recs, truth, **call)
    buckets = fm.evaluate(recs.lazy(), truth, buckets=3, **call).collect()
    assert buckets.equals(one_pass)


def test_same_bits_on_dask() -> None:
    dd = pytest.importorskip("dask.dataframe")
    recs, truth, groups = _big()
    call: dict[str, Any] = {
        "metrics": METRICS,
        "k": [3, 10],
        "by": "model",
        "item_groups": groups,
        "aggregate": True,
    }
    one_pass = fm.evaluate(recs, truth, **call)
    on_dask = fm.evaluate(
        dd.from_pandas(recs.to_pandas(), npartitions=3),
        dd.from_pandas(truth.to_pandas(), npartitions=2),
        **call,
    ).compute()
    assert pl.from_pandas(on_dask).sort("model").equals(one_pass)


def test_same_bits_with_item_groups_per_model_in_buckets_and_on_dask() -> None:
    # Each model's own groups of the same items (spec 9, clarified 2026-11-27): the
    # targets are read per model, in every partition the same.
    dd = pytest.importorskip("dask.dataframe")
    recs, truth, _ = _big()
    groups = pl.DataFrame(
        [(m, i, f"p{i * step % 5}") for m, step in (("a", 1), ("b", 3)) for i in range(70)],
        schema=["model", "item", "group"],
        orient="row",
    )
    call: dict[str, Any] = {
        "metrics": METRICS,
        "k": [3, 10],
        "by": "model",
        "item_groups": groups,
        "aggregate": True,
    }
    one_pass = fm.evaluate(recs, truth, **call)
    buckets = fm.evaluate(recs.lazy(), truth, buckets=3, **call).collect()
    assert buckets.equals(one_pass)
    on_dask = fm.evaluate(
        dd.from_pandas(recs.to_pandas(), npartitions=3),
        dd.from_pandas(truth.to_pandas(), npartitions=2),
        **call,
    ).compute()
    assert pl.from_pandas(on_dask).sort("model").equals(one_pass)


# -- bad input ---------------------------------------------------------------------------


def test_groups_are_needed() -> None:
    with pytest.raises(MissingInputError) as info:
        fm.evaluate(RECS, TRUTH, metrics="exposure_parity@3", aggregate=True)
    assert str(info.value) == (
        "exposure_parity@3: expected item_groups= (one row per (item, group) with the item "
        "column and the group column), got None; or pass train= for aplt's head and tail groups"
    )


def test_corpus_metrics_need_aggregate() -> None:
    with pytest.raises(InvalidOptionError) as info:
        fm.evaluate(RECS, TRUTH, metrics="exposure_gini@3")
    assert str(info.value) == (
        "aggregate: expected True for corpus metrics (one value per by group, not per user), "
        "got False with exposure_gini@3"
    )


def test_a_target_must_name_every_group_and_only_groups() -> None:
    call: dict[str, Any] = {
        "metrics": "exposure_parity@3",
        "item_groups": GROUPS,
        "aggregate": True,
    }
    with pytest.raises(InvalidValueError) as info:
        fm.evaluate(RECS, TRUTH, parity_target={"x": 1, "y": 1}, **call)
    # The example names the caller's group column, not an internal one.
    assert str(info.value) == (
        "parity_target: expected every group of item_groups to have a share in "
        "parity_target, found 1 missing, e.g. group='z'; give each group a share (0 for none)"
    )
    with pytest.raises(InvalidValueError) as info:
        fm.evaluate(RECS, TRUTH, parity_target={"x": 1, "y": 1, "z": 1, "w": 1}, **call)
    assert str(info.value) == (
        "parity_target: expected every group of parity_target to be a group of item_groups, "
        "found 1 missing, e.g. group='w'; name only the groups of item_groups' group column"
    )
    provider = call | {"item_groups": GROUPS.rename({"group": "provider"}), "group": "provider"}
    with pytest.raises(InvalidValueError) as info:
        fm.evaluate(RECS, TRUTH, parity_target={"x": 1, "y": 1}, **provider)
    assert "found 1 missing, e.g. provider='z'; " in str(info.value)


def test_bad_target_values() -> None:
    with pytest.raises(InvalidOptionError) as info:
        fm.evaluate(
            RECS,
            TRUTH,
            metrics="exposure_parity@3",
            item_groups=GROUPS,
            aggregate=True,
            parity_target={"x": 0},
        )
    assert str(info.value) == (
        "parity_target: expected a {group: share} table of finite numbers >= 0 with a "
        "positive sum, got shares summing to 0 in {'x': 0}"
    )


def test_the_group_column_is_none_of_the_by_columns(constructor: Constructor) -> None:
    # item_groups' column named like a by column is read as that by column: it cannot
    # also hold the groups.
    recs = RECS.with_columns(model=pl.lit("m"))
    groups = GROUPS.rename({"group": "model"})
    with pytest.raises(InvalidOptionError) as info:
        fm.evaluate(
            constructor(recs),
            constructor(TRUTH),
            metrics="exposure_parity@3",
            by="model",
            item_groups=constructor(groups),
            group="model",
            aggregate=True,
        )
    assert str(info.value) == (
        "by and group: expected different columns of item_groups, got 'model' for both"
    )
