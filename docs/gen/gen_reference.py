"""Reference pages generated at build time: the CLI, the bad-input table, the benchmarks.

- :func:`cli_page`: every command and option of ``frame-metrics``, from the argparse parser
  (``frame_metrics.cli.build_parser``), plus each command's ``--help``.
- :func:`errors_page`: the error classes of ``frame_metrics.errors`` and the bad-input table
  of ``tests/test_errors.py`` (``CASES``), each case run here, so the message shown is the
  one a user gets (the build fails when it differs from the table's).
- :func:`performance_page`: ``bench/README.md`` (tables and how to reproduce them).
- :func:`readme_quickstart`: the Quickstart commands of ``README.md``.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import html
import inspect
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import polars as pl
from griffe_sphinx_roles import without_roles

__all__ = ["cli_page", "errors_page", "performance_page", "readme_quickstart"]

ROOT = Path(__file__).resolve().parents[2]


def _cell(text: str) -> str:
    """Text for a table cell: outside code spans, pipes and HTML escaped."""
    parts = text.replace("\n", " ").strip().split("`")
    return "`".join(
        p if i % 2 else html.escape(p, quote=False).replace("|", "\\|") for i, p in enumerate(parts)
    )


@contextlib.contextmanager
def _columns(width: int) -> Iterator[None]:
    """Set $COLUMNS, which argparse wraps help to: a fixed width, whatever the terminal."""
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(width)
    try:
        yield
    finally:
        if old is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = old


# -- CLI ----------------------------------------------------------------------------------


def _help(action: argparse.Action, prog: str) -> str:
    """An action's help with ``%(default)s`` and friends filled in, as argparse does."""
    if not action.help or action.help == argparse.SUPPRESS:
        return ""
    params: dict[str, Any] = dict(vars(action), prog=prog)
    for name in list(params):
        if params[name] is argparse.SUPPRESS:
            del params[name]
    if params.get("choices") is not None:
        params["choices"] = ", ".join(str(c) for c in params["choices"])
    return str(action.help) % params


def _value(action: argparse.Action) -> str:
    if action.nargs == 0 or isinstance(action, argparse.BooleanOptionalAction):
        return "—"
    if action.choices is not None and not isinstance(action, argparse._SubParsersAction):
        return " \\| ".join(f"`{c}`" for c in action.choices)
    if not action.option_strings:  # a positional argument: its name is the value
        return "optional" if action.nargs == "?" else "required"
    metavar = action.metavar if isinstance(action.metavar, str) else action.dest.upper()
    return f"`{metavar}`"


def _default(action: argparse.Action) -> str:
    default = action.default
    if default in (None, argparse.SUPPRESS, False) or action.nargs == 0:
        return ""
    if isinstance(default, list):
        default = ",".join(str(d) for d in default)
    return f"`{default}`"


def _names(action: argparse.Action) -> str:
    if not action.option_strings:
        return f"`{action.metavar or action.dest}`"
    return ", ".join(f"`{o}`" for o in action.option_strings)


def _parser_sections(parser: argparse.ArgumentParser, level: str) -> Iterator[str]:
    """Every argument group of ``parser`` as a table."""
    for group in parser._action_groups:
        actions = [
            a
            for a in group._group_actions
            if a.help != argparse.SUPPRESS and not isinstance(a, argparse._SubParsersAction)
        ]
        if not actions:
            continue
        title = str(group.title)
        if level == "##":  # the command's own options, before any subcommand
            title = "global " + title
        yield f"{level} {title[:1].upper()}{title[1:]}"
        yield ""
        if group.description:
            yield group.description
            yield ""
        yield "| option | value | default | what it does |"
        yield "|---|---|---|---|"
        for action in actions:
            yield (
                f"| {_names(action)} | {_value(action)} | {_default(action)} "
                f"| {_cell(_help(action, parser.prog))} |"
            )
        yield ""


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, str, argparse.ArgumentParser]]:
    out = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            for name, sub in action.choices.items():
                out.append((name, helps.get(name, ""), sub))
    return out


def cli_page() -> str:
    """The command-line reference, from the parser the ``frame-metrics`` command runs."""
    from frame_metrics.cli import EXIT_DATA, EXIT_USAGE, build_parser

    with _columns(100):
        parser = build_parser()
        commands = _subcommands(parser)
        lines = [
            "# Command line",
            "",
            "`pip install frame_metrics` installs the `frame-metrics` command (also "
            "`python -m frame_metrics`). This page is generated from its argparse parser when "
            "the site is built, so it lists every command and every option.",
            "",
            "```text",
            parser.format_usage().strip(),
            "```",
            "",
            parser.description or "",
            "",
            "| command | what it does |",
            "|---|---|",
            *(f"| [`{name}`](#{name}) | {_cell(text)} |" for name, text, _ in commands),
            "",
            f"Every failure is one line on stderr, `frame-metrics: error: ...`, with exit "
            f"status {EXIT_USAGE} for a usage error (path, file type, option, metric, cutoff, "
            f"column name, a missing optional dependency) or {EXIT_DATA} for a data error "
            "(values the metrics cannot use, a file polars cannot read).",
            "",
            *_parser_sections(parser, "##"),
        ]
        for name, text, sub in commands:
            lines += [
                f"## `frame-metrics {name}` {{#{name}}}",
                "",
                _cell(text[:1].upper() + text[1:]) + ".",
                "",
                "```text",
                sub.format_usage().strip(),
                "```",
                "",
            ]
            if sub.description:
                lines += [sub.description, ""]
            lines += list(_parser_sections(sub, "###"))
            if sub.epilog:
                lines += ["```text", sub.epilog.rstrip(), "```", ""]
            lines += [
                f'??? note "`frame-metrics {name} --help`, as printed"',
                "",
                "    ```text",
                *(
                    "    " + line if line else ""
                    for line in sub.format_help().rstrip().splitlines()
                ),
                "    ```",
                "",
            ]
    return "\n".join(lines) + "\n"


