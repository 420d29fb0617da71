"""Bad input: one table of cases and their exact messages, on every frame kind."""

from __future__ import annotations

import pickle
import re
from collections.abc import Callable
from typing import Any

import polars as pl
import pytest

import frame_metrics as fm
from frame_metrics.errors import (
    DuplicateRowsError,
    FrameMetricsError,
    InvalidOptionError,
    InvalidValueError,
    MissingColumnsError,
    MissingDependencyError,
    MissingInputError,
)
from tests.conftest import Constructor, is_pandas_numpy

# Each frame on lines that fit the documentation's code column (the errors page shows them).
RECS = pl.DataFrame(
    {"user": [1, 1, 2], "item": [10, 11, 10], "rank": [1, 2, 1]},
)
TRUTH = pl.DataFrame(
    {"user": [1, 2], "item": [11, 12], "relevance": [1.0, 2.0]},
)

Case = tuple[
    str,
    Callable[[pl.DataFrame], pl.DataFrame],
    Callable[[pl.DataFrame], pl.DataFrame],
    dict[str, Any],
    type[FrameMetricsError],
    str,
]

same: Callable[[pl.DataFrame], pl.DataFrame] = lambda df: df  # noqa: E731

# (id, change recs, change truth, kwargs, error class, exact message)
CASES: list[Case] = [
    (
        "missing-user-column",
        same,
        same,
        {"user": "usr"},
        MissingColumnsError,
        "recs: expected column 'usr' (did you mean 'user'?), not found; "
        "available columns: 'user', 'item', 'rank'",
    ),
    (
        "missing-relevance",
        same,
        lambda t: t.rename({"relevance": "rating"}),
        {},
        MissingColumnsError,
        "truth: expected column 'relevance', not found; available columns: 'user', 'item', 'rating'",
    ),
    (
        "missing-rank-without-score",
        lambda r: r.drop("rank"),
        same,
        {},
        MissingColumnsError,
        "recs: expected column 'rank', not found; available columns: 'user', 'item'",
    ),
    (
        "missing-by",
        same,
        same,
        {"by": "modle"},
        MissingColumnsError,
        "recs: expected column 'modle', not found; available columns: 'user', 'item', 'rank'",
    ),
    (
        "null-user-in-recs",
        lambda r: r.with_columns(user=pl.Series([1, None, 2])),
        same,
        {},
        InvalidValueError,
        "recs: expected no nulls in key column 'user', found 1 null row(s), e.g. user=None, item=11, rank=2",
    ),
    (
        "null-item-in-truth",
        same,
        lambda t: t.with_columns(item=pl.Series([11, None])),
        {},
        InvalidValueError,
        "truth: expected no nulls in key column 'item', found 1 null row(s), e.g. user=2, item=None, relevance=2.0",
    ),
    (
        "negative-relevance",
        same,
        lambda t: t.with_columns(relevance=pl.Series([1.0, -2.0])),
        {},
        InvalidValueError,
        "truth: expected relevance >= 0 in column 'relevance', found 1 negative value(s), e.g. user=2, item=12, relevance=-2.0",
    ),
    (
        "nan-relevance",
        same,
        lambda t: t.with_columns(relevance=pl.Series([1.0, float("nan")])),
        {},
        InvalidValueError,
        "truth: expected finite numbers in column 'relevance', found 1 NaN or infinite value(s), e.g. user=2, item=12, relevance=nan",
    ),
    (
        "string-relevance",
        same,
        lambda t: t.with_columns(relevance=pl.Series(["a", "b"])),
        {},
        InvalidValueError,
        "truth: expected column 'relevance' to hold numeric values, found dtype String",
    ),
    (
        "rank-zero",
        lambda r: r.with_columns(rank=pl.Series([0, 2, 1])),
        same,
        {},
        InvalidValueError,
        "recs: expected ranks >= 1 in column 'rank' (1 = top), found 1 rank(s) below 1, e.g. user=1, item=10, rank=0",
    ),
    (
        "rank-not-integer",
        lambda r: r.with_columns(rank=pl.Series([1.0, 2.5, 1.0])),
        same,
        {},
        InvalidValueError,
        "recs: expected integer ranks in column 'rank', found 1 non-integer value(s), e.g. user=1, item=11, rank=2.5",
    ),
    (
        "rank-string",
        lambda r: r.with_columns(rank=pl.Series(["1", "2", "1"])),
        same,
        {},
        InvalidValueError,
        "recs: expected column 'rank' to hold integer values, found dtype String",
    ),
    (
        "duplicate-rank",
        lambda r: r.with_columns(rank=pl.Series([1, 1, 1])),
        same,
        {},
        DuplicateRowsError,
        "recs: expected one row per rank within a user, found 2 rows that repeat one, e.g. user=1, item=10, rank=1",
    ),
    (
        "duplicate-recs-pair",
        lambda r: r.with_columns(item=pl.Series([10, 10, 10])),
        same,
        {},
        DuplicateRowsError,
        "recs: expected one row per (user, item) pair, found 2 rows that repeat one, e.g. user=1, item=10, rank=1 "
        "(pass on_duplicate='first' to keep the best-ranked row)",
    ),
    (
        "duplicate-truth-pair",
        same,
        lambda t: t.with_columns(user=pl.Series([2, 2]), item=pl.Series([12, 12])),
        {},
        DuplicateRowsError,
        "truth: expected one row per (user, item) pair, found 2 rows that repeat one, e.g. user=2, item=12, relevance=1.0 "
        "(pass on_duplicate='first' to keep the highest-relevance row)",
    ),
    (
        "join-key-dtypes",
        same,
        lambda t: t.with_columns(pl.col("item").cast(pl.String)),
        {},
        InvalidValueError,
        "recs and truth: expected key column 'item' to have dtypes whose values can be matched exactly, found Int64 in recs and String in truth",
    ),
    (
        "k-zero",
        same,
        same,
        {"k": 0},
        InvalidOptionError,
        "k: expected an int in [1, 1048576] or a list of them, got 0",
    ),
    (
        "k-float",
        same,
        same,
        {"k": 2.5},
        InvalidOptionError,
        "k: expected an int in [1, 1048576] or a list of them, got 2.5",
    ),
    (
        "k-bool-in-list",
        same,
        same,
        {"k": [5, True]},
        InvalidOptionError,
        "k: expected an int in [1, 1048576] or a list of them, got True",
    ),
    (
        "k-beyond-any-list",
        same,
        same,
        {"k": 2**64},
        InvalidOptionError,
        "k: expected an int in [1, 1048576] or a list of them, got 18446744073709551616",
    ),
    (
        "k-beyond-max-in-list",
        same,
        same,
        {"k": [5, 2**20 + 1]},
        InvalidOptionError,
        "k: expected an int in [1, 1048576] or a list of them, got 1048577",
    ),
    (
        "unknown-metric",
        same,
        same,
        {"metrics": ["ndgc"], "k": 5},
        InvalidOptionError,
        "metrics: expected a known metric name, got 'ndgc' (did you mean 'ndcg'?); known metrics: "
        "'ap', 'aplt', 'arp', 'bpref', 'coverage', 'dcg', 'diversity', "
        "'ee_disparity', 'ee_loss', 'ee_relevance', 'err', 'exposure_gini', 'exposure_parity', "
        "'f1', 'gini', 'hit_rate', 'judged', 'list_parity', 'mae', 'map', 'miscalibration', "
        "'mrr', 'mse', 'ndcg', 'novelty', "
        "'personalization', 'precision', 'r_precision', 'rbp', 'recall', 'rmse', 'serendipity'",
    ),
    (
        "unknown-metric-near-a-trec-eval-name",
        same,
        same,
        {"metrics": ["ndcg_cut10"]},
        InvalidOptionError,
        "metrics: expected a known metric name, got 'ndcg_cut10' (did you mean 'ndcg_cut_<k>'?); "
        "known metrics: 'ap', 'aplt', 'arp', 'bpref', 'coverage', 'dcg', 'diversity', "
        "'ee_disparity', 'ee_loss', 'ee_relevance', 'err', 'exposure_gini', 'exposure_parity', "
        "'f1', 'gini', 'hit_rate', 'judged', 'list_parity', 'mae', 'map', 'miscalibration', "
        "'mrr', 'mse', 'ndcg', 'novelty', "
        "'personalization', 'precision', 'r_precision', 'rbp', 'recall', 'rmse', 'serendipity'",
    ),
    (
        "trec-eval-measure-not-computed",
        same,
        same,
        {"metrics": ["P_10", "gm_map"]},
        InvalidOptionError,
        "metrics: expected a measure frame_metrics computes, got 'gm_map': trec_eval's gm_map is a geometric mean over topics; frame_metrics means are arithmetic",
    ),
    (
        "ir-measures-measure-not-computed",
        same,
        same,
        {"metrics": ["nDCG@10", "SetP"]},
        InvalidOptionError,
        "metrics: expected a measure frame_metrics computes, got 'SetP': ir_measures' SetP is a measure of the retrieved set",
    ),
    (
        "trec-eval-name-and-a-cutoff",
        same,
        same,
        {"metrics": "P_10@5"},
        InvalidOptionError,
        "metrics: expected 'P_10' without a cutoff (trec_eval writes the cutoff in the name), got 'P_10@5'",
    ),
    (
        "trec-eval-name-without-its-cutoff",
        same,
        same,
        {"metrics": "map_cut"},
        InvalidOptionError,
        "metrics: expected trec_eval's map_cut with its cutoff (map_cut_<k>, such as map_cut_10), got 'map_cut'",
    ),
    (
        "ir-measures-name-with-a-convention",
        same,
        same,
        {"metrics": "nDCG(convention=rectools)@10"},
        InvalidOptionError,
        "metrics: expected options nDCG reads (empty, gain, gain_scope, idcg, ips, relevant_set, threshold, ties, users, zero_ideal), got convention in 'nDCG(convention=rectools)@10': ir_measures' nDCG fixes convention='trec_eval'; name 'ndcg(convention=rectools)@10' for this package's ndcg, which reads it",
    ),
    (
        "bad-metric-cutoff",
        same,
        same,
        {"metrics": ["ndcg@ten"]},
        InvalidOptionError,
        "metrics: expected '<name>@<int k>', got 'ndcg@ten'",
    ),
    (
        "unknown-gain",
        same,
        same,
        {"k": 5, "gain": "log"},
        InvalidOptionError,
        "gain: expected one of 'linear', 'exponential', 'binary' or a {relevance level: gain} table such as {2: 3, 3: 7}, got 'log'",
    ),
    (
        "unknown-ap-denominator",
        same,
        same,
        {"k": 5, "ap_denominator": "R"},
        InvalidOptionError,
        "ap_denominator: expected one of 'min_k', 'relevant', 'hits', 'k', got 'R'",
    ),
    (
        "unknown-empty",
        same,
        same,
        {"k": 5, "empty": "nan"},
        InvalidOptionError,
        "empty: expected one of 'skip', 'zero', got 'nan'",
    ),
    (
        "unknown-on-duplicate",
        same,
        same,
        {"k": 5, "on_duplicate": "last"},
        InvalidOptionError,
        "on_duplicate: expected one of 'error', 'first', got 'last'",
    ),
    (
        "threshold-negative",
        same,
        same,
        {"k": 5, "threshold": -1},
        InvalidOptionError,
        "threshold: expected a finite number >= 0 or None, got -1",
    ),
    (
        "threshold-past-float-range",
        same,
        same,
        {"threshold": 10**400},
        InvalidOptionError,
        "threshold: expected a finite number >= 0 or None, got 10000000000000000000... (an integer of 401 digits) (past the float range)",
    ),
    (
        "persistence-past-float-range",
        same,
        same,
        {"metrics": "rbp", "persistence": 10**400},
        InvalidOptionError,
        "persistence: expected a number in (0, 1) or None, got 10000000000000000000... (an integer of 401 digits) (past the float range)",
    ),
    (
        "max-relevance-past-float-range",
        same,
        same,
        {"metrics": "err", "max_relevance": -(10**400)},
        InvalidOptionError,
        "max_relevance: expected a number in (0, 1000) or None, got -10000000000000000000... (an integer of 401 digits) (past the float range)",
    ),
    (
        "head-share-past-float-range",
        same,
        same,
        {"metrics": "aplt", "head_share": 10**400},
        InvalidOptionError,
        "head_share: expected a number in (0, 1), got 10000000000000000000... (an integer of 401 digits) (past the float range)",
    ),
    (
        "gain-level-past-float-range",
        same,
        same,
        {"gain": {10**400: 1}},
        InvalidOptionError,
        "gain: expected a {relevance level: gain} table of finite numbers >= 0, got 10000000000000000000... (an integer of 401 digits) (past the float range) in {1000000000000000000... (406 characters)",
    ),
    (
        "gain-level-past-int-text-limit",
        same,
        same,
        {"gain": {10**5000: 1}},
        InvalidOptionError,
        "gain: expected a {relevance level: gain} table of finite numbers >= 0, got 10000000000000000000... (an integer of 5001 digits) (past the float range) in a dict too large to show",
    ),
    (
        "k-past-int-text-limit",
        same,
        same,
        {"k": 10**5000},
        InvalidOptionError,
        "k: expected an int in [1, 1048576] or a list of them, got 10000000000000000000... (an integer of 5001 digits)",
    ),
    (
        "metric-option-of-400-digits",
        same,
        same,
        {"metrics": "ndcg(threshold=" + "9" * 400 + ")"},
        InvalidOptionError,
        "threshold: expected a finite number >= 0 or None, got 99999999999999999999... (an integer of 400 digits) (past the float range)",
    ),
    (
        "metric-string-of-100000-characters",
        same,
        same,
        {"metrics": "ndcg(threshold=" + "-" * 100_000 + "1)"},
        InvalidOptionError,
        "metrics: expected a metric string of at most 1000 characters (a longer gain table goes in gain=), got 'ndcg(threshold=----... (100019 characters)",
    ),
    (
        "aggregate-not-a-bool",
        same,
        same,
        {"aggregate": "mean"},
        InvalidOptionError,
        "aggregate: expected True or False, got 'mean'",
    ),
    (
        "user-not-a-name",
        same,
        same,
        {"k": 5, "user": 3},
        InvalidOptionError,
        "user: expected a column name or a list of column names, got 3",
    ),
    (
        "one-column-two-roles",
        same,
        same,
        {"user": "rank"},
        InvalidOptionError,
        "user and rank: expected different columns of recs, got 'rank' for both",
    ),
    (
        "reserved-column-name",
        lambda r: r.rename({"item": "_fm_rel"}),
        lambda t: t.rename({"item": "_fm_rel"}),
        {"item": "_fm_rel"},
        InvalidOptionError,
        "item: expected a column name that does not start with '_fm_' (frame_metrics' own columns), got '_fm_rel'",
    ),
    (
        "user-named-like-an-output",
        lambda r: r.rename({"user": "ndcg@2"}),
        lambda t: t.rename({"user": "ndcg@2"}),
        {"user": "ndcg@2", "metrics": "ndcg"},
        InvalidOptionError,
        "user: expected a column name other than the output column 'ndcg@2' (a metric), got 'ndcg@2'; rename the column",
    ),
    (
        "by-named-n-users-with-aggregate",
        lambda r: r.with_columns(n_users=pl.lit("a")),
        same,
        {"by": "n_users", "aggregate": True},
        InvalidOptionError,
        "by: expected a column name other than the output column 'n_users' (the number of users averaged), got 'n_users'; rename the column",
    ),
    (
        "stacked-models-without-by",
        lambda r: pl.concat([r.with_columns(model=pl.lit("a")), r.with_columns(model=pl.lit("b"))]),
        same,
        {},
        DuplicateRowsError,
        "recs: expected one row per rank within a user, found 6 rows that repeat one, e.g. user=1, item=10, rank=1; the rows differ in column(s) 'model': if they hold several models or segments, pass by='model'",
    ),
    (
        # A column of ids (one per row) and a float column differ as well; the hint proposes
        # the column of fewest values that is not a float: a by column groups rows.
        "stacked-models-with-ids-and-scores-without-by",
        lambda r: pl.concat(
            [
                r.with_columns(
                    request=pl.Series([1, 2, 3]),
                    model=pl.lit("a"),
                    score=pl.Series([0.9, 0.8, 0.7]),
                ),
                r.with_columns(
                    request=pl.Series([4, 5, 6]),
                    model=pl.lit("b"),
                    score=pl.Series([0.6, 0.5, 0.4]),
                ),
            ]
        ),
        same,
        {},
        DuplicateRowsError,
        "recs: expected one row per rank within a user, found 6 rows that repeat one, e.g. user=1, item=10, rank=1; the rows differ in column(s) 'model', 'request', 'score': if they hold several models or segments, pass by='model'",
    ),
    (
        # Only scores differ: a float column is no segment, and is not proposed for by=.
        "stacked-runs-differing-in-scores-only",
        lambda r: pl.concat(
            [
                r.with_columns(score=pl.Series([0.9, 0.8, 0.7])),
                r.with_columns(score=pl.Series([0.6, 0.5, 0.4])),
            ]
        ),
        same,
        {},
        DuplicateRowsError,
        "recs: expected one row per rank within a user, found 6 rows that repeat one, e.g. user=1, item=10, rank=1; the rows differ in column(s) 'score'",
    ),
    (
        "inf-relevance",
        same,
        lambda t: t.with_columns(relevance=pl.Series([1.0, float("inf")])),
        {},
        InvalidValueError,
        "truth: expected finite numbers in column 'relevance', found 1 NaN or infinite value(s), e.g. user=2, item=12, relevance=inf",
    ),
    (
        "exponential-gain-overflows",
        same,
        lambda t: t.with_columns(relevance=pl.Series([1.0, 2000.0])),
        {"gain": "exponential", "metrics": "ndcg"},
        InvalidValueError,
        "truth: expected values of magnitude at most 1000 in column 'relevance' (with gain='exponential', DCG sums 2^rel - 1 and must stay finite), found 1 larger, e.g. user=2, item=12, relevance=2000.0",
    ),
    (
        "linear-gain-sum-overflows",
        same,
        lambda t: t.with_columns(relevance=pl.Series([1.5e308, 1.5e308])),
        {"metrics": "ndcg"},
        InvalidValueError,
        "truth: expected values of magnitude at most 2^1000 (~1.07e301) in column 'relevance' (with gain='linear', DCG sums these gains and must stay finite), found 2 larger, e.g. user=1, item=11, relevance=1.5e+308",
    ),
    (
        "rank-inf",
        lambda r: r.with_columns(rank=pl.Series([1.0, float("inf"), 1.0])),
        same,
        {},
        InvalidValueError,
        "recs: expected integer ranks in column 'rank', found 1 non-integer value(s), e.g. user=1, item=11, rank=inf",
    ),
    (
        "rank-minus-inf",
        lambda r: r.with_columns(rank=pl.Series([1.0, float("-inf"), 1.0])),
        same,
        {},
        InvalidValueError,
        "recs: expected ranks >= 1 in column 'rank' (1 = top), found 1 rank(s) below 1, e.g. user=1, item=11, rank=-inf",
    ),
    (
        "rank-minus-1e19",
        lambda r: r.with_columns(rank=pl.Series([1.0, -1e19, 1.0])),
        same,
        {},
        InvalidValueError,
        "recs: expected ranks >= 1 in column 'rank' (1 = top), found 1 rank(s) below 1, e.g. user=1, item=11, rank=-1e+19",
    ),
    (
        "float-user-id-not-whole",
        same,
        lambda t: t.with_columns(user=pl.Series([1.0, 2.5])),
        {},
        InvalidValueError,
        "truth: expected whole-number ids in float key column 'user' (matched as Int64 ids against the other frames), found 1 other value(s), e.g. user=2.5",
    ),
    (
        "string-against-integer-ids",
        lambda r: r.with_columns(pl.col("user").cast(pl.String)),
        same,
        {},
        InvalidValueError,
        "recs and truth: expected key column 'user' to have dtypes whose values can be matched exactly, found String in recs and Int64 in truth",
    ),
    (
        "sample-with-other-metrics",
        lambda r: r.with_columns(draw=pl.lit(1)),
        same,
        {"sample": "draw", "metrics": ["ee_loss", "ndcg"]},
        InvalidOptionError,
        "sample: expected only metrics that read several rankings per user (ee_disparity, ee_loss, ee_relevance) with 'draw' as the sample column, got 'ndcg@2'; evaluate them in a call without sample=",
    ),
    (
        "sample-is-the-user-column",
        same,
        same,
        {"sample": "user", "metrics": "ee_loss"},
        InvalidOptionError,
        "user and sample: expected different columns of recs, got 'user' for both",
    ),
    (
        "null-sample",
        lambda r: r.with_columns(draw=pl.Series([1, None, 1])),
        same,
        {"sample": "draw", "metrics": "ee_loss"},
        InvalidValueError,
        "recs: expected no nulls in key column 'draw', found 1 null row(s), e.g. user=1, draw=None, item=11, rank=2",
    ),
    (
        "item-twice-in-one-sample",
        lambda r: r.with_columns(draw=pl.lit(1), item=pl.Series([10, 10, 10])),
        same,
        {"sample": "draw", "metrics": "ee_loss"},
        DuplicateRowsError,
        "recs: expected one row per (user, sample, item), found 2 rows that repeat one, e.g. user=1, draw=1, item=10, rank=1 (pass on_duplicate='first' to keep the best-ranked row)",
    ),
    (
        "propensity-column-missing",
        same,
        same,
        {"propensity": "p"},
        MissingColumnsError,
        "truth: expected column 'p', not found; available columns: 'user', 'item', 'relevance'",
    ),
    (
        "null-propensity",
        same,
        lambda t: t.with_columns(p=pl.Series([0.5, None], dtype=pl.Float64)),
        {"propensity": "p"},
        InvalidValueError,
        "truth: expected a propensity in (0, 1] on every truth row in column 'p', found 1 null row(s), e.g. user=2, item=12, relevance=2.0, p=None",
    ),
    (
        "propensity-out-of-range",
        same,
        lambda t: t.with_columns(p=pl.Series([0.0, 1.5])),
        {"propensity": "p"},
        InvalidValueError,
        "truth: expected a propensity in (0, 1] on every truth row in column 'p', found 2 row(s) outside it (P <= 0, P > 1 or NaN), e.g. user=1, item=11, relevance=1.0, p=0.0",
    ),
    (
        "propensity-not-numeric",
        same,
        lambda t: t.with_columns(p=pl.lit("high")),
        {"propensity": "p"},
        InvalidValueError,
        "truth: expected column 'p' to hold numeric values, found dtype String",
    ),
    (
        "propensity-gamma-missing",
        same,
        same,
        {"propensity": "popularity", "train": RECS.select("user", "item")},
        InvalidOptionError,
        "propensity_gamma: expected a finite number >= -1 with propensity='popularity' (P = (n / max n)^((gamma + 1) / 2); it has no default), got None",
    ),
    (
        "propensity-gamma-below-minus-one",
        same,
        same,
        {"propensity": "popularity", "propensity_gamma": -2, "train": RECS.select("user", "item")},
        InvalidOptionError,
        "propensity_gamma: expected a finite number >= -1 or None, got -2",
    ),
    (
        "max-weight-not-positive",
        same,
        same,
        {"propensity": "p", "max_weight": 0},
        InvalidOptionError,
        "max_weight: expected a finite number > 0 or None, got 0",
    ),
    (
        "ips-unknown",
        same,
        same,
        {"ips": "dr"},
        InvalidOptionError,
        "ips: expected one of 'snips', 'ips', got 'dr'",
    ),
]


