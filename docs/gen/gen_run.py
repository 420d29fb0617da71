"""Runnable examples: code blocks the site build executes, shown with what they print.

A fenced block opened with ```` ```python exec ```` is run when the site is built, in one
namespace per page (so later blocks see the frames of earlier ones), and replaced by the
code and, below it, its printed output. ```` ```python exec figures ```` also embeds every
matplotlib figure the block left open, as a PNG. An exception fails the build, so every
example on the site runs with the code as it is.

A page on data the repository does not hold (MovieLens, whose licence keeps it out) has
```` ```python recorded ```` blocks instead: run by :func:`record_page` (``python
docs/gen/gen_run.py docs/protocol.md``) in a folder where the data is, and committed with
their output below them; the build shows them as committed (:func:`show_recorded`), and
tests/test_protocol_page.py reruns them and compares, skipping without the data.
"""

from __future__ import annotations

import base64
import contextlib
import io
import os
import re
import sys
import tempfile
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl

__all__ = ["find_movielens", "record", "record_page", "run_blocks", "show_recorded"]

_BLOCK = re.compile(
    r"^```python exec(?P<figures> figures)?[ \t]*\n(?P<code>.*?)^```[ \t]*$", re.M | re.S
)


#: A recorded block and the output block committed below it (if it printed anything).
_RECORDED = re.compile(
    r"^```python recorded[ \t]*\n(?P<code>.*?)^```[ \t]*\n"
    r"(?:\n```\{\.text[^}\n]*title=\"Output\"\}\n.*?^```[ \t]*\n)?",
    re.M | re.S,
)

#: A line of a table polars prints: its box-drawing frame.
_TABLE = re.compile(r"^[┌╞│].*[┐╡│]$", re.M)


class ExampleError(RuntimeError):
    """A documentation example raised: the build stops with the code and the traceback."""


def _figures() -> list[bytes]:
    """Every open matplotlib figure as PNG bytes, then closed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    images = []
    for number in plt.get_fignums():
        fig = plt.figure(number)
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=80, bbox_inches="tight")
        images.append(buffer.getvalue())
    plt.close("all")
    return images


def _run(code: str, namespace: dict[str, Any], where: str) -> str:
    """Run one example in ``namespace``: what it printed."""
    printed = io.StringIO()
    try:
        with (
            contextlib.redirect_stdout(printed),
            pl.Config(tbl_rows=30, tbl_cols=-1, tbl_width_chars=160, fmt_str_lengths=60),
        ):
            exec(compile(code, f"<example in {where}>", "exec"), namespace)
    except Exception as exc:
        raise ExampleError(
            f"docs example in {where} failed:\n{code}\n{traceback.format_exc()}"
        ) from exc
    return printed.getvalue()


def _output_block(output: str) -> str:
    """The output block shown below an example ("" when it printed nothing)."""
    if not output.strip():
        return ""
    # A printed table keeps its lines whole (docs/stylesheets/extra.css wraps the other
    # code blocks): wrapped, its columns would no longer line up.
    kind = ".text .fm-table" if _TABLE.search(output) else ".text"
    return f'\n```{{{kind} title="Output"}}\n{output.rstrip()}\n```\n'


def run_blocks(markdown: str, where: str) -> str:
    """``markdown`` with every ``python exec`` block run and replaced by code + output."""
    namespace: dict[str, Any] = {"__name__": "__docs__"}

    def replace(match: re.Match[str]) -> str:
        code = match.group("code")
        output = _run(code, namespace, where)
        parts = [f"```python\n{code}```\n", _output_block(output)]
        if match.group("figures"):
            for i, png in enumerate(_figures(), start=1):
                data = base64.b64encode(png).decode("ascii")
                parts.append(
                    f'\n<figure class="fm-plot" markdown>\n'
                    f'<img alt="figure {i} of the example" src="data:image/png;base64,{data}">\n'
                    f"</figure>\n"
                )
        return "".join(parts)

    if "```python exec" not in markdown:
        return markdown
    namespace_out = _BLOCK.sub(replace, markdown)
    if match := re.search(r"^```python exec", namespace_out, re.M):
        raise ExampleError(
            f"{where}: an unclosed or malformed 'python exec' block at {match.start()}"
        )
    return namespace_out


def record(markdown: str, where: str, namespace: dict[str, Any] | None = None) -> str:
    """``markdown`` with its ``python recorded`` blocks run and their outputs made anew.

    The blocks run in order, in one namespace (``namespace``, to look at what they made
    afterwards), in the working directory.
    """
    if namespace is None:
        namespace = {}
    namespace.setdefault("__name__", "__docs__")

    def replace(match: re.Match[str]) -> str:
        code = match.group("code")
        return f"```python recorded\n{code}```\n" + _output_block(_run(code, namespace, where))

    return _RECORDED.sub(replace, markdown)


def show_recorded(markdown: str) -> str:
    """The page as the site shows it: recorded blocks as plain Python.

    Their committed outputs stay below them; nothing runs at build time.
    """
    return re.sub(r"^```python recorded[ \t]*$", "```python", markdown, flags=re.M)


def find_movielens(start: Path) -> Path | None:
    """MovieLens ml-latest-small's folder as the notebooks find it, or None.

    ``$MOVIELENS_DIR``, else the first ``shared/data/movielens/ml-latest-small`` in
    ``start`` or a parent folder.
    """
    if "MOVIELENS_DIR" in os.environ:
        candidates = [Path(os.environ["MOVIELENS_DIR"])]
    else:
        here = start.resolve()
        candidates = [
            p / "shared" / "data" / "movielens" / "ml-latest-small" for p in (here, *here.parents)
        ]
    for folder in candidates:
        if (folder / "ratings.csv").is_file() and (folder / "movies.csv").is_file():
            return folder
    return None


@contextlib.contextmanager
def _beside(data: Path) -> Iterator[Path]:
    """A fresh working directory holding ``ml-latest-small``, a link to ``data``.

    As a reader's folder after unzipping GroupLens' file; files the page writes go there.
    """
    previous = Path.cwd()
    with tempfile.TemporaryDirectory(prefix="fm-docs-") as folder:
        (Path(folder) / "ml-latest-small").symlink_to(data.resolve(), target_is_directory=True)
        os.chdir(folder)
        try:
            yield Path(folder)
        finally:
            os.chdir(previous)


def record_page(page: Path, data: Path, namespace: dict[str, Any] | None = None) -> str:
    """The page's text with its recorded blocks run on the MovieLens folder ``data``."""
    with _beside(data):
        return record(page.read_text(encoding="utf-8"), page.name, namespace)


def main(argv: list[str]) -> int:
    """``python docs/gen/gen_run.py PAGE...``: record each page's blocks, in place."""
    if not argv:
        print("usage: python docs/gen/gen_run.py docs/PAGE.md ...", file=sys.stderr)
        return 2
    data = find_movielens(Path(__file__).parent)
    if data is None:
        print(
            "MovieLens ml-latest-small not found ($MOVIELENS_DIR, or "
            "shared/data/movielens/ml-latest-small here or in a parent folder)",
            file=sys.stderr,
        )
        return 1
    for name in argv:
        page = Path(name).resolve()
        page.write_text(record_page(page, data), encoding="utf-8")
        print(f"recorded {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
