"""Deterministic synthetic recommendations and graded truth for the ranking benchmark.

Every user gets ``n_recs`` distinct recommended items (rank 1..n_recs, score strictly
descending with rank) drawn from a popularity-skewed catalog, and 1..``max_truth`` graded
truth items (relevance 1..5). A share of the truth items is taken from the user's own
recommendations with a bias towards the top ranks, the rest from the same popularity
distribution, so some truth items land in the top 10 and most do not.

Everything is vectorised numpy: 100k users x 100 recommendations take a few seconds.

Run ``python bench/generate.py --users 100000 --out DIR`` to write ``recs.parquet`` and
``truth.parquet``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import polars as pl

__all__ = [
    "INTERACTIONS_SCHEMA",
    "RECS_SCHEMA",
    "TRUTH_SCHEMA",
    "make_arrays",
    "make_data",
    "make_interactions",
    "with_propensity",
    "write_parquet",
]

#: Column dtypes of the generated frames.
RECS_SCHEMA: dict[str, type[pl.DataType]] = {
    "user": pl.Int64,
    "item": pl.Int64,
    "rank": pl.Int32,
    "score": pl.Float64,
}
TRUTH_SCHEMA: dict[str, type[pl.DataType]] = {
    "user": pl.Int64,
    "item": pl.Int64,
    "relevance": pl.Int32,
}

INTERACTIONS_SCHEMA = pl.Schema(
    {
        "user": pl.Int64(),
        "item": pl.Int64(),
        "time": pl.Datetime("us"),
        "rating": pl.Int8(),
    }
)

#: Probability of each relevance grade 1..5.
RELEVANCE_P = np.array([0.40, 0.25, 0.17, 0.11, 0.07])


def _popularity_cdf(n_items: int, exponent: float, offset: float) -> np.ndarray:
    """Cumulative distribution of a Zipf-like popularity over ``n_items`` items."""
    weights = 1.0 / (np.arange(1, n_items + 1, dtype=np.float64) + offset) ** exponent
    cdf: np.ndarray = np.cumsum(weights)
    cdf /= cdf[-1]
    return cdf


def _draw(rng: np.random.Generator, cdf: np.ndarray, size: int | tuple[int, ...]) -> np.ndarray:
    """Draw popularity ranks (0 = most popular) from ``cdf``."""
    idx = np.searchsorted(cdf, rng.random(size), side="right")
    return np.minimum(idx, len(cdf) - 1)


def _distinct_rows(
    rng: np.random.Generator, cdf: np.ndarray, n_rows: int, width: int
) -> np.ndarray:
    """An ``(n_rows, width)`` array of draws from ``cdf``, distinct within each row.

    Duplicates are redrawn, only in the rows that still have some, until none is left.
    """
    if width > len(cdf):
        raise ValueError(f"n_recs: expected at most the catalog size {len(cdf)}, got {width}")
    out = _draw(rng, cdf, (n_rows, width))
    rows = np.arange(n_rows)
    while rows.size:
        block = np.sort(out[rows], axis=1)
        dup = np.zeros(block.shape, dtype=bool)
        dup[:, 1:] = block[:, 1:] == block[:, :-1]
        n_dup = int(dup.sum())
        if n_dup:
            block[dup] = _draw(rng, cdf, n_dup)
        out[rows] = block
        rows = rows[dup.any(axis=1)]
    return out


def popular_lists(
    n_users: int, width: int, seed: int, n_items: int
) -> tuple[np.random.Generator, np.ndarray, np.ndarray, np.ndarray]:
    """The start of every generator: a seeded catalog and one popular-leaning list per user.

    Returns the generator (to draw the rest from), the popularity ``cdf`` (Zipf-like,
    exponent 1), ``item_ids`` (popularity rank -> item id, a seeded permutation) and an
    ``(n_users, width)`` array of popularity ranks, distinct within each row.
    """
    if n_users < 1:
        raise ValueError(f"n_users: expected an int >= 1, got {n_users}")
    rng = np.random.default_rng(seed)
    cdf = _popularity_cdf(n_items, exponent=1.0, offset=10.0)
    item_ids = rng.permutation(n_items).astype(np.int64)
    return rng, cdf, item_ids, _distinct_rows(rng, cdf, n_users, width)


def make_arrays(
    n_users: int,
    n_recs: int = 100,
    seed: int = 0,
    *,
    n_items: int = 50_000,
    max_truth: int = 30,
    mean_truth: float = 8.0,
    from_recs: float = 0.3,
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Generate the data as numpy column arrays: ``(recs_columns, truth_columns)``.

    Parameters
    ----------
    n_users
        Number of users; user ids are ``0..n_users-1``.
    n_recs
        Recommendations per user (distinct items, ranks ``1..n_recs``).
    seed
        numpy seed; the same arguments always give the same data.
    n_items
        Catalog size; item ids are a fixed permutation of ``0..n_items-1``.
    max_truth, mean_truth
        Truth items per user: a geometric count with this mean, clipped to
        ``1..max_truth`` (before removing repeated items, which keeps at least one).
    from_recs
        Share of truth draws taken from the user's recommendations (rank-biased, ~1/rank)
        rather than from the catalog.
    """
    rng, cdf, item_ids, pop = popular_lists(n_users, n_recs, seed, n_items)
    # Recommendations: distinct popular-leaning items, ordered by a noisy popularity score.
    score = -np.log1p(pop.astype(np.float64)) + rng.gumbel(0.0, 1.5, size=pop.shape)
    order = np.argsort(-score, axis=1)
    pop = np.take_along_axis(pop, order, axis=1)
    score = np.take_along_axis(score, order, axis=1)
    score = 1.0 / (1.0 + np.exp(-(score + 4.0) / 2.0))  # squash into (0, 1), still descending

    recs = {
        "user": np.repeat(np.arange(n_users, dtype=np.int64), n_recs),
        "item": item_ids[pop].ravel(),
        "rank": np.tile(np.arange(1, n_recs + 1, dtype=np.int32), n_users),
        "score": score.ravel(),
    }

    # Truth: a few items per user, some from the user's own list (top-biased), some not.
    n_truth = np.minimum(rng.geometric(1.0 / mean_truth, size=n_users), max_truth)
    t_user = np.repeat(np.arange(n_users, dtype=np.int64), n_truth)
    n_total = int(n_truth.sum())
    rank_cdf = np.cumsum(1.0 / np.arange(1, n_recs + 1))
    rank_cdf /= rank_cdf[-1]
    in_recs = rng.random(n_total) < from_recs
    t_pop = _draw(rng, cdf, n_total)
    picked_rank = _draw(rng, rank_cdf, int(in_recs.sum()))
    t_pop[in_recs] = pop[t_user[in_recs], picked_rank]
    t_item = item_ids[t_pop]
    # Keep the first occurrence of every (user, item), in draw order.
    _, first = np.unique(t_user * n_items + t_item, return_index=True)
    first.sort()
    relevance = rng.choice(np.arange(1, 6, dtype=np.int32), size=first.size, p=RELEVANCE_P)
    truth = {"user": t_user[first], "item": t_item[first], "relevance": relevance}
    return recs, truth


