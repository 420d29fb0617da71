"""``frame_metrics.numerics``: option checks, exact sums and the seeded bootstrap.

Each check's accepted values and its refusal are written out; compare, gaps,
policy_value and the splits test the same messages through their own calls. Exact sums
are held to Python's exact rationals (``fractions.Fraction``) and ``math.fsum``; the
bootstrap to its documented streams, drawn one resample at a time.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import polars as pl
import pytest

from frame_metrics import numerics
from frame_metrics.errors import InvalidOptionError


def _refusal(call: object, *args: object, **kwargs: object) -> str:
    assert callable(call)
    with pytest.raises(InvalidOptionError) as raised:
        call(*args, **kwargs)
    return str(raised.value)


def test_number_kinds() -> None:
    assert [numerics.is_int(v) for v in (0, np.int32(-4), 10**400, True, 2.0, "1")] == [
        True,
        True,
        True,
        False,
        False,
        False,
    ]
    assert [numerics.is_real(v) for v in (0.5, np.float32(0.5), 3, Fraction(1, 3), False)] == [
        True,
        True,
        True,
        True,
        False,
    ]


def test_level_is_a_float_strictly_between_0_and_1() -> None:
    assert numerics.check_level(0.95) == 0.95
    got = numerics.check_level(np.float64(0.9))
    assert type(got) is float
    assert got == 0.9
    assert numerics.check_level(Fraction(1, 2)) == 0.5
    for bad, shown in ((0, "0"), (1.0, "1.0"), (95, "95"), (math.nan, "nan"), ("0.9", "'0.9'")):
        assert _refusal(numerics.check_level, bad) == (
            f"level: expected a number in (0, 1), got {shown}"
        )


def test_share_names_its_option() -> None:
    assert numerics.check_share(0.05, "active_share") == 0.05
    assert _refusal(numerics.check_share, True, "active_share") == (
        "active_share: expected a number in (0, 1), got True"
    )


def test_n_resamples_range_is_the_callers() -> None:
    assert numerics.check_n_resamples(1) == 1
    assert numerics.check_n_resamples(10_000_000) == 10_000_000
    got = numerics.check_n_resamples(np.int64(500))
    assert type(got) is int
    assert got == 500
    # compare and gaps: at least one resample; policy_value: 0 is no interval.
    assert _refusal(numerics.check_n_resamples, 0) == (
        "n_resamples: expected an int in [1, 10_000_000], got 0"
    )
    assert numerics.check_n_resamples(0, least=0) == 0
    assert _refusal(numerics.check_n_resamples, -1, least=0) == (
        "n_resamples: expected an int in [0, 10_000_000], got -1"
    )
    for bad, shown in ((10_000_001, "10000001"), (100.0, "100.0"), (True, "True")):
        assert _refusal(numerics.check_n_resamples, bad) == (
            f"n_resamples: expected an int in [1, 10_000_000], got {shown}"
        )


def test_seed_is_non_negative_unless_the_caller_hashes_it() -> None:
    assert numerics.check_seed(0) == 0
    got = numerics.check_seed(np.uint32(3))
    assert type(got) is int
    assert got == 3
    assert _refusal(numerics.check_seed, -1) == "seed: expected an int >= 0, got -1"
    assert _refusal(numerics.check_seed, "0") == "seed: expected an int >= 0, got '0'"
    # The splits' seeded hash takes any integer.
    assert numerics.check_seed(-(2**70), negative=True) == -(2**70)
    assert _refusal(numerics.check_seed, 1.5, negative=True) == (
        "seed: expected an integer, got 1.5"
    )


def test_progress_and_when_it_shows() -> None:
    assert [numerics.check_progress(v) for v in (None, True, False)] == [None, True, False]
    assert _refusal(numerics.check_progress, "yes") == (
        "progress: expected True, False or None, got 'yes'"
    )
    # None: shown above 2e8 draws (resamples x users).
    assert numerics.shows_progress(None, 200_000_000) is False
    assert numerics.shows_progress(None, 200_000_001) is True
    assert numerics.shows_progress(False, 10**12) is False


# -- exact sums -----------------------------------------------------------------------------


def _totals(frame: pl.DataFrame, by: list[str], columns: list[str]) -> pl.DataFrame:
    partials = numerics.exact_partials(frame.lazy(), by, columns)
    return numerics.exact_totals(partials, by, columns).collect()


def test_exact_sum_and_mean_are_the_rationals_rounded_once() -> None:
    # Left to right in floats, 1e16 + 1.0 is 1e16 again: the float sum is 1.0, not 2.0.
    values = [1e16, 1.0, -1e16, 1.0]
    assert sum(values) == 1.0
    got = _totals(pl.DataFrame({"x": values}), [], ["x"]).row(0)
    assert got == (2.0, 4, 0.5)
    rng = np.random.default_rng(2)
    many = (rng.standard_normal(1000) * 10.0 ** rng.integers(-20, 20, 1000)).tolist()
    exact = sum(map(Fraction, many), Fraction(0))
    total, n, mean = _totals(pl.DataFrame({"x": many}), [], ["x"]).row(0)
    assert (total, n, mean) == (math.fsum(many), 1000, float(exact / 1000))
    assert total == float(exact)
    # Any order of the rows: the same bits.
    shuffled = pl.DataFrame({"x": [many[i] for i in rng.permutation(1000)]})
    assert _totals(shuffled, [], ["x"]).row(0) == (total, n, mean)


def test_exact_sums_per_group_without_nulls_and_with_nan() -> None:
    frame = pl.DataFrame(
        {
            "g": ["a", "a", "a", "b", "b", "c"],
            "x": [0.1, 0.2, None, math.inf, 1.0, None],
            "y": [1.0, 2.0, 4.0, 0.5, math.nan, 3.0],
        }
    )
    got = {row[0]: row[1:] for row in _totals(frame, ["g"], ["x", "y"]).rows()}
    # x of a: 0.1 + 0.2 exactly, rounded once; its mean the exact half, rounded once.
    x_a = float(Fraction(0.1) + Fraction(0.2))
    x_a_mean = float((Fraction(0.1) + Fraction(0.2)) / 2)
    assert got["a"] == (x_a, 2, x_a_mean, 7.0, 3, 7.0 / 3)
    x_b, n_b, mean_b, y_b, m_b, y_b_mean = got["b"]
    assert (x_b, n_b, mean_b) == (math.inf, 2, math.inf)  # an infinite value: the sum is it
    assert math.isnan(y_b)
    assert m_b == 2
    assert math.isnan(y_b_mean)
    assert got["c"] == (None, 0, None, 3.0, 1, 3.0)  # no value: no sum, no mean


def test_partials_of_partitions_add_up_to_the_whole() -> None:
    rng = np.random.default_rng(8)
    values = (rng.random(300) * 10.0 ** rng.integers(-8, 8, 300)).tolist()
    groups = rng.integers(0, 3, 300).tolist()
    whole = pl.DataFrame({"g": groups, "x": values})
    parts = [
        numerics.exact_partials(whole.slice(start, 100).lazy(), ["g"], ["x"])
        for start in (0, 100, 200)
    ]
    added = numerics.sum_partials(pl.concat(parts), ["g"])
    got = numerics.exact_totals(added, ["g"], ["x"]).collect().sort("g").rows()
    want = []
    for g in (0, 1, 2):
        mine = [v for v, h in zip(values, groups, strict=True) if h == g]
        exact = sum(map(Fraction, mine), Fraction(0))
        want.append((g, math.fsum(mine), len(mine), float(exact / len(mine))))
    assert got == want


def test_times_two_to_is_exact_for_any_float_exponent() -> None:
    def scaled(value: float, s: int | pl.Expr) -> float:
        out = pl.select(numerics.times_two_to(pl.lit(value, pl.Float64), s)).item()
        assert isinstance(out, float)
        return out

    assert scaled(3.0, 4) == 48.0
    assert scaled(3.0, -2) == 0.75
    assert scaled(3.0, pl.lit(-2)) == 0.75
    # 2^1100 is no float: two factors, 2^550 each; the least subnormal 2^-1074 times
    # 2^1169 is 2^95, exactly.
    assert scaled(2.0**-1000, 1100) == 2.0**100
    assert scaled(5e-324, 1169) == 2.0**95
    assert scaled(5e-324, pl.lit(1169)) == 2.0**95
    assert scaled(2.0**1000, -1100) == 2.0**-100


# -- the seeded bootstrap -----------------------------------------------------------------


def _counts_of(drawn: np.ndarray, n_users: int) -> list[list[int]]:
    """Each resample's draw counts, counted one user at a time."""
    return [[int((row == i).sum()) for i in range(n_users)] for row in drawn]


