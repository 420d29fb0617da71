"""Exposure metrics (spec 9.2) against their peers: LensKit's ExposureGini, TREC Fair 2022's AWRF.

Neither peer can be installed with the test suite: LensKit needs torch and pandas < 3, and
TREC Fair Ranking's metric code is a notebook repository, not a package. Their formulas are
transcribed below from their source, each function citing repository, path and commit; the
one call the AWRF code makes to a library, ``scipy.spatial.distance.jensenshannon``, is made
here too (scipy is a dev dependency).

- LensKit ``ExposureGini`` (lenskit/lkpy): ``exposure_gini(exposure=rbp)@k`` with
  ``persistence=0.85`` (LensKit's default patience; frame_metrics' default is 0.8) and a
  ``catalog=`` of as many items as LensKit's ``items=``. Equal to float32 precision to the
  2025.8.1 release (it rounds exposure to float32) and to 1e-12 to the float64 accumulation of
  v2026.3.0. The real LensKit 2025.8.1 was run once on a fixed example; its output is recorded.
  Conventions: LensKit weighs the positions 1..len of the truncated list, frame_metrics the
  rank values (ranks 1, 3 give the second item p^2 here, p there), so the lists below have no
  rank gaps; a metric string cannot set persistence for exposure_gini (see
  ``_fm_exposure_gini``), so it is the call's.
- TREC Fair 2022's AWRF (fair-trec/trec2022-fair-public): ``1 - JSD`` in nats, discount
  ``1/log2(max(r, 2))``, only the ranked items with an alignment row (the judged relevant pages),
  an item in several groups split equally among them. Where the discounts, the targets and the
  kept items agree, ``list_parity = 1 - sqrt((1 - awrf) / ln 2)``; the tests show where that
  holds and, with the arithmetic written out, where each difference breaks it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.spatial.distance import jensenshannon  # type: ignore[import-untyped]

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


# -- TREC Fair Ranking 2022's AWRF ----------------------------------------------------------

# fair-trec/trec2022-fair-public at its last commit ("merge public", 2022-11-14).
TREC_FAIR_2022 = "6fd105f2b69d616c88a3bc276409773a8493927d"
LN2 = math.log(2)

Discount = Callable[[int], npt.NDArray[np.floating]]


def awrf_discount(n: int) -> npt.NDArray[np.float32]:
    """``discount(n)``: 1/log2(max(r, 2)) for r = 1..n, in float32.

    fair-trec/trec2022-fair-public wptrec/metrics/common.py at ``TREC_FAIR_2022``:
    ``np.arange(1, n + 1, dtype='f4')``, ``np.maximum(., 2)``, ``np.reciprocal(np.log2(.))``.
    """
    ranks = np.maximum(np.arange(1, n + 1, dtype="f4"), np.float32(2))
    disc: npt.NDArray[np.float32] = np.reciprocal(np.log2(ranks))
    return disc


def log_discount(n: int) -> npt.NDArray[np.float64]:
    """frame_metrics' ``exposure="log"``: 1/log2(r + 1), r = 1..n, in float64."""
    return 1.0 / np.log2(np.arange(1, n + 1, dtype=np.float64) + 1)


def alignment_rows(groups: Mapping[str, Sequence[str]]) -> dict[str, dict[str, float]]:
    """Page alignment rows: each item's groups, the row normalised to sum to 1.

    fair-trec/trec2022-fair-public PageAlignments.py ``norm_align_matrix`` (``df.div(sums)``):
    an item in m groups (a page with several subject regions, occupations) has 1/m in each.
    An item without groups gets no row.
    """
    return {i: {g: 1 / len(gs) for g in gs} for i, gs in groups.items() if gs}


def awrf_target(
    relevant: Sequence[str], rows: Mapping[str, Mapping[str, float]], universe: Sequence[str]
) -> dict[str, float]:
    """The query's target: the relevant pages' alignment rows summed, then normalised.

    fair-trec/trec2022-fair-public Task1Alignment.py, the dimensions without a background
    (age, alpha, pop, langs, occ): ``norm_dist_df(qr_join(align).groupby('topic_id').sum())``.
    (Geography and gender also average that with a world distribution, 50/50.)
    """
    sums = {g: sum(rows[i].get(g, 0.0) for i in relevant if i in rows) for g in universe}
    total = sum(sums.values())
    return {g: v / total for g, v in sums.items()}


