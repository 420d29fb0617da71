"""Tables over every user that more than one family reads in a partitioned run.

A family's :meth:`~frame_metrics.family.Family.global_tables` computes what its
partitions read over every user; where two families read the same table (train
popularity: the ranking family's novelty, arp and aplt, the exposure family's default
head and tail groups; the items seen: coverage's and exposure's default catalog), it is
here, below the families, so that no family imports another.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import polars as pl

from frame_metrics.errors import InvalidValueError
from frame_metrics.extras import N_TRAIN_USERS, popularity_levels, train_counts
from frame_metrics.family import ENGINE, Partitioned
from frame_metrics.metrics.context import POPULARITY
from frame_metrics.spec import Spec

__all__ = ["EMPTY_TRAIN", "popularity", "seen_items"]

_VALUE = "_fm_value"

#: Why an empty train cannot be read (novelty, arp and aplt need its popularity).
EMPTY_TRAIN = (
    "expected at least one row in train (novelty, arp and aplt read item popularity "
    "from it), found an empty frame"
)


def popularity(spec: Spec, run: Partitioned) -> dict[str, Any]:
    """Train popularity and the long-tail flags over every partition's train.

    ``"n_train_users"`` and ``"popularity"`` of
    :class:`~frame_metrics.global_tables.GlobalTables`; the exposure family's default
    item groups (head and tail) read them too.
    """
    c = spec.columns
    out: dict[str, Any] = {}
    train_schema = run.schemas["train"]
    train_by = [b for b in c.by if b in train_schema]

    def counts(frames: Mapping[str, pl.DataFrame]) -> pl.DataFrame:
        train = frames["train"].lazy()  # a DataFrame, or a LazyFrame (local buckets)
        per_item, n_users = train_counts(train, train_by, c)
        per_item = per_item.select(
            *train_by, c.item, pl.col(POPULARITY).cast(pl.Float64).alias(_VALUE)
        )
        users = n_users.select(
            *train_by,
            pl.lit(None, train_schema[c.item]).alias(c.item),
            pl.col(N_TRAIN_USERS).cast(pl.Float64).alias(_VALUE),
        )
        return pl.concat([per_item, users]).collect(engine=ENGINE)

    summed = run.collect(counts, ("train",))
    totals = summed.group_by([*train_by, c.item]).agg(pl.col(_VALUE).sum())
    per_item = totals.filter(pl.col(c.item).is_not_null()).select(
        *train_by, c.item, pl.col(_VALUE).cast(pl.Int64).alias(POPULARITY)
    )
    n_train = totals.filter(pl.col(c.item).is_null()).select(
        *train_by, pl.col(_VALUE).cast(pl.Int64).alias(N_TRAIN_USERS)
    )
    no_train = n_train.height == 0 or n_train[N_TRAIN_USERS].sum() == 0
    if spec.validate and no_train and run.has_recs():
        raise InvalidValueError("train: " + EMPTY_TRAIN, frame="train")
    out["n_train_users"] = n_train
    head_share = spec.options.head_share
    out["popularity"] = popularity_levels(per_item.lazy(), train_by, c.item, head_share).collect()
    return out


def seen_items(spec: Spec, run: Partitioned) -> dict[str, Any]:
    """``"seen_items"``: the items of every partition's recs, truth and train.

    The default catalog, as the one-pass run takes it (the exposure family's too).
    """
    item = spec.columns.item
    # Plain values only in the closure: a Spark worker gets it pickled.
    dtype = run.schemas["recs"][item]

    def items(frames: Mapping[str, pl.DataFrame]) -> pl.DataFrame:
        # As the one-pass default catalog: the items of recs (every rank), truth, train.
        seen = [f.lazy() for f in frames.values()]
        found = pl.concat(f.select(pl.col(item).cast(dtype, strict=False)) for f in seen)
        return found.unique().collect(engine=ENGINE)

    names = tuple(n for n in ("recs", "truth", "train") if n in run.schemas)
    return {"seen_items": run.collect(items, names).unique().drop_nulls()}
