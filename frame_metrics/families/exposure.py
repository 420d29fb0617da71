"""Exposure and provider fairness (spec section 9.2): one registry entry each.

A browsing model gives the attention ``e(r)`` rank r receives (``exposure=``): ``"log"``
``1/log2(r+1)``, ``"rbp"`` ``p^(r-1)`` (``persistence``, 0.8 when unset), ``"uniform"``
1. An item's exposure is ``E(i) = Σ_u e(rank_u(i))`` over the lists holding i within k.

- ``exposure_gini@k`` (corpus): the Gini coefficient of E over the catalog, as ``gini@k``
  (its ``exposure="uniform"`` case).
- ``exposure_parity@k`` (corpus): ``1 - JS(s, t)``, the Jensen-Shannon distance (log2)
  between the item groups' exposure shares s and a target t (``parity_target``).
- ``list_parity@k``: the same per list, averaged over the users with a grouped item
  within k; the target is the corpus-level one.

The family (:class:`ExposureFamily`) builds E from integer counts of
users per (item, rank) and group exposure from counts per (group, rank): counts add up
over partitions, and the float sums over ranks, items and groups are taken in a fixed
order, so every value is the same to the bit whatever the row order or the runner.

The exposure family: exposure Gini and parity of item groups (spec section 9.2).

Every value is built from integer counts that add up over partitions of the users:
per (``by``, item, rank) the users with the item at that rank (``exposure_gini``), per
(``by``, item group, rank) the recommended rows of the group's items at that rank
(``exposure_parity``), per ``by`` the users with a list. The browsing model's weights
``e(r)`` multiply the counts when the partials are finished, and the float sums over
ranks, items and groups are taken in a fixed order (ranks ascending, exposures
ascending, groups sorted), so a value is the same to the bit whatever the row order,
frame kind or runner. ``list_parity`` is a per-user value: its mean is the planner's
exact mean.

Item groups come from ``item_groups=`` (an item in several groups counts fully in each;
an item in none is left out), or by default from ``train=``: aplt's head and tail (an
item absent from train is tail). The targets: the groups' shares of catalog items (the
catalog given, else the items seen, as coverage), of relevant truth rows (merit: every
truth row, a table over every partition in a partitioned run), uniform, or a table.
Where the groups' table carries ``by`` columns, each ``by`` group's shares count its own
groups alone; with ``item_groups`` per ``by`` group and no catalog given, a ``by``
group's catalog is its own rows of ``item_groups`` (spec 9, clarified 2026-11-27).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import polars as pl

from frame_metrics import shared_tables
from frame_metrics.columns import check_roles, key_roles
from frame_metrics.errors import InvalidOptionError, Keyword, MissingInputError
from frame_metrics.extras import catalog_items, item_popularity, missing_from
from frame_metrics.family import (
    ENGINE,
    GROUP_USERS,
    Context,
    DiagnosticCount,
    Family,
    Partitioned,
)
from frame_metrics.metrics.context import IN_TAIL
from frame_metrics.metrics.registry import Metric, Requested, register
from frame_metrics.numerics import ordered_sum
from frame_metrics.options import RBP_PERSISTENCE, MetricOptions
from frame_metrics.prepare import RANK
from frame_metrics.spec import Spec
from frame_metrics.validation import CheckedFrame, nan_label_checks, null_checks

__all__ = [
    "DEFAULT_GROUPS",
    "EXPOSURE",
    "FAMILY",
    "GROUP",
    "SHARE",
    "TARGET",
    "ExposureContext",
    "ExposureFamily",
    "attention",
    "catalog_table",
    "exposure_per_group",
    "group_rows",
    "group_universe",
    "js_distance",
    "merit_table",
    "normalised",
    "rank_counts",
    "reference_shares",
    "target_shares",
    "weights",
]


#: An item's exposure E(i) (gini rows), or a group's exposure (parity rows).
EXPOSURE = "_fm_xp_exposure"
#: The item group of a parity row.
GROUP = "_fm_xp_group"
#: A group's share of exposure, and its target share (parity rows; null: undefined).
SHARE = "_fm_xp_share"
TARGET = "_fm_xp_target"
#: The catalog size, on every gini row of its group.
N_CATALOG = "_fm_xp_catalog_size"


def attention(options: MetricOptions, rank: int) -> float:
    """``e(r)``, the attention rank ``rank`` receives under ``options.exposure``.

    The engine reads its weights from here too (a table of ranks 1..k), so that the
    pure-Python references and the engine multiply the same floats.

    Examples
    --------
    >>> attention(MetricOptions(), 3)
    0.5
    >>> attention(MetricOptions(exposure="rbp"), 3)  # 0.8 ** 2
    0.6400000000000001
    >>> attention(MetricOptions(exposure="uniform"), 7)
    1.0
    """
    if options.exposure == "log":
        return 1.0 / math.log2(rank + 1)
    if options.exposure == "rbp":
        return float(options.persistence_or(RBP_PERSISTENCE) ** (rank - 1))
    return 1.0


@dataclass(frozen=True)
class ExposureContext:
    """The rows a metric reads: of a ``by`` group, or of one user's groups.

    exposure_gini: one per exposed item; exposure_parity: one per item group;
    list_parity: one per item group of the user's ``by`` group.
    """

    def exposure(self) -> pl.Expr:
        """E(i) of an item row (the gini rows)."""
        return pl.col(EXPOSURE)

    def catalog_size(self) -> pl.Expr:
        """``n``: the catalog's items."""
        return pl.col(N_CATALOG).first().cast(pl.Int64)

    def share(self) -> pl.Expr:
        """A group's share of exposure, the rows sorted by group."""
        return pl.col(SHARE).sort_by(pl.col(GROUP))

    def target(self) -> pl.Expr:
        """A group's target share, the rows sorted by group."""
        return pl.col(TARGET).sort_by(pl.col(GROUP))


