"""Per-metric options ``name(option=value, ...)@k`` and the options they reach (spec section 8).

Covered here: the column names (the string as written); variants in one call agreeing with separate
calls that pass the options at call level; the exact error messages; the resolution order
(spec defaults < call convention < metric convention < call options < metric options);
``fm.conventions()`` and the CLI's ``--convention`` / ``--gain``; and the values of
``threshold=0``, gain tables, ``users=`` x ``empty=``, ``idcg="k"``, ``mrr_cutoff="none"``,
``relevant_set="listed"`` and ``gain_scope="positive"``, each checked against arithmetic
written out in the test or the spec's worked examples.

Every behaviour runs on every frame kind (the ``constructor`` fixture) and must give the
polars eager result to the bit.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import frame_metrics as fm
from frame_metrics.cli import main
from frame_metrics.errors import InvalidOptionError
from frame_metrics.options import OPTIONS
from tests.conftest import Constructor
from tests.conftest import assert_user_values as assert_close
from tests.conftest import evaluate_as_polars as run
from tests.conftest import user_values as values

LOG3 = math.log2(3)  # the discount of position 2
LOG5 = math.log2(5)  # position 4
LOG6 = math.log2(6)  # position 5
TOL = 1e-12


# --- helpers -----------------------------------------------------------------------------------


def raises_exactly(message: str) -> Any:
    return pytest.raises(InvalidOptionError, match=f"^{re.escape(message)}$")


# --- the table of the spec's worked examples -------------------------------------------------
# user 1: spec example 2 (relevance {a:3, b:2, c:1, d:3, e:0, f:0}, list [a, b, c]);
# users 2 and 3: spec example 3 (truth {B, D, Z}, lists [A,B,C,D,E] and [A,C,E,B,D]);
# user 4: a relevant item and no recommendations; user 5: recommendations and no truth;
# user 6: one judged item of relevance 0, recommended.

SPEC_RECS = pl.DataFrame(
    [
        *((1, item, rank) for rank, item in enumerate("abc", 1)),
        *((2, item, rank) for rank, item in enumerate("ABCDE", 1)),
        *((3, item, rank) for rank, item in enumerate("ACEBD", 1)),
        (5, "a", 1),
        (5, "b", 2),
        (6, "x", 1),
    ],
    schema={"user": pl.Int64, "item": pl.String, "rank": pl.Int64},
    orient="row",
)
SPEC_TRUTH = pl.DataFrame(
    [
        *((1, item, rel) for item, rel in {"a": 3, "b": 2, "c": 1, "d": 3, "e": 0, "f": 0}.items()),
        *((u, item, 1) for u in (2, 3) for item in "BDZ"),
        (4, "a", 2),
        (6, "x", 0),
    ],
    schema={"user": pl.Int64, "item": pl.String, "relevance": pl.Int64},
    orient="row",
)

# Spec example 2 at k = 3.
EX2_DCG = 4.7618595071429155
EX2_IDCG = 5.892789260714372
EX2_NDCG = 0.808082437104775


# --- column names: the string the caller wrote (spec section 8) -------------------------------

#: Metric strings that can share one call: each names its own column, exactly as written.
AS_WRITTEN: list[str] = [
    "ap(ap_denominator=min_k)@10",  # the call's value: still its own column
    "ap(ap_denominator=relevant)@10",
    "ndcg(threshold=4)@5",
    "ndcg(threshold=2.50)@5",
    "ndcg(gain={3: 7, 2: 3})@5",
    "ndcg(gain={2.0: 4, 3.0: 10.0})@3",
    "ndcg( threshold = 2 , gain = binary )@3",
    "ndcg(gain=binary,threshold=2,idcg=k)@5",
    "Ndcg(gain=exponential)@3",  # the package's names in any case
    "map(ap_denominator=k)@3",
    "ndcg(convention=rectools)@10",
    "rbp(persistence=.95)",
    "rbp(persistence=0.8)",
    "err(max_relevance=4.0)@5",
    "recall(empty=skip)@5",
    "precision()@3",
    "mrr(mrr_cutoff='none')@2",
    "ap @5",
]


def test_columns_are_the_strings_as_written(constructor: Constructor) -> None:
    got = run(constructor, SPEC_RECS, SPEC_TRUTH, metrics=AS_WRITTEN)
    assert got.columns == ["user", *AS_WRITTEN]
    means = run(constructor, SPEC_RECS, SPEC_TRUTH, metrics=AS_WRITTEN, aggregate=True)
    assert means.columns == ["n_users", *AS_WRITTEN]


@pytest.mark.parametrize(
    ("call", "metric"),
    [
        ({}, "map@10"),
        ({}, "ndcg(gain={2: 3, 3: 7})@10"),
        ({"convention": "trec_eval"}, "ap(ap_denominator=relevant)@10"),
        ({"convention": "rectools"}, "ap(ap_denominator=relevant)@10"),
        ({"ap_denominator": "relevant"}, "ap(ap_denominator=relevant)@10"),
        ({"convention": "rectools"}, "ndcg(convention=rectools)@10"),
        ({"convention": "trec_eval"}, "rbp(persistence=0.9)"),
    ],
)
def test_a_column_is_named_by_the_string_requested(
    constructor: Constructor, call: dict[str, Any], metric: str
) -> None:
    """The issue's cases: the result is indexed by what was asked, whatever it means."""
    got = run(constructor, SPEC_RECS, SPEC_TRUTH, metrics=[metric], **call)
    assert got.columns == ["user", metric]
    means = run(constructor, SPEC_RECS, SPEC_TRUTH, metrics=metric, aggregate=True, **call)
    assert means.columns == ["n_users", metric]


def test_two_strings_of_one_computation_give_two_columns(constructor: Constructor) -> None:
    metrics = ["ap@10", "map@10", "ap(ap_denominator=min_k)@10", "ap(empty=skip) @10"]
    # The same string twice is one column.
    got = run(constructor, SPEC_RECS, SPEC_TRUTH, metrics=[*metrics, "map@10"])
    assert got.columns == ["user", *metrics]
    # Each is AP@10 with D = min(|R|, 10). User 1: hits at 1, 2, 3 (a, b, c), |R| = 4.
    # Users 2 and 3: spec example 3, 1/3 and (1/4 + 2/5) / 3. User 4: no recommendations.
    want = {1: 3 / 4, 2: (1 / 2 + 2 / 4) / 3, 3: (1 / 4 + 2 / 5) / 3, 4: 0.0}
    for column in metrics:
        assert_close(values(got, column), want)
    means = run(constructor, SPEC_RECS, SPEC_TRUTH, metrics=metrics, aggregate=True)
    assert means.columns == ["n_users", *metrics]
    assert means.row(0) == (4, *[means.row(0)[1]] * 4)
    assert math.isclose(means.row(0)[1], math.fsum(want.values()) / 4, rel_tol=TOL)


def test_a_name_without_cutoff_takes_every_k(constructor: Constructor) -> None:
    both = run(constructor, SPEC_RECS, SPEC_TRUTH, metrics="ndcg(gain=binary)", k=[5, 3])
    assert both.columns == ["user", "ndcg(gain=binary)@3", "ndcg(gain=binary)@5"]
    default = run(constructor, SPEC_RECS, SPEC_TRUTH, metrics="ndcg(gain=binary)")
    assert default.columns == ["user", "ndcg(gain=binary)@10"]  # spec section 8: k = 10
    alias = run(constructor, SPEC_RECS, SPEC_TRUTH, metrics=["map", "ap"], k=[3])
    assert alias.columns == ["user", "map@3", "ap@3"]


def test_an_option_overriding_the_metric_convention(constructor: Constructor) -> None:
    # User 1 under rectools (every truth row relevant, binary gain, the ideal is 3 slots
    # of gain 1): 1.0; at threshold=2 (the metric's own option wins) only a and b of the
    # list are relevant: (1 + 1/log2(3)) / the same ideal.
    ideal = 1 + 1 / LOG3 + 1 / 2
    metrics = ["ndcg(convention=rectools)@3", "ndcg(convention=rectools, threshold=2)@3"]
    got = run(constructor, SPEC_RECS, SPEC_TRUTH, metrics=metrics)
    assert got.columns == ["user", *metrics]
    assert values(got, metrics[0])[1] == 1.0
    assert math.isclose(values(got, metrics[1])[1], (1 + 1 / LOG3) / ideal, rel_tol=TOL)


# --- variants in one call equal separate calls with call-level options -----------------------

