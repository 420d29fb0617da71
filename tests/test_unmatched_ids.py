"""Ids that never match: a warning with the counts and an example id of each frame.

The rule (``frame_metrics.id_match``): under 1% of the users of recs have a truth row,
or, those users matching, none of their recommended (user, item) pairs is a truth row.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import frame_metrics as fm
from frame_metrics import id_match
from frame_metrics.errors import UnmatchedIdsWarning
from frame_metrics.id_match import IdScreen
from tests.conftest import Constructor, evaluate_as_polars

USERS_TAIL = (
    "the users of recs without truth rows are left out, and those of truth score 0 "
    "(nothing recommended to them): check that both frames write the user ids alike"
)
ITEMS_TAIL = "every hit-based metric is 0: check that both frames write the item ids alike"

# Users written "0015" in recs and "15" in truth (both text: nothing fails, nothing matches).
TEXT_RECS = pl.DataFrame(
    {"user": ["0015", "0015", "0016"], "item": ["a", "b", "a"], "rank": [1, 2, 1]}
)
TEXT_TRUTH = pl.DataFrame({"user": ["15", "16"], "item": ["a", "c"], "relevance": [1, 1]})


@contextmanager
def unmatched() -> Iterator[list[str]]:
    """The messages of every UnmatchedIdsWarning raised inside."""
    messages: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield messages
    messages += [str(w.message) for w in caught if w.category is UnmatchedIdsWarning]


def test_users_that_never_match(constructor: Constructor) -> None:
    with unmatched() as messages:
        got = evaluate_as_polars(
            constructor, TEXT_RECS, TEXT_TRUTH, metrics="recall@2", aggregate=True
        )
    # Truth's users 15 and 16 have nothing recommended: recall 0 each.
    assert got.rows() == [(2, 0.0)]
    want = (
        "recs and truth: expected the users of recs to have truth rows, found 0 of 2 (under "
        f"1%), e.g. user='0015' in recs and user='15' in truth; {USERS_TAIL}"
    )
    assert messages == [want, want]  # the constructor's kind, then polars


def test_items_that_never_match(constructor: Constructor) -> None:
    recs = pl.DataFrame({"user": [15, 15, 16], "item": ["0001", "0002", "0001"], "rank": [1, 2, 1]})
    truth = pl.DataFrame({"user": [15, 16], "item": ["1", "3"], "relevance": [1, 1]})
    with unmatched() as messages:
        got = evaluate_as_polars(constructor, recs, truth, metrics="recall@2", aggregate=True)
    assert got.rows() == [(2, 0.0)]
    want = (
        "recs and truth: expected some recommended (user, item) pairs to be truth rows, "
        "found none of the 3 pairs of the 2 users with truth rows, e.g. user=15, item='0001' "
        f"in recs and user=15, item='1' in truth; {ITEMS_TAIL}"
    )
    assert messages == [want, want]


def test_matching_ids_are_quiet(constructor: Constructor) -> None:
    recs = TEXT_RECS.with_columns(pl.col("user").str.strip_chars_start("0"))
    with unmatched() as messages:
        got = evaluate_as_polars(constructor, recs, TEXT_TRUTH, metrics="recall@2", aggregate=True)
    # User 15 finds a (1 of 1), user 16 misses c.
    assert (messages, got.rows()) == ([], [(2, 1 / 2)])


def _users(n: int, matched: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    """``n`` users with one recommendation each, ``matched`` of them (the last) in truth."""
    recs = pl.DataFrame({"user": range(n), "item": 0, "rank": 1})
    truth = pl.DataFrame({"user": range(n - matched, n + 5), "item": 0, "relevance": 1})
    return recs, truth


@pytest.mark.parametrize(
    ("n", "matched", "warned"),
    [(101, 1, True), (101, 2, False), (100, 1, False), (99, 0, True)],
    ids=["1-of-101", "2-of-101", "1-of-100", "0-of-99"],
)
def test_share_of_users_threshold(n: int, matched: int, warned: bool) -> None:
    """Under 1% warns (1 of 101: 0.99%); 1% or more does not (1 of 100, 2 of 101)."""
    recs, truth = _users(n, matched)
    with unmatched() as messages:
        fm.evaluate(recs, truth, metrics="hit_rate@1")
    assert len(messages) == warned
    if warned:
        assert messages[0].startswith(
            "recs and truth: expected the users of recs to have truth rows, found "
            f"{matched} of {n} (under 1%), e.g. user=0 in recs and user={n - matched} in truth"
        )


def test_sample_is_confirmed_on_every_row(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first rows' users have no truth row, the others do: no warning."""
    monkeypatch.setattr(id_match, "SAMPLE_ROWS", 3)
    recs, truth = _users(10, 6)  # users 0-3 unmatched, 4-9 matched
    with unmatched() as messages:
        fm.evaluate(recs, truth, metrics="hit_rate@1")
    assert messages == []


