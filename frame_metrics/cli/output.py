"""A result as text: ``table``, ``csv``, ``json`` or ``markdown``.

Numbers in ``table`` and ``markdown`` output are shown with 6 significant digits
(``--precision N``: N), in scientific notation when very small or large (``1.2e-70``);
``csv`` and ``json`` are exact.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

#: The output formats of ``--format``.
FORMATS = ("table", "csv", "json", "markdown")

#: Significant digits of the numbers in ``table`` and ``markdown`` output, by default.
DIGITS = 6

#: The most significant digits ``--precision`` asks for: a float has at most 17.
MAX_DIGITS = 17


def joined_or(items: Sequence[str]) -> str:
    """``a, b or c``.

    Examples
    --------
    >>> joined_or([".csv", ".json", ".md"])
    '.csv, .json or .md'
    """
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} or {items[-1]}"


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
