"""Beyond-accuracy metrics of one user's list (spec section 6): one registry entry each.

Novelty, popularity (arp, aplt) and serendipity read one user's rows of the long table,
like the ranking metrics, with item columns the engine joins from ``train`` or
``baseline`` (see :mod:`frame_metrics.extras`). Novelty, arp and aplt describe the list
itself, so every user with a recommended item within the cutoff gets a value;
serendipity needs relevance and follows the ranking metrics' policy (spec section 3).

Corpus metrics (coverage, personalization, gini) are in :mod:`.corpus`, diversity in
:mod:`.diversity`.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from frame_metrics.metrics.context import (
    BASELINE_RANK,
    IN_HISTORY,
    IN_TAIL,
    POPULARITY,
    SELF_INFORMATION,
    RankingPieces,
    over_constant,
)
from frame_metrics.metrics.registry import Metric, register
from frame_metrics.options import MetricOptions

__all__ = ["ListCase"]


@dataclass(frozen=True)
class ListCase:
    """One user's list and what the beyond-accuracy references read, in plain Python.

    ``popularity`` maps train items to their distinct-user counts; ``tail`` is the set
    of long-tail items; ``baseline`` maps the baseline's items for this user to ranks;
    ``history`` is the user's train items.
    """

    ranks: Mapping[Any, int]
    relevant: frozenset[Any] = frozenset()
    popularity: Mapping[Any, int] = field(default_factory=dict)
    n_train_users: int = 0
    tail: frozenset[Any] = frozenset()
    baseline: Mapping[Any, int] = field(default_factory=dict)
    history: frozenset[Any] = frozenset()

    def top(self, k: int) -> list[Hashable]:
        """Recommended items with rank <= k, best first."""
        return [i for i, r in sorted(self.ranks.items(), key=lambda p: p[1]) if r <= k]


# --- novelty ----------------------------------------------------------------------------------


def _novelty(ctx: RankingPieces, k: int) -> pl.Expr:
    return ctx.listed_sum(k, SELF_INFORMATION) / ctx.n_listed(k)


def _ref_novelty(u: ListCase, k: int, o: MetricOptions) -> float:
    top = u.top(k)
    n = u.n_train_users
    return sum(-math.log2(max(u.popularity.get(i, 0), 1) / n) for i in top) / len(top)


register(
    Metric(
        "novelty",
        _novelty,
        _ref_novelty,
        "mean over L[:k] of -log2(pop(i) / n_train_users), pop = distinct train users of i",
        bounds=(0.0, None),
        needs=frozenset({"popularity"}),
        population="listed",
        notes="RecTools MeanInvUserFreq: the same (distinct users; an item no train user had "
        "counts as had by one; the mean over the list's own length). Recommenders novelty: "
        "pooled over recommendation rows, popularity from train rows rather than users, and an "
        "unseen item adds 0. recmetrics novelty: divides by its n argument, not the list "
        "length, and an unseen item raises KeyError.",
    )
)


# --- popularity bias ------------------------------------------------------------------------


def _arp(ctx: RankingPieces, k: int) -> pl.Expr:
    return ctx.listed_sum(k, POPULARITY) / ctx.n_listed(k)


def _ref_arp(u: ListCase, k: int, o: MetricOptions) -> float:
    top = u.top(k)
    return sum(u.popularity.get(i, 0) for i in top) / len(top)


def _aplt(ctx: RankingPieces, k: int) -> pl.Expr:
    return ctx.listed_count(k, IN_TAIL) / ctx.n_listed(k)


def _ref_aplt(u: ListCase, k: int, o: MetricOptions) -> float:
    top = u.top(k)
    return sum(i in u.tail for i in top) / len(top)


register(
    Metric(
        "arp",
        _arp,
        _ref_arp,
        "mean over L[:k] of pop(i), the distinct train users of i (0 for unseen items)",
        higher_is_better=False,
        bounds=(0.0, None),
        needs=frozenset({"popularity"}),
        population="listed",
        notes="RecTools AvgRecPopularity: popularity counts train rows (a repeated (user, "
        "item) row counts again) where this counts distinct users; equal when train has no "
        "repeated pairs. Its normalize=True divides by the number of train rows.",
    )
)
register(
    Metric(
        "aplt",
        _aplt,
        _ref_aplt,
        "share of L[:k] in the long tail (outside the head holding head_share of train pairs)",
        needs=frozenset({"popularity"}),
        population="listed",
        notes="None of RecTools, Recommenders or recmetrics computes it (recmetrics' "
        "long_tail_plot draws a head/tail cut by cumulative volume, the same kind of cut).",
    )
)


# --- serendipity ------------------------------------------------------------------------------


def _unexpected(ctx: RankingPieces, k: int) -> pl.Expr:
    # Read on the hit rows, which the engine joins with the baseline's ranks or the
    # user's train pairs.
    if ctx.options.unexpected == "baseline":
        base = pl.col(BASELINE_RANK)
        return base.is_null() | (base > k)
    return ~pl.col(IN_HISTORY).fill_null(False)


def _serendipity(ctx: RankingPieces, k: int) -> pl.Expr:
    # Divides by k, like precision: a short list is not excused.
    return over_constant(ctx.hit_count(k, _unexpected(ctx, k)), k)


def _ref_serendipity(u: ListCase, k: int, o: MetricOptions) -> float:
    if o.unexpected == "baseline":
        expected = {i for i, r in u.baseline.items() if r <= k}
    else:
        expected = set(u.history)
    return sum(i in u.relevant and i not in expected for i in u.top(k)) / k


register(
    Metric(
        "serendipity",
        _serendipity,
        _ref_serendipity,
        "|{i in L[:k]: i in R and i unexpected}| / k; unexpected = not in the baseline's "
        "top k (unexpected='baseline') or not in the user's train rows ('history')",
        needs=frozenset({"truth", "unexpected"}),
        notes="RecTools Serendipity: another definition, relevance x max(0, rank-based "
        "surprise - popularity-rank surprise), averaged over the list's own length. "
        "Recommenders serendipity: relevance x (1 - mean similarity to the user's train "
        "items), without a cutoff. Both reward different things; neither is comparable.",
    )
)
