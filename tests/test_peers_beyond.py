"""Cross-checks of the beyond-accuracy and rating metrics against peer libraries.

Like tests/test_peers.py for the ranking metrics: each peer's convention was read from its
installed source, the comment above each section maps the peer's inputs and options to
frame_metrics' ones, and where the definitions differ a test states the difference as
explicit arithmetic (or as the peer's error, where the peer refuses the input).

Peers, each test skipping when its peer is not installed:

- RecTools 0.19.0 (``rectools.metrics``): CatalogCoverage, MeanInvUserFreq,
  AvgRecPopularity, IntraListDiversity (with cosine and Jaccard distance calculators).
- Microsoft Recommenders 1.2.1 (``recommenders.evaluation.python_evaluation``):
  catalog_coverage, user_diversity (item_feature_vector), rmse, mae. Under pandas 3 its
  novelty, diversity, serendipity and distributional_coverage crash or give NaN, so they
  are not used.
- recmetrics 0.1.5 (its ``metrics.py`` loaded directly: ``import recmetrics`` also imports
  the plots, which need plotly): personalization, intra_list_similarity,
  prediction_coverage, novelty, mse, rmse.

Not compared: gini and aplt (no peer computes them); serendipity (RecTools' Serendipity
weighs relevant items by rank vs popularity rank, a different definition; Recommenders'
serendipity crashes under pandas 3).

Data: seeded random train interactions (distinct (user, item) pairs, popularity skewed),
recommendations that never repeat a user's train item (Recommenders refuses those), a
few cold items (recommended, never in train) and users without train history; one data
set with lists of 10 for every user, one with ragged lists (1 to 10 items, rank gaps,
some lists starting at rank 2). Tolerance: 1e-12 relative.
"""

from __future__ import annotations

import importlib.util
import math
import os
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import polars as pl
import pytest

import frame_metrics as fm
from tests.conftest import Constructor, assert_kind, to_polars
from tests.test_peers import ATOL, RTOL, assert_values, quiet

UserValues = dict[int, float]

LIST_LENGTH = 10
#: Cutoffs for the list metrics; diversity needs two items, so it also runs at k = 1
#: only to check the single-item difference.
KS: tuple[int, ...] = (1, 2, 3, 5, 10)
DIVERSITY_KS: tuple[int, ...] = (2, 3, 5, 10)
N_ITEMS = 50
#: Items >= this one are never in train: cold items.
N_WARM = 45
GENRES = ("action", "comedy", "drama", "horror", "romance", "scifi", "thriller")


# --- data ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Beyond:
    """Recommendations (user, item, rank), train (user, item), catalog and item features."""

    recs: pl.DataFrame
    train: pl.DataFrame
    catalog: pl.DataFrame  # item
    vectors: pl.DataFrame  # item, features: list[f64] -> cosine
    categories: pl.DataFrame  # item, features: list[str] -> Jaccard

    def lists(self, k: int) -> dict[int, list[int]]:
        """Each user's items with rank <= k, best first (users with at least one)."""
        out: dict[int, list[int]] = {}
        for user, item, _ in self.recs.filter(pl.col("rank") <= k).sort("user", "rank").iter_rows():
            out.setdefault(int(user), []).append(int(item))
        return out

    def popularity(self) -> dict[int, int]:
        """Distinct train users per item."""
        counts = self.train.group_by("item").agg(pl.col("user").n_unique())
        return {int(i): int(n) for i, n in counts.iter_rows()}

    def n_train_users(self) -> int:
        return int(self.train["user"].n_unique())


def make_beyond(seed: int, *, ragged: bool) -> Beyond:
    """220 train users (5-25 distinct items each, popularity skewed), 200 users with recs.

    Users 0-9 have recommendations but no train rows, users 200-229 train rows only.
    Items 45-49 are cold. Each list avoids the user's train items; it has 10 items at
    ranks 1-10, or (``ragged``) 1-10 items whose ranks start at 1 or 2 and step by 1 or 2.
    """
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, N_WARM + 1) ** 0.9
    weights /= weights.sum()
    train_rows: list[tuple[int, int]] = []
    history: dict[int, set[int]] = {}
    for user in range(10, 230):
        items = rng.choice(N_WARM, size=int(rng.integers(5, 26)), replace=False, p=weights)
        history[user] = {int(i) for i in items}
        train_rows.extend((user, int(i)) for i in items)
    pop = np.bincount([i for _, i in train_rows], minlength=N_ITEMS).astype(np.float64)
    rec_rows: list[tuple[int, int, int]] = []
    for user in range(200):
        candidates = np.array([i for i in range(N_ITEMS) if i not in history.get(user, set())])
        w = np.sqrt(pop[candidates] + 2.0)
        length = int(rng.integers(1, LIST_LENGTH + 1)) if ragged else LIST_LENGTH
        items = rng.choice(candidates, size=length, replace=False, p=w / w.sum())
        if ragged:
            steps = rng.choice([1, 1, 1, 2], size=length)
            steps[0] = rng.choice([1, 1, 1, 2])
            ranks = np.cumsum(steps)
        else:
            ranks = np.arange(1, length + 1)
        rec_rows.extend((user, int(i), int(r)) for i, r in zip(items, ranks, strict=True))
    recs = pl.DataFrame(
        rec_rows, schema={"user": pl.Int64, "item": pl.Int64, "rank": pl.Int64}, orient="row"
    ).sample(fraction=1.0, shuffle=True, seed=seed)
    train = pl.DataFrame(
        train_rows, schema={"user": pl.Int64, "item": pl.Int64}, orient="row"
    ).sample(fraction=1.0, shuffle=True, seed=seed + 1)
    vectors = rng.normal(size=(N_ITEMS, 8))
    genres = [
        sorted(rng.choice(GENRES, size=int(rng.integers(1, 4)), replace=False).tolist())
        for _ in range(N_ITEMS)
    ]
    ids = list(range(N_ITEMS))
    return Beyond(
        recs=recs,
        train=train,
        catalog=pl.DataFrame({"item": ids}, schema={"item": pl.Int64}),
        vectors=pl.DataFrame(
            {"item": ids, "features": vectors.tolist()},
            schema={"item": pl.Int64, "features": pl.List(pl.Float64)},
        ),
        categories=pl.DataFrame(
            {"item": ids, "features": genres},
            schema={"item": pl.Int64, "features": pl.List(pl.String)},
        ),
    )


