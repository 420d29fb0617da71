"""Who gets the attention: :func:`exposure`, the exposure of item groups as a table.

Provider-side fairness (spec section 9.2): one row per (``by`` group, item group) with
the group's exposure ``Σ_{i in group} E(i)``, ``E(i) = Σ_u e(rank_u(i))`` within k, its
share of the exposure, its share of the catalog's items and, with truth, its share of
the relevant truth rows (merit): the numbers ``exposure_parity@k`` compares.

Nothing here is computed a second way: the call is planned as ``fm.evaluate`` plans
``exposure_parity@k`` (a :class:`~frame_metrics.spec.Spec` asking for it against the
catalog and, with truth, against merit), and the table is built from the exposure
family's own pieces (:func:`~frame_metrics.families.exposure.rank_counts`,
:func:`~frame_metrics.families.exposure.exposure_per_group`,
:func:`~frame_metrics.families.exposure.target_shares`): integer counts per (group,
rank) times the browsing model's weights, summed in rank order, so the table's shares
are the metric's, to the bit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar, cast

import polars as pl

from frame_metrics.columns import check_roles, key_roles
from frame_metrics.distributed import to_local
from frame_metrics.errors import InvalidOptionError, Keyword, MissingInputError, shown, warn
from frame_metrics.families.exposure import (
    EXPOSURE,
    GROUP,
    SHARE,
    TARGET,
    exposure_per_group,
    group_universe,
    normalised,
    rank_counts,
    target_shares,
)
from frame_metrics.inputs import Inputs
from frame_metrics.options import DuplicatePolicy, Exposure, Ties, is_int
from frame_metrics.planner import Plan, check_call, reads
from frame_metrics.prepare import RANK
from frame_metrics.spec import build_spec
from frame_metrics.validation import run_checks

__all__ = ["COLUMNS", "exposure", "group_exposure"]

FrameT = TypeVar("FrameT")

#: The result's columns after the ``by`` columns and the group column (merit: with truth).
COLUMNS = ("exposure", "exposure_share", "catalog_share", "merit_share")
#: A one-row frame that stands for "recs has a row" when there is no ``by`` column.
_ANY = "_fm_xt_any"


def group_exposure(
    recs: FrameT,
    truth: object | None = None,
    *,
    k: int = 10,
    item_groups: object | None = None,
    exposure: Exposure = "log",
    persistence: float | None = None,
    by: str | Sequence[str] | None = None,
    train: object | None = None,
    catalog: object | None = None,
    user: str | Sequence[str] = "user",
    item: str = "item",
    rank: str | None = None,
    score: str | None = None,
    relevance: str = "relevance",
    group: str = "group",
    threshold: float | None = None,
    head_share: float = 0.2,
    ties: Ties | None = None,
    on_duplicate: DuplicatePolicy | None = None,
    validate: bool = True,
    exclude: object | None = None,
) -> FrameT:
    """The exposure of each item group within k, beside its catalog and merit shares.

    Parameters
    ----------
    recs
        Recommendations, one row per (user, item) shown, with a ``rank`` (1 = top) or a
        ``score`` (ranked as :func:`frame_metrics.evaluate` ranks it, with or without
        truth): any frame kind :func:`frame_metrics.evaluate` takes (Spark and Dask
        frames are collected: the table is small, the rows are read once). The result
        is of the same kind.
    truth
        Optional: one row per (user, item) with a ``relevance``. Gives ``merit_share``,
        the group's share of the relevant truth rows (``rel > 0``, or ``rel >=
        threshold``).
    k
        The cutoff: only ranks 1..k are exposed (an int >= 1).
    item_groups
        One row per (item, group) with the ``item`` column and the ``group`` column (and
        any ``by`` columns, for groups per ``by`` group: a ``by`` group's shares then
        count its own rows alone, and without ``catalog`` its catalog is its own rows):
        an item in several groups counts fully in each, an item in none is left out (a
        null or NaN group is an error). Default: aplt's ``"head"`` and ``"tail"`` from
        ``train`` (an item absent from train is tail).
    exposure
        The browsing model, the attention ``e(r)`` rank r gets: ``"log"``
        (1/log2(r+1), default), ``"rbp"`` (p^(r-1), p = ``persistence``, 0.8 when
        unset) or ``"uniform"`` (1).
    persistence
        The p of ``exposure="rbp"``.
    by
        Columns (model, segment) each with its own table.
    train
        Reference interactions (user, item), for the default head and tail groups
        (``head_share`` of train's (user, item) pairs are the head's) and for the
        default catalog.
    catalog
        The catalog's items (the ``item`` column), for ``catalog_share``; every
        recommended item within k must be in it. Default: the items seen in ``recs``
        (every rank), ``truth`` and ``train``.
    user
        The user column of every frame, or a list of columns (a composite key).
    item
        The item column of every frame.
    rank
        The rank column of ``recs`` (1 = top; ``None``: ``"rank"``). With ``score``
        the score ranks, and a ``rank`` given too is not read (a warning says so).
    score
        A score column of ``recs`` to derive ranks from instead (higher = better; ties
        broken by ``ties``).
    relevance
        The relevance column of ``truth``.
    group
        The group column of ``item_groups``, and the result's column of the groups (a
        name apart from the ``by`` columns and the result's own columns).
    threshold
        Relevance needed to count as relevant for merit (default: ``rel > 0``).
    head_share
        The default groups' cut: the head is the most popular train items holding this
        share of train's (user, item) pairs (default 0.2).
    ties
        Equal scores (with ``score``), as for :func:`frame_metrics.evaluate` (default:
        item ascending).
    on_duplicate
        A repeated (user, item) row: ``"error"`` (default) or ``"first"``.
    validate
        Check the inputs' values (nulls, bad ranks, duplicates) with the result.
    exclude
        (user, item) pairs removed from the lists before the cutoff, usually the train
        split, as :func:`frame_metrics.evaluate` removes them: the remaining items move
        up (re-ranked 1, 2, ...), so ranks 1..k expose k items the user could still
        choose. Pairs apply to every ``by`` group unless it carries ``by`` columns.
        Truth (merit) is not touched.

    Returns
    -------
    FrameT
        One row per (``by`` group with a recommendation within k, item group), sorted:
        the ``by`` columns, the ``group`` column, ``exposure`` (``Σ`` of the group's
        items' E(i)), ``exposure_share``, ``catalog_share`` (the group's share of the
        catalog's items) and, with truth, ``merit_share``. Each share is over the item
        groups of its ``by`` group, so that it sums to 1 (null when every group has 0).
        ``exposure_parity@k`` is ``1 - JS(exposure_share, catalog_share)`` (its
        ``parity_target="merit"``: against ``merit_share``). Empty ``recs`` give no row.

    Raises
    ------
    FrameMetricsError
        A missing column or input (no ``item_groups`` and no ``train``), a bad option
        or value; see :mod:`frame_metrics.errors`.

    Examples
    --------
    Two users; items a and b are one provider's (x), c and d another's (y), and the
    catalog is a to d. Under uniform attention x is shown 3 times in the top 2, y once;
    each holds half of the catalog.

    >>> import polars as pl
    >>> import frame_metrics as fm
    >>> recs = pl.DataFrame({"user": [1, 1, 2, 2], "item": ["a", "c", "a", "b"],
    ...                      "rank": [1, 2, 1, 2]})
    >>> groups = pl.DataFrame({"item": ["a", "b", "c", "d"], "group": ["x", "x", "y", "y"]})
    >>> out = fm.group_exposure(recs, k=2, item_groups=groups, catalog=groups, exposure="uniform")
    >>> out.rows()
    [('x', 3.0, 0.75, 0.5), ('y', 1.0, 0.25, 0.5)]

    The log model (the default) gives rank 2 the attention 1/log2(3) = 0.63: x gets
    1 + 1 + 0.63, y 0.63.

    >>> fm.group_exposure(recs, k=2, item_groups=groups, catalog=groups)["exposure"].round(4).to_list()
    [2.6309, 0.6309]

    At k = 1 only x is shown (a, to both users). With user 1's a excluded (seen in
    train), c moves up to user 1's rank 1, and y gets half of the attention:

    >>> seen = pl.DataFrame({"user": [1], "item": ["a"]})
    >>> fm.group_exposure(recs, k=1, item_groups=groups, catalog=groups, exclude=seen).rows()
    [('x', 1.0, 0.5, 0.5), ('y', 1.0, 0.5, 0.5)]
    """
    from frame_metrics.distributed import adapter_for

    adapter = adapter_for(recs)
    frames = (recs, truth, item_groups, train, catalog, exclude)
    if adapter is not None:
        # Spark or Dask: collected (every input), the table given back in recs' kind.
        frames = (adapter.to_polars(recs), *(to_local(f) for f in frames[1:]))
    table = _exposure_table(
        *frames,
        k=k,
        exposure=exposure,
        persistence=persistence,
        by=by,
        user=user,
        item=item,
        rank=rank,
        score=score,
        relevance=relevance,
        group=group,
        threshold=threshold,
        head_share=head_share,
        ties=ties,
        on_duplicate=on_duplicate,
        validate=validate,
    )
    return cast("FrameT", table if adapter is None else adapter.like(recs, table))


def _exposure_table(
    recs: object,
    truth: object | None,
    item_groups: object | None,
    train: object | None,
    catalog: object | None,
    exclude: object | None,
    *,
    k: int,
    validate: bool,
    **options: Any,
) -> Any:
    """:func:`exposure` on local frames: the plan of ``exposure_parity@k``, its pieces."""
    if not is_int(k) or isinstance(k, bool) or int(k) < 1:
        raise InvalidOptionError(f"expected an int >= 1, got {shown(k)}", option="k")
    if item_groups is None and train is None:
        raise MissingInputError(
            "exposure",
            "item_groups",
            "one row per (item, group) with the item column and the group column",
            "; or pass ",
            Keyword("train"),
            " for aplt's head and tail groups",
        )
    extras = {"item_groups": item_groups, "train": train, "catalog": catalog}
    extras["exclude"] = exclude
    given = [name for name, frame in extras.items() if frame is not None]
    # Ranks from scores are evaluate's (recs and truth, not a long table): without truth,
    # recs are ranked beside an empty truth, as fm.policy_value ranks them.
    scored = truth is None and options.get("score") is not None
    frames = [*(["truth"] if truth is not None or scored else []), *given]
    metrics = ["exposure_parity(parity_target=catalog)"]
    if truth is not None:
        metrics.append("exposure_parity(parity_target=merit)")
    spec = build_spec(frames, metrics=metrics, k=int(k), validate=validate, **options)
    for warning in spec.ignored:
        warn(warning)
    c = spec.columns
    # The table's columns: the by columns and the group column beside its own, each
    # named apart from the others.
    outputs = dict.fromkeys(COLUMNS, "a column of the result")
    by = key_roles([], c.by)
    check_roles({"recs": by}, {c.group: "the item groups' column", **outputs})
    check_roles({"item_groups": {"group": c.group}}, outputs, output_roles=("group",))
    # The table's own columns, not evaluate's (n_users is no column of it).
    check_call(spec, aggregate=True, outputs={c.group: "the item groups' column", **outputs})
    if scored:
        truth = pl.DataFrame(
            schema={**dict.fromkeys(c.user, pl.Null), c.item: pl.Null, c.relevance: pl.Float64}
        )
    inputs = Inputs.read(spec, recs, truth, extras, reads(spec))
    plan = Plan(spec, inputs)
    table = _table(plan, int(k))
    if plan.first_checks:
        run_checks(plan.first_checks)
    if inputs.source.kind == "polars-lazy":
        run_checks(plan.checks)
        return inputs.source.give_back(table)
    (frame,) = run_checks(plan.checks, with_queries=[table])
    return inputs.source.give_back(frame)


def _table(plan: Plan, k: int) -> pl.LazyFrame:
    """The table's query: exposure, its share and the targets' shares per (by, group)."""
    ctx, spec = plan.ctx, plan.spec
    by = list(spec.columns.by)
    assert ctx.prepared is not None
    top = ctx.prepared.top.filter(pl.col(RANK) <= k)
    requests = {q.options.parity_target: q for q in spec.of_family("exposure")}
    catalog_q = requests["catalog"]
    per_group = exposure_per_group(rank_counts(ctx, top), by, catalog_q.options, k)
    # The by groups with a list within k (as the metric's); without by, one row when
    # recs has one, so that empty recs give an empty table.
    seen = top.select(by).unique() if by else None
    # (A literal alone would make a row of nothing: the count, kept when above 0.)
    any_row = top.select(pl.len().alias(_ANY)).filter(pl.col(_ANY) > 0)
    keyed = seen if seen is not None else any_row
    universe = group_universe(ctx, keyed)
    if seen is None:
        universe = universe.drop(_ANY)
    cells = universe.join(per_group, on=[*by, GROUP], how="left", nulls_equal=True)
    cells = cells.with_columns(pl.col(EXPOSURE).fill_null(0.0))
    cells = normalised(cells, by, EXPOSURE, SHARE)
    shares = {"catalog_share": catalog_q}
    if "merit" in requests:
        shares["merit_share"] = requests["merit"]
    for name, q in shares.items():
        target = target_shares(ctx, q, seen).rename({TARGET: name})
        cells = cells.join(target, on=[*by, GROUP], how="left", nulls_equal=True)
    out = cells.select(
        *by,
        pl.col(GROUP).alias(spec.columns.group),
        pl.col(EXPOSURE).alias("exposure"),
        pl.col(SHARE).alias("exposure_share"),
        *shares,
    )
    return out.sort([*by, spec.columns.group], nulls_last=True)


def exposure(recs: FrameT, truth: object | None = None, **kwargs: Any) -> FrameT:
    """Deprecated spelling of :func:`group_exposure`, for one release.

    ``fm.exposure(recs, exposure="rbp")`` named a function after one of its keywords
    (the browsing model, an option of ``fm.evaluate`` too).
    """
    import warnings

    warnings.warn(
        "fm.exposure is renamed fm.group_exposure (exposure= names the browsing model); "
        "the old name goes in the next release",
        FutureWarning,
        stacklevel=2,
    )
    return group_exposure(recs, truth, **kwargs)
