"""``frame_metrics.numerics``: the option checks the workflows share.

Each check's accepted values and its refusal are written out; compare, gaps,
policy_value and the splits test the same messages through their own calls.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
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


def test_percentiles_interpolate_linearly() -> None:
    samples = np.array([3.0, 0.0, 1.0, 2.0])  # sorted 0, 1, 2, 3
    # level 0.5: positions 0.25 * 3 = 0.75 and 0.75 * 3 = 2.25.
    assert numerics.percentiles(samples, 0.5) == (0.75, 2.25)
    assert numerics.percentile_interval(np.append(samples, np.nan), 0.5) == (0.75, 2.25)
    assert numerics.percentile_interval(np.array([np.nan, np.nan]), 0.5) is None