# -- errors ---------------------------------------------------------------------------------

_KEPT = {"RECS", "TRUTH", "same", "CASES"}


Shown = tuple[str, str, str, str, str, str]


def _load_cases(path: Path) -> tuple[str, list[Shown], dict[str, Any]]:
    """The bad-input table of tests/test_errors.py: shown source and the live cases.

    Only the frames (``RECS``, ``TRUTH``), ``same`` and ``CASES`` are executed (not the
    test module, which needs pytest and the fixtures).
    """
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source)
    body: list[ast.stmt] = []
    frames: list[str] = []
    shown: list[Shown] = []
    for node in tree.body:
        errors_import = isinstance(node, ast.ImportFrom) and node.module == "frame_metrics.errors"
        frames_import = isinstance(node, ast.Import) and all(
            a.name in ("polars", "frame_metrics") for a in node.names
        )
        if errors_import or frames_import:
            body.append(node)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            target = node.targets[0] if isinstance(node, ast.Assign) else node.target
            if not isinstance(target, ast.Name) or target.id not in _KEPT:
                continue
            assert node.value is not None
            body.append(ast.copy_location(ast.Assign(targets=[target], value=node.value), node))
            if target.id in ("RECS", "TRUTH"):
                frames.append(ast.get_source_segment(source, node) or "")
            if target.id == "CASES":
                assert isinstance(node.value, ast.List)
                for case in node.value.elts:
                    assert isinstance(case, ast.Tuple)
                    parts = [ast.get_source_segment(source, e) or "" for e in case.elts]
                    name = ast.literal_eval(case.elts[0])
                    message = ast.literal_eval(case.elts[5])
                    recs, truth = ("" if p == "same" else p for p in parts[1:3])
                    shown.append((name, recs, truth, parts[3], parts[4], message))
    module = ast.Module(body=body, type_ignores=[])
    ast.fix_missing_locations(module)
    namespace: dict[str, Any] = {}
    exec(compile(module, str(path), "exec"), namespace)
    return "\n".join(frames), shown, namespace


def _inline(text: str) -> str:
    """``text`` as inline code, whatever backticks it holds."""
    fence = "``" if "`" in text else "`"
    return _cell(f"{fence} {text} {fence}" if fence == "``" else f"`{text}`")


def _code(text: str) -> str:
    """Inline code for a table cell (a lambda's body, or a dict).

    As HTML, with a break opportunity (``<wbr>``, not copied with the text) after each
    opening bracket, comma and ``=``: an expression longer than the column breaks there,
    never inside a name.
    """
    text = re.sub(r"\s+", " ", text).strip()
    text = re.sub(r"^lambda \w+: ", "", text)
    if not text:
        return "—"
    escaped = html.escape(text).replace("|", "&#124;")
    return "<code>" + re.sub(r"([(\[,=])", r"\1<wbr>", escaped) + "</code>"


