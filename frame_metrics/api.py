"""The function form of the package: ``evaluate`` and ``diagnose`` on any supported frame."""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeVar, cast

from frame_metrics import diagnosis, engine
from frame_metrics.diagnostics import Diagnostics
from frame_metrics.errors import (
    InvalidOptionError,
    Pass,
    SmallSampleWarning,
    UnknownKeywordError,
    warn,
)
from frame_metrics.keywords import EXTRA_INPUTS, ROLES, keywords
from frame_metrics.options import (
    NOT_GIVEN,
    OPTIONS,
    ApDenominator,
    CalibrationWeight,
    Divergence,
    DuplicatePolicy,
    EmptyPolicy,
    Exposure,
    GainName,
    GainScope,
    Idcg,
    Ips,
    MrrCutoff,
    NotGiven,
    ParityTargetName,
    RbpGain,
    RelevantSet,
    Similarity,
    Ties,
    Unexpected,
    Users,
    ZeroIdeal,
)
from frame_metrics.spec import Spec, build_spec

if TYPE_CHECKING:
    import polars as pl

__all__ = ["diagnose", "evaluate", "means_and_per_user"]

FrameT = TypeVar("FrameT")
T = TypeVar("T")


def evaluate(
    recs: FrameT,
    truth: object | None = None,
    *,
    metrics: str | Iterable[str] | None = None,
    k: int | Iterable[int] | None = None,
    aggregate: bool = False,
    user: str | Sequence[str] = "user",
    item: str = "item",
    rank: str | None = None,
    score: str | None = None,
    relevance: str = "relevance",
    prediction: str = "prediction",
    by: str | Sequence[str] | None = None,
    sample: str | None = None,
    features: str = "features",
    group: str = "group",
    feature_weight: str | None = None,
    history_weight: str | None = None,
    convention: str | None = None,
    threshold: float | NotGiven | None = NOT_GIVEN,
    gain: GainName | Mapping[float, float] | None = None,
    gain_scope: GainScope | None = None,
    idcg: Idcg | None = None,
    ap_denominator: ApDenominator | None = None,
    mrr_cutoff: MrrCutoff | None = None,
    zero_ideal: ZeroIdeal | None = None,
    ties: Ties | None = None,
    users: Users | None = None,
    empty: EmptyPolicy | None = None,
    relevant_set: RelevantSet | None = None,
    persistence: float | None = None,
    rbp_gain: RbpGain | None = None,
    max_relevance: float | None = None,
    on_duplicate: DuplicatePolicy | None = None,
    similarity: Similarity = "auto",
    unexpected: Unexpected = "baseline",
    head_share: float = 0.2,
    exposure: Exposure | None = None,
    parity_target: ParityTargetName | Mapping[Any, float] | None = None,
    calibration_alpha: float | None = None,
    calibration_weight: CalibrationWeight | None = None,
    divergence: Divergence | None = None,
    propensity: str | None = None,
    propensity_gamma: float | None = None,
    ips: Ips = "snips",
    max_weight: float | None = None,
    catalog: object | None = None,
    train: object | None = None,
    item_features: object | None = None,
    baseline: object | None = None,
    item_groups: object | None = None,
    exclude: object | None = None,
    validate: bool = True,
    buckets: int | Literal["auto"] | None = "auto",
    progress: bool = False,
    **more: object,
) -> FrameT:
    """Evaluate recommendations against truth, per user or as means, at one or many k.

    Parameters
    ----------
    recs
        Recommendations: a polars DataFrame or LazyFrame, a pandas DataFrame, a pyarrow
        Table or any other Arrow stream (an object with ``__arrow_c_stream__``, such as a
        ``RecordBatchReader``, read once), or a DuckDB relation (``duckdb.sql(...)``). One
        row per (user, item) shown, with a ``rank`` (1 = top) or a ``score`` (higher =
        better).
        Without ``truth``, a long table that also carries ``relevance``, where a null rank
        marks a relevant item that was not recommended.
    truth
        One row per (user, item) the user is known to like, with a numeric
        ``relevance`` of 0 or more. Any supported frame kind (as for ``recs``; the kinds
        may differ: the result takes the kind of ``recs``). Truth without the ``by``
        columns applies to every ``by`` group (e.g. the same test set for every model).
    metrics
        Names (``"ndcg"``, ``"map"`` as an alias of ``"ap"``) or names with a cutoff
        (``"ndcg@10"``); a name may carry its own options, which replace the call's for it
        alone (``"ap(ap_denominator=relevant)@10"``, ``"ndcg(convention=rectools)@5"``,
        ``"ndcg(gain={2: 3, 3: 7})"``). Each column is named by the string as written,
        ``"@<k>"`` appended per k to a name without its cutoff (``"map"`` with ``k=10``
        gives ``map@10``), so two strings of one computation give two columns. trec_eval's
        and ir_measures' names (``"P_10"``, ``"ndcg_cut_10"``, ``"recip_rank"``,
        ``"nDCG@10"``, ``"RR"``, ``"ERR@10"``) mean those measures as the tools define them:
        the metric under ``convention="trec_eval"`` (see
        :mod:`frame_metrics.measure_names`). Default: precision, recall, f1, hit_rate, mrr,
        ap, ndcg. Ranking metrics, beyond-accuracy metrics (novelty, diversity, serendipity,
        arp, aplt, coverage, personalization, gini) and rating errors (mse, rmse, mae: named
        without a cutoff) mix freely in one call; ``frame_metrics.REGISTRY`` lists them with
        their formulas.
    k
        A cutoff or a list of them, for every metric named without one (with every metric
        naming its own or taking none, ``k`` is ignored with a warning).
    aggregate
        ``False``: one row per evaluated user. ``True``: one row per ``by`` group with
        ``n_users`` and the mean of every metric over the users it is defined for: ranking
        metrics and serendipity over the evaluated users (spec section 3); novelty, arp,
        aplt over users with a recommendation within k; diversity over users with at least
        two. Rating errors are pooled over all pairs of the group (the usual definition),
        with ``n_pairs``. Corpus metrics (coverage, personalization, gini) have one value
        per group, so they need ``aggregate=True``. ``n_users`` counts the users with a
        value for at least one per-user metric. Every group the inputs show (a
        recommendation within the largest cutoff, or a truth row) has its row: with no user
        evaluated, ``n_users`` is 0 and the means are null (corpus metrics keep their
        value); empty input gives no row. A bool: any other value is an error.
    user
        The user column of every frame, or a list of columns (a composite key such as user +
        session).
    item
        The item column of every frame.
    rank
        The rank column of ``recs`` (1 = top; ``None``: ``"rank"``). With ``score`` the
        score ranks, and a ``rank`` given too is not read (a warning says so).
    score
        A score column of ``recs`` to derive ranks from instead: score descending, ties
        broken by ``ties`` (item ascending by default).
    relevance
        The relevance column of ``truth`` (the true rating, for rating metrics). Without
        ``truth``, a column of ``recs``.
    prediction
        The predicted rating column of ``recs``, for rating metrics: compared with
        ``relevance`` over the (user, item) pairs present in both frames; pairs on one side
        only are counted by :func:`diagnose`.
    by
        Columns (model, segment, fold) that split the evaluation into independent ones.
    sample
        A column of ``recs`` telling apart several rankings of one user: the samples of a
        stochastic system, for expected exposure (``ee_loss``, ``ee_disparity``,
        ``ee_relevance``: each user's exposure is the mean over the user's samples, the
        distinct values of this column among the user's rows). Each (user, sample) is one
        ranking, by ``rank`` or by ``score``; an item appears once per ranking. Only these
        metrics read it (others are refused with it), and it needs ``truth``.
    features
        The column of ``item_features`` holding each item's features: a list of categories
        (Jaccard similarity) or a numeric vector (cosine).
    group
        The group column of ``item_groups``.
    feature_weight
        A numeric column of a long ``item_features`` frame (one row per (item, category))
        holding w(i, g), for miscalibration; None: w = 1 per row. An item's category
        distribution is w(i, g) / Σ_g w(i, g).
    history_weight
        A numeric column of ``train`` holding w_ui (e.g. recency), the weight of an item in
        the user's history distribution for miscalibration; None: 1. With it, a (user, item)
        pair may have one train row only (which weight would count is ambiguous otherwise).
    convention
        A peer's conventions by name: ``"trec_eval"``, ``"ranx"``, ``"rectools"``,
        ``"recommenders"``, ``"sklearn"``, ``"torchmetrics"`` or ``"replay"`` set every
        option below in which that peer differs from the spec (``fm.conventions()`` lists
        each setting with the peer's version and source). Options passed explicitly override
        the preset. Every option below defaults to ``None``: the convention's value, else
        the spec's default named here.
    threshold
        Relevance needed to count as relevant (``rel >= threshold``); default: ``rel > 0``.
        ``0``: every truth row is relevant, whatever its relevance. Left out on levels that
        look like star ratings (0.5 to 5, say), the call warns
        (:class:`~frame_metrics.errors.RelevanceWarning`); ``threshold=None`` keeps
        ``rel > 0`` and says it is meant.
    gain
        DCG gain: ``"linear"`` (default), ``"exponential"`` (2^rel - 1), ``"binary"``, or a
        trec_eval gain table ``{level: gain}`` (levels outside it keep their relevance).
    gain_scope
        ``"relevant"`` (items passing ``threshold`` gain, default) or ``"positive"`` (every
        relevance > 0 gains: trec_eval's ndcg).
    idcg
        ``"relevant"`` (the user's best relevant items, default) or ``"k"`` (k slots of gain
        1: RecTools' NDCG).
    ap_denominator
        D in AP@k: ``"min_k"`` (default), ``"relevant"``, ``"hits"`` or ``"k"``.
    mrr_cutoff
        ``"k"`` (default) or ``"none"``: the first relevant item anywhere in the list
        (trec_eval's recip_rank).
    zero_ideal
        ndcg of a user whose ideal DCG is 0 (relevant items that all gain 0): ``"zero"``
        (default, trec_eval and scikit-learn) or ``"skip"`` (no value, left out of the mean:
        Recommenders).
    ties
        Equal scores (with ``score``): ``"item"`` (item ascending, default), ``"item_desc"``
        (item descending: RePlay), ``"item_desc_text"`` (item descending compared as text:
        trec_eval's docnos), ``"input"`` (input row order: a stable sort, as Recommenders
        and ranx) or ``"average"`` (dcg, ndcg, precision, recall, f1 and hit_rate take their
        expected value over every order of the tied items). Ranks given in a ``rank`` column
        are unique within a user and never tie: a tie rule given with them (here or in a
        metric string) is ignored with a warning.
    users
        Who may be evaluated: ``"all"`` (every user seen, default), ``"truth"`` (users with
        a truth row), ``"recs"`` (users with a recommendation) or ``"both"``; then ``empty``
        decides for those without a relevant item.
    empty
        Users without a relevant item: ``"skip"`` (left out, default) or ``"zero"``.
    relevant_set
        ``"truth"`` (every relevant truth item, default) or ``"listed"`` (only those
        recommended at some rank: what torchmetrics and scikit-learn see).
    persistence
        The p of RBP browsing: rbp's, ``exposure="rbp"``'s (default 0.8) and expected
        exposure's (default 0.5).
    rbp_gain
        What a relevant item adds to rbp: ``"binary"`` (1, default), ``"relevance"`` (ranx)
        or ``"relative"`` (relevance over the user's largest: trec_eval 10.0).
    max_relevance
        err's g_max (default: the largest relevance in truth).
    on_duplicate
        A repeated (user, item) row: ``"error"`` (default) or ``"first"`` (keep the
        best-ranked recommendation, the highest-relevance truth row).
    similarity
        ``"auto"`` (from the features dtype), ``"jaccard"`` or ``"cosine"``.
    unexpected
        Serendipity's unexpected items: ``"baseline"`` (not in the baseline's top k,
        default) or ``"history"`` (not in the user's ``train`` rows).
    head_share
        aplt's long-tail cut: the short head is the most popular train items holding this
        share of train (user, item) pairs (default 0.2); the rest is the tail.
    exposure
        The browsing model of exposure_gini, exposure_parity and list_parity: the attention
        rank r gets, ``"log"`` (1/log2(r+1), default), ``"rbp"`` (p^(r-1), p =
        ``persistence``, 0.8 when unset) or ``"uniform"`` (1).
    parity_target
        The target shares of exposure_parity and list_parity: ``"catalog"`` (each item
        group's share of catalog items, default), ``"merit"`` (its share of relevant truth
        rows), ``"uniform"``, or a ``{group: share}`` table (normalised; it names every
        group, and only groups there are).
    calibration_alpha
        miscalibration's smoothing α in (0, 1) (default 0.01): the list's category
        distribution enters KL as (1 − α)·q + α·p.
    calibration_weight
        The weight of rank r in miscalibration's list distribution: ``"uniform"`` (1,
        default), ``"reciprocal"`` (1/r) or ``"log"`` (1/log2(r + 1)).
    divergence
        miscalibration's divergence: ``"kl"`` (default, Steck's smoothed KL in bits) or
        ``"js"`` (the Jensen–Shannon distance √JSD, log2, unsmoothed).
    propensity
        Propensity-scored ranking metrics (spec 9.4), for logs where popular items are
        observed more: a truth column holding each truth row's propensity P in (0, 1] (the
        chance the pair was observed), or ``"popularity"``: P_i = (n_i / max_j n_j)^((γ + 1)
        / 2) from ``train`` (n_i the distinct train users of item i over the whole frame, 1
        for an item not in train; Yang et al., RecSys 2018). Each relevant item then counts
        w = 1/P times in every ranking metric: hits@k and |R| are sums of weights, DCG gains
        and the ideal DCG's are weighted, AP's hits@r too; MRR and hit_rate are unchanged.
        With equal P per user (``ips="snips"``) or P = 1 (``"ips"``) every value equals the
        unweighted one exactly. A null P, P <= 0 or P > 1 on a truth row is an error.
        ``fm.diagnose`` reports the weights' effective sample size.
    propensity_gamma
        γ of ``propensity="popularity"`` (required there, no default; >= -1).
    ips
        ``"snips"`` (default): the weights are normalised per user to average 1 over the
        user's relevant items, w · |R| / Σ_R w (so recall is Σ_hits w / Σ_R w, Yang's SNIPS
        recall); ``"ips"``: w as it is. A metric string may set it:
        ``"recall(ips=ips)@10"``.
    max_weight
        Clip the weights 1/P at this value (before normalising them); default: none.
    catalog
        The catalog's items (a frame with the ``item`` column) for coverage and gini; every
        recommended item must be in it. Default: the items seen in ``recs`` (every rank),
        ``truth`` and ``train``.
    train
        Reference interactions (the user and item columns), usually the train split: item
        popularity for novelty, arp and aplt (distinct users per item), and the users'
        history for ``unexpected="history"``.
    item_features
        One row per item with the ``item`` column and a ``features`` column, for diversity.
    baseline
        Another model's recommendations (user, item, and rank or score) for serendipity.
    item_groups
        One row per (item, group) with the ``item`` column and the ``group`` column, for the
        exposure metrics (an item in several groups counts in each; an item in none is left
        out and counted by :func:`diagnose`). Default: aplt's ``head`` and ``tail`` from
        ``train`` (an item absent from train is ``tail``).
    exclude
        (user, item) pairs to remove from the recommendations before the cutoff, usually the
        train split (items the user already consumed): a frame of any kind ``recs`` may be
        (on Spark or Dask recs, one of that engine or a local one) with the ``user`` and
        ``item`` columns; other columns are not read, a repeated pair is one. The remaining
        items keep their order and move up, so ``@k`` counts k items the user could still
        choose: by ``rank``, each moves up by the excluded items ranked above it (a list
        ranked 1, 2, ... is re-ranked 1, 2, ...; an empty position of a list with gaps stays
        empty); by ``score``, the rest is ranked by score under ``ties``. Each ranking of a
        ``sample`` column, and serendipity's ``baseline`` lists, lose the same pairs. The
        pairs apply to every ``by`` group, unless ``exclude`` carries ``by`` columns (a
        fold's train split for its fold): then to their group alone, as for ``train``. Truth
        is not touched. A user whose every item is excluded keeps an empty list (and scores
        0 where evaluated). Without ``truth``, a long table's rows of excluded pairs stop
        being recommendations (their rank is dropped, the rest of the list moves up) and
        keep their relevance. Rating metrics (mse, rmse, mae) read no list: alone they
        ignore it, with a warning. :func:`diagnose` counts the rows removed and the lists it
        left shorter than k. An empty frame changes nothing.
    validate
        Check values (nulls, negative relevance, bad or repeated ranks, duplicates) before
        computing; for a LazyFrame this is one aggregate pass over the inputs. Also checks
        that the ids of recs and truth meet (see Warns).
    buckets
        Evaluate the users in this many buckets, one after another, so that peak memory
        falls with the number of buckets (inputs larger than memory: ``pl.scan_parquet`` of
        a billion rows). ``"auto"`` (the default): one bucket per 250M rows of a LazyFrame
        ``recs`` (counted from parquet metadata), else one. With more than one bucket the
        work is done when ``evaluate`` is called, even for a LazyFrame; a single integer
        user column is split into id ranges (files written in user order are read once in
        all), other keys by a hash (each bucket reads every row); only buckets holding a
        user are evaluated, so never more than the users. Per-user values and means are the
        one-pass values, to the bit.
    progress
        Show a progress bar over the buckets (on stderr, or tqdm's when installed) once the
        work has taken a few seconds.
    **more
        The frames and columns of families added outside the package (see
        :mod:`frame_metrics.extend`): one keyword per input and column role they register.
        Any other keyword is an error.

    Returns
    -------
    FrameT
        A frame of the kind of ``recs`` (a LazyFrame stays lazy; Arrow input gives a
        ``pyarrow.Table``; a DuckDB relation gives a relation on DuckDB's default
        connection) with the ``by`` and user columns and one column per metric string
        and cutoff (``"<metric>@<k>"``, named as requested), sorted by key; with
        ``aggregate=True``, the ``by`` columns, ``n_users`` and the means.

    Raises
    ------
    FrameMetricsError
        (a ``ValueError``) for a missing column, a bad value or an unknown option; see
        :mod:`frame_metrics.errors`.

    Warns
    -----
    IgnoredOptionWarning
        An option given cannot change the result (``k`` when every metric has its own
        cutoff, a tie rule with ranks given); the result is what it would be without it.
    UnmatchedIdsWarning
        Under 1% of the users of recs have a truth row, or none of their recommended
        (user, item) pairs is one: ids written differently in the two frames (``"0015"``
        and ``15``) match nothing. The message gives the counts and an example id of
        each frame (:mod:`frame_metrics.id_match`). Not on Spark or Dask frames.

    Examples
    --------
    Spec example 1: liked {a, b, c, h, i, j}, recommended [a, b, c, d, e].

    >>> import polars as pl
    >>> import frame_metrics as fm
    >>> recs = pl.DataFrame({"user": 1, "item": list("abcde"), "rank": range(1, 6)})
    >>> truth = pl.DataFrame({"user": 1, "item": list("abchij"), "relevance": 1})
    >>> fm.evaluate(recs, truth, metrics=["precision", "recall"], k=5)
    shape: (1, 3)
    ┌──────┬─────────────┬──────────┐
    │ user ┆ precision@5 ┆ recall@5 │
    │ ---  ┆ ---         ┆ ---      │
    │ i32  ┆ f64         ┆ f64      │
    ╞══════╪═════════════╪══════════╡
    │ 1    ┆ 0.6         ┆ 0.5      │
    └──────┴─────────────┴──────────┘

    A user with no relevant item is left out of the means (``n_users`` says how many
    counted); ``empty="zero"`` scores such a user 0 instead.

    >>> recs2 = pl.concat([recs, recs.with_columns(user=pl.lit(2, pl.Int32))])
    >>> fm.evaluate(recs2, truth, metrics="precision@5", aggregate=True)["n_users"].item()
    1
    >>> fm.evaluate(recs2, truth, metrics="precision@5", aggregate=True, empty="zero")
    shape: (1, 2)
    ┌─────────┬─────────────┐
    │ n_users ┆ precision@5 │
    │ ---     ┆ ---         │
    │ i64     ┆ f64         │
    ╞═════════╪═════════════╡
    │ 2       ┆ 0.3         │
    └─────────┴─────────────┘

    Beyond accuracy in the same call: novelty from train popularity (items seen by 1 of 2
    train users: -log2(1/2) = 1 bit each) and the share of the catalog covered.

    >>> train = pl.DataFrame({"user": [7, 7, 8], "item": ["a", "b", "c"]})
    >>> fm.evaluate(recs, truth, metrics=["recall@2", "novelty@2", "coverage@2"],
    ...             train=train, aggregate=True).row(0)
    (1, 0.3333333333333333, 1.0, 0.25)

    (coverage: items a and b of the 8 seen in recs (a-e), truth (h, i, j too) and train.)

    Variants side by side, each in its own column: AP over min(|R|, k) = 2 (the default)
    and over |R| = 6, as trec_eval and ranx divide; a whole preset for one metric.

    >>> fm.evaluate(recs, truth, metrics=["ap@2", "ap(ap_denominator=relevant)@2",
    ...                                   "ap(convention=trec_eval)@2"]).row(0)
    (1, 1.0, 0.3333333333333333, 0.3333333333333333)

    Equal scores: with ``ties="average"`` a tie is worth its expected value over the
    orders of the tied items (here a relevant and an irrelevant item tie for rank 1).

    >>> scored = pl.DataFrame({"user": 1, "item": ["x", "b"], "score": [0.5, 0.5]})
    >>> fm.evaluate(scored, truth, metrics="precision@1", score="score", ties="average").row(0)
    (1, 0.5)

    A user whose relevant items all gain 0 (``threshold=0`` makes relevance 0 relevant)
    has an ideal DCG of 0: ndcg 0 by default (trec_eval, scikit-learn), no value under
    ``zero_ideal="skip"`` (Recommenders), so the mean, and ``n_users``, count the others.

    >>> zeros = pl.DataFrame({"user": [1, 2], "item": ["a", "a"], "relevance": [0, 2]})
    >>> two = pl.DataFrame({"user": [1, 2], "item": ["a", "a"], "rank": [1, 1]})
    >>> fm.evaluate(two, zeros, metrics="ndcg@1", threshold=0, aggregate=True).row(0)
    (2, 0.5)
    >>> fm.evaluate(two, zeros, metrics="ndcg@1", threshold=0, aggregate=True,
    ...             zero_ideal="skip").row(0)
    (1, 1.0)

    Propensity-scored (debiased) metrics: a relevant item observed with probability P
    counts 1/P times. Here a (P = 1/2) is hit and b (P = 1/4) missed, so recall@1 is
    (1/0.5) / (1/0.5 + 1/0.25) = 2/6 rather than 1/2.

    >>> observed = pl.DataFrame({"user": 1, "item": ["a", "b"], "relevance": 1,
    ...                          "p": [0.5, 0.25]})
    >>> fm.evaluate(recs, observed, metrics="recall@1").row(0)
    (1, 0.5)
    >>> fm.evaluate(recs, observed, metrics="recall@1", propensity="p").row(0)
    (1, 0.3333333333333333)

    Items the user already consumed, out of the list before the cutoff (spec section
    10): with a and b in train, the list is c, d, e, so precision@2 counts c (liked)
    and d: 1/2, and recall@2 is 1 of the 6 liked items.

    >>> seen = pl.DataFrame({"user": 1, "item": ["a", "b"]})
    >>> fm.evaluate(recs, truth, metrics=["precision@2", "recall@2"], exclude=seen).row(0)
    (1, 0.5, 0.16666666666666666)
    """
    aggregate = _flag("aggregate", aggregate)
    # Read twice (metric names and warnings): a generator must not run dry.
    metrics, k = _reusable(metrics), _reusable(k)
    # Every keyword by name, the tables deciding where each goes (frame, column, option).
    spec, extras = _spec(truth, _arguments(locals(), more))
    for warning in spec.ignored:
        warn(warning)
    n_buckets = _buckets(recs, buckets)
    if n_buckets > 1:
        from frame_metrics.distributed import buckets as local
        from frame_metrics.frames import to_lazy
        from frame_metrics.planner import reads

        source = to_lazy(recs, spec.source_label, reads(spec)["recs"])
        out = local.evaluate(
            spec,
            source.lazy,
            truth,
            extras,
            aggregate=aggregate,
            buckets=n_buckets,
            progress=progress,
        )
        return cast("FrameT", source.give_back(out))
    distributed = _distributed(recs)
    if distributed is not None:
        return cast("FrameT", distributed(spec, recs, truth, extras, aggregate=aggregate))
    from frame_metrics.inputs import Inputs
    from frame_metrics.planner import reads

    inputs = Inputs.read(spec, recs, truth, extras, reads(spec))
    return cast("FrameT", engine.evaluate(spec, inputs, aggregate=aggregate))


