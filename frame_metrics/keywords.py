"""evaluate's keywords, declared once: the columns, the extra frames, how the call runs.

Four tables make ``fm.evaluate``'s signature and the Parameters of its docstring:
:data:`SETTINGS` (what to compute and how the call runs), :data:`ROLES` (the column
keywords), the options (:data:`frame_metrics.options.OPTIONS`) and :data:`EXTRA_INPUTS`
(the frames besides recs and truth). :func:`signature_lines` and :func:`parameters_doc`
write them out; ``docs/gen/gen_api.py`` puts that text in :mod:`frame_metrics.api` (an
explicit signature, which editors and type checkers read) and ``tests/test_keywords.py``
holds the two equal. :class:`~frame_metrics.columns.Columns`, ``build_spec``, the
command line's column and file flags and the runners' frame handling loop over the
same rows.

A family outside the package adds its frames and columns with :func:`register_input`
and :func:`register_role` (see :mod:`frame_metrics.extend`): ``evaluate`` takes them as
keywords (its ``**more``), the command line as flags, every runner as it takes the
package's own.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from frame_metrics.errors import InvalidOptionError
from frame_metrics.options import NOT_GIVEN, OPTIONS, Option

__all__ = [
    "EXTRA_INPUTS",
    "ROLES",
    "SETTINGS",
    "ExtraInput",
    "Keyword",
    "Role",
    "Setting",
    "extra_input",
    "keywords",
    "parameters_doc",
    "register_input",
    "register_role",
    "role",
    "signature_lines",
]


@dataclass(frozen=True)
class Setting:
    """A keyword that is neither a column, an option nor a frame: what to compute, how."""

    name: str
    annotation: str
    default: Any
    doc: str


@dataclass(frozen=True)
class Role:
    """A column keyword: the column of one or more frames that plays a role.

    ``default``: evaluate's default (None: not read unless given, or ``column``);
    ``column``: the column read when the keyword is None (``rank``: ``"rank"``), else
    the default; ``several``: one name or a list of them (a composite user key, ``by``);
    ``flag``, ``help``, ``metavar``: the command line's option (``help`` without the
    default, which the parser adds).
    """

    name: str
    annotation: str
    default: str | None
    doc: str
    flag: str
    help: str
    metavar: str = "COL"
    column: str | None = None
    several: bool = False
    #: The keyword is part of the package's signature (False: registered by a family
    #: outside the package, taken by evaluate's ``**more``).
    builtin: bool = True

    @property
    def dest(self) -> str:
        """The command line's attribute of the flag's value (``--user-col``: ``user_col``)."""
        return self.flag.removeprefix("--").replace("-", "_")

    @property
    def optional(self) -> bool:
        """Whether None is a value (a column read only when named)."""
        return self.default is None and self.column is None

    @property
    def read_as(self) -> str | None:
        """The column read when the keyword is not given."""
        return self.column if self.column is not None else self.default


@dataclass(frozen=True)
class ExtraInput:
    """A frame a call may pass besides recs and truth: one row of :data:`EXTRA_INPUTS`.

    ``keyed``: its rows belong to users (train, a baseline), so a partitioned run
    splits it by user with recs; otherwise it is an item table every partition gets
    whole. ``reads``: the roles of the columns read (``"by"``: each ``by`` column it
    has, ``"user"``, ``"item"``, ``"order"``: the rank or score column, or a role of
    :data:`ROLES`); families may read more (``Family.reads``). ``needs``: the entries of
    ``Metric.needs`` it provides. ``what``: how a message names it; ``doc``: evaluate's
    docstring paragraph; ``help``: the command line's (its flag is the name, ``_``
    written ``-``).
    """

    name: str
    keyed: bool
    reads: tuple[str, ...]
    needs: frozenset[str]
    what: str
    doc: str
    help: str
    builtin: bool = True

    @property
    def flag(self) -> str:
        """The command line's option naming the file: ``--`` and the name."""
        return "--" + self.name.replace("_", "-")


