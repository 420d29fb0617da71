"""Is model B better than A, for whom, and how sure are we: :func:`compare`.

From per-user metric values of several models (a per-user result of
:func:`frame_metrics.evaluate` with the model among its ``by`` columns, or recommendations
with a model column plus truth, evaluated here first), one tidy row per segment,
metric, cutoff and model: the mean, a bootstrap confidence interval over users, the
difference to a baseline model with its own interval, a paired t-test and a Wilcoxon
signed-rank test over the users both models were evaluated on, and both p-values
corrected for multiple comparisons.

The bootstrap is vectorised: one matrix of resample counts (resamples x users, drawn in
chunks) times the matrix of every model's and metric's values gives every resampled mean
at once (:func:`frame_metrics.numerics.resampled_sums`), and the same resamples serve every
model, so differences are paired. Needs numpy (``pip install frame_metrics[stats]``); the
tests and p-values need nothing else.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar, cast

import polars as pl

from frame_metrics.columns import as_names
from frame_metrics.errors import (
    InvalidOptionError,
    InvalidValueError,
    Keyword,
    MissingColumnsError,
    shown,
)
from frame_metrics.frames import kind_of, to_lazy
from frame_metrics.metric_names import split_column
from frame_metrics.numerics import (
    check_level,
    check_n_resamples,
    check_progress,
    check_seed,
    numpy_for,
    percentile_interval,
    randomization_p_values,
    resampled_sums,
    shows_progress,
)
from frame_metrics.progress import Progress
from frame_metrics.stats import benjamini_hochberg, holm, paired_t_test, wilcoxon_signed_rank
from frame_metrics.validation import (
    Check,
    CheckedFrame,
    duplicate_check,
    null_checks,
    row_check,
    run_checks,
)

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["compare"]

FrameT = TypeVar("FrameT")
Correction = Literal["holm", "bh"]

#: The result's columns after the ``by`` columns; ``model`` and ``baseline`` take the
#: model column's dtype (None here).
_SCHEMA: dict[str, Any] = {
    "metric": pl.String,
    "k": pl.Int64,
    "model": None,
    "n_users": pl.Int64,
    "mean": pl.Float64,
    "ci_low": pl.Float64,
    "ci_high": pl.Float64,
    "baseline": None,
    "n_paired": pl.Int64,
    "diff": pl.Float64,
    "diff_low": pl.Float64,
    "diff_high": pl.Float64,
    "d_z": pl.Float64,
    "d_z_low": pl.Float64,
    "d_z_high": pl.Float64,
    "wins": pl.Int64,
    "ties": pl.Int64,
    "losses": pl.Int64,
    "p_ttest": pl.Float64,
    "p_wilcoxon": pl.Float64,
    "p_randomization": pl.Float64,
    "p_ttest_adj": pl.Float64,
    "p_wilcoxon_adj": pl.Float64,
    "p_randomization_adj": pl.Float64,
}

#: The tests whose p-values are corrected over every comparison of the call.
_TESTS = ("p_ttest", "p_wilcoxon", "p_randomization")


def _check_options(
    model: object,
    level: object,
    n_resamples: object,
    seed: object,
    correction: object,
    progress: object,
) -> tuple[float, int, int]:
    """Each keyword of :func:`compare` is of its kind, before any data is read.

    Gives level, n_resamples and seed in their plain Python form.

    Examples
    --------
    >>> import numpy as np
    >>> _check_options("model", np.float64(0.9), 100, np.int64(3), "holm", None)
    (0.9, 100, 3)
    >>> _check_options("model", "0.9", 100, 3, "holm", None)
    Traceback (most recent call last):
    ...
    frame_metrics.errors.InvalidOptionError: level: expected a number in (0, 1), got '0.9'
    """
    if not isinstance(model, str):
        raise InvalidOptionError(f"expected a column name, got {shown(model)}", option="model")
    checked = check_level(level), check_n_resamples(n_resamples), check_seed(seed)
    if not (isinstance(correction, str) and correction in ("holm", "bh")):
        raise InvalidOptionError(
            f"expected one of 'holm', 'bh', got {shown(correction)}", option="correction"
        )
    check_progress(progress)
    return checked


def _key_roles(
    model: str, by: str | Sequence[str] | None, user: str | Sequence[str]
) -> tuple[list[str], list[str]]:
    """The segment and user key columns, distinct from the model column and each other."""
    segments_by = list(as_names(by, "by"))
    users = list(as_names(user, "user"))
    if not users:
        raise InvalidOptionError(
            "expected at least one column name, got an empty list", option="user"
        )
    if model in segments_by:
        raise InvalidOptionError(
            f"expected segment columns other than the model column {model!r}, got {segments_by!r}",
            option="by",
            columns=[model],
        )
    if model in users:
        raise InvalidOptionError(
            f"expected user key columns other than the model column {model!r}, got {users!r}",
            option="user",
            columns=[model],
        )
    if set(segments_by) & set(users):
        raise InvalidOptionError(
            f"expected segment columns other than the user key {users!r}, got {segments_by!r}",
            option="by",
            columns=sorted(set(segments_by) & set(users)),
        )
    return segments_by, users


def _check_serendipity_baseline(evaluate_kwargs: dict[str, Any]) -> None:
    """``baseline=`` is evaluate's (a frame for serendipity), not the model compared with."""
    value = evaluate_kwargs.get("baseline")
    if value is None:
        return
    try:
        kind_of(value)
    except InvalidOptionError:
        raise InvalidOptionError(
            "expected a frame of a baseline model's recommendations (serendipity's, "
            f"passed to evaluate), got {value!r}; to name the model every other one is "
            f"compared with, pass baseline_model={value!r}",
            option="baseline",
        ) from None