def means_and_per_user(
    recs: pl.LazyFrame, truth: pl.LazyFrame | None = None, **kwargs: Any
) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    """:func:`evaluate`'s means and its per-user values, from one pass over the rows.

    Takes evaluate's arguments (``aggregate`` excepted) on polars frames on this
    machine. The result is ``evaluate(..., aggregate=True)`` collected and, of the
    metrics with a value per user (all but the corpus metrics), ``evaluate(...)``
    collected, or None without any; the inputs are checked once. With ``buckets``
    the two calls are made one after the other.

    Examples
    --------
    >>> import polars as pl
    >>> recs = pl.LazyFrame({"user": [1, 1, 2], "item": ["a", "b", "a"], "rank": [1, 2, 1]})
    >>> truth = pl.LazyFrame({"user": [1, 2], "item": ["b", "c"], "relevance": [1, 1]})
    >>> means, per_user = means_and_per_user(recs, truth, metrics=["hit_rate", "coverage"], k=2)
    >>> means.rows()  # n_users, hit_rate@2, coverage@2: items a, b of a, b, c
    [(2, 0.5, 0.6666666666666666)]
    >>> per_user.rows()  # coverage has no value per user
    [(1, 1.0), (2, 0.0)]
    """
    kwargs.pop("aggregate", None)
    spec, extras = _keywords_spec(truth, kwargs)
    if _buckets(recs, kwargs.get("buckets")) > 1:
        means = evaluate(recs, truth, aggregate=True, **kwargs).collect()
        per_user = spec.per_user_columns
        checked = {**kwargs, "metrics": per_user, "validate": False}
        values = evaluate(recs, truth, **checked).collect() if per_user else None
        return means, values
    for warning in spec.ignored:
        warn(warning)
    from frame_metrics.inputs import Inputs
    from frame_metrics.planner import reads

    inputs = Inputs.read(spec, recs, truth, extras, reads(spec))
    return engine.means_and_per_user(spec, inputs)


