"""The numerics the workflows share: option checks, exact sums and the seeded bootstrap.

One copy of each, in the lowest layer above :mod:`frame_metrics.errors`, for
:func:`~frame_metrics.compare`, :func:`~frame_metrics.gaps`,
:func:`~frame_metrics.policy_value`, the evaluation protocol's splits and the engine's means:

- **Option checks.** :func:`check_level`, :func:`check_n_resamples`, :func:`check_seed`
  and :func:`check_progress` raise :class:`~frame_metrics.errors.InvalidOptionError`
  ("expected X, got Y") before any data is read, and give the value back in its plain
  Python form (numpy scalars as ``int`` or ``float``).
- **Exact sums.** A float sum depends on the order of its terms: a left-to-right sum
  over users in key order is reproducible on one machine, but a run split into buckets
  or partitions adds the same values in another order and differs in the last digits
  (2.6e-11 relative for a precision mean over 10M users). :func:`exact_partials` splits
  every value exactly into an integer mantissa and a binary exponent bin,
  ``v = m * 2**(bin - 60)``; the mantissas are summed per bin as 128-bit integers, which
  is exact and does not depend on the order; and :func:`exact_totals` combines the bins
  with Python's integers and rounds once. The result is the correctly rounded sum (or
  mean), equal on one machine, in buckets, on Spark and on Dask. Partial sums (per
  bucket, per partition) are rows of (group columns, name, bin, mantissa sum split into
  two Int64 halves for Arrow, count); they add up by plain integer sums
  (:func:`sum_partials`). Within one user, a few terms are summed in a fixed order
  instead (:func:`ordered_sum`): reproducible, and cheaper than exact for a list's terms.
- **The seeded bootstrap.** :func:`resampled_sums` resamples users with replacement,
  ``n_resamples`` times, and gives each resample's sums of every column over its drawn
  users: the draw counts of a chunk of resamples (:func:`draw_counts`) times the users'
  values, one matrix product, so that a million users take no Python loop over users
  or resamples and memory stays bounded by the chunk. The streams are numpy's
  generators on ``SeedSequence(seed, spawn_key=key)`` (:func:`generator`): a key names
  one stream of a call (a segment, a group, a block), whatever the others.
  :func:`percentile_interval` reads the interval off the resamples.

numpy is imported where the bootstrap runs, not here: the package runs without it until
a bootstrap is asked for (:func:`numpy_for` says what to install).
"""

from __future__ import annotations

import numbers
import os
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import TYPE_CHECKING, Any, cast

import polars as pl

from frame_metrics.errors import InvalidOptionError, shown

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "CHUNK_CELLS",
    "MAX_RESAMPLES",
    "NAME",
    "PROGRESS_DRAWS",
    "check_level",
    "check_n_resamples",
    "check_progress",
    "check_seed",
    "check_share",
    "draw_counts",
    "exact_partials",
    "exact_totals",
    "generator",
    "is_int",
    "is_real",
    "numpy_for",
    "ordered_sum",
    "percentile_interval",
    "percentiles",
    "resampled_sums",
    "shows_progress",
    "sum_partials",
    "times_two_to",
]


# -- option checks ------------------------------------------------------------------------

#: The most bootstrap resamples drawn: the resampled sums are an array of n_resamples
#: rows per column.
MAX_RESAMPLES = 10_000_000


def is_int(value: object) -> bool:
    """An integer, Python's or numpy's (not a bool).

    Examples
    --------
    >>> import numpy as np
    >>> is_int(3), is_int(np.int64(3)), is_int(True), is_int(3.0)
    (True, True, False, False)
    """
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_real(value: object) -> bool:
    """A real number, Python's or numpy's (not a bool).

    Examples
    --------
    >>> import numpy as np
    >>> is_real(0.5), is_real(np.float32(0.5)), is_real(2), is_real(False), is_real("0.5")
    (True, True, True, False, False)
    """
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _refused(option: str, expected: str, value: object) -> InvalidOptionError:
    return InvalidOptionError(f"expected {expected}, got {shown(value)}", option=option)


