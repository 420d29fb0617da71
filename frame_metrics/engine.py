"""The one place that turns a request into a query: metrics × k → one lazy plan.

Everything the caller asked for becomes one ``group_by(by + user).agg(...)`` over the
long table, with every metric at every cutoff in the same ``agg``; the aggregate is a
second ``group_by(by)`` on top of it, in the same plan.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import polars as pl

from frame_metrics.columns import Columns, as_names, check_roles
from frame_metrics.conventions import OPTION_NAMES, resolve_options
from frame_metrics.diagnostics import Diagnostics
from frame_metrics.dtypes import FloatKey, type_null_columns, unify_keys, whole_number_check
from frame_metrics.errors import (
    InvalidOptionError,
    InvalidValueError,
    Keyword,
    MissingInputError,
    Part,
    Pass,
)
from frame_metrics.exact_sums import exact_partials, exact_totals
from frame_metrics.extras import (
    EXTRA_INPUTS,
    FEATURES,
    N_TRAIN_USERS,
    ExtraFrame,
    baseline_ranks,
    catalog_items,
    feature_table,
    history_pairs,
    item_popularity,
    missing_from,
    require_columns,
)
from frame_metrics.frames import Source, to_lazy
from frame_metrics.global_tables import GlobalTables
from frame_metrics.id_match import IdScreen
from frame_metrics.metrics import DEFAULT_RANKING
from frame_metrics.metrics.context import (
    IN_TAIL,
    PIVOT_MAX_K,
    POPULARITY,
    SELF_INFORMATION,
    RankingContext,
)
from frame_metrics.metrics.corpus import (
    CATALOG_SIZE,
    CorpusContext,
    exposure_column,
    users_column,
)
from frame_metrics.metrics.diversity import (
    PAIR_RANK,
    SIMILARITIES,
    SIMILARITY,
    DiversityContext,
    ordered_sum,
    pair_column,
    vector_sums,
)
from frame_metrics.metrics.rating import ABS_ERRORS, N_PAIRS, SQUARED_ERRORS, RatingContext
from frame_metrics.metrics.registry import REGISTRY, Requested, resolve_requests
from frame_metrics.metrics.user_stats import UserStats
from frame_metrics.options import COMBINATION_OPTIONS, MetricOptions, other_tie_rules
from frame_metrics.prepare import (
    PREDICTION,
    RANK,
    REL,
    Prepared,
    RatingPairs,
    prepare,
    prepare_baseline,
    prepare_ratings,
)
from frame_metrics.ranking_query import PackedKey, RankingInputs, user_statistics
from frame_metrics.validation import Check, CheckedFrame, null_checks, run_checks

if TYPE_CHECKING:
    from polars._typing import EngineType

__all__ = [
    "DEFAULT_ENGINE",
    "SEEN",
    "Plan",
    "Request",
    "diagnose",
    "evaluate",
    "query",
    "read_columns",
    "unseen_items",
]

#: The polars engine of the final collect; ``bench/ranking.py`` measures both.
DEFAULT_ENGINE: EngineType = "streaming"


class Request:
    """A validated call: inputs as LazyFrames, columns, options and (metric, k) pairs."""

    def __init__(
        self,
        recs: object,
        truth: object | None,
        *,
        metrics: str | Iterable[str] | None,
        k: int | Iterable[int] | None,
        user: str | Sequence[str],
        item: str,
        rank: str,
        score: str | None,
        relevance: str,
        prediction: str,
        features: str,
        by: str | Sequence[str] | None,
        catalog: object | None,
        train: object | None,
        item_features: object | None,
        baseline: object | None,
        validate: bool,
        global_tables: GlobalTables | None = None,
        convention: str | None = None,
        **options: Any,
    ) -> None:
        # Options and names first: a typo costs no pass over the data.
        unknown = sorted(set(options) - set(OPTION_NAMES))
        if unknown:
            raise InvalidOptionError(
                f"options: expected keywords among {', '.join(OPTION_NAMES)}, "
                f"got {', '.join(unknown)}"
            )
        #: The call's options: those of a metric named without options of its own (an
        #: unknown convention is refused here).
        self.options = resolve_options(options, convention=convention)
        self.columns = Columns(
            as_names(user, "user"),
            item,
            rank,
            score,
            relevance,
            as_names(by, "by"),
            prediction,
            features,
        )
        self.requests: list[Requested] = resolve_requests(
            metrics, k, DEFAULT_RANKING, given=options, convention=convention
        )
        self.needs: frozenset[str] = frozenset().union(
            *(r.metric.inputs(r.options) for r in self.requests)
        )
        self._check_metric_options(truth is None, score is not None)
        given = {
            "catalog": catalog,
            "train": train,
            "item_features": item_features,
            "baseline": baseline,
        }
        for q in self.requests:
            for need in sorted(q.metric.inputs(q.options)):
                source = _EXTRA_OF_NEED.get(need)
                if source is not None and given[source] is None:
                    raise MissingInputError(
                        q.metric.name,
                        source,
                        EXTRA_INPUTS[source],
                        *_SERENDIPITY_HINT.get((q.metric.name, source), ()),
                    )
        if truth is None and score is not None:
            raise InvalidOptionError(
                f"expected None for a long table (it carries ranks), got {score!r}; ",
                Pass("truth"),
                " to rank recommendations by score",
                option="score",
            )
        label = "recs" if truth is not None else "long table"
        reads = self.reads(long_table=truth is None)
        self.source: Source = to_lazy(recs, label, reads["recs"])
        self.truth: Source | None = (
            None if truth is None else to_lazy(truth, "truth", reads["truth"])
        )
        extras = {
            name: to_lazy(frame, name, reads[name])
            for name, frame in given.items()
            if frame is not None
        }
        self.float_keys: list[FloatKey] = []
        extras = self._type_inputs(extras)
        self.extras: dict[str, ExtraFrame] = {
            name: ExtraFrame.of(name, source, self.columns) for name, source in extras.items()
        }
        self.validate = validate
        #: Tables over every user, when this request is one partition of a larger run.
        self.global_tables = global_tables
        if not validate:
            self.float_keys = []

    def reads(self, *, long_table: bool) -> dict[str, set[str]]:
        """The columns the call reads of each frame, by role: only those are converted.

        Each ``by`` column in every frame (a frame may lack it); the rank or score column
        in recs and the baseline; relevance in truth (in recs for a long table);
        prediction only for rating metrics; features only in item_features.
        """
        c = self.columns
        keys = {*c.by, *c.user, c.item}
        order = {c.score if c.score is not None else c.rank}
        recs = keys | order
        if long_table:
            recs |= {c.rank, c.relevance}
        if "rating" in self.families():
            recs.add(c.prediction)
        return {
            "recs": recs,
            "truth": keys | {c.relevance},
            "train": keys,
            "baseline": keys | order,
            "catalog": {*c.by, c.item},
            "item_features": {*c.by, c.item, c.features},
        }

    def _check_metric_options(self, long_table: bool, scored: bool) -> None:
        """Options a metric's input cannot honour, refused before any pass over the data."""
        for q in self.requests:
            if q.metric.family != "ranking":
                continue
            if long_table and q.options.threshold == 0:
                raise InvalidOptionError(
                    f"expected a number > 0 or None for {q.column} on a long table "
                    "(relevance 0 marks a recommended item outside truth there; ",
                    Pass("truth"),
                    " to make every truth row relevant), got 0",
                    *q.set_by("threshold"),
                    option="threshold",
                )
            gain = q.metric.effective(q.options).gain
            if q.metric.name == "ndcg" and q.options.idcg == "k" and gain != "binary":
                shown = gain if isinstance(gain, str) else dict(gain)
                raise InvalidOptionError(
                    f"expected 'relevant' for {q.column} under gain={shown!r} "
                    "(idcg='k' is k ideal slots of gain 1, an upper bound of DCG only under "
                    "gain='binary': pass ",
                    Keyword("gain", "binary"),
                    " with it), got 'k'",
                    option="idcg",
                )
            if scored and q.options.ties == "average" and not q.metric.tie_average:
                averaged = sorted(m.name for m in REGISTRY.values() if m.tie_average)
                raise InvalidOptionError(
                    f"expected {other_tie_rules('average')} for "
                    f"{q.column} (ties='average' is defined for {', '.join(averaged)}), "
                    "got 'average'",
                    *q.set_by("ties"),
                    option="ties",
                )

    def _type_inputs(self, extras: dict[str, Source]) -> dict[str, Source]:
        """Every input's key columns in one lossless dtype, empty columns typed (dtypes.py)."""
        c = self.columns
        sources = {self.source_label: self.source}
        if self.truth is not None:
            sources["truth"] = self.truth
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
        typed, self.float_keys = unify_keys({label: s.lazy for label, s in sources.items()}, keys)
        # A key with no values anywhere (every frame empty) is read as integers.
        typed = {
            label: type_null_columns(frame, {**values, **dict.fromkeys(keys, pl.Int64())})
            for label, frame in typed.items()
        }
        self.source = replace(self.source, lazy=typed[self.source_label])
        if self.truth is not None:
            self.truth = replace(self.truth, lazy=typed["truth"])
        return {name: replace(source, lazy=typed[name]) for name, source in extras.items()}

    def check_call(self, *, aggregate: bool) -> None:
        """What the call asks that no frame can answer: checked before reading any row.

        Corpus metrics need ``aggregate=True``; no column may hold two roles
        (:meth:`check_roles`). Every runner (one pass, buckets, Spark, Dask) calls it.
        """
        corpus = [r.column for r in self.requests if r.metric.population == "corpus"]
        if corpus and not aggregate:
            raise InvalidOptionError(
                f"expected True for corpus metrics (one value per by group, not per "
                f"user), got False with {', '.join(corpus)}",
                option="aggregate",
                columns=corpus,
            )
        self.check_roles(aggregate=aggregate)

    def check_roles(self, *, aggregate: bool) -> None:
        """No column in two roles of one frame, reserved, or named like an output column."""
        c, families = self.columns, self.families()
        keys = {f"user[{i}]" if len(c.user) > 1 else "user": u for i, u in enumerate(c.user)}
        keys |= {f"by[{i}]" if len(c.by) > 1 else "by": b for i, b in enumerate(c.by)}
        keys["item"] = c.item
        recs = dict(keys)
        if families & {"ranking", "diversity", "corpus"}:
            recs |= {"score": c.score} if c.score is not None else {"rank": c.rank}
        if "rating" in families:
            recs["prediction"] = c.prediction
        frames = {self.source_label: recs}
        if self.truth is None:
            if "ranking" in families or "rating" in families:
                recs["relevance"] = c.relevance
        else:
            frames["truth"] = {**keys, "relevance": c.relevance}
        outputs = {name: "a metric" for name in self.metric_columns}
        if aggregate:
            outputs |= {"n_users": "the number of users averaged", "n_pairs": "rated pairs"}
        check_roles(frames, outputs)

    @property
    def source_label(self) -> str:
        """How messages name the recommendations frame."""
        return "recs" if self.truth is not None else "long table"

    def families(self) -> set[str]:
        """The metric families asked for."""
        return {r.metric.family for r in self.requests}

    def of_family(self, family: str) -> list[Requested]:
        """The requested metrics of one family, in request order."""
        return [r for r in self.requests if r.metric.family == family]

    @property
    def max_k(self) -> int:
        """The largest cutoff asked for."""
        return max((r.k for r in self.requests if r.metric.takes_k), default=0)

    @property
    def depth(self) -> int | None:
        """How deep into each list any metric reads: rows ranked below it are never read.

        ``None``: the whole list (bpref, rbp, r_precision, an MRR without cutoff, or R
        taken from the recommended items).
        """
        whole = any(
            r.metric.whole_list
            or (r.metric.name == "mrr" and r.options.mrr_cutoff == "none")
            or (r.metric.family == "ranking" and r.options.relevant_set == "listed")
            for r in self.requests
        )
        return None if whole else self.max_k

    @property
    def cutoffs(self) -> tuple[int, ...]:
        """Every distinct cutoff asked for, ascending."""
        return tuple(sorted({r.k for r in self.requests if r.metric.takes_k}))

    @property
    def metric_columns(self) -> list[str]:
        """Output column names, ``"<metric>@<k>"`` (or the bare name), in request order."""
        return [r.column for r in self.requests]

    @property
    def per_user_columns(self) -> list[str]:
        """The output columns that have a value per user (all but corpus metrics)."""
        return [r.column for r in self.requests if r.metric.population != "corpus"]

    def prepared(self, *, tie_cutoffs: tuple[int, ...] = ()) -> Prepared:
        """The checked long table for this request."""
        return prepare(
            self.source.lazy,
            None if self.truth is None else self.truth.lazy,
            self.columns,
            self.options,
            self.depth,
            validate=self.validate,
            tie_cutoffs=tie_cutoffs,
            needs_relevance="truth" in self.needs and self.max_k > 0,
            groups=None if self.global_tables is None else self.global_tables.groups,
            gains=self.gains,
            largest_relevance=self.largest_relevance,
            row_order=any(o.ties == "input" for o in self.all_options),
            every_column=self.source.every_column,
        )

    @property
    def all_options(self) -> list[MetricOptions]:
        """The call's options and every metric's: what the prepared rows must serve.

        The call's count even when every metric overrides them: ``prepared.top`` is
        ranked by the call's tie rule.
        """
        return [self.options, *(q.options for q in self.requests)]

    @property
    def gains(self) -> frozenset[str]:
        """The gains in use, for the relevance checks (a gain table counts as linear)."""
        gains = {o.gain if isinstance(o.gain, str) else "linear" for o in self.all_options}
        if any(q.metric.name == "err" for q in self.requests):
            gains.add("exponential")  # 2^rel
        return frozenset(gains)

    @property
    def largest_relevance(self) -> float | None:
        """The smallest ``max_relevance`` err is given, which no relevance may exceed."""
        given = [
            q.options.max_relevance
            for q in self.requests
            if q.metric.name == "err" and q.options.max_relevance is not None
        ]
        return min(given, default=None)

    def extra(self, name: str, names: Sequence[str]) -> ExtraFrame:
        """An extra input, checked to have its join columns (typed like recs' already)."""
        extra = self.extras[name]
        require_columns(extra, [*extra.by, *names])
        return extra