@pytest.fixture(scope="module")
def full() -> Beyond:
    """Every user has a list of exactly 10 (recmetrics needs equal lengths)."""
    return make_beyond(20240611, ragged=False)


@pytest.fixture(scope="module")
def ragged() -> Beyond:
    return make_beyond(8675309, ragged=True)


@pytest.fixture(scope="module", params=["full", "ragged"])
def beyond(request: pytest.FixtureRequest, full: Beyond, ragged: Beyond) -> Beyond:
    return full if request.param == "full" else ragged


@dataclass(frozen=True)
class Ratings:
    """True ratings (user, item, relevance) and predictions (user, item, prediction)."""

    truth: pl.DataFrame
    preds: pl.DataFrame


def make_ratings(seed: int) -> Ratings:
    """200 users with 5-20 half-star ratings; predictions for about 80% of them.

    Users 0-189 also get 0-3 predictions for items they did not rate (pairs only in recs),
    users 190-199 have ratings and no predictions, users 200-209 predictions only.
    """
    rng = np.random.default_rng(seed)
    truth_rows: list[tuple[int, int, float]] = []
    pred_rows: list[tuple[int, int, float]] = []
    for user in range(210):
        items = rng.choice(N_ITEMS, size=int(rng.integers(5, 21)), replace=False)
        ratings = rng.integers(1, 11, size=items.size) / 2.0
        if user < 200:
            truth_rows.extend((user, int(i), float(r)) for i, r in zip(items, ratings, strict=True))
        if user >= 190 and user < 200:
            continue
        predicted = rng.random(items.size) < 0.8
        noisy = np.clip(ratings + rng.normal(0.0, 0.9, items.size), 0.5, 5.0)
        pred_rows.extend(
            (user, int(i), float(p))
            for i, p, keep in zip(items, noisy, predicted, strict=True)
            if keep
        )
        unrated = np.setdiff1d(np.arange(N_ITEMS), items)
        extra = rng.choice(unrated, size=int(rng.integers(0, 4)), replace=False)
        pred_rows.extend((user, int(i), float(rng.uniform(0.5, 5.0))) for i in extra)
    truth = pl.DataFrame(
        truth_rows,
        schema={"user": pl.Int64, "item": pl.Int64, "relevance": pl.Float64},
        orient="row",
    ).sample(fraction=1.0, shuffle=True, seed=seed)
    preds = pl.DataFrame(
        pred_rows,
        schema={"user": pl.Int64, "item": pl.Int64, "prediction": pl.Float64},
        orient="row",
    ).sample(fraction=1.0, shuffle=True, seed=seed + 1)
    return Ratings(truth, preds)


@pytest.fixture(scope="module")
def ratings() -> Ratings:
    return make_ratings(31337)


def matched_pairs(r: Ratings) -> pl.DataFrame:
    """The (user, item) pairs in both frames, with relevance and prediction."""
    return r.truth.join(r.preds, on=["user", "item"], how="inner").sort("user", "item")


# --- calling frame_metrics -------------------------------------------------------------------


def evaluate(
    constructor: Constructor, recs: pl.DataFrame, truth: pl.DataFrame | None = None, **options: Any
) -> pl.DataFrame:
    """``fm.evaluate`` with every frame (recs, truth, train, catalog, ...) of one kind."""
    framed = {
        name: constructor(value) if isinstance(value, pl.DataFrame) else value
        for name, value in options.items()
    }
    out = fm.evaluate(constructor(recs), None if truth is None else constructor(truth), **framed)
    assert_kind(out, constructor)
    return to_polars(out)


def per_user(result: pl.DataFrame, column: str) -> UserValues:
    """A per-user column as {user: value}, null values (users left out) dropped."""
    return {
        int(u): float(v)
        for u, v in zip(result["user"].to_list(), result[column].to_list(), strict=True)
        if v is not None
    }


def mean_of(result: pl.DataFrame, column: str) -> float:
    value = result[column].item()
    assert value is not None, column
    return float(value)


def assert_close(got: float, expected: float, label: str) -> None:
    assert got == pytest.approx(expected, rel=RTOL, abs=ATOL), label


