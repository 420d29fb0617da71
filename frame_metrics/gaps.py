"""Are some users served worse than others: :func:`gaps`, metric gaps between user groups.

Consumer-side fairness (spec section 9.3): from per-user metric values (the per-user
output of :func:`frame_metrics.evaluate`, with ``by`` models) and a group per user, one
row per (model, metric, cutoff, group) with the group's number of users and exact mean,
and on each row the gap between the groups: for two groups the difference of the means
with a bootstrap interval and Welch's t-test, for more the mean absolute pairwise
difference and the range. Without groups, the users are split into the most active
``active_share`` by train interactions and the rest (Li et al., "User-oriented Fairness in
Recommendation", WWW 2021).

The bootstrap is unpaired and vectorised: each group's users are resampled on their own
(the groups are independent samples), every resample of a chunk at once as a matrix of
draw counts (resamples x users) times the users' values
(:func:`frame_metrics.numerics.resampled_sums`), so that a million users take no Python
loop over users or resamples, and memory stays bounded by the chunk. Needs numpy (``pip
install frame_metrics[stats]``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any, TypeVar, cast

import polars as pl

from frame_metrics.columns import as_names, check_roles, key_roles
from frame_metrics.distributed import to_local
from frame_metrics.dtypes import unify_keys
from frame_metrics.errors import (
    IgnoredOptionWarning,
    InvalidOptionError,
    InvalidValueError,
    MissingColumnsError,
    Part,
    Pass,
    shown,
    warn,
)
from frame_metrics.frames import to_lazy
from frame_metrics.metric_names import split_column
from frame_metrics.numerics import (
    check_level,
    check_n_resamples,
    check_progress,
    check_seed,
    check_share,
    exact_partials,
    exact_totals,
    numpy_for,
    percentiles,
    resampled_sums,
    shows_progress,
)
from frame_metrics.progress import Progress
from frame_metrics.stats import welch_t_test
from frame_metrics.validation import (
    CheckedFrame,
    duplicate_check,
    nan_label_checks,
    null_checks,
    row_check,
    run_checks,
)

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["ACTIVE", "GROUP", "INACTIVE", "gaps"]

FrameT = TypeVar("FrameT")

#: The result's column holding each row's group.
GROUP = "group"
#: The default groups' names: the most active users and the rest.
ACTIVE, INACTIVE = "active", "inactive"

#: The groups of the users while computing (the caller's columns keep their names).
_GROUP = "_fm_group"

#: The result's columns after the ``by`` columns; ``group`` takes the groups' dtype.
_SCHEMA: dict[str, Any] = {
    "metric": pl.String,
    "k": pl.Int64,
    GROUP: None,
    "n_users": pl.Int64,
    "mean": pl.Float64,
    "diff": pl.Float64,
    "diff_low": pl.Float64,
    "diff_high": pl.Float64,
    "p_value": pl.Float64,
    "mean_abs_diff": pl.Float64,
    "range": pl.Float64,
}


def _check_options(
    active_share: Any, level: Any, n_resamples: Any, seed: Any, progress: Any
) -> None:
    """Each keyword of :func:`gaps` is of its kind, before any data is read.

    The values are used as given: a numpy float32 level takes its percentiles in float32
    (compare and policy_value take a float's), which a float would change in the last bits.

    Examples
    --------
    >>> _check_options(0.05, 95, 10, 0, None)
    Traceback (most recent call last):
    ...
    frame_metrics.errors.InvalidOptionError: level: expected a number in (0, 1), got 95
    """
    check_share(active_share, "active_share")
    check_level(level)
    check_n_resamples(n_resamples)
    check_seed(seed)
    check_progress(progress)


def _key_roles(users: list[str], by: list[str], group: object, per_user_columns: list[str]) -> None:
    """The user key, ``by`` and the group column are distinct and clear of the result's names."""
    if not users:
        raise InvalidOptionError(
            "expected at least one column name, got an empty list", option="user"
        )
    if set(by) & set(users):
        raise InvalidOptionError(
            f"expected by columns other than the user key {users!r}, got {by!r}",
            option="by",
            columns=sorted(set(by) & set(users)),
        )
    check_roles({"per_user": key_roles([], by)}, dict.fromkeys(_SCHEMA, "a column of the result"))
    if isinstance(group, str) and group in [*users, *by]:
        raise InvalidOptionError(
            f"expected a group column other than the user key and by columns {[*users, *by]!r}, "
            f"got {group!r}",
            option="group",
            columns=[group],
        )
    missing = [c for c in [*users, *by] if c not in per_user_columns]
    if isinstance(group, str) and group not in per_user_columns:
        missing.append(group)
    if missing:
        raise MissingColumnsError("per_user", missing, per_user_columns)


def _likely_by(frame: pl.DataFrame, bad: list[str], by: list[str]) -> tuple[Part, ...]:
    """Propose ``by=`` for a text column of ``per_user`` read as a metric: likely a model.

    evaluate's per-user output with ``by`` models keeps the model column; passed on
    without ``by=``, it is no metric. Only without ``by`` (a proposal would drop the
    caller's), for the first column of text or categories.
    """
    text = [c for c in bad if isinstance(frame.schema[c], (pl.String, pl.Categorical, pl.Enum))]
    if by or not text:
        return ()
    return (f"; if {text[0]!r} holds several models or segments, ", Pass("by", text[0]))


def _as_named(frame: pl.DataFrame, column: str) -> pl.DataFrame:
    """Categories as the strings they name, so groups compare and sort as text."""
    if isinstance(frame.schema[column], (pl.Categorical, pl.Enum)):
        return frame.with_columns(pl.col(column).cast(pl.String))
    return frame


def _groups_from_frame(
    per_user: pl.DataFrame, group: object, users: list[str]
) -> tuple[pl.DataFrame, list[CheckedFrame]]:
    """``per_user`` with each user's group from a frame of (user key, group column)."""
    frame = to_lazy(to_local(group), "group").lazy.collect()
    missing = [c for c in users if c not in frame.columns]
    if missing:
        raise MissingColumnsError("group", missing, frame.columns)
    others = [c for c in frame.columns if c not in users]
    if len(others) != 1:
        raise InvalidOptionError(
            f"expected a frame of the user key ({', '.join(map(repr, users))}) and one group "
            f"column, got columns {', '.join(map(repr, frame.columns)) or '(none)'}",
            option="group",
        )
    (name,) = others
    checks = CheckedFrame(
        "group",
        frame.lazy(),
        [
            *null_checks(users, "user key"),
            *null_checks([name], "group"),
            *nan_label_checks([name], "group", frame.schema),
            duplicate_check(
                users, ", ".join(users), ["; a user is in one group: give each user one row"]
            ),
        ],
        frame.columns,
    )
    frame = _as_named(frame.rename({name: _GROUP}), _GROUP)
    unified, floats = unify_keys({"per_user": per_user.lazy(), "group": frame.lazy()}, users)
    if floats:
        raise InvalidValueError(
            "per_user and group: expected user keys of one integer or text dtype, found "
            f"float ids in {', '.join(f'{f.label} ({f.column!r})' for f in floats)}; cast "
            "them to integers first",
            columns=users,
        )
    frame = unified["group"].collect()
    joined = unified["per_user"].collect().join(frame, on=users, how="left", nulls_equal=False)
    return joined, [checks]


def _active_split(
    per_user: pl.DataFrame, train: object, users: list[str], active_share: float
) -> tuple[pl.DataFrame, list[CheckedFrame]]:
    """``per_user`` with the default groups: the most active users by train rows, the rest.

    The users ranked are those of ``per_user`` (every ``by`` model's, once each), by their
    number of rows in ``train`` (0 for a user absent from it). ``ceil(active_share * n)``
    of the n users are active, the share read as the decimal written (0.07 of 100 users
    is 7), and users tied with the last of them are active too: a group is a property
    of a user's activity, not of its id.
    """
    lazy = to_lazy(to_local(train), "train").lazy
    columns = lazy.collect_schema().names()
    missing = [c for c in users if c not in columns]
    if missing:
        raise MissingColumnsError("train", missing, columns)
    unified, _ = unify_keys({"per_user": per_user.lazy(), "train": lazy.select(users)}, users)
    train_users = unified["train"]
    checks = [CheckedFrame("train", train_users, null_checks(users, "user key"), users)]
    run_checks(checks)
    counts = train_users.group_by(users).agg(pl.len().cast(pl.Int64).alias("_fm_n")).collect()
    ranked = (
        per_user.select(users)
        .unique()
        .join(counts, on=users, how="left")
        .with_columns(pl.col("_fm_n").fill_null(0))
    )
    n = ranked.height
    if n == 0:
        return per_user.with_columns(pl.lit(None, pl.String).alias(_GROUP)), []
    n_active = math.ceil(Fraction(repr(float(active_share))) * n)
    threshold = int(ranked["_fm_n"].sort(descending=True)[n_active - 1])
    if int(ranked["_fm_n"].min()) >= threshold:  # type: ignore[arg-type]
        raise InvalidValueError(
            f"train: expected users with different numbers of train rows for the default "
            f"split into the {active_share:g} most active and the rest, found all {n} users of "
            f"per_user tied with the {n_active}-th most active ({threshold} rows each or more); "
            "pass group= to give the groups",
            frame="train",
        )
    groups = ranked.select(
        *users,
        pl.when(pl.col("_fm_n") >= threshold)
        .then(pl.lit(ACTIVE))
        .otherwise(pl.lit(INACTIVE))
        .alias(_GROUP),
    )
    return unified["per_user"].collect().join(groups, on=users, how="left"), []


def _value_checks(
    per_user: pl.DataFrame, users: list[str], by: list[str], metric_cols: list[str], group: str
) -> list[CheckedFrame]:
    """Keys present and unique, values finite, every user in a group.

    A null metric value is a user the metric is undefined for: left out of that
    metric's groups (``n_users`` counts who is in). NaN and infinities are refused, as
    in :func:`frame_metrics.compare`.
    """
    keys = [*by, *users]
    frame = per_user.lazy()
    checked = [
        CheckedFrame(
            "per_user",
            frame,
            [*null_checks(keys, "key"), duplicate_check(keys, f"({', '.join(keys)})", "")],
            keys,
        )
    ]
    no_group = pl.col(_GROUP).is_null()
    if per_user.schema[_GROUP].is_float():
        # A NaN label names no group, as a null (polars would group the NaNs apart).
        no_group = no_group | pl.col(_GROUP).is_nan()
    checked.append(
        CheckedFrame(
            "per_user",
            frame.with_columns(pl.col(_GROUP).alias(group)),
            [
                row_check(
                    no_group,
                    InvalidValueError,
                    f"expected a group for every user, found {{n}} row(s) without one "
                    f"({group}), e.g. {{example}}; give them a group (such as 'unknown') or "
                    "leave them out of per_user",
                )
            ],
            [*keys, group],
        )
    )
    for c in metric_cols:
        if not per_user.schema[c].is_float():
            continue
        bad = pl.col(c).is_nan() | pl.col(c).is_infinite()
        check = row_check(
            bad,
            InvalidValueError,
            f"expected finite numbers or nulls in metric column {c!r}, found {{n}} NaN or "
            "infinite value(s), e.g. {example}; a null marks a user the metric is undefined for",
        )
        checked.append(CheckedFrame("per_user", frame, [check], [*keys, c]))
    return checked


@dataclass(frozen=True)
class _Samples:
    """One group of one model: each metric's defined values and resampled means."""

    values: list[npt.NDArray[np.float64]]  # per metric, the users' defined values
    means: list[npt.NDArray[np.float64] | None]  # per metric, n_resamples means (None: no user)


def _group_samples(
    values: npt.NDArray[np.float64],
    n_resamples: int,
    seed: int,
    key: tuple[int, int],
    bar: Progress,
) -> _Samples:
    """Resampled means of one group: users x metrics with NaN where undefined.

    The metrics whose defined users are the same (usually all of a model's) share
    their draws; each set of such metrics is a block, numbered in the order of its
    first metric, and block b of the g-th group (sorted order) of the p-th ``by`` group
    (sorted order) draws its resamples, one row of n user indices each, as
    ``rng.integers(0, n, size=(n_resamples, n), dtype=numpy.int32)`` with ``rng =
    numpy.random.default_rng(numpy.random.SeedSequence(seed, spawn_key=(p, g, b)))``
    (drawn in chunks, which give the same stream), n being the block's users in
    ``per_user`` order.
    """
    np_ = numpy_for("gaps")
    has = ~np_.isnan(values)
    defined = [values[has[:, j], j] for j in range(values.shape[1])]
    means: list[Any] = [None] * values.shape[1]
    for b, cols in enumerate(_blocks(has)):
        rows = has[:, cols[0]]
        block = np_.ascontiguousarray(values[np_.ix_(rows, cols)])
        # A resample's means: its sums over the block's users, over their number.
        sums = resampled_sums(block, n_resamples, seed, (*key, b), progress=bar.update)
        resampled = sums / block.shape[0]
        for i, j in enumerate(cols):
            means[j] = resampled[:, i]
    return _Samples(defined, means)


def _blocks(has: npt.NDArray[np.bool_]) -> list[list[int]]:
    """The metrics (columns of ``has``, users x metrics) with the same defined users.

    Metrics without any are left out (nothing to resample); blocks are in the order of
    their first metric.
    """
    np_ = numpy_for("gaps")
    blocks: dict[bytes, list[int]] = {}
    for j in range(has.shape[1]):
        if has[:, j].any():
            blocks.setdefault(np_.packbits(has[:, j]).tobytes(), []).append(j)
    return list(blocks.values())


def _none_if_nan(x: float) -> float | None:
    return None if math.isnan(x) else x


def gaps(
    per_user: FrameT,
    group: str | object | None = None,
    *,
    train: object | None = None,
    active_share: float = 0.05,
    level: float = 0.95,
    n_resamples: int = 10_000,
    seed: int = 0,
    user: str | Sequence[str] = "user",
    by: str | Sequence[str] | None = None,
    progress: bool | None = None,
) -> FrameT:
    """Metric gaps between groups of users: group means, differences, intervals, tests.

    Parameters
    ----------
    per_user
        Per-user metric values: the output of :func:`frame_metrics.evaluate` with
        ``aggregate=False`` (user key, ``by`` columns, ``"<metric>@<k>"`` columns). Every
        column other than the user key, the ``by`` columns and the group column is a
        metric. Any supported frame kind (Spark and Dask frames are collected); the
        result is of the same kind.
    group
        The users' groups: the name of a column of ``per_user``, or a frame of the user
        key and one other column, the group (every other column is an error). Every
        user of ``per_user`` needs a group: a user without one (a null label, or NaN in
        a float column) is an error (give it a group such as ``"unknown"``, or leave it
        out of ``per_user``). At least two groups. Default (None): the most active
        users and the rest, from ``train``.
    train
        Without ``group``: the train interactions, one row each (only the user key is
        read). The users of ``per_user`` are ranked by their number of rows in it (0
        when absent); the top ``active_share`` are ``"active"``, the rest
        ``"inactive"`` (Li et al., WWW 2021).
    active_share
        The share of users that are active, a number in (0, 1) (default 0.05):
        ``ceil(active_share * n)`` of the n users of ``per_user``, and every user tied
        with the last of them (so the active share may be larger; ``n_users`` says).
    level
        Confidence level of the interval of the difference, in (0, 1) (default 0.95).
    n_resamples
        Bootstrap resamples, an int >= 1 (default 10 000).
    seed
        Seed of the resampling, an int >= 0: the same seed gives the same intervals.
    user
        The user key (a name or a list of names).
    by
        The models (or any segments) of ``per_user``, each with its own gaps.
    progress
        Show a progress bar: ``None`` shows it when the bootstrap draws more than 2e8
        users.

    Returns
    -------
    FrameT
        One row per ``by`` group, metric, cutoff and group, in sorted order (metrics in
        column order): the ``by`` columns, ``metric`` (the column's name before its last
        ``@``, options kept: ``"ndcg(gain=binary)"``), ``k`` (null for a metric without
        a cutoff), ``group`` (the group's value; categories as strings), ``n_users``
        (the group's users with a value of the metric) and ``mean`` (their exact mean),
        and on every row of a (by group, metric, k) the summary of its groups:

        - two groups: ``diff``, the first group's mean minus the second's (sorted
          order: ``active`` minus ``inactive`` by default), ``diff_low`` and
          ``diff_high``, its bootstrap percentile interval at ``level``, and
          ``p_value``, Welch's two-sided t-test; with more groups these are null;
        - any number of groups: ``mean_abs_diff``, the mean absolute difference of
          the group means over every pair of groups, and ``range``, the largest group
          mean minus the smallest (with two groups both are ``|diff|``).

        Summaries are over the groups with a value: null when fewer than two have one.

    Notes
    -----
    The interval is an unpaired bootstrap: each group's users (those with a value) are
    resampled with replacement on their own, the group means of a resample differ by
    one resampled difference, and the interval is the percentiles ``(1 - level) / 2``
    and ``(1 + level) / 2`` of the ``n_resamples`` differences (numpy's linear
    interpolation). The t-test needs two users in each group (else ``p_value`` is
    null); groups whose values are all equal give ``p_value`` 0 when their means
    differ, and null when they do not.

    Examples
    --------
    >>> import polars as pl
    >>> import frame_metrics as fm
    >>> per_user = pl.DataFrame({
    ...     "user": [1, 2, 3, 4, 5],
    ...     "country": ["de", "de", "fr", "fr", "fr"],
    ...     "ndcg@10": [0.5, 0.75, 0.25, 0.5, None],
    ... })
    >>> out = fm.gaps(per_user, "country", n_resamples=1000)
    >>> out.select("metric", "k", "group", "n_users", "mean", "diff").rows()
    [('ndcg', 10, 'de', 2, 0.625, 0.25), ('ndcg', 10, 'fr', 2, 0.375, 0.25)]
    """
    np_ = numpy_for("gaps")
    _check_options(active_share, level, n_resamples, seed, progress)
    from frame_metrics.distributed import adapter_for

    adapter = adapter_for(per_user)
    if adapter is not None:
        # Spark or Dask: one row per user and model, and the bootstrap reads them all:
        # collected here, the result given back as a frame of the caller's kind.
        local = gaps(
            adapter.to_polars(per_user),
            group,
            train=train,
            active_share=active_share,
            level=level,
            n_resamples=n_resamples,
            seed=seed,
            user=user,
            by=by,
            progress=progress,
        )
        return cast("FrameT", adapter.like(per_user, local))
    users = list(as_names(user, "user"))
    by_cols = list(as_names(by, "by"))
    if group is not None and not isinstance(group, str):
        to_lazy(to_local(group), "group")  # a frame, or the error saying what is accepted
    source = to_lazy(per_user, "per_user")
    frame = source.lazy.collect()
    _key_roles(users, by_cols, group, frame.columns)
    checks: list[CheckedFrame] = []
    if isinstance(group, str):
        frame = _as_named(frame.with_columns(pl.col(group).alias(_GROUP)), _GROUP)
        group_label = group
        _ignored(train, active_share, group_label)
    elif group is not None:
        frame, checks = _groups_from_frame(frame, group, users)
        group_label = "group"
        _ignored(train, active_share, group_label)
    elif train is None:
        raise InvalidOptionError(
            "expected a group column or frame, or train= for the default split into active "
            "and inactive users, got neither",
            option="group",
        )
    else:
        frame, checks = _active_split(frame, train, users, active_share)
        group_label = "active/inactive"
    keys = {*users, *by_cols, _GROUP, *([group] if isinstance(group, str) else [])}
    metric_cols = [c for c in frame.columns if c not in keys]
    if not metric_cols:
        raise InvalidValueError(
            f"per_user: expected metric columns besides the keys "
            f"{', '.join(repr(c) for c in frame.columns)}, found none",
            frame="per_user",
        )
    bad = [
        c for c in metric_cols if not (frame.schema[c].is_numeric() or frame.schema[c] == pl.Null)
    ]
    if bad:
        raise InvalidValueError(
            f"per_user: expected numeric metric columns, found "
            f"{', '.join(f'{c!r} of dtype {frame.schema[c]}' for c in bad)}; every column "
            "other than the user key, the by columns and the group column is a metric",
            *_likely_by(frame, bad, by_cols),
            frame="per_user",
            columns=bad,
        )
    run_checks([*checks, *_value_checks(frame, users, by_cols, metric_cols, group_label)])
    frame = frame.with_columns(pl.col(metric_cols).cast(pl.Float64))
    group_dtype = frame.schema[_GROUP]
    if isinstance(group_dtype, pl.Null):
        group_dtype = pl.String()
    schema = {
        **{b: frame.schema[b] for b in by_cols},
        **{c: group_dtype if c == GROUP else dtype for c, dtype in _SCHEMA.items()},
    }
    groups = frame[_GROUP].unique().sort().to_list()
    if frame.height == 0:
        return cast("FrameT", source.give_back(pl.DataFrame(schema=schema)))
    if len(groups) < 2:
        raise InvalidValueError(
            f"{group_label}: expected at least two groups of users, found one: "
            f"{shown(groups[0])}, every user's",
            frame="group" if group_label == "group" else "per_user",
        )

    partitions: list[tuple[Any, ...]] = (
        frame.select(by_cols).unique().sort(by_cols).rows() if by_cols else [()]
    )
    totals = _exact_means(frame, by_cols, metric_cols)
    cubes = []
    for key in partitions:
        part = frame.filter(*[pl.col(b) == v for b, v in zip(by_cols, key, strict=True)])
        cubes.append(
            [
                part.filter(pl.col(_GROUP) == g)
                .select(pl.col(metric_cols).fill_null(float("nan")))
                .to_numpy()
                .astype(np_.float64, copy=False)
                .reshape(-1, len(metric_cols))
                for g in groups
            ]
        )
    jobs = [
        (v.shape[0], len(_blocks(~np_.isnan(v)))) for groups_values in cubes for v in groups_values
    ]
    total_draws = sum(n * blocks for n, blocks in jobs) * n_resamples
    n_jobs = sum(blocks for _, blocks in jobs)
    bar = Progress(
        n_resamples * n_jobs,
        "gaps: bootstrap",
        enabled=shows_progress(progress, total_draws),
        unit="resample",
    )
    rows: list[dict[str, Any]] = []
    try:
        for p, (key, groups_values) in enumerate(zip(partitions, cubes, strict=True)):
            samples = [
                _group_samples(values, n_resamples, seed, (p, g), bar)
                for g, values in enumerate(groups_values)
            ]
            rows += _partition_rows(
                dict(zip(by_cols, key, strict=True)),
                groups,
                metric_cols,
                samples,
                totals,
                level,
            )
    finally:
        bar.close()
    return cast("FrameT", source.give_back(pl.DataFrame(rows, schema=schema, orient="row")))


def _ignored(train: object | None, active_share: float, group_label: str) -> None:
    """Warn that the default split's inputs do nothing when the groups are given."""
    given = [
        name
        for name, ignored in (("train", train is not None), ("active_share", active_share != 0.05))
        if ignored
    ]
    if given:
        warn(
            IgnoredOptionWarning(
                f"ignored ({' and '.join(given)} set the default active/inactive split, and "
                f"the groups are given: {group_label})",
                option=given[0],
            )
        )


def _exact_means(
    frame: pl.DataFrame, by: list[str], metric_cols: list[str]
) -> dict[tuple[Any, ...], dict[str, tuple[int, float | None]]]:
    """Per (by values..., group): each metric's (count, exact mean) of its non-null values."""
    keys = [*by, _GROUP]
    out = exact_totals(exact_partials(frame.lazy(), keys, metric_cols), keys, metric_cols).collect()
    return {
        tuple(row[k] for k in keys): {c: (row[f"{c}.n"], row[f"{c}.mean"]) for c in metric_cols}
        for row in out.iter_rows(named=True)
    }


def _partition_rows(
    by_values: dict[str, Any],
    groups: list[Any],
    metric_cols: list[str],
    samples: list[_Samples],
    totals: dict[tuple[Any, ...], dict[str, tuple[int, float | None]]],
    level: float,
) -> list[dict[str, Any]]:
    """The rows of one ``by`` group: per metric, each group's and the summary."""
    rows = []
    for j, column in enumerate(metric_cols):
        name, k = split_column(column)
        stats = [totals.get((*by_values.values(), g), {}).get(column, (0, None)) for g in groups]
        means = [m for _, m in stats if m is not None]
        summary: dict[str, float | None] = {
            "diff": None,
            "diff_low": None,
            "diff_high": None,
            "p_value": None,
            "mean_abs_diff": None,
            "range": None,
        }
        if len(means) >= 2:
            pairs = list(itertools.combinations(means, 2))
            summary["mean_abs_diff"] = math.fsum(abs(a - b) for a, b in pairs) / len(pairs)
            summary["range"] = max(means) - min(means)
        first, second = (stats[0][1], stats[1][1]) if len(groups) == 2 else (None, None)
        if first is not None and second is not None:
            summary["diff"] = first - second
            a, b = samples[0], samples[1]
            resampled = cast("Any", a.means[j]) - cast("Any", b.means[j])
            # Each resample has a value (every drawn user has one): none is left out.
            summary["diff_low"], summary["diff_high"] = percentiles(resampled, level)
            summary["p_value"] = _none_if_nan(welch_t_test(a.values[j], b.values[j])[1])
        for g, (n, mean) in zip(groups, stats, strict=True):
            rows.append(
                {
                    **by_values,
                    "metric": name,
                    "k": k,
                    GROUP: g,
                    "n_users": n,
                    "mean": mean,
                    **summary,
                }
            )
    return rows