def check_share(value: object, option: str) -> float:
    """A number strictly between 0 and 1 (a confidence level, a share of users), as a float.

    Examples
    --------
    >>> check_share(0.05, "active_share")
    0.05
    >>> check_share(1, "active_share")
    Traceback (most recent call last):
    ...
    frame_metrics.errors.InvalidOptionError: active_share: expected a number in (0, 1), got 1
    """
    if not (is_real(value) and 0 < cast("float", value) < 1):
        raise _refused(option, "a number in (0, 1)", value)
    return float(cast("float", value))


def check_level(value: object) -> float:
    """The confidence level of a bootstrap interval: a number in (0, 1), as a float.

    Examples
    --------
    >>> import numpy as np
    >>> check_level(np.float64(0.9))
    0.9
    >>> check_level(95)
    Traceback (most recent call last):
    ...
    frame_metrics.errors.InvalidOptionError: level: expected a number in (0, 1), got 95
    """
    return check_share(value, "level")


def check_n_resamples(value: object, *, least: int = 1) -> int:
    """The number of bootstrap resamples: an int in [``least``, :data:`MAX_RESAMPLES`].

    ``least`` is the caller's: compare and gaps need at least one resample (an interval
    is what they are asked for), policy_value takes 0 for no interval (``least=0``).

    Examples
    --------
    >>> check_n_resamples(2000), check_n_resamples(0, least=0)
    (2000, 0)
    >>> check_n_resamples(0)
    Traceback (most recent call last):
    ...
    frame_metrics.errors.InvalidOptionError: n_resamples: expected an int in [1, 10_000_000], got 0
    """
    if not (is_int(value) and least <= cast("int", value) <= MAX_RESAMPLES):
        raise _refused("n_resamples", f"an int in [{least}, {MAX_RESAMPLES:_}]", value)
    return int(cast("int", value))


def check_seed(value: object, *, negative: bool = False) -> int:
    """A seed: an int >= 0, or with ``negative`` any integer.

    numpy's ``SeedSequence`` (the bootstrap's streams) takes no negative number; the
    protocol's splits hash their seed (splitmix64, modulo 2^64), which takes any
    (``negative=True``).

    Examples
    --------
    >>> check_seed(3), check_seed(-1, negative=True)
    (3, -1)
    >>> check_seed(-1)
    Traceback (most recent call last):
    ...
    frame_metrics.errors.InvalidOptionError: seed: expected an int >= 0, got -1
    >>> check_seed(1.0, negative=True)
    Traceback (most recent call last):
    ...
    frame_metrics.errors.InvalidOptionError: seed: expected an integer, got 1.0
    """
    if negative:
        if not is_int(value):
            raise _refused("seed", "an integer", value)
    elif not (is_int(value) and cast("int", value) >= 0):
        raise _refused("seed", "an int >= 0", value)
    return int(cast("int", value))


#: Above this many draws (resamples x users), a bootstrap shows progress unless told not to.
PROGRESS_DRAWS = 200_000_000


def check_progress(value: object) -> bool | None:
    """Whether to show a bootstrap's progress: True, False or None (by its size).

    Examples
    --------
    >>> check_progress(None), check_progress(True)
    (None, True)
    >>> check_progress(1)
    Traceback (most recent call last):
    ...
    frame_metrics.errors.InvalidOptionError: progress: expected True, False or None, got 1
    """
    if not (value is None or isinstance(value, bool)):
        raise _refused("progress", "True, False or None", value)
    return value


def shows_progress(progress: bool | None, draws: int) -> bool:
    """Whether a bootstrap of ``draws`` draws shows progress: as told, or above :data:`PROGRESS_DRAWS`.

    Examples
    --------
    >>> shows_progress(None, 10_000 * 1_000), shows_progress(None, 10_000 * 100_000)
    (False, True)
    >>> shows_progress(True, 1)
    True
    """
    return draws > PROGRESS_DRAWS if progress is None else progress


# -- exact sums ---------------------------------------------------------------------------

