"""The column names a call works with, validated once, up front."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from frame_metrics.errors import InvalidOptionError
from frame_metrics.keywords import ROLES

__all__ = ["RESERVED_PREFIX", "Columns", "as_names", "check_roles", "key_roles"]


def as_names(value: str | Sequence[str] | None, what: str) -> tuple[str, ...]:
    """Normalise a column name or list of names to a tuple.

    Examples
    --------
    >>> as_names(["user", "session"], "user")
    ('user', 'session')
    >>> as_names(3, "user")
    Traceback (most recent call last):
    ...
    frame_metrics.errors.InvalidOptionError: user: expected a column name or a list of column names, got 3
    """
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, Sequence) and all(isinstance(v, str) for v in value):
        names = tuple(value)
        if len(set(names)) != len(names):
            raise InvalidOptionError(
                f"expected distinct column names, got {list(names)!r}", option=what
            )
        return names
    raise InvalidOptionError(
        f"expected a column name or a list of column names, got {value!r}", option=what
    )


@dataclass(frozen=True)
class Columns:
    """Which columns hold the user key, item, rank or score, relevance and groups.

    One field per built-in row of :data:`frame_metrics.keywords.ROLES` (a test holds
    them equal), each the column read by default; ``more``: the columns of roles that
    families outside the package registered, as (role, column) pairs. ``user`` may be
    several columns (a composite key such as user + session); ``by`` columns split the
    evaluation into independent ones (model, segment, fold); ``sample`` tells apart
    several rankings of one user in recs (a stochastic system's samples, for expected
    exposure), or is None: one ranking per user.
    """

    user: tuple[str, ...] = ("user",)
    item: str = "item"
    rank: str = "rank"
    score: str | None = None
    relevance: str = "relevance"
    prediction: str = "prediction"
    by: tuple[str, ...] = ()
    sample: str | None = None
    features: str = "features"
    #: The group column of ``item_groups`` (exposure and provider fairness).
    group: str = "group"
    #: Optional weight columns: of a long ``item_features`` frame (w(i, g)), of ``train``
    #: (w_ui, miscalibration's history weight).
    feature_weight: str | None = None
    history_weight: str | None = None
    more: tuple[tuple[str, str | None], ...] = ()

    @staticmethod
    def of(values: Mapping[str, object]) -> Columns:
        """The columns of evaluate's column keywords (absent or None: the role's default).

        Examples
        --------
        >>> Columns.of({"user": ["user", "session"], "rank": None}).user
        ('user', 'session')
        >>> Columns.of({"item": 3})
        Traceback (most recent call last):
        ...
        frame_metrics.errors.InvalidOptionError: item: expected a column name, got 3
        """
        builtin: dict[str, Any] = {}
        more: list[tuple[str, str | None]] = []
        for row in ROLES:
            value = values.get(row.name, row.default)
            if value is None:
                value = row.read_as
            if row.several:
                value = as_names(value, row.name)  # type: ignore[arg-type]
            elif value is not None and not isinstance(value, str):
                expected = "a column name or None" if row.optional else "a column name"
                raise InvalidOptionError(f"expected {expected}, got {value!r}", option=row.name)
            if row.builtin:
                builtin[row.name] = value
            elif not isinstance(value, tuple):  # a registered role names one column
                more.append((row.name, value))
        return Columns(**builtin, more=tuple(more))

    def __post_init__(self) -> None:
        if not self.user:
            raise InvalidOptionError(
                "expected at least one column name, got an empty list", option="user"
            )
        for row in ROLES:
            if not row.builtin or row.several:
                continue
            value = getattr(self, row.name)
            if row.optional and value is None:
                continue
            if not isinstance(value, str):
                expected = "a column name or None" if row.optional else "a column name"
                raise InvalidOptionError(f"expected {expected}, got {value!r}", option=row.name)
        clash = set(self.user) & set(self.by)
        if clash or self.item in self.user or self.item in self.by:
            raise InvalidOptionError(
                "expected columns distinct from the user key and item, got "
                f"user={list(self.user)!r}, item={self.item!r}, by={list(self.by)!r}",
                option="by",
                columns=sorted(clash | ({self.item} & {*self.user, *self.by})),
            )

    def column(self, role: str) -> str | None:
        """The column of a role, built-in or registered by a family outside the package.

        Examples
        --------
        >>> Columns(more=(("price", "cost"),)).column("price"), Columns().column("item")
        ('cost', 'item')
        """
        if role in self.__dataclass_fields__ and role != "more":
            value = getattr(self, role)
            return value if isinstance(value, str) or value is None else None
        found = dict(self.more)
        if role not in found:
            raise KeyError(role)
        return found[role]

    @property
    def order(self) -> tuple[str, str]:
        """The role and column that rank recs: ``("score", score)`` when given, else rank.

        Examples
        --------
        >>> Columns().order, Columns(score="s").order
        (('rank', 'rank'), ('score', 's'))
        """
        return ("score", self.score) if self.score is not None else ("rank", self.rank)

    @property
    def keys(self) -> list[str]:
        """The group key of one evaluated user: ``by`` columns, then the user key."""
        return [*self.by, *self.user]

    @property
    def ranking(self) -> list[str]:
        """The key of one ranking: :attr:`keys`, then ``sample`` when given.

        Examples
        --------
        >>> Columns().ranking, Columns(sample="draw").ranking
        (['user'], ['user', 'draw'])
        """
        return [*self.keys, *([self.sample] if self.sample is not None else [])]


def key_roles(user: Sequence[str], by: Sequence[str]) -> dict[str, str]:
    """{role: column} of a user key and ``by`` columns, a role of several columns indexed.

    Examples
    --------
    >>> key_roles(["user", "session"], ["model"])
    {'user[0]': 'user', 'user[1]': 'session', 'by': 'model'}
    """
    roles = {f"user[{i}]" if len(user) > 1 else "user": u for i, u in enumerate(user)}
    roles |= {f"by[{i}]" if len(by) > 1 else "by": b for i, b in enumerate(by)}
    return roles


#: The prefix of the engine's own column names; no column a caller names may carry it.
RESERVED_PREFIX = "_fm_"


def check_roles(
    frames: dict[str, dict[str, str]],
    outputs: dict[str, str],
    output_roles: Collection[str] = ("user", "by"),
) -> None:
    """Each column plays one role per frame, none is reserved, none is an output's name.

    ``frames`` maps a frame's label to {role: column} (a role such as ``"user"`` or
    ``"rank"``); ``outputs`` maps an output column's name to what it holds.
    ``output_roles``: the roles whose columns appear in the output next to those (the
    key roles user and by, by default; an indexed role ``"by[1]"`` is its role's), so
    that their names must differ from the outputs'.

    Examples
    --------
    >>> check_roles({"recs": {"user": "rank", "rank": "rank"}}, {})
    Traceback (most recent call last):
    ...
    frame_metrics.errors.InvalidOptionError: user and rank: expected different columns of recs, got 'rank' for both
    >>> check_roles({"item_groups": {"group": "exposure"}}, {"exposure": "exposure"}, ["group"])
    Traceback (most recent call last):
    ...
    frame_metrics.errors.InvalidOptionError: group: expected a column name other than the output column 'exposure' (exposure), got 'exposure'; rename the column
    """
    for label, roles in frames.items():
        seen: dict[str, str] = {}
        for role, column in roles.items():
            if column.startswith(RESERVED_PREFIX):
                raise InvalidOptionError(
                    f"{role}: expected a column name that does not start with "
                    f"{RESERVED_PREFIX!r} (frame_metrics' own columns), got {column!r}",
                    frame=label,
                    columns=[column],
                )
            if column in seen:
                raise InvalidOptionError(
                    f"{seen[column]} and {role}: expected different columns of {label}, "
                    f"got {column!r} for both",
                    frame=label,
                    columns=[column],
                )
            seen[column] = role
            if role.split("[")[0] in output_roles and column in outputs:
                raise InvalidOptionError(
                    f"{role}: expected a column name other than the output column "
                    f"{column!r} ({outputs[column]}), got {column!r}; rename the column",
                    frame=label,
                    columns=[column],
                )
