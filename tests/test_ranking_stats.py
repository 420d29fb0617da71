"""The ranking family's two phases: recording the statistics, then the query.

Building the metrics' expressions against :class:`UserStats` records what they read;
:meth:`UserStats.recorded` freezes that into a :class:`NeededStats`, and
:func:`user_statistics` computes it from the data. The description goes one way: the
query learns things from each call's data (the distinct gains of the relevant rows) and
passes them on as arguments, so one description gives every dataset its own values.
Values are checked against the definitions (spec section 2: the ideal DCG; section 8:
tie-averaged hits), written out here in plain Python.
"""

from __future__ import annotations

import dataclasses
import math

import polars as pl
import pytest

from frame_metrics.families.ranking.query import RankingInputs, user_statistics
from frame_metrics.families.ranking.stats import UserStats
from frame_metrics.options import MetricOptions
from frame_metrics.prepare import RANK, TIE_FIRST, TIE_LAST

TOP_SCHEMA = {"user": pl.Int64, "item": pl.Int64, RANK: pl.Int64}


def _inputs(top: pl.DataFrame, truth: pl.DataFrame) -> RankingInputs:
    """The query's inputs over a user key ``user`` (truth carries every key column)."""
    return RankingInputs(
        keys=["user"],
        truth_keys=["user"],
        item="item",
        relevance="relevance",
        top=top.lazy(),
        truth=truth.lazy(),
        groups=None,
        all_keys=pl.concat([top.select("user"), truth.select("user")]).unique().lazy(),
    )


def _ideal_dcg(relevances: list[float], k: int) -> float:
    """Spec 2, linear gain: the DCG of the best ``k`` relevant items in ideal order."""
    best = sorted(relevances, reverse=True)[:k]
    return sum(g / math.log2(p + 1) for p, g in enumerate(best, start=1))


@pytest.mark.parametrize("k", [3, 25])
def test_one_description_serves_data_with_few_and_many_gains(k: int) -> None:
    """The gain levels one query finds do not carry over to the next query.

    The first dataset has two distinct gains (the ideal DCG is built from counts of
    each), the second twenty (more than the query counts: it sorts each user's gains).
    Were the first call's levels kept, the second would count only gains 1 and 2.
    """
    options = MetricOptions(gain="linear")
    stats = UserStats(options)
    idcg = stats.ideal_gain_sum(k)
    needed = stats.recorded()
    few = {1: [2.0, 1.0, 1.0, 2.0], 2: [1.0]}
    many = {1: [float(r) for r in range(1, 21)], 2: [3.0, 7.0, 5.0]}
    empty_top = pl.DataFrame(schema=TOP_SCHEMA)
    for relevances in (few, many):
        truth = pl.DataFrame(
            [
                {"user": u, "item": i, "relevance": r}
                for u, rels in relevances.items()
                for i, r in enumerate(rels)
            ],
            schema={"user": pl.Int64, "item": pl.Int64, "relevance": pl.Float64},
        )
        got = (
            user_statistics(_inputs(empty_top, truth), needed, options)
            .select("user", idcg.alias("idcg"))
            .collect()
        )
        assert dict(got.iter_rows()) == pytest.approx(
            {u: _ideal_dcg(rels, k) for u, rels in relevances.items()}, rel=1e-12
        )


@pytest.mark.parametrize(("tied", "expected"), [(True, 2 / 4), (False, 0.0)])
def test_tie_mode_is_given_to_the_recorder(tied: bool, expected: float) -> None:
    """``tied`` at construction decides whether hits@k averages over tied positions.

    One user, four items tied over positions 1..4, the relevant one placed at 4: under
    ``ties="average"`` it is within k = 2 in 2 of its 4 positions (spec 8), so hits@2 is
    1 · 2/4; without tie groups the rank as given counts, and 4 > 2.
    """
    options = MetricOptions(ties="average")
    stats = UserStats(options, tied=tied)
    stats.n_relevant()  # the evaluated users: those with a relevant item, as every metric
    hits = stats.hits(2)
    needed = stats.recorded()
    assert needed.tied is tied
    top = pl.DataFrame(
        {"user": [1] * 4, "item": [10, 11, 12, 13], RANK: [1, 2, 3, 4]}, schema=TOP_SCHEMA
    ).with_columns(pl.lit(1, pl.Int64).alias(TIE_FIRST), pl.lit(4, pl.Int64).alias(TIE_LAST))
    truth = pl.DataFrame({"user": [1], "item": [13], "relevance": [1.0]})
    got = user_statistics(_inputs(top, truth), needed, options).select(hits).collect().item()
    assert got == expected


def test_the_description_is_frozen() -> None:
    """Recording after :meth:`UserStats.recorded` leaves the description as it was."""
    stats = UserStats(MetricOptions())
    stats.hits(3)
    needed = stats.recorded()
    stats.view(MetricOptions(gain="binary")).hits(5)
    stats.n_relevant()
    assert needed.columns("hits") == ["_fm_hits@3"]
    assert not needed.uses("truth")
    assert stats.recorded().columns("hits") == ["_fm_hits@3", "_fm_hits@5"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(needed, "tied", True)  # noqa: B010 (an assignment mypy would refuse)