def test_a_key_is_the_stream_spawn_gives() -> None:
    # compare's segments were SeedSequence(seed).spawn(n)[i]: the key (i,) draws the same.
    children = np.random.SeedSequence(11).spawn(4)
    for i, child in enumerate(children):
        want = np.random.default_rng(child).integers(0, 1000, size=5).tolist()
        assert numerics.generator(11, (i,)).integers(0, 1000, size=5).tolist() == want
    # and a deeper key is SeedSequence's spawn_key, as gaps and policy_value document.
    want = np.random.default_rng(np.random.SeedSequence(3, spawn_key=(1, 0, 2))).random()
    assert numerics.generator(3, (1, 0, 2)).random() == want


@pytest.mark.parametrize("n_users", [7, 70_000])  # one bincount, and one per resample
def test_draw_counts_count_the_drawn_users(n_users: int) -> None:
    size = 3
    drawn = np.random.default_rng(5).integers(0, n_users, size=(size, n_users), dtype=np.int32)
    counts = numerics.draw_counts(np.random.default_rng(5), size, n_users)
    assert counts.shape == (size, n_users)
    if n_users < 100:
        assert counts.tolist() == _counts_of(drawn, n_users)
    else:
        for r in range(size):
            assert counts[r].tolist() == np.bincount(drawn[r], minlength=n_users).tolist()
    assert counts.sum(axis=1).tolist() == [n_users] * size