def series(values: Any) -> UserValues:
    """A peer's per-user pandas Series as {user: value}, NaN dropped."""
    return {int(u): float(v) for u, v in values.items() if not pd.isna(v)}


# --- RecTools (rectools.metrics) ---------------------------------------------------------------
# Source: rectools 0.19.0, rectools/metrics/{catalog,novelty,popularity,diversity}.py.
# Inputs: reco = recs renamed user -> user_id, item -> item_id (rank kept: rank VALUES are
# used, gaps allowed, like frame_metrics); prev_interactions = train renamed the same way
# (== train=); catalog = the catalog's item ids (== catalog=).
# - CatalogCoverage(k, normalize=True).calc(reco, catalog)
#   = nunique(items with rank <= k) / len(catalog)              == coverage@k, catalog=catalog
# - MeanInvUserFreq(k).calc_per_user(reco, prev_interactions): mean over rank <= k of
#   -log2(nunique train users of i / nunique train users), cold items as 1 user
#                                                               == novelty@k, train=train
#   A user with no item within k gets NaN and .calc skips it (frame_metrics leaves the user
#   out: same mean).
# - AvgRecPopularity(k): mean over rank <= k of the item's train ROW count (value_counts),
#   0 for cold items                                           == arp@k when train has no
#   duplicate (user, item) rows; frame_metrics counts distinct users (test below).
# - IntraListDiversity(k, calculator): mean over pairs within k of the calculator's
#   distance; 1 - cosine (CosineDistance below) == diversity@k with vector features, 1 -
#   Jaccard == diversity@k with category features. A user with ONE item within k gets 0;
#   frame_metrics gives null and leaves the user out of the mean (test below).


def rectools_frame(df: pl.DataFrame) -> pd.DataFrame:
    return df.rename({"user": "user_id", "item": "item_id"}).to_pandas()


def cosine_distance(rt: Any, vectors: pl.DataFrame) -> Any:
    """A RecTools distance calculator: 1 - cosine of the items' feature vectors."""
    table = pd.DataFrame(np.array(vectors["features"].to_list()), index=vectors["item"].to_list())

    class CosineDistance(rt.PairwiseDistanceCalculator):  # type: ignore[misc]
        def _get_distances_for_item_pairs(self, a: Any, b: Any) -> Any:
            x = table.reindex(a).to_numpy(float)
            y = table.reindex(b).to_numpy(float)
            dot = (x * y).sum(axis=1)
            return 1.0 - dot / (np.linalg.norm(x, axis=1) * np.linalg.norm(y, axis=1))

    return CosineDistance()


def jaccard_distance(rt: Any, categories: pl.DataFrame) -> Any:
    """A RecTools distance calculator: 1 - Jaccard of the items' category sets."""
    sets = {
        int(i): frozenset(c)
        for i, c in zip(categories["item"].to_list(), categories["features"].to_list(), strict=True)
    }

    class JaccardDistance(rt.PairwiseDistanceCalculator):  # type: ignore[misc]
        def _get_distances_for_item_pairs(self, a: Any, b: Any) -> Any:
            return np.array(
                [
                    1.0 - len(sets[i] & sets[j]) / len(sets[i] | sets[j])
                    for i, j in zip(a, b, strict=True)
                ]
            )

    return JaccardDistance()


def test_rectools_coverage_novelty_arp(constructor: Constructor, beyond: Beyond) -> None:
    rt = pytest.importorskip("rectools.metrics")
    reco, prev = rectools_frame(beyond.recs), rectools_frame(beyond.train)
    catalog = beyond.catalog["item"].to_numpy()
    options: dict[str, Any] = {
        "metrics": ["novelty", "arp", "coverage"],
        "k": list(KS),
        "train": beyond.train,
        "catalog": beyond.catalog,
    }
    out = evaluate(
        constructor, beyond.recs, metrics=["novelty", "arp"], k=list(KS), train=beyond.train
    )
    agg = evaluate(constructor, beyond.recs, aggregate=True, **options)
    with quiet():
        for k in KS:
            miuf, arp = rt.MeanInvUserFreq(k), rt.AvgRecPopularity(k)
            assert_values(
                per_user(out, f"novelty@{k}"), series(miuf.calc_per_user(reco, prev)), f"MIUF({k})"
            )
            assert_values(
                per_user(out, f"arp@{k}"), series(arp.calc_per_user(reco, prev)), f"ARP({k})"
            )
            assert_close(mean_of(agg, f"novelty@{k}"), float(miuf.calc(reco, prev)), f"MIUF({k})")
            assert_close(mean_of(agg, f"arp@{k}"), float(arp.calc(reco, prev)), f"ARP({k})")
            coverage = rt.CatalogCoverage(k, normalize=True).calc(reco, catalog)
            assert_close(mean_of(agg, f"coverage@{k}"), float(coverage), f"CatalogCoverage({k})")