#: (metric string in the call, and its column; call-level options; plain metric).
VARIANTS: list[tuple[str, dict[str, Any], str]] = [
    ("ap(ap_denominator=relevant)@3", {"ap_denominator": "relevant"}, "ap@3"),
    ("ap(ap_denominator=hits)@3", {"ap_denominator": "hits"}, "ap@3"),
    ("ap(ap_denominator=k)@5", {"ap_denominator": "k"}, "ap@5"),
    ("ap(ap_denominator=relevant)@10", {"ap_denominator": "relevant"}, "ap@10"),
    ("ndcg(gain=exponential)@3", {"gain": "exponential"}, "ndcg@3"),
    ("ndcg(gain=binary)@3", {"gain": "binary"}, "ndcg@3"),
    ("ndcg(gain={3:10,2:4})@3", {"gain": {2: 4, 3: 10}}, "ndcg@3"),
    ("ndcg(threshold=2)@3", {"threshold": 2}, "ndcg@3"),
    ("ndcg(threshold=0)@3", {"threshold": 0}, "ndcg@3"),
    ("ndcg(idcg=k,gain=binary)@3", {"idcg": "k", "gain": "binary"}, "ndcg@3"),
    ("ndcg(relevant_set=listed)@3", {"relevant_set": "listed"}, "ndcg@3"),
    ("ndcg(convention=rectools)@10", {"convention": "rectools"}, "ndcg@10"),
    ("ndcg(convention=trec_eval)@3", {"convention": "trec_eval"}, "ndcg@3"),
    ("mrr(mrr_cutoff='none')@3", {"mrr_cutoff": "none"}, "mrr@3"),
    ("recall(users=recs)@3", {"users": "recs"}, "recall@3"),
    ("recall(empty=zero)@3", {"empty": "zero"}, "recall@3"),
    ("precision(convention=ranx)@5", {"convention": "ranx"}, "precision@5"),
    ("rbp(persistence=0.5)", {"persistence": 0.5}, "rbp"),
    ("err(max_relevance=4)@3", {"max_relevance": 4}, "err@3"),
    ("bpref(threshold=2)", {"threshold": 2}, "bpref"),
]
PLAIN = [
    "ap@3",
    "ap@5",
    "ap@10",
    "ndcg@3",
    "ndcg@10",
    "mrr@3",
    "recall@3",
    "precision@5",
    "rbp",
    "err@3",
    "bpref",
]


def test_variants_in_one_call_equal_separate_calls(constructor: Constructor) -> None:
    metrics = [*PLAIN, *(m for m, _, _ in VARIANTS)]
    together = run(constructor, SPEC_RECS, SPEC_TRUTH, metrics=metrics)
    assert together.columns == ["user", *metrics]
    means = run(constructor, SPEC_RECS, SPEC_TRUTH, metrics=metrics, aggregate=True)
    for column, call, plain in VARIANTS:
        alone = run(constructor, SPEC_RECS, SPEC_TRUTH, metrics=plain, **call)
        assert values(together, column) == values(alone, plain), column
        alone_mean = run(constructor, SPEC_RECS, SPEC_TRUTH, metrics=plain, aggregate=True, **call)
        assert means[column].item() == alone_mean[plain].item(), column
    # The variants differ from the plain metric: each column computed what it says.
    for column, _, plain in VARIANTS:
        if column != "ap(ap_denominator=relevant)@10":  # |R| <= 10: min(|R|, 10) = |R|
            assert values(together, column) != values(together, plain), column


def test_variant_values_by_hand(constructor: Constructor) -> None:
    """The variants' values on the spec's examples, written out."""
    metrics = [m for m, _, _ in VARIANTS[:11]] + ["ndcg@3", "ap@3"]
    got = run(constructor, SPEC_RECS, SPEC_TRUTH, metrics=metrics)
    # AP@3. User 1: hits at 1, 2, 3, sum 3, |R| = 4 (a, b, c, d). User 2: one hit, B at
    # 2: sum 1/2, |R| = 3. User 3: [A, C, E] holds no hit. User 4: no recommendations.
    assert_close(values(got, "ap@3"), {1: 3 / 3, 2: 0.5 / 3, 3: 0.0, 4: 0.0})
    assert_close(
        values(got, "ap(ap_denominator=relevant)@3"), {1: 3 / 4, 2: 0.5 / 3, 3: 0.0, 4: 0.0}
    )
    assert_close(values(got, "ap(ap_denominator=hits)@3"), {1: 3 / 3, 2: 0.5 / 1, 3: 0.0, 4: 0.0})
    # D = k at k = 5: user 1 sum 3 (|R| = 4 would give 3/4); user 2 (B at 2, D at 4)
    # sum 1/2 + 2/4; user 3 (B at 4, D at 5) sum 1/4 + 2/5.
    assert_close(
        values(got, "ap(ap_denominator=k)@5"), {1: 3 / 5, 2: 1 / 5, 3: (1 / 4 + 2 / 5) / 5, 4: 0.0}
    )
    # Spec example 3 at k = 10: 1/3 and 0.21666... with D = |R| = 3.
    assert_close(
        values(got, "ap(ap_denominator=relevant)@10"),
        {1: 3 / 4, 2: (1 / 2 + 2 / 4) / 3, 3: (1 / 4 + 2 / 5) / 3, 4: 0.0},
    )
    # NDCG@3 of user 1: spec example 2, then each gain.
    ndcg = values(got, "ndcg@3")
    assert math.isclose(ndcg[1], EX2_NDCG, rel_tol=TOL)
    assert math.isclose(ndcg[1], EX2_DCG / EX2_IDCG, rel_tol=TOL)
    exp_dcg, exp_idcg = 7 + 3 / LOG3 + 1 / 2, 7 + 7 / LOG3 + 3 / 2
    assert math.isclose(values(got, "ndcg(gain=exponential)@3")[1], exp_dcg / exp_idcg, rel_tol=TOL)
    # Binary: 4 relevant items, the 3 listed ones first: the ideal list itself.
    assert math.isclose(values(got, "ndcg(gain=binary)@3")[1], 1.0, rel_tol=TOL)
    # A gain table: 3 -> 10, 2 -> 4; level 1 (c) is not in it and keeps its relevance.
    table_dcg, table_idcg = 10 + 4 / LOG3 + 1 / 2, 10 + 10 / LOG3 + 4 / 2
    assert math.isclose(
        values(got, "ndcg(gain={3:10,2:4})@3")[1], table_dcg / table_idcg, rel_tol=TOL
    )
    # threshold=2: R = {a, b, d}; c (rel 1) gains nothing.
    assert math.isclose(
        values(got, "ndcg(threshold=2)@3")[1], (3 + 2 / LOG3) / (3 + 3 / LOG3 + 2 / 2), rel_tol=TOL
    )
    # idcg="k" (binary gain only): three slots of gain 1, filled by a, b and c.
    assert values(got, "ndcg(idcg=k,gain=binary)@3")[1] == 1.0
    # relevant_set="listed": user 1's ideal list is a, b, c (d was not recommended).
    assert math.isclose(values(got, "ndcg(relevant_set=listed)@3")[1], 1.0, rel_tol=TOL)
    # RecTools (threshold 0, binary gain, ideal = k slots of gain 1, users in truth).
    rectools = run(constructor, SPEC_RECS, SPEC_TRUTH, metrics="ndcg(convention=rectools)@10")
    ideal_10 = math.fsum(1 / math.log2(p + 1) for p in range(1, 11))
    assert_close(
        values(rectools, "ndcg(convention=rectools)@10"),
        {
            1: (1 + 1 / LOG3 + 1 / 2) / ideal_10,
            2: (1 / LOG3 + 1 / LOG5) / ideal_10,  # B at 2, D at 4
            3: (1 / LOG5 + 1 / LOG6) / ideal_10,  # B at 4, D at 5
            4: 0.0,
            6: 1 / ideal_10,  # x (relevance 0) is relevant under threshold 0
        },
    )
    # User 2 under "listed": R = {B, D}; within 3 only B (rank 2): DCG = 1/log2(3),
    # IDCG = 1 + 1/log2(3).
    assert math.isclose(
        values(got, "ndcg(relevant_set=listed)@3")[2], (1 / LOG3) / (1 + 1 / LOG3), rel_tol=TOL
    )


# --- errors -----------------------------------------------------------------------------------