def errors_page() -> str:
    """The errors reference: classes, then every bad input with its exact message."""
    import frame_metrics as fm
    from frame_metrics import errors

    frames, shown, namespace = _load_cases(ROOT / "tests" / "test_errors.py")
    base_recs: pl.DataFrame = namespace["RECS"]
    base_truth: pl.DataFrame = namespace["TRUTH"]
    lines = [
        "# Errors",
        "",
        without_roles(inspect.cleandoc(errors.__doc__ or "")),
        "",
        "Checks run before any result is returned; for a LazyFrame they run as one "
        "aggregate pass when `evaluate` is called, and the metrics run when you collect. "
        "`validate=False` skips the value checks when you vouch for the input.",
        "",
        "## The error classes",
        "",
        "| class | is a | raised when |",
        "|---|---|---|",
    ]
    classes = [getattr(errors, name) for name in errors.__all__]
    # Keyword (a part of a message), shown (how messages show values) are not classes.
    raised = [c for c in classes if isinstance(c, type) and issubclass(c, BaseException)]
    warned = [c for c in raised if issubclass(c, Warning)]
    for cls in raised:
        if cls in warned:
            continue
        bases = ", ".join(f"`{b.__name__}`" for b in cls.__bases__)
        doc = without_roles(inspect.cleandoc(cls.__doc__ or "").split("\n\n")[0])
        lines.append(f"| `{cls.__name__}` | {bases} | {_cell(doc)} |")
    lines += [
        "",
        "## Warnings",
        "",
        "A call that computes something its caller most likely did not mean says so, once, "
        "with a warning of one of these classes (each a `FrameMetricsWarning`, itself a "
        "`UserWarning`); doing what the message proposes silences it. "
        "`warnings.simplefilter('error', fm.FrameMetricsWarning)` makes every one an error.",
        "",
        "| class | issued when, and what silences it |",
        "|---|---|",
    ]
    for cls in warned:
        doc = without_roles(" ".join(inspect.cleandoc(cls.__doc__ or "").split()))
        lines.append(f"| `{cls.__name__}` | {_cell(doc)} |")
    lines += [
        "",
        "On the command line each is one line, `frame-metrics: error: <message>`: see "
        "[Command line](cli.md).",
        "",
        "## Bad input and the message it gets",
        "",
        "Generated from the table of `tests/test_errors.py` (which checks each message on "
        "every frame kind: polars, LazyFrame, pandas with numpy and pyarrow dtypes, Arrow, "
        "DuckDB). Each case changes these frames, then calls "
        "`fm.evaluate(recs, truth, k=2, **call)`; the message below is what that call "
        "raised when this site was built.",
        "",
        "```python",
        frames,
        "```",
        "",
        # The messages are long and their words long: they may break anywhere (the
        # fm-messages class), so that the table fits the column without scrolling.
        '<div class="fm-messages" markdown>',
        "",
        "| case, error and what is wrong | message |",
        "|---|---|",
    ]
    for (name, recs, truth, call, error, message), case in zip(
        shown, namespace["CASES"], strict=True
    ):
        change_recs: Callable[[pl.DataFrame], pl.DataFrame] = case[1]
        change_truth: Callable[[pl.DataFrame], pl.DataFrame] = case[2]
        try:
            fm.evaluate(change_recs(base_recs), change_truth(base_truth), **{"k": 2, **case[3]})
        except errors.FrameMetricsError as exc:
            got, got_class = str(exc), type(exc)
        else:
            raise RuntimeError(f"docs: bad-input case {name!r} raised nothing")
        if got != message or got_class is not case[4]:
            raise RuntimeError(
                f"docs: bad-input case {name!r} raised {got_class.__name__}: {got!r}; "
                f"tests/test_errors.py expects {case[4].__name__}: {message!r}"
            )
        wrong = [
            f"{label}: {_code(code)}"
            for label, code in (("recs", recs), ("truth", truth), ("call", call))
            if code and code != "{}"
        ]
        lines.append(f"| `{name}`<br>{error}<br>{'<br>'.join(wrong)} | {_inline(got)} |")
    lines += ["", "</div>", ""]
    return "\n".join(lines) + "\n"


# -- performance ------------------------------------------------------------------------------


def _demoted(markdown: str) -> str:
    """Markdown with every heading one level lower (outside code fences)."""
    out, fenced = [], False
    for line in markdown.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        heading = not fenced and re.match(r"#{1,5} ", line)
        out.append("#" + line if heading else line)
    return "\n".join(out)


def performance_page() -> str:
    """bench/README.md under a page title, its headings one level down."""
    bench = (ROOT / "bench" / "README.md").read_text(encoding="utf-8")
    lines = [
        "# Performance",
        "",
        "How fast `frame_metrics` is against a hand-written polars query and its peers "
        "(pytrec_eval, RecTools, ranx, Recommenders), how far it scales (1B and 2B rows "
        "from parquet, Spark and Dask) and what `fm.compare` costs. The benchmarks live "
        "in `bench/`; this page is `bench/README.md` as the site was built, so the tables "
        "are the ones committed with the code that produced them.",
        "",
        '**Reproduce** from a clone, after `python3 -m pip install -e ".[dev]"` (the '
        "peers: see *Peers: what to install* below):",
        "",
        "```bash",
        "python bench/ranking.py --users 100000,1000000 --markdown   # speed, memory, shapes",
        "python bench/compare.py                                     # fm.compare vs scipy",
        "python bench/scale.py --users 1000000,10000000 --timeout 400   # 100M-1B rows",
        "python bench/distributed.py --users 1000000 --data-dir /tmp/fmdist --partitions 16",
        "python bench/split.py --users 100000 --peer-venvs DIR        # fm.split vs peers, 10M rows",
        "python -m pytest bench -q                                   # the benchmark's own tests",
        "```",
        "",
        "Timings depend on the machine: the tables below were measured on 2 cores and "
        "24 GB, as each section says.",
        "",
        _demoted(bench).strip(),
        "",
    ]
    return "\n".join(lines)


# -- README ------------------------------------------------------------------------------------


def readme_quickstart() -> str:
    """The fenced bash block of README.md's Quickstart section, as it is."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Quickstart\n", 1)[1].split("\n## ", 1)[0]
    match = re.search(r"^```bash\n.*?^```$", section, re.S | re.M)
    if match is None:
        raise RuntimeError("docs: README.md's Quickstart has no ```bash block")
    return match.group(0)