@pytest.mark.parametrize(
    ("change_recs", "change_truth", "kwargs", "error", "message"),
    [pytest.param(*case[1:], id=case[0]) for case in CASES],
)
def test_bad_input_message(
    constructor: Constructor,
    change_recs: Callable[[pl.DataFrame], pl.DataFrame],
    change_truth: Callable[[pl.DataFrame], pl.DataFrame],
    kwargs: dict[str, Any],
    error: type[FrameMetricsError],
    message: str,
) -> None:
    recs, truth = constructor(change_recs(RECS)), constructor(change_truth(TRUTH))
    kwargs = {"k": 2, **kwargs}
    if is_pandas_numpy(recs) and message.endswith("relevance=nan"):
        # numpy-backed pandas has no missing value but NaN: it arrives as a null.
        message = "truth: expected no nulls in relevance column 'relevance', found 1 null row(s), e.g. user=2, item=12, relevance=None"
    with pytest.raises(error, match=f"^{re.escape(message)}$"):
        fm.evaluate(recs, truth, **kwargs)
    assert issubclass(error, ValueError)


#: What an error is about, as its attributes say (FrameMetricsError.option, .frame and
#: .columns): the keyword, input frame and columns the call got wrong. A message about an
#: option begins with its name.
ABOUT: list[tuple[str, Callable[[pl.DataFrame], pl.DataFrame], dict[str, Any], dict[str, Any]]] = [
    ("head-share", same, {"head_share": 2}, {"option": "head_share"}),
    ("threshold", same, {"threshold": -1}, {"option": "threshold"}),
    ("gain-table", same, {"gain": {1: -1}}, {"option": "gain"}),
    ("choice", same, {"empty": "never"}, {"option": "empty"}),
    ("cutoff", same, {"k": 0}, {"option": "k"}),
    ("metric-string", same, {"metrics": "ndcg(gian=binary)@2"}, {"option": "metrics"}),
    ("convention", same, {"convention": "trec"}, {"option": "convention"}),
    ("user-repeats", same, {"user": ["user", "user"]}, {"option": "user"}),
    ("by-is-user", same, {"by": "user"}, {"option": "by", "columns": ("user",)}),
    (
        "missing-column",
        same,
        {"user": "usr"},
        {"frame": "recs", "columns": ("usr",)},
    ),
    (
        "null-user",
        lambda r: r.with_columns(user=pl.Series([1, None, 2])),
        {},
        {"frame": "recs"},
    ),
    (
        "duplicate-pair",
        lambda r: r.with_columns(item=pl.Series([10, 10, 10])),
        {},
        {"frame": "recs"},
    ),
    ("unknown-metric", same, {"metrics": "ndgc"}, {"option": "metrics"}),
    ("metric-cutoff", same, {"metrics": "rmse@2"}, {"option": "metrics"}),
    ("aggregate-not-bool", same, {"aggregate": "mean"}, {"option": "aggregate"}),
    ("buckets", same, {"buckets": 0}, {"option": "buckets"}),
    (
        "corpus-per-user",
        same,
        {"metrics": ["precision", "coverage"]},
        {"option": "aggregate", "columns": ("coverage@2",)},
    ),
    (
        "idcg-k-linear-gain",
        same,
        {"metrics": "ndcg", "idcg": "k"},
        {"option": "idcg"},
    ),
    (
        "ties-average-undefined",
        lambda r: r.with_columns(score=pl.Series([0.5, 0.5, 0.5])),
        {"metrics": "mrr", "score": "score", "ties": "average"},
        {"option": "ties"},
    ),
]


