"""Beyond-accuracy metrics on MovieLens ml-latest-small: three recommenders compared.

The split and the popularity recommender follow ``tests/test_movielens.py`` (the recipe of
shared/data/movielens/README.md): ``train_test_split(test_size=0.2, random_state=1990)``,
the "steam" score over train, the same top 10 for every test user. Two more models:

- ``genre``: each test user's favourite genre (the genre most frequent among the user's
  train movies rated >= 4.0, or among all the user's train movies when none is; ties
  broken by name), then the top 10 movies of that genre by steam, leaving out the movies
  the user rated in train. Deterministic and personalised, but still popularity-driven.
- ``random``: 10 train movies drawn uniformly without replacement (numpy seed 1990) among
  those the user did not rate in train.

One ``evaluate(..., by="model", aggregate=True)`` call scores all three. Genres come from
movies.csv split on ``|``; "(no genres listed)" is read as no genre (an empty list), so it
is not a shared category. The catalog is every movie of movies.csv.

The data is not shipped with the package: it is read from ``../shared/data/movielens``
beside the project root, and the tests skip when it is absent.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from itertools import combinations
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
import polars as pl
import pytest
from polars.testing import assert_frame_equal

import frame_metrics as fm

DATA_DIR = Path(__file__).parents[1].parent / "shared" / "data" / "movielens"
RATINGS = DATA_DIR / "ml-latest-small" / "ratings.csv"
MOVIES = DATA_DIR / "ml-latest-small" / "movies.csv"

K = 10
SEED = 1990
RTOL = 1e-12
NO_GENRE = "(no genres listed)"
MODELS = ("popularity", "genre", "random")
METRICS = [
    "precision",
    "coverage",
    "novelty",
    "diversity",
    "personalization",
    "arp",
    "aplt",
    "gini",
]
CORPUS_METRICS = {"coverage", "personalization", "gini"}  # one value per model: aggregate only
PER_USER_METRICS = [m for m in METRICS if m not in CORPUS_METRICS]
OPTIONS: dict[str, Any] = {
    "metrics": METRICS,
    "k": K,
    "by": "model",
    "user": "userId",
    "item": "movieId",
    "relevance": "rating",
    "threshold": 4.0,
}


class Data(NamedTuple):
    """The tutorial's split, as the pandas frames sklearn returns and as polars."""

    train_pd: pd.DataFrame
    test_pd: pd.DataFrame
    movies_pd: pd.DataFrame
    train: pl.DataFrame
    test: pl.DataFrame
    movies: pl.DataFrame


@pytest.fixture(scope="module")
def data() -> Data:
    for path in (RATINGS, MOVIES):
        if not path.is_file():
            pytest.skip(
                f"MovieLens ml-latest-small not found at {path} "
                "(shared/data/movielens beside the project root; see its README.md)"
            )
    model_selection = pytest.importorskip("sklearn.model_selection")
    ratings = pd.read_csv(RATINGS)
    movies = pd.read_csv(MOVIES)
    train, test = model_selection.train_test_split(ratings, test_size=0.2, random_state=SEED)
    assert train.shape == (80668, 4)
    assert test.shape == (20168, 4)
    assert movies.shape == (9742, 3)
    return Data(
        train, test, movies, pl.from_pandas(train), pl.from_pandas(test), pl.from_pandas(movies)
    )


@pytest.fixture(scope="module")
def genres(data: Data) -> pl.DataFrame:
    """``movieId, features``: the movie's genres as a list of strings."""
    return data.movies.select(
        "movieId",
        features=pl.col("genres")
        .str.split("|")
        .list.eval(pl.element().filter(pl.element() != NO_GENRE)),
    )


@pytest.fixture(scope="module")
def steam(data: Data) -> pl.DataFrame:
    """``movieId, steam`` over train, best first (ties by movieId)."""
    return (
        data.train.group_by("movieId")
        .agg(n=pl.col("userId").n_unique(), avg=pl.col("rating").mean())
        .with_columns(
            steam=pl.col("avg")
            - (pl.col("avg") - 3.0) * pl.lit(2.0).pow(-pl.col("n").cast(pl.Float64).log10())
        )
        .sort(["steam", "movieId"], descending=[True, False])
        .select("movieId", "steam")
    )