class Keyword(NamedTuple):
    """One keyword of evaluate as its signature and docstring write it."""

    name: str
    annotation: str
    default: str
    doc: str


SETTINGS_BEFORE: tuple[Setting, ...] = (
    Setting(
        "metrics",
        "str | Iterable[str] | None",
        None,
        'Names (``"ndcg"``, ``"map"`` as an alias of ``"ap"``) or names with a cutoff '
        '(``"ndcg@10"``); a name may carry its own options, which replace the call\'s for it '
        'alone (``"ap(ap_denominator=relevant)@10"``, ``"ndcg(convention=rectools)@5"``, '
        '``"ndcg(gain={2: 3, 3: 7})"``). Each column is named by the string as written, '
        '``"@<k>"`` appended per k to a name without its cutoff (``"map"`` with ``k=10`` gives '
        "``map@10``), so two strings of one computation give two columns. trec_eval's and "
        'ir_measures\' names (``"P_10"``, ``"ndcg_cut_10"``, ``"recip_rank"``, ``"nDCG@10"``, '
        '``"RR"``, ``"ERR@10"``) mean those measures as the tools define them: the metric '
        'under ``convention="trec_eval"`` (see :mod:`frame_metrics.measure_names`). Default: '
        "precision, recall, f1, hit_rate, mrr, ap, ndcg. Ranking metrics, beyond-accuracy "
        "metrics (novelty, diversity, serendipity, arp, aplt, coverage, personalization, gini) "
        "and rating errors (mse, rmse, mae: named without a cutoff) mix freely in one call; "
        "``frame_metrics.REGISTRY`` lists them with their formulas.",
    ),
    Setting(
        "k",
        "int | Iterable[int] | None",
        None,
        "A cutoff or a list of them, for every metric named without one (with every metric "
        "naming its own or taking none, ``k`` is ignored with a warning).",
    ),
    Setting(
        "aggregate",
        "bool",
        False,
        "``False``: one row per evaluated user. ``True``: one row per ``by`` group with "
        "``n_users`` and the mean of every metric over the users it is defined for: ranking "
        "metrics and serendipity over the evaluated users (spec section 3); novelty, arp, aplt "
        "over users with a recommendation within k; diversity over users with at least two. "
        "Rating errors are pooled over all pairs of the group (the usual definition), with "
        "``n_pairs``. Corpus metrics (coverage, personalization, gini) have one value per "
        "group, so they need ``aggregate=True``. ``n_users`` counts the users with a value for "
        "at least one per-user metric. Every group the inputs show (a recommendation within "
        "the largest cutoff, or a truth row) has its row: with no user evaluated, ``n_users`` "
        "is 0 and the means are null (corpus metrics keep their value); empty input gives no "
        "row. A bool: any other value is an error.",
    ),
)

#: The preset, between the columns and the options it sets.
CONVENTION = Setting(
    "convention",
    "str | None",
    None,
    'A peer\'s conventions by name: ``"trec_eval"``, ``"ranx"``, ``"rectools"``, '
    '``"recommenders"``, ``"sklearn"``, ``"torchmetrics"`` or ``"replay"`` set every '
    "option below in which that peer differs from the spec (``fm.conventions()`` lists "
    "each setting with the peer's version and source). Options passed explicitly override "
    "the preset. Every option below defaults to ``None``: the convention's value, else the "
    "spec's default named here.",
)

