"""Exact sums of float columns, so that a mean is the same wherever it is computed.

A float sum depends on the order of its terms: a left-to-right sum over users in key
order is reproducible on one machine, but a run split into buckets or partitions adds
the same values in another order and differs in the last digits (2.6e-11 relative for
a precision mean over 10M users). Here every value is split exactly into an integer
mantissa and a binary exponent bin, ``v = m * 2**(bin - 60)``; the mantissas are summed
per bin as 128-bit integers, which is exact and does not depend on the order; and the
bins are combined with Python's integers and rounded once. The result is the correctly
rounded sum (or mean), equal on one machine, in buckets, on Spark and on Dask.

Partial sums (per bucket, per partition) are rows of (group columns, name, bin, mantissa
sum split into two Int64 halves for Arrow, count); they add up by plain integer sums.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

import polars as pl

__all__ = ["NAME", "exact_partials", "exact_totals", "ordered_sum", "sum_partials"]

NAME = "_fm_sum_of"
_BIN = "_fm_bin"
_HI = "_fm_hi"
_LO = "_fm_lo"
_COUNT = "_fm_count"
_NONFINITE = "_fm_nonfinite"
_VALUE = "_fm_v"
#: Bits of a mantissa above the value's binary exponent (52 would do; 60 leaves room for
#: the log2 estimate of the exponent to be off by one either way).
_SHIFT = 60
#: The low part of a mantissa sum: a bin's sum stays below 2^102 for up to 2^40 rows,
#: so its high part (below 2^62) and low parts of up to 2^23 partitions fit in Int64.
_LOW_BITS = 40


def exact_partials(frame: pl.LazyFrame, by: Sequence[str], columns: Sequence[str]) -> pl.LazyFrame:
    """Per (``by``, column, exponent bin): the exact sum of the column's non-null values.

    Examples
    --------
    >>> frame = pl.LazyFrame({"g": ["a", "a", "b"], "x": [0.1, 0.2, None]})
    >>> totals = exact_totals(exact_partials(frame, ["g"], ["x"]), ["g"], ["x"])
    >>> totals.sort("g").collect().rows()
    [('a', 0.30000000000000004, 2, 0.15000000000000002), ('b', None, 0, None)]
    """
    by = list(by)
    # The long form, one row per value, names a column by its position (UInt16) rather
    # than by its name: the name of every row would be a string (of 30M rows for 30
    # metric columns over 1M users); the per-bin rows get the names back at the end.
    index = pl.UInt16 if len(columns) < 2**16 else pl.UInt32
    parts = [
        frame.select(*by, pl.lit(i, index).alias(NAME), pl.col(c).cast(pl.Float64).alias(_VALUE))
        for i, c in enumerate(columns)
    ]
    long = (
        pl.concat(parts)
        if parts
        else frame.select(*by).head(0).with_columns(pl.lit(0, index).alias(NAME), _VALUE=0.0)
    )
    v = pl.col(_VALUE)
    finite = v.is_finite().fill_null(False)
    # NaN and ±inf have no mantissa: they are added as floats on their own (_NONFINITE;
    # any order gives the same NaN or inf), so the query never fails on them and a check
    # collected beside it can report them first (validate=False gets NaN or inf back).
    exponent = pl.when(finite & (v != 0.0)).then(v.abs().log(2).floor()).otherwise(0.0)
    shift = _SHIFT - pl.col(_BIN)
    # Two power-of-two factors, each finite for any float exponent: the product is exact.
    half = shift // 2
    scaled = v * pl.lit(2.0).pow(half) * pl.lit(2.0).pow(shift - half)
    per_bin = (
        long.with_columns(exponent.cast(pl.Int64, strict=False).alias(_BIN))
        .with_columns(
            pl.when(finite).then(scaled).cast(pl.Int128, strict=False).alias("_fm_m"),
            pl.when(finite).then(0.0).otherwise(v).alias(_NONFINITE),
        )
        .group_by([*by, NAME, _BIN])
        .agg(
            pl.col("_fm_m").sum(),
            v.count().cast(pl.Int64).alias(_COUNT),
            pl.col(_NONFINITE).sum(),  # NaN or ±inf when any was, else 0.0
        )
    )
    m = pl.col("_fm_m")
    high = m // (2**_LOW_BITS)  # floor division: the low part is in [0, 2^40)
    names = pl.Series(list(columns), dtype=pl.String)
    return per_bin.select(
        *by,
        pl.lit(names).gather(pl.col(NAME)).alias(NAME),
        _BIN,
        high.cast(pl.Int64).alias(_HI),
        (m - high * (2**_LOW_BITS)).cast(pl.Int64).alias(_LO),
        _COUNT,
        _NONFINITE,
    )


def sum_partials(partials: pl.LazyFrame, by: Sequence[str]) -> pl.LazyFrame:
    """Partials of several buckets or partitions added up (still partials)."""
    return partials.group_by([*by, NAME, _BIN]).agg(
        pl.col(_HI).sum(), pl.col(_LO).sum(), pl.col(_COUNT).sum(), pl.col(_NONFINITE).sum()
    )


def exact_totals(partials: pl.LazyFrame, by: Sequence[str], columns: Sequence[str]) -> pl.LazyFrame:
    """Per ``by`` group and column: ``<c>`` the sum, ``<c>.n`` the count, ``<c>.mean``.

    The sum and the mean are correctly rounded (null when the count is 0). The last step
    runs in Python on one row per group, bin and column.
    """
    by = list(by)
    summed = sum_partials(partials, by)
    schema = {
        **{b: summed.collect_schema()[b] for b in by},
        **{f"{c}{suffix}": dtype for c in columns for suffix, dtype in _OUT},
    }

    def combine(frame: pl.DataFrame) -> pl.DataFrame:
        totals: dict[tuple[object, ...], dict[str, object]] = {}
        for row in frame.iter_rows(named=True):
            group = tuple(row[b] for b in by)
            out = totals.setdefault(group, {})
            name = row[NAME]
            mantissa = int(row[_HI]) * 2**_LOW_BITS + int(row[_LO])
            exact = Fraction(mantissa) * Fraction(2) ** (int(row[_BIN]) - _SHIFT)
            out[name] = out.get(name, Fraction(0)) + exact  # type: ignore[operator]
            if row[_NONFINITE]:  # NaN or ±inf among the values: the sum is that
                out[f"{name}.nonfinite"] = float(row[_NONFINITE]) + float(
                    out.get(f"{name}.nonfinite", 0.0)  # type: ignore[arg-type]
                )
            out[f"{name}.n"] = int(out.get(f"{name}.n", 0)) + int(row[_COUNT])  # type: ignore[call-overload]
        rows = []
        for group, out in totals.items():
            row_out: dict[str, object] = dict(zip(by, group, strict=True))
            for c in columns:
                n = int(out.get(f"{c}.n", 0))  # type: ignore[call-overload]
                total = out.get(c, Fraction(0))
                assert isinstance(total, Fraction)
                odd = out.get(f"{c}.nonfinite")
                row_out[c] = (float(total) if odd is None else odd) if n else None
                row_out[f"{c}.n"] = n
                row_out[f"{c}.mean"] = (float(total / n) if odd is None else odd) if n else None
            rows.append(row_out)
        return pl.DataFrame(rows, schema=schema, orient="row")

    return summed.map_batches(combine, schema=pl.Schema(schema), streamable=False)


_OUT = (("", pl.Float64()), (".n", pl.Int64()), (".mean", pl.Float64()))


def ordered_sum(values: pl.Expr) -> pl.Expr:
    """A left-to-right sum of ``values`` in the order given (sort them first).

    The sum of a few values per user (a list's terms), where the exact sums above would
    cost more than they save: reproducible because the order is fixed, not exact.

    Not ``sum()``: polars drops a ``sort()`` right before a ``sum()`` as pointless,
    and then the float sum depends on the order the group's rows arrived in.
    ``cum_sum`` is sequential by definition, so its last value is reproducible.
    """
    return values.cum_sum().last().fill_null(0.0)