def _exposure_gini(ctx: ExposureContext, k: int) -> pl.Expr:
    # gini@k's formula over E: Σ_j (2j - n - 1) E_(j) / (n Σ E), E ascending over the n
    # catalog items; unexposed items sort first and add 0, so only the m exposed ones
    # are summed, at positions n - m + 1 .. n. Sums in ascending order of E: the sorted
    # values are the same whatever the row order, and so are their sums.
    e = ctx.exposure().cast(pl.Float64)
    exposed = e.filter(e > 0).sort()
    m = exposed.len().cast(pl.Int64)
    n = ctx.catalog_size()
    position = n - m + exposed.cum_count().cast(pl.Int64)
    weighted = ordered_sum((2 * position - n - 1).cast(pl.Float64) * exposed)
    total = ordered_sum(exposed)
    return pl.when(total > 0).then(weighted / (n.cast(pl.Float64) * total)).otherwise(None)


def _ref_exposure_gini(
    lists: Mapping[Hashable, Sequence[Hashable]], k: int, n: int, options: MetricOptions
) -> float | None:
    exposure: dict[Hashable, float] = {}
    for items in lists.values():
        for r, i in enumerate(items[:k], start=1):
            exposure[i] = exposure.get(i, 0.0) + attention(options, r)
    e = sorted([0.0] * (n - len(exposure)) + list(exposure.values()))
    total = sum(e)
    if not total > 0:
        return None
    return sum((2 * j - n - 1) * x for j, x in enumerate(e, start=1)) / (n * total)


def js_distance(s: Sequence[float], t: Sequence[float]) -> float:
    """The Jensen-Shannon distance (log2) of two distributions over the same groups.

    Examples
    --------
    >>> js_distance([1.0, 0.0], [0.0, 1.0]), js_distance([0.5, 0.5], [0.5, 0.5])
    (1.0, 0.0)
    """
    jsd = 0.0
    for a, b in zip(s, t, strict=True):
        m = (a + b) / 2
        if a > 0:
            jsd += 0.5 * a * math.log2(a / m)
        if b > 0:
            jsd += 0.5 * b * math.log2(b / m)
    return math.sqrt(max(jsd, 0.0))


def _parity(ctx: ExposureContext, k: int) -> pl.Expr:
    # 1 - √JSD(s, t), log2: the terms of the groups in group order, summed in that order.
    # A group's term ½[s·log2(2s/(s+t)) + t·log2(2t/(s+t))] is written with log1p of
    # d = (s - t)/(s + t): for s ≈ t the two halves cancel to O(d²) without leaving a
    # rounding error of O(ε), whose square root would show as 1 - 1e-8 for equal shares.
    s, t = ctx.share(), ctx.target()
    d = (s - t) / (s + t)
    both = 0.5 * (s * d.log1p() + t * (-d).log1p()) / math.log(2)
    terms = pl.when((s > 0) & (t > 0)).then(both).otherwise(0.5 * (s + t))
    jsd = ordered_sum(terms)
    defined = s.is_not_null().all() & t.is_not_null().all() & (s.len() > 0)
    return pl.when(defined).then(1.0 - jsd.clip(0.0, None).sqrt()).otherwise(None)


def reference_shares(values: Mapping[Hashable, float]) -> dict[Hashable, float] | None:
    """Each group's value over the sum of the groups' (None when the sum is 0)."""
    total = sum(values.values())
    if not total > 0:
        return None
    return {g: v / total for g, v in values.items()}


def _ref_parity(
    exposure: Mapping[Hashable, float], target: Mapping[Hashable, float]
) -> float | None:
    """``1 - JS(s, t)`` from each group's exposure and target weight (same groups)."""
    s, t = reference_shares(exposure), reference_shares(target)
    if s is None or t is None:
        return None
    groups = sorted(target, key=lambda g: (type(g).__name__, g))
    return 1.0 - js_distance([s[g] for g in groups], [t[g] for g in groups])


_NOTES_PARITY = (
    "TREC Fair Ranking 2022's AWRF is in the same spirit and differs: 1 - the JS "
    "divergence in nats (not the distance in bits), discount 1/log2(max(r, 2)), relevant "
    "items only; no option reproduces it. Elliot's popularity-group metrics and "
    "RecBole-FairRec compare groups otherwise."
)

# persistence is the call's (a metric string may not set it: its row of the option
# table lists rbp alone).
_EXPOSURE_OPTIONS = frozenset({"exposure", "persistence"})


