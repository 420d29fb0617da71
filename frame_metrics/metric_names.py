"""Metric strings: ``name(option=value, ...)@k``, taken apart; option values written out.

A metric named with options in parentheses (the style ir_measures made familiar) is
computed with those options replacing the call's for that metric alone, in the same
query as the rest, in a column of its own named by the string as written (spec
section 8). Parsing is bounded: a string longer than :data:`MAX_NAME_CHARS` is refused,
and values are read by hand (numbers, ``{level: gain}`` tables, words), never evaluated.
:func:`format_value` writes an option value plainly (the conventions' tables use it).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import polars as pl

from frame_metrics.errors import InvalidOptionError, shown
from frame_metrics.options import CHOICES, format_value

__all__ = ["ParsedName", "format_value", "parse_name", "split_column"]

_EXPECTED = "expected '<name>', '<name>@<k>' or '<name>(<option>=<value>, ...)@<k>'"


@dataclass(frozen=True)
class ParsedName:
    """A metric string taken apart: its name, its own options and its cutoff text."""

    raw: str
    name: str
    options: tuple[tuple[str, Any], ...]
    cut: str | None


def _split_top(text: str) -> list[str]:
    """``text`` split at commas outside brackets and braces."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += {"(": 1, "{": 1, "[": 1, ")": -1, "}": -1, "]": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


#: A number as Python writes one: sign, digits, an optional fraction and exponent.
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")

#: The longest metric string read: past it, a clear error rather than a slow or
#: exhausting parse (a gain table of thousands of levels goes in ``gain=``).
MAX_NAME_CHARS = 1000


def _number(text: str) -> int | float | None:
    """A decimal number as an int (no point, no exponent) or a float; None otherwise.

    No ``ast.literal_eval``: the text is matched whole, so its cost is bounded by its
    length and an int keeps every digit (the option's check decides what is too large).
    """
    if not _NUMBER.fullmatch(text):
        return None
    if any(ch in text for ch in ".eE"):
        return float(text)
    return int(text)


def _table(text: str, raw: str) -> dict[int | float, int | float]:
    """``{level: gain, ...}`` of numbers (a trailing comma allowed)."""
    refused = InvalidOptionError(
        f"{_EXPECTED}, got {raw!r}: {text!r} is not a {{level: gain}} table", option="metrics"
    )
    inner = text[1:-1].strip() if text.endswith("}") else None
    if inner is None or any(ch in inner for ch in "{}[]()"):
        raise refused
    parts = inner.split(",")
    if parts[-1].strip() == "" and len(parts) > 1:
        parts.pop()
    table: dict[int | float, int | float] = {}
    for part in parts if inner else []:
        level, colon, gain = part.partition(":")
        level_n, gain_n = _number(level.strip()), _number(gain.strip())
        if not colon or level_n is None or gain_n is None:
            raise refused
        table[level_n] = gain_n
    return table


def _value(text: str, raw: str, key: str) -> Any:
    """An option value: a number, a table, None, or a bare word (a string).

    A word that is one of the option's choices stays that word (``mrr_cutoff=none``).
    """
    text = text.strip()
    if text in CHOICES.get(key, ()):
        return text
    lowered = text.lower()
    if lowered in ("none", "null"):
        return None
    if text.startswith("{"):
        return _table(text, raw)
    number = _number(text)
    if number is not None:
        return number
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    if not text or not all(ch.isalnum() or ch in "_-." for ch in text):
        raise InvalidOptionError(
            f"{_EXPECTED}, got {raw!r}: cannot read the value {text!r}", option="metrics"
        )
    return text


