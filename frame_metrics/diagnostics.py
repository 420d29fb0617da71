"""What an evaluation left out, scored as zero, resolved or could not decide."""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

__all__ = ["GROUP_COUNTS", "Diagnostics"]

#: The count columns of ``Diagnostics.per_group``; the others are the ``by`` columns.
GROUP_COUNTS = (
    "users_with_relevant",
    "users_without_relevant",
    "users_without_recommendations",
    "users_not_in_truth",
)


@dataclass(frozen=True)
class Diagnostics:
    """Counts that explain an evaluation; nothing is dropped without showing up here.

    Attributes
    ----------
    n_users
        Users evaluated (with at least one relevant item), summed over ``by`` groups
        (so with several groups a user counts once per group, and the printout says
        so, with the users per group); under ``empty="zero"`` also the users scored 0 for
        having none.
    users_without_relevant
        Users seen in the inputs with no relevant item: left out under ``empty="skip"``,
        scored 0 under ``empty="zero"``. Among them ``users_not_in_truth``.
    users_without_recommendations
        Evaluated users with no recommended item within the largest cutoff: scored 0.
    duplicates_resolved
        Rows dropped as repeated (user, item) pairs, per input frame (only non-zero
        under ``on_duplicate="first"``; under ``"error"`` a repeat raises).
    ties_at_cutoff
        Per cutoff k, users whose k-th and (k+1)-th scores are equal, so the tie rule
        (``ties=``, item ascending by default) decided what made the cut. Empty when
        ranks were given.
    ties_within_cutoff
        Per cutoff k, users with two items within k that share a score but not a
        relevance: the tie rule decided their order, which AP, NDCG and MRR read even
        when precision and recall cannot change. Empty when ranks were given.
    per_group
        The user counts per ``by`` group (one row when there is no ``by``).
    items_not_in_train
        Metrics reading popularity only (novelty, arp, aplt): recommended items (within
        the largest k; per ``by`` group train carries) that no train user had. Novelty
        counts each as had by one user, arp as popularity 0, aplt as long tail. ``None``
        when no such metric was asked for.
    pairs_without_rating
        Rating metrics only: (user, item) pairs with a prediction but no true rating.
        Errors are computed over the pairs with both; these are left out, and counted
        here.
    pairs_without_prediction
        Rating metrics only: (user, item) pairs with a true rating but no prediction,
        left out and counted likewise.
    users_not_in_truth
        Users only in the recommendations: no truth row at all (in a long table, no row
        with a relevance), so none relevant. Counted in ``users_without_relevant``.
    short_lists
        Per cutoff k, lists (users with a recommendation) with fewer than k items ranked
        within k: each empty position reads as a miss (precision@k still divides by k),
        so ``ndcg@20`` over lists of 10 items rates the first 10 only.
    longest_list
        The most items a list has within the largest cutoff; ``None`` without cutoffs.
    lists_with_rank_gaps
        Lists whose ranks within the largest cutoff skip a position (ranks 1, 2, 5: the
        spec reads positions 3 and 4 as empty, not rank 5 as third). 0 for scores.
    counts
        What the metric families leave out beyond the counts above, by name (each
        also an attribute: ``diagnostics.items_without_group``): users outside a
        metric's population, items without a category or group. Only the families of
        the metrics asked for add theirs. Besides counts, values: with ``propensity=``
        (spec 9.4), the weights' effective sample size (Σw)²/Σw² per user over the
        user's relevant items (``propensity_mean_ess``, ``propensity_min_ess``), the
        largest weight w = min(1/P, max_weight) (``propensity_largest_weight``) and the
        share of the weight mass held by the heaviest 1% of relevant truth rows
        (``propensity_top1_share``); ``None`` when no row is relevant.
    count_labels
        Each of ``counts``' line in the printout.
    samples_per_user
        With ``sample=``: the fewest and the most rankings (distinct samples) a user of
        recs has, over which expected exposure averages each user's attention (the
        list counts above are then per (user, sample) ranking, and users without
        recommendations are those scored with no attention at all). ``None`` without
        ``sample=``.
    excluded_rows
        With ``exclude=``: the recommendation rows (at any rank, summed over ``by``
        groups) whose (user, item) pair it holds, removed before the cutoff; in a long
        table, the ranked rows that stopped being recommendations. ``None`` without
        ``exclude=``.
    short_after_exclude
        With ``exclude=``, per cutoff k: the lists that had k items within k and have
        fewer once the excluded pairs are removed (the remaining items move up, and a
        list runs out). Among ``short_lists``, which counts every short list. Empty
        without ``exclude=``.
    """

    n_users: int
    users_without_relevant: int
    users_without_recommendations: int
    duplicates_resolved: dict[str, int]
    ties_at_cutoff: dict[int, int]
    per_group: pl.DataFrame
    pairs_without_rating: int = 0
    pairs_without_prediction: int = 0
    items_not_in_train: int | None = None
    ties_within_cutoff: dict[int, int] = field(default_factory=dict)
    users_not_in_truth: int = 0
    short_lists: dict[int, int] = field(default_factory=dict)
    longest_list: int | None = None
    lists_with_rank_gaps: int = 0
    samples_per_user: tuple[int, int] | None = None
    counts: dict[str, float | None] = field(default_factory=dict)
    count_labels: dict[str, str] = field(default_factory=dict)
    excluded_rows: int | None = None
    short_after_exclude: dict[int, int] = field(default_factory=dict)

    def __getattr__(self, name: str) -> float | None:
        """A family's count (``counts``) as an attribute."""
        # Only called for names that are not fields: the family counts.
        counts = self.__dict__.get("counts", {})
        if name in counts:
            value: float | None = counts[name]
            return value
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def _groups(self) -> tuple[list[str], list[int]]:
        """The ``by`` columns and the users evaluated in each group (none without ``by``)."""
        by = [c for c in self.per_group.columns if c not in GROUP_COUNTS]
        if not by:
            return [], []
        evaluated = self.per_group["users_with_relevant"]
        # n_users is the sum of users_with_relevant, plus users_without_relevant when
        # empty="zero" scored them: which one it is shows in the totals.
        if self.n_users != evaluated.sum():
            evaluated = evaluated + self.per_group["users_without_relevant"]
        return by, [int(n) for n in evaluated]

    def lines(self) -> list[tuple[str, str]]:
        """The counts as (label, value) pairs: what ``print`` shows, one a line."""
        return self._lines()

    def _lines(self) -> list[tuple[str, str]]:
        by, per_group = self._groups()
        # With several by groups every count is a sum over them: a user evaluated for
        # two models counts twice. The labels say so, and the users per group.
        evaluated = str(self.n_users)
        summed = ""
        if len(per_group) > 1:
            low, high = min(per_group), max(per_group)
            each = f"{low} users each" if low == high else f"{low} to {high} users per group"
            evaluated += f" ({each})"
            summed = ", summed over groups"
        first = f", summed over {len(per_group)} {'/'.join(by)} groups" if summed else ""
        lines = [
            (f"users evaluated{first}", evaluated),
            (f"users without a relevant item{summed}", str(self.users_without_relevant)),
        ]
        if self.users_not_in_truth:
            lines.append(("  of which not in truth (only in recs)", str(self.users_not_in_truth)))
        lines.append(
            (
                f"users without recommendations (scored 0){summed}",
                str(self.users_without_recommendations),
            )
        )
        lines += [
            (f"duplicate rows resolved in {f}", str(n)) for f, n in self.duplicates_resolved.items()
        ]
        if self.excluded_rows is not None:
            lines.append((f"recommendations removed by exclude={summed}", str(self.excluded_rows)))
        # Short or gapped lists change no count above, only what a metric reads: said when
        # they occur (a list of 10 read at k=20 rates 10 items).
        for k, n in self.short_lists.items():
            if n:
                longest = self.longest_list
                most = (
                    f" (the longest has {longest} items)"
                    if longest is not None and longest < k
                    else ""
                )
                lines.append((f"lists shorter than k={k}{most}{summed}", str(n)))
                fell = self.short_after_exclude.get(k)
                if fell:
                    lines.append((f"  of which short only after exclude={summed}", str(fell)))
        if self.lists_with_rank_gaps:
            lines.append(
                (
                    f"lists with gaps in their ranks (positions left empty){summed}",
                    str(self.lists_with_rank_gaps),
                )
            )
        lines += [(f"score ties straddling k={k}", str(n)) for k, n in self.ties_at_cutoff.items()]
        lines += [
            (f"score ties reordering items within k={k}", str(n))
            for k, n in self.ties_within_cutoff.items()
        ]
        if self.samples_per_user is not None:
            low, high = self.samples_per_user
            lines.append(("rankings (samples) per user, fewest to most", f"{low} to {high}"))
        if self.items_not_in_train is not None:
            lines.append(("recommended items no train user had", str(self.items_not_in_train)))
        lines += [(self.count_labels.get(n, n), str(v)) for n, v in self.counts.items()]
        if self.pairs_without_rating or self.pairs_without_prediction:
            lines.append(
                ("predictions without a true rating (left out)", str(self.pairs_without_rating))
            )
            lines.append(
                ("ratings without a prediction (left out)", str(self.pairs_without_prediction))
            )
        return lines

    def __str__(self) -> str:
        """The counts, one a line.

        Examples
        --------
        >>> groups = pl.DataFrame({"model": ["a", "b"], "users_with_relevant": [1000, 1000],
        ...                        "users_without_relevant": [3, 3],
        ...                        "users_without_recommendations": [0, 2]})
        >>> print(Diagnostics(2000, 6, 2, {"recs": 0}, {}, groups))
        users evaluated, summed over 2 model groups:                  2000 (1000 users each)
        users without a relevant item, summed over groups:            6
        users without recommendations (scored 0), summed over groups: 2
        duplicate rows resolved in recs:                              0
        """
        lines = self._lines()
        width = max(len(label) for label, _ in lines) + 1
        return "\n".join(f"{label + ':':<{width}} {n}" for label, n in lines)

    def __repr__(self) -> str:
        # The counts, then the per-group table when there are groups (a notebook shows this).
        text = str(self)
        if self.per_group.width and self.per_group.height > 1:
            text += f"\nper group:\n{self.per_group}"
        return text