#: The column of the partials naming the summed column.
NAME = "_fm_sum_of"
_BIN = "_fm_bin"
_HI = "_fm_hi"
_LO = "_fm_lo"
_COUNT = "_fm_count"
_NONFINITE = "_fm_nonfinite"
_VALUE = "_fm_v"
#: Bits of a mantissa above the value's binary exponent (52 would do; 60 leaves room for
#: the log2 estimate of the exponent to be off by one either way).
_SHIFT = 60
#: The low part of a mantissa sum: a bin's sum stays below 2^102 for up to 2^40 rows,
#: so its high part (below 2^62) and low parts of up to 2^23 partitions fit in Int64.
_LOW_BITS = 40


def times_two_to(value: pl.Expr, s: int | pl.Expr) -> pl.Expr:
    """``value · 2^s``, exact wherever the result is a normal float, for any float's s.

    2^s itself is no float past 2^1023 (a subnormal's s passes 1074): the scaling is
    then two power-of-two factors, each finite, whose product is exact. ``s`` is a
    Python int (one exponent for a whole column: one factor while 2^s is a normal
    float) or an integer expression (one exponent per row: always two factors).

    Examples
    --------
    >>> pl.select(times_two_to(pl.lit(5e-324), 1169)).item() == 2.0**95
    True
    >>> pl.select(times_two_to(pl.lit(3.0), pl.lit(-2))).item()
    0.75
    """
    if isinstance(s, int):
        if abs(s) <= 1000:
            return value * 2.0**s
        half = s // 2
        return value * 2.0**half * 2.0 ** (s - half)
    halves = s // 2
    return value * pl.lit(2.0).pow(halves) * pl.lit(2.0).pow(s - halves)


def exact_partials(frame: pl.LazyFrame, by: Sequence[str], columns: Sequence[str]) -> pl.LazyFrame:
    """Per (``by``, column, exponent bin): the exact sum of the column's non-null values.

    Examples
    --------
    >>> frame = pl.LazyFrame({"g": ["a", "a", "b"], "x": [0.1, 0.2, None]})
    >>> totals = exact_totals(exact_partials(frame, ["g"], ["x"]), ["g"], ["x"])
    >>> totals.sort("g").collect().rows()
    [('a', 0.30000000000000004, 2, 0.15000000000000002), ('b', None, 0, None)]
    """
    by = list(by)
    # The long form, one row per value, names a column by its position (UInt16) rather
    # than by its name: the name of every row would be a string (of 30M rows for 30
    # metric columns over 1M users); the per-bin rows get the names back at the end.
    index = pl.UInt16 if len(columns) < 2**16 else pl.UInt32
    parts = [
        frame.select(*by, pl.lit(i, index).alias(NAME), pl.col(c).cast(pl.Float64).alias(_VALUE))
        for i, c in enumerate(columns)
    ]
    long = (
        pl.concat(parts)
        if parts
        else frame.select(*by).head(0).with_columns(pl.lit(0, index).alias(NAME), _VALUE=0.0)
    )
    v = pl.col(_VALUE)
    finite = v.is_finite().fill_null(False)
    # NaN and ±inf have no mantissa: they are added as floats on their own (_NONFINITE;
    # any order gives the same NaN or inf), so the query never fails on them and a check
    # collected beside it can report them first (validate=False gets NaN or inf back).
    exponent = pl.when(finite & (v != 0.0)).then(v.abs().log(2).floor()).otherwise(0.0)
    scaled = times_two_to(v, _SHIFT - pl.col(_BIN))
    per_bin = (
        long.with_columns(exponent.cast(pl.Int64, strict=False).alias(_BIN))
        .with_columns(
            pl.when(finite).then(scaled).cast(pl.Int128, strict=False).alias("_fm_m"),
            pl.when(finite).then(0.0).otherwise(v).alias(_NONFINITE),
        )
        .group_by([*by, NAME, _BIN])
        .agg(
            pl.col("_fm_m").sum(),
            v.count().cast(pl.Int64).alias(_COUNT),
            pl.col(_NONFINITE).sum(),  # NaN or ±inf when any was, else 0.0
        )
    )
    m = pl.col("_fm_m")
    high = m // (2**_LOW_BITS)  # floor division: the low part is in [0, 2^40)
    names = pl.Series(list(columns), dtype=pl.String)
    return per_bin.select(
        *by,
        pl.lit(names).gather(pl.col(NAME)).alias(NAME),
        _BIN,
        high.cast(pl.Int64).alias(_HI),
        (m - high * (2**_LOW_BITS)).cast(pl.Int64).alias(_LO),
        _COUNT,
        _NONFINITE,
    )