@pytest.mark.parametrize(
    ("change_recs", "kwargs", "about"), [pytest.param(*case[1:], id=case[0]) for case in ABOUT]
)
def test_an_error_says_what_it_is_about(
    constructor: Constructor,
    change_recs: Callable[[pl.DataFrame], pl.DataFrame],
    kwargs: dict[str, Any],
    about: dict[str, Any],
) -> None:
    recs, truth = constructor(change_recs(RECS)), constructor(TRUTH)
    with pytest.raises(FrameMetricsError) as raised:
        fm.evaluate(recs, truth, **{"k": 2, **kwargs})
    error = raised.value
    expected = {"option": None, "frame": None, "columns": ()} | about
    assert (error.option, error.frame, error.columns) == tuple(expected.values())
    if error.option is not None:
        assert str(error).startswith(f"{error.option}: ")
        assert str(error) == f"{error.option}: " + "".join(map(str, error.parts))


def test_a_missing_input_names_the_metric_and_the_frame(constructor: Constructor) -> None:
    with pytest.raises(MissingInputError) as raised:
        fm.evaluate(constructor(RECS), constructor(TRUTH), metrics="novelty@2")
    error = raised.value
    assert (error.metric, error.frame, error.option) == ("novelty", "train", None)
    assert str(error) == f"novelty: expected train= ({error.purpose}), got None"
    with pytest.raises(MissingInputError) as raised:
        fm.evaluate(constructor(RECS), constructor(TRUTH), metrics="serendipity@2")
    assert (raised.value.metric, raised.value.frame) == ("serendipity", "baseline")
    assert str(raised.value).endswith(
        "; or pass unexpected='history' to judge against train= instead"
    )