def _reference(*args: Any) -> Any:
    """Group-level references take the groups' weights: :func:`_ref_parity`."""
    return _ref_parity(*args)


register(
    Metric(
        "exposure_gini",
        _exposure_gini,
        _ref_exposure_gini,
        "Gini index of item exposure E(i) = Σ_u e(rank_u(i)) over the catalog: "
        "Σ_j (2j - n - 1) E_(j) / (n Σ E), E sorted ascending",
        higher_is_better=False,
        needs=frozenset({"catalog_size"}),
        notes="LensKit ExposureGini: the same Gini of item exposure with geometric weights "
        "of patience 0.85, i.e. exposure='rbp' with persistence=0.85, over items= catalog "
        "items (catalog= here); LensKit 2025.8 sums exposure in float32, so it agrees to "
        "about 1e-7, not to the bit (tests/test_exposure_peers.py). With "
        "exposure='uniform' it is gini@k exactly.",
        family="exposure",
        population="corpus",
        options=_EXPOSURE_OPTIONS,
    )
)
register(
    Metric(
        "exposure_parity",
        _parity,
        _reference,
        "1 - JS(s, t): Jensen-Shannon distance (log2) between the item groups' shares s of "
        "exposure within k and the target shares t (parity_target)",
        needs=frozenset(),
        notes=_NOTES_PARITY,
        family="exposure",
        population="corpus",
        options=_EXPOSURE_OPTIONS | {"parity_target", "threshold"},
    )
)
register(
    Metric(
        "list_parity",
        _parity,
        _reference,
        "1 - JS(s_u, t): exposure_parity of one list L[:k], the target the corpus-level one",
        needs=frozenset(),
        notes=_NOTES_PARITY,
        family="exposure",
        population="listed",
        options=_EXPOSURE_OPTIONS | {"parity_target", "threshold"},
    )
)


# --------------------------------------------------------------------------- the family


#: The default item groups: aplt's short head and long tail of train popularity.
DEFAULT_GROUPS = ("head", "tail")
#: Which rows of the partial frame: users per ``by``, per (item, rank), per (group, rank).
_KIND = "_fm_xp_kind"
_USERS, _ITEMS, _GROUPS = 0, 1, 2
_COUNT = "_fm_xp_count"
_RANK = "_fm_xp_rank"
_E = "_fm_xp_e"
_WEIGHT = "_fm_xp_weight"
_TOTAL = "_fm_xp_total"
#: Relevant truth rows per (truth's ``by`` columns, item), the merit target's counts.
_MERIT = "_fm_xp_merit"
#: The global table of merit counts, by threshold (``GlobalTables.tables``).
MERIT_TABLE = "exposure_merit"
_PARITY = ("exposure_parity", "list_parity")


def _users_column(k: int) -> str:
    return f"_fm_xp_users@{k}"


def weights(options: MetricOptions, k: int) -> pl.LazyFrame:
    """The browsing model's ``e(r)`` for ranks 1..k, as a table (``_RANK``, ``_E``)."""
    ranks = list(range(1, k + 1))
    return pl.LazyFrame(
        {_RANK: ranks, _E: [attention(options, r) for r in ranks]},
        schema={_RANK: pl.Int64, _E: pl.Float64},
    )


def _per(expr: pl.Expr, by: list[str]) -> pl.Expr:
    """A group-wise value broadcast onto each row of its ``by`` group (or of the frame)."""
    return expr.over(by) if by else expr


def normalised(frame: pl.LazyFrame, by: list[str], value: str, out: str) -> pl.LazyFrame:
    """``value`` over its sum within the ``by`` group, the sum in group order (null: 0)."""
    total = _per(ordered_sum(pl.col(value).cast(pl.Float64).sort_by(pl.col(GROUP))), by)
    x = pl.col(value).cast(pl.Float64)
    # Over a column of totals, not the one-row total: polars divides by a one-row column
    # as a multiplication by its reciprocal (as calibration's ``divided``).
    return frame.with_columns(
        pl.when(total > 0).then(x / (x * 0.0 + total)).otherwise(None).alias(out)
    )


