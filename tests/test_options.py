"""The option table (``frame_metrics.options.OPTIONS``) against everything that declares options.

Each option is declared once, as a row of the table; here the table is held equal to what
cannot be generated from it: ``evaluate``'s explicit signature (names, defaults and the
``Literal`` choices of the annotations), the spec's defaults, the fields of
``MetricOptions``, the registry's per-metric option sets and the presets. Its claims are
checked on the engine too: an option said to change only how a metric combines its
statistics gives, in a metric string next to the plain metric (which then shares the
statistics of the call), the value the call gives with the option set for every metric.
The command line gets one flag per row, and each flag reaches ``evaluate``.
"""

from __future__ import annotations

import argparse
import inspect
import typing
from dataclasses import fields
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import frame_metrics as fm
from frame_metrics.cli import build_parser, main
from frame_metrics.conventions import CONVENTIONS, METRIC_OPTIONS, OPTION_NAMES
from frame_metrics.metrics.registry import REGISTRY
from frame_metrics.options import (
    COMBINATION_OPTIONS,
    EVERY,
    NOT_GIVEN,
    OPTIONS,
    RANKING,
    MetricOptions,
    Option,
    option,
)

#: The spec's defaults (``shared/spec/metrics.md`` section 2 for threshold, ap_denominator
#: and gain, 3 for empty, 4 for repeated rows, 6 and 9 for rbp's p (by metric) and err's g_max; the rest are
#: the variants the spec defines: items ranked by item ascending on equal scores, every
#: user seen, the ideal DCG from the user's relevant items, MRR within k, R from truth,
#: the relevant items gaining, rbp gaining 1, an ideal DCG of 0 scoring 0).
SPEC_DEFAULTS: dict[str, object] = {
    "threshold": None,
    "gain": "linear",
    "gain_scope": "relevant",
    "idcg": "relevant",
    "ap_denominator": "min_k",
    "mrr_cutoff": "k",
    "zero_ideal": "zero",
    "ties": "item",
    "users": "all",
    "empty": "skip",
    "relevant_set": "truth",
    # Unset: each metric's own, 0.8 for rbp and exposure="rbp", 0.5 for expected exposure.
    "persistence": None,
    "rbp_gain": "binary",
    "max_relevance": None,
    "on_duplicate": "error",
    "similarity": "auto",
    "unexpected": "baseline",
    "head_share": 0.2,
    # Spec 9: the log browsing model, the catalog target.
    "exposure": "log",
    "parity_target": "catalog",
    # Spec 9.1: Steck's alpha, unit rank weights, KL.
    "calibration_alpha": 0.01,
    "calibration_weight": "uniform",
    "divergence": "kl",
    # Spec 9.4: unweighted unless propensity= is given; gamma has no default; SNIPS;
    # no clipping.
    "propensity": None,
    "propensity_gamma": None,
    "ips": "snips",
    "max_weight": None,
}

#: evaluate's keywords that are not options: metrics and cutoffs, columns, the preset,
#: extra frames and how the call runs.
NOT_OPTIONS = {
    "metrics",
    "k",
    "aggregate",
    "user",
    "item",
    "rank",
    "score",
    "relevance",
    "prediction",
    "by",
    "convention",
    "catalog",
    "train",
    "item_features",
    "features",
    "baseline",
    "validate",
    "buckets",
    "progress",
    "sample",
    "item_groups",
    "group",
    "feature_weight",
    "history_weight",
    "exclude",
}


def _literal_values(annotation: object) -> list[str]:
    """The values of every ``Literal`` inside an annotation (a union of them included)."""
    if typing.get_origin(annotation) is typing.Literal:
        return list(typing.get_args(annotation))
    return [v for arg in typing.get_args(annotation) for v in _literal_values(arg)]


def test_the_table_holds_each_option_once_with_the_spec_defaults() -> None:
    names = [row.name for row in OPTIONS]
    assert len(set(names)) == len(names)
    assert {row.name: row.default for row in OPTIONS} == SPEC_DEFAULTS
    # A choice option's default is one of its choices.
    for row in OPTIONS:
        assert not row.choices or row.default in row.choices, row.name