_EXPECTED = "metrics: expected '<name>', '<name>@<k>' or '<name>(<option>=<value>, ...)@<k>'"
#: The options a metric string may set: the table's per-metric options, and a preset.
_KNOWN = ", ".join(sorted(["convention", *(o.name for o in OPTIONS if o.per_metric)]))
_CONVENTIONS = (
    "'trec_eval', 'ranx', 'rectools', 'recommenders', 'sklearn', 'torchmetrics', 'replay'"
)

ERRORS: list[tuple[str, str]] = [
    # Unknown options, with a hint when one is close.
    (
        "ndcg(gian=binary)@5",
        f"metrics: expected options among {_KNOWN} in 'ndcg(gian=binary)@5', got 'gian' "
        "(did you mean 'gain'?)",
    ),
    ("ndcg(foo=1)@5", f"metrics: expected options among {_KNOWN} in 'ndcg(foo=1)@5', got 'foo'"),
    (
        "ndcg(on_duplicate=first)@5",
        f"metrics: expected options among {_KNOWN} in 'ndcg(on_duplicate=first)@5', "
        "got 'on_duplicate'",
    ),
    # Options the metric does not read.
    (
        "precision(gain=binary)@5",
        "metrics: expected options precision reads (convention, empty, ips, relevant_set, "
        "threshold, ties, users), got gain in 'precision(gain=binary)@5'",
    ),
    (
        "mrr(ap_denominator=k, gain=binary)@5",
        "metrics: expected options mrr reads (convention, empty, ips, mrr_cutoff, "
        "relevant_set, threshold, ties, users), got ap_denominator, gain in "
        "'mrr(ap_denominator=k, gain=binary)@5'",
    ),
    # Non-ranking metrics take no options.
    (
        "rmse(threshold=1)",
        "metrics: expected options rmse reads (none), got threshold in 'rmse(threshold=1)'",
    ),
    (
        "novelty(threshold=1)@5",
        "metrics: expected options novelty reads (ties), got threshold in 'novelty(threshold=1)@5'",
    ),
    # A repeated option.
    (
        "ap(ap_denominator=relevant, ap_denominator=k)@5",
        "metrics: expected each option once in 'ap(ap_denominator=relevant, ap_denominator=k)@5', "
        "got 'ap_denominator' twice",
    ),
    # Malformed strings.
    (
        "ap(ap_denominator)@5",
        f"{_EXPECTED}, got 'ap(ap_denominator)@5': 'ap_denominator' has no '='",
    ),
    ("ap(ap_denominator=relevant@5", f"{_EXPECTED}, got 'ap(ap_denominator=relevant@5'"),
    ("ap(ap_denominator=relevant)x", f"{_EXPECTED}, got 'ap(ap_denominator=relevant)x'"),
    (
        "ap(ap_denominator=a b)@5",
        f"{_EXPECTED}, got 'ap(ap_denominator=a b)@5': cannot read the value 'a b'",
    ),
    ("ndcg(gain=[1])@5", f"{_EXPECTED}, got 'ndcg(gain=[1])@5': cannot read the value '[1]'"),
    (
        "ndcg(gain={2:x})@5",
        f"{_EXPECTED}, got 'ndcg(gain={{2:x}})@5': '{{2:x}}' is not a {{level: gain}} table",
    ),
    (
        "ap(ap_denominator=relevant)@x",
        "metrics: expected '<name>@<int k>', got 'ap(ap_denominator=relevant)@x'",
    ),
    (
        "rbp(persistence=0.9)@3",
        "metrics: expected 'rbp' without a cutoff (it has none), got 'rbp(persistence=0.9)@3'",
    ),
    # Bad values: the option's own message.
    (
        "ap(ap_denominator=foo)@5",
        "ap_denominator: expected one of 'min_k', 'relevant', 'hits', 'k', got 'foo'",
    ),
    (
        "ndcg(gain=log)@5",
        "gain: expected one of 'linear', 'exponential', 'binary' or a {relevance level: gain} "
        "table such as {2: 3, 3: 7}, got 'log'",
    ),
    (
        "ndcg(gain={2:-1})@5",
        "gain: expected a {relevance level: gain} table of finite numbers >= 0, got -1 in {2: -1}",
    ),
    (
        "ndcg(gain={})@5",
        "gain: expected a {relevance level: gain} table of finite numbers >= 0, got {}",
    ),
    ("ndcg(threshold=-1)@5", "threshold: expected a finite number >= 0 or None, got -1"),
    ("ndcg(threshold=True)@5", "threshold: expected a finite number >= 0 or None, got 'True'"),
    ("rbp(persistence=1.5)", "persistence: expected a number in (0, 1) or None, got 1.5"),
    ("err(max_relevance=0)@3", "max_relevance: expected a number in (0, 1000) or None, got 0"),
    ("recall(users=some)@3", "users: expected one of 'all', 'truth', 'recs', 'both', got 'some'"),
    ("ndcg(convention=foo)@5", f"convention: expected one of {_CONVENTIONS} or None, got 'foo'"),
    (
        "ap(ap_denominator=relevant)@0",
        "k: expected an int in [1, 1048576] or a list of them, got 0",
    ),
]


@pytest.mark.parametrize(("metric", "message"), ERRORS, ids=[m for m, _ in ERRORS])
def test_metric_string_errors(constructor: Constructor, metric: str, message: str) -> None:
    with raises_exactly(message):
        fm.evaluate(constructor(SPEC_RECS), constructor(SPEC_TRUTH), metrics=metric)


def test_bad_convention_message(constructor: Constructor) -> None:
    for name in ("foo", "trec"):
        with raises_exactly(f"convention: expected one of {_CONVENTIONS} or None, got {name!r}"):
            fm.evaluate(constructor(SPEC_RECS), constructor(SPEC_TRUTH), convention=name)


def test_an_empty_option_name_is_reported_as_such() -> None:
    with pytest.raises(InvalidOptionError) as info:
        fm.evaluate(SPEC_RECS, SPEC_TRUTH, metrics="ap(=3)@5")
    assert "has no '='" not in str(info.value)


def test_a_space_before_the_cutoff_after_options() -> None:
    assert fm.evaluate(SPEC_RECS, SPEC_TRUTH, metrics="ap @5").columns == ["user", "ap @5"]
    got = fm.evaluate(SPEC_RECS, SPEC_TRUTH, metrics=["ap@5", "ap(ap_denominator=relevant) @5"])
    assert got.columns == ["user", "ap@5", "ap(ap_denominator=relevant) @5"]
    # User 1: hits at 1, 2, 3 of |R| = 4 (min(4, 5) = 4 as well).
    assert got.row(0) == (1, 3 / 4, 3 / 4)


# --- resolution order ---------------------------------------------------------------------------
# One user, five items recommended in relevance order; precision@5 counts the relevant ones:
#   spec default (rel > 0)             -> b, c, d, e     4/5
#   call convention trec_eval (rel >= 1) -> c, d, e      3/5
#   metric convention rectools (>= 0)  -> a..e           5/5
#   call threshold=2                   -> d, e           2/5
#   metric threshold=3                 -> e              1/5

CHAIN_RECS = pl.DataFrame({"user": [1] * 5, "item": list("abcde"), "rank": [1, 2, 3, 4, 5]})
CHAIN_TRUTH = pl.DataFrame(
    {"user": [1] * 5, "item": list("abcde"), "relevance": [0.0, 0.5, 1.0, 2.0, 3.0]}
)


@pytest.mark.parametrize(
    ("call", "metric", "column", "expected"),
    [
        ({}, "precision@5", "precision@5", 4 / 5),
        ({"convention": "trec_eval"}, "precision@5", "precision@5", 3 / 5),
        (
            {"convention": "trec_eval"},
            "precision(convention=rectools)@5",
            "precision(convention=rectools)@5",
            5 / 5,
        ),
        (
            {"convention": "trec_eval", "threshold": 2},
            "precision(convention=rectools)@5",
            "precision(convention=rectools)@5",
            2 / 5,
        ),
        (
            {"convention": "trec_eval", "threshold": 2},
            "precision(convention=rectools, threshold=3)@5",
            "precision(convention=rectools, threshold=3)@5",
            1 / 5,
        ),
        # The metric's options beat the call's convention and options.
        ({"convention": "rectools"}, "precision(threshold=3)@5", "precision(threshold=3)@5", 1 / 5),
        ({"threshold": 2}, "precision(threshold=1)@5", "precision(threshold=1)@5", 3 / 5),
    ],
)
def test_resolution_order(
    constructor: Constructor, call: dict[str, Any], metric: str, column: str, expected: float
) -> None:
    got = run(constructor, CHAIN_RECS, CHAIN_TRUTH, metrics=metric, **call)
    assert got.columns == ["user", column]
    assert values(got, column) == {1: expected}