class ExposureFamily(Family):
    """exposure_gini, exposure_parity (per group) and list_parity (per user)."""

    name: ClassVar[str] = "exposure"
    order: ClassVar[int] = 45

    # -- what it reads and refuses -------------------------------------------------------

    def reads(self, spec: Spec) -> Mapping[str, Collection[str]]:
        """The group column of ``item_groups``."""
        return {"item_groups": [spec.columns.group]}

    def check_call(self, spec: Spec, *, aggregate: bool) -> None:
        """Group-level metrics need ``aggregate=True``; groups need item_groups or train.

        And item_groups' group column is none of its by and item columns (a column named
        like a by column is read as that by column).
        """
        requests = spec.of_family(self.name)
        c = spec.columns
        if "item_groups" in spec.frames:
            roles = {**key_roles([], c.by), "item": c.item, "group": c.group}
            check_roles({"item_groups": roles}, {})
        corpus = [q.column for q in requests if q.metric.population == "corpus"]
        if corpus and not aggregate:
            raise InvalidOptionError(
                f"expected True for corpus metrics (one value per by group, not per "
                f"user), got False with {', '.join(corpus)}",
                option="aggregate",
                columns=corpus,
            )
        for q in requests:
            if q.metric.name not in _PARITY:
                continue
            if "item_groups" not in spec.frames and "train" not in spec.frames:
                raise MissingInputError(
                    q.column,
                    "item_groups",
                    "one row per (item, group) with the item column and the group column",
                    "; or pass ",
                    Keyword("train"),
                    " for aplt's head and tail groups",
                )
            target = q.options.parity_target
            if target == "merit" and "truth" not in spec.frames:
                raise MissingInputError(
                    q.column,
                    "truth",
                    "the relevant truth rows that make the merit target",
                )
            if isinstance(target, tuple) and "item_groups" not in spec.frames:
                named = [g for g, _ in target]
                if sorted(named, key=repr) != sorted(DEFAULT_GROUPS):
                    raise InvalidOptionError(
                        "expected a {group: share} table of the groups 'head' and 'tail' "
                        "(aplt's, from train; pass item_groups= for others), got "
                        f"{dict(target)!r} for {q.column}",
                        option="parity_target",
                    )

    def reads_every_row(self, spec: Spec, broadcast: Collection[str]) -> bool:
        """The default catalog is every item seen, at any rank."""
        return _needs_catalog(spec) and "catalog" not in broadcast

    # -- per user ------------------------------------------------------------------------

    def per_user(self, ctx: Context) -> pl.LazyFrame | None:
        """``list_parity`` of each user with a grouped item within k."""
        requests = [q for q in ctx.requests(self.name) if q.metric.name == "list_parity"]
        if not requests:
            return None
        assert ctx.prepared is not None
        keys, by = ctx.keys, list(ctx.spec.columns.by)
        top = ctx.prepared.top
        grouped = group_rows(ctx, top)
        frames = []
        for q in requests:
            rows = grouped.filter(pl.col(RANK) <= q.k).join(
                weights(q.options, q.k), left_on=RANK, right_on=_RANK, how="inner"
            )
            per_group = rows.group_by([*keys, GROUP]).agg(
                ordered_sum(pl.col(_E).sort_by(pl.col(RANK))).alias(EXPOSURE)
            )
            users = per_group.select(keys).unique()
            universe = group_universe(ctx, users)
            cells = universe.join(per_group, on=[*keys, GROUP], how="left").with_columns(
                pl.col(EXPOSURE).fill_null(0.0)
            )
            cells = _normalised_by_key(cells, keys, EXPOSURE, SHARE)
            target = target_shares(ctx, q, top.select(by).unique() if by else None)
            cells = cells.join(target, on=[*by, GROUP], how="left")
            frames.append(cells.group_by(keys).agg(q.value(ExposureContext())))
        out = frames[0]
        for frame in frames[1:]:
            out = out.join(frame, on=keys, how="full", coalesce=True, nulls_equal=True)
        return out

    # -- diagnostics ---------------------------------------------------------------------

    def diagnostics(self, ctx: Context) -> list[DiagnosticCount]:
        """Items without a group (given ``item_groups=``); users left out of list_parity.

        Items: distinct recommended items within the largest cutoff (per ``by`` group
        the table carries) that no row of ``item_groups`` names: left out of every
        exposure share. Users: per cutoff of ``list_parity``, users with a list within
        it but no grouped item there, who have no list_parity value.
        """
        requests = ctx.requests(self.name)
        if not requests:
            return []
        assert ctx.prepared is not None
        c, keys = ctx.spec.columns, ctx.keys
        deepest = max(q.k for q in requests)
        top = ctx.prepared.top.filter(pl.col(RANK) <= deepest)
        found = []
        given = _item_groups(ctx)
        if given is not None:
            table, table_by = given
            on = [*table_by, c.item]
            items = top.select(*on).unique()
            found.append(
                DiagnosticCount(
                    "items_without_group",
                    f"recommended items (within k={deepest}) in no item group",
                    items.join(table.select(on).unique(), on=on, how="anti"),
                    distinct=True,
                )
            )
        grouped = group_rows(ctx, top)
        for k in sorted({q.k for q in requests if q.metric.name == "list_parity"}):
            listed = top.filter(pl.col(RANK) <= k).select(keys).unique()
            with_group = grouped.filter(pl.col(RANK) <= k).select(keys).unique()
            left = listed.join(with_group, on=keys, how="anti", nulls_equal=True)
            found.append(
                DiagnosticCount(
                    f"users_without_grouped_item@{k}",
                    f"users with a list but no grouped item within k={k} (no list_parity)",
                    left.select(pl.len().cast(pl.Int64).alias("n")),
                )
            )
        return found

    # -- per group -----------------------------------------------------------------------

    def partials(self, ctx: Context) -> pl.LazyFrame | None:
        """Integer counts: users per ``by``; per (item, rank) and per (group, rank)."""
        requests = [q for q in ctx.requests(self.name) if q.metric.population == "corpus"]
        if not requests:
            return None
        assert ctx.prepared is not None
        c = ctx.spec.columns
        by = list(c.by)
        top = ctx.prepared.top
        ks = sorted({q.k for q in ctx.requests(self.name)})
        top = top.filter(pl.col(RANK) <= ks[-1])
        user = pl.col(c.user[0]) if len(c.user) == 1 else pl.struct(list(c.user))
        users_aggs = [
            user.filter(pl.col(RANK) <= k).n_unique().cast(pl.Int64).alias(_users_column(k))
            for k in ks
        ]
        users = top.group_by(by).agg(users_aggs) if by else top.select(users_aggs)
        parts = [users.with_columns(pl.lit(_USERS, pl.Int8).alias(_KIND))]
        if any(q.metric.name == "exposure_gini" for q in requests):
            rank = pl.col(RANK).cast(pl.Int64).alias(_RANK)
            items = top.group_by([*by, c.item, rank]).agg(pl.len().cast(pl.Int64).alias(_COUNT))
            parts.append(items.with_columns(pl.lit(_ITEMS, pl.Int8).alias(_KIND)))
        if any(q.metric.name == "exposure_parity" for q in requests):
            groups = rank_counts(ctx, top)
            parts.append(groups.with_columns(pl.lit(_GROUPS, pl.Int8).alias(_KIND)))
        return pl.concat(parts, how="diagonal_relaxed")

    def combine(self, spec: Spec, stacked: pl.DataFrame) -> pl.DataFrame:
        """Counts added up per (``by``, kind, item, group, rank)."""
        keys = [*spec.columns.by, _KIND, spec.columns.item, GROUP, _RANK]
        keys = [k for k in keys if k in stacked.columns]
        return stacked.group_by(keys, maintain_order=True).agg(pl.all().sum())

    def finish_groups(self, ctx: Context, partials: pl.LazyFrame) -> pl.LazyFrame | None:
        """exposure_gini and exposure_parity per ``by`` group, and ``GROUP_USERS``."""
        requests = [q for q in ctx.requests(self.name) if q.metric.population == "corpus"]
        if not requests:
            return None
        c = ctx.spec.columns
        by = list(c.by)
        ks = sorted({q.k for q in ctx.requests(self.name)})
        kind = pl.col(_KIND)
        users = partials.filter(kind == _USERS).select(
            *by, pl.col(_users_column(ks[-1])).fill_null(0).alias(GROUP_USERS)
        )
        out = users
        xctx = ExposureContext()
        schema = partials.collect_schema()
        for q in requests:
            e = weights(q.options, q.k)
            if q.metric.name == "exposure_gini":
                rows = partials.filter(kind == _ITEMS).select(*by, c.item, _RANK, _COUNT)
                rows = rows.join(e, on=_RANK, how="inner")
                exposure = rows.group_by([*by, c.item]).agg(
                    ordered_sum(
                        (pl.col(_COUNT).cast(pl.Float64) * pl.col(_E)).sort_by(pl.col(_RANK))
                    ).alias(EXPOSURE)
                )
                exposure = _with_catalog_size(ctx, exposure, by)
                value = (
                    exposure.group_by(by).agg(q.value(xctx))
                    if by
                    else exposure.select(q.value(xctx))
                )
            else:
                rows = partials.filter(kind == _GROUPS).select(
                    *by, pl.col(GROUP).cast(schema[GROUP]), _RANK, _COUNT
                )
                per_group = exposure_per_group(rows, by, q.options, q.k)
                seen = users.select(by).unique() if by else None
                universe = group_universe(ctx, seen)
                cells = universe.join(per_group, on=[*by, GROUP], how="left").with_columns(
                    pl.col(EXPOSURE).fill_null(0.0)
                )
                cells = normalised(cells, by, EXPOSURE, SHARE)
                cells = cells.join(target_shares(ctx, q, seen), on=[*by, GROUP], how="left")
                value = cells.group_by(by).agg(q.value(xctx)) if by else cells.select(q.value(xctx))
            out = (
                out.join(value, on=by, how="left", nulls_equal=True)
                if by
                # One row of users (none on empty partials, as the metrics' rows then).
                else out.join(value, how="cross")
            )
        return out

    # -- partitioned runs ----------------------------------------------------------------

    def global_tables(self, spec: Spec, run: Partitioned) -> dict[str, Any]:
        """Train popularity (default groups), the items seen (default catalog), merit."""
        requests = spec.of_family(self.name)
        if not requests:
            return {}
        out: dict[str, Any] = {}
        parity = [q for q in requests if q.metric.name in _PARITY]
        ranking_has_it = "ranking" in spec.families and "popularity" in spec.needs
        if parity and "item_groups" not in run.broadcast and not ranking_has_it:
            out |= shared_tables.popularity(spec, run)
        corpus_has_it = "corpus" in spec.families and "catalog_size" in spec.needs
        if _needs_catalog(spec) and "catalog" not in run.broadcast and not corpus_has_it:
            out |= shared_tables.seen_items(spec, run)
        thresholds = {q.options.threshold for q in parity if q.options.parity_target == "merit"}
        if thresholds:
            c = spec.columns
            truth_by = [b for b in c.by if b in run.schemas["truth"]]
            merit: dict[float | None, pl.DataFrame] = {}
            for threshold in sorted(thresholds, key=lambda t: -1.0 if t is None else t):

                def counts(
                    frames: Mapping[str, pl.DataFrame], threshold: float | None = threshold
                ) -> pl.DataFrame:
                    truth = frames["truth"].lazy()
                    return merit_counts(truth, truth_by, spec, threshold).collect(engine=ENGINE)

                stacked = run.collect(counts, ("truth",))
                merit[threshold] = stacked.group_by([*truth_by, c.item]).agg(pl.col(_MERIT).sum())
            out[MERIT_TABLE] = merit
        return out

    def partition_reads(self, spec: Spec) -> frozenset[str] | None:
        """Each user's list is scored against the groups, catalog and merit."""
        return frozenset({"popularity", "seen_items", MERIT_TABLE})


