r"""The ``frame-metrics`` command line: evaluate recommendation files, run the demo.

``frame-metrics evaluate RECS [TRUTH] ...`` reads parquet or CSV files lazily
(``pl.scan_parquet`` / ``pl.scan_csv``), hands the LazyFrames to
:func:`frame_metrics.evaluate` and collects the result with polars' streaming engine, so
an input larger than memory works; ``csv`` output is streamed straight to its
destination. ``frame-metrics demo`` (also ``python -m frame_metrics`` without arguments)
evaluates two models on the built-in synthetic data.

Every failure is one line on stderr, ``frame-metrics: error: ...``, and an exit status:
2 for a usage error (a bad path, file type, option value, metric name, cutoff or column
name, or an optional dependency the command needs that is not installed), 1 for a data
error (values the metrics cannot use, a file polars cannot read). argparse's own usage
errors (an unknown option, a value of the wrong type) are such one-line usage errors too.

Numbers in ``table`` and ``markdown`` output are shown with 6 significant digits
(``--precision N``: N), in scientific notation when very small or large
(``1.2e-70``); ``csv`` and ``json`` are exact.

Examples
--------
>>> import polars as pl
>>> from frame_metrics.cli import main
>>> main(["--version"])  # doctest: +ELLIPSIS
frame-metrics ...
0
>>> frame = pl.DataFrame({"model": ["a|b"], "n_users": [2], "ndcg@10": [0.5]})
>>> print(render(frame, "markdown"))
| model | n_users | ndcg@10 |
| --- | ---: | ---: |
| a\|b | 2 | 0.5 |
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import importlib
import inspect
import os
import re
import shlex
import sys
import textwrap
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn, TextIO

import polars as pl

import frame_metrics as fm
from frame_metrics.conventions import CONVENTIONS
from frame_metrics.datasets import synthetic
from frame_metrics.errors import (
    FrameMetricsError,
    FrameMetricsWarning,
    InvalidOptionError,
    Keyword,
    LeaveOut,
    MissingColumnsError,
    MissingInputError,
    Part,
    Pass,
)
from frame_metrics.metrics import DEFAULT_RANKING
from frame_metrics.metrics.registry import split_names
from frame_metrics.options import CHOICES, OPTIONS, Option

__all__ = [
    "DIGITS",
    "EXIT_DATA",
    "EXIT_USAGE",
    "FORMATS",
    "build_parser",
    "demo",
    "main",
    "render",
]

PROG = "frame-metrics"
#: Exit status of a data error: the inputs hold values the metrics cannot use.
EXIT_DATA = 1
#: Exit status of a usage error: the command line asks for something that cannot be done.
EXIT_USAGE = 2
#: The output formats of ``--format``.
FORMATS = ("table", "csv", "json", "markdown")
#: Significant digits of the numbers in ``table`` and ``markdown`` output, by default.
DIGITS = 6
#: The most significant digits ``--precision`` asks for: a float has at most 17.
_MAX_DIGITS = 17

#: Input file extensions: parquet or delimited text (the separator), all read lazily.
_PARQUET = (".parquet", ".pq")
_SEPARATOR = {".csv": ",", ".tsv": "\t"}
#: ``-o FILE`` extensions and the format each gives when ``--format`` is not given; any
#: other extension is refused (it would hold text its readers cannot open).
_FORMAT_OF_SUFFIX = {
    ".csv": "csv",
    ".json": "json",
    ".md": "markdown",
    ".markdown": "markdown",
    ".txt": "table",
}
#: The optional modules a command imports, and the extra of ``pyproject.toml`` holding each.
_EXTRA_OF_MODULE = {"numpy": "stats", "matplotlib": "plot", "pandas": "pandas", "pyarrow": "pandas"}
#: The extra input files: evaluate's keyword and the option naming the file.
_EXTRA_FILES = {
    "train": "--train",
    "catalog": "--catalog",
    "item_features": "--item-features",
    "baseline": "--baseline",
}
#: evaluate's keyword defaults, so the command line cannot drift from the function.
_DEFAULTS: dict[str, Any] = {
    name: p.default for name, p in inspect.signature(fm.evaluate).parameters.items()
}
_Command = Callable[[argparse.Namespace], int]


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions and epilogs as written; option help wrapped without breaking options."""

    def _split_lines(self, text: str, width: int) -> list[str]:
        return textwrap.wrap(text, width, break_on_hyphens=False)