def _arguments(named: Mapping[str, Any], more: Mapping[str, object]) -> dict[str, Any]:
    """Evaluate's keywords by name: its own (``named``, its locals on entry) and ``more``.

    ``more`` may hold only the frames and columns that families outside the package
    registered (:mod:`frame_metrics.extend`); those not given are None.
    """
    outside = [r.name for r in ROLES if not r.builtin]
    outside += [e.name for e in EXTRA_INPUTS if not e.builtin]
    unknown = sorted(set(more) - set(outside))
    if unknown:
        known = [k.name for k in keywords(builtin=False)]
        raise UnknownKeywordError("evaluate", unknown, known)
    arguments = {n: v for n, v in named.items() if n not in ("recs", "truth", "more")}
    return arguments | {name: more.get(name) for name in outside}


def _spec(truth: object | None, arguments: Mapping[str, Any]) -> tuple[Spec, dict[str, Any]]:
    """The call's :class:`~frame_metrics.spec.Spec` and extra frames, from its keywords.

    Each keyword goes where its table puts it (:mod:`frame_metrics.keywords`): a frame
    of ``EXTRA_INPUTS`` to the extras, the settings that describe the call, the columns
    (``ROLES``) and the options (``OPTIONS``) to :func:`~frame_metrics.spec.build_spec`,
    which resolves them once; ``buckets`` and ``progress`` stay with the runner.
    """
    extras = {e.name: arguments.get(e.name) for e in EXTRA_INPUTS}
    frames = [*(["truth"] if truth is not None else [])]
    frames += [name for name, frame in extras.items() if frame is not None]
    described = {r.name for r in ROLES} | {o.name for o in OPTIONS}
    spec = build_spec(
        frames,
        metrics=arguments.get("metrics"),
        k=arguments.get("k"),
        convention=arguments.get("convention"),
        validate=arguments.get("validate", True),
        **{n: v for n, v in arguments.items() if n in described},
    )
    return spec, extras


