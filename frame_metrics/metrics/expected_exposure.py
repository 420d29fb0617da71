"""Expected exposure (spec section 9.2; Diaz, Mitra, Ekstrand, Biega, Carterette, CIKM 2020).

Per user, over the items recommended or relevant: ``ε_i``, the attention item i gets
under RBP browsing (``p^(r_i - 1)`` within k, persistence p, default 0.5), averaged
over the user's rankings (one for a deterministic system, several told apart by
``sample=`` for a stochastic one); and the target ``ε*_i``, what an ideal ranking gives
it when items of one relevance grade share their positions equally. ``ee_disparity`` is
``‖ε‖²``, ``ee_relevance`` is ``ε·ε*`` and ``ee_loss`` is ``‖ε − ε*‖²``.

The scale: ``ee_loss`` is 0 when the exposure is the target's, ``‖ε*‖²`` for a user shown
nothing, at most ``ee_disparity + ‖ε*‖²`` (no attention on a relevant item) and never above
``2(1 − p^(2k)) / (1 − p²)``, 2.67 at p = 0.5 and k = 10; ``ee_disparity`` is at most
``(1 − p^(2k)) / (1 − p²)``, one ranking's, and ``ee_relevance`` at most ``‖ε*‖²``.

The family (:mod:`frame_metrics.families.expected_exposure`) computes the three sums per
user and cutoff; the entries here read them from an :class:`ExposureContext`. The
references (:class:`ExposureCase`) are the spec's definition in plain Python.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from frame_metrics.metrics.registry import Metric, register
from frame_metrics.options import EE_PERSISTENCE, MetricOptions

__all__ = ["ExposureCase", "ExposureContext", "exposures"]

#: The metrics' names, in the order the family computes their sums.
NAMES = ("ee_loss", "ee_disparity", "ee_relevance")


@dataclass(frozen=True)
class ExposureContext:
    """The per-user sums the family computed, one column per (metric, cutoff)."""

    options: MetricOptions

    @staticmethod
    def column(name: str, k: int) -> str:
        """The family's column of one metric's per-user sum at cutoff ``k``."""
        return f"_fm_{name}@{k}"

    def sum_of(self, name: str, k: int) -> pl.Expr:
        """One metric's per-user sum at cutoff ``k``."""
        return pl.col(self.column(name, k))


@dataclass(frozen=True)
class ExposureCase:
    """One user's rankings and relevance, in plain Python, for the references.

    ``rankings``: one ``{item: rank}`` per ranking the user got (several samples of a
    stochastic system; none for a user without a list); ``relevance``: truth's
    ``{item: relevance}`` (absent = 0).
    """

    rankings: Sequence[Mapping[Any, int]]
    relevance: Mapping[Any, float]


def exposures(
    case: ExposureCase, k: int, options: MetricOptions
) -> tuple[dict[Hashable, float], dict[Hashable, float]]:
    """``ε`` and ``ε*`` of one user at cutoff ``k``, as the spec writes them (items absent: 0).

    Examples
    --------
    Relevant {a: 2, b: 1, c: 1}, ranking [c, a], p = 0.5, k = 2: ε = {c: 1, a: 0.5};
    the ideal gives a position 1 (ε*_a = 1), and b and c share position 2 (0.5 / 2 each).

    >>> case = ExposureCase([{"c": 1, "a": 2}], {"a": 2, "b": 1, "c": 1})
    >>> eps, target = exposures(case, 2, MetricOptions())
    >>> sorted(eps.items()), sorted(target.items())
    ([('a', 0.5), ('c', 1.0)], [('a', 1.0), ('b', 0.25), ('c', 0.25)])
    """
    p = options.persistence_or(EE_PERSISTENCE)
    eps: dict[Hashable, float] = {}
    for ranking in case.rankings:
        for item, rank in ranking.items():
            if rank <= k:
                eps[item] = eps.get(item, 0.0) + p ** (rank - 1)
    eps = {item: value / len(case.rankings) for item, value in eps.items()}
    relevant = {i: r for i, r in case.relevance.items() if options.is_relevant(r)}
    target: dict[Hashable, float] = {}
    for grade in set(relevant.values()):
        same = [i for i, r in relevant.items() if r == grade]
        m, b = len(same), sum(r > grade for r in relevant.values())
        share = sum(p ** (r - 1) for r in range(b + 1, min(b + m, k) + 1)) / m
        target |= dict.fromkeys(same, share)
    return eps, target