def _test_users(data: Data) -> pl.DataFrame:
    return data.test.select("userId").unique().sort("userId")


def _ranked(frame: pl.DataFrame) -> pl.DataFrame:
    """``userId, movieId, rank``: rank 1.. in the frame's order within each user."""
    return frame.select(
        "userId", "movieId", rank=pl.int_range(1, pl.len() + 1, dtype=pl.Int64).over("userId")
    )


def _popularity_recs(data: Data, steam: pl.DataFrame) -> pl.DataFrame:
    top = steam.head(K).select("movieId")
    return _ranked(_test_users(data).join(top, how="cross"))


def _favourite_genre(ratings: pl.DataFrame, genres: pl.DataFrame) -> pl.DataFrame:
    """``userId, genre``: the most frequent genre of the given ratings, ties by name."""
    return (
        ratings.join(genres, on="movieId")
        .explode("features")
        .drop_nulls("features")
        .group_by("userId", "features")
        .agg(n=pl.len())
        .sort(["userId", "n", "features"], descending=[False, True, False])
        .group_by("userId", maintain_order=True)
        .first()
        .select("userId", genre="features")
    )


def _genre_recs(data: Data, steam: pl.DataFrame, genres: pl.DataFrame) -> pl.DataFrame:
    liked = _favourite_genre(data.train.filter(pl.col("rating") >= 4.0), genres)
    rated = _favourite_genre(data.train, genres)  # for users who liked nothing in train
    favourite = (
        _test_users(data)
        .join(liked, on="userId", how="left")
        .join(rated.rename({"genre": "fallback"}), on="userId", how="left")
        .select("userId", genre=pl.coalesce("genre", "fallback"))
    )
    assert favourite["genre"].null_count() == 0
    # Each genre's movies in steam order (``steam`` is sorted), with their position in it.
    by_genre = (
        steam.join(genres, on="movieId", maintain_order="left")
        .explode("features")
        .select("movieId", "steam", genre="features")
        .with_columns(position=pl.int_range(pl.len()).over("genre"))
    )
    seen = data.train.select("userId", "movieId")
    # A user rated at most n_seen of the genre's movies: the first K + n_seen suffice.
    n_seen = seen.group_by("userId").agg(n_seen=pl.len())
    ordered = (
        favourite.join(n_seen, on="userId", how="left")
        .join(by_genre, on="genre")
        .filter(pl.col("position") < K + pl.col("n_seen").fill_null(0))
        .join(seen, on=["userId", "movieId"], how="anti")
        .sort(["userId", "steam", "movieId"], descending=[False, True, False])
        .group_by("userId", maintain_order=True)
        .head(K)
    )
    return _ranked(ordered)


def _random_recs(data: Data) -> pl.DataFrame:
    rng = np.random.default_rng(SEED)
    movies = np.sort(data.train["movieId"].unique().to_numpy())
    seen = {
        int(u): np.asarray(m) for u, m in data.train.group_by("userId").agg("movieId").iter_rows()
    }
    users: list[int] = []
    items: list[int] = []
    for u in _test_users(data)["userId"].to_list():
        candidates = movies[~np.isin(movies, seen.get(u, np.empty(0, dtype=movies.dtype)))]
        users += [u] * K
        items += [int(i) for i in rng.choice(candidates, size=K, replace=False)]
    return _ranked(
        pl.DataFrame(
            {"userId": users, "movieId": items}, schema={"userId": pl.Int64, "movieId": pl.Int64}
        )
    )


@pytest.fixture(scope="module")
def recs(data: Data, steam: pl.DataFrame, genres: pl.DataFrame) -> pl.DataFrame:
    """``model, userId, movieId, rank`` for the three models, stacked."""
    frames = {
        "popularity": _popularity_recs(data, steam),
        "genre": _genre_recs(data, steam, genres),
        "random": _random_recs(data),
    }
    n_users = _test_users(data).height
    for name, frame in frames.items():
        per_user = frame.group_by("userId").agg(n=pl.len(), distinct=pl.col("movieId").n_unique())
        assert per_user.height == n_users, name
        assert (per_user["n"] == K).all(), name
        assert (per_user["distinct"] == K).all(), name
    return pl.concat(
        [f.select(pl.lit(name).alias("model"), *f.columns) for name, f in frames.items()]
    )


