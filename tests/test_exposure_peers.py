"""Exposure metrics (spec 9.2) against their peers: LensKit's ExposureGini.

LensKit cannot be installed with the test suite (it needs torch and pandas < 3): its
formula is transcribed below from its source, each function citing repository, path and
commit.

- LensKit ``ExposureGini`` (lenskit/lkpy): ``exposure_gini(exposure=rbp)@k`` with
  ``persistence=0.85`` (LensKit's default patience; frame_metrics' default is 0.8) and a
  ``catalog=`` of as many items as LensKit's ``items=``. Equal to float32 precision to the
  2025.8.1 release (it rounds exposure to float32) and to 1e-12 to the float64 accumulation of
  v2026.3.0. The real LensKit 2025.8.1 was run once on a fixed example; its output is recorded.
  Conventions: LensKit weighs the positions 1..len of the truncated list, frame_metrics the
  rank values (ranks 1, 3 give the second item p^2 here, p there), so the lists below have no
  rank gaps; a metric string cannot set persistence for exposure_gini (see
  ``_fm_exposure_gini``), so it is the call's.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence

import numpy as np
import numpy.typing as npt
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import frame_metrics as fm

# float32's unit roundoff: a float32 rounding changes a value by at most this relative amount.
U32 = 2.0**-24

DType = pl.DataType | type[pl.DataType]

# -- LensKit ExposureGini ----------------------------------------------------------------

LENSKIT_PATIENCE = 0.85  # GeometricRankWeight's default patience (_weighting.py)
LENSKIT_2025_8_1 = "8227b0f175d1d685b3527a7d0cf8164dd32fe049"  # lenskit/lkpy tag v2025.8.1
LENSKIT_2026_3_0 = "3bd1c175d6dae4e30da906e4f986797f214d1fe8"  # lenskit/lkpy tag v2026.3.0


def lenskit_gini(xs: npt.ArrayLike) -> float:
    """``lenskit.stats.gini`` (lenskit/lkpy src/lenskit/stats.py at v2025.8.1 and v2026.3.0).

    ``xs`` is sorted ascending; num = Σ_j (2j - n - 1) x_(j) in float64 (a float32 ``xs``
    times the float64 ranks is float64); denom = n Σ x in float64; ``max(num / denom, 0)``.
    """
    x = np.sort(np.asarray(xs))
    n = len(x)
    ranks = np.arange(1, n + 1, dtype=np.float64)
    ranks *= 2
    ranks -= n + 1
    num = np.sum(x * ranks)
    denom = n * np.sum(x, dtype=np.float64)
    return float(max(num / denom, 0))


def lenskit_weights(length: int) -> npt.NDArray[np.float64]:
    """``GeometricRankWeight().weight(np.arange(1, length + 1))``: exp(ln(p) (r - 1)).

    lenskit/lkpy src/lenskit/metrics/ranking/_weighting.py (same at both commits).
    """
    ranks = np.arange(1, length + 1)
    weights: npt.NDArray[np.float64] = np.exp(np.log(LENSKIT_PATIENCE) * (ranks - 1))
    return weights


def lenskit_exposure_gini(lists: Sequence[Sequence[Hashable]], n: int, items: int) -> float:
    """``ExposureGini(n, items=items)`` of LensKit 2025.8.1, its float32 accumulation included.

    lenskit/lkpy src/lenskit/metrics/ranking/_gini.py at ``LENSKIT_2025_8_1``:
    ``compute_list_data`` truncates each list to its first n items (by position, not by a
    rank value) and returns ``pa.array(weights, type=pa.float32())``, the weights of
    positions 1..len; ``global_aggregate`` sums them per item with Arrow's grouped sum (a
    float32 column sums into float64; exact here, the float32 values of a few positions
    share their exponent range), copies the sums into ``np.zeros(items, np.float32)``
    (rounding each to float32; the catalog's unexposed items stay 0) and returns
    ``gini`` of that array.
    """
    totals: dict[Hashable, float] = {}
    for recs in lists:
        top = recs[:n]
        weights = lenskit_weights(len(top)).astype(np.float32)
        for item, w in zip(top, weights, strict=True):
            totals[item] = totals.get(item, 0.0) + float(w)
    exposure = np.zeros(items, np.float32)
    exposure[: len(totals)] = np.asarray(list(totals.values()), dtype=np.float32)
    return lenskit_gini(exposure)


def lenskit_exposure_gini_f64(lists: Sequence[Sequence[Hashable]], n: int, items: int) -> float:
    """The same in float64, as LensKit v2026.3.0 accumulates it.

    lenskit/lkpy src/lenskit/metrics/ranking/_gini.py at ``LENSKIT_2026_3_0``:
    ``ExposureGini.measure_list`` returns the float64 weights of positions 1..len of the
    truncated list; ``GiniAccumulator`` adds them into ``np.zeros(n_items)`` (float64) at the
    items' vocabulary numbers and ``accumulate`` returns ``gini(totals / totals.sum())``.
    """
    number: dict[Hashable, int] = {}
    totals = np.zeros(items)
    for recs in lists:
        top = recs[:n]
        ids = [number.setdefault(item, len(number)) for item in top]
        totals[ids] += lenskit_weights(len(top))
    return lenskit_gini(totals / totals.sum())


# A small fixed example: three lists, n = 3 (user 1's 4th item is cut, user 2's list is
# shorter), a catalog of six items (f is in no list).
FIXED_LISTS = {1: ["a", "b", "c", "d"], 2: ["b", "a"], 3: ["c", "b", "e"]}
FIXED_CATALOG = ["a", "b", "c", "d", "e", "f"]

# LensKit 2025.8.1 (lkpy v2025.8.1, with pyarrow 26.0.1, numpy 2.4.6, pandas 2.3.3), run on
# FIXED_LISTS with its defaults and items=6:
#   recs = pd.DataFrame({"user_id": [1, 1, 1, 1, 2, 2, 3, 3, 3],
#                        "item_id": list("abcdbacbe"), "rank": [1, 2, 3, 4, 1, 2, 1, 2, 3]})
#   truth = pd.DataFrame({"user_id": [1, 2, 3], "item_id": ["a"] * 3, "rating": [1.0] * 3})
#   ra = RunAnalysis(); ra.add_metric(ExposureGini(3, items=6))
#   res = ra.measure(ItemListCollection.from_df(recs, ["user_id"]),
#                    ItemListCollection.from_df(truth, ["user_id"]))
#   float(res.global_metrics()["ExposureGini@3"])
LENSKIT_RECORDED = 0.47772217877866957


def _recs(lists: Mapping[int, Sequence[Hashable]], dtype: DType) -> pl.DataFrame:
    return pl.DataFrame(
        [(u, i, r) for u, items in lists.items() for r, i in enumerate(items, start=1)],
        schema={"user": pl.Int64, "item": dtype, "rank": pl.Int64},
        orient="row",
    )


def _fm_exposure_gini(
    lists: Mapping[int, Sequence[Hashable]],
    k: int,
    catalog: Sequence[Hashable] | None,
    dtype: DType,
) -> float:
    # persistence is given to the call: a metric string may not set it for exposure_gini
    # ("exposure_gini(exposure=rbp, persistence=0.85)@k" is refused: its options are
    # exposure alone), though the call's persistence does set its rbp weights.
    column = f"exposure_gini(exposure=rbp)@{k}"
    out = fm.evaluate(
        _recs(lists, dtype),
        metrics=[column],
        persistence=LENSKIT_PATIENCE,
        catalog=None
        if catalog is None
        else pl.DataFrame({"item": catalog}, schema={"item": dtype}),
        aggregate=True,
    )
    value = out[column][0]
    assert isinstance(value, float)
    return value


def test_lenskit_exposure_gini_recorded_output() -> None:
    """The transcription gives the real LensKit's value to the bit; frame_metrics, to float32.

    By hand, p = 0.85, positions 1..3: E(a) = 1 + 0.85 = 1.85 (user 1 first, user 2 second),
    E(b) = 0.85 + 1 + 0.85 = 2.7, E(c) = 0.7225 + 1 = 1.7225, E(e) = 0.7225, E(d) = E(f) = 0
    (d is cut at n = 3). Sorted: 0, 0, 0.7225, 1.7225, 1.85, 2.7 with 2j - n - 1 = -5, -3,
    -1, 1, 3, 5: num = -0.7225 + 1.7225 + 5.55 + 13.5 = 20.05, Σ E = 6.995, Gini =
    20.05 / (6 · 6.995) = 20.05 / 41.97. LensKit rounds each weight and each E(i) to float32
    (relative error <= 2^-24 each, so <= 2·2^-24 on E), which moves the Gini by at most
    4·2^-24 (the mean-absolute-difference form of the Gini moves by at most the largest
    relative error of its values in the numerator and again in the denominator); frame_metrics
    sums in float64.
    """
    lists = list(FIXED_LISTS.values())
    by_hand = 20.05 / 41.97
    assert lenskit_exposure_gini(lists, 3, 6) == LENSKIT_RECORDED
    assert pytest.approx(by_hand, abs=4 * U32) == LENSKIT_RECORDED
    assert by_hand != LENSKIT_RECORDED  # the float32 rounding shows in the last digits
    assert lenskit_exposure_gini_f64(lists, 3, 6) == pytest.approx(by_hand, abs=1e-15)

    got = _fm_exposure_gini(FIXED_LISTS, 3, FIXED_CATALOG, pl.String)
    assert got == pytest.approx(by_hand, abs=1e-15)
    assert got == pytest.approx(LENSKIT_RECORDED, abs=4 * U32)
    assert got == pytest.approx(lenskit_exposure_gini_f64(lists, 3, 6), abs=1e-12)


def test_lenskit_catalog_convention() -> None:
    """The catalog: LensKit's ``items=`` (a count, or the length of a frame or a dataset's
    item count) is frame_metrics' ``catalog=`` size; without ``catalog=`` frame_metrics
    counts the items seen in the inputs (here the recommendations: a..e, 5 items), which is
    LensKit with ``items=5``, not 6.

    items = 5 by hand: sorted 0, 0.7225, 1.7225, 1.85, 2.7 with 2j - 6 = -4, -2, 0, 2, 4:
    num = -1.445 + 3.7 + 10.8 = 13.055, Gini = 13.055 / (5 · 6.995) = 13.055 / 34.975.
    """
    lists = list(FIXED_LISTS.values())
    seen = _fm_exposure_gini(FIXED_LISTS, 3, None, pl.String)
    assert seen == pytest.approx(13.055 / 34.975, abs=1e-15)
    assert seen == pytest.approx(lenskit_exposure_gini_f64(lists, 3, 5), abs=1e-12)
    assert seen != pytest.approx(lenskit_exposure_gini_f64(lists, 3, 6), abs=1e-3)


@st.composite
def runs(draw: st.DrawFn) -> tuple[dict[int, list[int]], int, int]:
    """Lists of distinct items over a catalog of ``size`` items, several users, a cutoff k.

    Lists are often shorter than k, sometimes longer (cut at k); at least one is non-empty.
    """
    size = draw(st.integers(1, 25))
    k = draw(st.integers(1, 10))
    n_users = draw(st.integers(1, 8))
    lists = {
        u: draw(st.lists(st.integers(0, size - 1), min_size=1, max_size=12, unique=True))
        for u in range(1, n_users + 1)
    }
    return lists, k, size


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(run=runs())
def test_lenskit_exposure_gini_matches(run: tuple[dict[int, list[int]], int, int]) -> None:
    """``exposure_gini(exposure=rbp)@k`` (persistence 0.85, ``catalog=`` of LensKit's item
    count) equals LensKit's ExposureGini with its defaults (``ExposureGini(k, items=size)``):
    to 4·2^-24 against 2025.8.1, which rounds each weight and each item's exposure to float32
    (see the recorded-output test for the bound), and to 1e-12 against the float64
    accumulation of v2026.3.0 (its weights exp(ln p (r - 1)) and its normalisation by the
    total differ from frame_metrics' p^(r - 1) in the last bits only).
    """
    lists, k, size = run
    got = _fm_exposure_gini(lists, k, list(range(size)), pl.Int64)
    values = list(lists.values())
    assert got == pytest.approx(lenskit_exposure_gini_f64(values, k, size), abs=1e-12)
    assert got == pytest.approx(lenskit_exposure_gini(values, k, size), abs=4 * U32)
