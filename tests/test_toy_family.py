"""A family added from one module (``tests/toy_family.py``) runs everywhere the package's do.

The module registers a family, its metric ``price@k`` (a user's mean price of the priced
items within k), an extra frame ``item_prices`` and a column keyword ``price``; nothing
else names them. Expectations are written as arithmetic on the prices below.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import frame_metrics as fm
from frame_metrics import extend
from frame_metrics.errors import MissingInputError, UnknownKeywordError
from frame_metrics.families import FAMILIES
from tests.conftest import to_polars
from tests.test_cli import run
from tests.test_distributed import backend  # noqa: F401 (a fixture, used by name)

MODULE = "tests.toy_family"


@pytest.fixture
def toy() -> Iterator[ModuleType]:
    """The toy family, registered by importing its module; removed after the test."""
    module = importlib.import_module(MODULE)
    yield module
    extend.unregister_family(module.FAMILY.name)
    sys.modules.pop(MODULE, None)


# User 1 sees a, b, c; user 2 sees b, d; user 3 sees e only, which has no price.
RECS = pl.DataFrame(
    {
        "user": [1, 1, 1, 2, 2, 3],
        "item": ["a", "b", "c", "b", "d", "e"],
        "rank": [1, 2, 3, 1, 2, 1],
        "model": ["m", "m", "m", "m", "n", "n"],
    }
)
TRUTH = pl.DataFrame({"user": [1, 2], "item": ["a", "d"], "relevance": [1, 1]})
PRICES = pl.DataFrame({"item": ["a", "b", "c", "d"], "cost": [10.0, 20.0, 30.0, 40.0]})

#: price@2 and price@3 per user: user 3 has no priced item, so no value.
PER_USER = {1: ((10 + 20) / 2, (10 + 20 + 30) / 3), 2: ((20 + 40) / 2, (20 + 40) / 2)}


def test_per_user_on_every_frame_kind(toy: ModuleType, constructor: Callable[..., Any]) -> None:
    out = to_polars(
        fm.evaluate(
            constructor(RECS.drop("model")),
            metrics="price",
            k=[2, 3],
            item_prices=constructor(PRICES),
            price="cost",
        )
    ).sort("user")
    assert out.columns == ["user", "price@2", "price@3"]
    assert out.rows() == [(1, *PER_USER[1]), (2, *PER_USER[2])]


def test_aggregated_by_group_beside_the_package_metrics(toy: ModuleType) -> None:
    out = fm.evaluate(
        RECS,
        TRUTH,
        metrics=["price@2", "recall@2"],
        by="model",
        aggregate=True,
        item_prices=PRICES,
        price="cost",
    ).sort("model")
    # price@2 over the users with a priced item: m has user 1 (a, b: 15) and user 2 (b:
    # 20); n has user 2 (d: 40) and user 3 (e, no price: no value). recall@2 is over the
    # users with a relevant item, truth applying to both models: in m user 1 (a: 1/1)
    # and user 2 (d missed: 0/1); in n user 2 (d: 1/1) and user 1 (no list: 0/1).
    # n_users counts a user with either value: 2 in each.
    assert out.rows() == [("m", 2, (15.0 + 20.0) / 2, (1 + 0) / 2), ("n", 2, 40.0, (1 + 0) / 2)]


def test_buckets_and_lazy_give_the_one_pass_values(toy: ModuleType) -> None:
    kwargs: dict[str, Any] = {"metrics": "price@3", "item_prices": PRICES, "price": "cost"}
    one = fm.evaluate(RECS, TRUTH, by="model", **kwargs)
    lazy = fm.evaluate(RECS.lazy(), TRUTH.lazy(), by="model", buckets=2, **kwargs)
    assert_frame_equal(one, lazy.collect())


def test_spark_and_dask(toy: ModuleType, backend: Any) -> None:  # noqa: F811
    to_backend, result_of, _ = backend
    kwargs: dict[str, Any] = {"metrics": "price@2", "by": "model", "price": "cost"}
    for aggregate in (False, True):
        want = fm.evaluate(RECS, aggregate=aggregate, item_prices=PRICES, **kwargs)
        got = result_of(
            fm.evaluate(to_backend(RECS, 3), aggregate=aggregate, item_prices=PRICES, **kwargs)
        )
        assert_frame_equal(got.sort(got.columns[:2]), want.sort(want.columns[:2]))


def test_diagnose_counts_what_it_leaves_out(toy: ModuleType) -> None:
    found = fm.diagnose(RECS, metrics="price@2", item_prices=PRICES, price="cost")
    assert found.counts["items_without_price"] == 1  # e


def test_the_command_line_takes_its_frame_and_column(
    toy: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    RECS.write_csv(tmp_path / "recs.csv")
    PRICES.write_csv(tmp_path / "prices.csv")
    args: list[str | Path] = [tmp_path / "recs.csv", "-m", "price@2", "--format", "csv"]
    args += ["--item-prices", tmp_path / "prices.csv", "--price-col", "cost"]
    code, out, _ = run(capsys, "evaluate", *args)
    assert code == 0, out
    assert out.splitlines() == ["n_users,price@2", f"2,{(15.0 + 30.0) / 2}"]
    help_text = run(capsys, "evaluate", "--help")[1]
    assert "--item-prices FILE" in help_text
    assert "--price-col COL" in help_text


def test_its_errors(toy: ModuleType) -> None:
    with pytest.raises(MissingInputError, match=r"price: expected item_prices="):
        fm.evaluate(RECS, metrics="price@2")
    with pytest.raises(UnknownKeywordError, match="did you mean item_prices"):
        fm.evaluate(RECS, metrics="price@2", item_price=PRICES)


def test_unregistered_it_is_gone() -> None:
    module = importlib.import_module(MODULE)
    extend.unregister_family(module.FAMILY.name)
    sys.modules.pop(MODULE, None)
    with pytest.raises(UnknownKeywordError):
        fm.evaluate(RECS, item_prices=PRICES)
    with pytest.raises(fm.InvalidOptionError, match="expected a known metric name"):
        fm.evaluate(RECS, metrics="price@2")


def test_a_family_that_clashes_is_refused_naming_it(toy: ModuleType) -> None:
    family = toy.PriceFamily()
    with pytest.raises(
        fm.InvalidOptionError, match="family: expected a family name not in use, got 'toy_price'"
    ):
        extend.register_family(family, metrics=[])
    other = type("Other", (extend.Family,), {"name": "toy_other"})()
    metric = fm.REGISTRY["ndcg"]
    with pytest.raises(
        fm.InvalidOptionError, match=r"expected a new metric of family 'toy_other', got 'ndcg'"
    ):
        extend.register_family(other, metrics=[metric])
    fresh = extend.Role("toy_fresh", "str", "x", "", "--x", "")
    taken = extend.Role("item_prices", "str", "x", "", "--x", "")
    with pytest.raises(fm.InvalidOptionError, match="got 'item_prices'"):
        extend.register_family(other, metrics=[], roles=[fresh, taken])
    # Nothing of the refused family stays: its other role neither.
    assert "toy_other" not in FAMILIES
    with pytest.raises(fm.UnknownKeywordError):
        fm.evaluate(RECS, metrics="ndcg@2", toy_fresh="x")
