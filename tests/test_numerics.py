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