#: Options that change only how a metric combines its statistics, not the statistics.
_EXPRESSION_OPTIONS = COMBINATION_OPTIONS


def _stats_options(options: MetricOptions, call: MetricOptions) -> MetricOptions:
    """The options the statistics of a metric depend on (the rest from the call's)."""
    return options.changed(**{name: getattr(call, name) for name in _EXPRESSION_OPTIONS})


#: The corpus frame's count of users with a recommendation within the largest corpus k.
_CORPUS_USERS = "_fm_corpus_users"
#: Per ``by`` group: how many input frames show it (see :meth:`Plan.seen_groups`).
SEEN = "_fm_seen"

#: Which extra input an entry of ``Metric.needs`` reads.
_EXTRA_OF_NEED = {
    "popularity": "train",
    "history": "train",
    "train": "train",
    "catalog": "catalog",
    "item_features": "item_features",
    "baseline": "baseline",
}
_SERENDIPITY_HINT: dict[tuple[str, str], tuple[Part, ...]] = {
    ("serendipity", "baseline"): (
        "; or ",
        Pass("unexpected", "history"),
        " to judge against ",
        Keyword("train"),
        " instead",
    ),
    ("serendipity", "train"): (
        "; or ",
        Pass("unexpected", "baseline"),
        " (the default) to judge against ",
        Keyword("baseline"),
        " instead",
    ),
}