def sum_partials(partials: pl.LazyFrame, by: Sequence[str]) -> pl.LazyFrame:
    """Partials of several buckets or partitions added up (still partials).

    Examples
    --------
    >>> one = exact_partials(pl.LazyFrame({"x": [1e16, 1.0]}), [], ["x"])
    >>> two = exact_partials(pl.LazyFrame({"x": [-1e16]}), [], ["x"])
    >>> both = sum_partials(pl.concat([one, two]), [])
    >>> exact_totals(both, [], ["x"]).collect().rows()  # 1e16 + 1.0 - 1e16, exactly
    [(1.0, 3, 0.3333333333333333)]
    """
    return partials.group_by([*by, NAME, _BIN]).agg(
        pl.col(_HI).sum(), pl.col(_LO).sum(), pl.col(_COUNT).sum(), pl.col(_NONFINITE).sum()
    )


def exact_totals(partials: pl.LazyFrame, by: Sequence[str], columns: Sequence[str]) -> pl.LazyFrame:
    """Per ``by`` group and column: ``<c>`` the sum, ``<c>.n`` the count, ``<c>.mean``.

    The sum and the mean are correctly rounded (null when the count is 0). The last step
    runs in Python on one row per group, bin and column.

    Examples
    --------
    >>> frame = pl.LazyFrame({"x": [1e16, 1.0, -1e16, 1.0]})
    >>> exact_totals(exact_partials(frame, [], ["x"]), [], ["x"]).collect().rows()
    [(2.0, 4, 0.5)]

    (Left to right in floats, 1e16 + 1.0 is 1e16 again: the float sum is 1.0.)
    """
    by = list(by)
    summed = sum_partials(partials, by)
    schema = {
        **{b: summed.collect_schema()[b] for b in by},
        **{f"{c}{suffix}": dtype for c in columns for suffix, dtype in _OUT},
    }

    def combine(frame: pl.DataFrame) -> pl.DataFrame:
        totals: dict[tuple[object, ...], dict[str, object]] = {}
        for row in frame.iter_rows(named=True):
            group = tuple(row[b] for b in by)
            out = totals.setdefault(group, {})
            name = row[NAME]
            mantissa = int(row[_HI]) * 2**_LOW_BITS + int(row[_LO])
            exact = Fraction(mantissa) * Fraction(2) ** (int(row[_BIN]) - _SHIFT)
            out[name] = out.get(name, Fraction(0)) + exact  # type: ignore[operator]
            if row[_NONFINITE]:  # NaN or ±inf among the values: the sum is that
                out[f"{name}.nonfinite"] = float(row[_NONFINITE]) + float(
                    out.get(f"{name}.nonfinite", 0.0)  # type: ignore[arg-type]
                )
            out[f"{name}.n"] = int(out.get(f"{name}.n", 0)) + int(row[_COUNT])  # type: ignore[call-overload]
        rows = []
        for group, out in totals.items():
            row_out: dict[str, object] = dict(zip(by, group, strict=True))
            for c in columns:
                n = int(out.get(f"{c}.n", 0))  # type: ignore[call-overload]
                total = out.get(c, Fraction(0))
                assert isinstance(total, Fraction)
                odd = out.get(f"{c}.nonfinite")
                row_out[c] = (float(total) if odd is None else odd) if n else None
                row_out[f"{c}.n"] = n
                row_out[f"{c}.mean"] = (float(total / n) if odd is None else odd) if n else None
            rows.append(row_out)
        return pl.DataFrame(rows, schema=schema, orient="row")

    return summed.map_batches(combine, schema=pl.Schema(schema), streamable=False)


_OUT = (("", pl.Float64()), (".n", pl.Int64()), (".mean", pl.Float64()))


# -- the seeded bootstrap -----------------------------------------------------------------

