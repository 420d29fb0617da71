"""Every path of the ranking query against the pure-Python references, and bit-identical.

The engine computes ranking metrics from per-user statistics (hits joined from the top
k, ``|R|`` and the ideal DCG from truth alone). Its paths differ by input shape, so each
is checked here against ``Metric.reference`` on random worlds:

- ranks given or derived from ``score=`` (score descending, ties by item ascending,
  ties included on purpose);
- small and large cutoffs, several in one call (lists far longer than 64 items);
- ``by`` groups, with truth that carries the ``by`` column or applies to every group;
- composite user keys (user + session), with integer and string ids (the packed join
  key and the plain join).

Results must also be identical to the last bit across row order, frame kinds and both
polars engines.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import frame_metrics as fm
from frame_metrics.families.ranking import query as ranking_query
from frame_metrics.metrics.registry import REGISTRY as ALL_METRICS
from frame_metrics.metrics.registry import UserCase
from frame_metrics.options import MetricOptions
from tests.conftest import CONSTRUCTORS, to_polars
from tests.test_reference import option_kwargs, options_strategy

METRICS = {
    name: m
    for name, m in ALL_METRICS.items()
    if m.family == "ranking" and m.needs == frozenset({"truth"})
}

Key = tuple[Any, ...]  # (model?, user, session?)


@dataclass
class World:
    """Recommendations (with score and rank) and graded truth, per model and user key."""

    scores: dict[Key, dict[int, float]]  # (model, user, session) -> item -> score
    rels: dict[tuple[Any, ...], dict[int, float]]  # (model?, user, session) -> item -> rel
    truth_has_model: bool
    composite: bool
    string_ids: bool

    def ranks(self) -> dict[Key, dict[int, int]]:
        """Rank from score: score descending, ties by item ascending (the spec's rule)."""
        out = {}
        for key, items in self.scores.items():
            order = sorted(items, key=lambda i: (-items[i], i))
            out[key] = {i: r for r, i in enumerate(order, start=1)}
        return out

    def _id(self, value: int, prefix: str) -> Any:
        return f"{prefix}{value:03d}" if self.string_ids else value

    def recs(self) -> pl.DataFrame:
        ranks = self.ranks()
        rows = [
            {
                "model": key[0],
                "user": self._id(key[1], "u"),
                **({"session": key[2]} if self.composite else {}),
                "item": self._id(i, "i"),
                "score": s,
                "rank": ranks[key][i],
            }
            for key, items in self.scores.items()
            for i, s in items.items()
        ]
        return pl.DataFrame(rows, schema=self._schema(["model", "score", "rank"]))

    def truth(self) -> pl.DataFrame:
        rows = [
            {
                **({"model": key[0]} if self.truth_has_model else {}),
                "user": self._id(key[-2] if self.composite else key[-1], "u"),
                **({"session": key[-1]} if self.composite else {}),
                "item": self._id(i, "i"),
                "relevance": v,
            }
            for key, items in self.rels.items()
            for i, v in items.items()
        ]
        extra = ["model"] if self.truth_has_model else []
        return pl.DataFrame(rows, schema=self._schema([*extra, "relevance"]))

    def _schema(self, extra: list[str]) -> dict[str, pl.DataType]:
        ids: pl.DataType = pl.String() if self.string_ids else pl.Int64()
        full: dict[str, pl.DataType] = {
            "model": pl.String(),
            "user": ids,
            "session": pl.Int32(),
            "item": ids,
            "score": pl.Float64(),
            "rank": pl.Int64(),
            "relevance": pl.Float64(),
        }
        names = ["user", *(["session"] if self.composite else []), "item", *extra]
        return {n: full[n] for n in full if n in names}

    @property
    def user(self) -> list[str]:
        return ["user", "session"] if self.composite else ["user"]

    def truth_of(self, key: Key) -> dict[int, float]:
        """The truth rows that apply to the (model, user, session) key."""
        if self.truth_has_model:
            return self.rels.get(key, {})
        return self.rels.get(key[1:], {})

    def evaluated_keys(self) -> list[Key]:
        """Every (model, user, session) key evaluated: recommended, or truth per model."""
        models = sorted({k[0] for k in self.scores})
        keys = set(self.scores)
        for key in self.rels:
            if self.truth_has_model:
                keys.add(key)
            else:
                keys.update((m, *key) for m in models)
        return sorted(keys)


@st.composite
def worlds(draw: st.DrawFn, max_items: int = 12) -> World:
    composite = draw(st.booleans())
    truth_has_model = draw(st.booleans())
    string_ids = draw(st.booleans())
    models = draw(st.sampled_from([["a"], ["a", "b"], ["a", "b", "c"]]))
    n_users = draw(st.integers(0, 5))
    users = draw(st.lists(st.integers(0, 60), min_size=n_users, max_size=n_users, unique=True))
    sessions = [1, 2] if composite else [None]
    scores: dict[Key, dict[int, float]] = {}
    rels: dict[tuple[Any, ...], dict[int, float]] = {}
    score_values = st.sampled_from([0.1, 0.25, 0.5, 0.5, 0.75, 1.0, 2.0])  # ties on purpose
    relevance = st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.0, 5.0])
    for u in users:
        for s in sessions:
            user_key = (u, s) if composite else (u,)
            for m in models:
                n = draw(st.integers(0, max_items))
                items = draw(
                    st.lists(st.integers(0, 3 * max_items), min_size=n, max_size=n, unique=True)
                )
                if items:
                    key = (m, *user_key)
                    scores[key] = {i: draw(score_values) for i in items}
            truth_owners = [(m, *user_key) for m in models] if truth_has_model else [user_key]
            for owner in truth_owners:
                t_items = draw(st.lists(st.integers(0, 3 * max_items), max_size=8, unique=True))
                if t_items:
                    rels[owner] = {i: draw(relevance) for i in t_items}
    return World(scores, rels, truth_has_model, composite, string_ids)


