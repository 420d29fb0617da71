"""The argument parser: one subparser per command, the metric options from the option table."""

from __future__ import annotations

import argparse
import inspect
import math
import textwrap
from collections.abc import Sequence
from typing import Any, NoReturn

import frame_metrics as fm
from frame_metrics.cli.files import FORMAT_OF_SUFFIX
from frame_metrics.cli.messages import EXIT_USAGE, PROG, fail
from frame_metrics.cli.output import DIGITS, FORMATS, MAX_DIGITS, joined_or
from frame_metrics.conventions import CONVENTIONS
from frame_metrics.keywords import EXTRA_INPUTS, ROLES
from frame_metrics.metrics import DEFAULT_RANKING
from frame_metrics.metrics.registry import split_names
from frame_metrics.options import CHOICES, OPTIONS, Option, given

#: evaluate's keyword defaults, so the command line cannot drift from the function.
_DEFAULTS: dict[str, Any] = {
    name: p.default for name, p in inspect.signature(fm.evaluate).parameters.items()
}


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
        raise SystemExit(fail(f"{message} (see '{self.prog} --help')", EXIT_USAGE))


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
    # Each command is an `_add_<name>(commands)`; frame_metrics.cli.commands runs it.
    _add_evaluate(commands)
    _add_compare(commands)
    _add_report(commands)
    _add_demo(commands)
    _add_gaps(commands)
    _add_exposure(commands)
    _add_policy_value(commands)
    _add_split(commands)
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
  frame-metrics evaluate recs.parquet truth.parquet -m ndcg,recall -k 10 --by model \\
      --fail-under ndcg@10=0.30,recall@10=0.2 --max-drop ndcg@10=0.01 --baseline-model prod