def _keywords_spec(truth: object | None, kwargs: Mapping[str, Any]) -> tuple[Spec, dict[str, Any]]:
    """:func:`_spec` of evaluate's keywords given as ``kwargs``, the rest at defaults.

    ``kwargs`` holds evaluate's own keywords and the frames and columns of registered
    families (:func:`_arguments`).
    """
    own = {n: v for n, v in kwargs.items() if n in _DEFAULTS}
    more = {n: v for n, v in kwargs.items() if n not in _DEFAULTS}
    return _spec(truth, _arguments({**_DEFAULTS, **own}, more))


def _reusable(value: T) -> T:
    """An iterable argument as a list, which can be read more than once; else itself.

    Examples
    --------
    >>> _reusable(n for n in ["ndcg", "recall"]), _reusable("ndcg"), _reusable(5)
    (['ndcg', 'recall'], 'ndcg', 5)
    """
    if isinstance(value, Iterable) and not isinstance(value, (str, bytes)):
        return cast("T", list(value))
    return value


def _flag(name: str, value: object) -> bool:
    """A yes/no option: a bool (numpy's too), not any value that happens to be truthy.

    ``aggregate="mean"`` would otherwise aggregate, and ``aggregate="no"`` too.

    Examples
    --------
    >>> _flag("aggregate", "mean")
    Traceback (most recent call last):
    ...
    frame_metrics.errors.InvalidOptionError: aggregate: expected True or False, got 'mean'
    """
    kind = type(value)
    if isinstance(value, bool) or (
        kind.__module__ == "numpy" and kind.__name__ in ("bool", "bool_")
    ):
        return bool(value)
    raise InvalidOptionError(f"expected True or False, got {value!r}", option=name)


