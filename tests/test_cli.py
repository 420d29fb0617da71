"""The ``frame-metrics`` command line: the numbers are ``fm.evaluate``'s, every error one line."""

from __future__ import annotations

import io
import json
import math
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import frame_metrics as fm
from frame_metrics.cli import _EXTRA_OF_MODULE, _missing_dependency, build_parser, main, render
from frame_metrics.errors import InvalidOptionError

Rows = list[dict[str, Any]]

# Two models, five users (user 5 has truth but no recommendations), segments per user.
LISTS = {
    "A": {1: "abc", 2: "bdc", 3: "efa", 4: "cab"},
    "B": {1: "fed", 2: "abc", 3: "abc", 4: "def"},
}
SEGMENT = {1: "new", 2: "old", 3: "new", 4: "old"}
TRUTH = [
    (1, "a", 3),
    (1, "c", 1),
    (1, "x", 2),
    (2, "d", 2),
    (2, "e", 1),
    (3, "a", 1),
    (3, "f", 5),
    (4, "b", 0),
    (4, "z", 1),
    (5, "a", 2),
]


#: TRUTH's grades (0 to 5) are gains, every grade above 0 relevant: said, as the
#: definition sheet (section 8) asks of star-like levels (else a RelevanceWarning).
SAID = ("--threshold", "none")


def _recs() -> pl.DataFrame:
    rows = [
        # The score orders items alphabetically backwards, unlike the rank: a score run
        # gives other numbers than a rank run.
        (model, user, SEGMENT[user], item, rank, float(ord(item)))
        for model, lists in LISTS.items()
        for user, items in lists.items()
        for rank, item in enumerate(items, start=1)
    ]
    return pl.DataFrame(
        rows, schema=["model", "user", "segment", "item", "rank", "score"], orient="row"
    )


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    """Inputs in parquet, CSV and TSV files."""
    paths = {
        name: tmp_path / name
        for name in (
            "recs.parquet",
            "recs.csv",
            "truth.csv",
            "truth.tsv",
            "truth.parquet",
            "train.parquet",
            "catalog.csv",
            "long.parquet",
        )
    }
    recs = _recs()
    truth = pl.DataFrame(TRUTH, schema=["user", "item", "relevance"], orient="row")
    recs.write_parquet(paths["recs.parquet"])
    recs.write_csv(paths["recs.csv"])
    truth.write_csv(paths["truth.csv"])
    truth.write_csv(paths["truth.tsv"], separator="\t")
    truth.write_parquet(paths["truth.parquet"])
    pl.DataFrame({"user": [1, 1, 2, 3, 3, 3, 4], "item": list("aabacdb")}).unique().write_parquet(
        paths["train.parquet"]
    )
    pl.DataFrame({"item": list("abcdefghij")}).write_csv(paths["catalog.csv"])
    a = recs.filter(model="A").select("user", "item", "rank")
    long = a.join(truth, on=["user", "item"], how="full", coalesce=True)
    long.write_parquet(paths["long.parquet"])
    pl.DataFrame({"model": ["a", "b"], "user": [1, 1], "ndcg@10": [0.1, 0.2]}).write_parquet(
        tmp_path / "per_user.parquet"
    )
    texts = {
        # A header and no rows: nothing to infer a dtype from.
        "header_recs.csv": "model,user,item,rank\n",
        "header_truth.csv": "user,item,relevance\n",
        # Non-finite values where the metrics need numbers.
        "truth_inf.csv": "user,item,relevance\n1,a,inf\n2,d,1\n",
        "recs_inf.csv": "user,item,rank,score,prediction\n1,a,1,inf,1.0\n1,c,2,0.5,-inf\n",
        # Item ids: not all digits in recs (String), all digits in truth (Int64).
        "recs_ids.csv": "user,item,rank\n1,10,1\n1,x,2\n1,20,3\n2,7,1\n2,y,2\n",
        "truth_ids.csv": "user,item,relevance\n1,10,1\n1,20,1\n1,30,1\n2,007,1\n",
        # ... and digits in the first 10,000 rows polars infers dtypes from, text after.
        "truth_late_text.csv": "user,item,relevance\n"
        + "".join(f"1,{i},1\n" for i in range(10_000))
        + "2,x,1\n",
        "long_inf.csv": "user,item,rank,relevance\n1,a,1,inf\n1,b,2,1\n",
        "empty.csv": "",
        "broken.parquet": "not a parquet file",
        "text_rank.csv": "user,item,rank\n1,a,1\n1,b,x\n",
        "recs_dup.csv": "user,item,rank\n1,a,1\n1,a,2\n",
        # Two models' lists joined with truth: the relevant item neither recommended has no model.
        "long_by.csv": "model,user,item,rank,relevance\na,1,x,1,1\nb,1,y,1,\n,1,z,,1\n",
    }
    for name, text in texts.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    ids = pl.DataFrame({"user": [1, 1, 1, 2], "item": [10, 20, 30, 7], "relevance": [1] * 4})
    ids.write_parquet(tmp_path / "truth_ids.parquet")
    ids.with_columns(pl.col("item").cast(pl.Float64)).write_parquet(
        tmp_path / "truth_float_ids.parquet"
    )
    parquet = ["truth_ids.parquet", "truth_float_ids.parquet", "per_user.parquet"]
    paths.update({name: tmp_path / name for name in [*texts, *parquet]})
    return paths


def _scan(path: Path) -> pl.LazyFrame:
    if path.suffix == ".parquet":
        return pl.scan_parquet(path)
    return pl.scan_csv(path, separator="\t" if path.suffix == ".tsv" else ",")


def expected(recs: Path, truth: Path | None, **kwargs: Any) -> pl.DataFrame:
    """``fm.evaluate`` on the same files, as a library user would call it."""
    result = fm.evaluate(_scan(recs), None if truth is None else _scan(truth), **kwargs)
    assert isinstance(result, pl.LazyFrame)
    return result.collect()


def _value(text: str) -> Any:
    """A table cell back to a value: int, float, str or None."""
    if text in ("", "null"):
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def table_cells(out: str) -> list[list[str]]:
    """The text of a table's cells, the header's first."""
    lines = [line for line in out.splitlines() if line.startswith("│")]
    return [[cell.strip() for cell in line.strip("│").split("┆")] for line in lines]