def awrf(
    ranking: Sequence[str],
    rows: Mapping[str, Mapping[str, float]],
    target: Mapping[str, float],
    universe: Sequence[str],
    discount: Discount = awrf_discount,
) -> float:
    """``AWRFMetric.qr_awrf`` for one ranking and one fairness dimension.

    fair-trec/trec2022-fair-public wptrec/metrics/awrf.py at ``TREC_FAIR_2022``: the discount of
    positions 1..n; the ranked items without an alignment row (``known_pages``: in the track the
    pages judged relevant) are dropped with their discount, the others keep the discount of their
    position; ``agg_alignments(arrays, 'mean', disc)`` (wptrec/dimension.py, one dimension:
    rows times discount, summed, divided by ``np.sum(disc)``); then
    ``dist = jensenshannon(ralign, qtgt)`` (scipy: both normalised, natural log) and
    ``1 - dist * dist``: one minus the JS divergence in nats.
    """
    disc = discount(len(ranking))
    is_known = np.array([i in rows for i in ranking], dtype=bool)
    known = [i for i in ranking if i in rows]
    disc = disc[is_known]
    arrays = np.array([[rows[i].get(g, 0.0) for g in universe] for i in known], dtype="float64")
    left = arrays * disc[:, np.newaxis]
    ralign = left.sum(axis=0) / np.sum(disc)
    dist = float(jensenshannon(ralign, np.array([target[g] for g in universe])))
    return 1 - dist * dist


def parity_from_awrf(value: float) -> float:
    """``1 - sqrt(JSD_bits)`` from ``awrf = 1 - JSD_nats``: JSD_bits = JSD_nats / ln 2."""
    return 1 - math.sqrt(max(1 - value, 0.0) / LN2)


def _jsd_bits(s: Sequence[float], t: Sequence[float]) -> float:
    """Jensen-Shannon divergence in bits of two distributions, term by term."""
    out = 0.0
    for a, b in zip(s, t, strict=True):
        m = (a + b) / 2
        out += (0.5 * a * math.log2(a / m) if a else 0.0) + (
            0.5 * b * math.log2(b / m) if b else 0.0
        )
    return out


Target = Literal["merit"] | dict[str, float]


def _list_parity(
    ranking: Sequence[str],
    relevant: Sequence[str],
    groups: Mapping[str, Sequence[str]],
    target: Target,
) -> float:
    """frame_metrics' list_parity@k of one user's list (k = the list's length)."""
    k = len(ranking)
    recs = pl.DataFrame({"user": [1] * k, "item": list(ranking), "rank": list(range(1, k + 1))})
    truth = pl.DataFrame(
        {"user": [1] * len(relevant), "item": list(relevant), "relevance": [1] * len(relevant)},
        schema={"user": pl.Int64, "item": pl.String, "relevance": pl.Int64},
    )
    item_groups = pl.DataFrame(
        [(i, g) for i, gs in groups.items() for g in gs],
        schema={"item": pl.String, "group": pl.String},
        orient="row",
    )
    out = fm.evaluate(
        recs,
        truth,
        metrics=f"list_parity@{k}",
        item_groups=item_groups,
        parity_target=target,
        exposure="log",
    )
    assert out.height == 1
    value = out[f"list_parity@{k}"][0]
    assert isinstance(value, float)
    return value


UNIVERSE = ["g1", "g2", "g3"]


