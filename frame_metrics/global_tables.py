"""Tables over every user that one partition's evaluation reads (Spark, Dask).

A distributed run evaluates each bucket of user keys on its own, with the polars
engine. Most metrics read only the user's own rows; these read the whole input, so the
distributed adapter computes them once and hands them to every partition:

- item popularity and the long-tail flag, and the number of train users (novelty, arp,
  aplt read them);
- the distinct values of the ``by`` columns truth lacks (truth applies to each group,
  so a partition must know every group, not only those its recommendations name);
- the items seen in the inputs, the default catalog of coverage;
- the largest relevance in truth, err's default g_max.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

import polars as pl

__all__ = ["GlobalTables"]


@dataclass(frozen=True)
class GlobalTables:
    """What a partition's evaluation reads instead of computing it from its own rows.

    ``popularity``: (train ``by`` columns, item, ``POPULARITY``, ``IN_TAIL``);
    ``n_train_users``: (train ``by`` columns, ``N_TRAIN_USERS``); ``groups``: the
    distinct values of the ``by`` columns truth lacks; ``seen_items``: the distinct items
    of recommendations, truth and train (the catalog when none is given);
    ``max_relevance``: the largest relevance in truth (err's default g_max);
    ``tables``: any other family's, by the names its ``global_tables`` gives them (a new
    family adds its tables here without a new field).
    """

    popularity: pl.DataFrame | None = None
    n_train_users: pl.DataFrame | None = None
    groups: pl.DataFrame | None = None
    seen_items: pl.DataFrame | None = None
    max_relevance: float | None = None
    tables: Mapping[str, Any] = field(default_factory=dict)

    @staticmethod
    def of(found: Mapping[str, Any]) -> GlobalTables:
        """The tables the families and the runner found, by name, in their fields."""
        named = {f.name for f in fields(GlobalTables)} - {"tables"}
        return GlobalTables(
            **{k: v for k, v in found.items() if k in named},
            tables={k: v for k, v in found.items() if k not in named},
        )