def test_rectools_arp_counts_train_rows(constructor: Constructor, full: Beyond) -> None:
    # Difference: AvgRecPopularity counts train ROWS per item (value_counts), frame_metrics
    # distinct users. Repeat some train rows (a user who clicked twice): per user,
    # RecTools = frame_metrics + Σ_{i in L[:k]} extra_rows(i) / |L[:k]|, where extra_rows(i)
    # = rows(i) - distinct users(i). MeanInvUserFreq counts distinct users like frame_metrics,
    # so it still agrees.
    rt = pytest.importorskip("rectools.metrics")
    repeated = full.train.sample(n=400, seed=5)
    train = pl.concat([full.train, repeated, repeated.head(100)])
    extra = {int(i): int(n) for i, n in repeated["item"].value_counts().iter_rows()}
    for i, n in repeated.head(100)["item"].value_counts().iter_rows():
        extra[int(i)] += int(n)
    reco, prev = rectools_frame(full.recs), rectools_frame(train)
    k = 5
    out = evaluate(constructor, full.recs, metrics=["arp", "novelty"], k=k, train=train)
    ours = per_user(out, "arp@5")
    with quiet():
        peer = series(rt.AvgRecPopularity(k).calc_per_user(reco, prev))
        miuf = series(rt.MeanInvUserFreq(k).calc_per_user(reco, prev))
    lists = full.lists(k)
    shifted = {
        u: v + sum(extra.get(i, 0) for i in lists[u]) / len(lists[u]) for u, v in ours.items()
    }
    assert_values(shifted, peer, "AvgRecPopularity counts rows")
    assert any(shifted[u] != ours[u] for u in ours), "the repeated rows should change some users"
    assert_values(per_user(out, "novelty@5"), miuf, "MIUF with repeated train rows")


@pytest.mark.parametrize("features", ["vectors", "categories"])
def test_rectools_intra_list_diversity(
    constructor: Constructor, beyond: Beyond, features: str
) -> None:
    rt = pytest.importorskip("rectools.metrics")
    table = beyond.vectors if features == "vectors" else beyond.categories
    calculator = (cosine_distance if features == "vectors" else jaccard_distance)(rt, table)
    reco = rectools_frame(beyond.recs)
    similarity = "cosine" if features == "vectors" else "jaccard"
    common: dict[str, Any] = {"metrics": "diversity", "k": list(KS), "item_features": table}
    out = evaluate(constructor, beyond.recs, similarity=similarity, **common)
    agg = evaluate(constructor, beyond.recs, similarity=similarity, aggregate=True, **common)
    for k in KS:
        with quiet():
            peer = series(rt.IntraListDiversity(k, calculator).calc_per_user(reco))
        lists = beyond.lists(k)
        several = {u for u, items in lists.items() if len(items) >= 2}
        single = set(lists) - several
        ours = per_user(out, f"diversity@{k}")
        label = f"IntraListDiversity({k}) {similarity}"
        assert_values(ours, {u: peer[u] for u in several}, label)
        # Difference: RecTools scores a one-item list 0, frame_metrics leaves it out
        # (null), so RecTools' mean = frame_metrics' mean * |several| / |several + single|.
        assert set(peer) == several | single
        assert all(peer[u] == 0.0 for u in single), label
        if several:
            expected = mean_of(agg, f"diversity@{k}") * len(several) / len(lists)
            assert_close(expected, float(np.mean(list(peer.values()))), label + " mean")
        else:
            # k = 1 on the full lists: no user has a pair, the mean is undefined (null;
            # RecTools: 0)
            assert agg[f"diversity@{k}"].item() is None


def test_rectools_docstring_examples(constructor: Constructor) -> None:
    # The examples of MeanInvUserFreq and AvgRecPopularity in RecTools' docstrings (their
    # stated outputs), through frame_metrics with prev_interactions as train (no repeated
    # rows, so row counts are distinct users).
    reco = pl.DataFrame({"user": [1, 2, 2, 3, 3], "item": [3, 2, 3, 1, 2], "rank": [1, 1, 2, 1, 2]})
    train = pl.DataFrame({"user": [1, 1, 2, 3], "item": [1, 2, 1, 1]})
    out = evaluate(constructor, reco, metrics="novelty", k=[1, 3], train=train)
    log3 = math.log2(3)
    assert per_user(out, "novelty@1") == pytest.approx({1: log3, 2: log3, 3: 0.0}, rel=RTOL)
    assert per_user(out, "novelty@3") == pytest.approx({1: log3, 2: log3, 3: log3 / 2}, rel=RTOL)
    reco = pl.DataFrame(
        {
            "user": [1, 1, 2, 2, 2, 3, 3],
            "item": [1, 2, 3, 1, 2, 3, 2],
            "rank": [1, 2, 1, 2, 3, 1, 2],
        }
    )
    train = pl.DataFrame({"user": [1, 1, 2, 2, 3, 3], "item": [1, 2, 1, 3, 1, 2]})
    out = evaluate(constructor, reco, metrics="arp", k=[1, 3], train=train)
    assert per_user(out, "arp@1") == {1: 3.0, 2: 1.0, 3: 1.0}
    assert per_user(out, "arp@3") == {1: 2.5, 2: 2.0, 3: 1.5}


