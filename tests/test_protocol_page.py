"""The evaluation protocol's page (docs/protocol.md): its outputs, its prose and its peers.

The page runs on MovieLens ml-latest-small, which the repository does not hold, so its
examples are ``python recorded`` blocks committed with their outputs (docs/gen/gen_run.py;
refresh with ``python docs/gen/gen_run.py docs/protocol.md``). Here:

- the committed outputs are what a fresh run prints, to the last digit (skips without
  the data, found as the notebooks find it: ``$MOVIELENS_DIR``, else
  ``shared/data/movielens/ml-latest-small`` in the repository or a parent folder);
- the numbers the prose quotes are those of the committed outputs (no data needed);
- what the reference says of RecTools' and Recommenders' tie order and of RePlay's ratio
  and folds holds on MovieLens (skips without the data or the peer);
- recording itself: blocks run in order in one namespace, outputs are replaced, not added.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import frame_metrics as fm
from tests.conftest import gen_run
from tests.test_split_peers import rectools as rectools_fixture  # noqa: F401 - a fixture

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "protocol.md"


def _movielens() -> Path:
    data: Path | None = gen_run().find_movielens(ROOT)
    if data is None:
        pytest.skip(
            "MovieLens ml-latest-small not found ($MOVIELENS_DIR, or "
            f"shared/data/movielens/ml-latest-small in {ROOT} or a parent folder)"
        )
    return data


def test_recorded_outputs_are_a_fresh_run() -> None:
    data = _movielens()
    committed = PAGE.read_text(encoding="utf-8")
    page: dict[str, Any] = {}
    fresh = gen_run().record_page(PAGE, data, page)
    assert fresh == committed, (
        "docs/protocol.md's outputs are not what its code prints now: "
        "python docs/gen/gen_run.py docs/protocol.md"
    )
    # "The 300 leave at least 10 unseen movies to every user here": in every split and
    # fold the page evaluates popularity on.
    parts = [page["loo"], *page["splits"].values(), *page["folds"]]
    parts += [fold for split in page["windows"].values() for fold in split]
    for train, test in parts:
        users = test.select("user").unique()
        lists = page["popularity"](train, users).join(train, on=["user", "item"], how="anti")
        shortest = lists.group_by("user").len()["len"].min()
        assert shortest >= 10, shortest


def test_recording_replaces_outputs_in_one_namespace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorder = gen_run()
    monkeypatch.chdir(tmp_path)
    page = (
        "Text.\n\n```python recorded\nx = 2\n```\n\n"
        "```python recorded\nprint(x * 21)\n```\n\n"
        '```{.text title="Output"}\nstale\n```\n\nMore text.\n'
    )
    done = recorder.record(page, "page.md")
    assert done == page.replace("stale", "42")
    assert recorder.record(done, "page.md") == done  # a second run changes nothing
    shown = recorder.show_recorded(done)
    assert "recorded" not in shown
    assert shown.count("```python\n") == 2


# -- the prose quotes the outputs -----------------------------------------------------------


def _outputs() -> list[str]:
    """The committed output blocks of the page, in order."""
    text = PAGE.read_text(encoding="utf-8")
    return re.findall(r'^```\{\.text[^}\n]*title="Output"\}\n(.*?)^```', text, re.S | re.M)


def _table(output: str) -> list[dict[str, str]]:
    """A printed polars table as rows of cell texts by column name."""
    lines = [line for line in output.splitlines() if line.startswith("│")]
    cells = [[c.strip() for c in line.strip("│").split("┆")] for line in lines]
    header, rows = cells[0], cells[3:]  # name, ---, dtype
    return [dict(zip(header, row, strict=True)) for row in rows]


def _tables() -> list[list[dict[str, str]]]:
    return [_table(o) for o in _outputs() if "┌" in o]


def _prose() -> str:
    text = PAGE.read_text(encoding="utf-8")
    return " ".join(re.sub(r"^```.*?^```", "", text, flags=re.S | re.M).split())


def _row(table: list[dict[str, str]], **where: str) -> dict[str, float]:
    (row,) = [r for r in table if all(r[k] == v for k, v in where.items())]
    return {k: float(v) for k, v in row.items() if k not in where}


def test_the_prose_quotes_the_outputs() -> None:
    prose = _prose()
    reports = [o for o in _outputs() if "test rows dropped" in o]
    loo, _, _ = reports
    (diagnosis,) = [o for o in _outputs() if "removed by exclude=" in o]
    assert "lists shorter than" not in diagnosis  # "there are none"
    assert "test      587 rows 587 users" in loo
    assert "23 of cold items" in loo
    assert "ties across the cut: 94" in loo
    assert "587 of the 610 users" in prose
    assert "23 last movies" in prose
    assert "94 test rows" in prose

    hit_rates, by_time_columns, splits, folds, per_fold, compare, _, windows = _tables()
    left_in = _row(hit_rates, lists="seen left in")["hit_rate@10"]
    removed = _row(hit_rates, lists="seen removed")["hit_rate@10"]
    assert f"hit rate@10 is {removed:.3f}" in prose
    assert f"it would be {left_in:.3f}" in prose

    test = _row(by_time_columns, side="test")
    assert "leaves 28 test users" in prose
    assert test["users"] == 28
    assert f"{test['dropped_cold_users']:,.0f} test ratings" in prose
    assert f"{test['users_only_in_train']:.0f} users rated nothing" in prose

    tutorial = _row(splits, split="random", seen="left in")["precision@10"]
    random = _row(splits, split="random", seen="removed")["precision@10"]
    ratio = _row(splits, split="ratio", seen="removed")["precision@10"]
    assert f"({tutorial:.3f}: another random draw" in prose
    assert f"precision@10 to {random:.3f}" in prose
    assert f"lists gets {ratio:.3f}" in prose
    assert f"overstates it {random / ratio:.1f} times" in prose
    assert _row(splits, split="time", seen="removed")["n_users"] == 28

    assert [r["users"] for r in folds] == ["122"] * 5
    # "The folds vary more than the models do."
    spread = max(
        max(v) - min(v)
        for model in ("popularity", "genre")
        for v in [[_row(per_fold, model=model, fold=str(f))["ndcg@10"] for f in range(5)]]
    )
    gaps = [
        abs(
            _row(per_fold, model="genre", fold=str(f))["ndcg@10"]
            - _row(per_fold, model="popularity", fold=str(f))["ndcg@10"]
        )
        for f in range(5)
    ]
    assert spread > max(gaps)

    compared = [{k: float(v) for k, v in r.items() if k != "metric"} for r in compare]
    assert {r["n_paired"] for r in compared} == {591}
    assert "on 591 users" in prose
    assert all(-0.004 < r["diff"] < 0 for r in compared)
    assert all(r["diff_low"] <= 0 <= r["diff_high"] for r in compared)
    assert min(r["p_ttest_adj"] for r in compared) >= 0.28
    assert "less than 0.004" in prose
    assert "0.28 and more" in prose

    kept = [_row(windows, cold_users="keep", fold=str(f)) for f in range(3)]
    dropped = [_row(windows, cold_users="drop", fold=str(f)) for f in range(3)]
    kept_users = (
        ", ".join(f"{r['n_users']:.0f}" for r in kept[:2]) + f" and {kept[2]['n_users']:.0f}"
    )
    dropped_users = (
        ", ".join(f"{r['n_users']:.0f}" for r in dropped[:2]) + f" and {dropped[2]['n_users']:.0f}"
    )
    assert f"({kept_users} evaluated with them, {dropped_users} without)" in prose
    assert all(0.20 <= r["precision@10"] <= 0.30 for r in kept)
    assert all(0.02 <= round(r["precision@10"], 2) <= 0.11 for r in dropped)
    assert "0.20 to 0.30, against 0.02 to 0.11" in prose


# -- the peers' splitters, as the reference says ----------------------------------------------


_EVENT = ["user", "item", "timestamp"]


def _events(frame: Any) -> set[tuple[Any, ...]]:
    if not isinstance(frame, pl.DataFrame):
        frame = pl.from_pandas(frame)
    return set(frame.select(_EVENT).rows())


@pytest.fixture(scope="module")
def ratings() -> pl.DataFrame:
    data = _movielens()
    return pl.read_csv(data / "ratings.csv").rename({"userId": "user", "movieId": "item"})


def test_rectools_last_n_ties_follow_the_row_order(
    request: pytest.FixtureRequest, ratings: pl.DataFrame
) -> None:
    rectools = request.getfixturevalue("rectools_fixture")  # imported as the peers test does
    pd = pytest.importorskip("pandas")
    _, test = fm.split(ratings, "last_n", n=1, time="timestamp")
    shuffled = ratings.sample(fraction=1.0, shuffle=True, seed=3)
    for frame, same in [(ratings, True), (shuffled, False)]:
        pandas = frame.to_pandas().rename(
            columns={"user": "user_id", "item": "item_id", "rating": "weight"}
        )
        pandas["datetime"] = pd.to_datetime(pandas["timestamp"], unit="s")
        interactions = rectools.Interactions(pandas[["user_id", "item_id", "weight", "datetime"]])
        ((_, test_rows, _),) = rectools.LastNSplitter(1).split(interactions)
        theirs = _events(frame[test_rows])
        assert (theirs == _events(test)) is same
    # fm.split does not depend on the row order.
    _, shuffled_test = fm.split(shuffled, "last_n", n=1, time="timestamp")
    assert _events(shuffled_test) == _events(test)


def test_recommenders_chrono_split_ties_follow_the_row_order(ratings: pl.DataFrame) -> None:
    splitters = pytest.importorskip("recommenders.datasets.python_splitters")
    _, test = fm.split(
        ratings, "ratio", test_share=0.2, time="timestamp", cold_items="keep", seen="keep"
    )
    columns = {"col_user": "user", "col_item": "item", "col_timestamp": "timestamp"}
    shuffled = ratings.sample(fraction=1.0, shuffle=True, seed=3)
    for frame, same in [(ratings, True), (shuffled, False)]:
        _, theirs = splitters.python_chrono_split(frame.to_pandas(), ratio=0.8, **columns)
        assert (_events(theirs) == _events(test)) is same


def test_replay_ratio_takes_more_and_kfolds_tests_every_user(ratings: pl.DataFrame) -> None:
    splitters = pytest.importorskip("replay.splitters")
    frame = ratings.rename({"user": "query_id", "item": "item_id"})
    _, test = fm.split(
        ratings, "ratio", test_share=0.2, time="timestamp", cold_items="keep", seen="keep"
    )
    _, theirs = splitters.RatioSplitter(test_size=0.2, query_column="query_id").split(frame)
    counts = ratings.group_by("user").len()
    ceil = counts.select(((pl.col("len") + 4) // 5).sum()).item()  # ceil(0.2 n_u), exactly
    # A row is test when its position share, rounded to 3 decimals, exceeds 0.8: about
    # ceil(0.2 n_u) rows per user (fewer for users of over 500 rows).
    assert test.height < theirs.height <= ceil
    folds = list(splitters.KFolds(n_folds=5, seed=0, query_column="query_id").split(frame))
    users = ratings["user"].n_unique()
    assert all(fold_test["query_id"].n_unique() == users for _, fold_test in folds)
