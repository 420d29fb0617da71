"""Whether the ids of recs and truth match: a warning when few users, or no items, do.

Ids written differently in two frames (``"0015"`` in one, ``15`` in the other, read as
text) never match: every metric is then 0 or undefined, and nothing fails. The rule,
over the recommended rows (every rank) and the truth rows:

- **users**: fewer than 1% (:data:`MIN_USER_SHARE`) of the users of recs have a truth
  row (none, for fewer than 100 users); the user key is matched with the ``by``
  columns truth has;
- **items**: otherwise, none of the recommended (user, item) pairs of those users is
  a truth row (of any relevance).

Either gives an :class:`~frame_metrics.errors.UnmatchedIdsWarning` with the counts and
an example id of each frame. A call without truth rows or recommendations has nothing
to match, and no warning.

The default path must stay cheap, so the rule first runs on a sample: the first
:data:`SAMPLE_ROWS` rows of recs and the truth rows of their users, collected in the
same batch as the result (the truth rows are found by a semi join on the sampled users,
a small hash table). Only when the sample breaks the rule and was not the whole of recs
are the exact counts taken, in one more pass; the warning always shows exact counts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import polars as pl

from frame_metrics.errors import UnmatchedIdsWarning, warn

__all__ = ["MIN_USER_SHARE", "SAMPLE_ROWS", "IdCounts", "IdScreen", "count"]

#: Recommendation rows in the sample the rule is first tried on.
SAMPLE_ROWS = 10_000
#: Below this share of the users of recs with a truth row, the ids are suspect.
MIN_USER_SHARE = 0.01


@dataclass(frozen=True)
class IdCounts:
    """How many recommended users and pairs match truth, with an example row of each side.

    ``users``: distinct user keys of recs (user + the ``by`` columns truth has);
    ``matched_users``: those with a truth row; ``pairs``: recommended rows of the
    matched users; ``matched_pairs``: those whose (user, item) is a truth row.
    ``recs_example`` and ``truth_example`` are rows to show: an unmatched user of recs
    and a truth user, or, when users match but items do not, a recommended and a truth
    row of the same user.

    Examples
    --------
    >>> counts = IdCounts(3, 0, 0, 0, {"user": "0015"}, {"user": "15"})
    >>> print(counts.message())
    recs and truth: expected the users of recs to have truth rows, found 0 of 3 (under 1%), e.g. user='0015' in recs and user='15' in truth; the users of recs without truth rows are left out, and those of truth score 0 (nothing recommended to them): check that both frames write the user ids alike
    >>> IdCounts(200, 2, 20, 1, {}, {}).message() is None
    True
    """

    users: int
    matched_users: int
    pairs: int
    matched_pairs: int
    recs_example: dict[str, object]
    truth_example: dict[str, object]

    @property
    def users_unmatched(self) -> bool:
        """Under :data:`MIN_USER_SHARE` of the users of recs have a truth row."""
        return self.users > 0 and self.matched_users < MIN_USER_SHARE * self.users

    @property
    def items_unmatched(self) -> bool:
        """Users match, but none of their recommended (user, item) pairs is in truth."""
        return not self.users_unmatched and self.pairs > 0 and self.matched_pairs == 0

    def message(self) -> str | None:
        """The warning's text, or None when the ids match."""
        examples = (
            f"e.g. {_describe(self.recs_example)} in recs and "
            f"{_describe(self.truth_example)} in truth"
        )
        if self.users_unmatched:
            return (
                "recs and truth: expected the users of recs to have truth rows, found "
                f"{self.matched_users} of {self.users} (under {MIN_USER_SHARE:.0%}), "
                f"{examples}; the users of recs without truth rows are left out, and those "
                "of truth score 0 (nothing recommended to them): check that both frames "
                "write the user ids alike"
            )
        if self.items_unmatched:
            return (
                "recs and truth: expected some recommended (user, item) pairs to be truth "
                f"rows, found none of the {self.pairs} pairs of the {self.matched_users} "
                f"users with truth rows, {examples}; every hit-based metric is 0: check that "
                "both frames write the item ids alike"
            )
        return None