# --- Recommenders (recommenders.evaluation.python_evaluation) ---------------------------------
# Source: recommenders 1.2.1, python_evaluation.py catalog_coverage, user_diversity
# (_get_intralist_similarity, _get_item_feature_similarity), rmse, mae
# (merge_rating_true_pred). Columns userID, itemID (same dtypes in both frames).
# - Every row of reco_df counts (no cutoff): pass the rows with rank <= k. reco_df must not
#   repeat a (user, item) pair of train_df (the wrapper raises), true of the data here.
# - catalog_coverage(train_df, reco_df) = nunique reco items / nunique TRAIN items
#                                        == coverage@k with catalog = the train items
#   (when no cold item is recommended; with cold items see the test below).
# - user_diversity(train_df, reco_df, item_feature_df, item_sim_measure="item_feature_vector")
#   = 1 - mean over the list's item pairs of the cosine of the items' feature vectors
#   (item_feature_df: itemID, features as numpy arrays); users with one item have no pair
#   and no row                           == diversity@k with vector features (per user; its
#   mean over those rows is frame_metrics' mean).
# - rmse, mae: inner join of rating_true and rating_pred on (userID, itemID), pooled over
#   the pairs                             == rmse, mae with aggregate=True (truth carries the
#   rating as relevance, recs the prediction); on one user's rows == the per-user value.


def recommenders_frame(df: pl.DataFrame) -> pd.DataFrame:
    return df.rename({"user": "userID", "item": "itemID"}).to_pandas()


def recommenders_module() -> Any:
    pytest.importorskip("recommenders")
    return pytest.importorskip("recommenders.evaluation.python_evaluation")


def warm_only(b: Beyond) -> pl.DataFrame:
    return b.recs.filter(pl.col("item").is_in(b.train["item"].unique().to_list()))


def test_recommenders_catalog_coverage(constructor: Constructor, beyond: Beyond) -> None:
    pe = recommenders_module()
    recs = warm_only(beyond)
    train_items = beyond.train.select(pl.col("item").unique())
    out = evaluate(
        constructor, recs, metrics="coverage", k=list(KS), aggregate=True, catalog=train_items
    )
    train = recommenders_frame(beyond.train)
    for k in KS:
        reco = recommenders_frame(recs.filter(pl.col("rank") <= k).drop("rank"))
        with quiet():
            peer = float(pe.catalog_coverage(train, reco))
        assert_close(mean_of(out, f"coverage@{k}"), peer, f"catalog_coverage k={k}")


def test_recommenders_catalog_coverage_counts_cold_items(
    constructor: Constructor, full: Beyond
) -> None:
    # Difference: Recommenders divides by the train items, and counts recommended cold
    # items (not in train) in the numerator; frame_metrics needs every recommended item in
    # the catalog. With the full catalog (train + cold items):
    # Recommenders = frame_metrics coverage * |catalog| / |train items|, which can pass 1.
    pe = recommenders_module()
    n_train_items = full.train["item"].n_unique()
    assert full.recs.filter(pl.col("item") >= N_WARM).height > 0  # cold items recommended
    out = evaluate(
        constructor,
        full.recs,
        metrics="coverage",
        k=LIST_LENGTH,
        aggregate=True,
        catalog=full.catalog,
    )
    with quiet():
        peer = float(
            pe.catalog_coverage(
                recommenders_frame(full.train), recommenders_frame(full.recs.drop("rank"))
            )
        )
    expected = mean_of(out, f"coverage@{LIST_LENGTH}") * N_ITEMS / n_train_items
    assert_close(expected, peer, "catalog_coverage over train items")
    assert peer > 1.0


def test_recommenders_user_diversity(constructor: Constructor, beyond: Beyond) -> None:
    pe = recommenders_module()
    features = pd.DataFrame(
        {
            "itemID": beyond.vectors["item"].to_list(),
            "features": [np.array(v) for v in beyond.vectors["features"].to_list()],
        }
    )
    train = recommenders_frame(beyond.train)
    common: dict[str, Any] = {"metrics": "diversity", "k": list(DIVERSITY_KS)}
    common["item_features"] = beyond.vectors
    out = evaluate(constructor, beyond.recs, **common)
    agg = evaluate(constructor, beyond.recs, aggregate=True, **common)
    for k in DIVERSITY_KS:
        reco = recommenders_frame(beyond.recs.filter(pl.col("rank") <= k).drop("rank"))
        with quiet():
            peer = pe.user_diversity(
                train, reco, item_feature_df=features, item_sim_measure="item_feature_vector"
            )
        expected = {
            int(u): float(v) for u, v in zip(peer["userID"], peer["user_diversity"], strict=True)
        }
        assert_values(per_user(out, f"diversity@{k}"), expected, f"user_diversity k={k}")
        assert_close(
            mean_of(agg, f"diversity@{k}"),
            float(np.mean(list(expected.values()))),
            f"mean user_diversity k={k}",
        )