FAMILY = ExposureFamily()


def _needs_catalog(spec: Spec) -> bool:
    """Whether a metric reads the catalog: exposure_gini, or a parity against it."""
    return any(
        q.metric.name == "exposure_gini"
        or (q.metric.name in _PARITY and q.options.parity_target == "catalog")
        for q in spec.of_family(FAMILY.name)
    )


def _normalised_by_key(frame: pl.LazyFrame, keys: list[str], value: str, out: str) -> pl.LazyFrame:
    """:func:`normalised` within each user (``keys``)."""
    return normalised(frame, keys, value, out)


# -- item groups -------------------------------------------------------------------------


def _item_groups(ctx: Context) -> tuple[pl.LazyFrame, list[str]] | None:
    """``item_groups=`` as distinct (its ``by`` columns, item, ``GROUP``) rows, checked."""
    if "item_groups" not in ctx.inputs.extras:
        return None
    cached: tuple[pl.LazyFrame, list[str]] | None = ctx.memo.get("item_groups")
    if cached is not None:
        return cached
    c = ctx.spec.columns
    extra = ctx.inputs.extra("item_groups", [c.item, c.group])
    keys = [*extra.by, c.item, c.group]
    schema = extra.frame.collect_schema()
    checks = [
        *null_checks(keys, "key or group"),
        *nan_label_checks([c.group], "group", schema),
    ]
    ctx.checks.append(CheckedFrame("item_groups", extra.frame, checks, keys))
    # A repeated (item, group) row says the same thing again: counted once.
    table = extra.frame.select(*extra.by, c.item, pl.col(c.group).alias(GROUP)).unique()
    found = (table, list(extra.by))
    ctx.memo["item_groups"] = found
    return found


