"""A slow pure-Python reference of the definition sheet's section 10 (splits and filters).

Written from the sheet's words, row by row, with no polars: the seeded hash is splitmix64
in Python integers, events are dictionaries, folds are sets. ``tests/test_split.py``
compares ``fm.split`` with it.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

MASK = (1 << 64) - 1


def mix(x: int) -> int:
    """splitmix64's step (Vigna's splitmix64.c: add the gamma, then the finaliser)."""
    z = (x + 0x9E3779B97F4A7C15) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def seeded_hash(seed: int, *words: int) -> int:
    """The sheet's seeded hash of integer values: mix(seed), then mix(h xor word) each."""
    h = mix(seed & MASK)
    for word in words:
        h = mix(h ^ (word & MASK))
    return h


def round_half_up(x: float) -> int:
    return math.floor(x + 0.5)


Row = dict[str, Any]


@dataclass
class Fold:
    train: list[int] = field(default_factory=list)  # row indices
    candidates: list[int] = field(default_factory=list)
    test: list[int] = field(default_factory=list)
    dropped: dict[str, int] = field(
        default_factory=lambda: {"cold_users": 0, "cold_items": 0, "seen": 0}
    )
    only_train: int = 0  # users with train rows and no test candidate (of the fold's users)
    ties: int | None = None
    share: float = 0.0


def reference_split(
    rows: Sequence[Row],
    method: str,
    *,
    time: str | None = "t",
    n: int | None = None,
    test_share: float | None = None,
    at: Any = None,
    n_folds: int | None = None,
    window: Any = None,
    end: Any = None,
    order: str = "time",
    ties: str = "item",
    min_train: int = 1,
    cold_users: str = "drop",
    cold_items: str = "drop",
    seen: str = "drop",
    seed: int = 0,
) -> list[Fold]:
    """Each fold's train and kept test row indices, candidates and report counts.

    ``rows`` hold integer ``user`` and ``item`` and (when ``time``) an integer time.
    """

    if method in ("last_n", "user_kfold") and n is None and test_share is None:
        n = 1  # the sheet's default for last_n; the package's for user_kfold (stated)

    def event_of(r: Row) -> tuple[Any, ...]:
        return (r["user"], r["item"], r[time]) if time else (r["user"], r["item"])

    def event_hash(e: tuple[Any, ...]) -> int:
        return seeded_hash(seed, *e)

    events: dict[tuple[Any, ...], list[int]] = defaultdict(list)
    for index, r in enumerate(rows):
        events[event_of(r)].append(index)
    by_user: dict[Any, list[tuple[Any, ...]]] = defaultdict(list)
    for e in events:
        by_user[e[0]].append(e)

    def per_user_order(user_events: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        """The user's events, first to go to test first."""
        if order == "random":
            return sorted(user_events, key=lambda e: (event_hash(e), e[1], e[2:]))
        # last = latest time; at one time the larger item (or hash) is the later
        if ties == "random":
            return sorted(user_events, key=lambda e: (e[2], event_hash(e), e[1]), reverse=True)
        return sorted(user_events, key=lambda e: (e[2], e[1]), reverse=True)

    def quota(count: int) -> int:
        wanted = n if n is not None else round_half_up(test_share * count)  # type: ignore[operator]
        return max(0, min(wanted, count - min_train))

    folds: list[tuple[set[tuple[Any, ...]], set[tuple[Any, ...]], set[Any]]] = []
    # each fold: (train events, candidate events, population users for only_train)
    all_events = set(events)
    users = set(by_user)
    if method in ("last_n", "ratio"):
        chosen: set[tuple[Any, ...]] = set()
        for user_events in by_user.values():
            chosen |= set(per_user_order(user_events)[: quota(len(user_events))])
        folds.append((all_events - chosen, chosen, users))
    elif method == "user_kfold":
        f_count = n_folds or 5
        dealt = sorted(users, key=lambda u: (seeded_hash(seed, u), u))
        fold_of = {u: i % f_count for i, u in enumerate(dealt)}
        for f in range(f_count):
            chosen = set()
            for user, user_events in by_user.items():
                if fold_of[user] == f:
                    chosen |= set(per_user_order(user_events)[: quota(len(user_events))])
            folds.append((all_events - chosen, chosen, {u for u in users if fold_of[u] == f}))
    elif method == "time":
        if at is not None:
            chosen = {e for e in all_events if e[2] >= at}
        else:
            times = sorted(e[2] for e in all_events)
            cut = times[math.floor((1 - test_share) * len(times))]  # type: ignore[operator]
            chosen = {e for e in all_events if e[2] >= cut}
        folds.append((all_events - chosen, chosen, users))
    elif method == "random":
        k = round_half_up(test_share * len(all_events))  # type: ignore[operator]
        chosen = set(sorted(all_events, key=event_hash)[:k])
        folds.append((all_events - chosen, chosen, users))
    elif method == "time_windows":
        assert n_folds is not None
        last = max(e[2] for e in all_events) if end is None else end
        for f in range(n_folds):
            left = last - (n_folds - f) * window
            right = last - (n_folds - f - 1) * window
            chosen = {e for e in all_events if left < e[2] <= right}
            train = {e for e in all_events if e[2] <= left}
            folds.append((train, chosen, users))
    else:
        raise AssertionError(method)

    out = []
    for train_events, chosen, population in folds:
        fold = Fold()
        train_users = {e[0] for e in train_events}
        train_items = {e[1] for e in train_events}
        train_pairs = {e[:2] for e in train_events}
        for e in sorted(train_events):
            fold.train.extend(events[e])
        for e in sorted(chosen):
            fold.candidates.extend(events[e])
            reason = None
            if cold_users == "drop" and e[0] not in train_users:
                reason = "cold_users"
            elif cold_items == "drop" and e[1] not in train_items:
                reason = "cold_items"
            elif seen == "drop" and e[:2] in train_pairs:
                reason = "seen"
            if reason is None:
                fold.test.extend(events[e])
            else:
                fold.dropped[reason] += len(events[e])
        candidate_users = {e[0] for e in chosen}
        fold.only_train = len((train_users & population) - candidate_users)
        if time:
            train_at = {(e[0], e[2]) for e in train_events}
            fold.ties = sum(len(events[e]) for e in chosen if (e[0], e[2]) in train_at)
        total = len(train_events) + len(chosen)
        fold.share = len(chosen) / total if total else math.nan
        out.append(fold)
    return out
