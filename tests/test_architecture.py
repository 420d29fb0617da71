"""The structure's promises: a frame-free Spec, families behind one interface.

The contributor test of the architecture issue, as code: a family defined here (a
module's worth: one ``Family`` subclass and one registry entry) computes its metric on
every frame kind, in one pass, in buckets and on Dask, with nothing else changed.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import polars as pl
import pytest

import frame_metrics as fm
from frame_metrics.errors import InvalidOptionError
from frame_metrics.families import FAMILIES
from frame_metrics.family import GROUP_USERS, Context, Family
from frame_metrics.keywords import EXTRA_INPUTS
from frame_metrics.metrics.registry import REGISTRY, Metric
from frame_metrics.planner import reads
from frame_metrics.prepare import RANK
from frame_metrics.spec import build_spec

from .conftest import Constructor, to_polars


def test_every_registry_family_has_its_module() -> None:
    assert {m.family for m in REGISTRY.values()} <= set(FAMILIES)


def test_families_run_in_their_declared_order() -> None:
    orders = [f.order for f in FAMILIES.values()]
    assert orders == sorted(orders)
    assert list(FAMILIES)[:4] == ["ranking", "diversity", "rating", "corpus"]


def test_spec_is_frozen_and_frame_free() -> None:
    spec = build_spec({"truth", "train"}, metrics=["ndcg@5", "novelty"], k=[3, 20], by="model")
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.validate = False  # type: ignore[misc]
    # Everything a runner asks about the call, without a frame.
    assert spec.metric_columns == ["ndcg@5", "novelty@3", "novelty@20"]
    assert (spec.cutoffs, spec.max_k, spec.depth) == ((3, 5, 20), 20, 20)
    assert spec.families == {"ranking"}
    assert spec.needs == {"truth", "popularity"}
    assert spec.columns.keys == ["model", "user"]
    got = reads(spec)
    assert got["recs"] == {"model", "user", "item", "rank"}
    assert got["train"] == {"model", "user", "item"}
    assert got["catalog"] == {"model", "item"}


def test_spec_raises_what_evaluate_raises() -> None:
    """Frame-free checks run in build_spec: evaluate's first error, before any row is read."""
    recs = pl.DataFrame({"user": [1], "item": [1], "rank": [1]})
    with pytest.raises(InvalidOptionError) as direct:
        build_spec({"truth"}, metrics="novelty@5")
    with pytest.raises(InvalidOptionError) as called:
        fm.evaluate(recs, recs.with_columns(relevance=pl.lit(1)), metrics="novelty@5")
    assert str(direct.value) == str(called.value)
    assert str(direct.value).startswith("novelty: expected train= (")


def test_every_extra_input_is_a_keyword_of_evaluate() -> None:
    import inspect

    keywords = inspect.signature(fm.evaluate).parameters
    assert all(e.name in keywords for e in EXTRA_INPUTS)


# -- a family added the way a contributor adds one ------------------------------------

_TOY = "toy_length"


def _toy_build(ctx: Any, k: int) -> pl.Expr:
    # ctx is this family's own context: it reads the listed rows' ranks.
    return (pl.col(RANK) <= k).sum().cast(pl.Float64)


def _toy_reference(user: Any, k: int, options: Any) -> float:
    return float(sum(1 for r in user.ranks.values() if r <= k))


class _ListLength(Family):
    """How many items each user's list holds within k (a toy per-user metric)."""

    name: ClassVar[str] = _TOY
    order: ClassVar[int] = 99

    def per_user(self, ctx: Context) -> pl.LazyFrame | None:
        """One count per user and k, from the prepared top rows."""
        requests = ctx.requests(self.name)
        if not requests:
            return None
        assert ctx.prepared is not None
        top = ctx.prepared.top
        return top.group_by(ctx.keys).agg(q.value(None) for q in requests)


def _add_family(monkeypatch: pytest.MonkeyPatch, family: Family, metric: Metric) -> str:
    """A family and its metric's registry entry, for one test (as a new module adds them)."""
    monkeypatch.setitem(REGISTRY, metric.name, metric)
    monkeypatch.setitem(FAMILIES, family.name, family)
    return metric.name


@pytest.fixture
def toy_family(monkeypatch: pytest.MonkeyPatch) -> str:
    """The per-user toy family."""
    metric = Metric(
        name="list_length",
        build=_toy_build,
        reference=_toy_reference,
        formula="|L_u ∩ top k|",
        bounds=(0.0, None),
        needs=frozenset(),
        family=_TOY,
        population="listed",
    )
    return _add_family(monkeypatch, _ListLength(), metric)


RECS = pl.DataFrame(
    {
        "model": ["a"] * 5 + ["b"] * 3,
        "user": [1, 1, 1, 2, 2, 1, 3, 3],
        "item": [10, 11, 12, 10, 13, 10, 11, 12],
        "rank": [1, 2, 3, 1, 4, 1, 1, 2],
    }
)
TRUTH = pl.DataFrame({"user": [1, 2, 3], "item": [11, 13, 12], "relevance": [1, 1, 1]})


def test_a_new_family_needs_no_other_change(toy_family: str, constructor: Constructor) -> None:
    out = to_polars(
        fm.evaluate(
            constructor(RECS),
            constructor(TRUTH),
            metrics=[toy_family, "recall"],
            k=[2, 3],
            by="model",
        )
    ).sort("model", "user")
    # Rows within k per (model, user), counted from RECS above by hand; truth applies to
    # both models, so a user with truth but no list under a model has recall 0 there
    # and no list length (its population is the users with a list).
    assert out.rows() == [
        ("a", 1, 2.0, 3.0, 1.0, 1.0),
        ("a", 2, 1.0, 1.0, 0.0, 0.0),
        ("a", 3, None, None, 0.0, 0.0),
        ("b", 1, 1.0, 1.0, 0.0, 0.0),
        ("b", 2, None, None, 0.0, 0.0),
        ("b", 3, 2.0, 2.0, 1.0, 1.0),
    ]
    assert out.columns == [
        "model",
        "user",
        "list_length@2",
        "list_length@3",
        "recall@2",
        "recall@3",
    ]