exit status: 0 done, 1 data error (values the metrics cannot use, a file polars
cannot read), 2 usage error (bad path, file type, option, metric, cutoff or column),
3 a gate (--fail-under, --max-drop) failed: the result is written as usual."""


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
    _add_gate_options(p, evaluate=True)
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
    _add_roles(cols, [r.name for r in ROLES if r.name != "by"])
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
    _add_inputs(p, extra, [e.name for e in EXTRA_INPUTS])


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
        f"{joined_or(list(FORMAT_OF_SUFFIX))} file (.txt: table)",
    )
    out.add_argument(
        "--precision",
        type=_digits,
        metavar="N",
        help=f"significant digits of the numbers in table and markdown output, 1 to "
        f"{MAX_DIGITS} (default: {DIGITS}; scientific notation when very small or large); "
        "csv and json are always exact",
    )


def _add_comparison_statistics(
    p: argparse.ArgumentParser, resamples: int | None, said: str
) -> argparse._ArgumentGroup:
    """fm.compare's statistics as options, for compare and report.

    Level, resamples, seed, correction; ``resamples`` is its default, ``said`` how the
    help says it.
    """
    stats = p.add_argument_group("statistics")
    stats.add_argument(
        "--level", type=_number, default=0.95, metavar="X", help="confidence level (default: 0.95)"
    )
    stats.add_argument(
        "--resamples",
        type=_integer,
        default=resamples,
        metavar="N",
        help=f"bootstrap resamples over users (default: {said})",
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
    return stats


def _add_gate_options(p: argparse.ArgumentParser, *, evaluate: bool) -> None:
    """``--fail-under`` and ``--max-drop``: gates (``fm.check``), exit status 3."""
    gates = p.add_argument_group(
        "gates (exit status 3 when one fails: one line per failed gate and model on "
        "standard error; the result is written as usual)"
    )
    gates.add_argument(
        "--fail-under",
        action="extend",
        type=_gate_pairs,
        default=[],
        metavar="METRIC=X",
        help="fail a model whose mean is below X: ndcg@10=0.30; with compare also an end of "
        "its interval: 'ci_low(ndcg@10)=0.30' fails a model whose interval reaches below; "
        "comma-separated, repeatable",
    )
    gates.add_argument(
        "--max-drop",
        action="extend",
        type=_gate_pairs,
        default=[],
        metavar="METRIC=X",
        help="fail a model whose mean is below --baseline-model's by more than X "
        "(absolute): ndcg@10=0.01; comma-separated, repeatable",
    )
    if evaluate:
        gates.add_argument(
            "--baseline-model",
            metavar="MODEL",
            help="the model --max-drop measures from (a value of --model-col)",
        )
        gates.add_argument(
            "--model-col",
            default="model",
            metavar="COL",
            help="the --by column naming the model, for --max-drop (default: model)",
        )


def _gate_pairs(text: str) -> list[tuple[str, float]]:
    """``--fail-under``/``--max-drop``: comma-separated METRIC=X (the last ``=`` splits).

    Examples
    --------
    >>> _gate_pairs("ndcg@10=0.3, ci_low(recall@5)=0.2")
    [('ndcg@10', 0.3), ('ci_low(recall@5)', 0.2)]
    >>> _gate_pairs("ndcg@10>=0.3")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: expected METRIC=X (a metric name, = and a number), got 'ndcg@10>=0.3'
    """
    out = []
    for item in split_names(text):
        if not isinstance(item, str) or not item.strip():
            continue
        name, _, value = item.strip().rpartition("=")
        try:
            bound = float(value)
        except ValueError:
            bound = math.nan
        if not name.strip() or name.rstrip().endswith(("<", ">", "=")) or not math.isfinite(bound):
            raise argparse.ArgumentTypeError(
                f"expected METRIC=X (a metric name, = and a number), got {item.strip()!r}"
            )
        out.append((name.strip(), bound))
    if not out:
        raise argparse.ArgumentTypeError(f"expected METRIC=X, got {text!r}")
    return out


def _add_demo(commands: argparse._SubParsersAction[_Parser]) -> None:
    commands.add_parser(
        "demo",
        formatter_class=_HelpFormatter,
        help="evaluate two models on built-in synthetic data",
        description="Evaluate the synthetic 'popularity' and 'personal' models at k = 5 and 10.",
    )


def _add_option(group: argparse._ArgumentGroup, row: Option) -> None:
    """An option of the table as a flag: its choices, or a number (or gain) parsed here."""
    default = _DEFAULTS[row.name]
    if default is not None and given(default):
        shown = "%(default)s"
    elif row.choices and not row.table:
        shown = f"the --convention's, else {row.default}"
    else:
        shown = row.cli_default or str(row.default)
    help = f"{row.help} (default: {shown})"
    if row.table:
        group.add_argument(row.flag, type=_gain, metavar=row.metavar, help=help)
    elif row.parse is not None:  # a text value read as it is (a column name)
        group.add_argument(
            row.flag, type=row.parse, default=default, metavar=row.metavar, help=help
        )
    elif row.choices:
        group.add_argument(row.flag, choices=row.choices, default=default, help=help)
    else:
        # An option whose default is None takes "none" too: that default, said explicitly.
        number = _number_or_none if row.default is None else _number
        group.add_argument(row.flag, type=number, default=default, metavar=row.metavar, help=help)


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


def _number_or_none(text: str) -> float | None:
    """A number option whose default is None: a number, or ``none`` for that None.

    ``--threshold none`` says what its default means (rel > 0 is relevant), explicitly.

    Examples
    --------
    >>> _number_or_none("4"), _number_or_none("none")
    (4.0, None)
    >>> _number_or_none("abc")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: expected a number or none, got 'abc'
    """
    if text.strip().lower() == "none":
        return None
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number or none, got {text!r}") from None


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
    if not 1 <= digits <= MAX_DIGITS:
        raise argparse.ArgumentTypeError(
            f"expected an int from 1 to {MAX_DIGITS} (significant digits), got {text!r}"
        )
    return digits


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
  frame-metrics compare recs.parquet truth.parquet -m ndcg -k 5,10,20 --resamples 2000 -o cmp.csv
  frame-metrics compare recs.parquet truth.parquet -m ndcg -k 10 --baseline-model prod \
      --fail-under 'ci_low(ndcg@10)=0.30' --max-drop ndcg@10=0.01

exit status: 0 done, 1 data error, 2 usage error, 3 a gate (--fail-under, --max-drop)
failed: the comparison is written as usual."""


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
        help="the model every other is compared with (default: every pair of models, each "
        "pair's first by name as its baseline; --baseline FILE is serendipity's baseline "
        "recommendations); also what --max-drop measures from",
    )
    what.add_argument(
        "--by",
        type=_names,
        metavar="COLS",
        help="comma-separated segment columns, each compared on its own",
    )
    stats = _add_comparison_statistics(p, 10_000, "10000")
    stats.add_argument("--no-progress", action="store_true", help="never show the progress bar")
    _add_input_options(p)
    _add_output_options(p)
    _add_gate_options(p, evaluate=False)