def test_resolution_order_in_one_call(constructor: Constructor) -> None:
    metrics = [
        "precision@5",
        "precision(convention=rectools)@5",
        "precision(convention=rectools,threshold=3)@5",
    ]
    got = run(
        constructor, CHAIN_RECS, CHAIN_TRUTH, metrics=metrics, convention="trec_eval", threshold=2
    )
    assert got.columns == ["user", *metrics]
    assert got.rows() == [(1, 2 / 5, 2 / 5, 1 / 5)]


def test_a_metric_threshold_of_none_is_the_spec_default(constructor: Constructor) -> None:
    # At call level None means "not given" (the convention's value stands); in a metric
    # string threshold=none is the metric's own explicit choice: the spec's rel > 0.
    call = run(
        constructor,
        CHAIN_RECS,
        CHAIN_TRUTH,
        metrics="precision@5",
        convention="trec_eval",
        threshold=None,
    )
    assert values(call, "precision@5") == {1: 3 / 5}
    got = run(
        constructor,
        CHAIN_RECS,
        CHAIN_TRUTH,
        metrics=["precision@5", "precision(threshold=none)@5"],
        convention="trec_eval",
        threshold=2,
    )
    assert got.columns == ["user", "precision@5", "precision(threshold=none)@5"]
    assert got.rows() == [(1, 2 / 5, 4 / 5)]


# --- conventions --------------------------------------------------------------------------------

CONVENTION_NAMES = {
    "trec_eval",
    "ranx",
    "rectools",
    "recommenders",
    "sklearn",
    "torchmetrics",
    "replay",
}


def test_conventions_table() -> None:
    table = fm.conventions()
    assert table.columns == [
        "convention",
        "peer",
        "version",
        "option",
        "value",
        "default",
        "metrics",
        "why",
        "source",
    ]
    assert all(dtype == pl.String for dtype in table.dtypes)
    assert set(table["convention"].to_list()) == CONVENTION_NAMES
    assert set(fm.CONVENTIONS) == CONVENTION_NAMES
    # The default column is the spec's (sections 1-3 and 8).
    spec_defaults = {
        "threshold": "none",
        "gain": "linear",
        "ap_denominator": "min_k",
        "empty": "skip",
        "ties": "item",
        "users": "all",
        "idcg": "relevant",
        "mrr_cutoff": "k",
        "relevant_set": "truth",
        "gain_scope": "relevant",
        "persistence": "none",  # each metric's own: 0.8 for rbp
        "rbp_gain": "binary",
        "zero_ideal": "zero",
    }
    for option, default in zip(table["option"], table["default"], strict=True):
        assert spec_defaults[option] == default, option
    # A preset only lists options where the peer differs from the spec.
    assert (table["value"] != table["default"]).all()
    # Every row documents the peer's version and where in its source the behaviour lives.
    assert table["version"].str.len_chars().min() > 0  # type: ignore[operator]
    assert table["source"].str.starts_with("https://").all()
    trec = dict(
        table.filter(pl.col("convention") == "trec_eval").select("option", "value").iter_rows()
    )
    assert trec["ap_denominator"] == "relevant"
    assert trec["threshold"] == "1"
    assert trec["ties"] == "item_desc_text"


def test_call_convention_equals_its_options(constructor: Constructor) -> None:
    """``convention="trec_eval"`` is the options its table rows list, for these metrics."""
    metrics = ["precision@3", "recall@3", "ap@3", "mrr@1", "ndcg@3"]
    preset = run(constructor, SPEC_RECS, SPEC_TRUTH, metrics=metrics, convention="trec_eval")
    spelled = run(
        constructor,
        SPEC_RECS,
        SPEC_TRUTH,
        metrics=metrics,
        threshold=1,
        ap_denominator="relevant",
        mrr_cutoff="none",
        gain_scope="positive",
        users="both",
        empty="zero",
    )
    assert preset.rows() == spelled.rows()
    # Users 1, 2, 3 and 6 are in both truth and recs (6 with a zero only: scored 0).
    assert preset["user"].to_list() == [1, 2, 3, 6]
    # mrr without cutoff: user 3's first relevant item B is at rank 4.
    assert values(preset, "mrr@1") == {1: 1.0, 2: 1 / 2, 3: 1 / 4, 6: 0.0}


def _write_cli_inputs(tmp_path: Path) -> tuple[Path, Path]:
    # user 1: R = {b, x, y}, list [a, b, c]; user 2: R = {d}, list [a, d]; user 3: a judged
    # zero, list [a] (trec_eval scores it 0); user 4: a list, no truth (not evaluated).
    recs = pl.DataFrame(
        {"user": [1, 1, 1, 2, 2, 3, 4], "item": list("abcadaa"), "rank": [1, 2, 3, 1, 2, 1, 1]}
    )
    truth = pl.DataFrame(
        {"user": [1, 1, 1, 2, 3], "item": list("bxyda"), "relevance": [1, 2, 1, 3, 0]}
    )
    recs_path, truth_path = tmp_path / "recs.parquet", tmp_path / "truth.csv"
    recs.write_parquet(recs_path)
    truth.write_csv(truth_path)
    return recs_path, truth_path


def _cli(capsys: pytest.CaptureFixture[str], *args: str | Path) -> pl.DataFrame:
    code = main([str(a) for a in args])
    out = capsys.readouterr().out
    assert code == 0
    return pl.read_csv(out.encode())