def _per_user_checks(
    per_user: pl.DataFrame,
    label: str,
    model: str,
    segments_by: list[str],
    users: list[str],
    metric_cols: list[str],
) -> list[CheckedFrame]:
    """What per-user values must be, for every input: keys present and unique, values finite.

    A null metric value is a user the metric is undefined for (spec section 3): that
    user is left out of the metric's mean and pairs, and ``n_users``/``n_paired`` say
    how many are in. NaN and infinities are no such statement, and no mean is true
    with them: they are refused, as are null keys (a row of nobody) and repeated rows.
    """
    keys = [model, *segments_by, *users]
    frame = per_user.lazy()
    key_checks: list[Check] = [
        *null_checks(keys, "key"),
        duplicate_check(keys, f"({', '.join(keys)})", ""),
    ]
    checked = [CheckedFrame(label, frame, key_checks, keys)]
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
        checked.append(CheckedFrame(label, frame, [check], [*keys, c]))
    return checked


def _model_values(per_user: pl.DataFrame, model: str) -> pl.DataFrame:
    """The model column as the values it names: categories as their strings."""
    dtype = per_user.schema[model]
    if isinstance(dtype, (pl.Categorical, pl.Enum)):
        return per_user.with_columns(pl.col(model).cast(pl.String))
    return per_user


def _find_baseline(models: list[Any], wanted: object) -> Any:
    """The model value ``wanted`` names: equal to it, or else the one written as it.

    The second lets a name given as text (as on the command line) pick an integer model.
    """
    for m in models:
        if m == wanted:
            return m
    if isinstance(wanted, str):
        for m in models:
            if str(m) == wanted:
                return m
    raise InvalidOptionError(
        f"expected one of the models {', '.join(repr(m) for m in models)}, got {wanted!r}",
        option="baseline_model",
    )


@dataclass(frozen=True)
class _Segment:
    """One segment's values: users x (model, metric) with NaN where undefined."""

    key: tuple[Any, ...]
    models: list[Any]
    metrics: list[str]
    values: npt.NDArray[np.float64]  # users x models x metrics


