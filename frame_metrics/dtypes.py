"""Input dtypes made fit for the engine at the edge, before any query is built.

Two rules, applied to every frame of a call (recs, truth, train, catalog, features,
baseline) at once, so that no later join or comparison casts anything:

- **Join keys are compared without loss.** Every frame that carries a key column (the
  user key, item and ``by`` columns) gets the one dtype that holds every value of all
  their dtypes exactly: Int32 and Int64 meet at Int64, Int64 and UInt64 at Int128, us
  and ns datetimes at ns, strings and categoricals at String. Keys with no such dtype
  (strings against integers, say) are an error naming both frames and dtypes; a float
  key is never the common dtype (Float64 merges 2**53 and 2**53 + 1).
- A float key against an integer key (pandas' float64 for an integer id column that
  held a missing value) is matched as integers, and a check refuses fractional ids.
- **An empty (Null-dtype) column takes the dtype its role needs.** A frame built from
  empty lists, or an empty pandas frame, has columns of dtype Null: they hold no value,
  so they can be read as any dtype, and empty input gives the empty result the spec
  promises instead of a dtype error.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import polars as pl
from polars._typing import TimeUnit

from frame_metrics.errors import InvalidValueError
from frame_metrics.validation import Check, row_check

__all__ = ["FloatKey", "common_key_dtype", "type_null_columns", "unify_keys", "whole_number_check"]

_STRINGY = (pl.String, pl.Categorical, pl.Enum)

#: Time units, coarsest first: a finer unit holds every value of a coarser one.
_TIME_UNITS = ("ms", "us", "ns")


def _integer_bits(dtype: pl.DataType) -> tuple[bool, int]:
    """(signed, bits) of an integer dtype."""
    signed = dtype.is_signed_integer()
    bits = {
        pl.Int8: 8,
        pl.Int16: 16,
        pl.Int32: 32,
        pl.Int64: 64,
        pl.Int128: 128,
        pl.UInt8: 8,
        pl.UInt16: 16,
        pl.UInt32: 32,
        pl.UInt64: 64,
    }
    for kind, n in bits.items():
        if isinstance(dtype, kind):
            return signed, n
    return signed, 128  # UInt128 and wider: no signed dtype holds them (checked below)


def _common_integer(a: pl.DataType, b: pl.DataType) -> pl.DataType | None:
    (sa, na), (sb, nb) = _integer_bits(a), _integer_bits(b)
    if sa == sb:
        return a if na >= nb else b
    # One signed, one unsigned: the signed dtype must be wider than the unsigned one.
    unsigned_bits = nb if sa else na
    for bits, dtype in ((16, pl.Int16()), (32, pl.Int32()), (64, pl.Int64()), (128, pl.Int128())):
        if bits > unsigned_bits and bits >= (na if sa else nb):
            return dtype
    return None


def _common_numeric(a: pl.DataType, b: pl.DataType) -> pl.DataType | None:
    if a.is_integer() and b.is_integer():
        return _common_integer(a, b)
    if a.is_float() and b.is_float():  # Float32 values are all Float64 values
        return pl.Float64()
    return None


def _common_string(a: pl.DataType, b: pl.DataType) -> pl.DataType | None:
    return pl.String() if isinstance(a, _STRINGY) and isinstance(b, _STRINGY) else None


def _finer_unit(a: pl.Datetime | pl.Duration, b: pl.Datetime | pl.Duration) -> TimeUnit:
    return max(a.time_unit or "us", b.time_unit or "us", key=_TIME_UNITS.index)


def _common_datetime(a: pl.Datetime, b: pl.Datetime) -> pl.DataType | None:
    # A wall-clock time is not an instant: naive against zoned has no common dtype.
    if (a.time_zone is None) != (b.time_zone is None):
        return None
    return pl.Datetime(_finer_unit(a, b), a.time_zone)


def _common_temporal(a: pl.DataType, b: pl.DataType) -> pl.DataType | None:
    if isinstance(a, pl.Datetime) and isinstance(b, pl.Datetime):
        return _common_datetime(a, b)
    if isinstance(a, pl.Duration) and isinstance(b, pl.Duration):
        return pl.Duration(_finer_unit(a, b))
    return None


#: How two different dtypes of one key meet, tried in order; None: they do not.
_RULES = (_common_numeric, _common_string, _common_temporal)


def common_key_dtype(a: pl.DataType, b: pl.DataType) -> pl.DataType | None:
    """The dtype that holds every value of ``a`` and of ``b`` exactly, or None.

    Examples
    --------
    >>> common_key_dtype(pl.Int32(), pl.Int64())
    Int64
    >>> common_key_dtype(pl.Int64(), pl.UInt64())
    Int128
    >>> common_key_dtype(pl.Int64(), pl.Float64()) is None  # 2**53 + 1 has no Float64
    True
    >>> common_key_dtype(pl.Datetime("us", "UTC"), pl.Datetime("ns", "UTC"))
    Datetime(time_unit='ns', time_zone='UTC')
    """
    if a == b or isinstance(b, pl.Null):
        return a
    if isinstance(a, pl.Null):
        return b
    return next((c for rule in _RULES if (c := rule(a, b)) is not None), None)


def _cast(name: str, found: pl.DataType, target: pl.DataType) -> pl.Expr:
    col = pl.col(name)
    if isinstance(found, pl.Datetime) and isinstance(target, pl.Datetime):
        if found.time_zone != target.time_zone:
            # The same instants, shown in the first frame's zone.
            col = col.dt.convert_time_zone(target.time_zone or "UTC")
        return col.dt.cast_time_unit(target.time_unit or "us")
    # Non-strict: a float id that is not a whole number in range becomes null here and
    # is refused by its check, which runs in the same batch as (and wins over) the query.
    return col.cast(target, strict=False)


def _integral_key_dtype(a: pl.DataType, b: pl.DataType) -> pl.DataType | None:
    """A float key against an integer key: the integers, when the floats are whole.

    pandas stores an integer id column that held a missing value as float64. Its whole
    values are exact integers, so they are matched as integers (a check then refuses a
    fractional or out-of-range id; NaN becomes null and the null check names it).
    """
    if a.is_float() and b.is_integer():
        a, b = b, a
    if a.is_integer() and b.is_float():
        return common_key_dtype(a, pl.Int64())
    return None


@dataclass(frozen=True)
class FloatKey:
    """A float key column read as integers: the frame (as given) to check it on."""

    label: str
    frame: pl.LazyFrame
    column: str
    target: pl.DataType


def unify_keys(
    frames: Mapping[str, pl.LazyFrame], keys: Sequence[str]
) -> tuple[dict[str, pl.LazyFrame], list[FloatKey]]:
    """Cast each key column, in every frame that has it, to its common lossless dtype.

    ``frames`` maps a label (used in messages) to a frame; the first frame's dtype is
    the reference in messages. Raises :class:`InvalidValueError` when two frames' dtypes
    of one key have no common dtype. Also returns the float key columns read as
    integers, whose values must be checked to be whole (see :func:`whole_number_check`).
    """
    schemas = {label: frame.collect_schema() for label, frame in frames.items()}
    targets: dict[str, pl.DataType] = {}
    for key in keys:
        holders = [(label, s[key]) for label, s in schemas.items() if key in s]
        if not holders:
            continue
        first_label, target = holders[0]
        for label, dtype in holders[1:]:
            common = common_key_dtype(target, dtype) or _integral_key_dtype(target, dtype)
            if common is None:
                raise InvalidValueError(
                    f"{first_label} and {label}: expected key column {key!r} to have dtypes "
                    f"whose values can be matched exactly, found {target} in {first_label} and "
                    f"{dtype} in {label}{_key_hint(target, dtype)}",
                    columns=[key],
                )
            target = common
        targets[key] = target
    out: dict[str, pl.LazyFrame] = {}
    floats: list[FloatKey] = []
    for label, frame in frames.items():
        schema = schemas[label]
        casts = []
        for key, target in targets.items():
            if key not in schema or schema[key] == target:
                continue
            if schema[key].is_float() and target.is_integer():
                floats.append(FloatKey(label, frame, key, target))
            casts.append(_cast(key, schema[key], target))
        out[label] = frame.with_columns(casts) if casts else frame
    return out, floats


def _key_hint(a: pl.DataType, b: pl.DataType) -> str:
    if a.is_float() or b.is_float():
        return (
            " (a float id cannot be matched exactly to an integer id: 2**53 and 2**53 + 1 are "
            "one Float64; cast the float column to an integer dtype first)"
        )
    if a.is_integer() and b.is_integer():
        return " (no integer dtype holds both)"
    return ""


def type_null_columns(frame: pl.LazyFrame, dtypes: Mapping[str, pl.DataType]) -> pl.LazyFrame:
    """Give columns of dtype Null (no values at all) the dtype their role reads."""
    schema = frame.collect_schema()
    casts = [
        pl.col(name).cast(dtype)
        for name, dtype in dtypes.items()
        if name in schema and isinstance(schema[name], pl.Null)
    ]
    return frame.with_columns(casts) if casts else frame


def whole_number_check(key: FloatKey) -> Check:
    """A float id read as an integer must be a whole number the integer dtype holds."""
    col = pl.col(key.column)
    lo, hi = (-(2.0**63), 2.0**63) if key.target == pl.Int64() else (-(2.0**127), 2.0**127)
    bad = col.is_not_null() & ~col.is_nan() & ((col != col.floor()) | (col < lo) | (col >= hi))
    return row_check(
        bad,
        InvalidValueError,
        f"expected whole-number ids in float key column {key.column!r} (matched as "
        f"{key.target} ids against the other frames), found {{n}} other value(s), "
        "e.g. {example}",
    )