def test_exact_counts_beyond_the_sample(monkeypatch: pytest.MonkeyPatch) -> None:
    """The warning counts every row, not the sample's."""
    monkeypatch.setattr(id_match, "SAMPLE_ROWS", 3)
    recs = pl.DataFrame({"user": [1, 1, 2, 2, 3, 3, 4], "item": 7, "rank": [1, 2, 1, 2, 1, 2, 1]})
    recs = recs.with_columns(item=pl.col("rank") + 10 * pl.col("user"))
    truth = pl.DataFrame({"user": [1, 2, 3, 4], "item": [99, 99, 99, 99], "relevance": 1})
    with unmatched() as messages:
        fm.evaluate(recs, truth, metrics="hit_rate@2")
    assert messages == [
        "recs and truth: expected some recommended (user, item) pairs to be truth rows, "
        "found none of the 7 pairs of the 4 users with truth rows, e.g. user=1, item=11 in "
        f"recs and user=1, item=99 in truth; {ITEMS_TAIL}"
    ]


def test_sample_counts_match_exact_counts() -> None:
    """The counts of the sample (when it is all of recs) and of the full pass agree."""
    recs = pl.DataFrame({"user": [1, 1, 2, 3], "item": [5, 6, 5, 7], "rank": [1, 2, 1, 1]})
    truth = pl.DataFrame({"user": [1, 3, 9], "item": [6, 8, 5]})
    screen = IdScreen(recs.lazy(), truth.lazy(), ["user"], "item")
    sample, of_sampled, first = pl.collect_all(screen.queries())
    keys = ["user"]
    on_sample = id_match.count(sample.lazy(), of_sampled.lazy(), first.lazy(), keys, "item")
    exact = id_match.count(recs.lazy(), truth.lazy(), truth.lazy().head(1), keys, "item")
    # Users 1 and 3 of 1, 2, 3 have truth rows; their 3 rows hold one truth pair (1, 6).
    assert (exact.users, exact.matched_users, exact.pairs, exact.matched_pairs) == (3, 2, 3, 1)
    assert on_sample == exact


def test_by_columns_truth_carries_are_part_of_the_user(constructor: Constructor) -> None:
    recs = pl.DataFrame({"model": ["a", "b"], "user": [1, 1], "item": ["x", "x"], "rank": [1, 1]})
    truth = pl.DataFrame({"model": ["c"], "user": [1], "item": ["x"], "relevance": [1]})
    with unmatched() as messages:
        evaluate_as_polars(constructor, recs, truth, metrics="recall@1", by="model")
    assert messages[0].startswith(
        "recs and truth: expected the users of recs to have truth rows, found 0 of 2 (under "
        "1%), e.g. model='a', user=1 in recs and model='c', user=1 in truth;"
    )


