"""Failures and warnings as this command line says them: one line each, in its terms.

Every failure is one line on stderr, ``frame-metrics: error: ...``, and an exit status
(:data:`EXIT_USAGE`, :data:`EXIT_DATA`). A message of frame_metrics is said from what the
error carries (:class:`~frame_metrics.errors.FrameMetricsError`): the option it is about
said as this command line's option, and the arguments it proposes as its options and
arguments (``--by model``, ``give TRUTH``), never by rewriting the text.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shlex
import sys
import warnings
from collections.abc import Iterator, Sequence
from typing import TextIO

import polars as pl

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

PROG = "frame-metrics"

#: Exit status of a data error: the inputs hold values the metrics cannot use.
EXIT_DATA = 1

#: Exit status of a usage error: the command line asks for something that cannot be done.
EXIT_USAGE = 2
#: Exit status when a gate (``--fail-under``, ``--max-drop``) failed: the run itself
#: succeeded and wrote its result.
EXIT_GATES = 3

#: The optional modules a command imports, and the extra of ``pyproject.toml`` holding each.
EXTRA_OF_MODULE = {"numpy": "stats", "matplotlib": "plot", "pandas": "pandas", "pyarrow": "pandas"}


class UsageError(Exception):
    """The command line asks for something that cannot be done (exit status 2)."""


class DataError(Exception):
    """An input cannot be read or used (exit status 1)."""


def missing_dependency(exc: ImportError, command: str) -> str:
    """Say which extra of frame_metrics installs the module ``command`` could not import.

    Examples
    --------
    >>> missing_dependency(ModuleNotFoundError("No module named 'numpy'", name="numpy"), "compare")
    "compare needs numpy, which is not installed: pip install 'frame_metrics[stats]'"
    """
    module = (exc.name or "").partition(".")[0]
    extra = EXTRA_OF_MODULE.get(module)
    if extra is None:
        return f"{command}: {first_line(exc)}"
    return f"{command} needs {module}, which is not installed: pip install 'frame_metrics[{extra}]'"


def is_broken_pipe(exc: BaseException) -> bool:
    """Whether ``exc`` is a write to a closed pipe (the reader left early)."""
    # polars reports a failed write to a Python stream as a plain OSError.
    return isinstance(exc, BrokenPipeError) or (
        isinstance(exc, OSError) and "Broken pipe" in str(exc)
    )


#: Errors of the inputs or of their files, reported as they are (exit status 1).
_DATA_ERRORS = (DataError, FrameMetricsError, pl.exceptions.PolarsError, OSError)


def report_error(exc: BaseException, args: argparse.Namespace) -> int:
    """Print one error line and return the exit status of ``exc``, whatever it is."""
    if isinstance(exc, MissingColumnsError):
        message, status = str(exc) + _column_hint(exc.missing, args), EXIT_USAGE
    elif isinstance(exc, (UsageError, InvalidOptionError)):
        message, status = in_cli_words(exc), EXIT_USAGE
    elif isinstance(exc, ImportError):  # an optional dependency the command needs
        message, status = missing_dependency(exc, args.command), EXIT_USAGE
    elif isinstance(exc, _DATA_ERRORS):
        message, status = first_line(exc) + _ids_hint(first_line(exc), args), EXIT_DATA
    elif isinstance(exc, KeyboardInterrupt):
        message, status = "interrupted", 130
    elif isinstance(exc, pl.exceptions.PanicException):  # a polars bug: still one line
        message, status = f"polars failed: {first_line(exc)}", EXIT_DATA
    else:  # a bug: still one line, saying what to do
        message = f"internal error ({type(exc).__name__}: {first_line(exc)}); please report it"
        status = EXIT_DATA
    return fail(message, status)


def _ids_hint(message: str, args: argparse.Namespace) -> str:
    """Name ``--ids-as-text`` when a CSV id column was read as numbers but holds text.

    polars infers a column's dtype from its first 10,000 rows: ids all digits there
    make it an int column, and a later id with a letter cannot be parsed.

    Examples
    --------
    >>> from frame_metrics.cli import build_parser
    >>> args = build_parser().parse_args(["evaluate", "recs.csv"])
    >>> _ids_hint("could not parse `x9` as dtype `i64` at column 'item' (column number 2)", args)
    '; to read the ids of every file as text, pass --ids-as-text'
    """
    parsed = re.search(r"could not parse .* at column '(.*)'", message)
    ids = [*getattr(args, "user_col", ()), getattr(args, "item_col", None)]
    if parsed is None or parsed[1] not in ids or getattr(args, "ids_as_text", False):
        return ""
    return "; to read the ids of every file as text, pass --ids-as-text"


def fail(message: str, status: int) -> int:
    """Print ``message`` as this command line's one error line; return ``status``."""
    print(f"{PROG}: error: {message}", file=sys.stderr)
    return status