def parse_name(raw: str, known_options: Mapping[str, object]) -> ParsedName:
    """Take ``name(option=value, ...)@k`` apart; ``known_options`` are the accepted names.

    Examples
    --------
    >>> parse_name("ap(ap_denominator=relevant)@10", {"ap_denominator": 1})
    ParsedName(raw='ap(ap_denominator=relevant)@10', name='ap', options=(('ap_denominator', 'relevant'),), cut='10')
    >>> parse_name("ndcg(gain={2: 3, 3: 7})", {"gain": 1}).options
    (('gain', {2: 3, 3: 7}),)
    >>> parse_name("ndcg(gian=binary)@5", {"gain": 1})
    Traceback (most recent call last):
    ...
    frame_metrics.errors.InvalidOptionError: metrics: expected options among gain in 'ndcg(gian=binary)@5', got 'gian' (did you mean 'gain'?)
    """
    if len(raw) > MAX_NAME_CHARS:
        raise InvalidOptionError(
            f"expected a metric string of at most {MAX_NAME_CHARS} characters (a "
            f"longer gain table goes in gain=), got {shown(raw)}",
            option="metrics",
        )
    text = raw.strip()
    options: list[tuple[str, Any]] = []
    if "(" in text:
        head, _, rest = text.partition("(")
        inner, close, tail = rest.rpartition(")")
        tail = tail.strip()
        if not close or (tail and not tail.startswith("@")):
            raise InvalidOptionError(f"{_EXPECTED}, got {raw!r}", option="metrics")
        seen: set[str] = set()
        for part in _split_top(inner):
            if not part.strip():
                continue
            key, eq, value = part.partition("=")
            key = key.strip()
            if not eq:
                raise InvalidOptionError(
                    f"{_EXPECTED}, got {raw!r}: {part.strip()!r} has no '='", option="metrics"
                )
            if not key:
                raise InvalidOptionError(
                    f"{_EXPECTED}, got {raw!r}: {part.strip()!r} names no option",
                    option="metrics",
                )
            if key not in known_options:
                hint = difflib.get_close_matches(key, list(known_options), n=1, cutoff=0.6)
                suffix = f" (did you mean {hint[0]!r}?)" if hint else ""
                raise InvalidOptionError(
                    f"expected options among {', '.join(sorted(known_options))} "
                    f"in {raw!r}, got {key!r}{suffix}",
                    option="metrics",
                )
            if key in seen:
                raise InvalidOptionError(
                    f"expected each option once in {raw!r}, got {key!r} twice", option="metrics"
                )
            seen.add(key)
            options.append((key, _value(value, raw, key)))
        text = head + tail
    name, sep, cut = text.partition("@")
    return ParsedName(raw, name.strip(), tuple(options), cut.strip() if sep else None)


def split_column(column: str) -> tuple[str, int | None]:
    """A metric column of a result as ``(metric, k)``, split at its last ``"@"``.

    The name keeps its options, so that two columns of one metric with different
    options stay apart; a column without ``@<k>`` (``"rmse"``, trec_eval's ``"P_10"``)
    has no k. ``fm.compare`` and ``fm.gaps`` read result columns with it.

    Examples
    --------
    >>> split_column("ndcg@10"), split_column("ndcg(gain=binary)@10"), split_column("rmse")
    (('ndcg', 10), ('ndcg(gain=binary)', 10), ('rmse', None))
    """
    name, sep, k = column.rpartition("@")
    return (name, int(k)) if sep and k.isdigit() else (column, None)


def join_column(metric: str, k: int | None) -> str:
    """The result column of ``metric`` at ``k``: the inverse of :func:`split_column`.

    Examples
    --------
    >>> join_column("ndcg", 10), join_column("rmse", None)
    ('ndcg@10', 'rmse')
    """
    return metric if k is None else f"{metric}@{k}"


def joined_column(metric: str = "metric", k: str = "k") -> pl.Expr:
    """:func:`join_column` over the ``metric`` and ``k`` columns of a comparison frame."""
    return (
        pl.when(pl.col(k).is_null())
        .then(pl.col(metric))
        .otherwise(pl.format("{}@{}", pl.col(metric), pl.col(k)))
    )
