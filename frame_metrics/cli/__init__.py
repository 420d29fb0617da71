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
A failed gate (``--fail-under``, ``--max-drop`` on ``evaluate`` and ``compare``) is exit
status 3, with one ``frame-metrics: gate failed: ...`` line per (gate, model), after the
result is written as usual.

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

import importlib
import sys
from collections.abc import Sequence

import polars as pl

from frame_metrics.cli.commands import NEEDS, RUNS, demo
from frame_metrics.cli.messages import (
    EXIT_DATA,
    EXIT_USAGE,
    EXTRA_OF_MODULE,
    is_broken_pipe,
    missing_dependency,
    report_error,
    silence_stdout,
    warnings_as_lines,
)
from frame_metrics.cli.output import DIGITS, FORMATS, render
from frame_metrics.cli.parser import build_parser

#: The names tests/test_cli.py has always imported from here.
_EXTRA_OF_MODULE = EXTRA_OF_MODULE
_missing_dependency = missing_dependency

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
    with warnings_as_lines():
        try:
            for module in NEEDS.get(namespace.command, ()):  # before reading any input
                importlib.import_module(module)
            return RUNS[namespace.command](namespace)
        except (Exception, KeyboardInterrupt, pl.exceptions.PanicException) as exc:
            if is_broken_pipe(exc):  # the reader left early (`| head`): not an error
                silence_stdout()
                return 0
            return report_error(exc, namespace)