class _Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line, like every other error.

    Its subparsers are of this class too (argparse makes them of the parent's class).
    """

    def error(self, message: str) -> NoReturn:
        """Print ``message`` as one error line with where to find the usage; exit 2."""
        message = message.removeprefix("argument ")
        raise SystemExit(_fail(f"{message} (see '{self.prog} --help')", EXIT_USAGE))


class UsageError(Exception):
    """The command line asks for something that cannot be done (exit status 2)."""


class DataError(Exception):
    """An input cannot be read or used (exit status 1)."""


# -- the parser ------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    """Build the ``frame-metrics`` parser: one subparser per command.

    Examples
    --------
    >>> args = build_parser().parse_args(["evaluate", "recs.parquet", "truth.csv", "-k", "10"])
    >>> args.command, args.recs, args.truth, args.k, args.format
    ('evaluate', 'recs.parquet', 'truth.csv', '10', None)
    """
    parser = _Parser(
        prog=PROG,
        formatter_class=_HelpFormatter,
        description="Recommender-system metrics on parquet and CSV files, computed by polars.",
        epilog="Run 'frame-metrics COMMAND --help' for a command's options.\n"
        "Without a command, runs the demo.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {fm.__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    commands.required = True
    _add_evaluate(commands)
    # Each command is an `_add_<name>(commands)` that sets `run=_run_<name>`.
    _add_compare(commands)
    _add_demo(commands)
    return parser


_EVALUATE_DESCRIPTION = """\
Evaluate recommendations against truth. By default: one row per --by group with
n_users and the mean of every metric over the users it is defined for; with
--per-user, one row per user.

Inputs are parquet (.parquet, .pq, or a directory of parquet files) or CSV
(.csv, .tsv), read lazily and evaluated by polars' streaming engine, so they may
be larger than memory."""

_EVALUATE_EPILOG = """\
examples:
  frame-metrics evaluate recs.parquet truth.parquet -m ndcg,recall -k 10,20 --by model
  frame-metrics evaluate recs.csv truth.csv --score-col score -k 10 --per-user -o users.csv
  frame-metrics evaluate long.parquet -m ndcg@10,recall@20 --format markdown --precision 4
  frame-metrics evaluate recs.parquet truth.parquet -m ndcg,novelty,coverage -k 10 \\
      --by model --train train.parquet --catalog items.csv

exit status: 0 done, 1 data error (values the metrics cannot use, a file polars
cannot read), 2 usage error (bad path, file type, option, metric, cutoff or column)."""


def _add_evaluate(commands: argparse._SubParsersAction[_Parser]) -> None:
    p = commands.add_parser(
        "evaluate",
        formatter_class=_HelpFormatter,
        help="evaluate recommendations against truth (parquet or CSV files)",
        description=_EVALUATE_DESCRIPTION,
        epilog=_EVALUATE_EPILOG,
    )
    p.add_argument(
        "recs",
        metavar="RECS",
        help="recommendations: user, item and rank (or --score-col); without TRUTH, a long "
        "table that also carries relevance, a null rank marking a relevant item that was "
        "not recommended",
    )
    p.add_argument(
        "truth",
        metavar="TRUTH",
        nargs="?",
        help="the items each user likes: user, item, relevance (a number >= 0)",
    )
    what = p.add_argument_group("what to compute")
    what.add_argument(
        "-m",
        "--metrics",
        action="extend",
        type=_metric_names,
        metavar="NAMES",
        help="comma-separated metric names, optionally with their own cutoff (ndcg@10) and "
        "options ('ap(ap_denominator=relevant)@10'), or trec_eval's and ir_measures' names "
        "(P_10, nDCG@10, RR), each a column as written; repeatable "
        f"(default: {','.join(DEFAULT_RANKING)})",
    )
    what.add_argument(
        "-k",
        metavar="K",
        help="comma-separated cutoffs for every metric named without one, e.g. 5,10,20",
    )
    what.add_argument(
        "--by",
        type=_names,
        metavar="COLS",
        help="comma-separated columns (model, segment, fold) evaluated independently",
    )
    what.add_argument(
        "--per-user",
        action="store_true",
        help="one row per user instead of the means per --by group",
    )
    _add_input_options(p)
    _add_output_options(p)
    scale = p.add_argument_group("inputs larger than memory")
    scale.add_argument(
        "--buckets",
        type=_buckets_option,
        default="auto",
        metavar="N",
        help="evaluate the users in N buckets one after another, so that peak memory falls "
        "with N (default: auto, one bucket per 250M recommendation rows)",
    )
    scale.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="a progress bar on stderr over the buckets, shown once a run takes a few "
        "seconds (default: when stderr is a terminal)",
    )
    p.set_defaults(run=_run_evaluate)


def _buckets_option(text: str) -> int | str:
    """``--buckets``: ``auto`` or a positive integer, judged here so the error names the option.

    Examples
    --------
    >>> _buckets_option("Auto"), _buckets_option("8")
    ('auto', 8)
    >>> _buckets_option("0")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: expected a positive integer or auto, got '0'
    """
    if text.strip().lower() == "auto":
        return "auto"
    try:
        buckets = int(text)
    except ValueError:
        buckets = 0
    if buckets < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer or auto, got {text!r}")
    return buckets


def _add_input_options(p: argparse.ArgumentParser) -> None:
    """Column names, metric options and extra inputs: evaluate's keywords as options."""
    cols = p.add_argument_group("columns")
    cols.add_argument(
        "--user-col",
        type=_names,
        default=_DEFAULTS["user"],  # a string: argparse splits it with the type
        metavar="COLS",
        help="user key; comma-separated for a composite key such as user,session "
        "(default: %(default)s)",
    )
    cols.add_argument(
        "--item-col",
        default=_DEFAULTS["item"],
        metavar="COL",
        help="item id (default: %(default)s)",
    )
    ranked = cols.add_mutually_exclusive_group()
    ranked.add_argument(
        "--rank-col",
        default=_DEFAULTS["rank"],
        metavar="COL",
        help="rank, 1 = top (default: %(default)s)",
    )
    ranked.add_argument(
        "--score-col",
        metavar="COL",
        help="score, higher = better: ranks are derived (equal scores: --ties, default item ascending)",
    )
    cols.add_argument(
        "--relevance-col",
        default=_DEFAULTS["relevance"],
        metavar="COL",
        help="relevance (or true rating) in TRUTH or the long table (default: %(default)s)",
    )
    cols.add_argument(
        "--prediction-col",
        default=_DEFAULTS["prediction"],
        metavar="COL",
        help="predicted rating in RECS, for mse/rmse/mae (default: %(default)s)",
    )
    cols.add_argument(
        "--features-col",
        default=_DEFAULTS["features"],
        metavar="COL",
        help="list of categories or numeric vector in --item-features (default: %(default)s)",
    )
    cols.add_argument(
        "--ids-as-text",
        action="store_true",
        help="read the user and item columns of every input file as text (CSV: as written, "
        "leading zeros kept), for ids that are all digits in one file but not in another",
    )
    opts = p.add_argument_group(
        "metric options",
        "Each defaults to the --convention's value, else the spec's. A metric may carry its "
        "own: -m 'ap(ap_denominator=relevant)@10'.",
    )
    opts.add_argument(
        "--convention",
        choices=list(CONVENTIONS),
        help="a peer's conventions: sets every option below in which that peer differs "
        "from the spec; options given explicitly override it",
    )
    for row in OPTIONS:
        _add_option(opts, row)
    extra = p.add_argument_group("extra inputs (parquet or CSV files)")
    extra.add_argument(
        "--train",
        metavar="FILE",
        help="reference interactions (user, item): popularity for novelty, arp, aplt; "
        "history for --unexpected history",
    )
    extra.add_argument(
        "--catalog",
        metavar="FILE",
        help="the catalog's items (item column) for coverage and gini (default: the items "
        "seen in the inputs)",
    )
    extra.add_argument(
        "--item-features",
        metavar="FILE",
        help="item and --features-col per item, for diversity (a list column: parquet)",
    )
    extra.add_argument(
        "--baseline",
        metavar="FILE",
        help="a baseline model's recommendations (user, item, rank or score) for serendipity",
    )


def _add_output_options(p: argparse.ArgumentParser) -> None:
    out = p.add_argument_group("output")
    out.add_argument(
        "--format",
        choices=FORMATS,
        help="table (all rows and columns), csv, json (one array of records) or markdown "
        "(a GitHub table); default: from the -o extension, else table",
    )
    out.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="write to FILE instead of standard output: a "
        f"{_or(list(_FORMAT_OF_SUFFIX))} file (.txt: table)",
    )
    out.add_argument(
        "--precision",
        type=_digits,
        metavar="N",
        help=f"significant digits of the numbers in table and markdown output, 1 to "
        f"{_MAX_DIGITS} (default: {DIGITS}; scientific notation when very small or large); "
        "csv and json are always exact",
    )