@pytest.mark.parametrize(
    "kwargs",
    [{"user": "usr"}, {"metrics": "novelty"}, {"head_share": 2}, {"metrics": "ndgc"}],
    ids=["missing-column", "missing-input", "option", "metric"],
)
def test_an_error_comes_back_whole_from_another_process(kwargs: dict[str, Any]) -> None:
    """Pickled (as from a Dask or Spark worker), an error keeps its class, message and
    attributes, whatever its constructor takes."""
    with pytest.raises(FrameMetricsError) as raised:
        fm.evaluate(RECS, TRUTH, k=2, **kwargs)
    error = raised.value
    back = pickle.loads(pickle.dumps(error))
    assert (type(back), str(back), back.args) == (type(error), str(error), error.args)
    assert vars(back) == vars(error)
    missing = MissingDependencyError("pyarrow", "a pyarrow Table result", "arrow")
    back = pickle.loads(pickle.dumps(missing))
    assert (type(back), str(back), back.name) == (MissingDependencyError, str(missing), "pyarrow")


def test_lazy_input_raises_at_call_not_at_collect() -> None:
    """Checks run when evaluate is called, so a LazyFrame result is known to be valid."""
    bad = RECS.with_columns(rank=pl.Series([0, 2, 1])).lazy()
    with pytest.raises(InvalidValueError):
        fm.evaluate(bad, TRUTH.lazy(), k=2)