def _nonempty_train_check(train: pl.LazyFrame, top: pl.LazyFrame) -> CheckedFrame:
    """Popularity needs train rows: with none, every item's self-information is -inf."""
    counts = train.select(pl.len().alias("_fm_train_rows")).join(
        top.select(pl.len().alias("_fm_listed_rows")), how="cross"
    )
    empty = (pl.col("_fm_train_rows") == 0) & (pl.col("_fm_listed_rows") > 0)
    check = Check(
        empty.sum(),
        empty,
        InvalidValueError,
        "expected at least one row in train (novelty, arp and aplt read item popularity "
        "from it), found an empty frame",
    )
    return CheckedFrame("train", counts, [check], [])


def _array_width(dtype: pl.DataType) -> int:
    """The length of a fixed-width vector dtype (0 for a list: the feature table is empty)."""
    return dtype.size if isinstance(dtype, pl.Array) else 0


class Plan:
    """The pieces of one evaluation: the per-user frame, the corpus frame and the checks."""

    def __init__(self, request: Request) -> None:
        self.request = request
        self.checks: list[CheckedFrame] = [
            CheckedFrame(f.label, f.frame, [whole_number_check(f)], [f.column])
            for f in request.float_keys
        ]
        #: Checks of small inputs whose bad values would make the query itself fail (a
        #: ragged vector): run before the query, not in its batch.
        self.first_checks: list[CheckedFrame] = []
        self._train_frame: ExtraFrame | None = None
        families = request.families()
        self.prepared: Prepared | None = None
        if families & {"ranking", "diversity", "corpus"}:
            self.prepared = request.prepared()
            self.checks += self.prepared.checks
        self.ratings: RatingPairs | None = None
        if "rating" in families:
            self.ratings = prepare_ratings(
                request.source.lazy,
                None if request.truth is None else request.truth.lazy,
                request.columns,
                validate=request.validate,
            )
            self.checks += self.ratings.checks

    # -- per-user parts --------------------------------------------------------------------

    def _train(self) -> ExtraFrame:
        """``train=``, checked to have its join columns; its key checks, once.

        Popularity (on the listed rows) and history (on the hit rows) both read it.
        """
        if self._train_frame is None:
            c = self.request.columns
            train = self.request.extra("train", [*c.user, c.item])
            keys = [*train.by, *c.user, c.item]
            self.checks.append(CheckedFrame("train", train.frame, null_checks(keys, "key"), keys))
            self._train_frame = train
        return self._train_frame

    def _listed_rows(self, prepared: Prepared) -> pl.LazyFrame:
        """The top-k rows, with the train popularity columns list metrics read."""
        r, c = self.request, self.request.columns
        top = prepared.top
        if "popularity" not in r.needs:
            return top
        train = self._train()
        shared = r.global_tables
        if shared is not None and shared.popularity is not None:
            # One partition of a larger run: popularity is over every partition's train
            # (whose emptiness the adapter checked).
            assert shared.n_train_users is not None
            items, n_users = shared.popularity.lazy(), shared.n_train_users.lazy()
        else:
            if r.validate:
                self.checks.append(_nonempty_train_check(train.frame, top))
            items, n_users = item_popularity(train, c, r.options)
        top = top.join(items, on=[*train.by, c.item], how="left")
        top = (
            top.join(n_users, on=list(train.by), how="left")
            if train.by
            else top.join(n_users, how="cross")
        )
        # An item no train user had counts as had by one (RecTools' MeanInvUserFreq):
        # -log2(0) would make the user's novelty infinite.
        return top.with_columns(
            pl.col(POPULARITY).fill_null(0),
            pl.col(IN_TAIL).fill_null(True),
            (
                pl.col(N_TRAIN_USERS).cast(pl.Float64).log(2)
                - pl.max_horizontal(pl.col(POPULARITY).fill_null(0), 1).cast(pl.Float64).log(2)
            ).alias(SELF_INFORMATION),
        )

    def _hit_columns(self, prepared: Prepared) -> list[tuple[pl.LazyFrame, list[str]]]:
        """Frames joined onto the hit rows: the baseline's ranks, the train history."""
        r, c = self.request, self.request.columns
        out: list[tuple[pl.LazyFrame, list[str]]] = []
        if "history" in r.needs:
            train = self._train()
            out.append((history_pairs(train, c), [*train.by, *c.user, c.item]))
        if "baseline" in r.needs:
            baseline = r.extra("baseline", [*c.user, c.item])
            top, checks = prepare_baseline(
                baseline.frame, list(baseline.by), c, r.max_k, validate=r.validate
            )
            self.checks += checks
            ranks = baseline_ranks(top, baseline.by, c, RANK)
            out.append((ranks, [*baseline.by, *c.user, c.item]))
        return out

    def ranking_part(self, prepared: Prepared) -> pl.LazyFrame:
        """Ranking-family metrics: per-user statistics, then one expression per metric.

        Metrics whose options need other statistics (another threshold, gain, tie rule
        or relevant set) get their own statistics frame; all are joined on the key.
        Options that only change how a metric combines statistics share one frame.
        """
        r, c = self.request, self.request.columns
        keys = c.keys
        groups: dict[MetricOptions, list[Requested]] = {}
        for q in r.of_family("ranking"):
            groups.setdefault(_stats_options(q.options, r.options), []).append(q)
        parts = [self._ranking_group(prepared, options, qs) for options, qs in groups.items()]
        frame = parts[0]
        for part in parts[1:]:
            frame = frame.join(part, on=keys, how="full", coalesce=True, nulls_equal=True)
        return frame

    def _ranking_group(
        self, prepared: Prepared, options: MetricOptions, requests: list[Requested]
    ) -> pl.LazyFrame:
        r, c = self.request, self.request.columns
        keys = c.keys
        stats = UserStats(options)
        stats.tied = options.ties == "average" and c.score is not None
        exprs = [q.expr(stats.view(q.options)) for q in requests]
        top = prepared.ranked(options.ties)
        truth, truth_keys, groups = prepared.truth, prepared.truth_keys, prepared.groups
        if options.relevant_set == "listed":
            # Only the recommended items (at any rank) can be relevant: what a peer that
            # is handed scored items alone sees.
            if groups is not None:
                truth, truth_keys, groups = truth.join(groups, how="cross"), keys, None
            truth = truth.join(top.select(*keys, c.item), on=[*truth_keys, c.item], how="semi")
        inputs = RankingInputs(
            keys=keys,
            truth_keys=truth_keys,
            item=c.item,
            relevance=REL,
            top=self._listed_rows(prepared) if stats.uses("listed") else top,
            truth=truth,
            groups=groups,
            all_keys=prepared.all_keys,
            hit_columns=self._hit_columns(prepared) if stats.uses("hits") else (),
            packed=(
                PackedKey.for_truth(truth, [*truth_keys, c.item])
                if stats.uses("hits") and options.relevant_set == "truth"
                else None
            ),
            judged=prepared.judged,
            recs_keys=prepared.recs_keys,
            truth_user_keys=prepared.truth_user_keys,
            max_relevance=None if r.global_tables is None else r.global_tables.max_relevance,
            all_truth=prepared.truth,
        )
        return user_statistics(inputs, stats, options).select(*keys, *exprs)

    def diversity_part(self, prepared: Prepared) -> pl.LazyFrame:
        """Diversity: the pairs of each user's top items, one similarity per pair."""
        r, c = self.request, self.request.columns
        keys = c.keys
        top = prepared.top
        extra = r.extra("item_features", [c.item])
        table, similarity, checks = feature_table(extra, c, r.options)
        self.first_checks += checks
        on = [*extra.by, c.item]
        self.checks.append(
            missing_from(
                top,
                table,
                on,
                "item_features",
                "recommended item (within the largest k) to have a features row",
                "; add their features or leave the items out",
            )
        )
        rows = top.join(table, on=on, how="inner").select(*keys, RANK, FEATURES)
        similar = SIMILARITIES[similarity]
        requests = r.of_family("diversity")
        if similarity == "cosine":
            # Cosine of unit vectors: each user's vector sums give the pair sums.
            width = _array_width(rows.collect_schema()[FEATURES])
            aggs, scale_bits = vector_sums(
                pl.col(FEATURES), pl.col(RANK), width, [r.k for r in requests]
            )
            vctx = DiversityContext("vectors", width, scale_bits)
            return rows.group_by(keys).agg(aggs).select(*keys, *(r.value(vctx) for r in requests))
        if r.max_k <= PIVOT_MAX_K:
            # One row per user with the features at each rank, then one similarity per
            # pair of ranks: no self-join of the rows.
            at_rank = rows.group_by(keys).agg(
                pl.col(FEATURES).filter(pl.col(RANK) == p).first().alias(f"_fm_f{p}")
                for p in range(1, r.max_k + 1)
            )

            def pair(a: int, b: int) -> pl.Expr:
                fa, fb = pl.col(f"_fm_f{a}"), pl.col(f"_fm_f{b}")
                # Null when a rank is empty: no pair there.
                both = fa.is_not_null() & fb.is_not_null()
                return pl.when(both).then(similar(fa, fb)).alias(pair_column(a, b))

            sims = [pair(a, b) for b in range(2, r.max_k + 1) for a in range(1, b)]
            ctx = DiversityContext("pivot")
            # Users without a pair get nulls here; per_user() drops rows without a value.
            return at_rank.select(*keys, *sims).select(*keys, *(r.value(ctx) for r in requests))
        pairs = rows.join(rows, on=keys, suffix="_b").filter(pl.col(RANK) < pl.col(f"{RANK}_b"))
        sim = similar(pl.col(FEATURES), pl.col(f"{FEATURES}_b"))
        pairs = pairs.select(*keys, pl.col(f"{RANK}_b").alias(PAIR_RANK), sim.alias(SIMILARITY))
        ctx = DiversityContext("pairs")
        return pairs.group_by(keys).agg(r.value(ctx) for r in requests)

    def rating_part(self, ratings: RatingPairs) -> pl.LazyFrame:
        """Rating metrics per user, with the sums the pooled aggregate reads."""
        keys = self.request.columns.keys
        err = pl.col(REL) - pl.col(PREDICTION)
        sums = ratings.matched.group_by(keys).agg(
            # Summed in sorted order, so the sums do not depend on the row order.
            ordered_sum((err * err).sort()).alias(SQUARED_ERRORS),
            ordered_sum(err.abs().sort()).alias(ABS_ERRORS),
            pl.len().cast(pl.Int64).alias(N_PAIRS),
        )
        ctx = RatingContext()
        return sums.with_columns(r.value(ctx) for r in self.request.of_family("rating"))

    def per_user(self) -> pl.LazyFrame:
        """One row per user with a value for at least one per-user metric."""
        r = self.request
        keys = r.columns.keys
        parts: list[pl.LazyFrame] = []
        families = r.families()
        if self.prepared is not None and "ranking" in families:
            parts.append(self.ranking_part(self.prepared))
        if self.prepared is not None and "diversity" in families:
            parts.append(self.diversity_part(self.prepared))
        if self.ratings is not None:
            parts.append(self.rating_part(self.ratings))
        if not parts:
            # Corpus metrics only (so aggregate=True): the users are those with a
            # recommendation, and only their number is read, so no sort.
            assert self.prepared is not None
            return self.prepared.top.select(keys).unique()
        frame = parts[0]
        for part in parts[1:]:
            frame = frame.join(part, on=keys, how="full", coalesce=True, nulls_equal=True)
        cols = r.per_user_columns
        frame = frame.filter(pl.any_horizontal(pl.col(cols).is_not_null()))
        hidden = [SQUARED_ERRORS, ABS_ERRORS, N_PAIRS] if self.ratings is not None else []
        return frame.select(*keys, *cols, *hidden).sort(keys)

    # -- aggregates ---------------------------------------------------------------------

    def exposures(self) -> pl.LazyFrame | None:
        """Per (``by``, item): exposures within each corpus k; per ``by``: users within k.

        Both are sums over users, so the frames of disjoint user sets add up (a
        distributed run sums its partitions' frames, then calls :meth:`corpus_from`).
        """
        r, c = self.request, self.request.columns
        requests = r.of_family("corpus")
        if not requests or self.prepared is None:
            return None
        by, top = list(c.by), self.prepared.top
        ks = sorted({r.k for r in requests})
        exposure = top.group_by([*by, c.item]).agg(
            (pl.col(RANK) <= k).sum().cast(pl.Int64).alias(exposure_column(k)) for k in ks
        )
        user = pl.col(c.user[0]) if len(c.user) == 1 else pl.struct(list(c.user))
        users_aggs = [
            user.filter(pl.col(RANK) <= k).n_unique().cast(pl.Int64).alias(users_column(k))
            for k in ks
        ]
        users = top.group_by(by).agg(users_aggs) if by else top.select(users_aggs)
        return exposure.join(users, on=by, how="left") if by else exposure.join(users, how="cross")

    def corpus_from(self, exposure: pl.LazyFrame) -> pl.LazyFrame:
        """Corpus metrics per ``by`` group from :meth:`exposures`' frame."""
        r, c = self.request, self.request.columns
        requests = r.of_family("corpus")
        by = list(c.by)
        ks = sorted({r.k for r in requests})
        if "catalog_size" in r.needs:
            exposure = self._with_catalog_size(exposure)
        ctx = CorpusContext()
        aggs = [
            ctx.n_users(ks[-1]).alias(_CORPUS_USERS),
            *(r.value(ctx) for r in requests),
        ]
        return exposure.group_by(by).agg(aggs) if by else exposure.select(aggs)

    def corpus(self) -> pl.LazyFrame | None:
        """Corpus metrics per ``by`` group, from the exposure of each item."""
        exposure = self.exposures()
        return None if exposure is None else self.corpus_from(exposure)

    def _with_catalog_size(self, exposure: pl.LazyFrame) -> pl.LazyFrame:
        r, c = self.request, self.request.columns
        assert self.prepared is not None
        top = self.prepared.top
        schema = top.collect_schema()
        if "catalog" in r.extras:
            catalog = r.extra("catalog", [c.item])
            self.checks.append(
                CheckedFrame(
                    "catalog",
                    catalog.frame,
                    null_checks([*catalog.by, c.item], "key"),
                    [*catalog.by, c.item],
                )
            )
            items = catalog_items(catalog, c)
            self.checks.append(
                missing_from(
                    top,
                    items,
                    [*catalog.by, c.item],
                    "catalog",
                    "recommended item (within the largest k) to be in the catalog",
                    "; pass a catalog that holds every recommended item",
                )
            )
            size_by = list(catalog.by)
            sizes = (
                items.group_by(size_by).agg(pl.len().alias(CATALOG_SIZE))
                if size_by
                else items.select(pl.len().alias(CATALOG_SIZE))
            )
        else:
            # The items seen in the inputs: recommendations (every rank), truth and train.
            item_dtype = schema[c.item]
            seen = [r.source.lazy.select(pl.col(c.item).cast(item_dtype, strict=False))]
            if r.truth is not None:
                seen.append(r.truth.lazy.select(pl.col(c.item).cast(item_dtype, strict=False)))
            if "train" in r.extras:
                seen.append(
                    r.extras["train"].frame.select(pl.col(c.item).cast(item_dtype, strict=False))
                )
            size_by = []
            sizes = pl.concat(seen).select(
                pl.col(c.item).drop_nulls().n_unique().alias(CATALOG_SIZE)
            )
        if size_by:
            return exposure.join(sizes, on=size_by, how="left").with_columns(
                pl.col(CATALOG_SIZE).fill_null(0)
            )
        return exposure.join(sizes, how="cross")

    def seen_groups(self) -> pl.LazyFrame:
        """The ``by`` groups the inputs show, each with ``SEEN`` > 0; without ``by``, one row.

        A group is seen when it has a recommendation the metrics read (within the largest
        cutoff, as a distributed run moves them) or a judged row (truth's rows, a long
        table's rows with a relevance); truth without some of the ``by`` columns applies
        to every group of recs. Every seen group gets a row in the aggregate, with
        ``n_users`` 0 and null means when none of its users is evaluated; empty input
        shows no group, so its aggregate has no rows (spec section 4). Without ``by``,
        ``SEEN`` counts the frames with a row (0: empty input). ``SEEN`` adds up over
        disjoint sets of users (buckets, partitions).
        """
        r, c = self.request, self.request.columns
        by = list(c.by)
        sides: list[tuple[pl.LazyFrame, pl.LazyFrame, list[str], pl.LazyFrame | None]] = []
        if self.prepared is not None:
            p = self.prepared
            # Judged rows, relevance 0 included: a long table's as well as truth's.
            judged = p.truth if p.judged is None else p.judged
            sides.append((p.top, judged, p.truth_keys, p.groups))
        if self.ratings is not None:
            recs = r.source.lazy
            truth = recs if r.truth is None else r.truth.lazy
            truth_cols = truth.collect_schema().names()
            missing = [b for b in by if b not in truth_cols]
            groups = recs.select(missing).unique() if missing else None
            sides.append((recs, truth, [b for b in by if b in truth_cols], groups))
        if not by:
            # Whether any frame has a row (a literal alone would make a row of nothing).
            rows = [
                frame.head(1).select(pl.len().cast(pl.Int64).alias(SEEN))
                for recs, truth, _, _ in sides
                for frame in (recs, truth)
            ]
            return pl.concat(rows).select(pl.col(SEEN).sum())
        frames: list[pl.LazyFrame] = []
        for recs, truth, truth_keys, groups in sides:
            frames.append(recs.select(by).unique())
            truth_by = [b for b in by if b in truth_keys]
            # Truth without any by column shows the groups it applies to once it has a row.
            shown = (
                truth.select(truth_by).unique()
                if truth_by
                else truth.head(1).select(pl.len().alias(SEEN)).filter(pl.col(SEEN) > 0)
            )
            if groups is not None:
                shown = shown.join(groups, how="cross")
            frames.append(shown.select(by))
        seen = pl.concat(frames, how="vertical_relaxed").unique()
        return seen.with_columns(pl.lit(1, pl.Int64).alias(SEEN))

    def aggregate(self, per_user: pl.LazyFrame) -> pl.LazyFrame:
        """Per ``by`` group: ``n_users``, means, pooled rating errors and corpus metrics.

        Each mean is over the users the metric is defined for; rating errors are pooled
        over pairs, reported with ``n_pairs``. Every group :meth:`seen_groups` shows has
        a row.
        """
        r = self.request
        if not r.per_user_columns:
            corpus = self.corpus()
            assert corpus is not None
            return self.finish_corpus(self.seen_groups(), corpus)
        return self.finish_aggregate(self.group_sums(per_user), self.corpus())

    def finish_corpus(self, seen: pl.LazyFrame, corpus: pl.LazyFrame) -> pl.LazyFrame:
        """Corpus metrics alone: one row per seen group, from :meth:`corpus_from`'s frame.

        ``n_users`` is the users with a recommendation within the largest corpus k,
        which the corpus frame counts already; a group seen only in truth has 0 and
        null metrics.
        """
        r = self.request
        by = list(r.columns.by)
        out = _left_join(seen.filter(pl.col(SEEN) > 0), corpus, by)
        out = out.with_columns(pl.col(_CORPUS_USERS).fill_null(0).alias("n_users"))
        out = out.select(*by, "n_users", *r.metric_columns)
        return out.sort(by) if by else out

    def summed_columns(self) -> list[str]:
        """The per-user columns the aggregate sums: metrics with a mean, rating errors."""
        r = self.request
        cols = [
            q.column
            for q in r.requests
            if q.metric.family != "rating" and q.metric.population != "corpus"
        ]
        return [*cols, *([SQUARED_ERRORS, ABS_ERRORS] if self.ratings is not None else [])]

    def group_sums(self, per_user: pl.LazyFrame) -> tuple[pl.LazyFrame, pl.LazyFrame]:
        """Per seen ``by`` group: user and pair counts, ``SEEN``, and the exact partial sums.

        All add up over disjoint sets of users (buckets, partitions).
        """
        by = list(self.request.columns.by)
        counts: list[pl.Expr] = [pl.len().cast(pl.Int64).alias("n_users")]
        if self.ratings is not None:
            counts.append(pl.col(N_PAIRS).fill_null(0).sum().cast(pl.Int64).alias(N_PAIRS))
        grouped = per_user.group_by(by).agg(counts) if by else per_user.select(counts)
        seen = self.seen_groups()
        if by:
            grouped = seen.join(grouped, on=by, how="full", coalesce=True, nulls_equal=True)
        else:
            grouped = grouped.join(seen, how="cross")
        filled = ["n_users", *([N_PAIRS] if self.ratings is not None else []), SEEN]
        grouped = grouped.with_columns(pl.col(filled).fill_null(0))
        return grouped, exact_partials(per_user, by, self.summed_columns())

    def finish_aggregate(
        self, sums: tuple[pl.LazyFrame, pl.LazyFrame], corpus: pl.LazyFrame | None
    ) -> pl.LazyFrame:
        """The aggregate from :meth:`group_sums` and the corpus metrics per group.

        The sums are one run's, or several runs' added up; the corpus frame is
        :meth:`corpus`, or computed from summed exposures. A seen group without an
        evaluated user has ``n_users`` 0 and null means (and a null pooled error
        without a rated pair); its corpus metrics are its own.
        """
        r = self.request
        by = list(r.columns.by)
        counts, partials = sums
        summed = self.summed_columns()
        totals = exact_totals(partials, by, summed)
        out = _left_join(counts, totals, by)
        # Empty input has no seen group (and no user), so no row (spec section 4).
        out = out.filter((pl.col("n_users") > 0) | (pl.col(SEEN) > 0))
        pooled = RatingContext(pooled=True)
        values: list[pl.Expr] = []
        for q in r.requests:
            col = q.column
            if q.metric.family == "rating":
                # One row per group holding the exact sums: the pooled value reads them.
                values.append(q.value(pooled))
            elif q.metric.population != "corpus":
                values.append(pl.col(f"{col}.mean").first().alias(col))
        lead = ["n_users", *([N_PAIRS] if self.ratings is not None else [])]
        if by:
            out = out.group_by(by).agg(*(pl.col(c).first() for c in lead), *values)
        else:
            out = out.select(*lead, *values)
        # A mean over no user, a pooled error over no pair: null, not 0/0.
        out = out.with_columns(
            pl.when(pl.col(N_PAIRS if q.metric.family == "rating" else "n_users") > 0)
            .then(pl.col(q.column))
            .alias(q.column)
            for q in r.requests
            if q.metric.population != "corpus"
        )
        if corpus is not None:
            out = _left_join(out, corpus, by)
        out = out.select(*by, *lead, *r.metric_columns)
        return out.sort(by) if by else out