def _add_demo(commands: argparse._SubParsersAction[_Parser]) -> None:
    p = commands.add_parser(
        "demo",
        formatter_class=_HelpFormatter,
        help="evaluate two models on built-in synthetic data",
        description="Evaluate the synthetic 'popularity' and 'personal' models at k = 5 and 10.",
    )
    p.set_defaults(run=_run_demo)


def _add_option(group: argparse._ArgumentGroup, row: Option) -> None:
    """An option of the table as a flag: its choices, or a number (or gain) parsed here."""
    default = _DEFAULTS[row.name]
    if default is not None:
        shown = "%(default)s"
    elif row.choices and not row.table:
        shown = f"the --convention's, else {row.default}"
    else:
        shown = row.cli_default or str(row.default)
    help = f"{row.help} (default: {shown})"
    if row.table:
        group.add_argument(row.flag, type=_gain, metavar=row.metavar, help=help)
    elif row.choices:
        group.add_argument(row.flag, choices=row.choices, default=default, help=help)
    else:
        group.add_argument(row.flag, type=_number, default=default, metavar=row.metavar, help=help)


def _gain(text: str) -> str | dict[float, float]:
    """``--gain``: a gain's name, or a trec_eval gain table ``LEVEL=GAIN,...``.

    Examples
    --------
    >>> _gain("exponential"), _gain("1=3, 2=9,4=4.5")
    ('exponential', {1.0: 3.0, 2.0: 9.0, 4.0: 4.5})
    >>> _gain("2=x")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: expected linear, exponential, binary or a table LEVEL=GAIN,... such as 1=3,2=9, got '2=x'
    """
    if text.strip() in CHOICES["gain"]:
        return text.strip()
    table: dict[float, float] = {}
    try:
        for part in text.split(","):
            level, eq, gain = part.partition("=")
            if not eq:
                raise ValueError(part)
            table[float(level)] = float(gain)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected {', '.join(CHOICES['gain'])} or a table LEVEL=GAIN,... such as "
            f"1=3,2=9, got {text!r}"
        ) from None
    return table


def _metric_names(text: str) -> list[str]:
    """``-m``: comma-separated metric names; commas inside a name's options stay.

    Examples
    --------
    >>> _metric_names("ndcg@10, ap(ap_denominator=relevant, empty=zero)@5")
    ['ndcg@10', 'ap(ap_denominator=relevant, empty=zero)@5']
    """
    names = [n for n in split_names(text) if isinstance(n, str) and n.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"expected a name or comma-separated names, got {text!r}")
    return [n.strip() for n in names]


def _names(text: str) -> list[str]:
    """Split a comma-separated argument, dropping blanks; at least one name.

    Examples
    --------
    >>> _names("ndcg, recall,")
    ['ndcg', 'recall']
    >>> _names(" ,")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: expected a name or comma-separated names, got ' ,'
    """
    names = [part.strip() for part in text.split(",") if part.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"expected a name or comma-separated names, got {text!r}")
    return names


def _number(text: str) -> float:
    """Parse a number option; the function it is passed to judges its value.

    Examples
    --------
    >>> _number("0.5")
    0.5
    >>> _number("abc")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: expected a number, got 'abc'
    """
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None


def _integer(text: str) -> int:
    """Parse an int option; the function it is passed to judges its value.

    Examples
    --------
    >>> _integer("-3")
    -3
    >>> _integer("2.5")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: expected an int, got '2.5'
    """
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an int, got {text!r}") from None


def _digits(text: str) -> int:
    """Parse ``--precision``: significant digits, 1 to 17 (a float has no more).

    Examples
    --------
    >>> _digits("4")
    4
    >>> _digits("0")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: expected an int from 1 to 17 (significant digits), got '0'
    """
    try:
        digits = int(text)
    except ValueError:
        digits = 0
    if not 1 <= digits <= _MAX_DIGITS:
        raise argparse.ArgumentTypeError(
            f"expected an int from 1 to {_MAX_DIGITS} (significant digits), got {text!r}"
        )
    return digits


def _or(items: Sequence[str]) -> str:
    """``a, b or c``.

    Examples
    --------
    >>> _or([".csv", ".json", ".md"])
    '.csv, .json or .md'
    """
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} or {items[-1]}"


def _cutoffs(text: str | None) -> list[int] | None:
    """Parse ``-k``: ints; evaluate judges their values (``-k 0`` is its error).

    Examples
    --------
    >>> _cutoffs("5,10")
    [5, 10]
    >>> _cutoffs("ten")
    Traceback (most recent call last):
    ...
    frame_metrics.cli.UsageError: -k: expected an int >= 1 or a comma-separated list of them, got 'ten'
    """
    if text is None:
        return None
    try:
        cutoffs = [int(part) for part in _names(text)]
    except ValueError:
        cutoffs = []
    if not cutoffs:
        raise UsageError(
            f"-k: expected an int >= 1 or a comma-separated list of them, got {text!r}"
        )
    return cutoffs


# -- input and output -------------------------------------------------------------------------


def read_frame(path: str, name: str, text_columns: Sequence[str] = ()) -> pl.LazyFrame:
    """Scan a parquet or CSV file lazily, with its schema read now.

    Parameters
    ----------
    path
        A ``.parquet``/``.pq``, ``.csv`` or ``.tsv`` file, a glob of them, or a directory
        of parquet files (a dataset, hive partitions included).
    name
        What the file is (``RECS``, ``--train``), for error messages.
    text_columns
        Columns read as text (``--ids-as-text``): a CSV's as written, a parquet file's
        cast to String (a list column's elements, for lists of items).

    Returns
    -------
    The file as a LazyFrame. A CSV file without rows has no dtypes to infer: its columns
    are of dtype Null (no values), which the metrics read as empty input of any dtype.

    Raises
    ------
    UsageError
        The path does not exist or its extension is not one of those.
    DataError
        polars cannot read the file's schema, or a column to read as text holds floats.
    """
    suffix = Path(path).suffix.lower()
    if Path(path).is_dir():
        suffix = ".parquet"  # a parquet dataset: every parquet file below it
    elif suffix not in (*_PARQUET, *_SEPARATOR):
        raise UsageError(
            f"{name}: expected a .parquet, .pq, .csv or .tsv file or a directory of parquet "
            f"files, got {path!r}" + (f" ({suffix} files are not supported)" if suffix else "")
        )
    elif glob.has_magic(path):
        if not glob.glob(path):
            raise UsageError(f"{name}: expected files matching {path!r}, found none")
    elif not Path(path).is_file():
        raise UsageError(f"{name}: expected a file, got {path!r} (no such file)")
    try:
        if suffix in _SEPARATOR:
            frame = pl.scan_csv(
                path,
                separator=_SEPARATOR[suffix],
                infer_schema_length=10_000,
                schema_overrides=dict.fromkeys(text_columns, pl.String),
            )
            if frame.head(1).collect().height == 0:  # a header alone: no dtype to infer
                frame = frame.with_columns(pl.all().cast(pl.Null))
        else:
            frame = pl.scan_parquet(path)
        schema = frame.collect_schema()
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise DataError(f"{name}: cannot read {path!r}: {_first_line(exc)}") from exc
    text = {c: _as_text(schema[c]) for c in text_columns if c in schema}
    for c in text:
        dtype = schema[c]
        if (dtype.inner if isinstance(dtype, pl.List) else dtype).is_float():
            # 10.0 as text is '10.0', which no '10' in another file would match.
            raise DataError(
                f"{name}: expected column {c!r} to hold integer or text ids to read as text "
                f"(--ids-as-text), found dtype {dtype}"
            )
    casts = [pl.col(c).cast(dtype) for c, dtype in text.items() if schema[c] != dtype]
    return frame.with_columns(casts) if casts else frame