def first_line(exc: BaseException) -> str:
    """The first non-blank line of an error (polars adds hints and plans below it).

    The arguments it proposes are said as this command line's (see :func:`in_cli_words`).
    """
    lines = [line.strip() for line in in_cli_words(exc).splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__


def in_cli_words(exc: BaseException) -> str:
    """An error's message in this command line's terms, from its attributes and parts.

    Examples
    --------
    >>> in_cli_words(FrameMetricsError("rows repeat; pass ", Keyword("by", "model")))
    'rows repeat; pass --by model'
    >>> in_cli_words(InvalidOptionError("expected a number in (0, 1), got 2.0", option="head_share"))
    '--head-share: expected a number in (0, 1), got 2.0'
    >>> in_cli_words(MissingInputError("novelty", "train", "the train split"))
    'novelty: expected --train FILE (the train split)'
    """
    if not isinstance(exc, (FrameMetricsError, FrameMetricsWarning)):
        return str(exc)
    return _said(exc)


def _said(message: FrameMetricsError | FrameMetricsWarning) -> str:
    """A message of frame_metrics as this command line says it."""
    if isinstance(message, MissingInputError):
        # A frame is a file here: the option and its FILE, never "got None".
        needed = f"{flag(message.frame or '')} FILE"
        return f"{message.metric}: expected {needed} ({message.purpose})" + _words(message.advice)
    if message.option == "aggregate" and message.columns:
        # aggregate=False is --per-user, the only way this command line asks for it.
        return (
            f"--per-user: {', '.join(message.columns)}: corpus metrics have one value per by "
            "group, not per user; leave out --per-user"
        )
    option = message.option
    subject = "" if option is None else f"{flag(option) if option in _SUBJECTS else option}: "
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
            out.append(f"leave out {flag(part.name)}")
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
    option = flag(keyword.name)
    return option if keyword.value is None else f"{option} {shlex.quote(str(keyword.value))}"


#: evaluate's and compare's keywords whose option here is not ``--`` and the name.
_OWN_FLAGS = {
    "k": "-k",
    "metrics": "-m",
    "score": "--score-col",
    "user": "--user-col",
    "n_resamples": "--resamples",
    "sample": "--sample-col",
    "group": "--group-col",
    "reward": "--reward-col",
    "pscore": "--pscore-col",
    "probability": "--probability-col",
    "reward_model": "--reward-model-col",
    "time": "--time-col",
}


def flag(name: str) -> str:
    """The option of this command line that sets evaluate's or compare's keyword ``name``.

    Examples
    --------
    >>> flag("k"), flag("zero_ideal"), flag("item_features"), flag("baseline_model")
    ('-k', '--zero-ideal', '--item-features', '--baseline-model')
    """
    return _OWN_FLAGS.get(name, "--" + name.replace("_", "-"))


#: The keywords a message about one begins with, said as their option here: those whose
#: values this command line hands on as given (cutoffs, names, numbers, the --ties rule,
#: compare's statistics). A choice option's word is checked when parsed, so a message about
#: one comes from a metric string ("ap(ap_denominator=x)") and keeps the option's name.
_SUBJECTS = frozenset(
    {
        "time",
        "n",
        "test_share",
        "at",
        "n_folds",
        "window",
        "end",
        "min_train",
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
        "max_weight",
        "reward_model",
    }
)


def _column_hint(missing: Sequence[str], args: argparse.Namespace) -> str:
    """Name the options that set the missing columns.

    Examples
    --------
    >>> from frame_metrics.cli import build_parser
    >>> args = build_parser().parse_args(["evaluate", "recs.csv", "--user-col", "usr"])
    >>> _column_hint(["usr", "rank"], args)
    ' (set with --user-col, --rank-col or rank by a score with --score-col)'
    """
    if not isinstance(getattr(args, "recs", None), str):
        return ""
    # A command has some of these options (exposure has no --prediction-col).
    options = {
        "--user-col": getattr(args, "user_col", None) or [],
        "--item-col": [getattr(args, "item_col", None)],
        "--rank-col": [getattr(args, "rank_col", None)],
        "--score-col": [getattr(args, "score_col", None)],
        "--relevance-col": [getattr(args, "relevance_col", None)],
        "--prediction-col": [getattr(args, "prediction_col", None)],
        "--features-col": [getattr(args, "features_col", None)],
        "--group-col": [getattr(args, "group_col", None)],
        "--by": getattr(args, "by", None) or [],
        "--sample-col": [getattr(args, "sample_col", None)],
        "--reward-col": [getattr(args, "reward_col", None)],
        "--pscore-col": [getattr(args, "pscore_col", None)],
        "--probability-col": [getattr(args, "probability_col", None)],
        "--reward-model-col": [getattr(args, "reward_model_col", None)],
    }
    flags = [flag for flag, names in options.items() if (set(names) - {None}) & set(missing)]
    if "--rank-col" in flags and args.score_col is None:
        flags[flags.index("--rank-col")] = "--rank-col or rank by a score with --score-col"
    return f" (set with {', '.join(flags)})" if flags else ""


@contextlib.contextmanager
def warnings_as_lines() -> Iterator[None]:
    """Show each warning as one ``frame-metrics: warning: ...`` line, in this CLI's terms."""

    def show(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: TextIO | None = None,
        line: str | None = None,
    ) -> None:
        text = in_cli_words(message) if isinstance(message, Warning) else message
        print(f"{PROG}: warning: {' '.join(text.split())}", file=sys.stderr)

    with warnings.catch_warnings():
        warnings.showwarning = show
        yield


def silence_stdout() -> None:
    """Send stdout to the null device, once the reader is gone."""
    # Python flushes stdout at exit; with the reader gone that would raise again.
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