def _popularity(ctx: Context) -> tuple[pl.LazyFrame, list[str]]:
    """Per (train's ``by`` columns, item): ``IN_TAIL``, over every partition's train."""
    cached: tuple[pl.LazyFrame, list[str]] | None = ctx.memo.get("exposure_popularity")
    if cached is not None:
        return cached
    c = ctx.spec.columns
    shared = ctx.inputs.shared
    train = ctx.train()
    if shared is not None and shared.popularity is not None:
        items = shared.popularity.lazy()
    else:
        items, _ = item_popularity(train, c, ctx.spec.options)
    # Cached: the partials and the catalog target both read it, and the engine would
    # otherwise count train's popularity once per reader (2.1x the CPU at 1M users).
    found = (items.select(*train.by, c.item, IN_TAIL).cache(), list(train.by))
    ctx.memo["exposure_popularity"] = found
    return found


def group_rows(ctx: Context, rows: pl.LazyFrame) -> pl.LazyFrame:
    """``rows`` (with the item column) once per group of their item, in ``GROUP``.

    An item in several groups gives a row per group; an item in none is left out.
    Default groups: ``"tail"`` for an item in train's long tail or absent from train,
    else ``"head"``.
    """
    c = ctx.spec.columns
    columns = rows.collect_schema().names()
    given = _item_groups(ctx)
    if given is not None:
        table, table_by = given
        on = [*(b for b in table_by if b in columns), c.item]
        return rows.join(table.select(*on, GROUP), on=on, how="inner")
    popularity, train_by = _popularity(ctx)
    on = [*(b for b in train_by if b in columns), c.item]
    flagged = rows.join(popularity.select(*on, IN_TAIL), on=on, how="left")
    head = pl.when(pl.col(IN_TAIL).fill_null(True)).then(pl.lit("tail")).otherwise(pl.lit("head"))
    return flagged.with_columns(head.alias(GROUP)).drop(IN_TAIL)


def group_universe(ctx: Context, keyed: pl.LazyFrame | None) -> pl.LazyFrame:
    """Every item group, for each row of ``keyed`` (``by`` groups or users; None: one).

    The groups of ``item_groups=`` (of the row's ``by`` group, when it carries ``by``
    columns), else head and tail.
    """
    given = _item_groups(ctx)
    if given is not None:
        table, table_by = given
        groups = table.select(*table_by, GROUP).unique()
    else:
        table_by = []
        groups = pl.LazyFrame({GROUP: list(DEFAULT_GROUPS)}, schema={GROUP: pl.String})
    if keyed is None:
        return groups.select(GROUP)
    on = [b for b in table_by if b in keyed.collect_schema().names()]
    if on:
        return keyed.join(groups.select(*on, GROUP), on=on, how="inner")
    return keyed.join(groups.select(GROUP).unique(), how="cross")