def test_evaluate_signature_matches_the_table() -> None:
    parameters = inspect.signature(fm.evaluate).parameters
    hints = typing.get_type_hints(fm.evaluate)
    keywords = {n for n, p in parameters.items() if p.kind is inspect.Parameter.KEYWORD_ONLY}
    assert keywords - NOT_OPTIONS == {row.name for row in OPTIONS}
    for row in OPTIONS:
        parameter = parameters[row.name]
        # An option a preset may set defaults to None: the preset's value, else the spec's;
        # threshold to NOT_GIVEN, a None the caller did not say (spec section 8: an
        # explicit threshold=None silences the star-ratings warning).
        if row.name == "threshold":
            assert parameter.default is NOT_GIVEN
            assert repr(parameter.default) == "None"
            continue
        assert parameter.default == (None if row.preset else row.default), row.name
        # As sets: typing caches a union by equal members, and two Literals of the same
        # strings are equal in any order (``ZeroIdeal | None`` may come back as
        # ``EmptyPolicy | None``).
        literal = _literal_values(hints[row.name])
        assert sorted(literal) == sorted(row.choices), row.name
        assert len(literal) == len(row.choices), row.name


def test_metric_options_fields_are_the_table() -> None:
    assert {f.name for f in fields(MetricOptions)} == {row.name for row in OPTIONS}
    defaults = MetricOptions()
    assert {row.name: getattr(defaults, row.name) for row in OPTIONS} == SPEC_DEFAULTS


def _readers(row: Option) -> set[str]:
    """The metrics the row says read it, as metric names (``RANKING``: every ranking one)."""
    if row.metrics == RANKING:
        ranking = {
            m.name
            for m in REGISTRY.values()
            if m.family == "ranking" and m.population == "relevant"
        }
        return ranking | set(row.also)
    if row.metrics == EVERY:
        return set(REGISTRY)
    return set(row.metrics) | set(row.also)


def test_the_registry_and_the_table_agree_on_who_reads_each_option() -> None:
    per_metric = {row.name for row in OPTIONS if row.per_metric}
    for metric in REGISTRY.values():
        # What a metric string may set: per-metric options of the table, and a preset.
        assert metric.reads() <= per_metric | {"convention"}, metric.name
        assert metric.options <= per_metric, metric.name
    for row in OPTIONS:
        assert _readers(row) <= set(REGISTRY), row.name
        if row.per_metric:
            reads_it = {m.name for m in REGISTRY.values() if row.name in m.reads()}
            assert reads_it == _readers(row), row.name
        else:  # set for the call only: no metric string may give it
            assert not any(row.name in m.reads() for m in REGISTRY.values()), row.name
    # Every ranking metric reads the RANKING options; beyond them, who is evaluated
    # (threshold, empty, users) is read by every metric judged against relevance (spec
    # section 8: a metric string says what the call can), and the threshold by the
    # parity metrics (their merit target).
    relevant = {m.name for m in REGISTRY.values() if m.population == "relevant"}
    assert _readers(option("empty")) == _readers(option("users")) == relevant
    assert _readers(option("threshold")) == relevant | {"exposure_parity", "list_parity"}


def test_the_presets_and_the_engine_read_their_lists_from_the_table() -> None:
    assert tuple(row.name for row in OPTIONS if row.preset) == METRIC_OPTIONS
    assert tuple(row.name for row in OPTIONS) == OPTION_NAMES
    assert tuple(row.name for row in OPTIONS if row.stage == "combination") == COMBINATION_OPTIONS
    for convention in CONVENTIONS.values():
        for name, settings in convention.settings.items():
            assert option(name).preset, (convention.name, name)
            for setting in settings:
                option(name).check(setting.value)  # a value the option accepts
                assert not setting.metrics or set(setting.metrics) <= _readers(option(name))


# --- the stage: statistics, or only how they combine --------------------------------------------

RECS = pl.DataFrame(
    {
        "user": [1, 1, 1, 1, 2, 2, 2, 3, 3],
        "item": ["a", "b", "c", "d", "a", "x", "y", "x", "y"],
        "rank": [1, 2, 3, 4, 1, 2, 3, 1, 2],
    }
)
# User 1: graded relevance; user 2: one relevant item; user 3: relevance 0 only; user 4:
# truth without recommendations.
TRUTH = pl.DataFrame(
    {
        "user": [1, 1, 1, 1, 2, 3, 4],
        "item": ["a", "c", "d", "e", "y", "x", "a"],
        "relevance": [3, 1, 2, 2, 1, 0, 2],
    }
)

#: Serendipity's baseline model (serendipity reads the ranking options too).
BASELINE = RECS.filter(pl.col("rank") == 1)

#: A value other than the default for the options without choices.
OTHER_VALUES: dict[str, list[object]] = {"persistence": [0.5], "max_relevance": [4]}
#: Options the variant needs at call level too, to be defined (idcg='k' needs binary gains).
NEEDS: dict[str, dict[str, Any]] = {"idcg": {"gain": "binary"}}


