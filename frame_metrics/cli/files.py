"""Reading the input files lazily, and writing the result to a file or stdout."""

from __future__ import annotations

import argparse
import glob
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import polars as pl

from frame_metrics.cli.messages import DataError, UsageError, first_line
from frame_metrics.cli.output import joined_or, render
from frame_metrics.keywords import EXTRA_INPUTS

#: Input file extensions: parquet or delimited text (the separator), all read lazily.
_PARQUET = (".parquet", ".pq")
_SEPARATOR = {".csv": ",", ".tsv": "\t"}


#: ``-o FILE`` extensions and the format each gives when ``--format`` is not given; any
#: other extension is refused (it would hold text its readers cannot open).
FORMAT_OF_SUFFIX = {
    ".csv": "csv",
    ".json": "json",
    ".md": "markdown",
    ".markdown": "markdown",
    ".txt": "table",
}


def extra_files() -> dict[str, str]:
    """The extra input files: evaluate's keyword and the option naming the file.

    Read from the table on each call: a family registered from outside the package
    adds its own.

    Examples
    --------
    >>> extra_files()["item_features"]
    '--item-features'
    """
    return {e.name: e.flag for e in EXTRA_INPUTS}


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
        raise DataError(f"{name}: cannot read {path!r}: {first_line(exc)}") from exc
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


def read_inputs(args: argparse.Namespace) -> dict[str, pl.LazyFrame]:
    """Read RECS, TRUTH and the extra files given, keyed by ``fm.evaluate``'s names.

    With ``--ids-as-text`` every file's user and item columns are read as text. Without
    it, an id column read as text in one file and as numbers in another (ids all digits
    in one file only) is a :class:`DataError` that names ``--ids-as-text``.
    """
    labels = {"recs": "RECS", "truth": "TRUTH", **extra_files()}
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


def output_format(args: argparse.Namespace) -> str:
    """``--format``, else the one of the ``-o`` extension; an unknown extension is refused."""
    suffix = Path(args.output or "").suffix.lower()
    if args.output is not None and suffix not in FORMAT_OF_SUFFIX:
        raise UsageError(
            f"-o: expected a {joined_or(list(FORMAT_OF_SUFFIX))} file, got {args.output!r}"
            + (f" ({suffix} files are not supported)" if suffix else "")
        )
    fmt: str = args.format or FORMAT_OF_SUFFIX.get(suffix, "table")
    return fmt
