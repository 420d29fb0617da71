"""The duplicate checks' screens: never 0 when a key repeats, exact when lists are runs.

A screen is a cheap count run before the exact one (``validation.Check.screens``): it may
be positive when nothing repeats (the exact count then decides), but a 0 ends the check,
so a 0 with a repeated key would let duplicates through. The expectations are counted in
plain Python over the rows.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import TYPE_CHECKING, Any

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import frame_metrics as fm
from frame_metrics.errors import DuplicateRowsError
from frame_metrics.validation import CheckedFrame, SharedScreen, duplicate_checks, find_failures

if TYPE_CHECKING:
    from polars._typing import EngineType

ENGINES: list[EngineType] = ["streaming", "in-memory"]


def repeats(rows: list[tuple[Any, ...]], *, nulls: bool = False) -> int:
    """Rows beyond the first of each key, over keys without a null (``nulls``: with)."""
    counts = Counter(r for r in rows if nulls or None not in r)
    return sum(n - 1 for n in counts.values())


def contiguous(groups: list[tuple[Any, ...]]) -> bool:
    """Whether each group's rows are consecutive."""
    seen: set[tuple[Any, ...]] = set()
    for i, g in enumerate(groups):
        if i and g == groups[i - 1]:
            continue
        if g in seen:
            return False
        seen.add(g)
    return True