def expected(world: World, ks: list[int], o: MetricOptions) -> dict[Key, dict[str, float]]:
    ranks = world.ranks()
    out: dict[Key, dict[str, float]] = {}
    for key in world.evaluated_keys():
        case = UserCase(ranks.get(key, {}), world.truth_of(key))
        if not case.relevant(o):
            if o.empty == "zero":
                out[key] = {e.column(k): 0.0 for e in METRICS.values() for k in ks}
            continue
        out[key] = {e.column(k): e.reference(case, k, o) for e in METRICS.values() for k in ks}
    return out


def _key_of(world: World, row: dict[str, Any]) -> Key:
    def back(v: Any) -> Any:
        return int(v[1:]) if isinstance(v, str) else v

    session = (row["session"],) if world.composite else ()
    return (row["model"], back(row["user"]), *session)


def assert_matches(world: World, got: pl.DataFrame, want: dict[Key, dict[str, float]]) -> None:
    keys = [_key_of(world, row) for row in got.iter_rows(named=True)]
    assert sorted(keys) == sorted(want)
    for key, row in zip(keys, got.iter_rows(named=True), strict=True):
        for name, value in want[key].items():
            assert math.isclose(row[name], value, rel_tol=1e-12, abs_tol=1e-12), (
                key,
                name,
                row[name],
                value,
            )


KS_CHOICES = [[1, 3, 10], [2, 5], [1, 5, 10, 20, 50, 100], [7, 70]]


@settings(max_examples=150, deadline=None)
@given(
    world=worlds(),
    options=options_strategy,
    ks=st.sampled_from(KS_CHOICES),
    by_score=st.booleans(),
    gain_levels=st.booleans(),
)
def test_every_path_matches_reference(
    world: World, options: MetricOptions, ks: list[int], by_score: bool, gain_levels: bool
) -> None:
    recs = world.recs()
    recs = recs.drop("rank") if by_score else recs.drop("score")
    with pytest.MonkeyPatch.context() as patch:
        # The ideal DCG from counts per distinct gain, or from each user's sorted gains.
        patch.setattr(ranking_query, "MAX_GAIN_LEVELS", 16 if gain_levels else 0)
        got = fm.evaluate(
            recs,
            world.truth(),
            metrics=list(METRICS),
            k=ks,
            user=world.user,
            by="model",
            score="score" if by_score else None,
            **option_kwargs(options),
        )
    assert_matches(world, got, expected(world, ks, options))


@settings(max_examples=25, deadline=None)
@given(world=worlds(max_items=150), ks=st.sampled_from([[100], [1, 64, 65, 128]]))
def test_long_lists_match_reference(world: World, ks: list[int]) -> None:
    """Lists longer than 64 and 128 items (no bit masks, no per-rank expressions)."""
    options = MetricOptions()
    got = fm.evaluate(
        world.recs().drop("score"),
        world.truth(),
        metrics=list(METRICS),
        k=ks,
        user=world.user,
        by="model",
    )
    assert_matches(world, got, expected(world, ks, options))


def _run(
    world: World, make: Any, seed: int | None, by_score: bool, aggregate: bool
) -> pl.DataFrame:
    recs, truth = world.recs(), world.truth()
    if seed is not None:
        recs = recs.sample(fraction=1.0, shuffle=True, seed=seed)
        truth = truth.sample(fraction=1.0, shuffle=True, seed=seed + 1)
    recs = recs.drop("rank") if by_score else recs.drop("score")
    out = fm.evaluate(
        make(recs),
        make(truth),
        metrics=list(METRICS),
        k=[1, 3, 10, 40],
        user=world.user,
        by="model",
        score="score" if by_score else None,
        aggregate=aggregate,
    )
    return to_polars(out)