@pytest.mark.parametrize("aggregate", [False, True])
def test_a_new_family_runs_in_buckets_and_on_dask(toy_family: str, aggregate: bool) -> None:
    dd = pytest.importorskip("dask.dataframe")
    call: dict[str, Any] = {"metrics": [toy_family], "k": 3, "by": "model", "aggregate": aggregate}
    one_pass = fm.evaluate(RECS, TRUTH, **call)
    buckets = fm.evaluate(RECS.lazy(), TRUTH, buckets=2, **call).collect()
    on_dask = fm.evaluate(
        dd.from_pandas(RECS.to_pandas(), npartitions=2),
        dd.from_pandas(TRUTH.to_pandas(), npartitions=1),
        **call,
    ).compute()
    assert buckets.equals(one_pass)
    assert (
        pl.from_pandas(on_dask)
        .sort("model", *([] if aggregate else ["user"]))
        .equals(one_pass.sort("model", *([] if aggregate else ["user"])), null_equal=True)
    )
    if aggregate:
        # Means over each model's users: a: (3 + 1) / 2; b: (1 + 2) / 2.
        assert one_pass.rows() == [("a", 2, 2.0), ("b", 2, 1.5)]


# -- a second family with one value per group, beside corpus ---------------------------

_GROUP_TOY = "toy_items"


def _items_column(k: int) -> str:
    return f"_toy_users@{k}"


class _ListedItems(Family):
    """Distinct items listed within k per group: partials that add up over partitions."""

    name: ClassVar[str] = _GROUP_TOY
    order: ClassVar[int] = 98

    def summed(self, spec: Any) -> list[str]:
        """No per-user value."""
        return []

    def finished(self, spec: Any) -> list[pl.Expr]:
        """No per-user value."""
        return []

    def partials(self, ctx: Context) -> pl.LazyFrame | None:
        """Per (by, item): the users listing it within each k (sums over users)."""
        requests = ctx.requests(self.name)
        if not requests:
            return None
        assert ctx.prepared is not None
        by, item = list(ctx.spec.columns.by), ctx.spec.columns.item
        ks = sorted({q.k for q in requests})
        return ctx.prepared.top.group_by([*by, item]).agg(
            (pl.col(RANK) <= k).sum().cast(pl.Int64).alias(_items_column(k)) for k in ks
        )

    def combine(self, spec: Any, stacked: pl.DataFrame) -> pl.DataFrame:
        """Partitions' counts added up per (by, item)."""
        keys = [*spec.columns.by, spec.columns.item]
        return stacked.group_by(keys).agg(pl.all().sum())

    def finish_groups(self, ctx: Context, partials: pl.LazyFrame) -> pl.LazyFrame | None:
        """Per group: the items some user lists within k."""
        requests = ctx.requests(self.name)
        if not requests:
            return None
        by = list(ctx.spec.columns.by)
        values = [
            (pl.col(_items_column(q.k)) > 0).sum().cast(pl.Float64).alias(q.column)
            for q in requests
        ]
        no_users = pl.lit(None, pl.Int64).alias(GROUP_USERS)
        return (
            partials.group_by(by).agg(no_users, *values)
            if by
            else partials.select(no_users, *values)
        )


@pytest.fixture
def group_family(monkeypatch: pytest.MonkeyPatch) -> str:
    """A group-level toy family and its registry entry."""
    metric = Metric(
        name="listed_items",
        build=lambda ctx, k: pl.lit(None),
        reference=lambda *args: None,
        formula="|{i : some user lists i within k}|",
        bounds=(0.0, None),
        needs=frozenset(),
        family=_GROUP_TOY,
        population="corpus",
    )
    return _add_family(monkeypatch, _ListedItems(), metric)


@pytest.mark.parametrize("runner", ["one pass", "buckets", "dask"])
def test_two_group_level_families_side_by_side(group_family: str, runner: str) -> None:
    call: dict[str, Any] = {
        "metrics": ["coverage", group_family],
        "k": [1, 3],
        "by": "model",
        "aggregate": True,
    }
    if runner == "one pass":
        out = fm.evaluate(RECS, TRUTH, **call)
    elif runner == "buckets":
        out = fm.evaluate(RECS.lazy(), TRUTH, buckets=2, **call).collect()
    else:
        dd = pytest.importorskip("dask.dataframe")
        out = pl.from_pandas(
            fm.evaluate(
                dd.from_pandas(RECS.to_pandas(), npartitions=2),
                dd.from_pandas(TRUTH.to_pandas(), npartitions=1),
                **call,
            ).compute()
        )
    # From RECS by hand: model a lists {10} within 1 and {10, 11, 12} within 3 (user 2's
    # 13 is at rank 4); model b {10, 11} and {10, 11, 12}. The catalog is every item seen
    # (10-13: 4 items); n_users: users with a list within 3 (a: 1, 2; b: 1, 3).
    assert out.sort("model").rows() == [
        ("a", 2, 1 / 4, 3 / 4, 1.0, 3.0),
        ("b", 2, 2 / 4, 3 / 4, 2.0, 3.0),
    ]