def screen_values(
    frame: pl.DataFrame,
    groups: list[str],
    values: list[str],
    engine: EngineType,
    nullable: frozenset[str] = frozenset(),
    rising: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    """The shared first screen's value for each value column."""
    wanted = [(v, "row", ()) for v in values]
    checks = duplicate_checks(groups, wanted, nullable, ascending=rising)
    screen = checks[0].screens[0]
    assert isinstance(screen, SharedScreen)
    return screen.query(frame.lazy()).collect(engine=engine).row(0, named=True)


rows_strategy = st.lists(
    st.tuples(
        st.sampled_from(["a", "b"]),  # model
        st.integers(0, 4),  # user
        st.one_of(st.none(), st.integers(0, 5)),  # item
        st.integers(1, 6),  # rank
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(rows=rows_strategy, by_model=st.booleans(), text_users=st.booleans())
def test_the_runs_screen_is_zero_only_without_repeats_and_exact_on_runs(
    rows: list[tuple[str, Any, int | None, int]], by_model: bool, text_users: bool
) -> None:
    frame = pl.DataFrame(
        rows,
        schema={"model": pl.String, "user": pl.Int64, "item": pl.Int64, "rank": pl.Int64},
        orient="row",
    )
    if text_users:  # groups told apart by a hash, not by the values
        frame = frame.with_columns(pl.col("user").cast(pl.String))
        rows = [(m, str(u), i, r) for m, u, i, r in rows]
    groups = ["model", "user"] if by_model else ["user"]
    width = len(groups)
    keys = [r[2 - width : 2] for r in rows]
    for engine in ENGINES:
        for nullable in (frozenset(), frozenset({"item"})):
            got = screen_values(frame, groups, ["item", "rank"], engine, nullable)
            for column, position in (("item", 2), ("rank", 3)):
                pairs = [(*k, r[position]) for k, r in zip(keys, rows, strict=True)]
                expected = repeats(pairs)  # what the exact count finds: nulls not compared
                if expected:
                    assert got[column] > 0
                if contiguous(keys):
                    # Outside ``nullable`` a null counts as a value (a spurious repeat).
                    assert got[column] == repeats(pairs, nulls=column not in nullable)
        # Ranks screened by whether they rise within each run: never 0 with a repeat,
        # 0 when lists are runs whose ranks rise.
        got = screen_values(frame, groups, ["item", "rank"], engine, rising=frozenset({"rank"}))
        ranks = [(*k, r[3]) for k, r in zip(keys, rows, strict=True)]
        if repeats(ranks):
            assert got["rank"] > 0
        rank_of = [r[3] for r in rows]
        rises = all(
            keys[i] != keys[i - 1] or rank_of[i] > rank_of[i - 1] for i in range(1, len(rows))
        )
        if contiguous(keys) and rises:
            assert got["rank"] == 0
        items = [(*k, r[2]) for k, r in zip(keys, rows, strict=True)]
        if contiguous(keys):
            assert got["item"] == repeats(items, nulls=True)


@settings(max_examples=100, deadline=None)
@given(
    lists=st.lists(st.lists(st.integers(1, 40), min_size=1, max_size=30), min_size=1, max_size=6),
    shuffle=st.booleans(),
)
def test_long_lists_in_or_out_of_rank_order_are_checked_exactly(
    lists: list[list[int]], shuffle: bool
) -> None:
    """k=30: the ranks within the cutoff screened by whether they rise (long lists); a
    repeated rank is refused and lists without one are evaluated, in rank order or not,
    as the reference counts."""
    rows = [(u, 100 * u + j, r) for u, ranks in enumerate(lists) for j, r in enumerate(ranks)]
    recs = pl.DataFrame(rows, schema=["user", "item", "rank"], orient="row")
    recs = recs.sample(fraction=1.0, shuffle=True, seed=1) if shuffle else recs
    truth = pl.DataFrame({"user": [u for u, _, _ in rows], "item": [i for _, i, _ in rows],
                          "relevance": [1] * len(rows)})  # fmt: skip
    repeated = repeats([(u, r) for u, _, r in rows if r <= 30])
    if repeated:
        with pytest.raises(DuplicateRowsError, match="one row per rank within a user"):
            fm.evaluate(recs, truth, metrics=["precision"], k=30)
    else:
        got = fm.evaluate(recs, truth, metrics=["precision"], k=30, aggregate=True)
        within = [sum(r <= 30 for r in ranks) / 30 for ranks in lists]
        assert got["precision@30"][0] == pytest.approx(sum(within) / len(within), abs=1e-15)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("where", ["first", "boundary", "last"])
def test_a_repeat_is_found_in_a_list_that_spans_the_frame_chunks(
    engine: EngineType, where: str
) -> None:
    """300,000 rows in 7 chunks (as a parquet read gives): a run split between chunks."""
    users, length = 30_000, 10
    user = [u for u in range(users) for _ in range(length)]
    item = [i for _ in range(users) for i in range(length)]
    frame = pl.DataFrame({"user": user, "item": item, "rank": [i + 1 for i in item]})
    position = {"first": 3, "boundary": 150_001, "last": len(user) - 1}[where]
    item[position] = item[position - 1]  # the same item twice in one user's list
    frame = frame.with_columns(pl.Series("item", item))
    frame = pl.concat(
        [frame.slice(s, 45_000) for s in range(0, frame.height, 45_000)], rechunk=False
    )
    assert frame.n_chunks() == 7
    assert screen_values(frame, ["user"], ["item", "rank"], engine) == {"item": 1, "rank": 0}
    checks = duplicate_checks(["user"], [("item", "(user, item) pair", ())])
    failures, _ = find_failures([CheckedFrame("recs", frame.lazy(), checks, ["user", "item"])])
    assert [f.n for f in failures] == [2]  # both rows of the repeated pair


@pytest.mark.parametrize(
    "layout",
    ["runs", "split-runs", "shuffled"],
)
def test_evaluate_finds_a_repeated_pair_in_any_row_order(constructor: Any, layout: str) -> None:
    """A repeated (user, item) within the cutoff, its list written whole, in two runs or
    in shuffled rows: the same error and count (spec: one row per pair)."""
    recs = pl.DataFrame(
        {
            "user": [1, 1, 1, 2, 2, 2],
            "item": [10, 11, 10, 20, 21, 22],
            "rank": [1, 2, 3, 1, 2, 3],
        }
    )
    order = {
        "runs": [0, 1, 2, 3, 4, 5],
        "split-runs": [0, 1, 3, 4, 2, 5],  # user 1's rows in two runs
        "shuffled": [5, 2, 3, 0, 4, 1],
    }[layout]
    recs = recs[order]
    truth = pl.DataFrame({"user": [1, 2], "item": [10, 20], "relevance": [1, 1]})
    message = "recs: expected one row per (user, item) pair, found 2 rows that repeat one"
    with pytest.raises(DuplicateRowsError, match=f"^{re.escape(message)}, e.g. user=1, item=10"):
        fm.evaluate(constructor(recs), constructor(truth), k=3)