def test_recommenders_rmse_mae(constructor: Constructor, ratings: Ratings) -> None:
    pe = recommenders_module()
    rating_true = recommenders_frame(ratings.truth.rename({"relevance": "rating"}))
    rating_pred = recommenders_frame(ratings.preds)
    metrics = ["mse", "rmse", "mae"]
    agg = evaluate(constructor, ratings.preds, ratings.truth, metrics=metrics, aggregate=True)
    out = evaluate(constructor, ratings.preds, ratings.truth, metrics=metrics)
    pairs = matched_pairs(ratings)
    assert agg["n_pairs"].item() == pairs.height
    with quiet():
        rmse = float(pe.rmse(rating_true, rating_pred))
        mae = float(pe.mae(rating_true, rating_pred))
    assert_close(mean_of(agg, "rmse"), rmse, "rmse pooled")
    assert_close(mean_of(agg, "mae"), mae, "mae pooled")
    assert_close(mean_of(agg, "mse"), rmse**2, "mse pooled")
    # Per user: the peer on that user's rows only; users with no matched pair have no row.
    rated = set(pairs["user"].to_list())
    assert set(out["user"].to_list()) == rated
    peer_rmse: UserValues = {}
    peer_mae: UserValues = {}
    with quiet():
        for user in rated:
            t = rating_true[rating_true["userID"] == user]
            p = rating_pred[rating_pred["userID"] == user]
            peer_rmse[user] = float(pe.rmse(t, p))
            peer_mae[user] = float(pe.mae(t, p))
    assert_values(per_user(out, "rmse"), peer_rmse, "rmse per user")
    assert_values(per_user(out, "mae"), peer_mae, "mae per user")


# --- recmetrics (metrics.py) --------------------------------------------------------------------
# Source: recmetrics 0.1.5, recmetrics/metrics.py. Inputs are lists of item lists, one per
# user, in rank order: pass each user's items with rank <= k (equal lengths where noted).
# - personalization(lists) = 1 - mean over user pairs of cos(binary vectors)
#   = 1 - mean |Lu ∩ Lv| / k when every list has exactly k items   == personalization@k;
#   lists of unequal length raise (np.array of a ragged list), see the tests below.
# - intra_list_similarity(lists, feature_df) = mean over users of the mean cosine of the
#   list's item pairs (feature_df: one row per item, indexed by item, one column per
#   feature dimension)                  == 1 - diversity@k (vectors) per user and in the mean;
#   a one-item list raises ZeroDivisionError (frame_metrics: null), test below.
# - prediction_coverage(lists, catalog) = 100 * nunique items / len(catalog) rounded to 2
#   decimals                            == round(100 * coverage@k, 2)
# - novelty(lists, pop, u, n) = (mean over users of Σ_{i in list} -log2(pop[i] / u) / n,
#   the per-user values): pop = distinct train users per item with cold items set to 1, u =
#   train users, n = k with lists of k items     == novelty@k; it divides by n, not by the
#   list's length (test below) and has no cold-item rule (pop[i] must exist).
# - mse(y, yhat), rmse(y, yhat): sklearn on aligned arrays: pass the matched pairs
#                                         == mse, rmse with aggregate=True.


def recmetrics_module() -> Any:
    """recmetrics' metrics.py, loaded without the package (its plots import plotly)."""
    pytest.importorskip("matplotlib")  # metrics.py imports matplotlib.pyplot
    pytest.importorskip("sklearn")
    pytest.importorskip("scipy")
    spec = importlib.util.find_spec("recmetrics")
    if spec is None or spec.origin is None:
        pytest.skip("recmetrics is not installed")
    path = os.path.join(os.path.dirname(spec.origin), "metrics.py")
    if not os.path.isfile(path):
        pytest.skip(f"recmetrics has no {path}")
    loader_spec = importlib.util.spec_from_file_location("recmetrics_metrics", path)
    assert loader_spec is not None
    assert loader_spec.loader is not None
    module = importlib.util.module_from_spec(loader_spec)
    loader_spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def rm() -> Any:
    return recmetrics_module()


def feature_table(b: Beyond) -> pd.DataFrame:
    """recmetrics' feature_df: indexed by item, one column per vector dimension."""
    matrix = np.array(b.vectors["features"].to_list(), dtype=np.float64)
    table: pd.DataFrame = pd.DataFrame(matrix, index=b.vectors["item"].to_list())
    return table


def test_recmetrics_personalization_coverage_novelty(
    constructor: Constructor, full: Beyond, rm: Any
) -> None:
    metrics = ["personalization", "coverage", "novelty"]
    out = evaluate(constructor, full.recs, metrics="novelty", k=list(KS), train=full.train)
    agg = evaluate(
        constructor,
        full.recs,
        metrics=metrics,
        k=list(KS),
        aggregate=True,
        train=full.train,
        catalog=full.catalog,
    )
    catalog = full.catalog["item"].to_list()
    pop = {i: max(n, 1) for i, n in ({i: 0 for i in catalog} | full.popularity()).items()}
    for k in KS:
        lists = full.lists(k)
        users = sorted(lists)
        assert all(len(lists[u]) == k for u in users)
        predicted = [lists[u] for u in users]
        with quiet():
            personalization = float(rm.personalization(predicted))
            coverage = float(rm.prediction_coverage(predicted, catalog))
            novelty, novelties = rm.novelty(predicted, pop, full.n_train_users(), k)
        assert_close(
            mean_of(agg, f"personalization@{k}"), personalization, f"personalization k={k}"
        )
        assert round(mean_of(agg, f"coverage@{k}") * 100, 2) == coverage, f"coverage k={k}"
        assert_values(
            per_user(out, f"novelty@{k}"),
            {u: float(v) for u, v in zip(users, novelties, strict=True)},
            f"novelty k={k}",
        )
        assert_close(mean_of(agg, f"novelty@{k}"), float(novelty), f"novelty k={k}")