def _left_join(left: pl.LazyFrame, right: pl.LazyFrame, by: list[str]) -> pl.LazyFrame:
    """``left`` with ``right``'s columns joined on ``by``; without ``by``, on one key.

    Without ``by`` both frames have one row at most, and a cross join would drop
    ``left``'s row when ``right`` has none.
    """
    if by:
        return left.join(right, on=by, how="left")
    return left.join(right, left_on=pl.lit(0), right_on=pl.lit(0), how="left")


def read_columns(options: Mapping[str, Any], given: Collection[str]) -> dict[str, set[str]]:
    """The columns a call reads of each frame (:meth:`Request.reads`), before any is read.

    ``options``: evaluate's metric and column keywords, all of them; ``given``: the
    names of the other frames passed (``"truth"``, ``"train"``, ...).

    Examples
    --------
    >>> names = dict(user="user", item="item", rank="rank", relevance="relevance",
    ...              prediction="prediction", features="features", by=None)
    >>> reads = read_columns({"metrics": "ndcg@5", "k": None, "score": "s", **names}, ["truth"])
    >>> sorted(reads["recs"]), sorted(reads["truth"])
    (['item', 's', 'user'], ['item', 'relevance', 'user'])
    """
    empty = pl.DataFrame()
    extras = {name: empty if name in given else None for name in EXTRA_INPUTS}
    request = Request(
        empty,
        empty if "truth" in given else None,
        catalog=extras["catalog"],
        train=extras["train"],
        item_features=extras["item_features"],
        baseline=extras["baseline"],
        validate=False,
        **options,
    )
    return request.reads(long_table="truth" not in given)


