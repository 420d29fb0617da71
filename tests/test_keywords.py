"""evaluate's keywords come from the tables of ``frame_metrics.keywords`` and ``options``.

``frame_metrics/api.py`` holds the signature and the docstring's Parameters as
``docs/gen/gen_api.py`` writes them from the tables (regenerate with
``python docs/gen/gen_api.py``); ``Columns``, ``build_spec``, ``diagnose`` and the
command line read the same rows, and every column and file flag reaches ``evaluate``.
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
from dataclasses import fields
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import frame_metrics as fm
from frame_metrics import api
from frame_metrics.cli import main
from frame_metrics.columns import Columns
from frame_metrics.keywords import (
    EXTRA_INPUTS,
    ROLES,
    SETTINGS,
    ExtraInput,
    Role,
    Setting,
    keywords,
)
from frame_metrics.options import OPTIONS
from frame_metrics.planner import reads
from frame_metrics.spec import build_spec

ROOT = Path(__file__).resolve().parent.parent


def _generator() -> Any:
    spec = importlib.util.spec_from_file_location("gen_api", ROOT / "docs" / "gen" / "gen_api.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_api_is_written_from_the_tables() -> None:
    source = (ROOT / "frame_metrics" / "api.py").read_text(encoding="utf-8")
    assert _generator().rewritten(source) == source, "run: python docs/gen/gen_api.py"


def _normal(annotation: str) -> str:
    return ast.unparse(ast.parse(annotation))


def test_the_signature_is_the_tables_in_order() -> None:
    parameters = list(inspect.signature(fm.evaluate).parameters.values())
    assert [p.name for p in parameters[:2]] == ["recs", "truth"]
    assert parameters[-1].kind is inspect.Parameter.VAR_KEYWORD
    written = parameters[2:-1]
    table = keywords()
    assert [p.name for p in written] == [k.name for k in table]
    for p, k in zip(written, table, strict=True):
        assert p.kind is inspect.Parameter.KEYWORD_ONLY
        assert _normal(str(p.annotation)) == _normal(k.annotation), p.name
        default = "NOT_GIVEN" if p.default is fm.options.NOT_GIVEN else p.default
        assert _normal(repr(default) if default != "NOT_GIVEN" else default) == _normal(
            k.default
        ), p.name
    # Each table row is one keyword: nothing twice, nothing left out.
    names = [k.name for k in table]
    assert len(names) == len(set(names))
    every = [*(s.name for s in SETTINGS), *(r.name for r in ROLES), *(o.name for o in OPTIONS)]
    assert sorted(names) == sorted([*every, *(e.name for e in EXTRA_INPUTS)])


def test_every_row_has_its_documentation() -> None:
    rows: list[Setting | Role | ExtraInput] = [*SETTINGS, *ROLES, *EXTRA_INPUTS]
    for row in rows:
        assert row.doc.strip(), row.name
    for option in OPTIONS:
        assert option.api_doc.strip(), option.name
        assert option.annotation, option.name
    for role in ROLES:
        assert role.help, role.name
        assert role.flag.startswith("--"), role.name
    for extra in EXTRA_INPUTS:
        assert extra.help, extra.name
        assert extra.what, extra.name


def test_columns_has_a_field_per_role_defaulting_to_the_column_read() -> None:
    names = [f.name for f in fields(Columns) if f.name != "more"]
    assert names == [r.name for r in ROLES]
    defaults = Columns()
    for row in ROLES:
        want = (row.read_as,) if row.several and row.read_as else row.read_as
        assert getattr(defaults, row.name) == (want if not row.several else want or ()), row.name


@pytest.mark.parametrize("row", ROLES, ids=lambda r: r.name)
def test_build_spec_takes_each_role(row: Role) -> None:
    value: Any = ["c1", "c2"] if row.several else "c1"
    metric = "ee_loss@5" if row.name == "sample" else "ndcg@5"  # what reads samples
    spec = build_spec({"truth"}, metrics=metric, **{row.name: value})
    assert getattr(spec.columns, row.name) == (tuple(value) if row.several else value)


@pytest.mark.parametrize("row", EXTRA_INPUTS, ids=lambda e: e.name)
def test_each_input_reads_the_columns_of_its_roles(row: ExtraInput) -> None:
    named: dict[str, Any] = {"user": "u", "item": "i", "features": "f", "by": "m", "score": "s"}
    spec = build_spec({"truth", row.name}, metrics="ndcg@5", **named)
    columns = {"by": {"m"}, "user": {"u"}, "item": {"i"}, "order": {"s"}, "features": {"f"}}
    assert reads(spec)[row.name] >= set().union(*(columns[role] for role in row.reads))


RECS = pl.DataFrame({"u": [1, 1], "i": ["a", "b"], "r": [1, 2]})
TRUTH = pl.DataFrame({"u": [1], "i": ["a"], "rel": [1]})


def _flag_case(row: Role) -> tuple[list[str], Any]:
    """The flag given a value, and the value evaluate gets (a composite key: a list)."""
    return ([row.flag, "x,y"], ["x", "y"]) if row.several else ([row.flag, "x"], "x")


@pytest.mark.parametrize("row", [r for r in ROLES if r.builtin], ids=lambda r: r.name)
def test_each_column_flag_reaches_evaluate(
    row: Role, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    RECS.write_csv(tmp_path / "recs.csv")
    seen: dict[str, Any] = {}

    def evaluate(recs: object, truth: object, **kwargs: Any) -> pl.LazyFrame:
        seen.update(kwargs)
        return pl.LazyFrame({"n_users": [0]})

    monkeypatch.setattr(fm, "evaluate", evaluate)
    args, value = _flag_case(row)
    assert main(["evaluate", str(tmp_path / "recs.csv"), *args]) == 0
    capsys.readouterr()
    assert seen[row.name] == value
    if row.name == "score":
        assert seen["rank"] is None  # the score ranks
    # The other columns keep the column evaluate reads by default.
    parameters = inspect.signature(api.evaluate).parameters
    for other in ROLES:
        if other.name not in (row.name, "rank", "score") and other.name in seen:
            default = parameters[other.name].default
            assert seen[other.name] in (default, [default]), other.name


@pytest.mark.parametrize("row", [e for e in EXTRA_INPUTS if e.builtin], ids=lambda e: e.name)
def test_each_file_flag_reaches_evaluate(
    row: ExtraInput,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    RECS.write_csv(tmp_path / "recs.csv")
    RECS.write_csv(tmp_path / "extra.csv")
    seen: dict[str, Any] = {}

    def evaluate(recs: object, truth: object, **kwargs: Any) -> pl.LazyFrame:
        seen.update(kwargs)
        return pl.LazyFrame({"n_users": [0]})

    monkeypatch.setattr(fm, "evaluate", evaluate)
    assert (
        main(["evaluate", str(tmp_path / "recs.csv"), row.flag, str(tmp_path / "extra.csv")]) == 0
    )
    capsys.readouterr()
    assert isinstance(seen[row.name], pl.LazyFrame)
    assert seen[row.name].collect().equals(RECS)
    assert not any(e.name in seen for e in EXTRA_INPUTS if e is not row)


def test_diagnose_takes_evaluate_keywords_and_refuses_others() -> None:
    found = fm.diagnose(RECS, TRUTH, user="u", item="i", rank="r", relevance="rel", k=2)
    assert found.n_users == 1
    with pytest.raises(fm.UnknownKeywordError, match=r"got trian \(did you mean train\?\)"):
        fm.diagnose(RECS, TRUTH, trian=TRUTH)
    with pytest.raises(fm.UnknownKeywordError, match="buckets"):
        fm.diagnose(RECS, TRUTH, buckets=2)


def test_an_unknown_keyword_is_named_with_a_hint(constructor: Any) -> None:
    with pytest.raises(fm.UnknownKeywordError) as raised:
        fm.evaluate(constructor(RECS), constructor(TRUTH), user="u", item="i", tresh=2)
    assert isinstance(raised.value, ValueError)
    assert isinstance(raised.value, TypeError)
    assert "got tresh (did you mean threshold?)" in str(raised.value)


#: Keywords the other workflows share with evaluate by name but not by type or default,
#: each for a reason; every other shared keyword is evaluate's, as evaluate takes it.
DIFFERENT: dict[tuple[str, str], str] = {
    # A run over users: None shows the bar when stderr is a terminal (no buckets there).
    ("compare", "progress"): "shown when the resampling takes a while",
    ("gaps", "progress"): "shown when the resampling takes a while",
    # The users' groups (a column or a frame), not item_groups' group column.
    ("gaps", "group"): "the users' groups",
    # One cutoff: the value of the top-k policy, the exposure within k.
    ("policy_value", "k"): "one cutoff, default 10",
    ("exposure", "k"): "one cutoff, default 10",
    # The table's own browsing model, not a preset's: no convention sets it there.
    ("exposure", "exposure"): "no convention: the spec's default",
    # No convention either: threshold=None is rel > 0 (nothing to warn of).
    ("exposure", "threshold"): "no star-ratings warning",
    # Ties in time order of a split, not of scores.
    ("split", "ties"): "ties of event times",
}


@pytest.mark.parametrize("name", ["compare", "gaps", "policy_value", "exposure", "split"])
def test_other_workflows_take_evaluate_keywords_as_evaluate_does(name: str) -> None:
    evaluate = inspect.signature(fm.evaluate).parameters
    for keyword, parameter in inspect.signature(getattr(fm, name)).parameters.items():
        if keyword in ("recs", "truth") or keyword not in evaluate:
            continue
        same = (str(parameter.annotation), parameter.default) == (
            str(evaluate[keyword].annotation),
            evaluate[keyword].default,
        )
        assert same != ((name, keyword) in DIFFERENT), (name, keyword)
