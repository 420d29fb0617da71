"""Options that cannot change the result: a warning that says so, or an error.

``ties`` with rank input (ranks are unique within a user: nothing ties) and ``k`` when
every metric names its own cutoff are ignored with an ``IgnoredOptionWarning``;
``aggregate`` must be a bool (its bad values are in ``tests/test_errors.py``'s table).
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

import frame_metrics as fm
from frame_metrics.errors import IgnoredOptionWarning, InvalidOptionError
from tests.conftest import Constructor, evaluate_as_polars, recmetrics

# user 1: a, b, c ranked 1-3, b relevant; user 2: a at 1, d relevant (not recommended).
RECS = pl.DataFrame({"user": [1, 1, 1, 2], "item": ["a", "b", "c", "a"], "rank": [1, 2, 3, 1]})
TRUTH = pl.DataFrame({"user": [1, 2], "item": ["b", "d"], "relevance": [1, 1]})
LONG = pl.DataFrame(
    {"user": [1, 1, 1, 2, 2], "item": ["a", "b", "c", "a", "d"], "rank": [1, 2, 3, 1, None]}
).with_columns(relevance=pl.Series([0, 1, 0, 0, 1]))
#: precision@2 per user: 1 of 2 for user 1 (b at 2), 0 for user 2.
PRECISION_2 = [(1, 1 / 2), (2, 0.0)]

RANKED = (
    "recs are ranked by column 'rank', whose ranks are unique within a user, so no two "
    "items tie; pass score= to rank by a score column instead"
)


def _evaluate_warned(
    constructor: Constructor, recs: pl.DataFrame, truth: pl.DataFrame | None, **kwargs: Any
) -> tuple[pl.DataFrame, list[str]]:
    """The result on the constructor's frame kind and the ignored-option messages."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = evaluate_as_polars(constructor, recs, truth, **kwargs)
    messages = [str(w.message) for w in caught if w.category is IgnoredOptionWarning]
    # evaluate_as_polars calls evaluate twice (the kind, then polars): one warning each.
    assert len(messages) % 2 == 0
    return got, messages[: len(messages) // 2]


@pytest.mark.parametrize("ties", ["average", "item_desc", "input"])
def test_tie_rule_with_rank_input(constructor: Constructor, ties: str) -> None:
    got, messages = _evaluate_warned(constructor, RECS, TRUTH, metrics="precision@2", ties=ties)
    assert messages == [f"ties: {ties!r} ignored: {RANKED}"]
    assert got.rows() == PRECISION_2  # the ranks decide, as without the option


def test_metric_tie_rule_with_rank_input(constructor: Constructor) -> None:
    got, messages = _evaluate_warned(
        constructor, RECS, TRUTH, metrics=["precision(ties=average)@2", "recall@2"]
    )
    assert messages == [f"ties: 'average' in 'precision(ties=average)@2' ignored: {RANKED}"]
    assert got["precision(ties=average)@2"].to_list() == [v for _, v in PRECISION_2]


def test_tie_rule_with_a_long_table(constructor: Constructor) -> None:
    got, messages = _evaluate_warned(constructor, LONG, None, metrics="precision@2", ties="item")
    ranked = RANKED.replace("recs are", "the long table is")
    assert messages == [f"ties: 'item' ignored: {ranked}"]
    assert got.rows() == PRECISION_2


def test_tie_rule_with_scores_or_from_a_convention_is_not_reported(
    constructor: Constructor,
) -> None:
    scored = RECS.with_columns(score=1.0 / pl.col("rank")).drop("rank")
    got, messages = _evaluate_warned(
        constructor, scored, TRUTH, metrics="precision@2", score="score", ties="average"
    )
    assert (messages, got.rows()) == ([], PRECISION_2)
    # trec_eval's preset sets ties='item_desc_text': the caller did not ask for it.
    got, messages = _evaluate_warned(
        constructor, RECS, TRUTH, metrics="precision@2", convention="trec_eval"
    )
    assert (messages, got.rows()) == ([], PRECISION_2)


@pytest.mark.parametrize(
    ("metrics", "k", "shown"),
    [
        (
            "precision@2",
            10,
            "k: 10 ignored, every metric has its own cutoff or none ('precision@2')",
        ),
        (
            ["precision@2", "mrr@2"],
            [5, 10],
            "k: [5, 10] ignored, every metric has its own cutoff or none ('precision@2', 'mrr@2')",
        ),
        (
            "precision@2",
            np.int64(3),
            "k: 3 ignored, every metric has its own cutoff or none ('precision@2')",
        ),
    ],
    ids=["one-k", "list", "numpy-int"],
)
def test_k_when_every_metric_has_its_own_cutoff(
    constructor: Constructor, metrics: str | list[str], k: Any, shown: str
) -> None:
    got, messages = _evaluate_warned(constructor, RECS, TRUTH, metrics=metrics, k=k)
    assert messages == [
        f"{shown}; leave k out, or name a metric without a cutoff to compute it at k"
    ]
    assert got["precision@2"].to_list() == [v for _, v in PRECISION_2]


def test_k_for_rating_metrics_alone() -> None:
    recs = pl.DataFrame({"user": [1], "item": ["a"], "prediction": [2.0]})
    truth = pl.DataFrame({"user": [1], "item": ["a"], "relevance": [3.0]})
    with pytest.warns(IgnoredOptionWarning, match=r"^k: 5 ignored, .* \('rmse'\); "):
        got = fm.evaluate(recs, truth, metrics="rmse", k=5)
    assert got["rmse"].to_list() == [1.0]  # |3 - 2|


def test_k_read_by_one_metric_is_not_reported(constructor: Constructor) -> None:
    got, messages = _evaluate_warned(
        constructor, RECS, TRUTH, metrics=["precision@2", "recall"], k=1
    )
    assert messages == []
    assert got.columns == ["user", "precision@2", "recall@1"]


def test_warning_points_at_the_callers_line() -> None:
    with pytest.warns(IgnoredOptionWarning) as caught:
        recmetrics(RECS).evaluate(TRUTH, metrics="precision@2", k=3)  # through the namespace
    assert [w.filename for w in caught] == [__file__]


def test_bad_metric_name_still_raises_its_own_error() -> None:
    """The ignored-option check reads metric names only after they are known good."""
    message = "metrics: expected '<name>@<int k>', got 'ndcg@ten'"
    with pytest.raises(InvalidOptionError, match=f"^{re.escape(message)}$"):
        fm.evaluate(RECS, TRUTH, metrics="ndcg@ten", k=3)


@pytest.mark.parametrize("flag", [np.True_, np.False_])
def test_numpy_bool_is_a_bool(flag: Any) -> None:
    got = fm.evaluate(RECS, TRUTH, metrics="precision@2", aggregate=flag)
    want = fm.evaluate(RECS, TRUTH, metrics="precision@2", aggregate=bool(flag))
    assert got.rows() == want.rows()


@pytest.mark.parametrize("bad", [1, "False", None])
def test_aggregate_must_be_a_bool(bad: object) -> None:
    with pytest.raises(
        InvalidOptionError, match=f"^aggregate: expected True or False, got {re.escape(repr(bad))}$"
    ):
        fm.evaluate(RECS, TRUTH, metrics="precision@2", aggregate=bad)  # type: ignore[arg-type]


def test_command_line_says_it_in_its_own_terms(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from frame_metrics.cli import main

    RECS.write_csv(tmp_path / "recs.csv")
    TRUTH.write_csv(tmp_path / "truth.csv")
    files = [str(tmp_path / "recs.csv"), str(tmp_path / "truth.csv")]
    code = main(["evaluate", *files, "-m", "precision@2", "-k", "5", "--ties", "average"])
    err = capsys.readouterr().err
    assert code == 0
    assert err.splitlines() == [
        "frame-metrics: warning: -k: 5 ignored, every metric has its own cutoff or none "
        "('precision@2'); leave out -k, or name a metric without a cutoff to compute it at k",
        "frame-metrics: warning: --ties: 'average' ignored: recs are ranked by column 'rank', "
        "whose ranks are unique within a user, so no two items tie; pass --score-col to rank "
        "by a score column instead",
    ]


def test_a_warning_says_which_option_it_is_about() -> None:
    recs = RECS.with_columns(score=pl.lit(0.5))
    with pytest.warns(IgnoredOptionWarning) as caught:
        fm.evaluate(RECS, TRUTH, metrics=["precision@2", "ndcg(ties=average)@2"], k=5, ties="input")
    warned = [w.message for w in caught if isinstance(w.message, IgnoredOptionWarning)]
    # k, the call's tie rule, the metric's own: each message begins with its option.
    assert [w.option for w in warned] == ["k", "ties", "ties"]
    assert [str(w).split(": ")[0] for w in warned] == ["k", "ties", "ties"]
    # Ranked by a score, ties matter: nothing is ignored.
    with warnings.catch_warnings():
        warnings.simplefilter("error", IgnoredOptionWarning)
        fm.evaluate(recs, TRUTH, metrics="precision@2", score="score", ties="input")


def test_generator_arguments() -> None:
    """metrics and k are read to look for ignored options, then by the evaluation."""
    got = fm.evaluate(
        RECS, TRUTH, metrics=(m for m in ["precision", "recall"]), k=(k for k in [1, 2])
    )
    assert got.columns == ["user", "precision@1", "precision@2", "recall@1", "recall@2"]
    # user 1: a, b at ranks 1, 2 and b relevant; user 2: a, and d relevant.
    assert got.rows() == [(1, 0.0, 1 / 2, 0.0, 1.0), (2, 0.0, 0.0, 0.0, 0.0)]


def test_k_with_tool_measure_names() -> None:
    # trec_eval's P_10 names its cutoff and ir_measures' RR reads the whole list: k is
    # ignored; ir_measures' P without a cutoff is computed at k (a bare tool name used
    # to fail the check with "expected a known metric name, got 'P'").
    recs = pl.DataFrame({"user": [1, 1], "item": ["a", "b"], "rank": [1, 2]})
    truth = pl.DataFrame({"user": [1], "item": ["a"], "relevance": [1]})
    with pytest.warns(IgnoredOptionWarning, match=r"^k: 5 ignored, .* \('P_10', 'RR'\); "):
        got = fm.evaluate(recs, truth, metrics=["P_10", "RR"], k=5)
    assert got.row(0) == (1, 1 / 10, 1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", IgnoredOptionWarning)
        got = fm.evaluate(recs, truth, metrics=["P", "RR"], k=5)
    assert got.row(0) == (1, 1 / 5, 1.0)