def make_data(
    n_users: int, n_recs: int = 100, seed: int = 0, **kwargs: float
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Generate ``(recs, truth)`` polars frames; see :func:`make_arrays` for the options.

    Examples
    --------
    >>> recs, truth = make_data(3, n_recs=5)
    >>> recs.shape, recs.columns
    ((15, 4), ['user', 'item', 'rank', 'score'])
    >>> truth.columns
    ['user', 'item', 'relevance']
    """
    recs_cols, truth_cols = make_arrays(n_users, n_recs, seed, **kwargs)  # type: ignore[arg-type]
    recs = pl.DataFrame(recs_cols, schema=RECS_SCHEMA)
    truth = pl.DataFrame(truth_cols, schema=TRUTH_SCHEMA)
    return recs, truth


def make_interactions(
    n_users: int, per_user: int = 100, seed: int = 0, *, n_items: int = 50_000
) -> pl.DataFrame:
    """An interaction log for the splits: ``per_user`` events a user, in time order.

    Items are drawn from the popularity distribution of :func:`make_arrays` (a user may
    meet an item again), times are a random walk per user over about a year (gaps of
    exponentially distributed seconds, a user's start spread over the year before), and
    ``rating`` is 1..5: a column the split carries along. Rows are sorted by time, as a
    log is written.

    Examples
    --------
    >>> log = make_interactions(3, per_user=4)
    >>> log.shape, log.columns
    ((12, 4), ['user', 'item', 'time', 'rating'])
    """
    rng = np.random.default_rng(seed)
    cdf = _popularity_cdf(n_items, exponent=1.0, offset=10.0)
    item_ids = rng.permutation(n_items).astype(np.int64)
    rows = n_users * per_user
    year_us = 365 * 24 * 3600 * 1_000_000
    start = rng.integers(0, year_us, size=n_users)
    gaps = rng.exponential(year_us / (2 * per_user), size=(n_users, per_user)).astype(np.int64)
    times = start[:, None] + np.cumsum(gaps, axis=1)
    epoch = 1_672_531_200_000_000  # 2023-01-01, in microseconds
    log = pl.DataFrame(
        {
            "user": np.repeat(np.arange(n_users, dtype=np.int64), per_user),
            "item": item_ids[_draw(rng, cdf, rows)],
            "time": (times.ravel() + epoch),
            "rating": rng.integers(1, 6, size=rows, dtype=np.int8),
        }
    )
    return (
        log.with_columns(pl.col("time").cast(pl.Datetime("us")))
        .sort("time")
        .cast(INTERACTIONS_SCHEMA)
    )


def with_propensity(
    recs: pl.DataFrame, truth: pl.DataFrame, k: int = 10, exponent: float = 0.75
) -> pl.DataFrame:
    """``truth`` with a propensity column ``p`` in (0, 1]: how often the logs show the item.

    A popularity-biased logging policy: P_i = (c_i / max_j c_j)^exponent, c_i = 1 + the
    number of users with item i in their top ``k`` (an item never shown keeps a small
    chance of being observed). Deterministic: computed from the generated frames.

    Examples
    --------
    >>> recs, truth = make_data(50, n_recs=20)
    >>> p = with_propensity(recs, truth)["p"]
    >>> bool(p.min() > 0) and bool(p.max() <= 1)
    True
    """
    shown = recs.filter(pl.col("rank") <= k).group_by("item").agg(pl.len().alias("_c"))
    counts = truth.select("item").unique().join(shown, on="item", how="left")
    counts = counts.with_columns((pl.col("_c").fill_null(0) + 1).cast(pl.Float64).alias("_c"))
    top = counts["_c"].max()
    props = counts.select("item", ((pl.col("_c") / top) ** exponent).alias("p"))
    return truth.join(props, on="item", how="left", maintain_order="left")


def write_parquet(recs: pl.DataFrame, truth: pl.DataFrame, out: Path) -> tuple[Path, Path]:
    """Write ``recs.parquet`` and ``truth.parquet`` into ``out`` and return their paths."""
    out.mkdir(parents=True, exist_ok=True)
    paths = out / "recs.parquet", out / "truth.parquet"
    recs.write_parquet(paths[0])
    truth.write_parquet(paths[1])
    return paths


def main(argv: list[str] | None = None) -> None:
    """Command line: generate, print a summary, optionally write parquet."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=100_000)
    parser.add_argument("--recs", type=int, default=100, help="recommendations per user")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--out", type=Path, help="directory to write recs.parquet / truth.parquet to"
    )
    args = parser.parse_args(argv)

    start = time.perf_counter()
    recs, truth = make_data(args.users, args.recs, args.seed)
    elapsed = time.perf_counter() - start
    hits = recs.filter(pl.col("rank") <= 10).join(truth, on=["user", "item"]).height
    print(
        f"generated in {elapsed:.2f}s: {recs.height:,} rec rows, {truth.height:,} truth rows "
        f"({truth.height / args.users:.1f} per user), {hits / args.users:.2f} truth items "
        f"in the top 10 per user"
    )
    if args.out is not None:
        for path in write_parquet(recs, truth, args.out):
            print(f"wrote {path}")


if __name__ == "__main__":
    main()
