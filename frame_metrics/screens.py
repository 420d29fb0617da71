"""Warnings about what a call most likely did not mean, from a cheap look at its data.

Each screen is a small query run in the same batch as the result (its :meth:`queries`),
and a report on what those queries found (:meth:`report`), which warns once; only
when the first look suggests a warning does a screen read more. The rules are the
definition sheet's, section 8:

- :class:`RelevanceScreen` - **star ratings as relevance**: the relevance column has at
  least three levels, all multiples of 0.5, the largest 3 or more, and nothing in the
  call says which are relevant (no ``threshold=``, ``None`` included, no
  ``convention=``): every rating above 0 is then relevant and gains its stars
  (:class:`~frame_metrics.errors.RelevanceWarning`). Never for binary relevance. The
  first look is the largest relevance alone (parquet statistics may answer it); the
  levels are read only when it is 3 or more.
- :class:`CoverageScreen` - **few users with recommendations**: more than half of the
  evaluated users (those with a relevant item; all of them, or none) have no
  recommendation in the call, and score 0 on every ranking metric
  (:class:`~frame_metrics.errors.NoRecommendationsWarning`). The first look is the
  users of the first :data:`SAMPLE_ROWS` relevant truth rows, looked up among the users
  of recs (a small hash table); the exact counts are taken only when more than half of
  those have none and the sample was not all of truth.

The ids screen (:mod:`frame_metrics.id_match`) has the same shape.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

import polars as pl

from frame_metrics.errors import NONE, NoRecommendationsWarning, Pass, RelevanceWarning, warn

__all__ = ["SAMPLE_ROWS", "STAR_TOP", "CoverageScreen", "RelevanceScreen", "Screen"]

#: Relevant truth rows in the sample the coverage rule is first tried on.
SAMPLE_ROWS = 10_000
#: One user key in this many (by its hash) is in the spread sample of the coverage rule.
SAMPLE_SHARE = 64
_IN_HEAD = "_fm_in_head"
_LISTED = "_fm_listed"
_HEAD = pl.lit(True).alias(_IN_HEAD)
#: The least largest level of a star scale (1-3, 1-5, 0.5-5, 1-10 stars).
STAR_TOP = 3.0
#: Levels a message lists before it says how many more there are.
_SHOWN_LEVELS = 11


class Screen(Protocol):
    """A look at the data in the result's batch, and a warning if it finds one."""

    def queries(self) -> list[pl.LazyFrame]:
        """The small queries collected with the result."""
        ...

    def report(self, frames: Sequence[pl.DataFrame]) -> bool:
        """Warn from what :meth:`queries` gave, collected (reading more if needed).

        Whether it warned.
        """
        ...


class RelevanceScreen:
    """Star ratings used as relevance without a threshold (module docstring).

    ``frame`` holds the relevance column ``relevance`` (truth, or a long table, where
    a null relevance is an unjudged row); ``label`` is how a message names it.

    Examples
    --------
    >>> import warnings
    >>> import frame_metrics as fm
    >>> truth = pl.LazyFrame({"relevance": [0.5, 1.0, 3.5, 4.0, 5.0]})
    >>> screen = RelevanceScreen(truth, "relevance", "truth")
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     warned = screen.report([q.collect() for q in screen.queries()])
    >>> print(caught[0].message)
    threshold: expected a threshold saying which relevance levels are relevant, found none, and truth column 'relevance' with levels that look like star ratings (0.5, 1.0, 3.5, 4.0, 5.0): every level above 0 counts as relevant (0.5 too) and gains its value; pass threshold=4 (or the level you mean), or pass threshold=None to keep rel > 0 and say so
    """

    def __init__(self, frame: pl.LazyFrame, relevance: str, label: str) -> None:
        self.frame = frame.select(pl.col(relevance).cast(pl.Float64))
        self.relevance = relevance
        self.label = label

    def queries(self) -> list[pl.LazyFrame]:
        """The largest relevance (NaN and infinities are the checks' business)."""
        rel = pl.col(self.relevance)
        return [self.frame.select(rel.filter(rel.is_finite()).max())]

    def report(self, frames: Sequence[pl.DataFrame]) -> bool:
        """Warn when the levels look like star ratings (module docstring).

        Past the largest level, one cheap pass over the column: whether any value is
        off the half-star grid; the levels shown are those of its first
        :data:`SAMPLE_ROWS` rows, and the levels are counted over every row only when
        those show fewer than three.
        """
        (top,) = frames
        largest = top.item()
        if largest is None or largest < STAR_TOP:
            return False
        rel = pl.col(self.relevance)
        finite = rel.filter(rel.is_finite())
        off_half, sampled = pl.collect_all(
            [
                self.frame.select(((finite * 2) != (finite * 2).floor()).any()),
                self.frame.head(SAMPLE_ROWS).select(finite.unique().sort()),
            ]
        )
        if off_half.item():
            return False
        levels = sampled[self.relevance].to_list()
        whole = len(levels) >= 3 or self.frame.select(finite.n_unique()).collect().item() >= 3
        if not whole:
            return False
        lowest = min((v for v in levels if v > 0), default=None)
        if lowest is None:
            lowest = self.frame.select(finite.filter(finite > 0).min()).collect().item()
        shown = ", ".join(f"{v:.1f}" for v in levels[:_SHOWN_LEVELS])
        more = ", ..." if len(levels) > _SHOWN_LEVELS or len(levels) < 3 else ""
        # Four stars of five: the usual "liked" of a star scale, at the same share of
        # any scale's top (rounded to a level the scale has, a multiple of 0.5).
        liked = min(largest, math.floor(largest * 0.8 * 2 + 0.5) / 2)
        warn(
            RelevanceWarning(
                "expected a threshold saying which relevance levels are relevant, found "
                f"none, and {self.label} column {self.relevance!r} with levels that look like "
                f"star ratings ({shown}{more}): every level above 0 counts as relevant "
                f"({lowest:g} too) and gains its value; ",
                Pass("threshold", int(liked) if liked == int(liked) else liked),
                " (or the level you mean), or ",
                Pass("threshold", NONE),
                " to keep rel > 0 and say so",
                option="threshold",
                frame=self.label,
                columns=[self.relevance],
            )
        )
        return True