def _as_text(dtype: pl.DataType) -> pl.DataType:
    """The text dtype of an id column: String, or a list of String for lists of items.

    Examples
    --------
    >>> _as_text(pl.Int64()), _as_text(pl.List(pl.Int64()))
    (String, List(String))
    """
    return pl.List(pl.String()) if isinstance(dtype, pl.List) else pl.String()


def render(frame: pl.DataFrame, fmt: str, precision: int | None = None) -> str:
    """The text of a result in one of :data:`FORMATS`, without a trailing newline.

    ``csv`` and ``json`` are exact (the shortest text that reads back as the same float).
    ``table`` and ``markdown`` are for reading: each float has ``precision`` significant
    digits (default :data:`DIGITS`), see :func:`_number_text`.

    Examples
    --------
    >>> frame = pl.DataFrame({"metric": ["ndcg", "recall"], "p": [3.4e-71, 0.012345678]})
    >>> print(render(frame, "table"))
    ┌────────┬───────────┐
    │ metric ┆         p │
    ╞════════╪═══════════╡
    │ ndcg   ┆   3.4e-71 │
    │ recall ┆ 0.0123457 │
    └────────┴───────────┘
    """
    if fmt == "csv":
        return frame.write_csv().rstrip("\n")
    if fmt == "json":
        return frame.write_json()
    digits = DIGITS if precision is None else precision
    if fmt == "markdown":
        return _markdown(frame, digits)
    with pl.Config(
        tbl_rows=-1,
        tbl_cols=-1,
        tbl_width_chars=-1,
        fmt_str_lengths=1_000,
        tbl_hide_dataframe_shape=True,
        tbl_hide_column_data_types=True,
        tbl_cell_numeric_alignment="RIGHT",
    ):
        return str(
            pl.DataFrame(
                [_right_aligned(col, digits) if col.dtype.is_float() else col for col in frame]
            )
        )


def _number_text(value: float, digits: int = DIGITS) -> str:
    """A float for reading: ``digits`` significant digits, scientific notation when tiny or huge.

    Python's ``g`` format: scientific notation below 1e-4 and from ``10**digits`` up,
    trailing zeros dropped; a whole number keeps ``.0`` so it still reads as a float.

    Examples
    --------
    >>> _number_text(0.5002958951164717), _number_text(-0.3637705489835624, 3)
    ('0.500296', '-0.364')
    >>> _number_text(4.770970561931143e-12), _number_text(123456789.0)
    ('4.77097e-12', '1.23457e+08')
    >>> _number_text(0.25), _number_text(2.0), _number_text(float("nan"))
    ('0.25', '2.0', 'nan')
    """
    text = f"{value:.{digits}g}"
    return text + ".0" if text.lstrip("-").isdigit() else text


def _right_aligned(column: pl.Series, digits: int) -> pl.Series:
    """A float column as :func:`_number_text` cells, its name and cells padded to one width.

    Text is left-aligned in a table: padded, the numbers stand right-aligned like ints.
    """
    cells = ["null" if v is None else _number_text(v, digits) for v in column]
    width = max([len(column.name), *map(len, cells)])
    return pl.Series(
        column.name.rjust(width), [cell.rjust(width) for cell in cells], dtype=pl.String
    )


def _markdown(frame: pl.DataFrame, digits: int) -> str:
    def cell(value: object) -> str:
        if value is None:
            return ""
        if isinstance(value, bool):
            return str(value).lower()
        if isinstance(value, float):
            return _number_text(value, digits)
        return str(value).replace("|", "\\|").replace("\n", " ")

    numeric = [dtype.is_numeric() for dtype in frame.dtypes]
    lines = [
        "| " + " | ".join(cell(name) for name in frame.columns) + " |",
        "| " + " | ".join("---:" if n else "---" for n in numeric) + " |",
        *("| " + " | ".join(cell(v) for v in row) + " |" for row in frame.iter_rows()),
    ]
    return "\n".join(lines)


def write_result(
    result: pl.LazyFrame, fmt: str, output: str | None, precision: int | None = None
) -> None:
    """Run ``result`` with the streaming engine and write it to ``output`` or stdout.

    ``csv`` is sunk (streamed to its destination, never held whole); a file is written
    beside its destination and renamed into place, so a failure leaves no partial file.
    """
    if output is None:
        if fmt == "csv":
            result.sink_csv(sys.stdout)
        else:
            sys.stdout.write(render(result.collect(engine="streaming"), fmt, precision) + "\n")
        return
    target = Path(output)
    if not target.parent.is_dir():
        raise UsageError(f"-o: expected a file in an existing directory, got {output!r}")
    partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
    try:
        if fmt == "csv":
            result.sink_csv(partial, check_extension=False)
        else:
            text = render(result.collect(engine="streaming"), fmt, precision)
            partial.write_text(text + "\n", encoding="utf-8")
        partial.replace(target)
    finally:
        partial.unlink(missing_ok=True)


# -- commands ---------------------------------------------------------------------------------