def _evaluate(
    data: Data, recs: pl.DataFrame, genres: pl.DataFrame, *, aggregate: bool
) -> pl.DataFrame:
    """All of METRICS with aggregate=True; the per-user ones (no corpus metric) without."""
    out = fm.evaluate(
        recs,
        data.test.select("userId", "movieId", "rating"),
        aggregate=aggregate,
        train=data.train.select("userId", "movieId"),
        catalog=data.movies.select("movieId"),
        item_features=genres,
        **{**OPTIONS, "metrics": METRICS if aggregate else PER_USER_METRICS},
    )
    assert isinstance(out, pl.DataFrame)
    return out


@pytest.fixture(scope="module")
def means(data: Data, recs: pl.DataFrame, genres: pl.DataFrame) -> dict[str, dict[str, Any]]:
    """Aggregated result, one dict of ``metric@10 -> value`` per model."""
    out = _evaluate(data, recs, genres, aggregate=True)
    assert sorted(out["model"].to_list()) == sorted(MODELS)
    return {row["model"]: row for row in out.iter_rows(named=True)}


@pytest.fixture(scope="module")
def per_user(data: Data, recs: pl.DataFrame, genres: pl.DataFrame) -> pl.DataFrame:
    """Per-user values of the per-user metrics (corpus metrics need aggregate=True)."""
    return _evaluate(data, recs, genres, aggregate=False)


# --- plain-Python references ------------------------------------------------------------------


def _lists(recs: pl.DataFrame, model: str) -> dict[int, list[int]]:
    """Each user's list of the model, best first."""
    rows = recs.filter(pl.col("model") == model).sort("userId", "rank")
    lists: dict[int, list[int]] = {}
    for u, i in rows.select("userId", "movieId").iter_rows():
        lists.setdefault(u, []).append(i)
    return lists


def _popularity(data: Data) -> tuple[dict[int, int], int]:
    """Distinct train users per movie, and the distinct train users."""
    users: dict[int, set[int]] = {}
    for u, i in data.train.select("userId", "movieId").iter_rows():
        users.setdefault(i, set()).add(u)
    n_users = len({u for s in users.values() for u in s})
    return {i: len(s) for i, s in users.items()}, n_users


def _long_tail(pop: Mapping[int, int], head_share: float = 0.2) -> set[int]:
    """Items outside the head: i is in the tail when strictly more popular items hold
    at least ``head_share`` of all train (user, item) pairs."""
    total = sum(pop.values())
    more_popular: dict[int, int] = {}  # popularity level -> pairs of strictly more popular items
    running = 0
    for level in sorted(set(pop.values()), reverse=True):
        more_popular[level] = running
        running += level * sum(1 for p in pop.values() if p == level)
    assert running == total
    return {i for i, p in pop.items() if more_popular[p] >= head_share * total}


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values)


def _intra_list_diversity(
    items: Sequence[Hashable], features: Mapping[Hashable, set[str]]
) -> float:
    sims = []
    for a, b in combinations(items, 2):
        union = features[a] | features[b]
        sims.append(len(features[a] & features[b]) / len(union) if union else 0.0)
    return 1.0 - _mean(sims)


def _genre_sets(genres: pl.DataFrame) -> dict[Hashable, set[str]]:
    return {i: set(f) for i, f in genres.iter_rows()}


# --- the tests ------------------------------------------------------------------------------


def test_popularity_list_is_the_tutorials(steam: pl.DataFrame) -> None:
    top = [318, 296, 1196, 858, 527, 260, 58559, 50, 2959, 1221]
    assert steam.head(K)["movieId"].to_list() == top