SETTINGS_AFTER: tuple[Setting, ...] = (
    Setting(
        "validate",
        "bool",
        True,
        "Check values (nulls, negative relevance, bad or repeated ranks, duplicates) before "
        "computing; for a LazyFrame this is one aggregate pass over the inputs. Also checks "
        "that the ids of recs and truth meet (see Warns).",
    ),
    Setting(
        "buckets",
        'int | Literal["auto"] | None',
        "auto",
        "Evaluate the users in this many buckets, one after another, so that peak memory falls "
        "with the number of buckets (inputs larger than memory: ``pl.scan_parquet`` of a "
        'billion rows). ``"auto"`` (the default): one bucket per 250M rows of a LazyFrame '
        "``recs`` (counted from parquet metadata), else one. With more than one bucket the "
        "work is done when ``evaluate`` is called, even for a LazyFrame; a single integer user "
        "column is split into id ranges (files written in user order are read once in all), "
        "other keys by a hash (each bucket reads every row); only buckets holding a user are "
        "evaluated, so never more than the users. Per-user values and means are the one-pass "
        "values, to the bit.",
    ),
    Setting(
        "progress",
        "bool",
        False,
        "Show a progress bar over the buckets (on stderr, or tqdm's when installed) once the "
        "work has taken a few seconds.",
    ),
)

#: Every setting keyword (``convention`` included).
SETTINGS: tuple[Setting, ...] = (*SETTINGS_BEFORE, CONVENTION, *SETTINGS_AFTER)

#: The column keywords, in the order evaluate takes them.
ROLES: list[Role] = [
    Role(
        "user",
        "str | Sequence[str]",
        "user",
        "The user column of every frame, or a list of columns (a composite key such as user "
        "+ session).",
        "--user-col",
        "user key; comma-separated for a composite key such as user,session",
        metavar="COLS",
        several=True,
    ),
    Role("item", "str", "item", "The item column of every frame.", "--item-col", "item id"),
    Role(
        "rank",
        "str | None",
        None,
        'The rank column of ``recs`` (1 = top; ``None``: ``"rank"``). With ``score`` the '
        "score ranks, and a ``rank`` given too is not read (a warning says so).",
        "--rank-col",
        "rank, 1 = top",
        column="rank",
    ),
    Role(
        "score",
        "str | None",
        None,
        "A score column of ``recs`` to derive ranks from instead: score descending, ties "
        "broken by ``ties`` (item ascending by default).",
        "--score-col",
        "score, higher = better: ranks are derived (equal scores: --ties, default item ascending)",
    ),
    Role(
        "relevance",
        "str",
        "relevance",
        "The relevance column of ``truth`` (the true rating, for rating metrics). Without "
        "``truth``, a column of ``recs``.",
        "--relevance-col",
        "relevance (or true rating) in TRUTH or the long table",
    ),
    Role(
        "prediction",
        "str",
        "prediction",
        "The predicted rating column of ``recs``, for rating metrics: compared with "
        "``relevance`` over the (user, item) pairs present in both frames; pairs on one "
        "side only are counted by :func:`diagnose`.",
        "--prediction-col",
        "predicted rating in RECS, for mse/rmse/mae",
    ),
    Role(
        "by",
        "str | Sequence[str] | None",
        None,
        "Columns (model, segment, fold) that split the evaluation into independent ones.",
        "--by",
        "comma-separated columns (model, segment, fold) evaluated independently",
        metavar="COLS",
        several=True,
    ),
    Role(
        "sample",
        "str | None",
        None,
        "A column of ``recs`` telling apart several rankings of one user: the samples of a "
        "stochastic system, for expected exposure (``ee_loss``, ``ee_disparity``, "
        "``ee_relevance``: each user's exposure is the mean over the user's samples, the "
        "distinct values of this column among the user's rows). Each (user, sample) is one "
        "ranking, by ``rank`` or by ``score``; an item appears once per ranking. Only these "
        "metrics read it (others are refused with it), and it needs ``truth``.",
        "--sample-col",
        "a column of RECS telling apart several rankings of one user (a stochastic "
        "system's samples), for ee_loss, ee_disparity and ee_relevance",
    ),
    Role(
        "features",
        "str",
        "features",
        "The column of ``item_features`` holding each item's features: a list of categories "
        "(Jaccard similarity) or a numeric vector (cosine).",
        "--features-col",
        "list of categories or numeric vector in --item-features",
    ),
    Role(
        "group",
        "str",
        "group",
        "The group column of ``item_groups``.",
        "--group-col",
        "the group column of --item-groups",
    ),
    Role(
        "feature_weight",
        "str | None",
        None,
        "A numeric column of a long ``item_features`` frame (one row per (item, category)) "
        "holding w(i, g), for miscalibration; None: w = 1 per row. An item's category "
        "distribution is w(i, g) / Σ_g w(i, g).",
        "--feature-weight",
        "weight w(item, category) in a long --item-features file (one row per item and "
        "category), for miscalibration (default: 1 per row)",
    ),
    Role(
        "history_weight",
        "str | None",
        None,
        "A numeric column of ``train`` holding w_ui (e.g. recency), the weight of an item "
        "in the user's history distribution for miscalibration; None: 1. With it, a (user, "
        "item) pair may have one train row only (which weight would count is ambiguous "
        "otherwise).",
        "--history-weight",
        "weight of each (user, item) in --train for miscalibration's history, e.g. recency "
        "(default: 1; a repeated pair is then an error)",
    ),
]

