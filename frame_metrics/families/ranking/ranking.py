"""Ranking metrics (spec section 2): one registry entry each.

Every builder reads one user's rows of the long table through a
:class:`~frame_metrics.metrics.context.RankingPieces` context; the empty-case policy is applied
around it by the registry, so builders may assume the user has a relevant item.
"""

from __future__ import annotations

import math

import polars as pl

from frame_metrics.metrics.context import RankingPieces, over_constant
from frame_metrics.metrics.registry import Metric, UserCase, register
from frame_metrics.options import MetricOptions

__all__: list[str] = []


# --- precision, recall, f1, hit rate ------------------------------------------------------


def _precision(ctx: RankingPieces, k: int) -> pl.Expr:
    # Divides by k even when fewer than k items were recommended (trec_eval, ranx, RecTools).
    return over_constant(ctx.hits(k), k)


def _ref_precision(u: UserCase, k: int, o: MetricOptions) -> float:
    return len(set(u.top(k)) & u.relevant(o)) / k


def _recall(ctx: RankingPieces, k: int) -> pl.Expr:
    return ctx.hits(k) / ctx.relevant_mass()


def _ref_recall(u: UserCase, k: int, o: MetricOptions) -> float:
    return len(set(u.top(k)) & u.relevant(o)) / len(u.relevant(o))


def _f1(ctx: RankingPieces, k: int) -> pl.Expr:
    # 2PR/(P+R) = 2·hits/(k + |R|): the same value without a 0/0 when both are 0.
    return 2.0 * ctx.hits(k) / (k + ctx.relevant_mass())


def _ref_f1(u: UserCase, k: int, o: MetricOptions) -> float:
    p, r = _ref_precision(u, k, o), _ref_recall(u, k, o)
    return 0.0 if p + r == 0 else 2 * p * r / (p + r)


def _hit_rate(ctx: RankingPieces, k: int) -> pl.Expr:
    # Under ties="average": 1 - P(no relevant item within k) over the orders of ties.
    return ctx.any_hit(k)


def _ref_hit_rate(u: UserCase, k: int, o: MetricOptions) -> float:
    return 1.0 if set(u.top(k)) & u.relevant(o) else 0.0


# --- reciprocal rank and average precision -------------------------------------------------


#: A cutoff past any rank: trec_eval's recip_rank (``mrr_cutoff="none"``).
NO_CUTOFF = 2**62


def _mrr(ctx: RankingPieces, k: int) -> pl.Expr:
    return ctx.reciprocal_rank(k if ctx.options.mrr_cutoff == "k" else NO_CUTOFF)


def _ref_mrr(u: UserCase, k: int, o: MetricOptions) -> float:
    rel = u.relevant(o)
    for i in u.top(k if o.mrr_cutoff == "k" else NO_CUTOFF):
        if i in rel:
            return 1.0 / u.ranks[i]
    return 0.0


def _ap(ctx: RankingPieces, k: int) -> pl.Expr:
    total = ctx.precision_at_hits_sum(k)
    denominator = {
        "min_k": pl.min_horizontal(ctx.relevant_mass(), pl.lit(k)),
        "relevant": ctx.relevant_mass(),
        "hits": ctx.hits(k),
        "k": None,
    }[ctx.options.ap_denominator]
    if denominator is None:
        return over_constant(total, k)
    return pl.when(denominator > 0).then(total / denominator).otherwise(0.0)


def _ref_ap(u: UserCase, k: int, o: MetricOptions) -> float:
    rel = u.relevant(o)
    hits, total = 0, 0.0
    for i in u.top(k):
        if i in rel:
            hits += 1
            total += hits / u.ranks[i]
    d = {"min_k": min(len(rel), k), "relevant": len(rel), "hits": hits, "k": k}[o.ap_denominator]
    return total / d if d else 0.0


# --- discounted cumulative gain --------------------------------------------------------------


def _dcg(ctx: RankingPieces, k: int) -> pl.Expr:
    return ctx.gain_sum(k)


def _idcg(ctx: RankingPieces, k: int) -> pl.Expr:
    if ctx.options.idcg == "k":
        # k slots of gain 1 (RecTools' IDCG), added as the list's DCG is.
        return ctx.ideal_slots_sum(k)
    # Built from ALL relevant truth items, recommended or not, best gains first.
    return ctx.ideal_gain_sum(k)


def _ndcg(ctx: RankingPieces, k: int) -> pl.Expr:
    # An ideal DCG of 0 (relevant items whose gain is 0, e.g. threshold=0 and rel 0)
    # scores 0, as in trec_eval and scikit-learn; zero_ideal="skip": no value
    # (Recommenders' NaN, which its mean skips).
    idcg = _idcg(ctx, k)
    zero = 0.0 if ctx.options.zero_ideal == "zero" else None
    return pl.when(idcg > 0).then(_dcg(ctx, k) / idcg).otherwise(pl.lit(zero, pl.Float64))


def _ref_gain(rel: float, o: MetricOptions) -> float:
    return o.gain_of(rel)


def _ref_dcg(u: UserCase, k: int, o: MetricOptions) -> float:
    rel = u.relevant(o)
    return sum(
        _ref_gain(u.relevance[i], o) / math.log2(u.ranks[i] + 1) for i in u.top(k) if i in rel
    )


def _ref_ndcg(u: UserCase, k: int, o: MetricOptions) -> float | None:
    if o.idcg == "k":
        return _ref_dcg(u, k, o) / sum(1 / math.log2(p + 1) for p in range(1, k + 1))
    ideal = sorted((_ref_gain(u.relevance[i], o) for i in u.relevant(o)), reverse=True)[:k]
    idcg = sum(g / math.log2(pos + 2) for pos, g in enumerate(ideal))
    if idcg > 0:
        return _ref_dcg(u, k, o) / idcg
    return 0.0 if o.zero_ideal == "zero" else None


_GAINS = frozenset({"gain", "gain_scope"})

register(
    Metric(
        "precision",
        _precision,
        _ref_precision,
        "hits@k / k",
        tie_average=True,
        weighted_unbounded=True,
    )
)
register(Metric("recall", _recall, _ref_recall, "hits@k / |R|", tie_average=True))
register(
    Metric(
        "f1",
        _f1,
        _ref_f1,
        "2·P@k·R@k / (P@k + R@k), 0 when both are 0",
        tie_average=True,
        weighted_unbounded=True,
    )
)
register(Metric("hit_rate", _hit_rate, _ref_hit_rate, "1 if hits@k > 0 else 0", tie_average=True))
register(
    Metric(
        "mrr",
        _mrr,
        _ref_mrr,
        "1 / rank of the first relevant item in L[:k], else 0",
        options=frozenset({"mrr_cutoff"}),
        whole_list_under=frozenset({("mrr_cutoff", "none")}),
    )
)
register(
    Metric(
        "ap",
        _ap,
        _ref_ap,
        "(1/D)·Σ_{r<=k, L[r]∈R} hits@r / r, D set by ap_denominator (default min(|R|, k))",
        options=frozenset({"ap_denominator"}),
        weighted_unbounded=True,
    )
)
register(
    Metric(
        "dcg",
        _dcg,
        _ref_dcg,
        "Σ_{r<=k} gain(rel(L[r])) / log2(r + 1)",
        bounds=(0.0, None),
        options=_GAINS,
        tie_average=True,
    )
)
register(
    Metric(
        "ndcg",
        _ndcg,
        _ref_ndcg,
        "dcg@k / idcg@k, idcg from all relevant items",
        options=_GAINS | {"idcg", "zero_ideal"},
        tie_average=True,
    )
)