@settings(max_examples=40, deadline=None)
@given(world=worlds(max_items=40), seed=st.integers(0, 2**16), by_score=st.booleans())
def test_bit_identical_across_row_order_and_frame_kinds(
    world: World, seed: int, by_score: bool
) -> None:
    for aggregate in (False, True):
        base = _run(world, CONSTRUCTORS["polars"], None, by_score, aggregate)
        for make in CONSTRUCTORS.values():
            assert _run(world, make, seed, by_score, aggregate).equals(base)


@pytest.mark.parametrize("engine", ["in-memory", "streaming"])
@pytest.mark.parametrize("by_score", [False, True])
@pytest.mark.parametrize("grades", [5, 0], ids=["5-grades", "continuous"])
def test_bit_identical_across_engines(
    engine: str, by_score: bool, grades: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Many users with long graded lists: sums where the order of addition shows.

    Five relevance grades take the ideal DCG from counts per gain; continuous relevance
    (hundreds of distinct gains) from each user's sorted gains.
    """
    rnd = random.Random(5)
    scores: dict[Key, dict[int, float]] = {}
    rels: dict[tuple[Any, ...], dict[int, float]] = {}
    for u in range(300):
        for m in ("a", "b"):
            items = rnd.sample(range(400), rnd.randint(0, 120))
            scores[(m, u)] = {i: rnd.random() for i in items}
        t_items = rnd.sample(range(400), rnd.randint(0, 60))
        rels[(u,)] = {
            i: rnd.choice([0.0, 0.3, 1.7, 2.9, 4.1]) if grades else rnd.random() for i in t_items
        }
    world = World(scores, rels, truth_has_model=False, composite=False, string_ids=False)
    base = _run(world, CONSTRUCTORS["polars"], None, by_score, aggregate=False)
    monkeypatch.setattr(fm.engine, "DEFAULT_ENGINE", engine)
    for seed in (1, 2):
        for aggregate in (False, True):
            got = _run(world, CONSTRUCTORS["polars-lazy"], seed, by_score, aggregate)
            want = (
                base if not aggregate else _run(world, CONSTRUCTORS["polars"], None, by_score, True)
            )
            assert got.equals(want)
    # And against the references.
    assert_matches(world, base, expected(world, [1, 3, 10, 40], MetricOptions()))


def test_lazy_plan_is_readable() -> None:
    """The lazy plan stays short however many cutoffs are asked for (no per-rank terms)."""
    world = World({("a", 1): {1: 0.5, 2: 0.25}}, {(1,): {2: 1.0}}, False, False, False)
    recs = world.recs().drop("score").lazy()
    plan = fm.evaluate(recs, world.truth(), k=[5, 10, 20, 50, 100], by="model").explain()
    few = fm.evaluate(recs, world.truth(), k=[5], by="model").explain()
    assert len(plan.splitlines()) < 200
    # Four more cutoffs add a few expressions, not a few per rank.
    assert len(plan) < 3 * len(few)


@pytest.mark.parametrize("truth_users", [[2**63 + 5, 1], [1]], ids=["both", "small-only"])
def test_join_keys_beyond_int64_and_outside_truth_ranges(truth_users: list[int]) -> None:
    """Unsigned ids beyond Int64 take the plain join; ids outside truth's range match none."""
    big = 2**63 + 5
    recs = pl.DataFrame(
        {"user": [big, big, 1], "item": [1, 2, 3], "rank": [1, 2, 1]},
        schema={"user": pl.UInt64, "item": pl.UInt64, "rank": pl.Int64},
    )
    items = {big: 2, 1: 3}
    truth = pl.DataFrame(
        {"user": truth_users, "item": [items[u] for u in truth_users], "relevance": 1.0},
        schema={"user": pl.UInt64, "item": pl.UInt64, "relevance": pl.Float64},
    )
    got = fm.evaluate(recs, truth, k=2, metrics=["precision", "recall", "ndcg"])
    want = {1: (1 / 2, 1.0, 1.0), big: (1 / 2, 1.0, 1 / math.log2(3))}
    assert got["user"].to_list() == sorted(truth_users)
    for row in got.iter_rows(named=True):
        assert (row["precision@2"], row["recall@2"]) == want[row["user"]][:2]
        assert math.isclose(row["ndcg@2"], want[row["user"]][2], rel_tol=1e-15)