def test_cli_convention_and_metric_options(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recs, truth = _write_cli_inputs(tmp_path)
    metrics = "ap@2,ap(ap_denominator=min_k)@2"
    got = _cli(
        capsys,
        "evaluate",
        recs,
        truth,
        "--convention",
        "trec_eval",
        "-m",
        metrics,
        "--format",
        "csv",
    )
    assert got.columns == ["n_users", "ap@2", "ap(ap_denominator=min_k)@2"]
    # AP@2: user 1 has one hit (b at 2): sum 1/2, |R| = 3, min(|R|, 2) = 2; user 2 one hit
    # (d at 2): sum 1/2, |R| = 1; user 3: 0.
    (n_users, relevant, min_k) = got.row(0)
    assert n_users == 3
    assert math.isclose(relevant, (0.5 / 3 + 0.5 / 1 + 0) / 3, rel_tol=TOL)
    assert math.isclose(min_k, (0.5 / 2 + 0.5 / 1 + 0) / 3, rel_tol=TOL)
    per_user = _cli(
        capsys, "evaluate", recs, truth, "--convention", "trec_eval", "-m", "ap(ap_denominator=min_k)@5",
        "--format", "csv", "--per-user",
    )  # fmt: skip
    assert per_user.columns == ["user", "ap(ap_denominator=min_k)@5"]
    assert per_user.rows() == [(1, 0.5 / 3), (2, 0.5), (3, 0.0)]


def test_cli_gain_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    recs, truth = _write_cli_inputs(tmp_path)
    got = _cli(
        capsys,
        "evaluate",
        recs,
        truth,
        "-m",
        "ndcg@3",
        "--gain",
        "1=3,2=9",
        "--format",
        "csv",
        "--per-user",
    )
    # User 1: b (rel 1 -> 3) at rank 2; ideal x (2 -> 9), b and y (1 -> 3).
    # User 2: d (rel 3, not in the table: keeps 3) at rank 2; ideal d at 1.
    assert got.columns == ["user", "ndcg@3"]
    want = {1: (3 / LOG3) / (9 + 3 / LOG3 + 3 / 2), 2: (3 / LOG3) / 3}
    assert_close(dict(got.iter_rows()), want)
    # The same table given in a metric string.
    named = _cli(
        capsys,
        "evaluate",
        recs,
        truth,
        "-m",
        "ndcg(gain={1: 3, 2: 9})@3",
        "--format",
        "csv",
        "--per-user",
    )
    assert named.columns == ["user", "ndcg(gain={1: 3, 2: 9})@3"]
    assert_close(dict(named.iter_rows()), want)


# --- threshold=0 ---------------------------------------------------------------------------------
# user 1: truth {a: 0, b: 1}, list [a, c]; user 2: truth {x: 0}, list [x].

ZERO_RECS = pl.DataFrame({"user": [1, 1, 2], "item": ["a", "c", "x"], "rank": [1, 2, 1]})
ZERO_TRUTH = pl.DataFrame({"user": [1, 1, 2], "item": ["a", "b", "x"], "relevance": [0, 1, 0]})


def test_threshold_zero_makes_every_truth_row_relevant(constructor: Constructor) -> None:
    metrics = ["precision@2", "recall@2", "ndcg@2"]
    default = run(constructor, ZERO_RECS, ZERO_TRUTH, metrics=metrics)
    # Default: only b is relevant, and it was not recommended; user 2 has no relevant item.
    assert default.rows() == [(1, 0.0, 0.0, 0.0)]
    zero = run(constructor, ZERO_RECS, ZERO_TRUTH, metrics=metrics, threshold=0)
    # threshold=0: a (rel 0) is relevant: precision 1/2, recall 1/2 (R = {a, b}); its gain
    # is 0, so DCG is 0 (user 2: an ideal DCG of 0 scores 0).
    assert zero.rows() == [(1, 1 / 2, 1 / 2, 0.0), (2, 1 / 2, 1 / 1, 0.0)]
    binary = run(constructor, ZERO_RECS, ZERO_TRUTH, metrics="ndcg@2", threshold=0, gain="binary")
    # Binary gain: a gains 1 at rank 1; the ideal list is two items of gain 1.
    assert_close(values(binary, "ndcg@2"), {1: 1 / (1 + 1 / LOG3), 2: 1.0})
    # As a metric option, beside the default.
    both = run(constructor, ZERO_RECS, ZERO_TRUTH, metrics=["recall@2", "recall(threshold=0)@2"])
    assert both.rows() == [(1, 0.0, 1 / 2), (2, None, 1.0)]


_LONG_TABLE_ZERO = (
    "threshold: expected a number > 0 or None for {column} on a long table (relevance 0 "
    "marks a recommended item outside truth there; pass truth= to make every truth row "
    "relevant), got 0"
)


@pytest.mark.parametrize(
    ("kwargs", "column", "set_by"),
    [
        ({"metrics": "recall@2", "threshold": 0}, "recall@2", ""),
        ({"metrics": "recall(threshold=0)@2"}, "recall(threshold=0)@2", ""),
        # The caller's own 0 is the caller's, preset or not.
        ({"metrics": "recall@2", "threshold": 0, "convention": "rectools"}, "recall@2", ""),
        # A preset's 0 is the preset's: name it (the "rectools on a long table").
        (
            {"metrics": "recall@2", "convention": "rectools"},
            "recall@2",
            ", set by convention='rectools' (pass threshold= to override it)",
        ),
        (
            {"metrics": ["ndcg@2", "recall(convention=replay)@2"]},
            "recall(convention=replay)@2",
            ", set by 'recall(convention=replay)@2' (pass threshold= to override it)",
        ),
        (
            {"metrics": "recall(convention=recommenders)@2", "convention": "trec_eval"},
            "recall(convention=recommenders)@2",
            ", set by 'recall(convention=recommenders)@2' (pass threshold= to override it)",
        ),
    ],
)
def test_threshold_zero_on_a_long_table_is_an_error(
    constructor: Constructor, kwargs: dict[str, Any], column: str, set_by: str
) -> None:
    long = ZERO_RECS.join(ZERO_TRUTH, on=["user", "item"], how="full", coalesce=True)
    with raises_exactly(_LONG_TABLE_ZERO.format(column=column) + set_by):
        fm.evaluate(constructor(long), **kwargs)


def test_a_preset_threshold_overridden_on_a_long_table(constructor: Constructor) -> None:
    # threshold=1 replaces rectools' 0 (call options win over presets): user 1's b is
    # relevant and not listed; user 2 has no relevant item.
    long = ZERO_RECS.join(ZERO_TRUTH, on=["user", "item"], how="full", coalesce=True)
    got = run(constructor, long, None, metrics="recall@2", convention="rectools", threshold=1)
    assert got.rows() == [(1, 0.0)]


# --- gain tables ----------------------------------------------------------------------------------


def test_gain_table_keeps_unlisted_levels(constructor: Constructor) -> None:
    recs = pl.DataFrame({"user": [1] * 4, "item": list("cdab"), "rank": [1, 2, 3, 4]})
    truth = pl.DataFrame({"user": [1] * 4, "item": list("abcd"), "relevance": [3.0, 2.0, 1.0, 2.5]})
    # gain={2: 3, 3: 7}: a (3) -> 7, b (2) -> 3; c (1) and d (2.5) keep their relevance.
    dcg = 1 / 1 + 2.5 / LOG3 + 7 / 2 + 3 / LOG5
    idcg = 7 / 1 + 3 / LOG3 + 2.5 / 2 + 1 / LOG5
    call = run(constructor, recs, truth, metrics=["dcg@4", "ndcg@4"], gain={2: 3, 3: 7})
    assert_close(values(call, "dcg@4"), {1: dcg})
    assert_close(values(call, "ndcg@4"), {1: dcg / idcg})
    named = run(
        constructor, recs, truth, metrics=["dcg(gain={2:3,3:7})@4", "ndcg(gain={3: 7, 2: 3})@4"]
    )
    assert named.columns == ["user", "dcg(gain={2:3,3:7})@4", "ndcg(gain={3: 7, 2: 3})@4"]
    assert named.rows() == call.rows()


# --- users= x empty= ----------------------------------------------------------------------------
# A: relevant items and recommendations; B: a relevant item, no recommendations; C: judged
# at relevance 0 only, with recommendations; D: recommendations, no truth; E: judged at 0
# only, no recommendations. A's precision@2 and recall@2 are 1/2 (item 1 of [1, 2];
# R = {1, 3}); everyone else scores 0.

USERS_RECS = pl.DataFrame({"user": list("AACCD"), "item": [1, 2, 1, 2, 1], "rank": [1, 2, 1, 2, 1]})
USERS_TRUTH = pl.DataFrame(
    {"user": list("AABCE"), "item": [1, 3, 1, 3, 1], "relevance": [1, 1, 2, 0, 0]}
)

WHO: dict[tuple[str, str], list[str]] = {
    ("all", "skip"): ["A", "B"],
    ("all", "zero"): ["A", "B", "C", "D", "E"],
    ("truth", "skip"): ["A", "B"],
    ("truth", "zero"): ["A", "B", "C", "E"],
    ("recs", "skip"): ["A"],
    ("recs", "zero"): ["A", "C", "D"],
    ("both", "skip"): ["A"],
    ("both", "zero"): ["A", "C"],
}


@pytest.mark.parametrize(("users", "empty"), list(WHO), ids=[f"{u}-{e}" for u, e in WHO])
def test_users_and_empty(constructor: Constructor, users: str, empty: str) -> None:
    who = WHO[users, empty]
    metrics = ["precision@2", "recall@2"]
    got = run(constructor, USERS_RECS, USERS_TRUTH, metrics=metrics, users=users, empty=empty)
    assert got.rows() == [(u, 0.5, 0.5) if u == "A" else (u, 0.0, 0.0) for u in who]
    mean = run(
        constructor,
        USERS_RECS,
        USERS_TRUTH,
        metrics=metrics,
        users=users,
        empty=empty,
        aggregate=True,
    )
    assert mean.rows() == [(len(who), 0.5 / len(who), 0.5 / len(who))]


def test_users_and_empty_as_metric_options(constructor: Constructor) -> None:
    metrics = [f"precision(users={u}, empty={e})@2" for u, e in WHO]
    got = run(constructor, USERS_RECS, USERS_TRUTH, metrics=metrics)
    columns = metrics
    assert got.columns == ["user", *columns]
    assert got["user"].to_list() == ["A", "B", "C", "D", "E"]
    for (u, e), column in zip(WHO, columns, strict=True):
        assert sorted(values(got, column)) == WHO[u, e], column
    mean = run(constructor, USERS_RECS, USERS_TRUTH, metrics=metrics, aggregate=True)
    assert mean["n_users"].item() == 5  # users with a value in at least one column
    for (u, e), column in zip(WHO, columns, strict=True):
        assert math.isclose(mean[column].item(), 0.5 / len(WHO[u, e]), rel_tol=TOL), column


# --- idcg, mrr_cutoff, relevant_set, gain_scope ---------------------------------------------------


def test_idcg_k(constructor: Constructor) -> None:
    # Spec example 2 (user 1), list of 3 relevant items, binary gain: at k = 3 they fill
    # the three ideal slots of gain 1; at k = 5 the ideal is five slots.
    got = run(
        constructor, SPEC_RECS, SPEC_TRUTH, metrics=["ndcg@3", "ndcg@5"], idcg="k", gain="binary"
    )
    ndcg = got.filter(pl.col("user") == 1).row(0, named=True)
    assert ndcg["ndcg@3"] == 1.0
    dcg = 1 + 1 / LOG3 + 1 / 2
    assert math.isclose(ndcg["ndcg@5"], dcg / (dcg + 1 / LOG5 + 1 / LOG6), rel_tol=TOL)


def test_mrr_cutoff_none(constructor: Constructor) -> None:
    recs = pl.DataFrame({"user": [1] * 4 + [2], "item": [*"xyza", "a"], "rank": [1, 2, 3, 6, 2]})
    truth = pl.DataFrame({"user": [1, 2], "item": ["a", "b"], "relevance": [1, 1]})
    got = run(constructor, recs, truth, metrics=["mrr@2", "mrr(mrr_cutoff='none')@2"])
    # User 1: the first relevant item is at rank 6, past k = 2; user 2 has none listed.
    assert got.rows() == [(1, 0.0, 1 / 6), (2, 0.0, 0.0)]
    call = run(constructor, recs, truth, metrics="mrr@2", mrr_cutoff="none")
    assert values(call, "mrr@2") == {1: 1 / 6, 2: 0.0}


def test_relevant_set_listed(constructor: Constructor) -> None:
    # R from truth: {a, b, x}; listed: {a, b} (b at rank 4, past k = 2, still listed).
    recs = pl.DataFrame({"user": [1] * 4, "item": list("acdb"), "rank": [1, 2, 3, 4]})
    truth = pl.DataFrame({"user": [1] * 3, "item": list("abx"), "relevance": [1, 1, 1]})
    metrics = ["recall@2", "recall@4", "ndcg@4"]
    default = run(constructor, recs, truth, metrics=metrics)
    listed = run(constructor, recs, truth, metrics=metrics, relevant_set="listed")
    dcg = 1 + 1 / LOG5
    assert default["user"].to_list() == listed["user"].to_list() == [1]
    want_default = {"recall@2": 1 / 3, "recall@4": 2 / 3, "ndcg@4": dcg / (1 + 1 / LOG3 + 1 / 2)}
    want_listed = {"recall@2": 1 / 2, "recall@4": 2 / 2, "ndcg@4": dcg / (1 + 1 / LOG3)}
    for column in metrics:
        assert math.isclose(default[column].item(), want_default[column], rel_tol=TOL), column
        assert math.isclose(listed[column].item(), want_listed[column], rel_tol=TOL), column


def test_gain_scope_positive(constructor: Constructor) -> None:
    # User 1: truth {a: 1, b: 2, c: 3}, list [a, b, x]. User 2: truth {a: 1}, list [a].
    recs = pl.DataFrame({"user": [1, 1, 1, 2], "item": list("abxa"), "rank": [1, 2, 3, 1]})
    truth = pl.DataFrame({"user": [1, 1, 1, 2], "item": list("abca"), "relevance": [1, 2, 3, 1]})
    metrics = ["ndcg@3", "precision@3"]
    relevant = run(constructor, recs, truth, metrics=metrics, threshold=2)
    # threshold=2 alone: a gains nothing, R = {b, c}; user 2 has no relevant item.
    assert_close(values(relevant, "ndcg@3"), {1: (2 / LOG3) / (3 + 2 / LOG3)})
    positive = run(constructor, recs, truth, metrics=metrics, threshold=2, gain_scope="positive")
    # gain_scope="positive": every rel > 0 gains in DCG and the ideal DCG (trec_eval's
    # ndcg ignores -l); precision still counts rel >= 2.
    assert_close(values(positive, "ndcg@3"), {1: (1 + 2 / LOG3) / (3 + 2 / LOG3 + 1 / 2), 2: 1.0})
    assert values(positive, "precision@3") == {1: 1 / 3}
    named = run(
        constructor,
        recs,
        truth,
        metrics=["ndcg(gain_scope=positive)@3", "precision@3"],
        threshold=2,
    )
    assert named.rows() == positive.rows()


# --- trec_eval's and ir_measures' measure names (spec section 8) ---------------------------------
# user 1: truth {a: 0, b: 2, d: 1, f: 3, g: 0.5}, list a b c d e (scores 5..1). trec_eval's
#   conventions: relevant = rel >= 1 -> R = {b, d, f}, |R| = 3; judged non-relevant
#   N = {a, g}; nDCG gains from every rel > 0 (f 3, b 2, d 1, g 0.5).
# user 2: truth {q: 0}, list p q: no relevant item, scored 0 (empty="zero").
# user 3: a list, no truth; user 4: truth {x: 1}, no list: neither is in both frames.

TOOL_RECS = pl.DataFrame(
    {
        "user": [1, 1, 1, 1, 1, 2, 2, 3],
        "item": ["a", "b", "c", "d", "e", "p", "q", "z"],
        "score": [5.0, 4.0, 3.0, 2.0, 1.0, 2.0, 1.0, 1.0],
    }
)
TOOL_TRUTH = pl.DataFrame(
    {
        "user": [1, 1, 1, 1, 1, 2, 4],
        "item": ["a", "b", "d", "f", "g", "q", "x"],
        "relevance": [0.0, 2.0, 1.0, 3.0, 0.5, 0.0, 1.0],
    }
)

#: User 1's value of each name, written out; user 2 scores 0 everywhere.
TOOL_VALUES: dict[str, float] = {
    "P@3": 1 / 3,  # b within 3
    "P_3": 1 / 3,
    "R@3": 1 / 3,
    "recall_3": 1 / 3,
    "Success@1": 0.0,  # a is not relevant
    "success_2": 1.0,
    "AP@5": (1 / 2 + 2 / 4) / 3,  # b at 2, d at 4, D = |R|
    "map_cut_5": (1 / 2 + 2 / 4) / 3,
    "nDCG@3": (2 / LOG3) / (3 + 2 / LOG3 + 1 / 2),  # ideal f, b, d
    "ndcg_cut_3": (2 / LOG3) / (3 + 2 / LOG3 + 1 / 2),
    "RR": 1 / 2,  # b at 2, no cutoff
    "recip_rank": 1 / 2,
    "RR@1": 0.0,  # ir_measures' RR@k stops at k
    "Rprec": 1 / 3,  # R = 3: b among a, b, c
    "Rprec_mult_1.00": 1 / 3,
    "Bpref": (1 - 1 / 2 + 1 - 1 / 2) / 3,  # b and d each below a: 1 - min(1, 3) / min(3, 2)
    "ERR@3": (1 / 2) * (2**2 - 1) / 2**4,  # gdeval: g_max = 4; only b gains within 3
    "Judged@3": 2 / 3,  # a and b have truth rows
}


def test_tool_names_by_hand(constructor: Constructor) -> None:
    """Each name is its tool's measure: trec_eval's conventions, whatever the call's."""
    metrics = list(TOOL_VALUES)
    for call in ({}, {"convention": "rectools"}, {"convention": "sklearn", "ties": "item"}):
        got = run(constructor, TOOL_RECS, TOOL_TRUTH, metrics=metrics, score="score", **call)
        assert got.columns == ["user", *metrics]
        assert got["user"].to_list() == [1, 2]  # users in both frames
        for name, want in TOOL_VALUES.items():
            assert_close(values(got, name), {1: want, 2: 0.0})
        means = run(
            constructor, TOOL_RECS, TOOL_TRUTH, metrics=metrics, score="score", aggregate=True
        )
        assert means.columns == ["n_users", *metrics]
        assert means["n_users"].item() == 2


def test_tool_names_take_the_call_options(constructor: Constructor) -> None:
    # threshold=2 is trec_eval's -l2: R = {b, f}; users="truth" its -c: user 4 (no list)
    # is evaluated too, and scores 0.
    got = run(
        constructor,
        TOOL_RECS,
        TOOL_TRUTH,
        metrics=["Rprec", "P_3", "AP@5"],
        score="score",
        threshold=2,
        users="truth",
    )
    assert got["user"].to_list() == [1, 2, 4]
    assert_close(values(got, "Rprec"), {1: 1 / 2, 2: 0.0, 4: 0.0})  # b among a, b
    assert_close(values(got, "P_3"), {1: 1 / 3, 2: 0.0, 4: 0.0})
    assert_close(values(got, "AP@5"), {1: (1 / 2) / 2, 2: 0.0, 4: 0.0})


def test_the_package_names_keep_their_meaning(constructor: Constructor) -> None:
    # "ap@5" is the spec's AP: R = every rel > 0 = {b, d, f, g}, D = min(4, 5); users with
    # a relevant item (1, and 4 without a list); "AP@5" is trec_eval's (users 1 and 2).
    metrics = ["ap@5", "AP@5"]
    if _is_duckdb(constructor):
        with raises_exactly(
            "metrics: expected names that differ in more than case for a DuckDB result "
            "(DuckDB matches column names case-insensitively), got 'ap@5' and 'AP@5'; ask "
            "for them in two calls"
        ):
            fm.evaluate(
                constructor(TOOL_RECS), constructor(TOOL_TRUTH), metrics=metrics, score="score"
            )
        return
    got = run(constructor, TOOL_RECS, TOOL_TRUTH, metrics=metrics, score="score")
    assert got["user"].to_list() == [1, 2, 4]
    assert_close(values(got, "ap@5"), {1: (1 / 2 + 2 / 4) / 4, 4: 0.0})
    assert_close(values(got, "AP@5"), {1: (1 / 2 + 2 / 4) / 3, 2: 0.0})


#: The package's names in other cases, ir_measures' aliases among them (spec section 8: one
#: spelling, one meaning): the package's definitions. User 1: R = every rel > 0 = {b, d, f, g}
#: (|R| = 4), gains = relevance; user 4 (a relevant item, no list) scores 0; user 2 (no
#: relevant item) is left out.
PACKAGE_CASES: dict[str, float] = {
    "MAP@5": (1 / 2 + 2 / 4) / 4,  # b at 2, d at 4, D = min(|R|, 5) = 4
    "NDCG@3": (2 / LOG3) / (3 + 2 / LOG3 + 1 / 2),  # ideal f (3), b (2), d (1)
    "Ndcg@2": (2 / LOG3) / (3 + 2 / LOG3),
    "MRR@3": 1 / 2,
    "Recall@5": 2 / 4,
}


@pytest.mark.parametrize("name", ["MAP@5", "NDCG@3", "Ndcg@2", "MRR@3", "Recall@5"])
def test_package_names_match_in_any_case(constructor: Constructor, name: str) -> None:
    got = run(constructor, TOOL_RECS, TOOL_TRUTH, metrics=[name], score="score")
    assert got["user"].to_list() == [1, 4]
    assert_close(values(got, name), {1: PACKAGE_CASES[name], 4: 0.0})
    # The same computation as the lower-case name, to the bit.
    lower = run(constructor, TOOL_RECS, TOOL_TRUTH, metrics=[name.lower()], score="score")
    assert got[name].to_list() == lower[name.lower()].to_list()


def test_ndcg_in_capitals_reads_the_threshold(constructor: Constructor) -> None:
    # The case: threshold=2 makes R = {b, f}; gains 2 and 3. "NDCG@3" is the
    # package's, so it reads the threshold; ir_measures' "nDCG@3" does not (trec_eval's
    # ndcg gains from every judged level) and the call says so.
    want = (2 / LOG3) / (3 + 2 / LOG3)
    got = run(constructor, TOOL_RECS, TOOL_TRUTH, metrics=["NDCG@3"], score="score", threshold=2)
    assert_close(values(got, "NDCG@3"), {1: want})  # user 4's x (1) is not relevant
    with pytest.warns(fm.IgnoredOptionWarning) as caught:
        tool = run(
            constructor, TOOL_RECS, TOOL_TRUTH, metrics=["nDCG@3"], score="score", threshold=2
        )
    assert_close(values(tool, "nDCG@3"), {1: TOOL_VALUES["nDCG@3"], 2: 0.0})
    messages = [str(w.message) for w in caught if isinstance(w.message, fm.IgnoredOptionWarning)]
    expected = (
        "threshold: 2 ignored by 'nDCG@3' (ir_measures' nDCG under trec_eval's conventions does "
        "not read it); name 'ndcg@3' for this package's meaning, which reads it"
    )
    assert expected in messages
    # Doing what it says: the package's name reads the threshold (no warning).
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", fm.IgnoredOptionWarning)
        ours = run(
            constructor, TOOL_RECS, TOOL_TRUTH, metrics=["ndcg@3"], score="score", threshold=2
        )
    assert_close(values(ours, "ndcg@3"), {1: want})


@pytest.mark.parametrize(
    ("name", "message"),
    [
        (
            "p_10",
            "metrics: expected trec_eval's spelling 'P_10' (a tool's name matches only as the "
            "tool writes it, case included) or this package's 'precision@10', got 'p_10'",
        ),
        (
            "Ndcg_Cut_10",
            "metrics: expected trec_eval's spelling 'ndcg_cut_10' (a tool's name matches only "
            "as the tool writes it, case included) or this package's 'ndcg@10', got 'Ndcg_Cut_10'",
        ),
        (
            "rr@5",
            "metrics: expected ir_measures' spelling 'RR@5' (a tool's name matches only as the "
            "tool writes it, case included) or this package's 'mrr@5', got 'rr@5'",
        ),
    ],
)
def test_odd_spellings_of_tool_names_are_refused(name: str, message: str) -> None:
    with raises_exactly(message):
        fm.evaluate(TOOL_RECS, TOOL_TRUTH, metrics=[name], score="score")
    # Both spellings the message proposes work.
    proposed = re.findall(r"spelling '([^']+)' .* package's '([^']+)'", message)
    assert len(proposed) == 1
    for spelling in proposed[0]:
        got = fm.evaluate(TOOL_RECS, TOOL_TRUTH, metrics=[spelling], score="score")
        assert spelling in got.columns


def test_a_call_convention_is_not_read_by_tool_names(constructor: Constructor) -> None:
    with pytest.warns(fm.IgnoredOptionWarning, match="convention: 'rectools' ignored by 'P@3'"):
        got = run(
            constructor,
            TOOL_RECS,
            TOOL_TRUTH,
            metrics=["P@3"],
            score="score",
            convention="rectools",
        )
    assert_close(values(got, "P@3"), {1: 1 / 3, 2: 0.0})


def test_err_advice_works(constructor: Constructor) -> None:
    # Relevance 5 is above gdeval's g_max 4: ir_measures' ERR@3 refuses it, and says what
    # to name instead; the call's max_relevance does not reach it (a warning says so).
    five = TOOL_TRUTH.with_columns(pl.col("relevance").replace(3.0, 5.0))
    advice = (
        "; 'ERR@3' is ir_measures' ERR (gdeval's), whose max_relevance is 4 and cannot be "
        "set: name 'err@3' for this package's err (max_relevance: the largest relevance in "
        "truth), or 'err(max_relevance=<m>)@3'"
    )
    with pytest.raises(fm.errors.InvalidValueError) as refused:
        fm.evaluate(constructor(TOOL_RECS), constructor(five), metrics=["ERR@3"], score="score")
    assert str(refused.value).endswith(advice)
    with (
        pytest.warns(fm.IgnoredOptionWarning, match="max_relevance: 5 ignored by 'ERR@3'"),
        pytest.raises(fm.errors.InvalidValueError),
    ):
        fm.evaluate(
            constructor(TOOL_RECS),
            constructor(five),
            metrics=["ERR@3"],
            score="score",
            max_relevance=5,
        )
    with raises_exactly(
        "metrics: expected options ERR reads (empty, ips, relevant_set, threshold, ties, "
        "users), got max_relevance in 'ERR(max_relevance=5)@3': ir_measures' ERR fixes "
        "max_relevance=4; name 'err(max_relevance=5)@3' for this package's err, which reads it"
    ):
        fm.evaluate(TOOL_RECS, five, metrics=["ERR(max_relevance=5)@3"], score="score")
    # Doing what they say. User 1: R = {b, d, f, g}; only b (2) is within 3, at rank 2:
    # ERR@3 = (1/2) (2^2 - 1) / 2^5 with g_max = 5 (the largest relevance, or given).
    want = {1: (1 / 2) * (2**2 - 1) / 2**5, 4: 0.0}
    for name in ("err@3", "err(max_relevance=5)@3"):
        got = run(constructor, TOOL_RECS, five, metrics=[name], score="score")
        assert_close(values(got, name), want)


def _is_duckdb(constructor: Constructor) -> bool:
    return type(constructor(TOOL_RECS)).__name__ == "DuckDBPyRelation"


def test_a_tool_name_without_cutoff_takes_every_k(constructor: Constructor) -> None:
    got = run(constructor, TOOL_RECS, TOOL_TRUTH, metrics=["P", "RR"], k=[1, 3], score="score")
    assert got.columns == ["user", "P@1", "P@3", "RR"]
    assert_close(values(got, "P@1"), {1: 0.0, 2: 0.0})
    assert_close(values(got, "P@3"), {1: 1 / 3, 2: 0.0})
    assert_close(values(got, "RR"), {1: 1 / 2, 2: 0.0})


def test_cli_tool_names(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    recs, truth = tmp_path / "recs.csv", tmp_path / "truth.csv"
    TOOL_RECS.write_csv(recs)
    TOOL_TRUTH.write_csv(truth)
    got = _cli(
        capsys, "evaluate", recs, truth, "--score-col", "score", "-m", "P_3,nDCG@3,RR,ERR@3",
        "--format", "csv", "--per-user",
    )  # fmt: skip
    assert got.columns == ["user", "P_3", "nDCG@3", "RR", "ERR@3"]
    for name in got.columns[1:]:
        assert_close(dict(got.select("user", name).iter_rows()), {1: TOOL_VALUES[name], 2: 0.0})


# --- a metric string never says less than the call (spec section 8) --------------------------

#: A value other than the default for each option a metric string may set.
_OTHER_VALUES: dict[str, Any] = {
    "threshold": 2,
    "gain": "exponential",
    "gain_scope": "positive",
    "idcg": "k",
    "ap_denominator": "relevant",
    "mrr_cutoff": "none",
    "zero_ideal": "skip",
    "ties": "item_desc",
    "users": "truth",
    "empty": "zero",
    "relevant_set": "listed",
    "persistence": 0.3,
    "rbp_gain": "relevance",
    "max_relevance": 10,
    "exposure": "rbp",
    "parity_target": "merit",
    "calibration_alpha": 0.2,
    "calibration_weight": "log",
    "divergence": "js",
    "ips": "ips",
}


def _every_input() -> tuple[pl.DataFrame, pl.DataFrame, dict[str, Any]]:
    from tests.result_matrix import frames

    f = frames()
    recs = f["scored"].filter(pl.col("model") == "personal").drop("model", "rank")
    truth = f["truth"].with_columns(p=0.2 + (pl.col("item") % 5) * 0.2)
    groups = pl.DataFrame({"item": range(80)}).with_columns(
        group=(pl.col("item") % 3).cast(pl.String)
    )
    inputs = {
        "score": "score",
        "train": f["train"],
        "item_features": f["genres"],
        "catalog": f["catalog"],
        "baseline": f["popular"].with_columns(score=100.0 - pl.col("rank")),
        "item_groups": groups,
        "propensity": "p",
        "k": 3,
    }
    return recs, truth, inputs


def test_every_option_the_call_gives_a_metric_its_string_gives_too() -> None:
    """For every metric and option: if the call's option changes the metric, the same
    option in the metric's string gives the same values; or, for a tie rule the metric
    reads from the call only, the string is refused with advice that works."""
    import warnings

    from frame_metrics.metrics.registry import REGISTRY

    recs, truth, inputs = _every_input()

    def call(metric: str, **options: Any) -> pl.DataFrame:
        extra = dict(inputs)
        if REGISTRY[metric.partition("(")[0]].population == "corpus":
            extra["aggregate"] = True
        if REGISTRY[metric.partition("(")[0]].family != "exposure":
            del extra["item_groups"]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", fm.FrameMetricsWarning)
            out = fm.evaluate(recs, truth, metrics=[metric], **extra, **options)
        assert isinstance(out, pl.DataFrame)
        return out.rename({out.columns[-1]: "value"})

    checked = 0
    for name, metric in REGISTRY.items():
        if metric.family == "rating":
            continue
        default = call(name)
        for option, value in _OTHER_VALUES.items():
            try:
                at_call = call(name, **{option: value})
            except fm.FrameMetricsError:
                continue  # the option refused with this metric at the call too
            if at_call.equals(default):
                continue
            checked += 1
            string = f"{name}({option}={value})"
            if option == "ties" and option not in metric.reads():
                # Corpus metrics: the call's tie rule, and advice that works (above).
                assert metric.population == "corpus", name
                with pytest.raises(InvalidOptionError, match="pass ties='item_desc' to the call"):
                    call(string)
                continue
            assert call(string).equals(at_call), (name, option)
    assert checked >= 40  # the data reaches most options of most metrics


@pytest.mark.parametrize("metric", ["ee_loss", "ee_disparity", "ee_relevance"])
def test_expected_exposure_reads_a_threshold_in_its_string(
    constructor: Constructor, metric: str
) -> None:
    # User 1: truth {a: 0, b: 2, d: 1, f: 3, g: 0.5}, list a b c d e. threshold=2: the
    # relevant grades are f (3) and b (2), ideal positions 1 and 2; p = 0.5.
    # ε: a 1, b 0.5, c 0.25 within k = 3; ε*: f 1, b 0.5.
    eps = {"a": 1.0, "b": 0.5, "c": 0.25}
    ideal = {"f": 1.0, "b": 0.5}
    items = set(eps) | set(ideal)
    want = {
        "ee_disparity": sum(v * v for v in eps.values()),
        "ee_relevance": sum(eps.get(i, 0.0) * ideal.get(i, 0.0) for i in items),
        "ee_loss": sum((eps.get(i, 0.0) - ideal.get(i, 0.0)) ** 2 for i in items),
    }[metric]
    string = f"{metric}(threshold=2)@3"
    got = run(constructor, TOOL_RECS, TOOL_TRUTH, metrics=[string], score="score")
    assert_close(values(got, string), {1: want})
    at_call = run(
        constructor, TOOL_RECS, TOOL_TRUTH, metrics=[f"{metric}@3"], score="score", threshold=2
    )
    assert got[string].to_list() == at_call[f"{metric}@3"].to_list()


def test_a_list_metric_takes_its_own_tie_rule(constructor: Constructor) -> None:
    # a and b tie at the top of user 1's list. Train: a had by 1 user, b by 3. arp@1 is the
    # popularity of the first item: a (1) under the call's rule (item ascending), b (3)
    # under the string's item_desc; each as at the call, in one call.
    recs = pl.DataFrame({"user": [1, 1, 1], "item": ["a", "b", "c"], "score": [1.0, 1.0, 0.5]})
    truth = pl.DataFrame({"user": [1], "item": ["c"], "relevance": [1]})
    train = pl.DataFrame({"user": [7, 7, 8, 9], "item": ["a", "b", "b", "b"]})
    names = ["arp@1", "arp(ties=item_desc)@1"]
    got = run(constructor, recs, truth, metrics=names, score="score", train=train)
    assert got.rows() == [(1, 1.0, 3.0)]
    at_call = run(
        constructor, recs, truth, metrics=["arp@1"], score="score", train=train, ties="item_desc"
    )
    assert at_call.rows() == [(1, 3.0)]


# -- a requested metric's canonical name ------------------------------------------------

CANONICAL_CASES: list[tuple[str, dict[str, Any]]] = [
    ("ndcg(convention=trec_eval)@10", {}),
    ("P_5", {}),
    ("nDCG@10", {"threshold": 2}),
    ("RR", {}),
    ("ERR@10", {}),
    ("map(ap_denominator=relevant)@3", {"convention": "ranx"}),
    ("ndcg(gain={2: 3, 3: 7})@5", {}),
    ("rbp(persistence=0.9)", {"k": 20}),
    ("recall(ips=ips)@10", {"propensity": "p"}),
    ("ndcg@5", {"convention": "rectools", "zero_ideal": "skip"}),
    ("rmse", {}),
    ("novelty@5", {}),
]


@pytest.mark.parametrize(("name", "call"), CANONICAL_CASES, ids=[c[0] for c in CANONICAL_CASES])
def test_a_canonical_name_read_back_means_the_same(name: str, call: dict[str, Any]) -> None:
    """Two strings, one computation: the canonical name read alone has the metric's cutoff
    and every option it reads as the call resolved them (preset, call and string)."""
    from frame_metrics.spec import resolve_requests

    given = {n: v for n, v in call.items() if n not in ("convention", "k")}
    (q,) = resolve_requests(name, call.get("k"), [], given=given, convention=call.get("convention"))
    (back,) = resolve_requests(q.canonical, None, [])
    assert (back.metric, back.k) == (q.metric, q.k)
    for option in q.metric.reads() - {"convention"}:
        assert getattr(back.options, option) == getattr(q.options, option), option
    assert back.canonical == q.canonical