def _read_inputs(args: argparse.Namespace) -> dict[str, pl.LazyFrame]:
    """Read RECS, TRUTH and the extra files given, keyed by ``fm.evaluate``'s names.

    With ``--ids-as-text`` every file's user and item columns are read as text. Without
    it, an id column read as text in one file and as numbers in another (ids all digits
    in one file only) is a :class:`DataError` that names ``--ids-as-text``.
    """
    labels = {"recs": "RECS", "truth": "TRUTH", **_EXTRA_FILES}
    ids = [*args.user_col, args.item_col]
    frames = {
        name: read_frame(path, label, ids if args.ids_as_text else ())
        for name, label in labels.items()
        if (path := getattr(args, name)) is not None
    }
    for column in ids:
        dtypes = {
            labels[name]: schema[column]
            for name, frame in frames.items()
            if column in (schema := frame.collect_schema())
            and not isinstance(schema[column], pl.Null)  # empty: any dtype fits
        }
        text = [label for label, dtype in dtypes.items() if _is_text(dtype)]
        other = [label for label in dtypes if label not in text]
        if text and other:
            a, b = sorted([text[0], other[0]], key=list(dtypes).index)
            raise DataError(
                f"{a} and {b}: expected column {column!r} to hold ids of one kind, found "
                f"{dtypes[a]} in {a} and {dtypes[b]} in {b}; to read the ids of every file "
                "as text, pass --ids-as-text"
            )
    return frames


def _is_text(dtype: pl.DataType) -> bool:
    """Whether an id column holds text (or lists of text).

    Examples
    --------
    >>> _is_text(pl.Categorical()), _is_text(pl.List(pl.String())), _is_text(pl.Int64())
    (True, True, False)
    """
    inner = dtype.inner if isinstance(dtype, pl.List) else dtype
    return isinstance(inner, (pl.String, pl.Categorical, pl.Enum))


def _evaluate_options(args: argparse.Namespace, frames: dict[str, pl.LazyFrame]) -> dict[str, Any]:
    """The keywords of ``fm.evaluate`` the options set: columns, metric options, extras."""
    user: list[str] = args.user_col
    return {
        "user": user[0] if len(user) == 1 else user,
        "item": args.item_col,
        "rank": args.rank_col,
        "score": args.score_col,
        "relevance": args.relevance_col,
        "prediction": args.prediction_col,
        **{row.name: getattr(args, row.name) for row in OPTIONS},
        "convention": args.convention,
        "features": args.features_col,
        **{name: frames[name] for name in _EXTRA_FILES if name in frames},
    }


def _output_format(args: argparse.Namespace) -> str:
    """``--format``, else the one of the ``-o`` extension; an unknown extension is refused."""
    suffix = Path(args.output or "").suffix.lower()
    if args.output is not None and suffix not in _FORMAT_OF_SUFFIX:
        raise UsageError(
            f"-o: expected a {_or(list(_FORMAT_OF_SUFFIX))} file, got {args.output!r}"
            + (f" ({suffix} files are not supported)" if suffix else "")
        )
    fmt: str = args.format or _FORMAT_OF_SUFFIX.get(suffix, "table")
    return fmt


def _run_evaluate(args: argparse.Namespace) -> int:
    fmt = _output_format(args)
    k = _cutoffs(args.k)
    frames = _read_inputs(args)
    result = fm.evaluate(
        frames["recs"],
        frames.get("truth"),
        metrics=args.metrics,
        k=k[0] if k is not None and len(k) == 1 else k,
        aggregate=not args.per_user,
        by=args.by,
        buckets=args.buckets,
        progress=sys.stderr.isatty() if args.progress is None else args.progress,
        **_evaluate_options(args, frames),
    )
    write_result(result, fmt, args.output, args.precision)
    return 0


_COMPARE_DESCRIPTION = """Compare models: per metric@k (and --by segment), each model's mean with a bootstrap
interval over users, the difference to --baseline with its own interval, a paired
t-test and Wilcoxon test over the users both models were evaluated on, and p-values
corrected for multiple comparisons (Holm, or --correction bh).

With TRUTH, RECS holds several models' recommendations stacked with a --model-col
column, evaluated per user first. Without TRUTH, RECS holds per-user metric values
(the output of 'frame-metrics evaluate --per-user --by model')."""

_COMPARE_EPILOG = """examples:
  frame-metrics compare recs.parquet truth.parquet -m ndcg,recall -k 10 --baseline-model popularity
  frame-metrics compare per_user.parquet --baseline-model popularity --by activity --correction bh
  frame-metrics compare recs.parquet truth.parquet -m ndcg -k 5,10,20 --resamples 2000 -o cmp.csv"""


def _add_compare(commands: argparse._SubParsersAction[_Parser]) -> None:
    p = commands.add_parser(
        "compare",
        formatter_class=_HelpFormatter,
        help="compare models with intervals and paired tests",
        description=_COMPARE_DESCRIPTION,
        epilog=_COMPARE_EPILOG,
    )
    p.add_argument(
        "recs",
        metavar="RECS",
        help="stacked recommendations with a model column (with TRUTH), or per-user values",
    )
    p.add_argument("truth", metavar="TRUTH", nargs="?", help="the items each user likes")
    what = p.add_argument_group("what to compare")
    what.add_argument(
        "-m",
        "--metrics",
        action="extend",
        type=_metric_names,
        metavar="NAMES",
        help="comma-separated metric names (with TRUTH: as for evaluate; without: the "
        "columns, ndcg@10; default every metric column)",
    )
    what.add_argument("-k", metavar="K", help="comma-separated cutoffs, e.g. 5,10,20")
    what.add_argument(
        "--model-col", default="model", metavar="COL", help="the model column (default: model)"
    )
    what.add_argument(
        "--baseline-model",
        metavar="MODEL",
        help="the model every other is compared with (default: the first in sorted order; "
        "--baseline FILE is serendipity's baseline recommendations)",
    )
    what.add_argument(
        "--by",
        type=_names,
        metavar="COLS",
        help="comma-separated segment columns, each compared on its own",
    )
    stats = p.add_argument_group("statistics")
    stats.add_argument(
        "--level", type=_number, default=0.95, metavar="X", help="confidence level (default: 0.95)"
    )
    stats.add_argument(
        "--resamples",
        type=_integer,
        default=10_000,
        metavar="N",
        help="bootstrap resamples over users (default: 10000)",
    )
    stats.add_argument(
        "--seed", type=_integer, default=0, metavar="N", help="seed of the resampling (default: 0)"
    )
    stats.add_argument(
        "--correction",
        choices=("holm", "bh"),
        default="holm",
        help="multiple-comparison correction (default: holm)",
    )
    stats.add_argument("--no-progress", action="store_true", help="never show the progress bar")
    _add_input_options(p)
    _add_output_options(p)
    p.set_defaults(run=_run_compare, needs=("numpy",))