@pytest.fixture(scope="module")
def recmetrics_ils(full: Beyond, rm: Any) -> dict[int, tuple[float, UserValues]]:
    """Per k: intra_list_similarity of all lists, and 1 - it on each user's list alone."""
    table = feature_table(full)
    out: dict[int, tuple[float, UserValues]] = {}
    for k in DIVERSITY_KS:
        lists = full.lists(k)
        users = sorted(lists)
        with quiet():
            mean_similarity = float(rm.intra_list_similarity([lists[u] for u in users], table))
            per = {u: 1.0 - float(rm.intra_list_similarity([lists[u]], table)) for u in users}
        out[k] = (mean_similarity, per)
    return out


def test_recmetrics_intra_list_similarity(
    constructor: Constructor, full: Beyond, recmetrics_ils: dict[int, tuple[float, UserValues]]
) -> None:
    common: dict[str, Any] = {"metrics": "diversity", "k": list(DIVERSITY_KS)}
    common["item_features"] = full.vectors
    out = evaluate(constructor, full.recs, **common)
    agg = evaluate(constructor, full.recs, aggregate=True, **common)
    for k in DIVERSITY_KS:
        mean_similarity, per = recmetrics_ils[k]
        assert_values(per_user(out, f"diversity@{k}"), per, f"1 - intra_list_similarity k={k}")
        assert_close(mean_of(agg, f"diversity@{k}"), 1.0 - mean_similarity, f"1 - ILS k={k}")


def test_recmetrics_single_item_list(constructor: Constructor, full: Beyond, rm: Any) -> None:
    # Difference: a one-item list has no pair; recmetrics' intra_list_similarity raises
    # ZeroDivisionError (the mean of an empty sparse selection), frame_metrics gives null.
    recs = pl.DataFrame({"user": [1, 2, 2], "item": [0, 1, 2], "rank": [1, 1, 2]})
    out = evaluate(constructor, recs, metrics="diversity", k=2, item_features=full.vectors)
    assert set(per_user(out, "diversity@2")) == {2}  # user 1: null, or no row at all
    with quiet(), pytest.raises(ZeroDivisionError):
        rm.intra_list_similarity([[0], [1, 2]], feature_table(full))


def test_recmetrics_personalization_short_lists(
    constructor: Constructor, full: Beyond, rm: Any
) -> None:
    # Difference: recmetrics compares lists by the cosine of their binary vectors, |Lu ∩ Lv|
    # / sqrt(|Lu| |Lv|), frame_metrics by |Lu ∩ Lv| / k. Lists of 10 at k = 20: frame_metrics
    # divides by 20, recmetrics by 10, so 1 - frame_metrics = (1 - recmetrics) * 10 / 20.
    # Lists of unequal length make recmetrics raise (a ragged np.array).
    k = 2 * LIST_LENGTH
    agg = evaluate(constructor, full.recs, metrics="personalization", k=k, aggregate=True)
    lists = full.lists(k)
    with quiet():
        peer = float(rm.personalization([lists[u] for u in sorted(lists)]))
    ours = mean_of(agg, f"personalization@{k}")
    assert_close(
        1.0 - ours, (1.0 - peer) * LIST_LENGTH / k, "personalization, lists shorter than k"
    )
    with quiet(), pytest.raises(ValueError, match="inhomogeneous"):
        rm.personalization([[1, 2, 3], [2, 3]])


def test_recmetrics_novelty_divides_by_n(constructor: Constructor, full: Beyond, rm: Any) -> None:
    # Difference: recmetrics' novelty divides each list's self-information by the n it is
    # given, not by the list's length; frame_metrics divides by the items within k. Lists
    # of 5 with n = 10: recmetrics = frame_metrics novelty@5 * 5 / 10. It also has no cold
    # rule: an item missing from pop raises KeyError (frame_metrics counts it as 1 user).
    k = 5
    out = evaluate(constructor, full.recs, metrics="novelty", k=k, train=full.train)
    lists = full.lists(k)
    users = sorted(lists)
    pop = {i: max(n, 1) for i, n in ({i: 0 for i in range(N_ITEMS)} | full.popularity()).items()}
    with quiet():
        _, novelties = rm.novelty([lists[u] for u in users], pop, full.n_train_users(), LIST_LENGTH)
    ours = per_user(out, f"novelty@{k}")
    assert_values(
        {u: v * k / LIST_LENGTH for u, v in ours.items()},
        {u: float(v) for u, v in zip(users, novelties, strict=True)},
        "recmetrics novelty over n",
    )
    cold_user = next(u for u in users if any(i >= N_WARM for i in lists[u]))
    with quiet(), pytest.raises(KeyError):
        rm.novelty([lists[cold_user]], full.popularity(), full.n_train_users(), k)


def test_recmetrics_mse_rmse(constructor: Constructor, ratings: Ratings, rm: Any) -> None:
    pairs = matched_pairs(ratings)
    y, yhat = pairs["relevance"].to_numpy(), pairs["prediction"].to_numpy()
    agg = evaluate(
        constructor, ratings.preds, ratings.truth, metrics=["mse", "rmse"], aggregate=True
    )
    with quiet():
        mse, rmse = float(rm.mse(y, yhat)), float(rm.rmse(y, yhat))
    assert_close(mean_of(agg, "mse"), mse, "recmetrics mse")
    assert_close(mean_of(agg, "rmse"), rmse, "recmetrics rmse")