#: Draw-count cells (resamples x users) of one chunk of resamples, by default.
CHUNK_CELLS = 5_000_000
#: Up to this many users, the draws of a chunk's resamples are counted by one bincount
#: over all of them; above, one bincount per resample, into the chunk's counts (its
#: counts fit in cache; measured on 2 cores: as fast at 600 users, a third faster at
#: 10 000 and more, where one bincount over millions of cells misses the cache).
ONE_BINCOUNT_USERS = 512


def numpy_for(caller: str) -> Any:
    """The numpy module, or an ImportError saying that ``caller``'s bootstrap needs it.

    Examples
    --------
    >>> numpy_for("compare").__name__
    'numpy'
    """
    try:
        import numpy
    except ImportError:  # pragma: no cover - numpy is everywhere the tests run
        raise ImportError(
            f"frame_metrics.{caller} needs numpy for the bootstrap: pip install 'frame_metrics[stats]'"
        ) from None
    return numpy


def generator(seed: int, key: tuple[int, ...] = ()) -> np.random.Generator:
    """The default numpy generator on ``SeedSequence(seed, spawn_key=key)``.

    ``SeedSequence(seed).spawn(n)[i]`` is ``SeedSequence(seed, spawn_key=(i,))``: the
    stream of a key is the same whatever other streams a call draws.

    Examples
    --------
    >>> import numpy as np
    >>> spawned = np.random.default_rng(np.random.SeedSequence(7).spawn(3)[2])
    >>> int(generator(7, (2,)).integers(1000)) == int(spawned.integers(1000))
    True
    """
    import numpy

    return numpy.random.default_rng(numpy.random.SeedSequence(seed, spawn_key=key))


def draw_counts(rng: np.random.Generator, size: int, n_users: int) -> npt.NDArray[np.float64]:
    """How often each user is drawn in each of ``size`` bootstrap resamples, as floats.

    Each resample draws ``n_users`` users with replacement, as ``rng.integers(0,
    n_users, size=(size, n_users), dtype=int32)``: int32 is faster to draw and to count
    than int64 (n_users < 2**31), and draws the same users (numpy draws a range below
    2^32 from 32-bit words whatever the dtype). The result is resamples x users, whole
    numbers as float64, so a resample's sums over its users are one row of a matrix
    product with float values.

    Examples
    --------
    >>> import numpy as np
    >>> counts = draw_counts(np.random.default_rng(0), 3, 5)
    >>> counts.shape, counts.sum(axis=1).tolist()
    ((3, 5), [5.0, 5.0, 5.0])
    >>> picks = np.random.default_rng(0).integers(0, 5, size=(3, 5), dtype="int32")
    >>> counts[0].tolist() == [float((picks[0] == i).sum()) for i in range(5)]
    True
    """
    import numpy

    drawn = rng.integers(0, n_users, size=(size, n_users), dtype=numpy.int32)
    if n_users <= ONE_BINCOUNT_USERS:
        # Resample r's draws offset by r * n_users: one bincount counts them all.
        drawn += numpy.arange(size, dtype=numpy.int32)[:, None] * n_users
        flat = numpy.bincount(drawn.ravel(), minlength=size * n_users)
        return cast("npt.NDArray[np.float64]", flat.reshape(size, n_users).astype(numpy.float64))
    counts = numpy.empty((size, n_users))
    for r, row in enumerate(drawn):
        counts[r] = numpy.bincount(row, minlength=n_users)
    return cast("npt.NDArray[np.float64]", counts)