@dataclass(frozen=True)
class OneList:
    """One user's ranking, its relevant items, the item groups and the target."""

    groups: dict[str, list[str]]
    ranking: list[str]
    relevant: list[str]
    target: Target

    def awrf_target(self, rows: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
        """AWRF's own target (with "merit"), or the explicit one normalised."""
        if self.target == "merit":
            return awrf_target(self.relevant, rows, UNIVERSE)
        total = sum(self.target.values())
        return {g: self.target[g] / total for g in UNIVERSE}


@st.composite
def one_group_lists(draw: st.DrawFn) -> OneList:
    """A ranking of relevant items, each in exactly one group; maybe relevant items not
    ranked (they count in the merit target of both); an explicit target or merit."""
    items = [f"i{n}" for n in range(10)]
    groups = {i: [draw(st.sampled_from(UNIVERSE))] for i in items}
    # "zz" is in every group and in no list nor truth: every group exists in item_groups.
    groups["zz"] = list(UNIVERSE)
    ranking = draw(st.lists(st.sampled_from(items), min_size=1, max_size=8, unique=True))
    extra = draw(st.lists(st.sampled_from(items), max_size=3, unique=True))
    relevant = ranking + [i for i in extra if i not in ranking]
    weights = draw(st.lists(st.integers(0, 4), min_size=3, max_size=3).filter(any))
    explicit = {g: float(w) for g, w in zip(UNIVERSE, weights, strict=True)}
    target: Target = draw(st.sampled_from(["merit", explicit]))
    return OneList(groups, ranking, relevant, target)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(world=one_group_lists())
def test_awrf_relation_with_the_discount_swapped(world: OneList) -> None:
    """With the same discount, target and items, ``list_parity = 1 - sqrt((1 - awrf) / ln 2)``.

    AWRF is transcribed with its discount swapped for frame_metrics' 1/log2(r + 1). Every
    ranked item is relevant (AWRF keeps them all) and in one group (AWRF's alignment row is
    then the indicator of that group, frame_metrics counts the item fully in it: the same
    shares s). The targets agree: an explicit one given to both, or AWRF's own (the relevant
    items' alignment rows summed and normalised), which for one user is frame_metrics'
    ``parity_target="merit"`` (the relevant truth rows per group, normalised). Then
    awrf = 1 - JSD_nats(s, t) and list_parity = 1 - sqrt(JSD_bits(s, t)) with
    JSD_bits = JSD_nats / ln 2. Checked on the divergences to 1e-12; on list_parity to 1e-7,
    because a square root turns a rounding error of 1e-16 in a divergence near 0 into 1e-8.
    """
    rows = alignment_rows(world.groups)
    target = world.awrf_target(rows)
    swapped = awrf(world.ranking, rows, target, UNIVERSE, discount=log_discount)
    got = _list_parity(world.ranking, world.relevant, world.groups, world.target)
    assert (1 - got) ** 2 == pytest.approx((1 - swapped) / LN2, abs=1e-12)
    assert got == pytest.approx(parity_from_awrf(swapped), abs=1e-7)


def _float64_awrf_discount(n: int) -> npt.NDArray[np.float64]:
    """AWRF's discount 1/log2(max(r, 2)) computed in float64 instead of float32."""
    return 1.0 / np.log2(np.maximum(np.arange(1, n + 1, dtype=np.float64), 2))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(world=one_group_lists())
def test_awrf_relation_with_its_own_discount(world: OneList) -> None:
    """AWRF's own discount 1/log2(max(r, 2)) is frame_metrics' 1/log2(r + 1) one position on.

    AWRF drops an item without an alignment row (not judged relevant) but keeps the positions
    of the others: with a non-relevant "x0" ranked first, the items at AWRF positions 2..n+1
    get 1/log2(2), ..., 1/log2(n + 1), which are frame_metrics' e(1), ..., e(n) for the same
    items at ranks 1..n of a list without x0. Then ``list_parity = 1 - sqrt((1 - awrf) / ln 2)``
    with AWRF exactly as written, up to its float32 discount (relative error about 2^-24 on
    each share, which moves a divergence by less than 1e-6 for shares of these sizes); with
    the discount computed in float64 instead, to 1e-12.
    """
    rows = alignment_rows(world.groups)
    target = world.awrf_target(rows)
    got = _list_parity(world.ranking, world.relevant, world.groups, world.target)
    own = awrf(["x0", *world.ranking], rows, target, UNIVERSE)
    assert (1 - got) ** 2 == pytest.approx((1 - own) / LN2, abs=1e-6)
    exact = awrf(["x0", *world.ranking], rows, target, UNIVERSE, _float64_awrf_discount)
    assert (1 - got) ** 2 == pytest.approx((1 - exact) / LN2, abs=1e-12)


L3 = 1 / math.log2(3)  # 1/log2(3): frame_metrics' e(2), AWRF's discount at position 3


def test_awrf_differs_a_non_relevant_item() -> None:
    """A non-relevant item in the list counts in list_parity, not in AWRF.

    Groups: a, c in x; b in y. Relevant: a, b. List [a, c, b]; target (1/2, 1/2).
    list_parity (log): x = e(1) + e(2) = 1 + 1/log2 3, y = e(3) = 1/2, so
    s = (1 + L3, 1/2) / (3/2 + L3) = (0.7654, 0.2346).
    AWRF drops c and keeps the positions of a (1) and b (3): discounts 1 and 1/log2 3, so
    r = (1, L3) / (1 + L3) = (0.6131, 0.3869), and awrf = 1 - JSD_nats(r, t).
    The relation would give 1 - sqrt(JSD_bits(r, t)) = 0.9032; list_parity is
    1 - sqrt(JSD_bits(s, t)) = 0.7642.
    """
    groups = {"a": ["x"], "b": ["y"], "c": ["x"]}
    t = (0.5, 0.5)
    s = ((1 + L3) / (1.5 + L3), 0.5 / (1.5 + L3))
    r = (1 / (1 + L3), L3 / (1 + L3))
    rows = {"a": {"x": 1.0}, "b": {"y": 1.0}}  # c: no alignment row (not relevant)
    value = awrf(["a", "c", "b"], rows, {"x": 0.5, "y": 0.5}, ["x", "y"])
    assert value == pytest.approx(1 - _jsd_bits(r, t) * LN2, abs=1e-6)  # float32 discount
    got = _list_parity(["a", "c", "b"], ["a", "b"], groups, {"x": 0.5, "y": 0.5})
    assert got == pytest.approx(1 - math.sqrt(_jsd_bits(s, t)), abs=1e-12)
    assert parity_from_awrf(value) == pytest.approx(0.9032, abs=1e-4)
    assert got == pytest.approx(0.7642, abs=1e-4)


def test_awrf_differs_an_item_in_two_groups() -> None:
    """An item in several groups counts fully in each for list_parity; AWRF splits it.

    Groups: a in x; d in x and y. Both relevant. List [a, d]; target (1/2, 1/2); discount
    swapped to 1/log2(r + 1) so that only the split differs.
    list_parity: x = e(1) + e(2) = 1 + L3, y = e(2) = L3: s = (1 + L3, L3) / (1 + 2 L3)
    = (0.7211, 0.2789). AWRF: d's row is (1/2, 1/2): r = (1 + L3/2, L3/2) / (1 + L3)
    = (0.8066, 0.1934). list_parity 1 - sqrt(JSD_bits(s, t)) = 0.8065; the relation from
    AWRF gives 1 - sqrt(JSD_bits(r, t)) = 0.7229.
    """
    groups = {"a": ["x"], "d": ["x", "y"]}
    t = (0.5, 0.5)
    s = ((1 + L3) / (1 + 2 * L3), L3 / (1 + 2 * L3))
    r = ((1 + L3 / 2) / (1 + L3), (L3 / 2) / (1 + L3))
    rows = alignment_rows(groups)
    assert rows["d"] == {"x": 0.5, "y": 0.5}
    value = awrf(["a", "d"], rows, {"x": 0.5, "y": 0.5}, ["x", "y"], discount=log_discount)
    assert value == pytest.approx(1 - _jsd_bits(r, t) * LN2, abs=1e-15)
    got = _list_parity(["a", "d"], ["a", "d"], groups, {"x": 0.5, "y": 0.5})
    assert got == pytest.approx(1 - math.sqrt(_jsd_bits(s, t)), abs=1e-12)
    assert got == pytest.approx(0.8065, abs=1e-4)
    assert parity_from_awrf(value) == pytest.approx(0.7229, abs=1e-4)


def test_awrf_differs_the_discount() -> None:
    """Same items, same target: the discounts alone make them differ.

    Groups: a in x; b, c in y; all relevant; list [a, b, c]; target (1/2, 1/2).
    list_parity, e = 1, 1/log2 3, 1/2: s = (1, L3 + 1/2) / (3/2 + L3) = (0.4693, 0.5307).
    AWRF, d = 1, 1, 1/log2 3: r = (1, 1 + L3) / (2 + L3) = (0.3801, 0.6199).
    list_parity = 1 - sqrt(JSD_bits(s, t)) = 0.9739; from AWRF, 0.8973.
    """
    groups = {"a": ["x"], "b": ["y"], "c": ["y"]}
    t = (0.5, 0.5)
    s = (1 / (1.5 + L3), (L3 + 0.5) / (1.5 + L3))
    r = (1 / (2 + L3), (1 + L3) / (2 + L3))
    value = awrf(["a", "b", "c"], alignment_rows(groups), {"x": 0.5, "y": 0.5}, ["x", "y"])
    assert value == pytest.approx(1 - _jsd_bits(r, t) * LN2, abs=1e-6)  # float32 discount
    got = _list_parity(["a", "b", "c"], ["a", "b", "c"], groups, {"x": 0.5, "y": 0.5})
    assert got == pytest.approx(1 - math.sqrt(_jsd_bits(s, t)), abs=1e-12)
    assert got == pytest.approx(0.9739, abs=1e-4)
    assert parity_from_awrf(value) == pytest.approx(0.8973, abs=1e-4)