@pytest.mark.parametrize(
    ("recs", "truth", "kwargs"),
    [
        (TEXT_RECS, TEXT_TRUTH, {"validate": False}),
        (TEXT_RECS.clear(), TEXT_TRUTH, {}),
        (TEXT_RECS, TEXT_TRUTH.clear(), {}),
        (TEXT_RECS, TEXT_TRUTH, {"metrics": "coverage@2", "aggregate": True}),  # truth unread
    ],
    ids=["validate-false", "no-recs", "no-truth", "metrics-without-truth"],
)
def test_nothing_to_match(recs: pl.DataFrame, truth: pl.DataFrame, kwargs: dict[str, Any]) -> None:
    with unmatched() as messages:
        fm.evaluate(recs, truth, **{"metrics": "recall@2", **kwargs})
    assert messages == []


def test_lazy_input_warns_when_evaluate_is_called() -> None:
    with unmatched() as messages:
        result = fm.evaluate(TEXT_RECS.lazy(), TEXT_TRUTH.lazy(), metrics="recall@2")
    assert len(messages) == 1
    assert isinstance(result, pl.LazyFrame)


def test_command_line_ids_as_text(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """'0015' in one file and 15 in the other, read as text: a warning line, exit 0."""
    from frame_metrics.cli import main

    (tmp_path / "recs.csv").write_text("user,item,rank\n0015,a,1\n0015,b,2\n0016,a,1\n")
    (tmp_path / "truth.csv").write_text("user,item,relevance\n15,a,1\n16,c,1\n")
    args = [str(tmp_path / "recs.csv"), str(tmp_path / "truth.csv"), "-m", "recall@2"]
    code = main(["evaluate", *args, "--ids-as-text", "--format", "csv"])
    captured = capsys.readouterr()
    assert code == 0
    assert captured.out.splitlines() == ["n_users,recall@2", "2,0.0"]
    assert captured.err.splitlines() == [
        "frame-metrics: warning: recs and truth: expected the users of recs to have truth "
        "rows, found 0 of 2 (under 1%), e.g. user='0015' in recs and user='15' in truth; "
        f"{USERS_TAIL}"
    ]


def test_warning_class() -> None:
    assert issubclass(UnmatchedIdsWarning, UserWarning)
    message = re.escape("expected the users of recs to have truth rows, found 0 of 2")
    with pytest.warns(UnmatchedIdsWarning, match=message) as caught:
        fm.evaluate(TEXT_RECS, TEXT_TRUTH, metrics="recall@2")
    assert [w.filename for w in caught] == [__file__]  # the caller's line


@pytest.mark.parametrize("recs", [TEXT_RECS, TEXT_RECS.lazy()], ids=["eager", "lazy"])
def test_buckets_warn_as_one_pass(recs: pl.DataFrame | pl.LazyFrame) -> None:
    with unmatched() as one_pass:
        fm.evaluate(TEXT_RECS, TEXT_TRUTH, metrics="recall@2", aggregate=True)
    with unmatched() as bucketed:
        fm.evaluate(recs, TEXT_TRUTH, metrics="recall@2", aggregate=True, buckets=2)
    assert bucketed == one_pass
    assert len(one_pass) == 1


def test_buckets_confirm_the_first_buckets_sample() -> None:
    """Users 0-4 (the first of two id ranges) have no truth row, 5-9 do: no warning."""
    recs = pl.DataFrame({"user": range(10), "item": 0, "rank": 1})
    truth = pl.DataFrame({"user": range(5, 10), "item": 0, "relevance": 1})
    with unmatched() as messages:
        got = fm.evaluate(recs, truth, metrics="hit_rate@1", aggregate=True, buckets=2)
    assert messages == []
    assert got.rows() == [(5, 1.0)]  # users 5-9 hit item 0 at rank 1
    # The first bucket alone (users 0-4) breaks the rule: the sample would have warned.
    alone = recs.filter(pl.col("user") < 5)
    with unmatched() as messages:
        fm.evaluate(alone, truth, metrics="hit_rate@1", aggregate=True)
    assert len(messages) == 1