def _ref(name: str) -> Any:
    def reference(case: ExposureCase, k: int, options: MetricOptions) -> float:
        eps, target = exposures(case, k, options)
        items = set(eps) | set(target)
        e = [eps.get(i, 0.0) for i in items]
        t = [target.get(i, 0.0) for i in items]
        if name == "ee_disparity":
            return sum(x * x for x in e)
        if name == "ee_relevance":
            return sum(x * y for x, y in zip(e, t, strict=True))
        return sum((x - y) ** 2 for x, y in zip(e, t, strict=True))

    return reference


def _build(name: str) -> Any:
    def build(ctx: ExposureContext, k: int) -> pl.Expr:
        return ctx.sum_of(name, k)

    return build


_NOTES = (
    "expeval (diazf/expeval, the authors' code): with -u rbp -U the same ε and the same "
    "sums (difference, disparity, relevance; patience 0.5), but its ideal ranking is not "
    "cut at k, so a user whose relevant items do not fit within k gets another target; "
    "its defaults are gerr browsing and values normalised between bounds. TREC Fair "
    "Ranking 2020 used the measure. LensKit has none (lenskit/lkpy#694 asks for it)."
)

register(
    Metric(
        "ee_loss",
        _build("ee_loss"),
        _ref("ee_loss"),
        "‖ε − ε*‖² over the items recommended or relevant; ε_i = mean over the user's "
        "rankings of p^(r_i − 1) within k, ε*_i = (1/m) Σ_{r=b+1}^{min(b+m, k)} p^(r−1) "
        "for a grade with m items and b of higher grade",
        higher_is_better=False,
        bounds=(0.0, None),
        family="expected_exposure",
        options=frozenset({"persistence"}),
        scale="0: the exposure is the target's (ε = ε*: the ideal order, the items "
        "of a grade sharing its positions equally, over several rankings when a grade has "
        "more than one item). A user shown nothing scores ‖ε*‖², the loss of an empty "
        "list (1 for one relevant item). The loss is at most ‖ε‖² + ‖ε*‖² "
        "= ee_disparity + ‖ε*‖², reached when no attention falls on a relevant item "
        "(ee_relevance = 0), and never above 2(1 - p^(2k)) / (1 - p²): 2.67 at the default "
        "p = 0.5 and k = 10, 2 at k = 1. ‖ε*‖² = ee_loss - ee_disparity + "
        "2·ee_relevance, from the same call.",
        notes=_NOTES,
        samples=True,
    )
)
register(
    Metric(
        "ee_disparity",
        _build("ee_disparity"),
        _ref("ee_disparity"),
        "‖ε‖², ε_i = mean over the user's rankings of p^(r_i − 1) within k",
        higher_is_better=False,
        bounds=(0.0, None),
        family="expected_exposure",
        options=frozenset({"persistence"}),
        scale="0: nothing shown within k. At most (1 - p^(2k)) / (1 - p²), the value of one "
        "ranking of k items (1.33 at the default p = 0.5 and k = 10): rankings that vary "
        "over samples spread the attention and score less.",
        notes=_NOTES,
        samples=True,
    )
)
register(
    Metric(
        "ee_relevance",
        _build("ee_relevance"),
        _ref("ee_relevance"),
        "ε·ε*, the exposure the user's rankings give relevant items, weighted by their target",
        bounds=(0.0, None),
        family="expected_exposure",
        options=frozenset({"persistence"}),
        scale="0: no attention on a relevant item. At most ‖ε*‖², the value of the "
        "ideal order (relevant items by grade, first).",
        notes=_NOTES,
        samples=True,
    )
)
