"""IR measures (spec section 8): r_precision, bpref, err, rbp and judged, one entry each.

Binary relevance is ``rel >= threshold`` as everywhere; "judged" means a truth row of
any relevance, 0 included. They follow the spec's section 3 policy on who is averaged,
like every ranking metric.
"""

from __future__ import annotations

import polars as pl

from frame_metrics.metrics.context import RankingPieces, over_constant
from frame_metrics.metrics.registry import Metric, UserCase, register
from frame_metrics.options import RBP_PERSISTENCE, MetricOptions

__all__: list[str] = []


def _ordered(u: UserCase) -> list[object]:
    """The whole recommended list, best first."""
    return [i for i, _ in sorted(u.ranks.items(), key=lambda p: p[1])]


# --- R-precision ---------------------------------------------------------------------------


def _r_precision(ctx: RankingPieces, k: int) -> pl.Expr:
    return ctx.hits_within_relevant() / ctx.relevant_mass()


def _ref_r_precision(u: UserCase, k: int, o: MetricOptions) -> float:
    rel = u.relevant(o)
    return len({i for i in rel if i in u.ranks and u.ranks[i] <= len(rel)}) / len(rel)


# --- bpref ---------------------------------------------------------------------------------


def _bpref(ctx: RankingPieces, k: int) -> pl.Expr:
    return ctx.bpref_sum() / ctx.relevant_mass()


def _ref_bpref(u: UserCase, k: int, o: MetricOptions) -> float:
    rel = u.relevant(o)
    n_nonrel = sum(1 for i in u.relevance if i not in rel)
    total, nonrel_above = 0.0, 0
    for i in _ordered(u):
        if i in rel:
            if nonrel_above:
                total += 1.0 - min(nonrel_above, len(rel)) / min(len(rel), n_nonrel)
            else:
                total += 1.0
        elif i in u.relevance:  # judged, not relevant
            nonrel_above += 1
    return total / len(rel)


# --- expected reciprocal rank -----------------------------------------------------------------


def _err(ctx: RankingPieces, k: int) -> pl.Expr:
    return ctx.err_sum(k)


def _ref_err(u: UserCase, k: int, o: MetricOptions) -> float:
    # The harness sets max_relevance (the engine's default is the largest relevance in
    # all of truth, which one user's case cannot see).
    assert o.max_relevance is not None
    rel = u.relevant(o)
    total, still = 0.0, 1.0
    for i in u.top(k):
        g = u.relevance[i] if i in rel else 0.0
        p = (2.0**g - 1.0) / 2.0**o.max_relevance
        total += still * p / u.ranks[i]
        still *= 1.0 - p
    return total


# --- rank-biased precision --------------------------------------------------------------------


def _rbp(ctx: RankingPieces, k: int) -> pl.Expr:
    return (1.0 - ctx.options.persistence_or(RBP_PERSISTENCE)) * ctx.rbp_sum()


def _ref_rbp(u: UserCase, k: int, o: MetricOptions) -> float:
    p, rel = o.persistence_or(RBP_PERSISTENCE), u.relevant(o)

    def gain(i: object) -> float:
        if o.rbp_gain == "binary":
            return 1.0
        if o.rbp_gain == "relevance":
            return float(u.relevance[i])
        top = max(u.relevance.values())
        return float(u.relevance[i]) / top if top > 0 else 0.0

    return (1 - p) * sum(p ** (u.ranks[i] - 1) * gain(i) for i in _ordered(u) if i in rel)


# --- judged@k ----------------------------------------------------------------------------------


def _judged(ctx: RankingPieces, k: int) -> pl.Expr:
    return over_constant(ctx.judged_count(k), k)


def _ref_judged(u: UserCase, k: int, o: MetricOptions) -> float:
    return sum(1 for i in u.top(k) if i in u.relevance) / k


_JUDGED = frozenset({"truth", "judged"})

register(
    Metric(
        "r_precision",
        _r_precision,
        _ref_r_precision,
        "hits@R / R: precision at rank R, the user's number of relevant items (trec_eval Rprec)",
        takes_k=False,
        whole_list=True,
        notes="trec_eval Rprec, ranx r_precision and ir_measures Rprec: the same.",
    )
)
register(
    Metric(
        "bpref",
        _bpref,
        _ref_bpref,
        "(1/R)·Σ_{relevant retrieved r} (1 - min(n_r, R) / min(R, N)), n_r = judged "
        "non-relevant items above r, N = judged non-relevant items (trec_eval bpref)",
        takes_k=False,
        whole_list=True,
        needs=_JUDGED,
        notes="trec_eval bpref and ir_measures Bpref: the same. ranx bpref: NaN for a user "
        "without a judged non-relevant item (here each retrieved relevant item adds 1).",
    )
)
register(
    Metric(
        "err",
        _err,
        _ref_err,
        "Σ_{r<=k} (1/r)·P_r·Π_{i<r}(1 - P_i), P_i = (2^g_i - 1) / 2^g_max (Chapelle et al. 2009)",
        options=frozenset({"max_relevance"}),
        own_gain="exponential",
        needs=frozenset({"truth", "max_relevance"}),
        weighted_unbounded=True,
        notes="ir_measures ERR@k (gdeval): g_max fixed at 4 (max_relevance=4), values "
        "rounded to 5 decimals. trec_eval and ranx have no ERR.",
    )
)
register(
    Metric(
        "rbp",
        _rbp,
        _ref_rbp,
        "(1 - p)·Σ_r rel(L[r])·p^(r-1) over the whole list, p = persistence (Moffat and Zobel 2008)",
        takes_k=False,
        whole_list=True,
        options=frozenset({"persistence", "rbp_gain", "gain_scope"}),
        unbounded_under=frozenset({("rbp_gain", "relevance")}),
        weighted_unbounded=True,
        notes="ir_measures RBP(p=0.8, rel=1): the same. trec_eval 10.0 rbp: p = 0.9, gain "
        "rel / (the user's largest judged relevance), every rel > 0 (rbp_gain='relative', "
        "gain_scope='positive'). ranx rbp.p: the relevance as gain (rbp_gain='relevance'), "
        "no default p.",
    )
)
register(
    Metric(
        "judged",
        _judged,
        _ref_judged,
        "|{i in L[:k] with a truth row}| / k",
        needs=_JUDGED,
        notes="ir_measures Judged@k: divides by min(k, list length), not k. trec_eval has "
        "no judged measure (10.0's unj_k counts the unjudged items).",
    )
)