_REPORT_DESCRIPTION = """Write a report to share: one self-contained HTML file (or Markdown, by the
-o extension) with the means per model and their bootstrap intervals, metric@k
curves, per-user distributions, every comparison (against --baseline-model, or every
pair of models) with corrected p-values, who was left out and why, and what was
called (options, versions, and each input's rows, users, items and content hash)."""


_REPORT_EPILOG = """examples:
  frame-metrics report recs.parquet truth.parquet -m ndcg,recall -k 5,10,20 -o report.html
  frame-metrics report recs.parquet truth.parquet -m ndcg -k 10 --baseline-model prod \\
      --threshold 4 --title 'Ranker v2 against prod' -o report.md

exit status: 0 done, 1 data error, 2 usage error (a file that cannot be written too)."""


def _add_report(commands: argparse._SubParsersAction[_Parser]) -> None:
    p = commands.add_parser(
        "report",
        formatter_class=_HelpFormatter,
        help="write a report to share (HTML or Markdown)",
        description=_REPORT_DESCRIPTION,
        epilog=_REPORT_EPILOG,
    )
    p.add_argument(
        "recs", metavar="RECS", help="recommendations, with a model column for several models"
    )
    p.add_argument("truth", metavar="TRUTH", nargs="?", help="the items each user likes")
    what = p.add_argument_group("what to report")
    what.add_argument(
        "-m",
        "--metrics",
        action="extend",
        type=_metric_names,
        metavar="NAMES",
        help="comma-separated metric names, as for evaluate",
    )
    what.add_argument("-k", metavar="K", help="comma-separated cutoffs, e.g. 5,10,20")
    what.add_argument(
        "--model-col", default="model", metavar="COL", help="the model column (default: model)"
    )
    what.add_argument(
        "--baseline-model",
        metavar="MODEL",
        help="compare every model with this one (default: every pair of models)",
    )
    what.add_argument("--title", default="Evaluation report", help="the report's title")
    _add_comparison_statistics(
        p, None, "1000, fewer for very many users: resamples x users at most 2e8, 200 at least"
    )
    _add_input_options(p)
    out = p.add_argument_group("output")
    out.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="FILE",
        help="the report: a .html file (self-contained) or a .md file",
    )


_GAPS_DESCRIPTION = """Metric gaps between groups of users (consumer fairness): per metric@k (and --by
model) each group's number of users and exact mean; with two groups the difference
(first minus second in sorted order) with a bootstrap interval and Welch's t-test,
with more the mean absolute pairwise difference and the range.

PER_USER holds per-user metric values (the output of 'frame-metrics evaluate
--per-user'); every column other than the user key, --by and --group-col is a metric.
The groups: a column of PER_USER (--group-col), a file of user key and group
(--groups), or by default the most active --active-share of the users by their rows in
--train against the rest."""


