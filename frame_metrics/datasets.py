"""A small synthetic dataset, generated in code, for the demo and for examples.

Two "models" recommend 20 items to each user: ``popularity`` shows everyone the same
most-popular items; ``personal`` ranks each user's candidates by a noisy score that
favours the items the user liked. Only polars is needed; the pseudo-random numbers come
from hashing, so the data is the same on every machine for a given seed.
"""

from __future__ import annotations

import polars as pl

__all__ = ["synthetic"]


def _uniform(expr: pl.Expr, seed: int) -> pl.Expr:
    """A deterministic pseudo-uniform number in [0, 1) from an integer expression."""
    return (expr.hash(seed) % 1_000_003).cast(pl.Float64) / 1_000_003


def synthetic(
    n_users: int = 1_000, n_items: int = 500, n_recs: int = 20, seed: int = 0
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Return ``(recs, truth)``: two models' top-``n_recs`` lists and graded truth.

    ``recs`` has columns ``model, user, item, rank``; ``truth`` has
    ``user, item, relevance`` (1-5). Popular items have small ids.

    Examples
    --------
    >>> recs, truth = synthetic(n_users=50)
    >>> recs.columns, truth.columns
    (['model', 'user', 'item', 'rank'], ['user', 'item', 'relevance'])
    >>> recs.group_by("model").len().sort("model")["len"].to_list()
    [1000, 1000]
    """
    # Liked items: 1-15 per user, skewed towards popular (small) ids.
    n_liked = pl.DataFrame({"user": range(n_users)}).with_columns(
        (1 + (_uniform(pl.col("user"), seed) * 15).cast(pl.Int64)).alias("n")
    )
    liked = (
        n_liked.select(pl.col("user").repeat_by("n").explode())
        .with_columns(pl.int_range(pl.len()).alias("row"))
        .with_columns(
            (_uniform(pl.col("row"), seed + 1).pow(2) * n_items).cast(pl.Int64).alias("item"),
            (1 + (_uniform(pl.col("row"), seed + 2) * 5).cast(pl.Int64)).alias("relevance"),
        )
        .unique(["user", "item"], keep="first", maintain_order=True)
        .select("user", "item", "relevance")
    )
    popular = (
        liked.group_by("item")
        .agg(pl.len().alias("n"))
        .sort(["n", "item"], descending=[True, False])
        .head(n_recs)["item"]
    )
    popularity = pl.DataFrame({"user": range(n_users)}).join(
        pl.DataFrame({"item": popular, "rank": range(1, len(popular) + 1)}), how="cross"
    )
    # Candidates: the liked items plus random ones; liked items get a head start.
    random_items = (
        pl.DataFrame({"user": range(n_users)})
        .select(pl.col("user").repeat_by(3 * n_recs).explode())
        .with_columns(pl.int_range(pl.len()).alias("row"))
        .select(
            "user",
            (_uniform(pl.col("row"), seed + 3) * n_items).cast(pl.Int64).alias("item"),
        )
    )
    candidates = pl.concat([liked.select("user", "item"), random_items]).unique(
        ["user", "item"], maintain_order=True
    )
    is_liked = candidates.join(liked, on=["user", "item"], how="left")["relevance"].is_not_null()
    personal = (
        candidates.with_columns(
            (
                _uniform(pl.col("user") * n_items + pl.col("item"), seed + 4)
                + pl.Series(is_liked).cast(pl.Float64) * 0.35
            ).alias("score")
        )
        .with_columns(
            pl.int_range(1, pl.len() + 1)
            .over("user", order_by=[-pl.col("score"), pl.col("item")])
            .alias("rank")
        )
        .filter(pl.col("rank") <= n_recs)
        .select("user", "item", "rank")
    )
    recs = pl.concat(
        [
            popularity.select(pl.lit("popularity").alias("model"), "user", "item", "rank"),
            personal.select(pl.lit("personal").alias("model"), "user", "item", "rank"),
        ]
    ).with_columns(pl.col("rank").cast(pl.Int64))
    return recs.sort("model", "user", "rank"), liked.sort("user", "item")
