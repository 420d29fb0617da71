"""The ``frame-metrics`` command line: the numbers are ``fm.evaluate``'s, every error one line."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import frame_metrics as fm
from frame_metrics.cli import build_parser, main

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
        lines = [line for line in out.splitlines() if line.startswith("│")]
        cells = [line.strip("│").split("┆") for line in lines]
    header = [c.strip() for c in cells[0]]
    return header, [
        dict(zip(header, map(_value, (c.strip() for c in row)), strict=True)) for row in cells[1:]
    ]


def run(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    """Run the CLI in-process: exit status, stdout, stderr."""
    code = main([str(a) for a in args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def assert_same(out: str, fmt: str, want: pl.DataFrame) -> None:
    """The output holds exactly the expected frame: same columns, rows and numbers."""
    columns, rows = parse(out, fmt)
    assert columns == want.columns
    assert rows == want.rows(named=True)


# -- the numbers --------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["table", "csv", "json", "markdown"])
def test_every_format_gives_evaluate_numbers(
    capsys: pytest.CaptureFixture[str], files: dict[str, Path], fmt: str
) -> None:
    recs, truth = files["recs.parquet"], files["truth.csv"]
    code, out, err = run(
        capsys, "evaluate", recs, truth, "-m", "ndcg,ap,recall", "-k", "2,3", "--by", "model",
        "--format", fmt,
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


def test_precision_rounds_table_and_markdown(
    capsys: pytest.CaptureFixture[str], files: dict[str, Path]
) -> None:
    recs, truth = files["recs.parquet"], files["truth.csv"]
    want = expected(recs, truth, metrics="ndcg", k=3, by="model", aggregate=True)
    for fmt in ("table", "markdown"):
        code, out, _ = run(
            capsys, "evaluate", recs, truth, "-m", "ndcg", "-k", "3", "--by", "model",
            "--format", fmt, "--precision", "3",
        )  # fmt: skip
        assert code == 0
        _, rows = parse(out, fmt)
        assert [r["ndcg@3"] for r in rows] == [round(v, 3) for v in want["ndcg@3"]]


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
        "--per-user", "-o", target, *fmt_args,
    )  # fmt: skip
    assert (code, out, err) == (0, "", "")
    want = expected(recs, truth, metrics=["ndcg", "hit_rate"], k=3, by="model")
    assert_same(target.read_text(encoding="utf-8"), fmt, want)
    assert [p.name for p in target.parent.iterdir()] == [name]  # no partial file left


# -- errors ------------------------------------------------------------------------------------

ArgsOf = Callable[[dict[str, Path]], list[str | Path]]


def _with(*extra: str) -> ArgsOf:
    return lambda f: ["evaluate", f["recs.parquet"], f["truth.csv"], "--by", "model", *extra]


ERRORS: list[tuple[str, ArgsOf, int, str]] = [
    (
        "missing file",
        lambda f: [
            "evaluate",
            f["recs.parquet"].with_name("nope.parquet"),
            f["truth.csv"],
            "-k",
            "3",
        ],
        2,
        "RECS: expected a file, got '",
    ),
    (
        "unsupported extension",
        lambda f: ["evaluate", f["recs.parquet"], f["truth.csv"].with_suffix(".json"), "-k", "3"],
        2,
        "TRUTH: expected a .parquet, .pq, .csv or .tsv file",
    ),
    (
        "missing extra file",
        _with("-m", "novelty", "-k", "3", "--train", "train.csv"),
        2,
        "--train: expected a file, got 'train.csv' (no such file)",
    ),
    (
        "unknown column",
        _with("-k", "3", "--user-col", "usr"),
        2,
        "recs: expected column 'usr' (did you mean 'user'?), not found",
    ),
    ("unknown by column", _with("-k", "3", "--by", "modle"), 2, "(did you mean 'model'?)"),
    ("bad k", _with("-k", "0"), 2, "-k: expected an int >= 1 or a list of them, got 0"),
    ("k not a number", _with("-k", "ten"), 2, "-k: expected an int >= 1"),
    ("no k", _with("-m", "ndcg"), 2, "-k: expected an int >= 1"),
    ("unknown metric", _with("-m", "ndgc", "-k", "3"), 2, "got 'ndgc' (did you mean 'ndcg'?)"),
    ("bad threshold", _with("-k", "3", "--threshold", "0"), 2, "--threshold: expected a finite"),
    ("bad head share", _with("-m", "aplt@3", "--head-share", "1.5"), 2, "--head-share: expected"),
    ("extra input needed", _with("-m", "novelty@3"), 2, "novelty: expected --train FILE"),
    ("corpus per user", _with("-m", "coverage@3", "--per-user"), 2, "leave out --per-user"),
    ("bad precision", _with("-k", "3", "--precision", "-1"), 2, "--precision: expected"),
    (
        "output directory missing",
        _with("-k", "3", "-o", "no/such/dir/out.csv"),
        2,
        "-o: expected a file in an existing directory",
    ),
    (
        "duplicate ranks (data)",
        lambda f: ["evaluate", f["recs.parquet"], f["truth.csv"], "-k", "3"],
        1,
        "recs: expected one row per rank within a user",
    ),
]


@pytest.mark.parametrize(
    ("case", "args_of", "status", "message"), ERRORS, ids=[e[0] for e in ERRORS]
)
def test_errors_are_one_line(
    capsys: pytest.CaptureFixture[str],
    files: dict[str, Path],
    case: str,
    args_of: ArgsOf,
    status: int,
    message: str,
) -> None:
    code, out, err = run(capsys, *args_of(files))
    assert code == status, err
    assert out == ""
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("frame-metrics: error: ")
    assert message in lines[0]


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("empty.csv", b"", "RECS: cannot read '"),
        ("broken.parquet", b"not a parquet file", "RECS: cannot read '"),
        (
            "text_rank.csv",
            b"user,item,rank\n1,a,1\n1,b,x\n",
            "expected column 'rank' to hold integer",
        ),
    ],
)
def test_unreadable_inputs_are_data_errors(
    capsys: pytest.CaptureFixture[str],
    files: dict[str, Path],
    tmp_path: Path,
    name: str,
    content: bytes,
    message: str,
) -> None:
    bad = tmp_path / name
    bad.write_bytes(content)
    code, out, err = run(capsys, "evaluate", bad, files["truth.csv"], "-k", "3")
    assert (code, out) == (1, "")
    assert err.startswith("frame-metrics: error: "), err
    assert err.count("\n") == 1, err
    assert message in err


@pytest.mark.parametrize(
    "args",
    [
        ["evaluate", "r.parquet", "-k", "3", "--gain", "log"],
        ["evaluate", "r.parquet", "--rank-col", "rank", "--score-col", "score"],
        ["evaluate"],
        ["frobnicate"],
    ],
)
def test_argparse_usage_errors(capsys: pytest.CaptureFixture[str], args: list[str]) -> None:
    code, out, err = run(capsys, *args)
    assert code == 2
    assert out == ""
    assert "Traceback" not in err
    assert err.splitlines()[-1].startswith("frame-metrics")
    assert ": error: " in err.splitlines()[-1]


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
    assert main([str(a) for a in [*args, "--format", fmt]]) == 0
    assert stderr.getvalue() == ""


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
        "--format", "--output",
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
        baseline="popularity",
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


def test_compare_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    frame = pl.DataFrame({"model": ["a", "b"], "user": [1, 1], "ndcg@10": [0.1, 0.2]})
    frame.write_parquet(tmp_path / "pu.parquet")
    for args, message in (
        (
            ["--baseline-model", "z"],
            "--baseline-model: expected one of the models 'a', 'b', got 'z'",
        ),
        (["--level", "95"], "--level: expected a number in (0, 1), got 95.0"),
        (["--resamples", "0"], "--resamples: expected an int >= 1, got 0"),
    ):
        code = main(["compare", str(tmp_path / "pu.parquet"), *args])
        err = capsys.readouterr().err
        assert code == 2
        assert err == f"frame-metrics: error: {message}\n"