_GAPS_EPILOG = """examples:
  frame-metrics gaps per_user.parquet --group-col country --by model
  frame-metrics gaps per_user.parquet --groups user_groups.csv -o gaps.csv
  frame-metrics gaps per_user.parquet --train train.parquet --active-share 0.05"""


def _add_gaps(commands: argparse._SubParsersAction[_Parser]) -> None:
    p = commands.add_parser(
        "gaps",
        formatter_class=_HelpFormatter,
        help="metric gaps between groups of users, with intervals and tests",
        description=_GAPS_DESCRIPTION,
        epilog=_GAPS_EPILOG,
    )
    p.add_argument("per_user", metavar="PER_USER", help="per-user metric values")
    what = p.add_argument_group("the groups")
    given = what.add_mutually_exclusive_group()
    given.add_argument("--group-col", metavar="COL", help="the column of PER_USER naming the group")
    given.add_argument(
        "--groups",
        metavar="FILE",
        help="a parquet or CSV file of the user key and one group column",
    )
    what.add_argument(
        "--train",
        metavar="FILE",
        help="without --group-col or --groups: train interactions (user key), whose rows "
        "per user rank the users for the active/inactive split",
    )
    what.add_argument(
        "--active-share",
        type=_number,
        default=0.05,
        metavar="X",
        help="the share of users that are active, ties kept together (default: 0.05)",
    )
    cols = p.add_argument_group("columns")
    cols.add_argument(
        "--user-col",
        type=_names,
        default="user",
        metavar="COLS",
        help="user key; comma-separated for a composite key (default: user)",
    )
    cols.add_argument(
        "--by",
        type=_names,
        metavar="COLS",
        help="comma-separated model (or segment) columns, each with its own gaps",
    )
    stats = p.add_argument_group("statistics")
    stats.add_argument(
        "--level",
        type=_number,
        default=0.95,
        metavar="X",
        help="confidence level of the interval (default: 0.95)",
    )
    stats.add_argument(
        "--resamples",
        type=_integer,
        default=10_000,
        metavar="N",
        help="bootstrap resamples per group (default: 10000)",
    )
    stats.add_argument(
        "--seed", type=_integer, default=0, metavar="N", help="seed of the resampling (default: 0)"
    )
    stats.add_argument("--no-progress", action="store_true", help="never show the progress bar")
    _add_output_options(p)


_EXPOSURE_DESCRIPTION = """Who gets the attention (provider fairness): per --by group and item group, the
group's exposure within k (the attention e(r) its items get at ranks 1..k, summed
over the lists: --exposure log is 1/log2(r+1)), its share of the exposure, its share
of the catalog's items and, with TRUTH, its share of the relevant truth rows (merit).
exposure_parity@k compares the exposure share with one of these.

The item groups: a file of item and group (--item-groups, the group column
--group-col), or by default the head and tail of --train's popularity (as aplt's)."""


_EXPOSURE_EPILOG = """examples:
  frame-metrics group-exposure recs.parquet -k 10 --item-groups providers.csv --by model
  frame-metrics group-exposure recs.parquet truth.parquet -k 10 --train train.parquet -o exposure.csv
  frame-metrics group-exposure recs.parquet -k 20 --item-groups groups.csv --exposure rbp --persistence 0.85"""


#: The metric options the exposure command takes, from the option table.
_EXPOSURE_OPTIONS = ("exposure", "persistence", "threshold", "head_share", "ties", "on_duplicate")