def _buckets(recs: object, buckets: int | Literal["auto"] | None) -> int:
    """How many buckets of users to evaluate one after another (1: one pass)."""
    from frame_metrics.options import is_int

    if buckets is None:
        return 1
    if buckets == "auto":
        import polars as pl

        if not isinstance(recs, pl.LazyFrame):
            return 1
        from frame_metrics.distributed.buckets import auto_buckets

        return auto_buckets(recs)
    if not is_int(buckets) or int(buckets) < 1:
        raise InvalidOptionError(
            f"expected a positive integer, 'auto' or None, got {buckets!r}", option="buckets"
        )
    return int(buckets)


def _distributed(recs: object) -> Any:
    """The distributed adapter's evaluate for a Spark or Dask frame, else None."""
    from frame_metrics.distributed import adapter_for

    adapter = adapter_for(recs)
    return None if adapter is None else adapter.evaluate


def diagnose(recs: object, truth: object | None = None, **kwargs: Any) -> Diagnostics:
    """Explain an evaluation: who was left out, scored zero, deduplicated or tied.

    Takes the same arguments as :func:`evaluate` (``aggregate`` excepted) and always
    computes eagerly.

    Examples
    --------
    >>> import polars as pl
    >>> import frame_metrics as fm
    >>> recs = pl.DataFrame({"user": [1, 1, 2], "item": ["a", "b", "a"], "score": [0.9, 0.9, 0.5]})
    >>> truth = pl.DataFrame({"user": [1, 3], "item": ["b", "c"], "relevance": [1, 1]})
    >>> d = fm.diagnose(recs, truth, k=1, score="score")
    >>> d.n_users, d.users_without_relevant, d.users_without_recommendations
    (2, 1, 1)
    >>> d.ties_at_cutoff   # user 1: "a" and "b" tie at 0.9, and "a" wins the tie
    {1: 1}
    >>> d.users_not_in_truth, d.short_lists   # user 2 is only in recs; no list is below k
    (1, {1: 0})
    """
    kwargs.pop("aggregate", None)
    unknown = sorted(set(kwargs) & {"buckets", "progress"})
    if unknown:  # evaluate's, not diagnose's: it always computes in one pass
        raise UnknownKeywordError("diagnose", unknown, ())
    from frame_metrics.distributed import adapter_for

    spec, extras = _keywords_spec(truth, kwargs)
    adapter = adapter_for(recs)
    if adapter is not None:
        found = cast("Diagnostics", adapter.diagnose(spec, recs, truth, extras))
    else:
        from frame_metrics.inputs import Inputs
        from frame_metrics.planner import reads

        found = diagnosis.diagnose(spec, Inputs.read(spec, recs, truth, extras, reads(spec)))
    _warn_small_sample(found)
    return found


#: Below this mean effective sample size per user, diagnose warns (spec 9.4).
SMALL_ESS = 2.0


def _warn_small_sample(found: Diagnostics) -> None:
    """Warn when propensity weights leave under 2 effective relevant items per user."""
    mean = found.counts.get("propensity_mean_ess")
    if mean is None or mean >= SMALL_ESS:
        return
    least = found.counts.get("propensity_min_ess")
    warn(
        SmallSampleWarning(
            f"expected an effective sample size (Σw)²/Σw² of at least {SMALL_ESS:g} relevant "
            f"items per user on average, found {mean:.4g} (the least {least:.4g}): a few "
            "heavily weighted items decide each user's values; ",
            Pass("max_weight"),
            " to clip the weights (less variance, some bias)",
            option="propensity",
        )
    )


#: evaluate's keywords with their defaults, for diagnose (which takes them too).
_DEFAULTS: dict[str, Any] = {
    name: p.default
    for name, p in inspect.signature(evaluate).parameters.items()
    if p.kind is inspect.Parameter.KEYWORD_ONLY
}