def _combination_cases() -> list[tuple[str, str, object]]:
    cases = []
    for name in COMBINATION_OPTIONS:
        row = option(name)
        values = OTHER_VALUES.get(name) or [c for c in row.choices if c != row.default]
        cases += [(metric, name, v) for metric in sorted(_readers(row)) for v in values]
    return cases


@pytest.mark.parametrize("threshold", [None, 2])
@pytest.mark.parametrize(("metric", "name", "value"), _combination_cases())
def test_a_combination_option_does_not_change_the_statistics(
    metric: str, name: str, value: object, threshold: int | None
) -> None:
    """Next to the plain metric, a variant differing in a combination option is computed
    from the call's statistics: its values are those of the call with the option set."""
    call: dict[str, Any] = {"baseline": BASELINE, "threshold": threshold, **NEEDS.get(name, {})}
    # The exposure metrics' default item groups are train's head and tail.
    call["train"] = TRUTH.select("user", "item")
    corpus = REGISTRY[metric].population == "corpus"
    k = "" if not REGISTRY[metric].takes_k else "@3"
    variant = f"{metric}({name}={value}){k}"
    both = fm.evaluate(RECS, TRUTH, metrics=[f"{metric}{k}", variant], aggregate=corpus, **call)
    alone = fm.evaluate(
        RECS, TRUTH, metrics=f"{metric}{k}", aggregate=corpus, **(call | {name: value})
    )
    if corpus:  # one value per group
        assert both[variant].to_list() == alone[f"{metric}{k}"].to_list()
        return
    # The users with a value (users= may also change who has a row, valued or not).
    assert _valued(both, variant) == _valued(alone, f"{metric}{k}")


def _valued(frame: pl.DataFrame, column: str) -> dict[int, float]:
    return dict(frame.drop_nulls(column).select("user", column).iter_rows())


# --- the command line -------------------------------------------------------------------------


def _evaluate_parser() -> argparse.ArgumentParser:
    parser = build_parser()
    (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    evaluate: argparse.ArgumentParser = commands.choices["evaluate"]
    return evaluate


def test_the_command_line_has_a_flag_per_option() -> None:
    actions = {a.dest: a for a in _evaluate_parser()._actions}
    parameters = inspect.signature(fm.evaluate).parameters
    for row in OPTIONS:
        action = actions[row.name]
        assert action.option_strings == [row.flag]
        assert action.default == parameters[row.name].default
        if not row.table:
            assert tuple(action.choices or ()) == row.choices, row.name


def _flag_value(row: Option) -> tuple[str, object]:
    """A value to pass on the command line, and the value evaluate should receive."""
    if row.table:
        return "1=3,2=7", {1.0: 3.0, 2.0: 7.0}
    if row.choices:
        other = row.choices[-1]
        return other, other
    if row.parse is str:  # a column name (propensity)
        return "p", "p"
    return "0.5", 0.5


@pytest.mark.parametrize("row", OPTIONS, ids=[row.name for row in OPTIONS])
def test_each_flag_reaches_evaluate(
    row: Option, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    RECS.write_csv(tmp_path / "recs.csv")
    TRUTH.write_csv(tmp_path / "truth.csv")
    seen: dict[str, Any] = {}
    parameters = inspect.signature(fm.evaluate).parameters

    def evaluate(recs: object, truth: object, **kwargs: Any) -> pl.LazyFrame:
        seen.update(kwargs)
        return pl.LazyFrame({"n_users": [0]})

    monkeypatch.setattr(fm, "evaluate", evaluate)
    text, value = _flag_value(row)
    assert (
        main(["evaluate", str(tmp_path / "recs.csv"), str(tmp_path / "truth.csv"), row.flag, text])
        == 0
    )
    capsys.readouterr()
    assert seen[row.name] == value
    # The other options keep evaluate's defaults.
    for other in OPTIONS:
        if other is not row:
            assert seen[other.name] == parameters[other.name].default, other.name


def test_an_unset_persistence_is_each_metric_default() -> None:
    # Spec 6/9: rbp's p is 0.8 unless given; expected exposure's is 0.5.
    recs = pl.DataFrame({"user": [1, 1], "item": ["a", "b"], "rank": [1, 2]})
    truth = pl.DataFrame({"user": [1], "item": ["b"], "relevance": [1.0]})
    out = fm.evaluate(recs, truth, metrics=["rbp", "rbp(persistence=0.5)"])
    assert out["rbp"][0] == (1 - 0.8) * 0.8
    assert out["rbp(persistence=0.5)"][0] == (1 - 0.5) * 0.5