def _one_at_a_time(
    values: list[list[float]], rngs: list[np.random.Generator], sizes: list[int]
) -> list[list[float]]:
    """Sums of each resample's drawn rows, one resample and one user at a time."""
    out = []
    for rng, size in zip(rngs, sizes, strict=True):
        for _ in range(size):
            (row,) = rng.integers(0, len(values), size=(1, len(values)), dtype=np.int32)
            out.append([sum(values[i][j] for i in row) for j in range(len(values[0]))])
    return out


# Small integers: every sum is exact, whatever the order of its terms.
VALUES = [[1.0, -3.0], [2.0, 5.0], [4.0, 0.0], [8.0, 7.0], [16.0, 1.0]]


def test_one_stream_draws_chunk_after_chunk() -> None:
    values = np.array(VALUES)
    want = _one_at_a_time(VALUES, [numerics.generator(9, (2,))], [10])
    sizes: list[int] = []
    got = numerics.resampled_sums(
        values,
        10,
        9,
        (2,),
        cells=15,  # chunks of 15 // 5 = 3 resamples
        progress=sizes.append,
    )
    assert got.tolist() == want
    assert sizes == [3, 3, 3, 1]
    assert numerics.resampled_sums(values, 10, 9, (2,)).tolist() == want


def test_int64_indices_are_the_int32_stream() -> None:
    # compare drew int64 indices (numpy's default dtype), gaps and policy_value int32:
    # numpy draws a range below 2^32 from 32-bit words either way, so one drawing serves.
    for n in (1, 5, 65_537, 2**31 - 1):
        wide = np.random.default_rng(n).integers(0, n, size=(3, 7))
        narrow = np.random.default_rng(n).integers(0, n, size=(3, 7), dtype=np.int32)
        assert wide.dtype == np.int64
        assert wide.tolist() == narrow.tolist()


def test_per_chunk_streams_are_keyed_by_chunk() -> None:
    values = np.array(VALUES)
    # Chunks of 2 resamples: 7 resamples are blocks of 2, 2, 2 and 1, block b on key (4, b).
    rngs = [numerics.generator(1, (4, b)) for b in range(4)]
    want = _one_at_a_time(VALUES, rngs, [2, 2, 2, 1])
    got = numerics.resampled_sums(values, 7, 1, (4,), cells=10, per_chunk=True)
    assert got.tolist() == want
    # One block: key (4, 0) alone.
    (alone,) = _one_at_a_time(VALUES, [numerics.generator(1, (4, 0))], [1])
    assert numerics.resampled_sums(values, 1, 1, (4,), per_chunk=True).tolist() == [alone]
    # No resample: no row, either way.
    for per_chunk in (False, True):
        empty = numerics.resampled_sums(values, 0, 1, (4,), per_chunk=per_chunk)
        assert empty.shape == (0, 2)


def test_percentiles_interpolate_linearly() -> None:
    samples = np.array([3.0, 0.0, 1.0, 2.0])  # sorted 0, 1, 2, 3
    # level 0.5: positions 0.25 * 3 = 0.75 and 0.75 * 3 = 2.25.
    assert numerics.percentiles(samples, 0.5) == (0.75, 2.25)
    assert numerics.percentile_interval(np.append(samples, np.nan), 0.5) == (0.75, 2.25)
    assert numerics.percentile_interval(np.array([np.nan, np.nan]), 0.5) is None