def query(request: Request, *, aggregate: bool) -> tuple[Plan, pl.LazyFrame]:
    """The plan of a request and its result query, not run.

    Every check of names, roles and dtypes (a missing column, a column in two roles, a
    corpus metric per user) raises here, from the frames' schemas alone: the Spark, Dask
    and bucket runners call this on empty frames of their inputs' schemas to raise the
    same errors before they read any data.
    """
    request.check_call(aggregate=aggregate)
    plan = Plan(request)
    per_user = plan.per_user()
    if aggregate:
        result = plan.aggregate(per_user)
    else:
        result = per_user.select(*request.columns.keys, *request.metric_columns)
    return plan, result


def evaluate(request: Request, *, aggregate: bool) -> Any:
    """Run the request and give the result back in the caller's frame kind.

    The input checks run first; for eager input they are collected in the same batch as
    the result, so both share one pass over the data and nothing is returned unless
    every check passed. A LazyFrame stays lazy: its checks run now, its metrics when
    the caller collects.
    """
    plan, result = query(request, aggregate=aggregate)
    if plan.first_checks:
        run_checks(plan.first_checks, engine=DEFAULT_ENGINE)
    screen = id_screen(request)
    screening = [] if screen is None else screen.queries()
    if request.source.kind == "polars-lazy":
        screened = run_checks(plan.checks, with_queries=screening, engine=DEFAULT_ENGINE)
        if screen is not None:
            screen.report(screened)
        return request.source.give_back(result)
    frame, *screened = run_checks(
        plan.checks, with_queries=[result, *screening], engine=DEFAULT_ENGINE
    )
    if screen is not None:
        screen.report(screened)
    return request.source.give_back(frame)