def _bootstrap(
    values: npt.NDArray[np.float64],
    pairs: list[tuple[int, int]],
    n_resamples: int,
    seed: int,
    key: tuple[int, ...],
    progress: Progress,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Resampled means of every column, of every paired difference, and its d_z.

    ``values`` is users x columns with NaN where a user has no value. A resample draws
    users with replacement; a column's mean is over the drawn users that have a value
    (Σ c_i x_i / Σ c_i over them, c_i = times user i was drawn), so the sums of every
    column are one matrix product of the counts (resamples x users) with the values.
    Columns without a missing value need no count column (Σ c_i = number of users), and
    a difference of two such columns is the difference of their means. A difference's
    d_z = mean / sd (n - 1 divisor) reads its resampled Σ c_i d_i²: one column a pair.
    """
    np_ = numpy_for("compare")
    n_users, n_cols = values.shape
    has = ~np_.isnan(values)
    complete = has.all(axis=0)
    masked = [j for j in range(n_cols) if not complete[j]]
    own = [p for p in pairs if not (complete[p[0]] and complete[p[1]])]
    where = [pairs.index(p) for p in own]
    # The design, written in place (one allocation: a temporary of this size costs as
    # much as the product at a million users): the values (0 for NaN), each masked
    # column's count column, each pair's differences and counts where either value
    # may be missing, and every pair's squared differences.
    width = n_cols + len(masked) + 2 * len(own) + len(pairs)
    design = np_.empty((n_users, width))
    block = design[:, :n_cols]
    block[...] = values
    block[~has] = 0.0
    design[:, n_cols : n_cols + len(masked)] = has[:, masked]
    base = n_cols + len(masked)
    squares = design[:, base + 2 * len(own) :]
    for p, (i, j) in enumerate(pairs):
        np_.subtract(values[:, i], values[:, j], out=squares[:, p])
    both = ~np_.isnan(squares)
    if own:
        design[:, base : base + len(own)] = np_.where(both[:, where], squares[:, where], 0.0)
        design[:, base + len(own) : base + 2 * len(own)] = both[:, where]
    np_.multiply(squares, squares, out=squares)
    squares[~both] = 0.0
    sums = resampled_sums(design, n_resamples, seed, key, progress=progress.update)
    n_masked = len(masked)
    denominators = np_.full((n_resamples, n_cols), float(n_users))
    denominators[:, masked] = sums[:, n_cols : n_cols + n_masked]
    with np_.errstate(invalid="ignore", divide="ignore"):
        means = sums[:, :n_cols] / denominators
        diff_means = np_.empty((n_resamples, len(pairs)))
        counts = np_.full((n_resamples, len(pairs)), float(n_users))
        base = n_cols + n_masked
        for p, (i, j) in enumerate(pairs):
            if (i, j) in own:
                q = own.index((i, j))
                counts[:, p] = sums[:, base + len(own) + q]
                diff_means[:, p] = sums[:, base + q] / counts[:, p]
            else:
                diff_means[:, p] = means[:, i] - means[:, j]
        squares = sums[:, base + 2 * len(own) :]
        # Σ c (d - mean)² = Σ c d² - n mean²; below a few ulps of Σ c d², sd is 0.
        spread = squares - counts * diff_means * diff_means
        spread[spread <= squares * 1e-12] = np_.nan
        d_z = diff_means / np_.sqrt(spread / (counts - 1.0))
    return means, diff_means, d_z


def _interval(samples: Any, level: float) -> tuple[float, float]:
    """The percentile interval of the resamples with a value; NaN when none has."""
    return percentile_interval(samples, level) or (math.nan, math.nan)


def _nan_to_none(x: float) -> float | None:
    return None if math.isnan(x) else x


def compare(
    frame: FrameT,
    truth: object | None = None,
    *,
    baseline_model: object | None = None,
    model: str = "model",
    by: str | Sequence[str] | None = None,
    user: str | Sequence[str] = "user",
    metrics: str | Iterable[str] | None = None,
    k: int | Iterable[int] | None = None,
    level: float = 0.95,
    n_resamples: int = 10_000,
    seed: int = 0,
    correction: Correction = "holm",
    progress: bool | None = None,
    **evaluate_kwargs: Any,
) -> FrameT:
    """Compare models per metric and cutoff: means, intervals, differences and tests.

    Parameters
    ----------
    frame
        Either per-user metric values (the output of :func:`frame_metrics.evaluate`
        with ``model`` among its ``by`` columns: user key, ``model``, ``by`` columns and
        ``"<metric>@<k>"`` columns), or, when ``truth`` or any evaluate option is given,
        recommendations of several models stacked with a ``model`` column, evaluated
        here per user first. Any supported frame kind; the result is of the same kind.
    truth
        Truth for the recommendations (see :func:`frame_metrics.evaluate`).
    baseline_model
        The model every other one is compared with: a value of the ``model`` column (for
        integer models, the number or its text). Default (None): every pair of models
        is compared, the pair's first model in name order as its baseline (sheet 12;
        at least two models). (``baseline=`` is evaluate's: a baseline model's
        recommendations for serendipity, passed on with the other ``evaluate_kwargs``.)
    model
        The column naming the model (string, integer or categorical).
    by
        Segment columns (e.g. a user activity bucket): each segment is compared on its
        own, in the same call and the same correction family.
    user
        The user key (a name or a list of names).
    metrics
        Per-user input: the metric columns to compare (``"ndcg@10"``, or plain names
        with ``k``); default every column other than the keys. Recommendations input:
        passed to :func:`frame_metrics.evaluate` with the other ``evaluate_kwargs``.
    k
        Per-user input: the cutoffs of the metrics named without one (``metrics=
        "ndcg", k=[5, 10]`` compares ``ndcg@5`` and ``ndcg@10``). Recommendations
        input: passed to :func:`frame_metrics.evaluate`.
    level
        Confidence level of the intervals, a number in (0, 1) (default 0.95).
    n_resamples
        Bootstrap resamples over users, and sign assignments of the randomization test,
        an int >= 1 (default 10 000).
    seed
        Seed of the resampling, an int >= 0: the same seed gives the same intervals.
    correction
        Multiple-comparison correction of the p-values over every (segment, metric, k,
        model, baseline) comparison in this call, each test separately:
        ``"holm"`` (family-wise error, default) or ``"bh"`` (Benjamini-Hochberg, false
        discovery rate).
    progress
        Show a progress bar (tqdm when installed, else one line on stderr): ``None``
        shows it when the bootstrap has more than 2e8 draws.
    **evaluate_kwargs
        Passed to :func:`frame_metrics.evaluate` (``train=``, ``baseline=``,
        ``threshold=`` ...).

    Returns
    -------
    FrameT
        One row per segment, metric, cutoff and comparison (model against baseline; in
        all-pairs mode the first model also alone): ``by`` columns, ``metric``, ``k``
        (null for a metric without a cutoff), ``model`` (of the model column's dtype;
        categories as strings), ``n_users`` and ``mean`` (over the users with a value),
        ``ci_low``/``ci_high`` (bootstrap percentile interval of the mean), ``baseline``,
        and against it, over the users both models have a value for: ``n_paired``,
        ``diff`` (mean of model - baseline), ``diff_low``/``diff_high`` (bootstrap
        interval of the paired difference), ``d_z`` (mean / sd of the differences, n - 1
        divisor; null when sd is 0) with ``d_z_low``/``d_z_high`` (its percentile
        interval from the same resamples), ``wins``/``ties``/``losses`` (users whose
        model value is above, equal to, below the baseline's), ``p_ttest`` (paired
        t-test), ``p_wilcoxon`` (Wilcoxon signed-rank, normal approximation, zeros
        dropped), ``p_randomization`` (paired randomization test: signs of the
        differences flipped, exact when ``2**n_paired <= n_resamples``; see
        :func:`frame_metrics.numerics.randomization_p_values`) and the corrected
        ``p_ttest_adj``/``p_wilcoxon_adj``/``p_randomization_adj``. A model's row alone
        (``model == baseline``) has nulls there.

    Notes
    -----
    The bootstrap resamples users with replacement, the same draws for every model and
    metric of a segment (so a difference's interval is paired), and takes the
    percentile interval, as ``scipy.stats.bootstrap(..., method="percentile")``. A
    model's mean in a resample is over the drawn users who have a value for it.

    Per-user values are checked before anything is computed: a null value means the
    metric is undefined for that user (spec section 3), who is then left out of that
    metric's mean and pairs (``n_users`` and ``n_paired`` count who is in); NaN or an
    infinite value, a null model, segment or user, and a repeated (model, segment,
    user) row are errors naming the column, how many rows and one of them. (pandas
    with numpy dtypes marks missing values as NaN: there NaN reads as null.)

    Examples
    --------
    >>> import polars as pl
    >>> import frame_metrics as fm
    >>> per_user = pl.DataFrame({
    ...     "model": ["a"] * 4 + ["b"] * 4,
    ...     "user": [1, 2, 3, 4] * 2,
    ...     "hit_rate@1": [0.0, 1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.0],
    ... })
    >>> out = fm.compare(per_user, baseline_model="a", n_resamples=2000, seed=1)
    >>> out.select("model", "mean", "n_paired", "diff").rows()
    [('a', 0.25, None, None), ('b', 0.75, 4, 0.5)]
    >>> round(out["p_ttest"][1], 4)   # differences [1, 0, 1, 0]: t = 0.5 / (0.57735 / 2)
    0.1817
    >>> out.select("wins", "ties", "losses", "d_z").row(1)  # d_z = 0.5 / 0.57735
    (2, 2, 0, 0.8660254037844387)
    >>> out["p_randomization"][1]  # exact: 8 of the 2**4 sign flips give |sum| = 2
    0.5

    Without ``baseline_model``, every pair (the first model by name is the baseline):

    >>> per_user = pl.concat([per_user, per_user.filter(pl.col("model") == "b").with_columns(
    ...     model=pl.lit("c"), **{"hit_rate@1": 1.0})])
    >>> fm.compare(per_user, n_resamples=100).select("model", "baseline", "diff").rows()
    [('a', 'a', None), ('b', 'a', 0.5), ('c', 'a', 0.75), ('c', 'b', 0.25)]
    """
    numpy_for("compare")  # its ImportError first, before any work
    level, n_resamples, seed = _check_options(model, level, n_resamples, seed, correction, progress)
    segments_by, users = _key_roles(model, by, user)
    _check_serendipity_baseline(evaluate_kwargs)
    from frame_metrics.distributed import adapter_for

    adapter = adapter_for(frame)
    if adapter is not None:
        # Spark or Dask: per-user values computed there, compared here (they are one
        # row per user and model, and the bootstrap reads them all).
        evaluated = truth is not None or bool(evaluate_kwargs)
        if evaluated:
            from frame_metrics.api import evaluate

            frame = evaluate(
                frame,
                truth,
                metrics=metrics,
                k=k,
                by=[model, *segments_by],
                user=user,
                **evaluate_kwargs,
            )
        local = compare(
            adapter.to_polars(frame),
            metrics=None if evaluated else metrics,
            k=None if evaluated else k,
            model=model,
            by=by,
            user=user,
            baseline_model=baseline_model,
            level=level,
            n_resamples=n_resamples,
            seed=seed,
            correction=correction,
            progress=progress,
        )
        return cast("FrameT", adapter.like(frame, local))
    source = to_lazy(frame, "frame")
    if truth is not None or evaluate_kwargs:
        from frame_metrics.api import evaluate

        per_user_lazy = evaluate(
            source.lazy,
            truth,
            metrics=metrics,
            k=k,
            by=[model, *segments_by],
            user=user,
            **evaluate_kwargs,
        )
        per_user = per_user_lazy.collect()
        label = "per-user values"
        metric_cols = [c for c in per_user.columns if c not in {model, *segments_by, *users}]
    else:
        per_user = source.lazy.collect()
        label = "frame"
        missing = [c for c in [model, *segments_by, *users] if c not in per_user.columns]
        if missing and "n_users" in per_user.columns and set(users) <= set(missing):
            # Means per model (evaluate's aggregate=True) have no user to pair or resample.
            raise InvalidValueError(
                "frame: expected per-user values (one row per user, with the user column "
                f"{users[0]!r}), found means (n_users, one row per group): evaluate without ",
                Keyword("aggregate", True),
                " (per-user rows are its default), or pass the recommendations and ",
                Keyword("truth"),
                " to evaluate here",
                frame="frame",
                columns=users,
            )
        if missing:
            raise MissingColumnsError("frame", missing, per_user.columns)
        keys = {model, *segments_by, *users}
        if metrics is None:
            metric_cols = [c for c in per_user.columns if c not in keys]
        else:
            from frame_metrics.spec import resolve_requests

            wanted = [r.column for r in resolve_requests(metrics, k, [])]
            absent = [c for c in wanted if c not in per_user.columns]
            if absent:
                raise MissingColumnsError("frame", absent, per_user.columns)
            metric_cols = wanted
        bad = [c for c in metric_cols if not per_user.schema[c].is_numeric()]
        if bad:
            raise InvalidValueError(
                f"frame: expected numeric metric columns, found {', '.join(repr(c) for c in bad)} "
                f"of dtype {', '.join(str(per_user.schema[c]) for c in bad)}",
                frame="frame",
                columns=bad,
            )
    if not metric_cols:
        raise InvalidOptionError(
            "expected at least one metric column to compare, got none", option="metrics"
        )
    run_checks(_per_user_checks(per_user, label, model, segments_by, users, metric_cols))
    per_user = _model_values(per_user, model)
    schema = _schema(per_user, model, segments_by)
    models = per_user[model].unique().sort().to_list()
    if not models:
        return cast("FrameT", source.give_back(pl.DataFrame(schema=schema)))
    if baseline_model is None:
        if len(models) < 2:
            raise InvalidValueError(
                f"{label}: expected at least two models to compare every pair of, found one, "
                f"{models[0]!r}, in column {model!r}",
                frame="frame",
                columns=[model],
            )
        # Every pair; its baseline is the pair's first model in name order (sheet 12).
        compared = [(j, i) for i in range(len(models)) for j in range(i + 1, len(models))]
    else:
        b = models.index(_find_baseline(models, baseline_model))
        compared = [(m, b) for m in range(len(models)) if m != b]

    segments = _segments(per_user, model, segments_by, users, metric_cols, models)
    total_draws = sum(s.values.shape[0] for s in segments) * n_resamples
    bar = Progress(
        2 * n_resamples * len(segments),
        "compare: bootstrap",
        enabled=shows_progress(progress, total_draws),
        unit="resample",
    )
    rows: list[dict[str, Any]] = []
    try:
        for i, segment in enumerate(segments):
            # The i-th segment's stream: SeedSequence(seed).spawn(n)[i], whatever n.
            rows += _compare_segment(
                segment, compared, level, n_resamples, seed, (i,), bar, segments_by
            )
    finally:
        bar.close()

    adjust: Callable[[Sequence[float]], list[float]] = (
        holm if correction == "holm" else benjamini_hochberg
    )
    tested = [i for i, r in enumerate(rows) if r["model"] != r["baseline"]]
    for test in _TESTS:
        raw = [math.nan if rows[i][test] is None else rows[i][test] for i in tested]
        for i, p in zip(tested, adjust(raw), strict=True):
            rows[i][f"{test}_adj"] = _nan_to_none(p)
    result = pl.DataFrame(rows, schema=schema)
    return cast("FrameT", source.give_back(result))


def _schema(per_user: pl.DataFrame, model: str, segments_by: list[str]) -> dict[str, Any]:
    named = {"model": per_user.schema[model], "baseline": per_user.schema[model]}
    return {
        **{b: per_user.schema[b] for b in segments_by},
        **{c: named.get(c, dtype) for c, dtype in _SCHEMA.items()},
    }


def _segments(
    per_user: pl.DataFrame,
    model: str,
    segments_by: list[str],
    users: list[str],
    metric_cols: list[str],
    models: list[str],
) -> list[_Segment]:
    np_ = numpy_for("compare")
    frames = (
        per_user.partition_by(segments_by, as_dict=True, maintain_order=True)
        if segments_by
        else {(): per_user}
    )
    out = []
    for key, part in sorted(frames.items(), key=lambda kv: tuple(str(x) for x in kv[0])):
        # A user's row in the cube: its place among the segment's users in sorted order
        # (keys are checked: no null, no repeated (model, user)).
        user_key = pl.col(users[0]) if len(users) == 1 else pl.struct(users)
        coded = part.select(
            (user_key.rank("dense") - 1).alias("_fm_u"),
            pl.col(metric_cols).cast(pl.Float64).fill_null(float("nan")),
            *((pl.col(model) == m).alias(f"_fm_m{mi}") for mi, m in enumerate(models)),
        )
        rows = coded["_fm_u"].to_numpy()
        values = coded.select(metric_cols).to_numpy()
        cube = np_.full(
            (int(rows.max()) + 1 if rows.size else 0, len(models), len(metric_cols)), np_.nan
        )
        for mi in range(len(models)):
            mask = coded[f"_fm_m{mi}"].to_numpy()
            cube[rows[mask], mi, :] = values[mask]
        out.append(_Segment(tuple(key), models, metric_cols, cube))
    return out


def _compare_segment(
    segment: _Segment,
    compared: list[tuple[int, int]],
    level: float,
    n_resamples: int,
    seed: int,
    key: tuple[int, ...],
    bar: Progress,
    segments_by: list[str],
) -> list[dict[str, Any]]:
    """The rows of one segment, metric by metric.

    A model that is nobody's ``model`` in ``compared`` (the baseline, or the first
    model of all pairs) has a row alone (``model == baseline``); each (model, baseline)
    pair of ``compared`` a row. Ordered by baseline, then model: in baseline mode the
    models' order.
    """
    np_ = numpy_for("compare")
    n_users, n_models, n_metrics = segment.values.shape
    flat = segment.values.reshape(n_users, n_models * n_metrics)

    def col(mi: int, ci: int) -> int:
        return int(mi * n_metrics + ci)

    pairs = [(col(mi, ci), col(b, ci)) for mi, b in compared for ci in range(n_metrics)]
    means, diff_means, d_zs = _bootstrap(flat, pairs, n_resamples, seed, key, bar)
    # The sign flips: a stream of their own, beside the bootstrap's (key).
    p_random = randomization_p_values(
        flat[:, [i for i, _ in pairs]] - flat[:, [j for _, j in pairs]],
        n_resamples,
        seed,
        (*key, 1),
        progress=bar.update,
    )
    alone = [(b, b) for b in sorted({b for _, b in compared} - {m for m, _ in compared})]
    if not compared:
        alone = [(m, m) for m in range(n_models)]
    rows = []
    pair_at = {p: j for j, p in enumerate(pairs)}
    for ci, metric_col in enumerate(segment.metrics):
        name, k = split_column(metric_col)
        for mi, b in sorted([*alone, *compared], key=lambda p: (p[1], p[0])):
            x = flat[:, col(mi, ci)]
            defined = x[~np_.isnan(x)]
            low, high = _interval(means[:, col(mi, ci)], level)
            row: dict[str, Any] = {
                **dict(zip(segments_by, segment.key, strict=True)),
                "metric": name,
                "k": k,
                "model": segment.models[mi],
                "n_users": int(defined.size),
                "mean": float(defined.mean()) if defined.size else None,
                "ci_low": _nan_to_none(low),
                "ci_high": _nan_to_none(high),
                "baseline": segment.models[b],
            }
            if mi != b:
                d = x - flat[:, col(b, ci)]
                d = d[~np_.isnan(d)]
                j = pair_at[(col(mi, ci), col(b, ci))]
                dl, dh = _interval(diff_means[:, j], level)
                zl, zh = _interval(d_zs[:, j], level)
                row.update(
                    n_paired=int(d.size),
                    diff=float(d.mean()) if d.size else None,
                    diff_low=_nan_to_none(dl),
                    diff_high=_nan_to_none(dh),
                    d_z=_d_z(d),
                    d_z_low=_nan_to_none(zl),
                    d_z_high=_nan_to_none(zh),
                    wins=int((d > 0).sum()),
                    ties=int((d == 0).sum()),
                    losses=int((d < 0).sum()),
                    p_ttest=_nan_to_none(paired_t_test(d)[1]),
                    p_wilcoxon=_nan_to_none(wilcoxon_signed_rank(d)[1]),
                    p_randomization=_nan_to_none(float(p_random[j])),
                )
            rows.append(row)
    return rows


def _d_z(d: npt.NDArray[np.float64]) -> float | None:
    """mean(d) / sd(d), n - 1 divisor: Cohen's d_z of paired differences (None: sd 0)."""
    if d.size < 2:
        return None
    sd = float(d.std(ddof=1))
    return float(d.mean()) / sd if sd > 0 else None