def _run_compare(args: argparse.Namespace) -> int:
    fmt = _output_format(args)
    k = _cutoffs(args.k)
    frames = _read_inputs(args)
    options = _evaluate_options(args, frames)
    user = options.pop("user")
    truth = frames.get("truth")
    kwargs = {} if truth is None else options
    result = fm.compare(
        frames["recs"],
        truth,
        baseline_model=args.baseline_model,
        model=args.model_col,
        by=args.by,
        user=user,
        metrics=args.metrics,
        k=k[0] if k is not None and len(k) == 1 else k,
        level=args.level,
        n_resamples=args.resamples,
        seed=args.seed,
        correction=args.correction,
        progress=False if args.no_progress else None,
        **kwargs,
    )
    write_result(result, fmt, args.output, args.precision)
    return 0


#: The demo's metrics and what each row of its table is (printed under it).
_DEMO_METRICS: dict[str, str] = {
    "precision": "share of the top k the user liked",
    "recall": "share of the user's liked items that are in the top k",
    "ndcg": "liked items near the top count more (discounted gain); 1 = the best order",
    "ap": "average precision (alias map): the precision at each liked item of the top "
    "k, summed and divided by min(liked items, k)",
    "mrr": "1 / the rank of the first liked item in the top k (0 without one)",
    "coverage": "share of the catalog that anyone is shown (one value per model)",
    "personalization": "1 - the share of items two users' lists have in common, on "
    "average (one value per model)",
    "gini": "how unequal the items' exposure is: 0 = all shown equally, near 1 = a few "
    "items shown to everyone (one value per model; lower is better)",
}

#: What to try after the demo: a command and what it does.
_DEMO_NEXT: tuple[tuple[str, str], ...] = (
    (
        "python3 -m frame_metrics evaluate RECS TRUTH -k 10",
        "your own parquet or CSV files: recommendations (user, item, rank, or a score "
        "with --score-col) and truth (user, item, relevance)",
    ),
    ("python3 -m frame_metrics evaluate --help", "every metric and option"),
    (
        "python3 -m frame_metrics compare --help",
        "is one model better? bootstrap intervals and paired tests",
    ),
    (
        'python3 -c "import frame_metrics as fm; help(fm.evaluate)"',
        "the same from Python, on polars or pandas frames",
    ),
)


def demo() -> pl.DataFrame:
    """Evaluate the synthetic ``popularity`` and ``personal`` models at k = 5 and 10.

    Accuracy and, in the same call, what the lists look like as a whole: the share of
    the catalog they cover, how different users' lists are, and how unequal exposure is.

    Examples
    --------
    >>> demo().select("model", "n_users").rows()
    [('personal', 1000), ('popularity', 1000)]
    """
    recs, truth = synthetic()
    return fm.evaluate(
        recs, truth, metrics=list(_DEMO_METRICS), k=[5, 10], by="model", aggregate=True
    )


def _demo_report(result: pl.DataFrame, recs: pl.DataFrame, truth: pl.DataFrame, width: int) -> str:
    r"""The demo's printout, ``width`` columns wide.

    What was evaluated; one row per metric and cutoff with a column per model (a block per
    model when that is wider than ``width``); what the rows are; and what to try next.

    Examples
    --------
    >>> result = pl.DataFrame({"model": ["a", "b"], "n_users": [2, 2], "recall@5": [0.5, 0.25]})
    >>> recs = pl.DataFrame({"model": ["a", "b"], "user": [1, 1], "item": [1, 2], "rank": 1})
    >>> truth = pl.DataFrame({"user": [1], "item": [1], "relevance": [1]})
    >>> print(_demo_report(result, recs, truth, 80).split("\n\n")[2])
    metric        a       b
    recall@5  0.5000  0.2500
    n_users        2       2
    """
    models = result["model"].to_list()
    metrics = [c for c in result.columns if c not in ("model", "n_users")]
    cells = {c: [f"{v:.4f}" for v in result[c]] for c in metrics}
    cells["n_users"] = [str(v) for v in result["n_users"]]
    label = max(len(c) for c in ["metric", *cells])
    value = max(len(s) for s in [*models, *(v for vs in cells.values() for v in vs)])
    per_user = recs.group_by("model", "user").len().select(pl.col("len").max()).item()
    lines = [
        textwrap.fill(
            f"frame_metrics {fm.__version__} demo: {len(models)} models recommend {per_user} "
            f"items to each of {recs['user'].n_unique()} synthetic users, who like "
            f"{truth.height} items between them. 'popularity' shows everyone the same "
            "most popular items; 'personal' ranks each user's candidates by a noisy score "
            "that favours the items they like.",
            width,
        ),
        "",
        textwrap.fill(
            "Each model at k = 5 and 10; a per-user metric is the mean over the model's "
            "n_users users:",
            width,
            break_on_hyphens=False,
        ),
        "",
    ]
    if label + (value + 2) * len(models) <= width:
        lines.append("metric".ljust(label) + "".join(f"  {m:>{value}}" for m in models))
        lines += [
            c.ljust(label) + "".join(f"  {v:>{value}}" for v in vs) for c, vs in cells.items()
        ]
    else:  # too narrow for a column per model: one block per model
        for i, model in enumerate(models):
            lines += [*([""] if i else []), f"{model}:"]
            lines += [f"  {c.ljust(label)}  {vs[i]:>{value}}" for c, vs in cells.items()]
    names = [n for n in _DEMO_METRICS if any(c.startswith(f"{n}@") for c in metrics)]
    key = max(len(f"{n}@k") for n in names) + 2
    lines += ["", textwrap.fill("What the rows are (per user at cutoff k, then the mean):", width)]
    for name in names:
        text = _DEMO_METRICS[name]
        if width - key >= 30:  # the name, then the text in a column beside it
            wrapped = textwrap.wrap(text, width - key - 2)
            lines.append(f"  {name + '@k':<{key}}{wrapped[0]}")
            lines += [" " * (key + 2) + rest for rest in wrapped[1:]]
        else:
            lines += [
                f"  {name}@k",
                *textwrap.wrap(text, width - 4, initial_indent="    ", subsequent_indent="    "),
            ]
    lines += ["", "Try next:"]
    for command, what in _DEMO_NEXT:
        lines.append(f"  {command}")
        lines += textwrap.wrap(
            what, max(width - 6, 20), initial_indent="      ", subsequent_indent="      "
        )
    return "\n".join(lines)