#: Every extra input, in the order evaluate takes them (and converts them).
EXTRA_INPUTS: list[ExtraInput] = [
    ExtraInput(
        "catalog",
        keyed=False,
        reads=("by", "item"),
        needs=frozenset({"catalog"}),
        what="a frame of the catalog's items, in the item column",
        doc="The catalog's items (a frame with the ``item`` column) for coverage and gini; "
        "every recommended item must be in it. Default: the items seen in ``recs`` (every "
        "rank), ``truth`` and ``train``.",
        help="the catalog's items (item column) for coverage and gini (default: the items "
        "seen in the inputs)",
    ),
    ExtraInput(
        "train",
        keyed=True,
        reads=("by", "user", "item"),
        needs=frozenset({"popularity", "history", "train"}),
        what="reference interactions with the user and item columns, usually the train split",
        doc="Reference interactions (the user and item columns), usually the train split: "
        "item popularity for novelty, arp and aplt (distinct users per item), and the users' "
        'history for ``unexpected="history"``.',
        help="reference interactions (user, item): popularity for novelty, arp, aplt; "
        "history for --unexpected history",
    ),
    ExtraInput(
        "item_features",
        keyed=False,
        reads=("by", "item", "features"),
        needs=frozenset({"item_features"}),
        what="one row per item with the item column and the features column",
        doc="One row per item with the ``item`` column and a ``features`` column, for diversity.",
        help="item and --features-col per item, for diversity (a list column: parquet)",
    ),
    ExtraInput(
        "baseline",
        keyed=True,
        reads=("by", "user", "item", "order"),
        needs=frozenset({"baseline"}),
        what="a baseline model's recommendations with the user, item and rank/score columns",
        doc="Another model's recommendations (user, item, and rank or score) for serendipity.",
        help="a baseline model's recommendations (user, item, rank or score) for serendipity",
    ),
    ExtraInput(
        "item_groups",
        keyed=False,
        reads=("by", "item"),
        needs=frozenset({"item_groups"}),
        what="one row per (item, group) with the item column and the group column",
        doc="One row per (item, group) with the ``item`` column and the ``group`` column, for "
        "the exposure metrics (an item in several groups counts in each; an item in none is "
        "left out and counted by :func:`diagnose`). Default: aplt's ``head`` and ``tail`` "
        "from ``train`` (an item absent from train is ``tail``).",
        help="item and --group-col, one row per (item, group), for exposure_parity and "
        "list_parity (default: aplt's head and tail groups from --train)",
    ),
    # No metric needs it: the prepared lists read it (spec section 10, seen items).
    ExtraInput(
        "exclude",
        keyed=True,
        reads=("by", "user", "item"),
        needs=frozenset(),
        what="(user, item) pairs removed from the recommendations before the cutoff, "
        "usually the train split",
        doc="(user, item) pairs to remove from the recommendations before the cutoff, usually "
        "the train split (items the user already consumed): a frame of any kind ``recs`` "
        "may be (on Spark or Dask recs, one of that engine or a local one) with the "
        "``user`` and ``item`` columns; other columns are not read, a repeated pair is one. "
        "The remaining items keep their order and move up, so ``@k`` counts k items the "
        "user could still choose: by ``rank``, each moves up by the excluded items ranked "
        "above it (a list ranked 1, 2, ... is re-ranked 1, 2, ...; an empty position of a "
        "list with gaps stays empty); by ``score``, the rest is ranked by score under "
        "``ties``. Each ranking of a ``sample`` column, and serendipity's ``baseline`` "
        "lists, lose the same pairs. The pairs apply to every ``by`` group, unless "
        "``exclude`` carries ``by`` columns (a fold's train split for its fold): then to "
        "their group alone, as for ``train``. Truth is not touched. A user whose every item "
        "is excluded keeps an empty list (and scores 0 where evaluated). Without ``truth``, "
        "a long table's rows of excluded pairs stop being recommendations (their rank is "
        "dropped, the rest of the list moves up) and keep their relevance. Rating metrics "
        "(mse, rmse, mae) read no list: alone they ignore it, with a warning. "
        ":func:`diagnose` counts the rows removed and the lists it left shorter than k. An "
        "empty frame changes nothing.",
        help="(user, item) pairs removed from RECS before the cutoff, usually the train split "
        "(items already seen): the rest of each list moves up, so @k counts k items the user "
        "could still choose; other columns are not read",
    ),
]