def rank_counts(ctx: Context, top: pl.LazyFrame) -> pl.LazyFrame:
    """Recommended rows per (``by``, ``GROUP``, rank) of ``top``: integers that add up.

    Columns ``by``, ``GROUP``, ``_RANK`` and ``_COUNT``: the partials of exposure_parity,
    and of :func:`frame_metrics.group_exposure`'s table.
    """
    c = ctx.spec.columns
    by = list(c.by)
    rank = pl.col(RANK).cast(pl.Int64).alias(_RANK)
    count = pl.len().cast(pl.Int64).alias(_COUNT)
    # One pass over the rows: rows per (item, rank). The groups' counts are sums of their
    # items' (a few rows per item), not a join of every row with its groups.
    items = top.group_by([*by, c.item, rank]).agg(count)
    return group_rows(ctx, items).group_by([*by, GROUP, _RANK]).agg(pl.col(_COUNT).sum())


def exposure_per_group(
    counts: pl.LazyFrame, by: list[str], options: MetricOptions, k: int
) -> pl.LazyFrame:
    """Each item group's exposure ``EXPOSURE`` per ``by`` group, from :func:`rank_counts`.

    Σ over ranks r <= k of count(r) · e(r), summed by rank ascending: the same float
    whatever the partitions the counts were added up from.
    """
    rows = counts.join(weights(options, k), on=_RANK, how="inner")
    return rows.group_by([*by, GROUP]).agg(
        ordered_sum((pl.col(_COUNT).cast(pl.Float64) * pl.col(_E)).sort_by(pl.col(_RANK))).alias(
            EXPOSURE
        )
    )


# -- targets -----------------------------------------------------------------------------


def target_shares(ctx: Context, q: Requested, seen: pl.LazyFrame | None) -> pl.LazyFrame:
    """Per (``by``, group): ``q``'s target share ``TARGET`` (null when undefined).

    ``seen``: the ``by`` groups (None without ``by``); the shares are normalised over the
    item groups of each.
    """
    by = list(ctx.spec.columns.by)
    universe = group_universe(ctx, seen)
    target = q.options.parity_target
    if target == "uniform":
        weight = pl.lit(1.0, pl.Float64)
        cells = universe.with_columns(weight.alias(_WEIGHT))
    elif target == "catalog":
        given = _item_groups(ctx)
        if given is not None and given[1] and "catalog" not in ctx.inputs.extras:
            # item_groups per by group and no catalog given: a by group's catalog is
            # its own rows of item_groups (spec 9, clarified 2026-11-27).
            items = given[0].select(*given[1], ctx.spec.columns.item).unique()
            items_by = given[1]
        else:
            items, items_by = catalog_table(ctx)
        grouped, items_by = _grouped_per_by(ctx, items, items_by, seen)
        counts = grouped.group_by([*items_by, GROUP]).agg(pl.len().cast(pl.Int64).alias(_WEIGHT))
        cells = _joined_counts(universe, counts, [b for b in by if b in items_by])
    elif target == "merit":
        merit, truth_by = merit_table(ctx, q.options.threshold)
        grouped, truth_by = _grouped_per_by(ctx, merit, truth_by, seen)
        counts = grouped.group_by([*truth_by, GROUP]).agg(pl.col(_MERIT).sum().alias(_WEIGHT))
        cells = _joined_counts(universe, counts, [b for b in by if b in truth_by])
    else:
        assert isinstance(target, tuple)
        cells = _explicit(ctx, universe, target)
    return normalised(cells, by, _WEIGHT, TARGET).select(*by, GROUP, TARGET)


def _grouped_per_by(
    ctx: Context, rows: pl.LazyFrame, rows_by: list[str], seen: pl.LazyFrame | None
) -> tuple[pl.LazyFrame, list[str]]:
    """Item rows (catalog items, merit counts) in their groups, and the ``by`` columns now.

    Where the groups' table (``item_groups``, or train for head and tail) carries ``by``
    columns the rows lack, each row stands in every ``by`` group of ``seen`` and takes
    that group's item groups: a ``by`` group's shares count its own groups' rows, never
    another group's (joined on the item alone, each item would count once per ``by``
    group that groups it, in every ``by`` group).
    """
    given = _item_groups(ctx)
    groups_by = given[1] if given is not None else _popularity(ctx)[1]
    missing = [b for b in groups_by if b not in rows_by]
    if missing and seen is not None:
        rows = rows.join(seen.select(missing).unique(), how="cross")
        rows_by = [*rows_by, *missing]
    return group_rows(ctx, rows), rows_by


def _joined_counts(universe: pl.LazyFrame, counts: pl.LazyFrame, on: list[str]) -> pl.LazyFrame:
    """Each group's count on every universe row (0 for a group without one)."""
    return universe.join(
        counts.select(*on, GROUP, _WEIGHT), on=[*on, GROUP], how="left"
    ).with_columns(pl.col(_WEIGHT).fill_null(0))


