"""The numerics the workflows share: the checks of their options (so far).

One copy of each, in the lowest layer above :mod:`frame_metrics.errors`, for
:func:`~frame_metrics.compare`, :func:`~frame_metrics.gaps`,
:func:`~frame_metrics.policy_value` and the evaluation protocol's splits:
:func:`check_level`, :func:`check_n_resamples`, :func:`check_seed` and
:func:`check_progress` raise :class:`~frame_metrics.errors.InvalidOptionError` ("expected
X, got Y") before any data is read, and give the value back in its plain Python form
(numpy scalars as ``int`` or ``float``).
"""

from __future__ import annotations

import numbers
from typing import cast

from frame_metrics.errors import InvalidOptionError, shown

__all__ = [
    "MAX_RESAMPLES",
    "PROGRESS_DRAWS",
    "check_level",
    "check_n_resamples",
    "check_progress",
    "check_seed",
    "check_share",
    "is_int",
    "is_real",
    "shows_progress",
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