class IdScreen:
    """The rule on a sample, in the result's batch; exact counts only when it breaks.

    Build it with the frames, add :meth:`queries` to the batch that computes the
    result, then hand their frames to :meth:`report` (after the input checks passed).

    ``keys``: the user key and the ``by`` columns truth has; ``recs`` and ``truth``
    carry them and ``item`` (in one dtype each, as the engine types its inputs).
    ``within``: sample only the users this filter keeps (a bucket of users: all of a
    user's truth rows pass it), so that a bucketed run reads one bucket for the sample.
    """

    def __init__(
        self,
        recs: pl.LazyFrame,
        truth: pl.LazyFrame,
        keys: Sequence[str],
        item: str,
        *,
        within: pl.Expr | None = None,
    ) -> None:
        self.keys, self.item = list(keys), item
        self.recs = recs.select(*self.keys, item)
        self.truth = truth.select(*self.keys, item)
        self.within = within

    def queries(self) -> list[pl.LazyFrame]:
        """The sample of recs, the truth rows of its users and truth's first row."""
        recs, truth = self.recs, self.truth
        if self.within is not None:
            recs, truth = recs.filter(self.within), truth.filter(self.within)
        sample = recs.head(SAMPLE_ROWS)
        users = sample.select(self.keys).unique()
        # A semi join keeps the truth rows of the sampled users: its hash table holds
        # those few users, not truth.
        of_sampled = truth.join(users, on=self.keys, how="semi", nulls_equal=True)
        return [sample, of_sampled, self.truth.head(1)]

    def report(self, frames: Sequence[pl.DataFrame]) -> bool:
        """Warn when the ids do not match (see the module's rule); whether it warned.

        ``frames``: what :meth:`queries` gave, collected.
        """
        sample, of_sampled, first = frames
        if sample.height == 0 or first.height == 0:
            return False  # nothing to match
        counts = count(sample.lazy(), of_sampled.lazy(), first.lazy(), self.keys, self.item)
        if counts.message() is not None and (
            sample.height == SAMPLE_ROWS or self.within is not None
        ):
            # The sample was not all of recs: count everything before warning.
            counts = count(self.recs, self.truth, self.truth.head(1), self.keys, self.item)
        message = counts.message()
        if message is not None:
            warn(UnmatchedIdsWarning(message))
        return message is not None


def count(
    recs: pl.LazyFrame, truth: pl.LazyFrame, first: pl.LazyFrame, keys: list[str], item: str
) -> IdCounts:
    """The counts of :class:`IdCounts` over ``recs``, against ``truth``, in one batch.

    ``truth`` needs only the rows of the users of ``recs``; ``first`` is a truth row to
    show when users do not match.
    """
    pair = [*keys, item]
    users = recs.select(keys).unique()
    truth_users = truth.select(keys).unique()
    matched = users.join(truth_users, on=keys, how="semi", nulls_equal=True)
    of_matched = recs.join(matched, on=keys, how="semi", nulls_equal=True)
    hits = of_matched.join(truth, on=pair, how="semi", nulls_equal=True)
    # The examples: an unmatched user of recs beside a truth user; a recommended row of
    # a matched user beside a truth row of the same user (the items differ, not the user).
    unmatched = recs.join(truth_users, on=keys, how="anti", nulls_equal=True).head(1)
    recs_row = of_matched.head(1)
    truth_row = truth.join(recs_row.select(keys), on=keys, how="semi", nulls_equal=True).head(1)
    sizes = [frame.select(pl.len()) for frame in (users, matched, of_matched, hits)]
    results = pl.collect_all([*sizes, unmatched, first, recs_row, truth_row])
    n_users, n_matched, n_pairs, n_hits = (int(frame.item()) for frame in results[:4])
    unmatched_row, first_row, recs_example, truth_example = results[4:]
    counts = IdCounts(n_users, n_matched, n_pairs, n_hits, {}, {})
    if counts.users_unmatched:
        return replace(
            counts,
            recs_example=unmatched_row.select(keys).row(0, named=True),
            truth_example=first_row.select(keys).row(0, named=True),
        )
    if counts.items_unmatched:
        return replace(
            counts,
            recs_example=recs_example.row(0, named=True),
            truth_example=truth_example.row(0, named=True),
        )
    return counts


def _describe(row: dict[str, object]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in row.items())