def id_screen(request: Request) -> IdScreen | None:
    """The check that the ids of recs and truth match (:mod:`frame_metrics.id_match`).

    One of the input checks: none with ``validate=False``, nor without truth (a long
    table's ids are in one frame) or a metric that reads it.
    """
    if not request.validate or request.truth is None or "truth" not in request.needs:
        return None
    c = request.columns
    truth_by = [b for b in c.by if b in request.truth.lazy.collect_schema()]
    return IdScreen(request.source.lazy, request.truth.lazy, [*truth_by, *c.user], c.item)


def diagnose(request: Request) -> Diagnostics:
    """Count who is left out, scored zero, deduplicated or tied at a cutoff.

    With rating metrics, also the (user, item) pairs on one side only: a prediction
    without a true rating, or a rating without a prediction.
    """
    one_sided = {"pairs_without_rating": 0, "pairs_without_prediction": 0}
    if "rating" in request.families():
        ratings = prepare_ratings(
            request.source.lazy,
            None if request.truth is None else request.truth.lazy,
            request.columns,
            validate=request.validate,
        )
        (sided,) = run_checks(
            ratings.checks,
            with_queries=[ratings.one_sided.select(pl.col(list(one_sided)).sum())],
        )
        one_sided = {name: int(sided[name][0] or 0) for name in one_sided}
        if request.families() == {"rating"}:
            n_pairs_users = ratings.matched.select(request.columns.keys).unique()
            n = n_pairs_users.select(pl.len()).collect().item()
            return Diagnostics(
                n_users=int(n),
                users_without_relevant=0,
                users_without_recommendations=0,
                duplicates_resolved={},
                ties_at_cutoff={},
                per_group=pl.DataFrame(),
                pairs_without_rating=one_sided["pairs_without_rating"],
                pairs_without_prediction=one_sided["pairs_without_prediction"],
            )
    ties_wanted = request.cutoffs if request.columns.score is not None else ()
    prepared = request.prepared(tie_cutoffs=ties_wanted)
    run_checks(prepared.checks)
    keys, by = request.columns.keys, list(request.columns.by)
    ctx = RankingContext.from_columns(RANK, REL, request.options)
    users = prepared.all_keys.join(
        prepared.long.group_by(keys).agg(
            ctx.n_relevant().alias("n_rel"),
            pl.col(RANK).is_not_null().any().alias("has_recs"),
        ),
        on=keys,
        how="left",
        nulls_equal=True,
    ).with_columns(pl.col("n_rel").fill_null(0), pl.col("has_recs").fill_null(False))
    in_truth = pl.lit(True)
    if prepared.truth_user_keys is not None:
        users = users.join(
            prepared.truth_user_keys.with_columns(pl.lit(True).alias("_fm_in_truth")),
            on=keys,
            how="left",
            nulls_equal=True,
        )
        in_truth = pl.col("_fm_in_truth").fill_null(False)
    counts = [
        (pl.col("n_rel") > 0).sum().alias("users_with_relevant"),
        (pl.col("n_rel") == 0).sum().alias("users_without_relevant"),
        ((pl.col("n_rel") > 0) & ~pl.col("has_recs")).sum().alias("users_without_recommendations"),
        # Every key is in recs or in truth: one not in truth is only in recs.
        (~in_truth).sum().alias("users_not_in_truth"),
    ]
    per_group_q = users.group_by(by).agg(counts).sort(by) if by else users.select(counts)
    queries = [per_group_q, prepared.duplicates, _list_counts(prepared, request.cutoffs)]
    if prepared.ties is not None:
        queries.append(
            prepared.ties.select(
                *(pl.col(f"tie@{k}").sum() for k in ties_wanted),
                *(pl.col(f"within@{k}").sum() for k in ties_wanted),
            )
        )
    results = pl.collect_all(queries)
    per_group = results[0].with_columns(pl.exclude(by).cast(pl.Int64))
    totals = per_group.select(pl.exclude(by).sum()).row(0, named=True)
    n_users = totals["users_with_relevant"]
    if request.options.empty == "zero":
        n_users += totals["users_without_relevant"]
    dups = dict(zip(results[1]["frame"], results[1]["rows_dropped"], strict=True))
    lists = results[2].row(0, named=True)
    ties, within = {}, {}
    if prepared.ties is not None:
        ties = {k: int(results[3][f"tie@{k}"][0]) for k in ties_wanted}
        within = {k: int(results[3][f"within@{k}"][0]) for k in ties_wanted}
    unseen = None
    if "popularity" in request.needs:
        unseen = int(unseen_items(request, prepared).select(pl.len()).collect().item())
    return Diagnostics(
        n_users=int(n_users),
        users_without_relevant=int(totals["users_without_relevant"]),
        users_without_recommendations=int(totals["users_without_recommendations"]),
        duplicates_resolved={str(f): int(n) for f, n in dups.items()},
        ties_at_cutoff=ties,
        per_group=per_group,
        items_not_in_train=unseen,
        ties_within_cutoff=within,
        pairs_without_rating=one_sided["pairs_without_rating"],
        pairs_without_prediction=one_sided["pairs_without_prediction"],
        users_not_in_truth=int(totals["users_not_in_truth"]),
        short_lists={k: int(lists[f"short@{k}"]) for k in request.cutoffs},
        longest_list=None if lists["longest"] is None else int(lists["longest"]),
        lists_with_rank_gaps=int(lists["gaps"]),
    )