def test_validate_false_skips_value_checks() -> None:
    dup = RECS.with_columns(rank=pl.Series([1, 1, 1]))
    with pytest.raises(DuplicateRowsError):
        fm.evaluate(dup, TRUTH, k=2)
    fm.evaluate(dup, TRUTH, k=2, validate=False)  # the caller vouches for the input


def test_unsupported_frame_type() -> None:
    with pytest.raises(
        InvalidOptionError,
        match=r"^expected a polars DataFrame, polars LazyFrame, pandas DataFrame, pyarrow Table "
        r"\(or other object with __arrow_c_stream__\) or DuckDB relation, got dict$",
    ):
        fm.evaluate({"user": [1]}, TRUTH, k=2)


LONG = pl.DataFrame(
    {"user": [1, 1, 1], "item": [10, 11, 12], "rank": [1, 2, None], "relevance": [0.0, 1.0, 2.0]}
)


@pytest.mark.parametrize(
    ("change", "error", "message"),
    [
        (
            lambda df: df.with_columns(rank=pl.Series([1, 1, None])),
            DuplicateRowsError,
            "long table: expected one row per rank within a user, found 2 rows that repeat one, "
            "e.g. user=1, item=10, rank=1, relevance=0.0",
        ),
        (
            lambda df: df.with_columns(item=pl.Series([10, 10, 12])),
            DuplicateRowsError,
            "long table: expected one row per (user, item) pair, found 2 rows that repeat one, "
            "e.g. user=1, item=10, rank=1, relevance=0.0 (pass on_duplicate='first' to keep the best-ranked row)",
        ),
        (
            # Two models' long tables stacked: their unranked truth rows repeat no rank.
            lambda df: pl.concat([df.with_columns(model=pl.lit(m)) for m in "ab"]),
            DuplicateRowsError,
            "long table: expected one row per rank within a user, found 4 rows that repeat one, "
            "e.g. user=1, item=10, rank=1, relevance=0.0; the rows differ in column(s) 'model': "
            "if they hold several models or segments, pass by='model'",
        ),
        (
            lambda df: df.with_columns(relevance=pl.Series([0.0, -1.0, 2.0])),
            InvalidValueError,
            "long table: expected relevance >= 0 in column 'relevance', found 1 negative value(s), "
            "e.g. user=1, item=11, rank=2, relevance=-1.0",
        ),
        (
            lambda df: df.drop("relevance"),
            MissingColumnsError,
            "long table: expected column 'relevance', not found; available columns: 'user', 'item', 'rank'",
        ),
    ],
    ids=[
        "duplicate-rank",
        "duplicate-pair",
        "stacked-models-without-by",
        "negative-relevance",
        "missing-relevance",
    ],
)
def test_bad_long_table(
    constructor: Constructor,
    change: Callable[[pl.DataFrame], pl.DataFrame],
    error: type[FrameMetricsError],
    message: str,
) -> None:
    frame = constructor(change(LONG))
    if is_pandas_numpy(frame):  # a rank column holding a null is float64 in numpy pandas
        message = re.sub(r"rank=(\d+),", r"rank=\1.0,", message)
    with pytest.raises(error, match=f"^{re.escape(message)}$"):
        fm.evaluate(frame, k=2)