def test_popularity_list_corpus_metrics_exact(data: Data, means: dict[str, dict[str, Any]]) -> None:
    pop = means["popularity"]
    n_catalog = data.movies.height
    # Every user gets the same 10 movies: 10 distinct movies out of the catalog.
    assert pop["coverage@10"] == K / n_catalog
    # Every pair of users shares all 10: Σ c_i(c_i - 1) = k·U(U - 1), so exactly 0.
    assert pop["personalization@10"] == 0.0
    # Exposure is U on 10 items and 0 on the other n - 10: Σ_j (2j - n - 1) over the top
    # 10 positions is 10n - 100, so gini = 1 - 10/n, the largest a catalog of n items can
    # reach when every list holds 10 distinct items (the absolute maximum is 1 - 1/n).
    assert pop["gini@10"] == pytest.approx(1 - K / n_catalog, rel=RTOL, abs=0.0)
    assert pop["gini@10"] > 0.998
    for model in MODELS:
        assert means[model]["gini@10"] <= pop["gini@10"] * (1 + RTOL), model


def test_popularity_list_diversity(
    recs: pl.DataFrame,
    genres: pl.DataFrame,
    per_user: pl.DataFrame,
    means: dict[str, dict[str, Any]],
) -> None:
    lists = _lists(recs, "popularity")
    top = lists[min(lists)]
    assert all(items == top for items in lists.values())
    expected = _intra_list_diversity(top, _genre_sets(genres))
    values = per_user.filter(pl.col("model") == "popularity")["diversity@10"]
    assert values.len() == len(lists)
    assert values.null_count() == 0
    # The same list, the same value for every user, to the last bit: the per-user sum of
    # pair similarities is taken in sorted order, whatever order the pair rows arrive in.
    assert values.n_unique() == 1
    for value in values:
        assert value == pytest.approx(expected, rel=RTOL, abs=0.0)
    assert means["popularity"]["diversity@10"] == pytest.approx(expected, rel=RTOL, abs=0.0)


@pytest.mark.parametrize("model", MODELS)
def test_corpus_metrics_by_hand(
    data: Data, recs: pl.DataFrame, means: dict[str, dict[str, Any]], model: str
) -> None:
    """coverage, personalization (pairing users) and gini recomputed in plain Python."""
    lists = [set(items) for items in _lists(recs, model).values()]
    n_catalog = data.movies.height
    exposure: dict[int, int] = {}
    for items in lists:
        for i in items:
            exposure[i] = exposure.get(i, 0) + 1
    coverage = len(exposure) / n_catalog
    overlaps = [len(a & b) / K for a, b in combinations(lists, 2)]
    personalization = 1.0 - _mean(overlaps)
    counts = sorted([0] * (n_catalog - len(exposure)) + list(exposure.values()))
    gini = sum((2 * j - n_catalog - 1) * c for j, c in enumerate(counts, start=1)) / (
        n_catalog * sum(counts)
    )
    got = means[model]
    assert got["coverage@10"] == coverage
    assert got["personalization@10"] == pytest.approx(personalization, rel=RTOL, abs=1e-15)
    assert got["gini@10"] == pytest.approx(gini, rel=RTOL, abs=0.0)


@pytest.mark.parametrize("model", MODELS)
def test_novelty_arp_aplt_by_hand(
    data: Data, recs: pl.DataFrame, means: dict[str, dict[str, Any]], model: str
) -> None:
    """novelty, arp and aplt recomputed from train in plain Python, per user then averaged."""
    pop, n_train_users = _popularity(data)
    tail = _long_tail(pop)
    lists = _lists(recs, model)
    novelty = [
        _mean([-math.log2(pop[i] / n_train_users) for i in items]) for items in lists.values()
    ]
    arp = [_mean([float(pop[i]) for i in items]) for items in lists.values()]
    aplt = [sum(i in tail for i in items) / len(items) for items in lists.values()]
    got = means[model]
    assert got["n_users"] == len(lists)
    assert got["novelty@10"] == pytest.approx(_mean(novelty), rel=RTOL, abs=0.0)
    assert got["arp@10"] == pytest.approx(_mean(arp), rel=RTOL, abs=0.0)
    assert got["aplt@10"] == pytest.approx(_mean(aplt), rel=RTOL, abs=0.0)
    if model == "popularity":
        # The same list for everyone: the per-user value is the mean over the 10 movies.
        assert got["novelty@10"] == pytest.approx(novelty[0], rel=RTOL, abs=0.0)
        assert got["arp@10"] == pytest.approx(arp[0], rel=RTOL, abs=0.0)
        # The tutorial's top 10 are all in the short head.
        assert got["aplt@10"] == 0.0