#: The keyword taking the frames and columns families outside the package add.
MORE = Keyword(
    "**more",
    "object",
    "",
    "The frames and columns of families added outside the package (see "
    ":mod:`frame_metrics.extend`): one keyword per input and column role they register. "
    "Any other keyword is an error.",
)


def role(name: str) -> Role:
    """The row of a column keyword.

    Examples
    --------
    >>> role("rank").read_as, role("score").optional, role("user").several
    ('rank', True, True)
    """
    for row in ROLES:
        if row.name == name:
            return row
    raise KeyError(name)


def extra_input(name: str) -> ExtraInput:
    """The row of an extra input.

    Examples
    --------
    >>> extra_input("train").keyed, extra_input("catalog").flag
    (True, '--catalog')
    """
    for row in EXTRA_INPUTS:
        if row.name == name:
            return row
    raise KeyError(name)


def _taken() -> set[str]:
    """Every keyword name in use: settings, columns, options, frames."""
    return {
        *(s.name for s in SETTINGS),
        *(r.name for r in ROLES),
        *(o.name for o in OPTIONS),
        *(e.name for e in EXTRA_INPUTS),
        "recs",
        "truth",
    }


def register_role(row: Role) -> None:
    """Add a column keyword a family reads (from its own module).

    A row with ``builtin=True`` (the default) is the package's own: a package family's,
    written into evaluate's explicit signature by ``docs/gen/gen_api.py``. A family
    outside the package registers it with ``builtin=False`` (``extend.register_family``
    does): evaluate takes it through ``**more``.

    Examples
    --------
    >>> register_role(Role("user", "str", "u", "", "--user-col", ""))
    Traceback (most recent call last):
    ...
    frame_metrics.errors.InvalidOptionError: role: expected a keyword evaluate does not take yet, got 'user'
    """
    if row.name in _taken():
        raise InvalidOptionError(
            f"expected a keyword evaluate does not take yet, got {row.name!r}", option="role"
        )
    ROLES.append(row)


def register_input(row: ExtraInput) -> None:
    """Add an extra input a family reads (from its own module).

    ``builtin`` as for :func:`register_role`. Its ``reads`` name roles of :data:`ROLES` (``"by"``, ``"user"``, ``"item"``,
    ``"order"`` or a registered column keyword).
    """
    if row.name in _taken():
        raise InvalidOptionError(
            f"expected a keyword evaluate does not take yet, got {row.name!r}", option="input"
        )
    known = {"by", "user", "item", "order", *(r.name for r in ROLES)}
    unknown = sorted(set(row.reads) - known)
    if unknown:
        raise InvalidOptionError(
            f"expected roles among {', '.join(sorted(known))}, got {', '.join(unknown)}",
            option=f"{row.name}.reads",
        )
    EXTRA_INPUTS.append(row)


