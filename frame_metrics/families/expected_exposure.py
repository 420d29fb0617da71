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

The family (:class:`ExpectedExposureFamily`) computes the three sums per
user and cutoff; the entries here read them from an :class:`ExposureContext`. The
references (:class:`ExposureCase`) are the spec's definition in plain Python.

The expected exposure family: ee_loss, ee_disparity and ee_relevance (spec section 9.2).

Per user and cutoff k, over the items recommended or relevant:

- ``ε_i``: each ranking's RBP attention ``p^(r_i - 1)`` within k, summed over the user's
  rankings and divided by their number (the distinct ``sample`` values of the user in
  recs; one without ``sample=``; under ``ties="average"`` the mean over the positions
  of the item's tie group, its expected value over the orders of the group);
- ``ε*_i``: the attention ``p^(j - 1)`` of the ideal positions j <= k of the item's
  relevance grade (relevant items sorted by relevance, descending), shared equally by
  the grade's m items;
- the three sums ``Σ ε_i²``, ``Σ ε_i ε*_i`` and ``Σ (ε_i - ε*_i)²``.

Every float sum is taken over sorted terms (``cum_sum`` after a sort), so a value does
not depend on the order of the rows: the same bits for every frame kind, bucket and
partition. A user's rankings stay together in partitioned runs: recs are split by the
user key, of which ``sample`` is not part.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import polars as pl

from frame_metrics.columns import check_roles, key_roles
from frame_metrics.family import Context, Family
from frame_metrics.metrics.context import rbp_weight
from frame_metrics.metrics.registry import Metric, Requested, register
from frame_metrics.options import EE_PERSISTENCE, MetricOptions
from frame_metrics.prepare import RANK, REL, TIE_FIRST, TIE_LAST
from frame_metrics.spec import Spec

__all__ = [
    "FAMILY",
    "N_SAMPLES",
    "ExpectedExposureFamily",
    "ExposureCase",
    "ExposureContext",
    "exposures",
]


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


# --------------------------------------------------------------------------- the family


#: Per user: how many rankings (distinct samples) the user has in recs.
N_SAMPLES = "_fm_ee_samples"
#: Per (user, item): the item is relevant (it has a target exposure).
_RELEVANT = "_fm_ee_relevant"
#: An ideal position of a relevant item (relevant items by relevance, descending).
_IDEAL = "_fm_ee_position"


def _eps(k: int) -> str:
    return f"_fm_ee_eps@{k}"


def _target(k: int) -> str:
    return f"_fm_ee_target@{k}"


def sorted_sum(values: pl.Expr) -> pl.Expr:
    """A float sum that does not depend on the order of the rows: the terms sorted first.

    ``cum_sum().last()``, not ``sum()``: polars drops a ``sort()`` right before a
    ``sum()`` (see :func:`frame_metrics.numerics.ordered_sum`).
    """
    return values.sort().cum_sum().last().fill_null(0.0)


def _partial_sums(p: float, k: int) -> pl.Expr:
    """W(n) = Σ_{r=1..n} p^(r-1) for n = 0..k, each from the one before (a literal)."""
    sums, total = [0.0], 0.0
    weights = pl.select(rbp_weight(pl.int_range(1, k + 1), p)).to_series()
    for w in weights:
        total += w
        sums.append(total)
    return pl.lit(pl.Series("_fm_ee_w", sums, dtype=pl.Float64))


def _attention(p: float, k: int, tied: bool) -> pl.Expr:
    """A recommended row's attention at cutoff k (0 below it).

    Under ``ties="average"`` a row of a tie group over positions a..b gets the mean of
    p^(r-1) over the group's positions within k (its expected attention when the group
    is ordered at random); a row alone in its group keeps its own term.
    """
    own = pl.when(pl.col(RANK) <= k).then(rbp_weight(pl.col(RANK), p)).otherwise(0.0)
    if not tied:
        return own
    a, b = pl.col(TIE_FIRST), pl.col(TIE_LAST)
    w = _partial_sums(p, k)
    spread = (w.gather(pl.min_horizontal(b, k)) - w.gather(pl.min_horizontal(a - 1, k))) / (
        b - a + 1
    ).cast(pl.Float64)
    return pl.when(a == b).then(own).when(a <= k).then(spread).otherwise(0.0)


class ExpectedExposureFamily(Family):
    """Expected exposure: each user's attention per item against the ideal's."""

    name: ClassVar[str] = "expected_exposure"
    order: ClassVar[int] = 50

    def reads(self, spec: Spec) -> Mapping[str, Collection[str]]:
        """Recs' sample column, when given."""
        sample = spec.columns.sample
        return {"recs": [sample]} if sample is not None else {}

    def recs_roles(self, spec: Spec) -> Mapping[str, str]:
        """The rank or score column, and the sample column when given."""
        roles = dict(super().recs_roles(spec))
        if spec.columns.sample is not None:
            roles["sample"] = spec.columns.sample
        return roles

    def check_call(self, spec: Spec, *, aggregate: bool) -> None:
        """The sample column is none of recs' other columns."""
        c = spec.columns
        if c.sample is None:
            return
        keys = key_roles(c.user, c.by)
        role, column = c.order
        check_roles(
            {spec.source_label: {**keys, "item": c.item, role: column, "sample": c.sample}}, {}
        )

    def reads_every_row(self, spec: Spec, broadcast: Collection[str]) -> bool:
        """Samples are counted at any rank; ``empty="zero"``/``users=`` see every user."""
        return spec.columns.sample is not None or any(
            q.options.empty != "skip" or q.options.users != "all" for q in spec.of_family(self.name)
        )

    def per_user(self, ctx: Context) -> pl.LazyFrame | None:
        """The three sums per user and cutoff, then each requested metric's value."""
        requests = ctx.requests(self.name)
        if not requests:
            return None
        groups: dict[MetricOptions, list[Requested]] = {}
        for q in requests:
            groups.setdefault(q.options, []).append(q)
        keys = ctx.keys
        parts = [_per_user(ctx, options, qs) for options, qs in groups.items()]
        frame = parts[0]
        for part in parts[1:]:
            frame = frame.join(part, on=keys, how="full", coalesce=True, nulls_equal=True)
        return frame

    def partition_reads(self, spec: Spec) -> frozenset[str] | None:
        """No table over every user: each user's lists only."""
        return frozenset()


FAMILY = ExpectedExposureFamily()


def _per_user(ctx: Context, options: MetricOptions, requests: list[Requested]) -> pl.LazyFrame:
    """One set of options' metrics: ε and ε* per (user, item), summed per user."""
    assert ctx.prepared is not None
    spec, keys, prepared = ctx.spec, ctx.keys, ctx.prepared
    c = spec.columns
    item = c.item
    p = options.persistence_or(EE_PERSISTENCE)
    ks = sorted({q.k for q in requests})
    top = prepared.top
    tied = TIE_FIRST in top.collect_schema()

    # ε: per (user, item), the attention summed over the user's rankings (sorted terms),
    # over the number of rankings.
    listed = top.group_by([*keys, item]).agg(
        sorted_sum(_attention(p, k, tied)).alias(_eps(k)) for k in ks
    )
    if c.sample is not None:
        # Every ranking the user got counts, also one with no item within k.
        samples = ctx.inputs.source.lazy.group_by(keys).agg(
            pl.col(c.sample).n_unique().cast(pl.Float64).alias(N_SAMPLES)
        )
        listed = listed.join(samples, on=keys, how="left", nulls_equal=True).select(
            *keys, item, *((pl.col(_eps(k)) / pl.col(N_SAMPLES)).alias(_eps(k)) for k in ks)
        )

    # ε*: the ideal positions of each grade within k, shared by the grade's items.
    truth = prepared.truth
    if prepared.groups is not None:
        truth = truth.join(prepared.groups, how="cross")
    t = options.threshold
    relevant = truth.filter(pl.col(REL) > 0 if t is None else pl.col(REL) >= t).select(
        *keys, item, REL
    )
    # Ties in relevance take consecutive positions in any order: a grade's set of
    # positions, which is all ε* reads, is the same.
    positioned = relevant.with_columns(
        pl.col(REL).rank("ordinal", descending=True).over(keys).cast(pl.Int64).alias(_IDEAL)
    )
    grades = positioned.group_by([*keys, REL]).agg(
        *(
            (
                sorted_sum(
                    pl.when(pl.col(_IDEAL) <= k).then(rbp_weight(pl.col(_IDEAL), p)).otherwise(0.0)
                )
                / pl.len().cast(pl.Float64)
            ).alias(_target(k))
            for k in ks
        )
    )
    targets = relevant.join(grades, on=[*keys, REL], how="left", nulls_equal=True).select(
        *keys, item, pl.lit(True).alias(_RELEVANT), *(_target(k) for k in ks)
    )

    # The items recommended or relevant, each with both (0 where absent).
    both = listed.join(targets, on=[*keys, item], how="full", coalesce=True, nulls_equal=True)
    both = both.with_columns(
        *(pl.col(_eps(k)).fill_null(0.0) for k in ks),
        *(pl.col(_target(k)).fill_null(0.0) for k in ks),
        pl.col(_RELEVANT).fill_null(False),
    )
    sums: list[pl.Expr] = [pl.col(_RELEVANT).sum().alias("_fm_ee_n_relevant")]
    for k in ks:
        e, s = pl.col(_eps(k)), pl.col(_target(k))
        d = e - s
        sums += [
            sorted_sum(d * d).alias(ExposureContext.column("ee_loss", k)),
            sorted_sum(e * e).alias(ExposureContext.column("ee_disparity", k)),
            sorted_sum(e * s).alias(ExposureContext.column("ee_relevance", k)),
        ]
    per_user = both.group_by(keys).agg(sums)

    # Who gets a value (spec section 3): users with a relevant item, of the ``users=``
    # set; the others in it 0 under ``empty="zero"``.
    wanted = {"all": (), "truth": ("truth",), "recs": ("recs",), "both": ("truth", "recs")}
    flags = wanted[options.users]
    if options.empty == "zero" or flags:
        per_user = prepared.all_keys.join(per_user, on=keys, how="left", nulls_equal=True)
    members = {"truth": prepared.truth_user_keys, "recs": prepared.recs_keys}
    for flag in flags:
        users = members[flag]
        assert users is not None
        per_user = per_user.join(
            users.with_columns(pl.lit(True).alias(f"_fm_in_{flag}")),
            on=keys,
            how="left",
            nulls_equal=True,
        ).with_columns(pl.col(f"_fm_in_{flag}").fill_null(False))
    member = pl.all_horizontal(pl.lit(True), *(pl.col(f"_fm_in_{f}") for f in flags))
    defined = member & (pl.col("_fm_ee_n_relevant").fill_null(0) > 0)
    null = pl.lit(None, pl.Float64)
    otherwise = pl.when(member).then(0.0) if options.empty == "zero" else null
    ectx = ExposureContext(options)
    values = [
        pl.when(defined).then(q.value(ectx)).otherwise(otherwise).alias(q.column) for q in requests
    ]
    assert {q.metric.name for q in requests} <= set(NAMES)
    return per_user.select(*keys, *values)
