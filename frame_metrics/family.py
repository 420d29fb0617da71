"""The one interface every metric family implements, and what it is handed.

A family is the part of the plan that computes a set of registry metrics from the same
rows (``Metric.family``). The planner (:mod:`frame_metrics.planner`) loops over the
families a :class:`~frame_metrics.spec.Spec` needs and asks each, through this
interface alone:

- what it reads: columns of each frame (:meth:`Family.reads`), roles of recs' columns
  (:meth:`Family.recs_roles`), which prepared rows (:attr:`Family.rows`);
- what it refuses before reading a row (:meth:`Family.check_call`);
- its per-user query (:meth:`Family.per_user`), registering its input checks;
- how its per-user values aggregate: the columns summed exactly over users
  (:meth:`Family.summed`), extra counts (:meth:`Family.counts`), the values finished
  from the sums (:meth:`Family.finished`);
- for metrics with one value per group (corpus): the partial frame a partition sends
  (:meth:`Family.partials`), how partials add up (:meth:`Family.combine`) and finish
  (:meth:`Family.finish_groups`);
- the tables it needs over every user in a partitioned run
  (:meth:`Family.global_tables`) and whether it reads rows below the largest cutoff
  (:meth:`Family.reads_every_row`);
- what it leaves out, for ``fm.diagnose`` (:meth:`Family.diagnostics`).

The one-pass engine, the bucket runner, Spark and Dask all call these; no family logic
lives in a runner.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import polars as pl

from frame_metrics.extras import ExtraFrame
from frame_metrics.inputs import Inputs
from frame_metrics.metrics.registry import Requested
from frame_metrics.prepare import Prepared, RatingPairs
from frame_metrics.spec import Spec
from frame_metrics.validation import CheckedFrame, null_checks

if TYPE_CHECKING:
    from polars._typing import EngineType

__all__ = ["ENGINE", "GROUP_USERS", "Context", "DiagnosticCount", "Family", "Partitioned"]

#: A group's count of users with a list, from a family with one value per group
#: (:meth:`Family.finish_groups`): ``n_users`` when no per-user metric is asked for.
GROUP_USERS = "_fm_corpus_users"

#: The polars engine queries a family collects itself run on (tables over every user).
ENGINE: EngineType = "streaming"


@dataclass(frozen=True)
class Partitioned:
    """What a partitioned run offers a family computing tables over every user.

    ``schemas``: each partitioned frame's schema (keys in the shared dtype);
    ``broadcast``: the names of the item tables every partition gets whole;
    ``collect(fn, names)``: ``fn`` run on every partition of the frames ``names``, the
    results stacked; ``has_recs()``: whether recs has a row.
    """

    schemas: Mapping[str, pl.Schema]
    broadcast: Collection[str]
    collect: Callable[
        [Callable[[Mapping[str, pl.DataFrame]], pl.DataFrame], tuple[str, ...]], pl.DataFrame
    ]
    has_recs: Callable[[], bool]


@dataclass(frozen=True)
class DiagnosticCount:
    """One count a family adds to ``fm.diagnose``: who or what its metrics leave out.

    ``name``: its key in ``Diagnostics.counts`` (and an attribute of ``Diagnostics``);
    ``label``: its line in the printout. ``frame``: with ``distinct=False``, one row with
    an integer column ``n`` (a count of users: partitions of the users add up); with
    ``distinct=True``, the distinct rows counted (items, with the ``by`` columns they
    count per): a partitioned run counts the union of its partitions' rows.
    ``finish``: a value that is not a count (a mean, a largest value): ``frame`` is then
    a partial that stacks over partitions (one machine: the only one), and ``finish``
    gives the value from the stacked rows (None when there is none).
    """

    name: str
    label: str
    frame: pl.LazyFrame
    distinct: bool = False
    finish: Callable[[pl.DataFrame], float | None] | None = None


@dataclass
class Context:
    """What a family computes from: the call, its frames, the prepared rows, the checks.

    Families append their input checks to ``checks`` (run with the result, in one
    batch) or ``first_checks`` (run before the query: bad values that would make the
    query itself fail). ``memo`` holds what two families of one plan share (the train
    frame checked once).
    """

    spec: Spec
    inputs: Inputs
    prepared: Prepared | None
    ratings: RatingPairs | None
    checks: list[CheckedFrame] = field(default_factory=list)
    first_checks: list[CheckedFrame] = field(default_factory=list)
    memo: dict[str, Any] = field(default_factory=dict)

    @property
    def keys(self) -> list[str]:
        """The key of one evaluated user: ``by`` columns, then the user key."""
        return self.spec.columns.keys

    def requests(self, family: str) -> list[Requested]:
        """The requested metrics of one family, in request order."""
        return self.spec.of_family(family)

    def train(self) -> ExtraFrame:
        """``train=``, checked to have the user and item columns; its key checks once.

        Several families read it (popularity, history, calibration, default item
        groups): the frame and its null checks are shared through ``memo``.
        """
        train: ExtraFrame | None = self.memo.get("train")
        if train is None:
            c = self.spec.columns
            train = self.inputs.extra("train", [*c.user, c.item])
            keys = [*train.by, *c.user, c.item]
            self.checks.append(CheckedFrame("train", train.frame, null_checks(keys, "key"), keys))
            self.memo["train"] = train
        return train


class Family:
    """A metric family: the base reads the ranked lists and computes nothing."""

    #: The registry's ``Metric.family`` value of the metrics this family computes.
    name: ClassVar[str]
    #: Which prepared rows it reads: the ranked long table or the rated pairs.
    rows: ClassVar[Literal["ranked", "rated"]] = "ranked"
    #: Its place in the plan: checks are registered, and columns joined, in this order.
    order: ClassVar[int] = 100

    # -- what it reads and refuses ---------------------------------------------------------

    def reads(self, spec: Spec) -> Mapping[str, Collection[str]]:
        """Columns of each frame it reads beyond the keys and the rank or score."""
        return {}

    def recs_roles(self, spec: Spec) -> Mapping[str, str]:
        """Roles of recs' columns it reads beyond the keys.

        By default the column that ranks the lists (rank, or score): a family over
        recommended lists reads it.
        """
        role, column = spec.columns.order
        return {role: column}

    def check_call(self, spec: Spec, *, aggregate: bool) -> None:
        """Refuse what no frame can answer, before any row is read."""

    # -- per user ------------------------------------------------------------------------

    def per_user(self, ctx: Context) -> pl.LazyFrame | None:
        """Keys and a column per requested per-user metric (and :meth:`carried`)."""
        return None

    def carried(self, spec: Spec) -> list[str]:
        """Per-user columns besides the metrics that the aggregate reads."""
        return []

    def summed(self, spec: Spec) -> list[str]:
        """Per-user columns whose exact sums over a group's users the aggregate reads.

        By default every per-user metric, for its mean over the users it is defined for.
        """
        return [q.column for q in spec.of_family(self.name) if q.metric.population != "corpus"]

    def counts(self, spec: Spec) -> list[pl.Expr]:
        """Per-group counts besides ``n_users`` (integers that add up over users)."""
        return []

    def finished(self, spec: Spec) -> list[pl.Expr]:
        """Each per-user metric's aggregate from the group's one row of sums.

        By default the exact mean (``<column>.mean``, see :mod:`frame_metrics.numerics`).
        """
        return [
            pl.col(f"{q.column}.mean").first().alias(q.column)
            for q in spec.of_family(self.name)
            if q.metric.population != "corpus"
        ]

    def defined_by(self, spec: Spec) -> str:
        """The count that must be above 0 for its aggregates to have a value."""
        return "n_users"

    # -- per group -----------------------------------------------------------------------

    def partials(self, ctx: Context) -> pl.LazyFrame | None:
        """What it sums over users per group, as a frame that adds up over partitions."""
        return None

    def combine(self, spec: Spec, stacked: pl.DataFrame) -> pl.DataFrame:
        """Several partitions' :meth:`partials` frames, stacked, added up."""
        return stacked

    def finish_groups(self, ctx: Context, partials: pl.LazyFrame) -> pl.LazyFrame | None:
        """Its metrics per group (with ``GROUP_USERS``) from (combined) partials."""
        return None

    # -- partitioned runs ----------------------------------------------------------------

    def global_tables(self, spec: Spec, run: Partitioned) -> dict[str, Any]:
        """Tables over every user a partition reads, by name (see ``GlobalTables``)."""
        return {}

    def partition_reads(self, spec: Spec) -> frozenset[str] | None:
        """The tables over every user (``GlobalTables`` names) its partitions read.

        Those it reads only in :meth:`finish_groups` are left out: an accumulator
        (``fm.Accumulator``) builds such a table when it finishes, from each update's
        share of it, kept as distinct rows (a table so read must be a set of rows, as
        the default catalog's items are). None: it does not say, every table.
        """
        return None

    def reads_every_row(self, spec: Spec, broadcast: Collection[str]) -> bool:
        """Whether it reads recommendations ranked below the largest cutoff."""
        return False

    # -- diagnostics ---------------------------------------------------------------------

    def diagnostics(self, ctx: Context) -> list[DiagnosticCount]:
        """What its requested metrics leave out, counted for ``fm.diagnose``.

        Called with the prepared rows (``ctx.prepared``) on one machine and on every
        partition; nothing when the family has no population of its own.
        """
        return []