@pytest.mark.parametrize("model", ["genre", "random"])
def test_personalised_models_beat_popularity_beyond_accuracy(
    means: dict[str, dict[str, Any]], model: str
) -> None:
    pop, other = means["popularity"], means[model]
    # Coverage counts distinct recommended movies: popularity shows 10 in all; the other
    # model's lists differ between users (several genres / random draws), so more than 10.
    assert other["coverage@10"] > pop["coverage@10"]
    # Novelty is the mean -log2(pop/N): the steam top 10 are among the most-rated movies
    # of train, and the other model skips movies the user rated and draws from a genre's
    # (or the whole) catalog, so its movies are rated by fewer users.
    assert other["novelty@10"] > pop["novelty@10"]
    # Personalization is 1 - mean overlap between users: 0 for identical lists, > 0 as
    # soon as two users' lists differ.
    assert other["personalization@10"] > pop["personalization@10"]
    # arp is the mean distinct-user count of the listed movies: the mirror of novelty.
    assert other["arp@10"] < pop["arp@10"]
    # aplt is the share of long-tail movies: 0 for the steam top 10 (all in the head),
    # positive once a list reaches past the head.
    assert other["aplt@10"] > pop["aplt@10"]
    # Gini of exposure: 10 movies shown to everyone is the most concentrated exposure
    # 10-item lists allow; spreading exposure over more movies lowers it.
    assert other["gini@10"] < pop["gini@10"]


def test_genre_lists_share_a_genre(
    recs: pl.DataFrame, genres: pl.DataFrame, per_user: pl.DataFrame
) -> None:
    """Every pair of a genre list shares the favourite genre: Jaccard > 0, diversity < 1."""
    features = _genre_sets(genres)
    lists = _lists(recs, "genre")
    got = dict(
        per_user.filter(pl.col("model") == "genre").select("userId", "diversity@10").iter_rows()
    )
    assert got.keys() == lists.keys()
    for u, items in lists.items():
        shared = set.intersection(*(features[i] for i in items))
        assert shared, u
        expected = _intra_list_diversity(items, features)
        assert expected < 1.0
        assert got[u] == pytest.approx(expected, rel=RTOL, abs=0.0), u


def test_pandas_inputs_give_the_polars_result(
    data: Data, recs: pl.DataFrame, genres: pl.DataFrame
) -> None:
    """The same evaluation from pandas frames (sklearn's shuffled index, object lists)."""
    features = data.movies_pd[["movieId"]].assign(
        features=[[g for g in s.split("|") if g != NO_GENRE] for s in data.movies_pd["genres"]]
    )
    assert features["features"].dtype == object
    out = fm.evaluate(
        recs.to_pandas(),
        data.test_pd[["userId", "movieId", "rating"]],
        aggregate=True,
        train=data.train_pd[["userId", "movieId"]],
        catalog=data.movies_pd[["movieId"]],
        item_features=features,
        **OPTIONS,
    )
    assert isinstance(out, pd.DataFrame)
    converted = pl.from_pandas(out)
    assert isinstance(converted, pl.DataFrame)
    expected = _evaluate(data, recs, genres, aggregate=True)
    # Bit for bit.
    assert_frame_equal(converted, expected, check_exact=True)


def test_row_order_does_not_change_results(
    data: Data, recs: pl.DataFrame, genres: pl.DataFrame, per_user: pl.DataFrame
) -> None:
    """Shuffled recommendation rows give the same values, bit for bit."""
    shuffled = recs.sample(fraction=1.0, shuffle=True, seed=SEED)
    expected = _evaluate(data, recs, genres, aggregate=True)
    got = _evaluate(data, shuffled, genres, aggregate=True)
    assert_frame_equal(got, expected, check_exact=True)
    got_per_user = _evaluate(data, shuffled, genres, aggregate=False)
    assert_frame_equal(got_per_user, per_user, check_exact=True)