# --- tiny example, by hand and through each peer -------------------------------------------------
# Three users, user 3 with a single item; train users 1-4 (item 5 is cold, never in train),
# no recommended item is in its user's train rows (Recommenders refuses those).

TINY_RECS = pl.DataFrame(
    {"user": [1, 1, 1, 2, 2, 3], "item": [3, 4, 5, 1, 2, 2], "rank": [1, 2, 3, 1, 2, 1]}
)
TINY_TRAIN = pl.DataFrame({"user": [1, 1, 2, 3, 3, 4], "item": [1, 2, 3, 4, 1, 1]})
TINY_VECTORS = pl.DataFrame(
    {
        "item": [1, 2, 3, 4, 5],
        "features": [[1.0, 0.0], [0.5, 0.5], [0.0, 1.0], [1.0, 2.0], [3.0, 1.0]],
    }
)
TINY_CATALOG = pl.DataFrame({"item": [1, 2, 3, 4, 5, 6]})
# pop (distinct train users): 1 -> 3, 2 -> 1, 3 -> 1, 4 -> 1, 5 cold (novelty: 1 user,
# arp: 0); 4 train users. Cosines: user 1 cos(3,4) = 2/√5, cos(3,5) = 1/√10,
# cos(4,5) = 5/(√5 √10); user 2 cos(1,2) = 1/√2.
TINY_NOVELTY = {1: 2.0, 2: (math.log2(4 / 3) + 2) / 2, 3: 2.0}
TINY_ARP = {1: 2 / 3, 2: 2.0, 3: 1.0}
TINY_DIVERSITY = {
    1: 1 - (2 / math.sqrt(5) + 1 / math.sqrt(10) + 5 / math.sqrt(50)) / 3,
    2: 1 - 1 / math.sqrt(2),
}


def test_tiny_example_by_hand(constructor: Constructor) -> None:
    options: dict[str, Any] = {"k": 3, "train": TINY_TRAIN, "item_features": TINY_VECTORS}
    out = evaluate(constructor, TINY_RECS, metrics=["novelty", "arp", "diversity"], **options)
    metrics = ["novelty", "diversity", "coverage", "personalization"]
    agg = evaluate(
        constructor, TINY_RECS, metrics=metrics, aggregate=True, catalog=TINY_CATALOG, **options
    )
    assert per_user(out, "novelty@3") == pytest.approx(TINY_NOVELTY, rel=RTOL)
    assert per_user(out, "arp@3") == pytest.approx(TINY_ARP, rel=RTOL)
    assert per_user(out, "diversity@3") == pytest.approx(TINY_DIVERSITY, rel=RTOL)  # 3: null
    assert mean_of(agg, "novelty@3") == pytest.approx(sum(TINY_NOVELTY.values()) / 3, rel=RTOL)
    assert mean_of(agg, "diversity@3") == pytest.approx(sum(TINY_DIVERSITY.values()) / 2, rel=RTOL)
    assert mean_of(agg, "coverage@3") == pytest.approx(5 / 6, rel=RTOL)
    # user pairs (1, 2): 0 shared, (1, 3): 0, (2, 3): 1 -> 1 - (1/3) / 3
    assert mean_of(agg, "personalization@3") == pytest.approx(1 - 1 / 9, rel=RTOL)


def test_tiny_example_rectools() -> None:
    rt = pytest.importorskip("rectools.metrics")
    reco, prev = rectools_frame(TINY_RECS), rectools_frame(TINY_TRAIN)
    catalog = TINY_CATALOG["item"].to_numpy()
    with quiet():
        novelty = series(rt.MeanInvUserFreq(3).calc_per_user(reco, prev))
        arp = series(rt.AvgRecPopularity(3).calc_per_user(reco, prev))
        calculator = cosine_distance(rt, TINY_VECTORS)
        ild = series(rt.IntraListDiversity(3, calculator).calc_per_user(reco))
        coverage = float(rt.CatalogCoverage(3, normalize=True).calc(reco, catalog))
    assert novelty == pytest.approx(TINY_NOVELTY, rel=RTOL)
    assert arp == pytest.approx(TINY_ARP, rel=RTOL)
    assert ild == pytest.approx({**TINY_DIVERSITY, 3: 0.0}, rel=RTOL)  # one item: 0, not null
    assert coverage == pytest.approx(5 / 6, rel=RTOL)


def test_tiny_example_recommenders() -> None:
    pe = recommenders_module()
    train, reco = recommenders_frame(TINY_TRAIN), recommenders_frame(TINY_RECS.drop("rank"))
    features = pd.DataFrame(
        {
            "itemID": TINY_VECTORS["item"].to_list(),
            "features": [np.array(v) for v in TINY_VECTORS["features"].to_list()],
        }
    )
    with quiet():
        coverage = float(pe.catalog_coverage(train, reco))
        diversity = pe.user_diversity(
            train, reco, item_feature_df=features, item_sim_measure="item_feature_vector"
        )
    # 5 recommended items over 4 train items: the cold item 5 counts in the numerator only.
    assert coverage == pytest.approx(5 / 4, rel=RTOL)
    got = dict(zip(diversity["userID"].tolist(), diversity["user_diversity"].tolist(), strict=True))
    assert got == pytest.approx(TINY_DIVERSITY, rel=RTOL)  # user 3 (one item) has no row