def _add_exposure(commands: argparse._SubParsersAction[_Parser]) -> None:
    p = commands.add_parser(
        "group-exposure",
        aliases=["exposure"],  # the old name, kept one release (a note on stderr says so)
        formatter_class=_HelpFormatter,
        help="the exposure of item groups within k, beside their catalog and merit shares",
        description=_EXPOSURE_DESCRIPTION,
        epilog=_EXPOSURE_EPILOG,
    )
    p.add_argument(
        "recs", metavar="RECS", help="recommendations: user, item and rank (or --score-col)"
    )
    p.add_argument(
        "truth",
        metavar="TRUTH",
        nargs="?",
        help="optional: user, item, relevance, for each group's share of relevant rows (merit)",
    )
    what = p.add_argument_group("what to compute")
    what.add_argument("-k", type=_integer, default=10, metavar="K", help="the cutoff (default: 10)")
    what.add_argument(
        "--by",
        type=_names,
        metavar="COLS",
        help="comma-separated columns (model, segment), each with its own table",
    )
    cols = p.add_argument_group("columns")
    _add_roles(
        cols,
        ("user", "item", "rank", "score", "relevance", "group"),
        relevance="relevance in TRUTH",
        group="the group column of --item-groups, and of the result",
    )
    cols.add_argument(
        "--ids-as-text",
        action="store_true",
        help="read the user and item columns of every input file as text",
    )
    opts = p.add_argument_group("options")
    for row in OPTIONS:
        if row.name in _EXPOSURE_OPTIONS:
            _add_option(opts, row)
    extra = p.add_argument_group("extra inputs (parquet or CSV files)")
    _add_inputs(
        p,
        extra,
        ("item_groups", "train", "catalog", "exclude"),
        item_groups="item and --group-col, one row per (item, group) (default: head and tail "
        "from --train)",
        train="reference interactions (user, item): the default head and tail groups",
        catalog="the catalog's items (item column) for catalog_share (default: the items seen)",
    )
    _add_output_options(p)


def _add_roles(cols: argparse._ArgumentGroup, names: Sequence[str], /, **helps: str) -> None:
    """Column keywords of ``fm.evaluate`` as flags, from their rows of ``ROLES``.

    ``names``: the command's roles, in the table's order; ``helps``: a command's own help
    line of a role. The default (the column read) is said after the help; ``--rank-col``
    and ``--score-col`` exclude each other (the rank column is read unless a score ranks).
    """
    ranked: argparse._MutuallyExclusiveGroup | None = None
    for row in ROLES:
        if row.name not in names:
            continue
        target: argparse._ActionsContainer = cols
        if row.name in ("rank", "score"):
            ranked = ranked or cols.add_mutually_exclusive_group()
            target = ranked
        help = helps.get(row.name, row.help)
        extra: dict[str, Any] = {"type": _names} if row.several else {}
        if row.read_as is not None:
            # A string: argparse applies the type to it (a composite key's comma list).
            extra["default"] = row.read_as
            help += " (default: %(default)s)"
        target.add_argument(row.flag, metavar=row.metavar, help=help, **extra)


def _add_inputs(
    p: argparse.ArgumentParser,
    extra: argparse._ArgumentGroup,
    names: Sequence[str],
    /,
    **helps: str,
) -> None:
    """Extra input files as flags, from their rows of ``EXTRA_INPUTS`` (``FILE`` each).

    ``helps``: a command's own help line of an input. The inputs the command does not
    take default to None: the files are read from every input's option.
    """
    for row in EXTRA_INPUTS:
        if row.name in names:
            extra.add_argument(row.flag, metavar="FILE", help=helps.get(row.name, row.help))
    p.set_defaults(**{e.name: None for e in EXTRA_INPUTS if e.name not in names})


_POLICY_VALUE_DESCRIPTION = """The off-policy value of a recommender (spec section 9.5): what it would earn if
deployed, estimated from the feedback logged under another policy. LOGS holds one row
per impression with the user, the item shown, its reward and its pscore (the logging
policy's probability of showing that item); RECS holds the evaluated policy's ranked
lists (its top k, each item with probability 1/k) or --probability-col.

One row per --by group (policy): n_users, n_rows, the value, its bootstrap interval
over users, the effective sample size of the weights, the share of logged rows the
policy could have shown and the largest weight."""


_POLICY_VALUE_EPILOG = """examples:
  frame-metrics policy-value logs.parquet recs.parquet -k 10 --by model
  frame-metrics policy-value logs.parquet recs.parquet --estimator dr --reward-model-col q_hat
  frame-metrics policy-value logs.csv policy.csv --probability-col p --max-weight 20 -o value.csv"""