#: Two models' lists in one long table; the truth row no model recommended has no model.
LONG_BY = pl.DataFrame(
    {
        "model": ["a", "a", "b", None],
        "user": [1, 1, 1, 1],
        "item": [10, 11, 10, 12],
        "rank": [1, 2, 1, None],
        "relevance": [None, 1.0, None, 2.0],
    }
)


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        pytest.param(
            LONG_BY,
            "long table: expected no nulls in key column 'model', found 1 null row(s), e.g. "
            "model=None, user=1, item=12, rank=None, relevance=2.0; they have no rank (truth "
            "rows not recommended): with by=, each 'model' group of a long table needs its own "
            "truth rows, so repeat them once per 'model' value, or pass truth separately "
            "(truth=, without 'model': it then applies to every 'model' value)",
            id="unranked-truth-rows",
        ),
        pytest.param(
            # A ranked row without a model is a list of no model: nothing to propose.
            LONG_BY.with_columns(model=pl.Series(["a", None, "b", "b"])),
            "long table: expected no nulls in key column 'model', found 1 null row(s), e.g. "
            "model=None, user=1, item=11, rank=2, relevance=1.0",
            id="ranked-row",
        ),
    ],
)
def test_long_table_by_with_null_groups(
    constructor: Constructor, frame: pl.DataFrame, message: str
) -> None:
    """Truth rows of a long table carry the by columns too; say how to give them."""
    long = constructor(frame)
    if is_pandas_numpy(long):  # a rank column holding a null is float64 in numpy pandas
        message = re.sub(r"rank=(\d+),", r"rank=\1.0,", message)
    for call in (fm.evaluate, fm.diagnose):
        with pytest.raises(InvalidValueError, match=f"^{re.escape(message)}$"):
            call(long, k=2, by="model")