def _run_demo(args: argparse.Namespace) -> int:
    import shutil

    recs, truth = synthetic()
    # The terminal's width ($COLUMNS first), 80 when the output is not a terminal.
    width = shutil.get_terminal_size((80, 24)).columns
    print(_demo_report(demo(), recs, truth, width))
    return 0


# -- the entry point --------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line and return its exit status.

    Parameters
    ----------
    argv
        The arguments after the program name; default ``sys.argv[1:]``. None at all
        runs the demo.

    Returns
    -------
    0 on success, :data:`EXIT_DATA` for a data error, :data:`EXIT_USAGE` for a usage
    error (argparse's and a missing optional dependency included); errors are one line
    on stderr. Even an unexpected exception (a bug) is one line, not a traceback.
    """
    args = list(sys.argv[1:] if argv is None else argv) or ["demo"]
    try:
        namespace = build_parser().parse_args(args)
    except SystemExit as exc:  # --help, --version and argparse's usage errors
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    run: _Command = namespace.run
    with _warnings_as_lines():
        try:
            for module in getattr(namespace, "needs", ()):  # before reading any input
                importlib.import_module(module)
            return run(namespace)
        except (Exception, KeyboardInterrupt, pl.exceptions.PanicException) as exc:
            if _is_broken_pipe(exc):  # the reader left early (`| head`): not an error
                _silence_stdout()
                return 0
            return _report(exc, namespace)


def _missing_dependency(exc: ImportError, command: str) -> str:
    """Say which extra of frame_metrics installs the module ``command`` could not import.

    Examples
    --------
    >>> _missing_dependency(ModuleNotFoundError("No module named 'numpy'", name="numpy"), "compare")
    "compare needs numpy, which is not installed: pip install 'frame_metrics[stats]'"
    """
    module = (exc.name or "").partition(".")[0]
    extra = _EXTRA_OF_MODULE.get(module)
    if extra is None:
        return f"{command}: {_first_line(exc)}"
    return f"{command} needs {module}, which is not installed: pip install 'frame_metrics[{extra}]'"


def _is_broken_pipe(exc: BaseException) -> bool:
    # polars reports a failed write to a Python stream as a plain OSError.
    return isinstance(exc, BrokenPipeError) or (
        isinstance(exc, OSError) and "Broken pipe" in str(exc)
    )


#: Errors of the inputs or of their files, reported as they are (exit status 1).
_DATA_ERRORS = (DataError, FrameMetricsError, pl.exceptions.PolarsError, OSError)


def _report(exc: BaseException, args: argparse.Namespace) -> int:
    """Print one error line and return the exit status of ``exc``, whatever it is."""
    if isinstance(exc, MissingColumnsError):
        message, status = str(exc) + _column_hint(exc.missing, args), EXIT_USAGE
    elif isinstance(exc, (UsageError, InvalidOptionError)):
        message, status = _in_cli_terms(_in_cli_words(exc)), EXIT_USAGE
    elif isinstance(exc, ImportError):  # an optional dependency the command needs
        message, status = _missing_dependency(exc, args.command), EXIT_USAGE
    elif isinstance(exc, _DATA_ERRORS):
        message, status = _first_line(exc) + _ids_hint(_first_line(exc), args), EXIT_DATA
    elif isinstance(exc, KeyboardInterrupt):
        message, status = "interrupted", 130
    elif isinstance(exc, pl.exceptions.PanicException):  # a polars bug: still one line
        message, status = f"polars failed: {_first_line(exc)}", EXIT_DATA
    else:  # a bug: still one line, saying what to do
        message = f"internal error ({type(exc).__name__}: {_first_line(exc)}); please report it"
        status = EXIT_DATA
    return _fail(message, status)


def _ids_hint(message: str, args: argparse.Namespace) -> str:
    """Name ``--ids-as-text`` when a CSV id column was read as numbers but holds text.

    polars infers a column's dtype from its first 10,000 rows: ids all digits there
    make it an int column, and a later id with a letter cannot be parsed.

    Examples
    --------
    >>> args = build_parser().parse_args(["evaluate", "recs.csv"])
    >>> _ids_hint("could not parse `x9` as dtype `i64` at column 'item' (column number 2)", args)
    '; to read the ids of every file as text, pass --ids-as-text'
    """
    parsed = re.search(r"could not parse .* at column '(.*)'", message)
    ids = [*getattr(args, "user_col", ()), getattr(args, "item_col", None)]
    if parsed is None or parsed[1] not in ids or getattr(args, "ids_as_text", False):
        return ""
    return "; to read the ids of every file as text, pass --ids-as-text"


def _fail(message: str, status: int) -> int:
    print(f"{PROG}: error: {message}", file=sys.stderr)
    return status


def _first_line(exc: BaseException) -> str:
    """The first non-blank line of an error (polars adds hints and plans below it).

    The arguments it proposes are said as this command line's (see :func:`_in_cli_words`).
    """
    lines = [line.strip() for line in _in_cli_words(exc).splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__


def _in_cli_words(exc: BaseException) -> str:
    """An error's message in this command line's terms, from its attributes and parts.

    Examples
    --------
    >>> _in_cli_words(FrameMetricsError("rows repeat; pass ", Keyword("by", "model")))
    'rows repeat; pass --by model'
    >>> _in_cli_words(InvalidOptionError("expected a number in (0, 1), got 2.0", option="head_share"))
    '--head-share: expected a number in (0, 1), got 2.0'
    >>> _in_cli_words(MissingInputError("novelty", "train", "the train split"))
    'novelty: expected --train FILE (the train split)'
    """
    if not isinstance(exc, (FrameMetricsError, FrameMetricsWarning)):
        return str(exc)
    return _said(exc)


def _said(message: FrameMetricsError | FrameMetricsWarning) -> str:
    """A message of frame_metrics as this command line says it."""
    if isinstance(message, MissingInputError):
        # A frame is a file here: the option and its FILE, never "got None".
        needed = f"{_flag(message.frame or '')} FILE"
        return f"{message.metric}: expected {needed} ({message.purpose})" + _words(message.advice)
    if message.option == "aggregate" and message.columns:
        # aggregate=False is --per-user, the only way this command line asks for it.
        return (
            f"--per-user: {', '.join(message.columns)}: corpus metrics have one value per by "
            "group, not per user; leave out --per-user"
        )
    option = message.option
    subject = "" if option is None else f"{_flag(option) if option in _SUBJECTS else option}: "
    return subject + _words(message.parts)


def _words(parts: Sequence[Part]) -> str:
    """Parts of a message: text as it is, the arguments it proposes as this command line's.

    Examples
    --------
    >>> _words(["rows repeat; ", Pass("truth"), " or ", LeaveOut("k")])
    'rows repeat; give TRUTH or leave out -k'
    """
    out = []
    for part in parts:
        if isinstance(part, str):
            out.append(part)
        elif isinstance(part, LeaveOut):
            out.append(f"leave out {_flag(part.name)}")
        elif isinstance(part, Pass):
            verb = "give" if part.name in _FRAME_ARGUMENTS else "pass"
            out.append(f"{verb} {_cli_keyword(part)}")
        else:
            out.append(_cli_keyword(part))
    return "".join(out)


#: The frames a message may propose, as this command line's arguments.
_FRAME_ARGUMENTS = {"recs": "RECS", "truth": "TRUTH"}


def _cli_keyword(keyword: Keyword) -> str:
    """A keyword argument of ``fm.evaluate`` as this command line's option or argument.

    Examples
    --------
    >>> [_cli_keyword(k) for k in (Keyword("by"), Keyword("on_duplicate", "first"))]
    ['--by', '--on-duplicate first']
    >>> _cli_keyword(Keyword("truth")), _cli_keyword(Keyword("by", "my model"))
    ('TRUTH', "--by 'my model'")
    """
    if keyword.name in _FRAME_ARGUMENTS:
        return _FRAME_ARGUMENTS[keyword.name]
    flag = _flag(keyword.name)
    return flag if keyword.value is None else f"{flag} {shlex.quote(keyword.value)}"


#: evaluate's and compare's keywords whose option here is not ``--`` and the name.
_OWN_FLAGS = {
    "k": "-k",
    "metrics": "-m",
    "score": "--score-col",
    "user": "--user-col",
    "n_resamples": "--resamples",
}


def _flag(name: str) -> str:
    """The option of this command line that sets evaluate's or compare's keyword ``name``.

    Examples
    --------
    >>> _flag("k"), _flag("zero_ideal"), _flag("item_features"), _flag("baseline_model")
    ('-k', '--zero-ideal', '--item-features', '--baseline-model')
    """
    return _OWN_FLAGS.get(name, "--" + name.replace("_", "-"))


#: The keywords a message about one begins with, said as their option here: those whose
#: values this command line hands on as given (cutoffs, names, numbers, the --ties rule,
#: compare's statistics). A choice option's word is checked when parsed, so a message about
#: one comes from a metric string ("ap(ap_denominator=x)") and keeps the option's name.
_SUBJECTS = frozenset(
    {
        "k",
        "metrics",
        "score",
        "user",
        "by",
        "threshold",
        "head_share",
        "persistence",
        "max_relevance",
        "baseline",
        "ties",
        "baseline_model",
        "seed",
        "level",
        "n_resamples",
        "correction",
    }
)
#: evaluate's keyword names, as they begin its messages, and their options here.
_FLAGS = {name: _flag(name) for name in _SUBJECTS}


def _in_cli_terms(message: str) -> str:
    """Say evaluate's keyword arguments as this command line's options and arguments.

    Examples
    --------
    >>> _in_cli_terms("novelty: expected train= (the train split), got None")
    'novelty: expected --train FILE (the train split)'
    >>> _in_cli_terms("head_share: expected a number in (0, 1), got 2.0")
    '--head-share: expected a number in (0, 1), got 2.0'
    >>> _in_cli_terms("k: 5 ignored, every metric has its own cutoff or none ('ndcg@10'); leave k out")
    "-k: 5 ignored, every metric has its own cutoff or none ('ndcg@10'); leave out -k"
    """
    corpus = re.fullmatch(
        r"aggregate: expected True for corpus metrics \((.*)\), got False with (.*)", message
    )
    if corpus:
        return f"--per-user: {corpus[2]}: corpus metrics have {corpus[1]}; leave out --per-user"
    keyword, colon, rest = message.partition(": ")
    if colon and keyword in _FLAGS:
        message = f"{_FLAGS[keyword]}: {rest}"
    extra = r"\b(train|catalog|item_features|baseline)="
    message = re.sub(extra + r" (\(.*?\)), got None", r"\1= FILE \2", message)
    message = re.sub(extra, lambda m: "--" + m[1].replace("_", "-"), message)
    message = re.sub(r"\bunexpected='(\w+)'", r"--unexpected \1", message)
    message = message.replace("pass truth= to", "give TRUTH to")
    # A value a preset set: "set by convention='rectools' (pass threshold= to override it)".
    message = re.sub(r"\bset by convention='(\w+)'", r"set by --convention \1", message)
    message = re.sub(
        r"\bpass (\w+)= to override it\)",
        lambda m: f"pass --{m[1].replace('_', '-')} to override it)",
        message,
    )
    message = message.replace("pass score= to", "pass --score-col to")
    message = message.replace("leave k out", "leave out -k")
    if message.startswith("-k: ") and message.endswith(", got None"):
        message = message.removesuffix("None") + (
            "none (every metric named without its own cutoff, like ndcg@10, needs -k)"
        )
    return message


def _column_hint(missing: Sequence[str], args: argparse.Namespace) -> str:
    """Name the options that set the missing columns.

    Examples
    --------
    >>> args = build_parser().parse_args(["evaluate", "recs.csv", "--user-col", "usr"])
    >>> _column_hint(["usr", "rank"], args)
    ' (set with --user-col, --rank-col or rank by a score with --score-col)'
    """
    if not isinstance(getattr(args, "recs", None), str):
        return ""
    options = {
        "--user-col": args.user_col,
        "--item-col": [args.item_col],
        "--rank-col": [args.rank_col],
        "--score-col": [args.score_col],
        "--relevance-col": [args.relevance_col],
        "--prediction-col": [args.prediction_col],
        "--features-col": [args.features_col],
        "--by": args.by or [],
    }
    flags = [flag for flag, names in options.items() if set(names) & set(missing)]
    if "--rank-col" in flags and args.score_col is None:
        flags[flags.index("--rank-col")] = "--rank-col or rank by a score with --score-col"
    return f" (set with {', '.join(flags)})" if flags else ""


@contextlib.contextmanager
def _warnings_as_lines() -> Iterator[None]:
    """Show each warning as one ``frame-metrics: warning: ...`` line, in this CLI's terms."""

    def show(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: TextIO | None = None,
        line: str | None = None,
    ) -> None:
        text = _in_cli_words(message) if isinstance(message, Warning) else message
        print(f"{PROG}: warning: {_in_cli_terms(' '.join(text.split()))}", file=sys.stderr)

    with warnings.catch_warnings():
        warnings.showwarning = show
        yield


def _silence_stdout() -> None:
    # Python flushes stdout at exit; with the reader gone that would raise again.
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