def unregister(name: str) -> None:
    """Remove a keyword a family outside the package registered (a test's teardown)."""
    ROLES[:] = [r for r in ROLES if r.builtin or r.name != name]
    EXTRA_INPUTS[:] = [e for e in EXTRA_INPUTS if e.builtin or e.name != name]


def _source(value: object) -> str:
    """A default as the signature's source writes it.

    Examples
    --------
    >>> _source("user"), _source(None), _source(0.2), _source(NOT_GIVEN)
    ('"user"', 'None', '0.2', 'NOT_GIVEN')
    """
    if value is NOT_GIVEN:
        return "NOT_GIVEN"
    if isinstance(value, str):
        return f'"{value}"'
    return repr(value)


def _option_keyword(row: Option) -> Keyword:
    """An option as evaluate takes it: a preset may set it, so None means "not given"."""
    # threshold: an explicit None says rel > 0 is meant (spec section 8), so unset differs.
    default = NOT_GIVEN if row.name == "threshold" else (None if row.preset else row.default)
    return Keyword(row.name, row.annotation, _source(default), row.api_doc)


def keywords(*, builtin: bool = True) -> list[Keyword]:
    """Evaluate's keyword-only parameters in order (``builtin``: the package's only).

    Examples
    --------
    >>> [k.name for k in keywords()][:5]
    ['metrics', 'k', 'aggregate', 'user', 'item']
    """

    def of(rows: Sequence[Setting | Role | ExtraInput]) -> list[Keyword]:
        out = []
        for row in rows:
            if isinstance(row, Setting):
                out.append(Keyword(row.name, row.annotation, _source(row.default), row.doc))
            elif row.builtin or not builtin:
                annotation = row.annotation if isinstance(row, Role) else "object | None"
                default = row.default if isinstance(row, Role) else None
                out.append(Keyword(row.name, annotation, _source(default), row.doc))
        return out

    return [
        *of(SETTINGS_BEFORE),
        *of(ROLES),
        *of([CONVENTION]),
        *(_option_keyword(o) for o in OPTIONS),
        *of(EXTRA_INPUTS),
        *of(SETTINGS_AFTER),
    ]


def signature_lines() -> list[str]:
    """Evaluate's keyword-only parameters as its source writes them (after ``*,``)."""
    lines = [f"    {k.name}: {k.annotation} = {k.default}," for k in keywords()]
    return [*lines, f"    {MORE.name}: {MORE.annotation},"]


def parameters_doc(indent: int = 4) -> str:
    """The Parameters entries of evaluate's keywords, wrapped as its docstring holds them.

    ``indent``: the docstring's indentation (a function's body: 4).

    Examples
    --------
    >>> print(parameters_doc().splitlines()[0])
        metrics
    """
    pad = " " * indent
    entries = []
    for k in [*keywords(), MORE]:
        body = wrap(k.doc, width=92 - indent - 4)  # 92 wide with the entry's indent
        entries.append(pad + k.name + "\n" + textwrap.indent(body, pad + "    "))
    return "\n".join(entries)


#: Stands for a space inside an inline literal while a text is wrapped.
_KEEP = "\x00"


def wrap(text: str, width: int) -> str:
    """A paragraph wrapped at ``width``, never inside an inline literal (````...````).

    Examples
    --------
    >>> print(wrap("a ``b c`` d", 6))
    a
    ``b c``
    d
    """
    parts = " ".join(text.split()).split("``")
    # Odd parts are inside ``...``: their spaces do not break.
    kept = "``".join(p.replace(" ", _KEEP) if i % 2 else p for i, p in enumerate(parts))
    filled = textwrap.fill(kept, width=width, break_on_hyphens=False, break_long_words=False)
    return filled.replace(_KEEP, " ")