def resampled_sums(
    values: npt.NDArray[np.float64],
    n_resamples: int,
    seed: int,
    key: tuple[int, ...],
    *,
    cells: int = CHUNK_CELLS,
    per_chunk: bool = False,
    progress: Callable[[int], object] | None = None,
) -> npt.NDArray[np.float64]:
    """Each resample's sums of the columns of ``values`` (users x columns) over its users.

    A resample draws as many users as there are, with replacement: its sums are
    ``Σ_i c_i · values[i]``, c_i the times user i was drawn (:func:`draw_counts`), so a
    chunk of resamples is one matrix product of its counts with the values.
    The resamples come in chunks of ``max(1, min(n_resamples, cells // n))`` (n users;
    the last one shorter), which bounds the memory.

    The streams (:func:`generator`): by default one, ``generator(seed, key)``, drawn
    chunk after chunk, so that the chunks do not change the draws; with ``per_chunk``,
    chunk b draws from its own, ``generator(seed, (*key, b))``, and the chunks run on
    several threads (numpy releases the GIL while drawing, counting and multiplying),
    with the same numbers. ``progress`` is called with each chunk's number of resamples.

    Examples
    --------
    >>> import numpy as np
    >>> values = np.array([[1.0, 10.0], [2.0, 20.0], [4.0, 40.0]])
    >>> sums = resampled_sums(values, 4, seed=0, key=())
    >>> picks = generator(0).integers(0, 3, size=(4, 3), dtype="int32")  # users drawn
    >>> bool((sums[:, 0] == values[picks, 0].sum(axis=1)).all()), sums.shape
    (True, (4, 2))

    Chunks of one stream draw what one chunk draws:

    >>> bool((resampled_sums(values, 4, seed=0, key=(), cells=3) == sums).all())
    True
    """
    import numpy

    n_users = values.shape[0]
    out = numpy.empty((n_resamples, values.shape[1]))
    chunk = max(1, min(n_resamples, cells // max(n_users, 1)))
    starts = range(0, n_resamples, chunk)

    def fill(start: int, rng: np.random.Generator) -> None:
        size = min(chunk, n_resamples - start)
        out[start : start + size] = draw_counts(rng, size, n_users) @ values
        if progress is not None:
            progress(size)

    def block(b: int) -> None:
        fill(starts[b], generator(seed, (*key, b)))

    if not per_chunk:
        rng = generator(seed, key)
        for start in starts:
            fill(start, rng)
    elif len(starts) <= 1:
        for b in range(len(starts)):
            block(b)
    else:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(min(len(starts), os.cpu_count() or 1)) as pool:
            list(pool.map(block, range(len(starts))))
    return cast("npt.NDArray[np.float64]", out)


#: A resampled sum within this many ulps of Σ|d| (the rounding a sum of the d can carry)
#: of the observed one is a tie: a sum computed in another order still counts.
#: ``scipy.stats.permutation_test`` takes 100 ulps of the observed value, which misreads
#: a sum that is 0 but for its rounding (its p-value is then below 1).
TIE_ULPS = 100


def randomization_p_values(
    diffs: npt.NDArray[np.float64],
    n_resamples: int,
    seed: int,
    key: tuple[int, ...],
    *,
    cells: int = CHUNK_CELLS,
    progress: Callable[[int], object] | None = None,
) -> npt.NDArray[np.float64]:
    """The paired randomization test's two-sided p-value of each column (sheet 12).

    ``diffs`` is users x pairs: each user's difference of the two models' values, NaN
    where the user is not in the pair. Under the null a difference's sign is a coin
    flip: the statistic is the sum of the differences (the mean, times n), and the
    p-value the share of sign assignments whose sum is at least as far from 0,
    ``|T*| >= |t|`` (within :data:`TIE_ULPS` ulps of Σ|d|). With ``2**n <= n_resamples``
    (n users in the pair) every assignment is enumerated: the exact p-value,
    ``scipy.stats.permutation_test``'s. Else ``n_resamples`` random assignments,
    the same for every column (drawn from ``generator(seed, key)``, in chunks of
    ``cells // users`` resamples), and ``(count + 1) / (n_resamples + 1)``: scipy's
    randomized p-value, and ranx's ``"fisher"`` test but for its missing ``+ 1``.
    NaN: no user in the pair.

    Examples
    --------
    Three users, differences 1, 2, 3: of the 8 sign assignments, only +++ and --- give
    a sum as far from 0 as 6 (exact: 2 ** 3 <= 100).

    >>> import numpy as np
    >>> randomization_p_values(np.array([[1.0], [2.0], [3.0]]), 100, 0, ()).tolist()
    [0.25]
    """
    import numpy

    n_users, n_pairs = diffs.shape
    paired = ~numpy.isnan(diffs)
    sizes = paired.sum(axis=0)
    zeroed = numpy.where(paired, diffs, 0.0)
    observed = numpy.abs(zeroed.sum(axis=0))
    scale = numpy.abs(zeroed).sum(axis=0)
    bar = observed - scale * (TIE_ULPS * numpy.finfo(numpy.float64).eps)
    out = numpy.full(n_pairs, numpy.nan)
    exact = [j for j in range(n_pairs) if sizes[j] > 0 and 2 ** int(sizes[j]) <= n_resamples]
    for j in exact:
        d = diffs[paired[:, j], j]
        count = 0
        for first in range(0, 2**d.size, 1 << 16):
            # Every assignment: row r's signs are the bits of r.
            rows = numpy.arange(first, min(first + (1 << 16), 2**d.size))
            bits = (rows[:, None] >> numpy.arange(d.size)) & 1
            count += int((numpy.abs((1.0 - 2.0 * bits) @ d) >= bar[j]).sum())
        out[j] = count / 2**d.size
    drawn = [j for j in range(n_pairs) if 2 ** min(int(sizes[j]), 64) > n_resamples]
    if not drawn:
        if progress is not None:
            progress(n_resamples)
        return cast("npt.NDArray[np.float64]", out)
    values = numpy.ascontiguousarray(zeroed[:, drawn])
    counts = numpy.zeros(len(drawn))
    rng = generator(seed, key)
    chunk = max(1, min(n_resamples, cells // max(n_users, 1)))
    plus_minus = numpy.array([1.0, -1.0])
    for start in range(0, n_resamples, chunk):
        size = min(chunk, n_resamples - start)
        # A random bit per user and resample: +1 for 0, -1 for 1 (1 - 2 bit).
        raw = rng.integers(0, 256, size=(size, (n_users + 7) // 8), dtype=numpy.uint8)
        signs = plus_minus[numpy.unpackbits(raw, axis=1, count=n_users)]
        counts += (numpy.abs(signs @ values) >= bar[drawn]).sum(axis=0)
        if progress is not None:
            progress(size)
    out[drawn] = (counts + 1.0) / (n_resamples + 1.0)
    return cast("npt.NDArray[np.float64]", out)


def percentiles(samples: npt.NDArray[np.float64], level: float) -> tuple[float, float]:
    """The ``(1 - level) / 2`` and ``(1 + level) / 2`` quantiles of ``samples``.

    numpy's linear interpolation: a percentile bootstrap interval at ``level``, as
    ``scipy.stats.bootstrap(..., method="percentile")`` takes it.

    Examples
    --------
    >>> import numpy as np
    >>> percentiles(np.array([0.0, 10.0, 20.0, 30.0, 40.0]), 0.5)  # positions 0.25·4, 0.75·4
    (10.0, 30.0)
    >>> percentiles(np.array([0.0, 10.0]), 0.5)  # between the two: 0.25 and 0.75 of the way
    (2.5, 7.5)
    """
    import numpy

    low, high = numpy.quantile(samples, [(1 - level) / 2, (1 + level) / 2])
    return float(low), float(high)


def percentile_interval(
    samples: npt.NDArray[np.float64], level: float
) -> tuple[float, float] | None:
    """:func:`percentiles` of the resamples that have a value; None when none has.

    A resample has no value (NaN) where its estimate is undefined: no drawn user with a
    value of the metric, or a ratio over a zero sum.

    Examples
    --------
    >>> import numpy as np
    >>> percentile_interval(np.array([np.nan, 0.0, 10.0, np.nan]), 0.5)  # of 0 and 10
    (2.5, 7.5)
    >>> percentile_interval(np.array([np.nan]), 0.9) is None
    True
    """
    import numpy

    defined = samples[~numpy.isnan(samples)]
    if defined.size == 0:
        return None
    return percentiles(defined, level)


def ordered_sum(values: pl.Expr) -> pl.Expr:
    """A left-to-right sum of ``values`` in the order given (sort them first).

    The sum of a few values per user (a list's terms), where the exact sums here would
    cost more than they save: reproducible because the order is fixed, not exact.

    Not ``sum()``: polars drops a ``sort()`` right before a ``sum()`` as pointless,
    and then the float sum depends on the order the group's rows arrived in.
    ``cum_sum`` is sequential by definition, so its last value is reproducible.
    """
    return values.cum_sum().last().fill_null(0.0)