def _add_policy_value(commands: argparse._SubParsersAction[_Parser]) -> None:
    from frame_metrics.policy_value import ESTIMATORS

    defaults = {
        name: p.default for name, p in inspect.signature(fm.policy_value).parameters.items()
    }
    p = commands.add_parser(
        "policy-value",
        formatter_class=_HelpFormatter,
        help="the off-policy value of a recommender from logged feedback (ips, snips, dr)",
        description=_POLICY_VALUE_DESCRIPTION,
        epilog=_POLICY_VALUE_EPILOG,
    )
    p.add_argument("logs", metavar="LOGS", help="logged feedback: user, item, reward, pscore")
    p.add_argument(
        "recs",
        metavar="RECS",
        help="the evaluated policy: user, item and rank (or --score-col, or --probability-col)",
    )
    what = p.add_argument_group("what to compute")
    what.add_argument(
        "-k",
        type=_integer,
        default=defaults["k"],
        metavar="K",
        help="the policy shows each user its top K, each with probability 1/K "
        "(default: %(default)s)",
    )
    what.add_argument(
        "--estimator",
        choices=ESTIMATORS,
        default=defaults["estimator"],
        help="snips (Σ w·reward / Σ w), ips (mean of w·reward), matching (mean reward of "
        "the logged rows in the top K) or dr (doubly robust: --reward-model-col) "
        "(default: %(default)s)",
    )
    what.add_argument(
        "--max-weight",
        type=_number,
        metavar="X",
        help="clip every weight w = π_e / π_b at X (dr: the correction's weight only)",
    )
    what.add_argument(
        "--by",
        type=_names,
        metavar="COLS",
        help="comma-separated columns of RECS telling apart the policies evaluated",
    )
    cols = p.add_argument_group("columns")
    _add_roles(
        cols, ("user", "item", "rank", "score"), score="score, higher = better: ranks are derived"
    )
    cols.add_argument(
        "--reward-col",
        default=defaults["reward"],
        metavar="COL",
        help="the reward in LOGS (default: %(default)s)",
    )
    cols.add_argument(
        "--pscore-col",
        default=defaults["pscore"],
        metavar="COL",
        help="π_b(item | user) in LOGS, in (0, 1] (default: %(default)s)",
    )
    cols.add_argument(
        "--probability-col",
        metavar="COL",
        help="π_e(item | user) in RECS, in [0, 1], instead of the top K rule",
    )
    cols.add_argument(
        "--reward-model-col",
        metavar="COL",
        help="q̂(user, item) in RECS, a reward model's estimate, for --estimator dr",
    )
    cols.add_argument(
        "--ids-as-text",
        action="store_true",
        help="read the user and item columns of every input file as text",
    )
    opts = p.add_argument_group("options")
    for row in OPTIONS:
        if row.name == "ties":
            _add_option(opts, row)
    extra = p.add_argument_group("extra inputs (parquet or CSV files)")
    _add_inputs(
        p,
        extra,
        ("exclude",),
        exclude="(user, item) pairs removed from RECS before its top K, usually the train "
        "split (items already seen): the rest of each list moves up; LOGS are not touched",
    )
    stats = p.add_argument_group("statistics")
    stats.add_argument(
        "--level",
        type=_number,
        default=defaults["level"],
        metavar="X",
        help="confidence level of the interval (default: %(default)s)",
    )
    stats.add_argument(
        "--resamples",
        type=_integer,
        default=defaults["n_resamples"],
        metavar="N",
        help="bootstrap resamples over users; 0: no interval (default: %(default)s)",
    )
    stats.add_argument(
        "--seed",
        type=_integer,
        default=defaults["seed"],
        metavar="N",
        help="seed of the resampling (default: %(default)s)",
    )
    _add_output_options(p)