class CoverageScreen:
    """More than half of the evaluated users without a recommendation (module docstring).

    ``recs`` carries the user key ``keys`` (every recommended row); ``relevant`` the
    key of every relevant truth row (the evaluated users).

    Examples
    --------
    >>> import warnings
    >>> recs = pl.LazyFrame({"user": [1]})
    >>> relevant = pl.LazyFrame({"user": [1, 2, 3]})
    >>> screen = CoverageScreen(recs, relevant, ["user"])
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     warned = screen.report([q.collect() for q in screen.queries()])
    >>> print(caught[0].message)
    recs: expected recommendations for most evaluated users, found none for 2 of the 3 users with a relevant truth item: they score 0 on every ranking metric (definition sheet, section 3); pass users='both' to evaluate only the users in both frames
    """

    def __init__(self, recs: pl.LazyFrame, relevant: pl.LazyFrame, keys: Sequence[str]) -> None:
        self.keys = list(keys)
        self.recs = recs.select(self.keys)
        self.relevant = relevant.select(self.keys)

    def queries(self) -> list[pl.LazyFrame]:
        """The sampled evaluated users, and how many of them have a recommendation.

        Two samples: the users of the first :data:`SAMPLE_ROWS` relevant rows (all of
        them, for a small truth), and the users whose key hashes to one of
        :data:`SAMPLE_SHARE` buckets (a spread sample, whatever the row order: a truth
        sorted by user cannot hide a block of users without lists from it).
        """
        head = self.relevant.head(SAMPLE_ROWS).unique().with_columns(_HEAD)
        key = (
            pl.struct(self.keys).hash(seed=0)
            if len(self.keys) > 1
            else pl.col(self.keys[0]).hash(seed=0)
        )
        spread = (
            self.relevant.filter(key % SAMPLE_SHARE == 0)
            .unique()
            .head(SAMPLE_ROWS)
            .with_columns(pl.lit(False).alias(_IN_HEAD))
        )
        sample = pl.concat([head, spread])
        # A semi join of recs on the sampled users: its hash table holds those few.
        listed = self.recs.join(
            sample.select(self.keys), on=self.keys, how="semi", nulls_equal=True
        )
        found = sample.join(
            listed.unique().with_columns(pl.lit(True).alias(_LISTED)),
            on=self.keys,
            how="left",
            nulls_equal=True,
        )
        counts = found.group_by(_IN_HEAD).agg(
            pl.len().alias("n"), pl.col(_LISTED).fill_null(False).sum().alias("with")
        )
        return [counts, self.relevant.head(SAMPLE_ROWS + 1).select(pl.len())]

    def report(self, frames: Sequence[pl.DataFrame]) -> bool:
        """Warn when more than half of the evaluated users have no recommendation."""
        counts, rows = frames
        samples = {bool(r[_IN_HEAD]): (int(r["n"]), int(r["with"])) for r in counts.to_dicts()}
        small = int(rows.item()) <= SAMPLE_ROWS
        head, spread = samples.get(True, (0, 0)), samples.get(False, (0, 0))
        # The head sample is every evaluated user of a small truth; past it, the spread
        # one is unbiased by row order (the head one, if the spread one caught nobody).
        sampled, with_recs = head if small or spread[0] == 0 else spread
        if sampled == 0 or 2 * with_recs >= sampled:
            return False
        if not small:
            # A sample: count every evaluated user.
            users = self.relevant.unique()
            listed = users.join(self.recs.unique(), on=self.keys, how="semi", nulls_equal=True)
            sampled, with_recs = (
                int(f.item())
                for f in pl.collect_all([users.select(pl.len()), listed.select(pl.len())])
            )
            if 2 * with_recs >= sampled:
                return False
        without = sampled - with_recs
        warn(
            NoRecommendationsWarning(
                "recs: expected recommendations for most evaluated users, found none for "
                f"{without} of the {sampled} users with a relevant truth item: they score 0 "
                "on every ranking metric (definition sheet, section 3); ",
                Pass("users", "both"),
                " to evaluate only the users in both frames",
                frame="recs",
            )
        )
        return True
