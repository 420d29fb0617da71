"""The frames of one call, read at the edge and typed: what the families compute on.

:class:`Inputs` holds the caller's frames as LazyFrames (only the columns the call reads,
see :func:`frame_metrics.planner.reads`), every key column in one lossless dtype, empty
columns typed; and, when the call is one partition of a larger run, the tables over
every user (:class:`~frame_metrics.global_tables.GlobalTables`). It knows nothing of
metrics: the :class:`~frame_metrics.spec.Spec` says what to compute.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import polars as pl

from frame_metrics.dtypes import FloatKey, type_null_columns, unify_keys
from frame_metrics.extras import ExtraFrame, require_columns
from frame_metrics.frames import Source, to_lazy
from frame_metrics.global_tables import GlobalTables
from frame_metrics.keywords import EXTRA_INPUTS
from frame_metrics.prepare import Prepared, prepare
from frame_metrics.spec import Spec

__all__ = ["Inputs"]


@dataclass(frozen=True)
class Inputs:
    """One call's frames, converted and typed.

    ``source``: recs (or the long table); ``truth``: None for a long table;
    ``extras``: train, catalog, item_features, baseline, item_groups, exclude as given;
    ``float_keys``: key columns read as floats, which the checks require to hold whole
    numbers;
    ``shared``: the tables over every user when this is one partition of a larger run.
    """

    spec: Spec
    source: Source
    truth: Source | None
    extras: Mapping[str, ExtraFrame]
    float_keys: Sequence[FloatKey] = ()
    shared: GlobalTables | None = field(default=None)

    @staticmethod
    def read(
        spec: Spec,
        recs: object,
        truth: object | None,
        extras: Mapping[str, object | None],
        reads: Mapping[str, set[str]],
        *,
        shared: GlobalTables | None = None,
    ) -> Inputs:
        """Convert the caller's frames (the columns in ``reads`` of each) and type them."""
        source = to_lazy(recs, spec.source_label, reads["recs"])
        truth_source = None if truth is None else to_lazy(truth, "truth", reads["truth"])
        given = {
            e.name: to_lazy(frame, e.name, reads[e.name])
            for e in EXTRA_INPUTS
            if (frame := extras.get(e.name)) is not None
        }
        return _typed(spec, source, truth_source, given, shared)

    def prepared(self, *, tie_cutoffs: tuple[int, ...] = (), excluding: bool = True) -> Prepared:
        """The checked long table of the call: top rows, truth, judged rows, checks.

        ``excluding``: with ``exclude=``'s pairs removed from the lists (False: the
        lists as given, for :func:`frame_metrics.diagnose` to count what it changed).
        """
        spec = self.spec
        return prepare(
            self.source.lazy,
            None if self.truth is None else self.truth.lazy,
            spec.columns,
            spec.options,
            spec.depth,
            validate=spec.validate,
            tie_cutoffs=tie_cutoffs,
            needs_relevance="truth" in spec.needs and spec.max_k > 0,
            groups=None if self.shared is None else self.shared.groups,
            gains=spec.gains,
            largest_relevance=spec.largest_relevance,
            row_order=spec.row_order,
            every_column=self.source.every_column,
            propensity=spec.propensity_column,
            exclude=self.exclusion() if excluding else None,
        )

    def exclusion(self) -> pl.LazyFrame | None:
        """``exclude=``'s pairs: the ``by`` columns it carries, the user key, the item.

        None without it. Its other columns are not read; a missing user or item column
        is a :class:`~frame_metrics.errors.MissingColumnsError` naming what it has.
        """
        if "exclude" not in self.extras:
            return None
        c = self.spec.columns
        extra = self.extra("exclude", [*c.user, c.item])
        return extra.frame.select(*extra.by, *c.user, c.item)

    def extra(self, name: str, names: Sequence[str]) -> ExtraFrame:
        """An extra input, checked to have its join columns (typed like recs' already)."""
        extra = self.extras[name]
        require_columns(extra, [*extra.by, *names])
        return extra


def _typed(
    spec: Spec,
    source: Source,
    truth: Source | None,
    extras: dict[str, Source],
    shared: GlobalTables | None,
) -> Inputs:
    """Every input's key columns in one lossless dtype, empty columns typed (dtypes.py)."""
    c = spec.columns
    label = spec.source_label
    sources = {label: source}
    if truth is not None:
        sources["truth"] = truth
    sources |= extras
    values: dict[str, pl.DataType] = {
        c.rank: pl.Int64(),
        c.relevance: pl.Float64(),
        c.prediction: pl.Float64(),
        c.features: pl.List(pl.String()),
    }
    if c.score is not None:
        values[c.score] = pl.Float64()
    keys = [*c.by, *c.user, c.item]
    typed, float_keys = unify_keys({name: s.lazy for name, s in sources.items()}, keys)
    # A key with no values anywhere (every frame empty) is read as integers.
    typed = {
        name: type_null_columns(frame, {**values, **dict.fromkeys(keys, pl.Int64())})
        for name, frame in typed.items()
    }
    source = replace(source, lazy=typed[label])
    if truth is not None:
        truth = replace(truth, lazy=typed["truth"])
    wrapped = {
        name: ExtraFrame.of(name, replace(s, lazy=typed[name]), c) for name, s in extras.items()
    }
    return Inputs(spec, source, truth, wrapped, float_keys if spec.validate else (), shared)
