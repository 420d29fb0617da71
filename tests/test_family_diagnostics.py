"""fm.diagnose counts what each family leaves out (``Family.diagnostics``), everywhere.

The counts are read off small frames by hand: which items no group names, which users
have a list but no grouped item within k. They must be the same on every frame kind and
on Dask (a count of users adds up over partitions; distinct items are
merged first, so an item recommended in two partitions counts once).
"""

from __future__ import annotations

import polars as pl
import pytest

import frame_metrics as fm
from tests.conftest import Constructor

RECS = pl.DataFrame(
    {
        "user": [1, 1, 2, 2, 3, 4, 4],
        "item": ["a", "b", "c", "d", "a", "c", "a"],
        "rank": [1, 2, 1, 2, 1, 1, 2],
    }
)
TRUTH = pl.DataFrame({"user": [1, 2, 3, 4], "item": ["a", "c", "a", "a"], "relevance": [1] * 4})
GROUPS = pl.DataFrame({"item": ["a", "b", "e"], "group": ["x", "y", "y"]})
METRICS = ["list_parity@1", "list_parity@2", "exposure_parity@2"]
# By hand: c and d are in no group (e is, but never recommended): 2 items. Within k=1
# users 2 (c) and 4 (c) have no grouped item; within k=2 user 4 has a (rank 2), so
# only user 2 (c, d) is left out.
EXPECTED = {
    "items_without_group": 2,
    "users_without_grouped_item@1": 2,
    "users_without_grouped_item@2": 1,
}


def test_exposure_counts_on_every_frame_kind(constructor: Constructor) -> None:
    found = fm.diagnose(
        constructor(RECS), constructor(TRUTH), metrics=METRICS, item_groups=constructor(GROUPS)
    )
    assert found.counts == EXPECTED
    assert found.items_without_group == 2
    assert "recommended items (within k=2) in no item group:" in str(found)


def test_exposure_counts_on_dask() -> None:
    dd = pytest.importorskip("dask.dataframe")
    # Item a is recommended to users in both partitions: the union counts it once.
    on_dask = fm.diagnose(
        dd.from_pandas(RECS.to_pandas(), npartitions=2),
        dd.from_pandas(TRUTH.to_pandas(), npartitions=2),
        metrics=METRICS,
        item_groups=GROUPS,
    )
    assert on_dask.counts == EXPECTED


def test_no_family_count_without_its_metrics() -> None:
    found = fm.diagnose(RECS, TRUTH, metrics=["ndcg@2"])
    assert found.counts == {}
    with pytest.raises(AttributeError, match="items_without_group"):
        _ = found.items_without_group