def test_score_on_long_table_is_refused() -> None:
    with pytest.raises(InvalidOptionError, match=r"^score: expected None for a long table"):
        fm.evaluate(LONG, k=2, score="rank")


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        pytest.param(
            {"user": [1, 2], "item": ["a", 3], "rank": [1, 1]},
            "recs: expected column 'item' to hold values of one kind, found dtype object holding "
            "int, str values",
            id="mixed-object-column",
        ),
        pytest.param(
            None,
            "recs: expected distinct column names, found 'user' more than once",
            id="repeated-column-name",
        ),
    ],
)
def test_pandas_columns_polars_cannot_read(
    frame: dict[str, list[Any]] | None, message: str
) -> None:
    import pandas as pd

    recs = (
        pd.DataFrame(frame)
        if frame is not None
        else pd.DataFrame([[1, 10, 1]], columns=["user", "user", "rank"])
    )
    with pytest.raises(InvalidValueError, match=f"^{re.escape(message)}"):
        fm.evaluate(recs, TRUTH.to_pandas(), k=2)


def test_every_error_and_warning_is_exported() -> None:
    """What the package raises or warns is importable from ``frame_metrics`` itself."""
    import inspect

    from frame_metrics import errors

    defined = {
        name
        for name, cls in inspect.getmembers(errors, inspect.isclass)
        if cls.__module__ == errors.__name__
        and issubclass(cls, (fm.FrameMetricsError, fm.FrameMetricsWarning))
    }
    assert {"UnknownKeywordError", "MissingInputError", "SmallSampleWarning"} <= defined
    assert defined <= set(fm.__all__)
    assert all(getattr(fm, name) is getattr(errors, name) for name in defined)
