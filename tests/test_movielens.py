"""The published worked example on MovieLens ml-latest-small, through the public API.

Recipe (shared/data/movielens/README.md): split the ratings with
``train_test_split(test_size=0.2, random_state=1990)``; score every movie of train by
``steam = avg - (avg - 3) * 2 ** -log10(n)`` (n distinct users, avg mean rating); give every
test user the same top 10 by steam; a test movie rated >= 4.0 is relevant, users with none
are skipped (593 of 610 remain). The tutorial's "map@10" is the mean over i = 1..10 of
precision@i (not standard AP).

The data is not shipped with the package: it is read from ``../shared/data/movielens``
beside the project root, and the tests skip when it is absent.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

import frame_metrics as fm
from tests.conftest import recmetrics, to_polars

Constructor = Callable[[pl.DataFrame], Any]

DATA_DIR = Path(__file__).parents[1].parent / "shared" / "data" / "movielens"
RATINGS = DATA_DIR / "ml-latest-small" / "ratings.csv"

PUBLISHED_TOP10 = [318, 296, 1196, 858, 527, 260, 58559, 50, 2959, 1221]
PUBLISHED_PRECISION_10 = 0.05413153456998314
PUBLISHED_RECALL_10 = 0.05583956646876157
PUBLISHED_MEAN_PRECISION_1_TO_10 = 0.06409232045825639  # the tutorial's "map@10"
N_USERS = 593  # test users with a movie rated >= 4.0, of 610
RTOL = 1e-12


@pytest.fixture(scope="module")
def split() -> tuple[pl.DataFrame, pl.DataFrame]:
    """The tutorial's train and test frames (as polars, same rows and order)."""
    if not RATINGS.is_file():
        pytest.skip(
            f"MovieLens ml-latest-small not found at {RATINGS} "
            "(shared/data/movielens beside the project root; see its README.md)"
        )
    pd = pytest.importorskip("pandas")
    model_selection = pytest.importorskip("sklearn.model_selection")
    ratings = pd.read_csv(RATINGS)
    train, test = model_selection.train_test_split(ratings, test_size=0.2, random_state=1990)
    assert train.shape == (80668, 4)
    assert test.shape == (20168, 4)
    return pl.from_pandas(train), pl.from_pandas(test)


@pytest.fixture(scope="module")
def steam(split: tuple[pl.DataFrame, pl.DataFrame]) -> pl.DataFrame:
    """``movieId, steam`` over train, best first."""
    train, _ = split
    return (
        train.group_by("movieId")
        .agg(n=pl.col("userId").n_unique(), avg=pl.col("rating").mean())
        .with_columns(
            steam=pl.col("avg")
            - (pl.col("avg") - 3.0) * pl.lit(2.0).pow(-pl.col("n").cast(pl.Float64).log10())
        )
        .sort("steam", descending=True)
        .select("movieId", "steam")
    )


def _recs(split: tuple[pl.DataFrame, pl.DataFrame], steam: pl.DataFrame) -> pl.DataFrame:
    """Every test user gets the top 10 movies, with both a rank and the steam score."""
    _, test = split
    top10 = steam.head(10).with_columns(rank=pl.int_range(1, 11, dtype=pl.Int64))
    users = test.select("userId").unique().sort("userId")
    return users.join(top10, how="cross")


def _truth(split: tuple[pl.DataFrame, pl.DataFrame]) -> pl.DataFrame:
    _, test = split
    return test.select("userId", "movieId", "rating")


def _assert_close(got: float, expected: float, label: str) -> None:
    assert got == pytest.approx(expected, rel=RTOL, abs=0.0), (
        f"{label}: expected {expected!r}, got {got!r}"
    )


def test_top10_matches_published(steam: pl.DataFrame) -> None:
    assert steam.head(10)["movieId"].to_list() == PUBLISHED_TOP10


@pytest.mark.parametrize("ordering", ["rank", "score"])
def test_precision_recall_at_10(
    constructor: Constructor,
    split: tuple[pl.DataFrame, pl.DataFrame],
    steam: pl.DataFrame,
    ordering: str,
) -> None:
    recs = _recs(split, steam)
    recs = recs.drop("steam") if ordering == "rank" else recs.drop("rank")
    options: dict[str, Any] = {"score": "steam"} if ordering == "score" else {}
    recs_in = constructor(recs)
    out = recmetrics(recs_in).evaluate(
        constructor(_truth(split)),
        metrics=["precision", "recall"],
        k=10,
        aggregate=True,
        user="userId",
        item="movieId",
        relevance="rating",
        threshold=4.0,
        **options,
    )
    assert type(out) is type(recs_in)
    result = to_polars(out)
    assert result["n_users"].item() == N_USERS
    _assert_close(result["precision@10"].item(), PUBLISHED_PRECISION_10, "precision@10")
    _assert_close(result["recall@10"].item(), PUBLISHED_RECALL_10, "recall@10")


def test_tutorial_map_is_mean_precision_1_to_10(
    constructor: Constructor, split: tuple[pl.DataFrame, pl.DataFrame], steam: pl.DataFrame
) -> None:
    ks = list(range(1, 11))
    recs_in = constructor(_recs(split, steam).drop("steam"))
    out = fm.evaluate(
        recs_in,
        constructor(_truth(split)),
        metrics="precision",
        k=ks,
        user="userId",
        item="movieId",
        relevance="rating",
        threshold=4.0,
    )
    assert type(out) is type(recs_in)
    per_user = to_polars(out).sort("userId")
    assert per_user.height == N_USERS
    columns = [f"precision@{k}" for k in ks]
    # As the tutorial sums: per user the mean over i, then numpy.mean over users by userId.
    per_user_mean = per_user.select(columns).to_numpy().mean(axis=1)
    _assert_close(
        float(np.mean(per_user_mean)),
        PUBLISHED_MEAN_PRECISION_1_TO_10,
        "mean of precision@1..10 (per user first)",
    )
    # The same through aggregate=True: the mean over k of the mean over users.
    means = to_polars(
        fm.evaluate(
            recs_in,
            constructor(_truth(split)),
            metrics="precision",
            k=ks,
            aggregate=True,
            user="userId",
            item="movieId",
            relevance="rating",
            threshold=4.0,
        )
    )
    assert means["n_users"].item() == N_USERS
    _assert_close(
        float(np.mean([means[c].item() for c in columns])),
        PUBLISHED_MEAN_PRECISION_1_TO_10,
        "mean of aggregated precision@1..10",
    )