def _list_counts(prepared: Prepared, cutoffs: tuple[int, ...]) -> pl.LazyFrame:
    """How full the lists are: one row of ``short@k`` per cutoff, ``longest`` and ``gaps``.

    ``short@k``: lists (keys with a recommendation, at any rank) with fewer than k items
    ranked within k; ``longest``: the most items a list has within the largest cutoff
    (null without cutoffs); ``gaps``: lists whose ranks within it skip a position (ranks
    1, 2, 5). Each empty position is read as a miss: precision@k still divides by k.
    """
    keys = prepared.keys
    deepest = max(cutoffs, default=None)
    top = prepared.top if deepest is None else prepared.top.filter(pl.col(RANK) <= deepest)
    per_list = top.group_by(keys).agg(
        *((pl.col(RANK) <= k).sum().alias(f"_fm_n@{k}") for k in cutoffs),
        pl.len().alias("_fm_n"),
        pl.col(RANK).max().alias("_fm_last"),
    )
    listed = prepared.recs_keys if prepared.recs_keys is not None else top.select(keys).unique()
    per_list = listed.join(per_list, on=keys, how="left", nulls_equal=True)
    n = pl.col("_fm_n").fill_null(0)
    return per_list.select(
        *((pl.col(f"_fm_n@{k}").fill_null(0) < k).sum().alias(f"short@{k}") for k in cutoffs),
        (n.max() if cutoffs else pl.lit(None, pl.Int64)).alias("longest"),
        (pl.col("_fm_last") > n).sum().alias("gaps"),
    )


def unseen_items(request: Request, prepared: Prepared) -> pl.LazyFrame:
    """The distinct recommended (``by`` train carries, item) rows no train user had."""
    c = request.columns
    train = request.extra("train", [*c.user, c.item])
    on = [*train.by, c.item]
    shared = request.global_tables
    known = (
        train.frame.select(on)
        if shared is None or shared.popularity is None
        else shared.popularity.lazy().select(on)  # every partition's train items
    )
    return prepared.top.select(on).unique().join(known.unique(), on=on, how="anti")