def _explicit(
    ctx: Context, universe: pl.LazyFrame, table: tuple[tuple[Any, float], ...]
) -> pl.LazyFrame:
    """A ``{group: share}`` target on the universe, each group named both ways (checked)."""
    dtype = universe.collect_schema()[GROUP]
    groups = pl.Series(GROUP, [g for g, _ in table], strict=False)
    shares = pl.LazyFrame(
        {GROUP: groups.cast(dtype, strict=False), _WEIGHT: [s for _, s in table]},
        schema={GROUP: dtype, _WEIGHT: pl.Float64},
    )
    # The checks name the group column as the caller knows it, not the internal one.
    shown = {GROUP: ctx.spec.columns.group}
    named = universe.select(GROUP).unique().rename(shown)
    ctx.checks.append(
        missing_from(
            named,
            shares.rename(shown),
            [ctx.spec.columns.group],
            "parity_target",
            "group of item_groups to have a share in parity_target",
            "; give each group a share (0 for none)",
        )
    )
    ctx.checks.append(
        missing_from(
            shares.drop_nulls(GROUP).rename(shown),
            named,
            [ctx.spec.columns.group],
            "parity_target",
            "group of parity_target to be a group of item_groups",
            "; name only the groups of item_groups' group column",
        )
    )
    return universe.join(shares, on=GROUP, how="left").with_columns(pl.col(_WEIGHT).fill_null(0.0))


def catalog_table(ctx: Context) -> tuple[pl.LazyFrame, list[str]]:
    """The catalog's distinct items (with the ``by`` columns it carries), and those.

    ``catalog=``, else the items seen: recs at every rank, truth and train (in a
    partitioned run, every partition's).
    """
    inputs, c = ctx.inputs, ctx.spec.columns
    if "catalog" in inputs.extras:
        catalog = inputs.extra("catalog", [c.item])
        keys = [*catalog.by, c.item]
        if ctx.memo.get("exposure_catalog") is None:
            ctx.memo["exposure_catalog"] = True
            ctx.checks.append(
                CheckedFrame("catalog", catalog.frame, null_checks(keys, "key"), keys)
            )
            assert ctx.prepared is not None
            ctx.checks.append(
                missing_from(
                    ctx.prepared.top,
                    catalog_items(catalog, c),
                    keys,
                    "catalog",
                    "recommended item (within the largest k) to be in the catalog",
                    "; pass a catalog that holds every recommended item",
                )
            )
        return catalog_items(catalog, c), list(catalog.by)
    shared = inputs.shared
    if shared is not None and shared.seen_items is not None:
        return shared.seen_items.lazy().select(c.item), []
    assert ctx.prepared is not None
    dtype = ctx.prepared.top.collect_schema()[c.item]
    seen = [inputs.source.lazy.select(pl.col(c.item).cast(dtype, strict=False))]
    if inputs.truth is not None:
        seen.append(inputs.truth.lazy.select(pl.col(c.item).cast(dtype, strict=False)))
    if "train" in inputs.extras:
        seen.append(inputs.extras["train"].frame.select(pl.col(c.item).cast(dtype, strict=False)))
    return pl.concat(seen).drop_nulls().unique(), []


def _with_catalog_size(ctx: Context, exposure: pl.LazyFrame, by: list[str]) -> pl.LazyFrame:
    """The item exposure rows with their group's catalog size ``N_CATALOG``."""
    items, items_by = catalog_table(ctx)
    size = pl.len().cast(pl.Int64).alias(N_CATALOG)
    if items_by:
        sizes = items.group_by(items_by).agg(size)
        return exposure.join(sizes, on=items_by, how="left").with_columns(
            pl.col(N_CATALOG).fill_null(0)
        )
    return exposure.join(items.select(size), how="cross")


def merit_counts(
    truth: pl.LazyFrame, truth_by: list[str], spec: Spec, threshold: float | None
) -> pl.LazyFrame:
    """Per (truth's ``by`` columns, item): the relevant truth rows (``_MERIT``).

    A repeated (user, item) row counts once, at its highest relevance (as
    ``on_duplicate="first"`` keeps it; by default a repeated row is an error anyway).
    """
    c = spec.columns
    rel = pl.col(c.relevance).cast(pl.Float64)
    relevant = rel > 0 if threshold is None else rel >= threshold
    rows = truth.group_by([*truth_by, *c.user, c.item]).agg(rel.max())
    return (
        rows.filter(relevant)
        .group_by([*truth_by, c.item])
        .agg(pl.len().cast(pl.Int64).alias(_MERIT))
    )


def merit_table(ctx: Context, threshold: float | None) -> tuple[pl.LazyFrame, list[str]]:
    """Relevant truth rows per (truth's ``by`` columns, item), over every user."""
    c = ctx.spec.columns
    shared = ctx.inputs.shared
    if shared is not None and MERIT_TABLE in shared.tables:
        table: pl.DataFrame = shared.tables[MERIT_TABLE][threshold]
        return table.lazy(), [b for b in c.by if b in table.columns]
    assert ctx.inputs.truth is not None
    truth = ctx.inputs.truth.lazy
    truth_by = [b for b in c.by if b in truth.collect_schema().names()]
    return merit_counts(truth, truth_by, ctx.spec, threshold), truth_by
