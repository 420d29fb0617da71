"""What a recommender would earn if deployed: :func:`policy_value`, off-policy value from logs.

Spec section 9.5. ``logs`` holds what an old (logging) policy π_b showed and what it
earned: one row per (user, item) impression with its ``reward`` and ``pscore`` =
π_b(item | user). ``recs`` is the evaluated policy π_e: its top k (π_e = 1/k for each
item of the top k, 0 for every other item), or a ``probability=`` column π_e(item | user).
With ``w = π_e / π_b`` per logged row:

- ``"ips"``: V = mean(w · reward);
- ``"snips"`` (default): V = Σ w · reward / Σ w;
- ``"matching"``: the mean reward of the logged rows whose item is in the top k;
- ``"dr"``: V = mean(Σ_a π_e(a|u) q̂(u, a) + w · (reward − q̂(u, logged item))), with
  ``reward_model=`` the column of recs holding q̂.

Means are over all logged rows: a logged item the policy never shows has w = 0. The
result has one row per evaluated policy (``by`` group) with a bootstrap interval over
users, the effective sample size, the share of logged rows the policy could have shown
and the largest weight.

Exactness: the terms are summed in fixed point, as integers, which is exact in any order
(:func:`policy_value`'s Notes), and the bootstrap draws from seeded streams over the users
in key order (:func:`frame_metrics.numerics.resampled_sums`), so the result is the same
to the bit whatever the row order or frame kind.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Final, Literal, TypeVar, cast

import polars as pl

from frame_metrics.columns import Columns, as_names, check_roles, key_roles
from frame_metrics.distributed import to_local
from frame_metrics.dtypes import type_null_columns, unify_keys, whole_number_check
from frame_metrics.errors import (
    IgnoredOptionWarning,
    InvalidOptionError,
    InvalidValueError,
    Keyword,
    MissingColumnsError,
    shown,
    warn,
)
from frame_metrics.frames import to_lazy
from frame_metrics.numerics import (
    check_level,
    check_n_resamples,
    check_seed,
    is_int,
    is_real,
    percentile_interval,
    resampled_sums,
    times_two_to,
)
from frame_metrics.options import MetricOptions, Ties
from frame_metrics.prepare import RANK, prepare
from frame_metrics.spec import rank_not_read
from frame_metrics.validation import (
    Check,
    CheckedFrame,
    duplicate_check,
    finite_check,
    null_checks,
    row_check,
    run_checks,
)

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["COLUMNS", "ESTIMATORS", "Estimator", "policy_value"]

FrameT = TypeVar("FrameT")

#: The estimators, the default first.
Estimator = Literal["snips", "ips", "matching", "dr"]
ESTIMATORS: Final = ("snips", "ips", "matching", "dr")

#: The result's columns after the ``by`` columns, with their dtypes.
COLUMNS: Final[dict[str, pl.DataType]] = {
    "n_users": pl.Int64(),
    "n_rows": pl.Int64(),
    "value": pl.Float64(),
    "ci_low": pl.Float64(),
    "ci_high": pl.Float64(),
    "ess": pl.Float64(),
    "share_shown": pl.Float64(),
    "largest_weight": pl.Float64(),
}

#: Draw-count cells (resamples x users) of one block of resamples.
_CHUNK_CELLS: Final = 4_000_000

# Working columns (the reserved prefix: no caller's column can clash).
_PI = "_fm_pi"
_Q = "_fm_q"
_R = "_fm_reward"
_PB = "_fm_pscore"
_W = "_fm_w"
_DM = "_fm_dm"
_TOP = "_fm_in_top"
_KEY = "_fm_key"
#: Per logged row, the estimator's numerator and denominator terms.
_A = "_fm_a"
_B = "_fm_b"
#: w over the largest w of its by group: ess reads its sums, which cannot overflow.
_WS = "_fm_w_scaled"
#: Per user: sums of the terms, of w and w² over the largest w (fixed point), the number
#: of rows and of rows shown, the largest w.
_SW = "_fm_sw"
_SW2 = "_fm_sw2"
_N = "_fm_n"
_SHOWN = "_fm_shown"
_MAXW = "_fm_maxw"
_SUMMED = (_A, _B, _SW, _SW2)
#: What the resamples read of each user: the sums of A and B and their exponents.
_RESAMPLED = (_A, _B, f"{_A}.s", f"{_B}.s")


def _refuse(option: str, expected: str, value: object) -> InvalidOptionError:
    return InvalidOptionError(f"expected {expected}, got {shown(value)}", option=option)


def _check_options(
    estimator: object,
    k: object,
    max_weight: object,
    level: object,
    n_resamples: object,
    seed: object,
) -> None:
    """Each keyword is of its kind, before any data is read.

    Examples
    --------
    >>> _check_options("snip", 10, None, 0.95, 1000, 0)
    Traceback (most recent call last):
    ...
    frame_metrics.errors.InvalidOptionError: estimator: expected 'snips', 'ips', 'matching' or 'dr', got 'snip'
    """
    if estimator not in ESTIMATORS:
        names = [repr(e) for e in ESTIMATORS]
        raise _refuse("estimator", f"{', '.join(names[:-1])} or {names[-1]}", estimator)
    if not is_int(k) or int(cast("int", k)) < 1:
        raise _refuse("k", "an int >= 1", k)
    if max_weight is not None and not (is_real(max_weight) and cast("float", max_weight) > 0):
        raise _refuse("max_weight", "a number > 0 or None", max_weight)
    check_level(level)
    # 0 resamples: no interval (ci_low and ci_high null).
    check_n_resamples(n_resamples, least=0)
    check_seed(seed)


def _numeric(label: str, schema: pl.Schema, column: str, what: str) -> None:
    dtype = schema[column]
    if not (dtype.is_numeric() or isinstance(dtype, (pl.Boolean, pl.Null))):
        raise InvalidValueError(
            f"{label}: expected column {column!r} ({what}) to hold numbers, found dtype {dtype}",
            frame=label,
            columns=[column],
        )


def _outside(column: str, low: float, high: float, low_open: bool, what: str) -> Check:
    """Values of ``column`` outside ``(low, high]`` (``[low, high]`` when not ``low_open``)."""
    v = pl.col(column).cast(pl.Float64, strict=False)
    bad = ((v <= low) if low_open else (v < low)) | (v > high) | v.is_nan()
    interval = f"({low:g}, {high:g}]" if low_open else f"[{low:g}, {high:g}]"
    return row_check(
        bad,
        InvalidValueError,
        f"expected {what} in {interval} in column {column!r}, found {{n}} other value(s), "
        "e.g. {example}",
    )


def policy_value(
    logs: FrameT,
    recs: object,
    *,
    k: int = 10,
    estimator: Estimator = "snips",
    reward: str = "reward",
    pscore: str = "pscore",
    probability: str | None = None,
    reward_model: str | None = None,
    max_weight: float | None = None,
    by: str | Sequence[str] | None = None,
    level: float = 0.95,
    n_resamples: int = 1000,
    seed: int = 0,
    user: str | Sequence[str] = "user",
    item: str = "item",
    rank: str | None = None,
    score: str | None = None,
    ties: Ties | None = None,
    validate: bool = True,
    exclude: object | None = None,
) -> FrameT:
    r"""The value a recommender would earn, estimated from another policy's logged rewards.

    Parameters
    ----------
    logs
        The logged feedback of the logging policy π_b: one row per impression with the
        ``user`` key, the ``item`` shown, its ``reward`` (a finite number, such as a
        click) and its ``pscore``, π_b(item | user) in (0, 1]. A user may have many rows,
        and an item may repeat. Any other column (a ``position``) is not read. With
        ``by`` columns, each row counts in its own group only; without them, in every
        group of ``recs``. Any frame kind :func:`frame_metrics.evaluate` takes (Spark
        and Dask frames are collected); the result is of the same kind.
    recs
        The evaluated policy π_e: one row per (user, item) with a ``rank`` (1 = top) or
        a ``score``, as :func:`frame_metrics.evaluate` reads them (ties by ``ties``),
        and the ``by`` columns telling several policies apart. A (user, item) may
        appear once.
    k
        The top k the policy shows: π_e = 1/k for each item of the user's top k, 0 for
        every other item (ranked below k, or absent). With ``probability``, only
        ``"matching"`` reads it.
    estimator
        ``"snips"`` (default, self-normalised: Σ w·reward / Σ w), ``"ips"``
        (mean(w·reward)), ``"matching"`` (the mean reward of the logged rows whose item
        is in the top k) or ``"dr"`` (doubly robust; needs ``reward_model``).
    reward
        The reward column of ``logs``.
    pscore
        The column of ``logs`` holding π_b(item | user), the logging policy's
        probability of showing the logged item.
    probability
        A column of ``recs`` holding π_e(item | user) in [0, 1] instead of the top-k
        rule: every row of recs is then read, whatever its rank (rank and score are read
        only for ``"matching"``), and an item without a row has π_e = 0. The values are
        taken as given: a distribution over the items (summing to 1 per user) estimates
        the reward per impression, each item's probability of being in a slate (up to
        1 each) the expected reward summed over the slate.
    reward_model
        For ``"dr"``: a column of ``recs`` holding q̂(user, item), a model's estimate
        of the reward. The direct-method term Σ_a π_e(a|u) q̂(u, a) runs over the
        user's items with π_e > 0, which need a q̂; a logged item absent from recs has
        π_e = 0, so w = 0 and its correction term is exactly 0 whatever its q̂: it needs
        no row.
    max_weight
        Clip each weight at this number (> 0; default: no clipping). In ``"dr"`` only
        the correction term's weight is clipped; ``ess`` and ``largest_weight`` are
        of the weights before clipping.
    by
        Columns of ``recs`` (a model, a variant) telling apart the policies evaluated,
        each with its own row. ``logs`` may carry some of them (then its rows count in
        their group alone), but none that recs lacks.
    level
        The confidence level of the interval, in (0, 1).
    n_resamples
        Bootstrap resamples of the interval, an int >= 0; 0 computes no interval
        (``ci_low`` and ``ci_high`` are null).
    seed
        The seed of the resampling, an int >= 0: the same seed gives the same interval.
    user
        The user column of both frames, or a list of columns (a composite key such as
        user + session: the policy's context).
    item
        The item column of both frames.
    rank
        The rank column of ``recs`` (1 = top; ``None``: ``"rank"``). With ``score`` the
        score ranks, and a ``rank`` given too is not read (a warning says so).
    score
        A score column of ``recs`` to derive ranks from instead (higher = better).
    ties
        Equal scores (with ``score``), as for :func:`frame_metrics.evaluate`:
        ``"item"`` (item ascending, default), ``"item_desc"``, ``"item_desc_text"`` or
        ``"input"``; ``"average"`` has no meaning for a top k of whole items.
    validate
        Check the inputs' values (nulls, pscores, probabilities, ranks, duplicates)
        with the result.
    exclude
        (user, item) pairs removed from the policy's lists before its top k, usually
        the train split, as :func:`frame_metrics.evaluate` removes them: the remaining
        items move up (re-ranked 1, 2, ...), so the top k holds k items the user could
        still choose, and an excluded item has π_e = 0. Pairs apply to every ``by``
        group unless it carries ``by`` columns (then to their group). ``logs`` are not
        touched. Not with ``probability`` (given probabilities are the policy's own: drop
        the rows from ``recs`` and renormalise as the policy would).

    Returns
    -------
    FrameT
        One row per ``by`` group with a logged row, sorted: the ``by`` columns,
        ``n_users`` (users with a logged row), ``n_rows`` (logged rows), ``value`` (the
        estimate; null when undefined: snips when every weight is 0, matching when no
        logged item is in the top k), ``ci_low`` and ``ci_high`` (the bootstrap
        percentile interval at ``level``), ``ess`` = (Σw)² / Σw² (the effective sample
        size of the weights before clipping, taken over w / the largest w so that no
        square overflows: equal weights give their count; null when all are 0),
        ``share_shown`` (the share of logged rows with π_e > 0) and ``largest_weight``
        (before clipping). Empty ``logs`` give no row.

    Raises
    ------
    FrameMetricsError
        A missing column (with the columns the frame has), a pscore outside (0, 1] or
        null, or so small that w = π_e / π_b overflows a float, a probability outside
        [0, 1], a null or non-finite reward or q̂, a repeated (user, item) in recs, a
        bad option; see :mod:`frame_metrics.errors`.

    Warns
    -----
    IgnoredOptionWarning
        ``reward_model`` with an estimator other than ``"dr"``, or ``max_weight`` with
        ``"matching"``: the result is what it would be without it.

    Notes
    -----
    The interval resamples users, not rows: a user's logged rows are not independent
    (one person, one context), so each resample draws as many users as there are, with
    replacement, and recomputes the estimator on their rows. Each estimator is a ratio
    of sums over users (Σ numerators / Σ denominators: rows for ips and dr, weights
    for snips, shown rows for matching). The n users of the p-th ``by`` group (sorted
    order) are taken in key order; the resamples come in blocks of ``max(1, 4_000_000
    // n)``, and block b draws ``rng.integers(0, n, size=(block size, n),
    dtype=numpy.int32)`` with ``rng = numpy.random.default_rng(
    numpy.random.SeedSequence(seed, spawn_key=(p, b)))`` (blocks run on several
    threads, with the same numbers). A resample whose denominator is 0 (snips,
    matching) has no value and is left out of the percentiles (numpy's linear
    interpolation).

    Sums: each per-row term is summed in fixed point (``round(v · 2^s)`` as a 128-bit
    integer, one exponent s per column and call, so that the largest term is below
    2^96): integer sums are exact in any order, so the value is the same to the bit
    whatever the row order, and differs from the exact sum of the float terms by at
    most about 2^-96 of the largest term per row.

    Open Bandit Pipeline (``obp.ope``) defines these estimators on arrays, one round
    per logged row: ``InverseProbabilityWeighting``,
    ``SelfNormalizedInverseProbabilityWeighting``, ``DoublyRobust`` and
    ``ReplayMethod`` give the same values with ``len_list=1`` and ``action_dist`` =
    π_e (its ``lambda_`` is ``max_weight``; its SNIPW never clips, its DR clips the
    correction's weight as here, its DM term divides by Σ_a π_e, which is 1 for a
    distribution). Its intervals resample rows, not users.

    Examples
    --------
    Two users; the logging policy showed each item with probability 0.5. The evaluated
    policy shows user 1 item a and user 2 item c (k = 1, so π_e = 1 on them):

    >>> import polars as pl
    >>> import frame_metrics as fm
    >>> logs = pl.DataFrame({"user": [1, 1, 2, 2], "item": ["a", "b", "c", "d"],
    ...                      "reward": [1.0, 0.0, 0.0, 1.0], "pscore": 0.5})
    >>> recs = pl.DataFrame({"user": [1, 2], "item": ["a", "c"], "rank": [1, 1]})
    >>> out = fm.policy_value(logs, recs, k=1, estimator="ips", n_resamples=0)
    >>> out.select("n_users", "n_rows", "value", "ess", "share_shown", "largest_weight").row(0)
    (2, 4, 0.5, 2.0, 0.5, 2.0)

    (w = 2 on the two shown rows, 0 on the others: IPS = (2·1 + 2·0) / 4 rows.) SNIPS
    divides by the weights instead, (2·1 + 2·0) / (2 + 2), and matching takes the mean
    reward of the two shown rows:

    >>> fm.policy_value(logs, recs, k=1, n_resamples=0)["value"].item()
    0.5
    >>> fm.policy_value(logs, recs, k=1, estimator="matching", n_resamples=0)["value"].item()
    0.5

    With user 1's item a excluded (seen before), the policy's top 1 for user 1 is its
    next item, b (reward 0): both shown rows now earn 0 on average.

    >>> ranked = pl.DataFrame({"user": [1, 1, 2], "item": ["a", "b", "c"], "rank": [1, 2, 1]})
    >>> seen = pl.DataFrame({"user": [1], "item": ["a"]})
    >>> fm.policy_value(logs, ranked, k=1, estimator="matching", n_resamples=0,
    ...                 exclude=seen)["value"].item()
    0.0
    """
    _check_options(estimator, k, max_weight, level, n_resamples, seed)
    if rank is not None and score is not None:
        warn(rank_not_read(rank, score))
    rank = "rank" if rank is None else rank
    if reward_model is not None and estimator != "dr":
        warn(
            IgnoredOptionWarning(
                f"ignored (estimator={estimator!r} reads no reward model; estimator='dr' does)",
                option="reward_model",
            )
        )
    if max_weight is not None and estimator == "matching":
        warn(
            IgnoredOptionWarning(
                "ignored (estimator='matching' weighs no row)", option="max_weight"
            )
        )
    if estimator == "dr" and reward_model is None:
        raise InvalidOptionError(
            "expected a column of recs holding q̂(user, item), the reward model's estimate, "
            "for estimator='dr', got None",
            option="reward_model",
        )
    if exclude is not None and probability is not None:
        raise InvalidOptionError(
            "expected recs ranked by rank or score, got ",
            Keyword("probability", probability),
            ": the probabilities are the policy's own, and which items take an excluded "
            "item's share is the policy's to say; drop the excluded rows from recs and "
            "renormalise as the policy would",
            option="exclude",
        )
    from frame_metrics.distributed import adapter_for

    adapter = adapter_for(logs)
    table = _policy_value(
        to_local(logs),
        to_local(recs),
        k=int(k),
        estimator=estimator,
        reward=reward,
        pscore=pscore,
        probability=probability,
        reward_model=reward_model if estimator == "dr" else None,
        max_weight=None if max_weight is None else float(max_weight),
        by=by,
        level=float(level),
        n_resamples=int(n_resamples),
        seed=int(seed),
        user=user,
        item=item,
        rank=rank,
        score=score,
        ties=ties,
        validate=validate,
        exclude=None if exclude is None else to_local(exclude),
    )
    return cast("FrameT", table if adapter is None else adapter.like(logs, table))


def _policy_value(
    logs: object,
    recs: object,
    *,
    k: int,
    estimator: str,
    reward: str,
    pscore: str,
    probability: str | None,
    reward_model: str | None,
    max_weight: float | None,
    by: str | Sequence[str] | None,
    level: float,
    n_resamples: int,
    seed: int,
    user: str | Sequence[str],
    item: str,
    rank: str,
    score: str | None,
    ties: str | None,
    validate: bool,
    exclude: object | None = None,
) -> Any:
    """:func:`policy_value` on local frames."""
    users = list(as_names(user, "user"))
    by_cols = list(as_names(by, "by"))
    if ties == "average":
        raise InvalidOptionError(
            "expected 'item', 'item_desc', 'item_desc_text' or 'input' (a top k holds "
            "whole items), got 'average'",
            option="ties",
        )
    # The option table's check of the tie rule (its message), as fm.evaluate's.
    options = MetricOptions(
        on_duplicate="error", ties=cast("Any", "item" if ties is None else ties)
    )
    if not isinstance(item, str):
        raise _refuse("item", "a column name", item)
    columns = Columns(user=tuple(users), item=item, rank=rank, score=score, by=tuple(by_cols))
    for name, value in (("reward", reward), ("pscore", pscore)):
        if not isinstance(value, str):
            raise _refuse(name, "a column name", value)
    for name, optional in (("probability", probability), ("reward_model", reward_model)):
        if optional is not None and not isinstance(optional, str):
            raise _refuse(name, "a column name or None", optional)
    ranked = probability is None or estimator == "matching"
    keys = [*by_cols, *users]
    recs_roles = _roles(users, by_cols, item)
    if ranked:
        recs_roles[columns.order[0]] = columns.order[1]
    if probability is not None:
        recs_roles["probability"] = probability
    if reward_model is not None:
        recs_roles["reward_model"] = reward_model
    logs_roles = _roles(users, by_cols, item) | {"reward": reward, "pscore": pscore}
    check_roles(
        {"logs": logs_roles, "recs": recs_roles},
        {name: "a column of the result" for name in COLUMNS},
    )

    recs_reads = set(recs_roles.values())
    logs_src = to_lazy(logs, "logs", set(logs_roles.values()))
    recs_src = to_lazy(recs, "recs", recs_reads)
    logs_schema = logs_src.lazy.collect_schema()
    recs_schema = recs_src.lazy.collect_schema()
    recs_missing = [c for c in [*by_cols, *users, item] if c not in recs_schema]
    if recs_missing:
        raise MissingColumnsError("recs", recs_missing, list(recs_schema.names()))
    logs_by = [b for b in by_cols if b in logs_schema]
    logs_missing = [c for c in [*users, item, reward, pscore] if c not in logs_schema]
    if logs_missing:
        raise MissingColumnsError("logs", logs_missing, list(logs_schema.names()))
    extra = [c for c in (probability, reward_model) if c is not None and c not in recs_schema]
    if extra:
        raise MissingColumnsError("recs", extra, list(recs_schema.names()))
    exclude_src = None
    if exclude is not None:
        exclude_src = to_lazy(exclude, "exclude", {*by_cols, *users, item})
        exclude_schema = exclude_src.lazy.collect_schema()
        exclude_missing = [c for c in [*users, item] if c not in exclude_schema]
        if exclude_missing:
            raise MissingColumnsError("exclude", exclude_missing, list(exclude_schema.names()))
    _numeric("logs", logs_schema, reward, "the reward")
    _numeric("logs", logs_schema, pscore, "π_b(item | user)")
    if probability is not None:
        _numeric("recs", recs_schema, probability, "π_e(item | user)")
    if reward_model is not None:
        _numeric("recs", recs_schema, reward_model, "q̂(user, item)")

    keyed = {"recs": recs_src.lazy, "logs": logs_src.lazy}
    if exclude_src is not None:
        pair = [*(b for b in by_cols if b in exclude_schema), *users, item]
        keyed["exclude"] = exclude_src.lazy.select(pair)
    typed, float_keys = unify_keys(keyed, [*by_cols, *users, item])
    pairs = None
    if "exclude" in typed:
        pairs = type_null_columns(
            typed["exclude"], dict.fromkeys([*by_cols, *users, item], pl.Int64())
        )
    values = {
        reward: pl.Float64(),
        pscore: pl.Float64(),
        **dict.fromkeys([*by_cols, *users, item], pl.Int64()),
    }
    logs_lf = type_null_columns(typed["logs"], values)
    recs_lf = type_null_columns(
        typed["recs"],
        {
            **dict.fromkeys([*by_cols, *users, item], pl.Int64()),
            **({} if probability is None else {probability: pl.Float64()}),
            **({} if reward_model is None else {reward_model: pl.Float64()}),
        },
    )
    checks: list[CheckedFrame] = (
        [CheckedFrame(f.label, f.frame, [whole_number_check(f)], [f.column]) for f in float_keys]
        if validate
        else []
    )
    if validate:
        checks += _logs_checks(logs_lf, [*logs_by, *users], item, reward, pscore)

    top: pl.LazyFrame | None = None
    if ranked:
        # The top k as fm.evaluate ranks it: by rank or by score with the tie rule,
        # nulls, ranks and duplicates within k checked (an empty truth: no truth rows).
        empty_truth = (
            recs_lf.select(*users, item).head(0).with_columns(pl.lit(0.0).alias(columns.relevance))
        )
        prepared = prepare(
            recs_lf,
            empty_truth,
            columns,
            options,
            k,
            validate=validate,
            every_column=recs_src.every_column,
            exclude=pairs,
        )
        top = prepared.top.filter(pl.col(RANK) <= k).select(*keys, item)
        if validate:
            checks += [
                _without_dedup_advice(c) for c in prepared.checks if c.label in ("recs", "exclude")
            ]
    if validate:
        checks += _recs_checks(recs_lf, keys, item, probability, reward_model, ranked)

    # Given ranks without exclude=: the top k is recs' rows within k, read directly.
    given_ranks = rank if score is None and pairs is None else None
    policy = _policy(recs_lf, top, keys, item, k, probability, reward_model, given_ranks)
    dm = None
    if estimator == "dr":
        # The direct method's term per user first (a sum in fixed point needs its
        # terms' largest magnitude before it starts), with the input checks.
        (dm_terms,) = run_checks(checks, with_queries=[_direct_method_terms(policy, keys)])
        dm, checks = _direct_method(dm_terms, keys).lazy(), []
    packed = _packing([logs_lf, recs_lf], [*keys, item])
    rows = _logged_rows(
        logs_lf, recs_lf, policy, top, by_cols, logs_by, users, item, estimator, packed, dm
    )
    rows = rows.with_columns(
        pl.col(reward).cast(pl.Float64).alias(_R), pl.col(pscore).cast(pl.Float64).alias(_PB)
    )
    rows = rows.with_columns((pl.col(_PI) / pl.col(_PB)).alias(_W))
    if validate:
        checks.append(_weight_check(rows, [*keys, item], pscore))
    queries = [_terms(rows, by_cols, keys, estimator, max_weight)]
    (raw,) = run_checks(checks, with_queries=queries)
    terms = _fixed_point(raw, _SOURCES)
    if n_resamples:
        # The resamples read each user's sums of A and B, in key order.
        per_user = _per_user(terms, keys)
        queries = [_totals(per_user, by_cols, None), per_user.select(*keys, *_RESAMPLED).sort(keys)]
    else:
        queries = [_totals(terms, by_cols, users)]
    (sums, *users_ab) = pl.collect_all(queries)
    out = _result(sums, users_ab, by_cols, estimator, level, n_resamples, seed)
    return logs_src.give_back(out)


def _without_dedup_advice(checked: CheckedFrame) -> CheckedFrame:
    """fm.evaluate's checks of recs, without proposing ``on_duplicate``, which is not here.

    A policy gives each item one probability: a repeated (user, item) is always an error.
    """

    def plain(check: Check) -> Check:
        proposes = any(
            isinstance(part, Keyword) and part.name == "on_duplicate" for part in check.advice
        )
        return replace(check, advice=()) if proposes else check

    return replace(checked, checks=[plain(c) for c in checked.checks])


def _roles(users: list[str], by: list[str], item: str) -> dict[str, str]:
    return {**key_roles(users, by), "item": item}


def _logs_checks(
    logs: pl.LazyFrame, keys: list[str], item: str, reward: str, pscore: str
) -> list[CheckedFrame]:
    """Keys present; rewards finite; each pscore a probability the logged item had."""
    schema = logs.collect_schema()
    checks = [
        *null_checks([*keys, item], "key"),
        *null_checks([reward], "reward"),
        *finite_check(reward, schema[reward]),
        *null_checks([pscore], "pscore"),
        _outside(pscore, 0.0, 1.0, True, "π_b(item | user), a probability the item was shown,"),
    ]
    return [CheckedFrame("logs", logs, checks, [*keys, item, reward, pscore])]


def _recs_checks(
    recs: pl.LazyFrame,
    keys: list[str],
    item: str,
    probability: str | None,
    reward_model: str | None,
    ranked: bool,
) -> list[CheckedFrame]:
    """The values of recs alone: probabilities, q̂, and one row per (user, item) over every rank.

    The top k's checks (ranks, nulls, repeats within k) are fm.evaluate's; a probability
    or q̂ is read from every row, so there a repeat anywhere is an error.
    """
    schema = recs.collect_schema()
    checks: list[Check] = [] if ranked else null_checks([*keys, item], "key")
    shown_cols = [*keys, item]
    if probability is not None:
        shown_cols.append(probability)
        checks += [
            *null_checks([probability], "probability"),
            _outside(probability, 0.0, 1.0, False, "π_e(item | user), a probability,"),
        ]
    if reward_model is not None:
        shown_cols.append(reward_model)
        checks += [
            *null_checks([reward_model], "reward model"),
            *finite_check(reward_model, schema[reward_model]),
        ]
    if probability is not None or reward_model is not None:
        checks.append(duplicate_check([*keys, item], "(user, item) pair", ""))
    return [CheckedFrame("recs", recs, checks, shown_cols)] if checks else []


def _policy(
    recs: pl.LazyFrame,
    top: pl.LazyFrame | None,
    keys: list[str],
    item: str,
    k: int,
    probability: str | None,
    reward_model: str | None,
    rank: str | None,
) -> pl.LazyFrame:
    """π_e per (keys, item) with π_e > 0 possible, and q̂ when read: keys, item, PI[, Q].

    ``rank``: recs' rank column when the top k is recs' rows ranked within k (None:
    ``top``, ranked from scores or with ``exclude=``'s pairs removed).
    """
    q = [pl.col(reward_model).cast(pl.Float64).alias(_Q)] if reward_model is not None else []
    if probability is not None:
        return recs.select(*keys, item, pl.col(probability).cast(pl.Float64).alias(_PI), *q)
    assert top is not None
    if reward_model is not None and rank is not None:
        # Given ranks: the top k are recs' rows within k (as prepare's), q̂ beside them.
        within = recs.filter(pl.col(rank) <= k)
        return within.select(*keys, item, pl.lit(1.0 / k).alias(_PI), *q)
    policy = top.with_columns(pl.lit(1.0 / k).alias(_PI))
    if reward_model is not None:
        policy = policy.join(recs.select(*keys, item, *q), on=[*keys, item], how="left")
    return policy


def _logged_rows(
    logs: pl.LazyFrame,
    recs: pl.LazyFrame,
    policy: pl.LazyFrame,
    top: pl.LazyFrame | None,
    by: list[str],
    logs_by: list[str],
    users: list[str],
    item: str,
    estimator: str,
    packed: pl.Expr | None,
    dm: pl.LazyFrame | None,
) -> pl.LazyFrame:
    """Every logged row in its group(s), with its π_e (0 when not shown) and q̂ terms.

    Logs without some ``by`` columns apply to every value of them in recs (every policy
    is evaluated on the same logged rows). ``packed``: the (keys, item) columns as one
    integer (see :func:`_packing`), which joins twice as fast as several columns;
    ``dm``: for dr, the direct method's term per user.
    """
    keys = [*by, *users]
    missing_by = [b for b in by if b not in logs_by]
    rows = logs
    if missing_by:
        rows = rows.join(recs.select(missing_by).unique(), how="cross")
    on: list[str] = [*keys, item]
    if packed is not None:
        on = [_KEY]
        rows = rows.with_columns(packed.alias(_KEY))
        policy = policy.select(packed.alias(_KEY), pl.exclude(*keys, item))
        top = None if top is None else top.select(packed.alias(_KEY))
    rows = rows.join(policy, on=on, how="left", nulls_equal=True)
    rows = rows.with_columns(pl.col(_PI).fill_null(0.0))
    if estimator == "matching":
        assert top is not None
        marked = top.select(*on).with_columns(pl.lit(True).alias(_TOP))
        rows = rows.join(marked, on=on, how="left", nulls_equal=True)
        rows = rows.with_columns(pl.col(_TOP).fill_null(False))
    if dm is not None:
        # The direct method's term per user: Σ_a π_e(a|u) q̂(u, a).
        rows = rows.join(dm, on=keys, how="left", nulls_equal=True)
        # No q̂ where π_e = 0: w = 0 there, and 0 · (r - 0) adds exactly 0.
        rows = rows.with_columns(pl.col(_DM).fill_null(0.0), pl.col(_Q).fill_null(0.0))
    return rows


def _packing(frames: Sequence[pl.LazyFrame], columns: list[str]) -> pl.Expr | None:
    """The integer key columns as one Int64: ``Σ (c - min_c) · stride_c``.

    None when a column is not of an integer dtype, has no value, or the product of the
    ranges passes 2^62. The ranges are read over every frame holding the column (one
    small query), so equal keys pack to equal integers and different keys to different
    ones.
    """
    holders = [(f, f.collect_schema()) for f in frames]
    if not all(schema[c].is_integer() for _, schema in holders for c in columns if c in schema):
        return None
    queries = [
        f.select(
            *(pl.col(c).min().alias(f"{c}.min") for c in columns if c in schema),
            *(pl.col(c).max().alias(f"{c}.max") for c in columns if c in schema),
        )
        for f, schema in holders
        if any(c in schema for c in columns)
    ]
    lows: dict[str, int] = {}
    highs: dict[str, int] = {}
    for frame in pl.collect_all(queries):
        for name, value in frame.row(0, named=True).items():
            c, _, which = name.rpartition(".")
            if value is None:
                continue
            if which == "min":
                lows[c] = min(lows.get(c, value), value)
            else:
                highs[c] = max(highs.get(c, value), value)
    if set(lows) != set(columns):
        return None  # a column without any value: nothing to join
    span = 1
    for c in columns:
        span *= highs[c] - lows[c] + 1
    if span > 2**62 or any(abs(v) >= 2**62 for v in (*lows.values(), *highs.values())):
        return None
    key: pl.Expr = pl.lit(0, pl.Int64)
    stride = 1
    for c in reversed(columns):
        key = key + (pl.col(c).cast(pl.Int64) - lows[c]) * stride
        stride *= highs[c] - lows[c] + 1
    return key


#: The largest magnitude of a term in fixed point: 2^96, so that a sum of up to 2^31
#: terms stays within Int128.
_FIXED_BITS = 96


def _exponent(top: float | None) -> int:
    """The s of fixed point for a column whose largest magnitude is ``top``: top · 2^s < 2^96.

    Examples
    --------
    >>> _exponent(1.0), _exponent(0.75), _exponent(1e300), _exponent(0.0), _exponent(None)
    (95, 96, -901, 0, 0)
    >>> _exponent(5e-324)  # the least subnormal, 2^-1074: its terms keep 96 bits too
    1169
    """
    if top is None or not math.isfinite(top) or top == 0.0:
        return 0  # no values, all 0, or a NaN or ±inf the input checks report
    # top = m · 2^e with 0.5 <= m < 1, exactly: top < 2^e (e >= -1073 for a float).
    return _FIXED_BITS - math.frexp(top)[1]


def _fixed_point(frame: pl.DataFrame, sources: dict[str, str]) -> pl.LazyFrame:
    """``frame`` with the terms to sum in fixed point, as Int128 integers.

    Each ``name`` is ``round(v · 2^s)`` of its source column v, and ``name.s`` the
    exponent s (one per column and call, see :func:`_exponent`). An integer sum is exact and the same in any order; each term is off by at most
    ``2^-(s+1)``, under ``2^-96`` of the column's largest magnitude (a float sum of the
    same terms loses up to ``2^-53`` of the running sum at each addition). The scaling
    by a power of two is exact.
    """
    tops = frame.select(pl.col(src).abs().max().alias(name) for name, src in sources.items()).row(
        0, named=True
    )
    exps = {name: _exponent(tops[name]) for name in sources}
    return frame.lazy().with_columns(
        # Not strict: a NaN or infinite term (a pscore of 0) is null here, and the input
        # checks collected before report its cause (or validate=False gives a null).
        *(
            times_two_to(pl.col(src), exps[name]).round().cast(pl.Int128, strict=False).alias(name)
            for name, src in sources.items()
        ),
        *(pl.lit(exps[name], pl.Int64).alias(f"{name}.s") for name in sources),
    )


def _unscaled(frame: pl.DataFrame, names: Sequence[str]) -> pl.DataFrame:
    """Fixed-point sums back as floats, ``fixed · 2^-s`` (the scaling exact)."""
    if frame.height == 0:
        return frame.with_columns(pl.col(names).cast(pl.Float64))
    return frame.with_columns(
        times_two_to(pl.col(name).cast(pl.Float64), -int(frame[f"{name}.s"][0])).alias(name)
        for name in names
    )


def _direct_method_terms(policy: pl.LazyFrame, keys: list[str]) -> pl.LazyFrame:
    """The policy's rows: π_e(a|u) q̂(u, a), to sum per user."""
    return policy.select(*keys, (pl.col(_PI) * pl.col(_Q)).alias(_DM))


def _direct_method(terms: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """Per user: Σ_a π_e(a|u) q̂(u, a), summed in fixed point (the same in any order)."""
    fixed = _fixed_point(terms, {_DM: _DM})
    per_user = fixed.group_by(keys).agg(pl.col(_DM).sum(), pl.col(f"{_DM}.s").first()).collect()
    return _unscaled(per_user, [_DM]).drop(f"{_DM}.s")


def _weight_check(rows: pl.LazyFrame, shown_cols: list[str], pscore: str) -> CheckedFrame:
    """Each logged row's w = π_e / π_b a finite float (spec 9.5).

    A pscore so small that w overflows (π_e / 5e-324) leaves no value to estimate with:
    an error naming the row, not a null value or an infinite largest weight.
    """
    check = row_check(
        pl.col(_W).is_infinite(),
        InvalidValueError,
        f"expected π_b(item | user) in column {pscore!r} large enough that w = π_e / π_b "
        "is a finite float, found {n} row(s) where w overflows, e.g. {example}",
    )
    return CheckedFrame("logs", rows, [check], [*shown_cols, pscore])


def _terms(
    rows: pl.LazyFrame, by: list[str], keys: list[str], estimator: str, max_weight: float | None
) -> pl.LazyFrame:
    """Per logged row: the terms to sum and whether π_e > 0.

    ``rows`` carry w (``_W``). The estimator's numerator and denominator terms (A, B),
    and w and w² over the largest w of the row's by group (ess is a ratio of their sums,
    the same over any scale, and these cannot overflow where w² would: 1e-300 gives w
    near 1e300): the sums are taken in fixed point (:func:`_fixed_point`); w itself
    stays, for the largest weight.
    """
    w = pl.col(_W)
    largest = w.max().over(by) if by else w.max()
    # Over a column of the largest, not a one-row value: polars divides by one value as a
    # multiplication by its reciprocal, and equal weights must give exactly 1.0 here (so
    # that ess is their count).
    scaled = pl.when(largest > 0).then(w / (w * 0.0 + largest)).otherwise(0.0)
    clipped = pl.col(_W) if max_weight is None else pl.min_horizontal(pl.col(_W), max_weight)
    r = pl.col(_R)
    if estimator == "ips":
        a, b = clipped * r, pl.lit(1.0)
    elif estimator == "snips":
        a, b = clipped * r, clipped
    elif estimator == "matching":
        a = pl.when(pl.col(_TOP)).then(r).otherwise(0.0)
        b = pl.col(_TOP).cast(pl.Float64)
    else:
        a, b = pl.col(_DM) + clipped * (r - pl.col(_Q)), pl.lit(1.0)
    return rows.with_columns(scaled.alias(_WS)).select(
        *keys,
        a.alias(_A),
        b.alias(_B),
        pl.col(_W),
        pl.col(_WS),
        (pl.col(_WS) * pl.col(_WS)).alias(_SW2),
        (pl.col(_PI) > 0).alias(_SHOWN),
    )


#: Each fixed-point sum and the term it sums.
_SOURCES = {_A: _A, _B: _B, _SW: _WS, _SW2: _SW2}


def _sums(n_users: pl.Expr, n_rows: pl.Expr, shown: pl.Expr, largest: pl.Expr) -> list[pl.Expr]:
    """The aggregations of a group of rows or of users: counts, fixed-point sums, max w."""
    return [
        n_users.alias("n_users"),
        n_rows.alias("n_rows"),
        shown.alias(_SHOWN),
        largest.alias(_MAXW),
        *(pl.col(name).sum() for name in _SUMMED),
        *(pl.col(f"{name}.s").first() for name in _SUMMED),
    ]


def _per_user(terms: pl.LazyFrame, keys: list[str]) -> pl.LazyFrame:
    """Per user: the sums of the user's rows (``n_users`` 1), as :func:`_totals` reads them."""
    return terms.group_by(keys).agg(
        _sums(
            pl.lit(1, pl.Int64),
            pl.len().cast(pl.Int64),
            pl.col(_SHOWN).sum().cast(pl.Int64),
            pl.col(_W).max(),
        )
    )


def _totals(frame: pl.LazyFrame, by: list[str], users: list[str] | None) -> pl.LazyFrame:
    """Per ``by`` group: fixed-point sums added up, counts, the largest weight.

    ``frame``: the per-user sums (``users`` None), or the rows' terms themselves (the
    user key: its distinct values are the users), which needs no per-user step.
    """
    if users is None:
        sums = _sums(
            pl.col("n_users").sum(),
            pl.col("n_rows").sum(),
            pl.col(_SHOWN).sum(),
            pl.col(_MAXW).max(),
        )
    else:
        distinct = pl.col(users[0]) if len(users) == 1 else pl.struct(users)
        sums = _sums(
            distinct.n_unique().cast(pl.Int64),
            pl.len().cast(pl.Int64),
            pl.col(_SHOWN).sum().cast(pl.Int64),
            pl.col(_W).max(),
        )
    return frame.group_by(by).agg(sums) if by else frame.select(sums)


def _result(
    sums: pl.DataFrame,
    resampled: list[pl.DataFrame],
    by: list[str],
    estimator: str,
    level: float,
    n_resamples: int,
    seed: int,
) -> pl.DataFrame:
    """One row per group: the value from the exact sums, the interval from resamples.

    ``resampled``: with resamples, the users' sums A and B (fixed point) in key order.
    """
    schema = {**{b: sums.schema[b] for b in by}, **COLUMNS}
    sums = sums.filter(pl.col("n_users") > 0)
    if by:
        sums = sums.sort(by, nulls_last=True)
    # The users' sums as floats, for the resamples.
    users_ab = _unscaled(resampled[0], [_A, _B]) if resampled else None
    rows: list[dict[str, Any]] = []
    for p, total in enumerate(sums.iter_rows(named=True)):
        exact = {
            name: Fraction(int(total[name])) / 2 ** int(total[f"{name}.s"]) for name in _SUMMED
        }
        n_rows = int(total["n_rows"])
        ratio = estimator in ("snips", "matching")
        if ratio:
            value = float(exact[_A] / exact[_B]) if exact[_B] != 0 else None
        else:
            value = float(exact[_A] / n_rows)
        low = high = None
        if users_ab is not None and value is not None:
            part = users_ab
            for col in by:
                part = part.filter(pl.col(col).eq_missing(total[col]))
            low, high = _interval(part, level, n_resamples, seed, p)
        sw, sw2 = exact[_SW], exact[_SW2]
        rows.append(
            {
                **{col: total[col] for col in by},
                "n_users": int(total["n_users"]),
                "n_rows": n_rows,
                "value": value,
                "ci_low": low,
                "ci_high": high,
                "ess": float(sw * sw / sw2) if sw2 != 0 else None,
                "share_shown": int(total[_SHOWN]) / n_rows,
                "largest_weight": float(total[_MAXW]),
            }
        )
    return pl.DataFrame(rows, schema=schema, orient="row")


def _interval(
    part: pl.DataFrame, level: float, n_resamples: int, seed: int, p: int
) -> tuple[float | None, float | None]:
    """The percentile interval of the estimator over resamples of the group's users.

    The users are in key order (``part`` is sorted); each estimator is Σ A / Σ B over
    the drawn users (B: the users' rows for ips and dr).
    """
    import numpy

    values = part.select(_A, _B).to_numpy().astype(numpy.float64, copy=False)
    interval = percentile_interval(_resampled_ratios(values, n_resamples, seed, p), level)
    return (None, None) if interval is None else interval


def _resampled_ratios(
    values: npt.NDArray[np.float64], n_resamples: int, seed: int, p: int
) -> npt.NDArray[np.float64]:
    """Σ A / Σ B of ``n_resamples`` resamples of the rows of ``values`` (users x (A, B)).

    NaN where a resample's Σ B is 0. The resamples come in blocks of
    ``max(1, 4_000_000 // n)`` (the last one shorter); block b draws its n user
    indices per resample as ``rng.integers(0, n, size=(size, n), dtype=numpy.int32)``
    with ``rng = numpy.random.default_rng(numpy.random.SeedSequence(seed, spawn_key=(p,
    b)))``, so the blocks run on several threads and give the same numbers.
    """
    import numpy

    sums = resampled_sums(values, n_resamples, seed, (p,), cells=_CHUNK_CELLS, per_chunk=True)
    with numpy.errstate(invalid="ignore", divide="ignore"):
        ratio = sums[:, 0] / sums[:, 1]
    return cast("npt.NDArray[np.float64]", numpy.where(sums[:, 1] != 0.0, ratio, numpy.nan))
