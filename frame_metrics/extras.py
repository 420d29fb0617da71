"""The inputs beyond recommendations and truth: catalog, train, item features, baseline.

Each becomes a small lazy table that the engine joins where a metric needs it, plus the
checks of its values (run in the same batch as the core checks, with the same messages):

- ``train`` (user key + item): per item, its popularity (distinct train users), its
  self-information ``-log2(pop / n_train_users)`` and whether it is in the long tail;
  per (user, item), whether the pair is in the user's history;
- ``catalog`` (item): the catalog size, and every recommended item must be in it;
- ``item_features`` (item + a list or vector column): one row per item, for diversity;
- ``baseline`` (user key + item + rank or score): the baseline's top-k rank per pair.

An extra frame may carry some of the ``by`` columns (a train split per fold, a catalog
per market); it then applies per group, joined on them; without them it applies to every
group.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl

from frame_metrics.columns import Columns
from frame_metrics.errors import (
    InvalidOptionError,
    InvalidValueError,
    MissingColumnsError,
    Part,
    Pass,
)
from frame_metrics.frames import Source
from frame_metrics.metrics.context import (
    BASELINE_RANK,
    IN_HISTORY,
    IN_TAIL,
    POPULARITY,
)
from frame_metrics.options import MetricOptions
from frame_metrics.validation import Check, CheckedFrame, duplicate_check, null_checks

__all__ = [
    "FEATURES",
    "N_TRAIN_USERS",
    "ExtraFrame",
    "baseline_ranks",
    "catalog_items",
    "feature_table",
    "history_pairs",
    "item_popularity",
    "missing_from",
    "popularity_levels",
    "require_columns",
    "train_counts",
]

#: The item-feature column in the engine's tables.
FEATURES = "_fm_features"
#: Distinct users of train (per group it carries): the N of novelty's -log2(pop / N).
N_TRAIN_USERS = "_fm_n_train_users"


@dataclass(frozen=True)
class ExtraFrame:
    """One extra input: its label, its frame and the ``by`` columns it carries."""

    label: str
    frame: pl.LazyFrame
    by: tuple[str, ...]

    @staticmethod
    def of(label: str, source: Source, columns: Columns) -> ExtraFrame:
        """Wrap a converted input, noting which ``by`` columns it carries."""
        schema = source.lazy.collect_schema()
        return ExtraFrame(label, source.lazy, tuple(b for b in columns.by if b in schema))


#: The dtypes of a column of categories: text, or a list or vector per row.
CATEGORY_KINDS: tuple[type[pl.DataType], ...] = (
    pl.String,
    pl.Categorical,
    pl.Enum,
    pl.List,
    pl.Array,
)


def require_columns(
    extra: ExtraFrame,
    names: Sequence[str],
    role: tuple[str, str] | None = None,
    kinds: tuple[type[pl.DataType], ...] = CATEGORY_KINDS,
) -> pl.Schema:
    """The frame's schema, or a :class:`MissingColumnsError` naming what is missing.

    ``role``: a column named by a keyword (``(columns.features, "features")``): when it
    is the one missing and the frame has one other column of the ``kinds`` it may hold,
    the error proposes it for the keyword (a long item-category frame's ``category``).
    """
    schema = extra.frame.collect_schema()
    missing = [n for n in names if n not in schema]
    if missing:
        advice: tuple[Part, ...] = ()
        others = [n for n in schema.names() if n not in names and isinstance(schema[n], kinds)]
        if role is not None and missing == [role[0]] and len(others) == 1:
            advice = (f"; if {others[0]!r} holds them, ", Pass(role[1], others[0]))
        raise MissingColumnsError(extra.label, missing, list(schema.names()), *advice)
    return schema


def item_popularity(
    train: ExtraFrame, columns: Columns, options: MetricOptions
) -> tuple[pl.LazyFrame, pl.LazyFrame]:
    """Per train item: popularity and the long-tail flag; per group: ``N_TRAIN_USERS``.

    Both are per ``by`` group when train carries ``by`` columns.

    ``pop(i)`` counts distinct train users. The short head is the most popular items that
    together hold ``head_share`` of all train (user, item) pairs, taken in popularity
    order with ties kept together: item i is in the head when the items strictly more
    popular than it hold less than that share. Every other item is in the long tail.
    """
    by = list(train.by)
    per_item, n_users = train_counts(train.frame, by, columns)
    return popularity_levels(per_item, by, columns.item, options.head_share), n_users


def train_counts(
    train: pl.LazyFrame, by: Sequence[str], columns: Columns
) -> tuple[pl.LazyFrame, pl.LazyFrame]:
    """Per (``by``, item): distinct train users (``POPULARITY``); per ``by``: ``N_TRAIN_USERS``.

    Both are sums over users, so per-partition counts of disjoint user sets add up.
    """
    by, item = list(by), columns.item
    # Each user's distinct items, then a count per item: counting distinct users per item
    # directly hashes within groups of thousands of users and is 1.7x slower at 20M rows
    # (a user's few items stay in cache). The per-user frame also counts the users.
    per_user = train.group_by([*by, *columns.user]).agg(pl.col(item).unique())
    per_item = (
        per_user.select(*by, item)
        .explode(item)
        .group_by([*by, item])
        .agg(pl.len().cast(pl.Int64).alias(POPULARITY))
    )
    n_users_expr = pl.len().cast(pl.Int64).alias(N_TRAIN_USERS)
    n_users = per_user.group_by(by).agg(n_users_expr) if by else per_user.select(n_users_expr)
    return per_item, n_users


def popularity_levels(
    per_item: pl.LazyFrame, by: Sequence[str], item: str, head_share: float
) -> pl.LazyFrame:
    """Per (``by``, item): ``POPULARITY`` and the long-tail flag ``IN_TAIL``."""
    by = list(by)
    # Popularity levels, most popular first, and the pairs held by strictly more popular
    # items (integer sums: exact).
    level_pairs = pl.col(POPULARITY) * pl.col("_fm_items")
    levels = (
        per_item.group_by([*by, POPULARITY])
        .agg(pl.len().cast(pl.Int64).alias("_fm_items"))
        .sort([*by, POPULARITY], descending=[*(False for _ in by), True])
        .with_columns(level_pairs.alias("_fm_level_pairs"))
    )
    more_popular = pl.col("_fm_level_pairs").cum_sum() - pl.col("_fm_level_pairs")
    all_pairs = pl.col("_fm_level_pairs").sum()
    if by:
        more_popular, all_pairs = more_popular.over(by), all_pairs.over(by)
    levels = levels.select(
        *by,
        POPULARITY,
        (more_popular >= head_share * all_pairs).alias(IN_TAIL),
    )
    items = per_item.join(levels, on=[*by, POPULARITY], how="left")
    return items.select(*by, item, POPULARITY, IN_TAIL)


def history_pairs(train: ExtraFrame, columns: Columns) -> pl.LazyFrame:
    """The distinct (user, item) pairs of train, flagged ``IN_HISTORY``."""
    keys = [*train.by, *columns.user, columns.item]
    return train.frame.select(keys).unique().with_columns(pl.lit(True).alias(IN_HISTORY))


def baseline_ranks(
    top: pl.LazyFrame, baseline_by: Sequence[str], columns: Columns, rank: str
) -> pl.LazyFrame:
    """The baseline's top rows as (by it carries, user, item, ``BASELINE_RANK``)."""
    return top.select(*baseline_by, *columns.user, columns.item, pl.col(rank).alias(BASELINE_RANK))


def catalog_items(catalog: ExtraFrame, columns: Columns) -> pl.LazyFrame:
    """The distinct catalog items (per ``by`` group the catalog carries)."""
    return catalog.frame.select(*catalog.by, columns.item).unique()


def missing_from(
    rows: pl.LazyFrame, table: pl.LazyFrame, on: Sequence[str], label: str, what: str, hint: str
) -> CheckedFrame:
    """A check that every row of ``rows`` has a match in ``table`` on ``on``."""
    absent = rows.select(on).unique().join(table.select(on).unique(), on=list(on), how="anti")
    return CheckedFrame(
        label,
        absent,
        [
            Check(
                pl.len(),
                pl.lit(True),
                InvalidValueError,
                f"expected every {what}, found {{n}} missing, e.g. {{example}}{hint}",
            )
        ],
        list(on),
    )


def feature_table(
    features: ExtraFrame, columns: Columns, options: MetricOptions
) -> tuple[pl.LazyFrame, str, list[CheckedFrame]]:
    """One row per item: (by it carries, item, ``FEATURES``), the similarity and checks.

    Jaccard features become a bit mask (``"jaccard-bits"``, up to 64 categories) or a
    list of distinct values (``"jaccard"``); cosine features a unit vector, so a pair's
    cosine is a dot product.
    """
    item, col = columns.item, columns.features
    # Diversity compares two items' lists: a long (item, category) frame is not one.
    lists = (pl.List, pl.Array)
    schema = require_columns(features, [*features.by, item, col], (col, "features"), lists)
    dtype = schema[col]
    inner = dtype.inner if isinstance(dtype, lists) else None
    if inner is None:
        long_form = (
            f"; if each row is one (item, category), make one list per item: "
            f"item_features.group_by({item!r}).agg({col!r})"
            if isinstance(dtype, CATEGORY_KINDS)
            else ""
        )
        raise InvalidValueError(
            f"item_features: expected column {col!r} to hold a list (categories) or a vector "
            f"(numbers) per item, found dtype {dtype}{long_form}",
            frame="item_features",
            columns=[col],
        )
    similarity = options.similarity
    if similarity == "auto":
        similarity = "cosine" if (inner.is_float() or isinstance(dtype, pl.Array)) else "jaccard"
    if similarity == "cosine" and not inner.is_numeric():
        raise InvalidOptionError(
            f"expected a numeric vector column for 'cosine', found {col!r} of dtype {dtype}",
            option="similarity",
            frame="item_features",
            columns=[col],
        )
    keys = [*features.by, item]
    show = [*keys, col]
    checks = [
        *null_checks([*keys, col], "key or features"),
        duplicate_check(keys, "item", ""),
    ]
    checked = [CheckedFrame("item_features", features.frame, checks, show)]
    if similarity == "jaccard":
        # Up to 64 distinct categories (genres, say), a set is a bit mask and a pair's
        # Jaccard is two popcounts: ~10x faster than intersecting lists. One small pass
        # over the item table counts the categories.
        vocabulary = (
            features.frame.select(pl.col(col).explode().drop_nulls().unique().sort().alias(col))
            .collect()
            .with_row_index("_fm_bit")
        )
        if vocabulary.height <= 64:
            bits = vocabulary.lazy().select(
                col, pl.lit(2, pl.UInt64).pow(pl.col("_fm_bit")).alias("_fm_bit")
            )
            table = (
                features.frame.select(*keys, pl.col(col).list.unique())
                # An item with no category keeps its row (mask 0).
                .explode(col, empty_as_null=True)
                .join(bits, on=col, how="left")
                .group_by(keys)
                .agg(pl.col("_fm_bit").sum().cast(pl.UInt64).alias(FEATURES))
            )
            return table, "jaccard-bits", checked
        table = features.frame.select(*keys, pl.col(col).list.unique().alias(FEATURES))
        return table, similarity, checked

    vec = pl.col(col).cast(pl.List(pl.Float64))
    norm = vec.list.eval(pl.element().pow(2)).list.sum().sqrt()
    first_len = vec.list.len().first()
    checks += [
        Check(
            (vec.list.len() != first_len).sum(),
            vec.list.len() != first_len,
            InvalidValueError,
            f"expected vectors of one length in column {col!r}, found {{n}} of another length "
            "than the first row's, e.g. {example}",
        ),
        Check(
            (norm == 0).sum()
            + vec.list.eval(pl.element().is_null() | pl.element().is_nan()).list.any().sum(),
            (norm == 0) | vec.list.eval(pl.element().is_null() | pl.element().is_nan()).list.any(),
            InvalidValueError,
            f"expected non-zero vectors of numbers in column {col!r} (cosine is undefined "
            "otherwise), found {n}, e.g. {example}",
        ),
    ]
    # Fixed-width arrays: a pair's dot product is ~5x faster than over lists. The width
    # comes from one small pass over the item table (the checks make it the same for all).
    width = features.frame.select(vec.list.len().max()).collect().item() or 0
    unit = (vec / norm).list.to_array(width) if width else (vec / norm)
    table = features.frame.select(*keys, unit.alias(FEATURES))
    return table, similarity, checked
