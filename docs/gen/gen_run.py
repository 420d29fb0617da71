"""Runnable examples: code blocks the site build executes, shown with what they print.

A fenced block opened with ```` ```python exec ```` is run when the site is built, in one
namespace per page (so later blocks see the frames of earlier ones), and replaced by the
code and, below it, its printed output. ```` ```python exec figures ```` also embeds every
matplotlib figure the block left open, as a PNG. An exception fails the build, so every
example on the site runs with the code as it is.
"""

from __future__ import annotations

import base64
import contextlib
import io
import re
import traceback
from typing import Any

import polars as pl

__all__ = ["run_blocks"]

_BLOCK = re.compile(
    r"^```python exec(?P<figures> figures)?[ \t]*\n(?P<code>.*?)^```[ \t]*$", re.M | re.S
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


def run_blocks(markdown: str, where: str) -> str:
    """``markdown`` with every ``python exec`` block run and replaced by code + output."""
    namespace: dict[str, Any] = {"__name__": "__docs__"}

    def replace(match: re.Match[str]) -> str:
        code = match.group("code")
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
        parts = [f"```python\n{code}```\n"]
        output = printed.getvalue()
        if output.strip():
            # A printed table keeps its lines whole (docs/stylesheets/extra.css wraps the
            # other code blocks): wrapped, its columns would no longer line up.
            kind = ".text .fm-table" if _TABLE.search(output) else ".text"
            parts.append(f'\n```{{{kind} title="Output"}}\n{output.rstrip()}\n```\n')
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