_SPLIT_DESCRIPTION = """Split interactions into train and test (spec section 10), lazily, and write
parquet files to --out-dir: train.parquet and test.parquet; for the multi-fold
methods (user_kfold, time_windows) test.parquet holds every fold's test rows with a
fold column, and train_0.parquet, train_1.parquet, ... each fold's train. The
report (rows, users, items and times of each side, test rows each filter dropped,
users only in train, ties across the cut, the realised test share) is printed and
written to report.csv beside them.

Methods: last_n (each user's last --n rows; --n 1 is leave-one-out), ratio (each
user's last --test-share), time (rows from --at on, or the latest --test-share),
random (--test-share of the rows by the seeded hash), user_kfold (--n-folds folds of
users) and time_windows (--n-folds windows of --window before --end)."""

_SPLIT_EPILOG = """examples:
  frame-metrics split ratings.csv --method last_n --time-col timestamp --out-dir loo/
  frame-metrics split events.parquet --method time --test-share 0.2 --time-col ts --out-dir t/
  frame-metrics split events.parquet --method user_kfold --n-folds 5 --time-col ts --out-dir f/
  frame-metrics split events.parquet --method time_windows --n-folds 3 --window 7d \\
      --time-col ts --out-dir weeks/"""


def _add_split(commands: argparse._SubParsersAction[_Parser]) -> None:
    from frame_metrics.splits import METHODS

    defaults = {name: p.default for name, p in inspect.signature(fm.split).parameters.items()}
    p = commands.add_parser(
        "split",
        formatter_class=_HelpFormatter,
        help="split interactions into train and test (last_n, ratio, time, random, folds)",
        description=_SPLIT_DESCRIPTION,
        epilog=_SPLIT_EPILOG,
    )
    p.add_argument(
        "interactions", metavar="INTERACTIONS", help="one row per event: user, item, time"
    )
    how = p.add_argument_group("the split")
    how.add_argument("--method", required=True, choices=METHODS, help="the split's rule")
    how.add_argument("--n", type=_integer, metavar="N", help="last_n, user_kfold: rows per user")
    how.add_argument(
        "--test-share", type=_number, metavar="S", help="ratio, time, random, user_kfold: in (0, 1)"
    )
    how.add_argument("--at", metavar="TIME", help="time: rows at or after TIME are test")
    how.add_argument("--n-folds", type=_integer, metavar="F", help="user_kfold, time_windows")
    how.add_argument(
        "--window",
        type=_window,
        metavar="W",
        help="time_windows: a duration (7d, 12h, 1mo) or a number in the time column's unit",
    )
    how.add_argument("--end", metavar="TIME", help="time_windows: the last window's end")
    how.add_argument("--order", choices=("time", "random"), default=defaults["order"])
    how.add_argument("--ties", choices=("item", "random"), default=defaults["ties"])
    how.add_argument("--min-train", type=_integer, default=defaults["min_train"], metavar="N")
    how.add_argument("--seed", type=_integer, default=defaults["seed"], metavar="SEED")
    filters = p.add_argument_group("filters of the test rows (default: drop, as RecTools)")
    for name in ("cold_users", "cold_items", "seen"):
        filters.add_argument(
            f"--{name.replace('_', '-')}", choices=("drop", "keep"), default=defaults[name]
        )
    cols = p.add_argument_group("columns")
    _add_roles(cols, ("user", "item"))
    cols.add_argument("--time-col", metavar="COL", help="the time column (datetime, date, number)")
    out = p.add_argument_group("output")
    out.add_argument(
        "--out-dir", required=True, metavar="DIR", help="where the parquet files are written"
    )


def _window(text: str) -> float | str:
    """``--window``: a number (the time column's unit) or a duration string such as ``7d``.

    Examples
    --------
    >>> _window("3600"), _window("1.5"), _window("7d")
    (3600, 1.5, '7d')
    """
    for parse in (int, float):
        try:
            return parse(text)
        except ValueError:
            continue
    return text