def parse(out: str, fmt: str) -> tuple[list[str], Rows]:
    """The column names and rows of an output, in any format."""
    if fmt == "csv":
        frame = pl.read_csv(io.StringIO(out))
        return frame.columns, frame.rows(named=True)
    if fmt == "json":
        records: Rows = json.loads(out)
        assert isinstance(records, list)
        return list(records[0]), records
    if fmt == "markdown":
        lines = out.strip().splitlines()
        assert set(lines[1].replace("|", "").split()) <= {"---", "---:"}
        cells = [line.strip().removeprefix("| ").removesuffix(" |").split(" | ") for line in lines]
        del cells[1]
    else:
        cells = table_cells(out)
    header = [c.strip() for c in cells[0]]
    return header, [
        dict(zip(header, map(_value, (c.strip() for c in row)), strict=True)) for row in cells[1:]
    ]


def run(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    """Run the CLI in-process: exit status, stdout, stderr."""
    code = main([str(a) for a in args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


#: The largest relative error of a number shown with 6 significant digits: half a unit in
#: the 6th digit, 0.5e-5 of a leading digit of at least 1.
SHOWN = 5e-6


def assert_same(out: str, fmt: str, want: pl.DataFrame) -> None:
    """The output holds the expected frame: same columns and rows, numbers exact in csv
    and json, within :data:`SHOWN` (6 significant digits) in table and markdown."""
    columns, rows = parse(out, fmt)
    assert columns == want.columns
    if fmt in ("csv", "json"):
        assert rows == want.rows(named=True)
        return
    assert len(rows) == want.height
    for row, wanted in zip(rows, want.iter_rows(named=True), strict=True):
        for name, value in wanted.items():
            if isinstance(value, float):
                assert math.isclose(row[name], value, rel_tol=SHOWN), (name, row[name], value)
            else:
                assert row[name] == value


# -- the numbers --------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["table", "csv", "json", "markdown"])
def test_every_format_gives_evaluate_numbers(
    capsys: pytest.CaptureFixture[str], files: dict[str, Path], fmt: str
) -> None:
    recs, truth = files["recs.parquet"], files["truth.csv"]
    code, out, err = run(
        capsys, "evaluate", recs, truth, "-m", "ndcg,ap,recall", "-k", "2,3", "--by", "model",
        "--format", fmt, *SAID,
    )  # fmt: skip
    assert (code, err) == (0, "")
    want = expected(
        recs, truth, metrics=["ndcg", "ap", "recall"], k=[2, 3], by="model", aggregate=True
    )
    assert want.height == 2
    assert_same(out, fmt, want)


def test_default_metrics_and_table(
    capsys: pytest.CaptureFixture[str], files: dict[str, Path]
) -> None:
    recs, truth = files["recs.csv"], files["truth.parquet"]
    code, out, _ = run(capsys, "evaluate", recs, truth, "-k", "3", "--by", "model")
    assert code == 0
    want = expected(recs, truth, k=3, by="model", aggregate=True)
    assert "ndcg@3" in want.columns
    assert_same(out, "table", want)


def test_per_user(capsys: pytest.CaptureFixture[str], files: dict[str, Path]) -> None:
    recs, truth = files["recs.parquet"], files["truth.csv"]
    code, out, _ = run(
        capsys, "evaluate", recs, truth, "-m", "ndcg,mrr", "-k", "3", "--by", "model",
        "--per-user", "--format", "csv",
    )  # fmt: skip
    assert code == 0
    want = expected(recs, truth, metrics=["ndcg", "mrr"], k=3, by="model")
    assert want.columns[:2] == ["model", "user"]
    assert want.height == 10  # 4 users with relevant items + user 5, per model
    assert_same(out, "csv", want)


def test_by_two_columns(capsys: pytest.CaptureFixture[str], files: dict[str, Path]) -> None:
    recs, truth = files["recs.parquet"], files["truth.tsv"]
    code, out, _ = run(
        capsys, "evaluate", recs, truth, "-m", "precision@2,ndcg@3", "--by", "model,segment",
        "--format", "json",
    )  # fmt: skip
    assert code == 0
    want = expected(
        recs, truth, metrics=["precision@2", "ndcg@3"], by=["model", "segment"], aggregate=True
    )
    assert want.height == 4
    assert_same(out, "json", want)


def test_score_column(capsys: pytest.CaptureFixture[str], files: dict[str, Path]) -> None:
    recs, truth = files["recs.parquet"], files["truth.csv"]
    args: list[str | Path] = ["evaluate", recs, truth, "-m", "ndcg", "-k", "2", "--by", "model"]
    args += ["--format", "csv"]
    code, out, _ = run(capsys, *args, "--score-col", "score")
    assert code == 0
    want = expected(recs, truth, metrics="ndcg", k=2, by="model", score="score", aggregate=True)
    assert_same(out, "csv", want)
    by_rank = expected(recs, truth, metrics="ndcg", k=2, by="model", aggregate=True)
    assert want["ndcg@2"].to_list() != by_rank["ndcg@2"].to_list()


def test_threshold_and_options(capsys: pytest.CaptureFixture[str], files: dict[str, Path]) -> None:
    recs, truth = files["recs.parquet"], files["truth.csv"]
    code, out, _ = run(
        capsys, "evaluate", recs, truth, "-m", "ndcg,ap,recall", "-k", "3", "--by", "model",
        "--threshold", "2", "--gain", "exponential", "--ap-denominator", "relevant",
        "--empty", "zero", "--format", "json",
    )  # fmt: skip
    assert code == 0
    want = expected(
        recs, truth, metrics=["ndcg", "ap", "recall"], k=3, by="model", aggregate=True,
        threshold=2, gain="exponential", ap_denominator="relevant", empty="zero",
    )  # fmt: skip
    assert_same(out, "json", want)
    default = expected(
        recs, truth, metrics=["ndcg", "ap", "recall"], k=3, by="model", aggregate=True
    )
    assert want.rows() != default.rows()


def test_train_and_catalog(capsys: pytest.CaptureFixture[str], files: dict[str, Path]) -> None:
    recs, truth = files["recs.parquet"], files["truth.csv"]
    train, catalog = files["train.parquet"], files["catalog.csv"]
    code, out, _ = run(
        capsys, "evaluate", recs, truth, "-m", "novelty,aplt,coverage,gini", "-k", "2,3",
        "--by", "model", "--train", train, "--catalog", catalog, "--head-share", "0.5",
        "--format", "csv",
    )  # fmt: skip
    assert code == 0
    want = expected(
        recs, truth, metrics=["novelty", "aplt", "coverage", "gini"], k=[2, 3], by="model",
        aggregate=True, train=_scan(train), catalog=_scan(catalog), head_share=0.5,
    )  # fmt: skip
    assert want["coverage@3"].to_list() == [6 / 10, 6 / 10]  # items a-f of a catalog of 10
    assert_same(out, "csv", want)


def test_long_table(capsys: pytest.CaptureFixture[str], files: dict[str, Path]) -> None:
    long = files["long.parquet"]
    code, out, _ = run(
        capsys, "evaluate", long, "-m", "ndcg,recall", "-k", "1,3", "--format", "json"
    )
    assert code == 0
    want = expected(long, None, metrics=["ndcg", "recall"], k=[1, 3], aggregate=True)
    assert_same(out, "json", want)


def _significant_digits(cell: str) -> int:
    """How many significant digits a number's text shows: '0.0123' 3, '4.5e-70' 2."""
    mantissa = cell.strip().lstrip("-").split("e")[0].replace(".", "")
    return len(mantissa.lstrip("0")) or 1


def test_precision_is_significant_digits(
    capsys: pytest.CaptureFixture[str], files: dict[str, Path]
) -> None:
    recs, truth = files["recs.parquet"], files["truth.csv"]
    want = expected(recs, truth, metrics=["ndcg", "ap"], k=3, by="model", aggregate=True)
    for fmt in ("table", "markdown"):
        code, out, _ = run(
            capsys, "evaluate", recs, truth, "-m", "ndcg,ap", "-k", "3", "--by", "model",
            "--format", fmt, "--precision", "3",
        )  # fmt: skip
        assert code == 0
        _, rows = parse(out, fmt)
        for row, wanted in zip(rows, want.iter_rows(named=True), strict=True):
            for name in ("ndcg@3", "ap@3"):
                # 3 significant digits: within half a unit of the 3rd digit.
                assert math.isclose(row[name], wanted[name], rel_tol=5e-3)
                assert _significant_digits(str(row[name])) <= 3


# Values and their text written out by hand: 6 significant digits by default, scientific
# notation below 1e-4 and from 1e6 (from 10**N with --precision N) up, whole floats as x.0.
VALUES = [1.2345678e-70, 0.5002958951164717, 123456789.0, 2.0, None, -0.000123456789, 0.1]
SHOWN_6 = ["1.23457e-70", "0.500296", "1.23457e+08", "2.0", "null", "-0.000123457", "0.1"]
SHOWN_2 = ["1.2e-70", "0.5", "1.2e+08", "2.0", "null", "-0.00012", "0.1"]


def test_render_table_by_hand() -> None:
    frame = pl.DataFrame({"model": list("abcdefg"), "n": range(7), "p": VALUES})
    assert render(frame, "table") == "\n".join(
        [
            "┌───────┬───┬──────────────┐",
            "│ model ┆ n ┆            p │",
            "╞═══════╪═══╪══════════════╡",
            "│ a     ┆ 0 ┆  1.23457e-70 │",
            "│ b     ┆ 1 ┆     0.500296 │",
            "│ c     ┆ 2 ┆  1.23457e+08 │",
            "│ d     ┆ 3 ┆          2.0 │",
            "│ e     ┆ 4 ┆         null │",
            "│ f     ┆ 5 ┆ -0.000123457 │",
            "│ g     ┆ 6 ┆          0.1 │",
            "└───────┴───┴──────────────┘",
        ]
    )
    table = render(frame, "table", precision=2)
    cells = [line.split("┆")[2].strip(" │") for line in table.splitlines() if "┆" in line]
    assert cells == ["p", *SHOWN_2]


@pytest.mark.parametrize(("precision", "shown"), [(None, SHOWN_6), (2, SHOWN_2)])
def test_render_markdown_by_hand(precision: int | None, shown: list[str]) -> None:
    frame = pl.DataFrame({"p": VALUES})
    lines = render(frame, "markdown", precision).splitlines()
    assert lines[:2] == ["| p |", "| ---: |"]
    assert lines[2:] == [f"| {'' if text == 'null' else text} |" for text in shown]


@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_csv_and_json_are_exact(fmt: str) -> None:
    frame = pl.DataFrame({"p": VALUES})
    text = render(frame, fmt, precision=2)
    assert "1.2345678e-70" in text
    assert "0.5002958951164717" in text
    _, rows = parse(text, fmt)
    assert [r["p"] for r in rows] == VALUES


@pytest.mark.parametrize(
    ("name", "fmt_args", "fmt"),
    [
        ("out.csv", [], "csv"),
        ("out.json", [], "json"),
        ("out.md", [], "markdown"),
        ("out.txt", [], "table"),
        ("out.txt", ["--format", "csv"], "csv"),
        ("out.csv", ["--format", "json"], "json"),
    ],
)
def test_output_file(
    capsys: pytest.CaptureFixture[str],
    files: dict[str, Path],
    tmp_path: Path,
    name: str,
    fmt_args: list[str],
    fmt: str,
) -> None:
    recs, truth = files["recs.parquet"], files["truth.csv"]
    target = tmp_path / "results" / name
    target.parent.mkdir()
    code, out, err = run(
        capsys, "evaluate", recs, truth, "-m", "ndcg,hit_rate", "-k", "3", "--by", "model",
        "--per-user", "-o", target, *fmt_args, *SAID,
    )  # fmt: skip
    assert (code, out, err) == (0, "", "")
    want = expected(recs, truth, metrics=["ndcg", "hit_rate"], k=3, by="model")
    assert_same(target.read_text(encoding="utf-8"), fmt, want)
    assert [p.name for p in target.parent.iterdir()] == [name]  # no partial file left


# -- errors ------------------------------------------------------------------------------------

ArgsOf = Callable[[dict[str, Path]], list[str | Path]]


def _with(*extra: str) -> ArgsOf:
    return lambda f: ["evaluate", f["recs.parquet"], f["truth.csv"], "--by", "model", *SAID, *extra]


def _on(recs: str, truth: str | None, *extra: str) -> ArgsOf:
    return lambda f: ["evaluate", f[recs], *([f[truth]] if truth else []), *extra]


def _compare(*extra: str) -> ArgsOf:
    return lambda f: ["compare", f["per_user.parquet"], *extra]


def _help(command: str = "evaluate") -> str:
    return f" (see 'frame-metrics {command} --help')"


_OUTPUTS = ".csv, .json, .md, .markdown or .txt"
_RECS_COLUMNS = "'model', 'user', 'segment', 'item', 'rank', 'score'"

#: Bad command lines: the exit status and the one stderr line after "frame-metrics: error: ",
#: "..." standing for any text (a temporary path).
ERRORS: list[tuple[str, ArgsOf, int, str]] = [
    # files
    (
        "missing file",
        lambda f: ["evaluate", f["recs.parquet"].with_name("nope.parquet"), f["truth.csv"]],
        2,
        "RECS: expected a file, got '...nope.parquet' (no such file)",
    ),
    (
        "unsupported extension",
        lambda f: ["evaluate", f["recs.parquet"], f["truth.csv"].with_suffix(".json"), "-k", "3"],
        2,
        "TRUTH: expected a .parquet, .pq, .csv or .tsv file or a directory of parquet files, "
        "got '...truth.json' (.json files are not supported)",
    ),
    (
        "missing extra file",
        _with("-m", "novelty", "-k", "3", "--train", "train.csv"),
        2,
        "--train: expected a file, got 'train.csv' (no such file)",
    ),
    (
        "empty file",
        _on("empty.csv", "truth.csv", "-k", "3"),
        1,
        "RECS: cannot read '...empty.csv': ...",
    ),
    (
        "not parquet",
        _on("broken.parquet", "truth.csv", "-k", "3"),
        1,
        "RECS: cannot read '...broken.parquet': ...",
    ),
    # -o
    (
        "output directory missing",
        _with("-k", "3", "-o", "no/such/dir/out.csv"),
        2,
        "-o: expected a file in an existing directory, got 'no/such/dir/out.csv'",
    ),
    (
        "output xlsx",
        lambda f: [*_with("-k", "3")(f), "-o", f["recs.csv"].with_name("out.xlsx")],
        2,
        f"-o: expected a {_OUTPUTS} file, got '...out.xlsx' (.xlsx files are not supported)",
    ),
    (
        "output parquet",
        _with("-k", "3", "-o", "out.parquet"),
        2,
        f"-o: expected a {_OUTPUTS} file, got 'out.parquet' (.parquet files are not supported)",
    ),
    (
        "output without extension",
        _with("-k", "3", "-o", "out", "--format", "csv"),
        2,
        f"-o: expected a {_OUTPUTS} file, got 'out'",
    ),
    # option values
    ("bad k", _with("-k", "0"), 2, "-k: expected an int ... or a list of them, got 0"),
    (
        "k not a number",
        _with("-k", "ten"),
        2,
        "-k: expected an int >= 1 or a comma-separated list of them, got 'ten'",
    ),
    (
        "k blank",
        _with("-k", " ,"),
        2,
        "-k: expected an int >= 1 or a comma-separated list of them, got ' ,'",
    ),
    (
        "unknown metric",
        _with("-m", "ndgc", "-k", "3"),
        2,
        "-m: expected a known metric name, got 'ndgc' (did you mean 'ndcg'?); known metrics: ...",
    ),
    (
        "a preset's threshold 0 on a long table",
        _on("long.parquet", None, "-m", "recall@2", "--convention", "rectools"),
        2,
        "--threshold: expected a number > 0 or None for recall@2 on a long table (relevance 0 "
        "marks a recommended item outside truth there; give TRUTH to make every truth row "
        "relevant), got 0, set by --convention rectools (pass --threshold to override it)",
    ),
    (
        "bad threshold",
        _with("-k", "3", "--threshold", "-1"),
        2,
        "--threshold: expected a finite number >= 0 or None, got -1.0",
    ),
    (
        "threshold not a number",
        _with("-k", "3", "--threshold", "abc"),
        2,
        "--threshold: expected a number or none, got 'abc'" + _help(),
    ),
    (
        "bad head share",
        _with("-m", "aplt@3", "--head-share", "1.5"),
        2,
        "--head-share: expected a number in (0, 1), got 1.5",
    ),
    (
        "head share not a number",
        _with("-m", "aplt@3", "--head-share", "half"),
        2,
        "--head-share: expected a number, got 'half'" + _help(),
    ),
    (
        "bad precision",
        _with("-k", "3", "--precision", "-1"),
        2,
        "--precision: expected an int from 1 to 17 (significant digits), got '-1'" + _help(),
    ),
    (
        "precision 0",
        _with("-k", "3", "--precision", "0"),
        2,
        "--precision: expected an int from 1 to 17 (significant digits), got '0'" + _help(),
    ),
    (
        "precision not a number",
        _with("-k", "3", "--precision", "abc"),
        2,
        "--precision: expected an int from 1 to 17 (significant digits), got 'abc'" + _help(),
    ),
    (
        "buckets 0",
        _with("-k", "3", "--buckets", "0"),
        2,
        "--buckets: expected a positive integer or auto, got '0'" + _help(),
    ),
    (
        "buckets not a number",
        _with("-k", "3", "--buckets", "many"),
        2,
        "--buckets: expected a positive integer or auto, got 'many'" + _help(),
    ),
    (
        "blank column names",
        _with("-k", "3", "--user-col", " ,"),
        2,
        "--user-col: expected a name or comma-separated names, got ' ,'" + _help(),
    ),
    (
        "unknown choice",
        _with("-k", "3", "--gain", "log"),
        2,
        "--gain: expected linear, exponential, binary or a table LEVEL=GAIN,... such as "
        "1=3,2=9, got 'log'" + _help(),
    ),
    (
        "rank and score",
        _with("-k", "3", "--rank-col", "pos", "--score-col", "score"),
        2,
        "--score-col: not allowed with argument --rank-col" + _help(),
    ),
    (
        "unknown option",
        _with("-k", "3", "--frobnicate"),
        2,
        "unrecognized arguments: --frobnicate (see 'frame-metrics --help')",
    ),
    ("no RECS", lambda f: ["evaluate"], 2, "the following arguments are required: RECS" + _help()),
    (
        "unknown command",
        lambda f: ["frobnicate"],
        2,
        "COMMAND: invalid choice: 'frobnicate' (choose from 'evaluate', 'compare', 'report', 'demo', 'gaps', "
        "'group-exposure', 'exposure', 'policy-value', 'split') "
        "(see 'frame-metrics --help')",
    ),
    # columns and options the metrics judge
    (
        "unknown column",
        _with("-k", "3", "--user-col", "usr"),
        2,
        "recs: expected column 'usr' (did you mean 'user'?), not found; available columns: "
        f"{_RECS_COLUMNS} (set with --user-col)",
    ),
    (
        "unknown by column",
        _with("-k", "3", "--by", "modle"),
        2,
        "recs: expected column 'modle' (did you mean 'model'?), not found; available columns: "
        f"{_RECS_COLUMNS} (set with --by)",
    ),
    ("extra input needed", _with("-m", "novelty@3"), 2, "novelty: expected --train FILE ..."),
    (
        "corpus per user",
        _with("-m", "coverage@3", "--per-user"),
        2,
        "--per-user: ...: corpus metrics have ...; leave out --per-user",
    ),
    # values the metrics cannot use
    # the ways out a message proposes, as this command line's options and arguments
    (
        "duplicate ranks",
        _on("recs.parquet", "truth.csv", "-k", "3"),
        1,
        "recs: expected one row per rank within a user, found 24 rows that repeat one, e.g. "
        "user=1, item='a', rank=1; the rows differ in column(s) 'model': if they hold several "
        "models or segments, pass --by model",
    ),
    (
        "err above max relevance",
        _with("-m", "err@3", "--max-relevance", "2"),
        1,
        "truth: expected values of at most 2.0 in column 'relevance' (err reads P = "
        "(2^rel - 1) / 2^max_relevance, a probability), found 2 larger, e.g. user=1, "
        "item='a', relevance=3; give --max-relevance the largest relevance or more, or leave "
        "it out to use the largest relevance in truth",
    ),
    (
        "ndcg over k slots with graded gains",
        _with("-m", "ndcg(idcg=k)@3"),
        2,
        "idcg: expected 'relevant' for ndcg(idcg=k)@3 under gain='linear' (idcg='k' is k "
        "ideal slots of gain 1, an upper bound of DCG only under gain='binary': pass --gain "
        "binary with it), got 'k'",
    ),
    (
        "duplicate pair",
        _on("recs_dup.csv", "truth.csv", "-k", "3"),
        1,
        "recs: expected one row per (user, item) pair, found 2 rows that repeat one, e.g. "
        "user=1, item='a', rank=1 (pass --on-duplicate first to keep the best-ranked row)",
    ),
    (
        "long table by model with truth rows of no model",
        _on("long_by.csv", None, "-k", "3", "--by", "model"),
        1,
        "long table: expected no nulls in key column 'model', found 1 null row(s), e.g. "
        "model=None, user=1, item='z', rank=None, relevance=1; they have no rank (truth rows "
        "not recommended): with --by, each 'model' group of a long table needs its own truth "
        "rows, so repeat them once per 'model' value, or pass truth separately (TRUTH, without "
        "'model': it then applies to every 'model' value)",
    ),
    (
        "text ranks",
        _on("text_rank.csv", "truth.csv", "-k", "3"),
        1,
        "recs: expected column 'rank' to hold integer values, found dtype String",
    ),
    (
        "infinite relevance",
        _on("recs.csv", "truth_inf.csv", "-k", "3", "--by", "model"),
        1,
        "truth: expected finite numbers in column 'relevance', found 1 NaN or infinite "
        "value(s), e.g. user=1, item='a', relevance=inf",
    ),
    (
        "infinite relevance in a long table",
        _on("long_inf.csv", None, "-k", "3"),
        1,
        "long table: expected finite numbers in column 'relevance', ...",
    ),
    (
        "infinite prediction",
        _on("recs_inf.csv", "truth.csv", "-m", "rmse"),
        1,
        "recs: expected finite numbers in column 'prediction', found 1 NaN or infinite "
        "value(s), e.g. user=1, item='c', prediction=-inf",
    ),
    # ids read as text in one file and as numbers in another
    (
        "text ids against digit ids (CSV)",
        _on("recs_ids.csv", "truth_ids.csv", "-k", "2"),
        1,
        "RECS and TRUTH: expected column 'item' to hold ids of one kind, found String in RECS "
        "and Int64 in TRUTH; to read the ids of every file as text, pass --ids-as-text",
    ),
    (
        "text ids against digit ids (parquet)",
        _on("recs_ids.csv", "truth_ids.parquet", "-k", "2"),
        1,
        "RECS and TRUTH: expected column 'item' to hold ids of one kind, found String in RECS "
        "and Int64 in TRUTH; to read the ids of every file as text, pass --ids-as-text",
    ),
    (
        "text ids after 10,000 digit ids",
        _on("recs_ids.csv", "truth_late_text.csv", "-k", "2"),
        1,
        "...could not parse `x` as dtype `i64` at column 'item' (column number 2); to read "
        "the ids of every file as text, pass --ids-as-text",
    ),
    (
        "float ids as text",
        _on("recs_ids.csv", "truth_float_ids.parquet", "-k", "2", "--ids-as-text"),
        1,
        "TRUTH: expected column 'item' to hold integer or text ids to read as text "
        "(--ids-as-text), found dtype Float64",
    ),
    # compare
    (
        "unknown baseline model",
        _compare("--baseline-model", "z"),
        2,
        "--baseline-model: expected one of the models 'a', 'b', got 'z'",
    ),
    ("bad level", _compare("--level", "95"), 2, "--level: expected a number in (0, 1), got 95.0"),
    (
        "level not a number",
        _compare("--level", "abc"),
        2,
        "--level: expected a number, got 'abc'" + _help("compare"),
    ),
    (
        "bad resamples",
        _compare("--resamples", "0"),
        2,
        "--resamples: expected an int in [1, 10_000_000], got 0",
    ),
    (
        "resamples not a number",
        _compare("--resamples", "1e4"),
        2,
        "--resamples: expected an int, got '1e4'" + _help("compare"),
    ),
    ("negative seed", _compare("--seed", "-1"), 2, "--seed: expected an int >= 0, got -1"),
]


def _matches(line: str, pattern: str) -> bool:
    """The whole line is the pattern, each "..." in it standing for any text."""
    regex = ".*".join(re.escape(part) for part in pattern.split("..."))
    return re.fullmatch(regex, line) is not None


@pytest.mark.parametrize(
    ("case", "args_of", "status", "message"), ERRORS, ids=[e[0] for e in ERRORS]
)
def test_errors_are_one_line(
    capsys: pytest.CaptureFixture[str],
    files: dict[str, Path],
    tmp_path: Path,
    case: str,
    args_of: ArgsOf,
    status: int,
    message: str,
) -> None:
    before = sorted(tmp_path.iterdir())
    code, out, err = run(capsys, *args_of(files))
    assert (code, out) == (status, ""), err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert _matches(lines[0], "frame-metrics: error: " + message), lines[0]
    assert sorted(tmp_path.iterdir()) == before  # no output file, not even a partial one


@pytest.mark.parametrize("name", ["leave k out", "train=1", "pass truth= to", "k: x"])
def test_what_the_user_wrote_is_repeated_as_written(
    capsys: pytest.CaptureFixture[str], files: dict[str, Path], name: str
) -> None:
    """A message quotes the caller's own text; the command line says the option the message
    is about its way (-m), and nothing in the quoted text (words that look like keywords
    were rewritten when the command line rewrote messages by pattern)."""
    with pytest.raises(InvalidOptionError) as raised:
        fm.evaluate(pl.read_parquet(files["recs.parquet"]), metrics=name)
    python = str(raised.value)
    assert python.startswith("metrics: expected a known metric name, got " + repr(name))
    code, out, err = run(capsys, "evaluate", files["recs.parquet"], files["truth.csv"], "-m", name)
    assert (code, out) == (2, "")
    assert err == "frame-metrics: error: -m" + python.removeprefix("metrics") + "\n"


class _ClosedPipe(io.StringIO):
    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")


@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_closed_stdout_is_not_an_error(
    monkeypatch: pytest.MonkeyPatch, files: dict[str, Path], fmt: str
) -> None:
    """``frame-metrics evaluate ... | head`` ends quietly when ``head`` has had enough."""
    stderr = io.StringIO()
    monkeypatch.setattr(sys, "stdout", _ClosedPipe())
    monkeypatch.setattr(sys, "stderr", stderr)
    args = ["evaluate", files["recs.parquet"], files["truth.csv"], "-k", "3", "--by", "model"]
    assert main([str(a) for a in [*args, *SAID, "--format", fmt]]) == 0
    assert stderr.getvalue() == ""


# -- odd inputs that must give the right result ------------------------------------------------


@pytest.mark.parametrize(
    ("options", "columns"),
    [
        ([], ["n_users", "ndcg@3", "recall@3"]),
        (["--by", "model"], ["model", "n_users", "ndcg@3", "recall@3"]),
        (["--per-user"], ["user", "ndcg@3", "recall@3"]),
        (["--per-user", "--by", "model"], ["model", "user", "ndcg@3", "recall@3"]),
    ],
)
@pytest.mark.parametrize("fmt", ["csv", "table"])
def test_header_only_csv_gives_the_empty_result(
    capsys: pytest.CaptureFixture[str],
    files: dict[str, Path],
    options: list[str],
    columns: list[str],
    fmt: str,
) -> None:
    """Files with a header and no rows: no users, so no rows; the columns as always."""
    recs, truth = files["header_recs.csv"], files["header_truth.csv"]
    args: list[str | Path] = ["evaluate", recs, truth, "-m", "ndcg,recall", "-k", "3", *options]
    code, out, err = run(capsys, *args, "--format", fmt)
    assert (code, err) == (0, "")
    assert parse(out, fmt) == (columns, [])


def test_header_only_recs_against_truth(
    capsys: pytest.CaptureFixture[str], files: dict[str, Path]
) -> None:
    """No recommendations at all: each of the 5 users with a relevant item scores 0."""
    code, out, err = run(
        capsys, "evaluate", files["header_recs.csv"], files["truth.csv"], "-m", "ndcg,recall",
        "-k", "3", "--format", "json", *SAID,
    )  # fmt: skip
    # Said once: nobody evaluated has a list (definition sheet section 8).
    assert code == 0
    assert err == (
        "frame-metrics: warning: recs: expected recommendations for most evaluated users, "
        "found none for 5 of the 5 users with a relevant truth item: they score 0 on every "
        "ranking metric (definition sheet, section 3); pass --users both to evaluate only "
        "the users in both frames\n"
    )
    assert json.loads(out) == [{"n_users": 5, "ndcg@3": 0.0, "recall@3": 0.0}]


@pytest.mark.parametrize(
    ("truth", "want"),
    [
        # user 1: 10, x of 10, 20, 30 -> 1 hit in 2 of 3; user 2: 7, y of '007' -> none
        # ('007' is text as written, not 7).
        ("truth_ids.csv", {"precision@2": 1 / 4, "recall@2": 1 / 6, "hit_rate@2": 1 / 2}),
        # The parquet file's ints as text: user 2's 7 is '7', a hit: 1 of 1.
        ("truth_ids.parquet", {"precision@2": 1 / 2, "recall@2": 2 / 3, "hit_rate@2": 1.0}),
        # user 1: 10 of the items 0 .. 9999; user 2: 7, y of x.
        (
            "truth_late_text.csv",
            {"precision@2": 1 / 4, "recall@2": 1 / 20_000, "hit_rate@2": 1 / 2},
        ),
    ],
)
def test_ids_as_text(
    capsys: pytest.CaptureFixture[str], files: dict[str, Path], truth: str, want: dict[str, float]
) -> None:
    """Item ids all digits in one file but not in the other match as text."""
    code, out, err = run(
        capsys, "evaluate", files["recs_ids.csv"], files[truth], "-m", "precision,recall,hit_rate",
        "-k", "2", "--ids-as-text", "--format", "json",
    )  # fmt: skip
    assert (code, err) == (0, "")
    assert json.loads(out) == [{"n_users": 2, **{k: pytest.approx(v) for k, v in want.items()}}]


def test_compare_table_is_readable(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every number has at most 6 significant digits, tiny ones (p-values) as 1.2e-70."""
    from frame_metrics.datasets import synthetic

    recs, truth = synthetic(n_users=200)
    recs.write_parquet(tmp_path / "recs.parquet")
    truth.write_parquet(tmp_path / "truth.parquet")
    args: list[str | Path] = ["compare", tmp_path / "recs.parquet", tmp_path / "truth.parquet"]
    args += [
        "-m",
        "ndcg",
        "-k",
        "5,10",
        "--resamples",
        "200",
        "--baseline-model",
        "personal",
        *SAID,
    ]
    code, exact, _ = run(capsys, *args, "--format", "csv")
    assert code == 0
    code, table, err = run(capsys, *args)
    assert (code, err) == (0, "")
    columns, want = parse(exact, "csv")
    cells = table_cells(table)
    assert cells[0] == columns
    tiny = 0
    for row, wanted in zip(cells[1:], want, strict=True):
        for cell, value in zip(row, wanted.values(), strict=True):
            if not isinstance(value, float):
                continue
            assert _significant_digits(cell) <= 6, cell
            assert math.isclose(float(cell), value, rel_tol=SHOWN)
            if 0 < abs(value) < 1e-4:
                tiny += 1
                assert re.fullmatch(r"-?\d(\.\d+)?e-\d+", cell), cell
    assert tiny > 0  # the models differ: p-values far below 1e-4


_NO_EXTRAS = """
import sys
for name in ("numpy", "pandas", "pyarrow", "matplotlib"):
    sys.modules[name] = None  # as after `pip install .`: importing them fails
from frame_metrics.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_without_optional_dependencies(files: dict[str, Path]) -> None:
    """evaluate needs polars alone; compare says which extra installs numpy."""
    recs, truth = files["recs.parquet"], files["truth.csv"]
    args = ["-m", "ndcg,recall,coverage", "-k", "3", "--by", "model", "--format", "json", *SAID]
    done = subprocess.run(
        [sys.executable, "-c", _NO_EXTRAS, "evaluate", str(recs), str(truth), *args],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert (done.returncode, done.stderr) == (0, "")
    want = expected(
        recs, truth, metrics=["ndcg", "recall", "coverage"], k=3, by="model", aggregate=True
    )
    assert_same(done.stdout, "json", want)
    done = subprocess.run(
        [sys.executable, "-c", _NO_EXTRAS, "compare", str(files["per_user.parquet"])],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        "frame-metrics: error: compare needs numpy, which is not installed: "
        "pip install 'frame_metrics[stats]'\n"
    )


@pytest.mark.parametrize("module", sorted(_EXTRA_OF_MODULE))
def test_missing_module_names_its_extra(module: str) -> None:
    """The extra named for a module is the one pyproject.toml lists it in."""
    pyproject = (Path(__file__).parents[1] / "pyproject.toml").read_text(encoding="utf-8")
    extra = re.search(rf'^(\w+) = \[[^\n]*"{module}[>=<~"]', pyproject, re.MULTILINE)
    assert extra is not None, module
    missing = ModuleNotFoundError(f"No module named '{module}'", name=f"{module}.sub")
    assert _missing_dependency(missing, "compare") == (
        f"compare needs {module}, which is not installed: pip install 'frame_metrics[{extra[1]}]'"
    )


def test_compare_without_numpy_in_process(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, files: dict[str, Path]
) -> None:
    monkeypatch.setitem(sys.modules, "numpy", None)
    code, out, err = run(capsys, "compare", files["recs.parquet"], files["truth.csv"], "-k", "3")
    assert (code, out) == (2, "")
    assert err == (
        "frame-metrics: error: compare needs numpy, which is not installed: "
        "pip install 'frame_metrics[stats]'\n"
    )


# -- the process, demo, version, help -----------------------------------------------------------


def test_subprocess(files: dict[str, Path]) -> None:
    recs, truth = files["recs.parquet"], files["truth.csv"]
    done = subprocess.run(
        [sys.executable, "-m", "frame_metrics", "evaluate", str(recs), str(truth),
         "-m", "ndcg,recall", "-k", "3", "--by", "model", "--format", "json"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    want = expected(recs, truth, metrics=["ndcg", "recall"], k=3, by="model", aggregate=True)
    assert_same(done.stdout, "json", want)
    failed = subprocess.run(
        [sys.executable, "-m", "frame_metrics", "evaluate", str(recs), str(truth), "-k", "3",
         "--by", "model", "--user-col", "usr"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert failed.returncode == 2
    assert failed.stdout == ""
    assert failed.stderr.startswith("frame-metrics: error: recs: expected column 'usr'")
    assert failed.stderr.count("\n") == 1
    assert "Traceback" not in failed.stderr


def test_demo(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "demo")
    assert (code, err) == (0, "")
    assert "popularity" in out
    assert "ndcg@10" in out
    assert run(capsys) == (0, out, "")  # no command: the demo
    from frame_metrics.__main__ import demo

    assert demo().columns[:2] == ["model", "n_users"]


def _demo_at(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, width: int
) -> str:
    monkeypatch.setenv("COLUMNS", str(width))  # what shutil.get_terminal_size reads first
    code, out, err = run(capsys, "demo")
    assert (code, err) == (0, "")
    return out


def _demo_table(out: str) -> dict[str, list[str]]:
    """The demo's table: row label -> cells (the header row is "metric")."""
    rows = {}
    for line in out.splitlines():
        parts = line.split()
        if parts and (parts[0] in ("metric", "n_users") or re.fullmatch(r"\w+@\d+", parts[0])):
            rows[parts[0]] = parts[1:]
    return rows


@pytest.mark.parametrize("width", [60, 80, 132])
def test_demo_fits_the_terminal(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, width: int
) -> None:
    out = _demo_at(capsys, monkeypatch, width)
    too_wide = [line for line in out.splitlines() if len(line) > width]
    assert not too_wide, too_wide
    assert _demo_table(out)["metric"] == ["personal", "popularity"]


def test_demo_narrow_terminal_gets_one_block_per_model(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    out = _demo_at(capsys, monkeypatch, 36)
    commands = out.split("Try next:", 1)[1].splitlines()
    # The suggested commands cannot be wrapped; everything else fits in 36 columns.
    too_wide = [
        line
        for line in out.splitlines()
        if len(line) > 36
        and line.lstrip() not in {c.strip() for c in commands if c.startswith("  python3")}
    ]
    assert not too_wide, too_wide
    assert "personal:" in out.splitlines()
    assert "popularity:" in out.splitlines()


def test_demo_says_what_the_rows_are_and_what_to_try(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    out = _demo_at(capsys, monkeypatch, 80)
    table = _demo_table(out)
    # precision@5 and recall@10 written out from the synthetic data, in plain polars: every
    # truth row is liked (relevance 1-5), and every one of the 1000 users has one.
    recs, truth = fm.datasets.synthetic()
    hits = recs.join(truth, on=["user", "item"]).group_by("model", "user", "rank").len()
    liked = truth.group_by("user").agg(n_liked=pl.len())
    by_user = (
        recs.select("model", "user")
        .unique()
        .join(
            hits.filter(pl.col("rank") <= 5).group_by("model", "user").agg(h5=pl.len()),
            on=["model", "user"],
            how="left",
        )
        .join(
            hits.filter(pl.col("rank") <= 10).group_by("model", "user").agg(h10=pl.len()),
            on=["model", "user"],
            how="left",
        )
        .join(liked, on="user")
        .fill_null(0)
    )
    means = (
        by_user.group_by("model")
        .agg(
            precision=(pl.col("h5") / 5).mean(),
            recall=(pl.col("h10") / pl.col("n_liked")).mean(),
            n=pl.len(),
        )
        .sort("model")
    )
    models = table["metric"]
    assert models == means["model"].to_list()
    assert table["precision@5"] == [f"{v:.4f}" for v in means["precision"]]
    assert table["recall@10"] == [f"{v:.4f}" for v in means["recall"]]
    assert table["n_users"] == [str(n) for n in means["n"]]
    # Every row's metric is explained under the table.
    legend = out.split("What the rows are", 1)[1].split("Try next:", 1)[0]
    for row in table:
        if "@" in row:
            assert f"  {row.split('@')[0]}@k  " in legend, row
    # The suggested commands run as shown (the files named by the user).
    suggested = [line.strip() for line in out.split("Try next:", 1)[1].splitlines()]
    commands = [c for c in suggested if c.startswith("python3 -m frame_metrics ")]
    assert len(commands) >= 3
    for command in commands:
        args = command.removeprefix("python3 -m frame_metrics ").split()
        args = ["r.parquet" if a == "RECS" else "t.csv" if a == "TRUTH" else a for a in args]
        if "--help" in args:
            assert run(capsys, *args)[0] == 0
        else:
            assert build_parser().parse_args(args).command == args[0]


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "--version") == (0, f"frame-metrics {fm.__version__}\n", "")


def test_help_lists_every_option(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "evaluate", "--help")
    assert code == 0
    for option in (
        "--metrics", "-k", "--by", "--per-user", "--user-col", "--item-col", "--rank-col",
        "--score-col", "--relevance-col", "--prediction-col", "--threshold", "--gain",
        "--ap-denominator", "--empty", "--on-duplicate", "--train", "--catalog",
        "--item-features", "--features-col", "--baseline", "--unexpected", "--head-share",
        "--format", "--output", "--precision", "--ids-as-text",
    ):  # fmt: skip
        assert option in out
    code, out, _ = run(capsys, "--help")
    assert code == 0
    assert "evaluate" in out
    assert "demo" in out
    assert build_parser().parse_args(["demo"]).command == "demo"


# --- compare -----------------------------------------------------------------------------------


def test_compare_gives_the_api_numbers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from frame_metrics.datasets import synthetic

    recs, truth = synthetic(n_users=200)
    recs.write_parquet(tmp_path / "recs.parquet")
    truth.write_csv(tmp_path / "truth.csv")
    out = tmp_path / "cmp.csv"
    code = main(
        [
            "compare",
            str(tmp_path / "recs.parquet"),
            str(tmp_path / "truth.csv"),
            "-m",
            "ndcg,recall",
            "-k",
            "5,10",
            "--baseline-model",
            "popularity",
            "--resamples",
            "300",
            "--seed",
            "4",
            "-o",
            str(out),
        ]
    )
    assert code == 0, capsys.readouterr().err
    want = fm.compare(
        pl.scan_parquet(tmp_path / "recs.parquet"),
        pl.scan_csv(tmp_path / "truth.csv"),
        metrics=["ndcg", "recall"],
        k=[5, 10],
        baseline_model="popularity",
        n_resamples=300,
        seed=4,
    ).collect()
    got = pl.read_csv(out, schema=want.schema)
    assert got.rows() == want.rows()
    # The same from a per-user file, without truth.
    per_user = tmp_path / "per_user.parquet"
    fm.evaluate(recs, truth, metrics=["ndcg", "recall"], k=[5, 10], by="model").write_parquet(
        per_user
    )
    out2 = tmp_path / "cmp2.csv"
    code = main(
        [
            "compare",
            str(per_user),
            "--baseline-model",
            "popularity",
            "--resamples",
            "300",
            "--seed",
            "4",
            "-o",
            str(out2),
        ]
    )
    assert code == 0
    assert pl.read_csv(out2, schema=want.schema).rows() == want.rows()


def test_buckets_and_progress(capsys: pytest.CaptureFixture[str], files: dict[str, Path]) -> None:
    recs, truth = files["recs.parquet"], files["truth.csv"]
    code, out, err = run(
        capsys, "evaluate", recs, truth, "-m", "ndcg,mrr", "-k", "3", "--by", "model",
        "--per-user", "--format", "csv", "--buckets", "3", "--progress",
    )  # fmt: skip
    assert code == 0
    # Per-user values are the one-pass values, exactly.
    assert_same(out, "csv", expected(recs, truth, metrics=["ndcg", "mrr"], k=3, by="model"))
    assert "frame_metrics: buckets" not in err  # shown only once a run takes 2 s
