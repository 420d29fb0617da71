"""trec_eval's own quicktest, reproduced with ``convention="trec_eval"`` (issue 11).

The qrels, runs and expected outputs of trec_eval 10.0's ``make quicktest`` live in
``../shared/data/trec_eval`` beside the project root (``configs.json`` gives each expected
file's qrels, run and flags); the tests skip when that folder is absent. For every config,
every measure of the expected output that frame_metrics computes is compared per topic
(the ``-q`` files) and for ``all`` (the mean over evaluated topics) within half the printed
precision (values are printed to 4 decimals).

How the inputs are read: a run line is ``qid Q0 docno rank sim tag [junk...]`` (the rank
column is ignored, as trec_eval does), a qrels line ``qid iter docno rel``; docnos are kept
as strings and negative judgements are read as 0 (the package wants relevance >= 0; the
data's README: "negative qrels as 0"). Flags map to options: ``-l2`` -> ``threshold=2``,
``-c`` -> ``users="truth"``, ``-M100`` -> the run cut to each topic's top 100 in trec_eval's
order (score descending, docno descending) before the call, ``-mndcg.1=3,2=9,4=4.5`` ->
``gain={1: 3, 2: 9, 4: 4.5}``; ``-m ndcg_cut.10,20,23.4`` prints ``ndcg_cut_23`` (the
cutoff is read as a long integer), so every cutoff is taken from the printed name.

Reproduced (trec_eval measure -> frame_metrics metric), ``D`` a cutoff past every list and
every topic's count of positive judgements (so that "no cutoff" holds for the list and the
ideal list):

    P_k -> precision@k          recall_k -> recall@k          success_k -> hit_rate@k
    map_cut_k -> ap@k           ndcg_cut_k -> ndcg@k          map -> ap@D
    ndcg -> ndcg@D              ndcg_<gain table> -> ndcg(gain={...})@D
    recip_rank -> mrr@10 (the preset has no MRR cutoff: topic 303's first hit is at 19)
    Rprec -> r_precision        Rprec_mult_1.00 -> r_precision (P at 1.0 * R)
    bpref -> bpref              set_recall -> recall@D
    rbp -> rbp (the preset's rbp_gain="relative": rel / the topic's largest judged level)
    num_q -> n_users (and the number of per-topic rows)
    num_rel_ret -> recall@D * num_rel (per topic; summed for all)
    num_rel, num_ret -> counted from the inputs (checks the reading of the files)

The same measures asked for by trec_eval's own names (``P_10``, ``map_cut_10``,
``recip_rank``, ...) and by ir_measures' (``P@10``, ``AP@10``, ``RR``, ``Bpref``, ...), with
no convention and only the flags' options, give trec_eval's output as well
(``test_trec_eval_and_ir_measures_names``; spec section 8).

Not computed by frame_metrics, listed in ``NOT_COMPUTED`` with the reason, and checked by
``test_every_measure_is_accounted_for`` (a measure neither reproduced nor listed fails):
runid, relstring (strings), gm_map, gm_bpref, infAP, iprec_at_recall_*, 11pt_avg*,
Rprec_mult_x for x != 1, relative_P_k, set_P, set_map, set_F, set_relative_P, utility*,
Rndcg, ndcg_rel, binG, G, unj_k, rbp_resid and num_nonrel_judged_ret.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import frame_metrics as fm
from tests.conftest import Constructor, to_polars

DATA_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "trec_eval"
MISSING = (
    f"trec_eval's quicktest data is not available ({DATA_DIR}: shared/data/trec_eval beside "
    "the project root; see its README.md)"
)

#: Half the printed precision (4 decimals), plus room for the binary representation.
TOL = 0.00005 + 1e-12

#: The configs of configs.json, named here so that the tests exist without the data.
CONFIG_NAMES = (
    "out.test",
    "out.test.a",
    "out.test.aq",
    "out.test.aqc",
    "out.test.aqcM",
    "out.test.aql",
    "out.test.meas_params",
    "out.comment.test",
)

#: Measures whose value is a string (the run's tag, relstring's relevance string).
STRINGS = r"runid|relstring(_\d+)?"

#: trec_eval measures (full-name patterns) that frame_metrics does not compute, and why.
NOT_COMPUTED: dict[str, str] = {
    STRINGS: "a string, not a number",
    r"gm_map|gm_bpref": "geometric mean over topics: the package averages arithmetically",
    r"infAP": "inferred AP (sampled judgements): not a package metric",
    r"iprec_at_recall_.*|11pt_avg.*": "interpolated precision at recall levels: not a package metric",
    r"Rprec_mult_(?!1\.00$).*": "precision at a multiple of R other than 1: not a package metric",
    r"relative_P_\d+": "hits@k / min(k, R): not a package metric",
    r"set_P|set_map|set_F|set_relative_P": "set measures over the retrieved set: not package metrics",
    r"utility.*": "utility (gain/cost per document): not a package metric",
    r"Rndcg|ndcg_rel|binG|G": "ndcg variants and G/binG: not package metrics",
    r"unj_\d+": "share of unjudged documents (negative judgements count as unjudged, "
    "which reading them as 0 loses): not reproduced",
    r"rbp_resid": "RBP residual: not a package metric",
    r"num_nonrel_judged_ret": "not a package metric",
}


# ---------------------------------------------------------------------------------------
# Reading the files


@dataclass(frozen=True)
class Config:
    name: str
    qrels: str
    run: str
    expected: str
    relevance_level: int
    average_complete: bool
    max_docs: int | None


def _configs() -> dict[str, Config]:
    raw = json.loads((DATA_DIR / "configs.json").read_text())
    return {
        c["name"]: Config(
            c["name"],
            c["qrels"],
            c["run"],
            c["expected"],
            int(c["relevance_level"]),
            bool(c["average_complete"]),
            None if c["max_docs"] is None else int(c["max_docs"]),
        )
        for c in raw["configs"]
    }


def _largest(values: pl.Series) -> int:
    """The largest of whole numbers (0 for none)."""
    return int(values.to_frame().select(pl.first().max()).item() or 0)


def read_qrels(path: Path) -> pl.DataFrame:
    """``qid iter docno rel`` -> user, item, relevance (negative judgements as 0)."""
    users, items, rels = [], [], []
    for line in path.read_text().splitlines():
        fields = line.split()
        if not fields:
            continue
        users.append(fields[0])
        items.append(fields[2])
        rels.append(max(int(fields[3]), 0))
    return pl.DataFrame(
        {"user": users, "item": items, "relevance": rels},
        schema={"user": pl.String, "item": pl.String, "relevance": pl.Int64},
    )


def read_run(path: Path, max_docs: int | None) -> pl.DataFrame:
    """``qid Q0 docno rank sim tag [junk]`` -> user, item, score; ``-M``: each topic's top."""
    users, items, scores = [], [], []
    for line in path.read_text().splitlines():
        fields = line.split()
        if not fields:
            continue
        users.append(fields[0])
        items.append(fields[2])
        scores.append(float(fields[4]))
    run = pl.DataFrame(
        {"user": users, "item": items, "score": scores},
        schema={"user": pl.String, "item": pl.String, "score": pl.Float64},
    )
    if max_docs is not None:
        # trec_eval truncates after its own sort: sim descending, docno descending (strcmp;
        # polars compares strings byte-wise, the same order).
        run = (
            run.sort(["user", "score", "item"], descending=[False, True, True])
            .group_by("user", maintain_order=True)
            .head(max_docs)
        )
    return run


def read_expected(path: Path) -> dict[str, dict[str, float]]:
    """``measure \\t qid|all \\t value`` -> {measure: {qid or "all": value}} (strings left out)."""
    out: dict[str, dict[str, float]] = {}
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        name, qid, value = (part.strip() for part in line.split("\t"))
        if re.fullmatch(STRINGS, name):
            continue
        out.setdefault(name, {})[qid] = float(value)
    return out


def _measure_names(path: Path) -> list[str]:
    """Every measure name of an expected file, strings included, in file order."""
    names = (line.split("\t")[0].strip() for line in path.read_text().splitlines() if line)
    return list(dict.fromkeys(names))


# ---------------------------------------------------------------------------------------
# trec_eval measure -> frame_metrics metric


@dataclass(frozen=True)
class Column:
    """A measure read from one metric column of the package's output."""

    metric: str


@dataclass(frozen=True)
class Count:
    """A ``num_*`` measure: summed over topics for ``all``, not averaged."""

    name: str


Spec = Column | Count


def _gain_table(text: str) -> str:
    """``1=3,2=9,4=4.5`` -> ``{1:3,2:9,4:4.5}`` (a gain table as a metric string writes it)."""
    pairs = []
    for pair in text.split(","):
        level, gain = pair.split("=")
        g = float(gain)
        pairs.append(f"{int(level)}:{int(g) if g.is_integer() else g}")
    return "{" + ",".join(pairs) + "}"


_CUTS: dict[str, str] = {
    "P": "precision",
    "recall": "recall",
    "success": "hit_rate",
    "map_cut": "ap",
    "ndcg_cut": "ndcg",
}


def spec_for(name: str, deep: int, graded: bool) -> Spec | str:
    """How frame_metrics computes trec_eval measure ``name``, or why it does not."""
    m = re.fullmatch(r"(P|recall|success|map_cut|ndcg_cut)_(\d+)", name)
    if m:
        return Column(f"{_CUTS[m[1]]}@{m[2]}")
    m = re.fullmatch(r"ndcg_(\d+=[\d.]+(?:,\d+=[\d.]+)*)", name)
    if m:
        return Column(f"ndcg(gain={_gain_table(m[1])})@{deep}")
    simple: dict[str, Spec] = {
        "map": Column(f"ap@{deep}"),
        "ndcg": Column(f"ndcg@{deep}"),
        "set_recall": Column(f"recall@{deep}"),
        # The preset has no MRR cutoff: @10 is ignored (topic 303's first hit is at 19).
        "recip_rank": Column("mrr@10"),
        "Rprec": Column("r_precision"),
        "Rprec_mult_1.00": Column("r_precision"),
        "bpref": Column("bpref"),
        "num_q": Count("num_q"),
        "num_ret": Count("num_ret"),
        "num_rel": Count("num_rel"),
        "num_rel_ret": Count("num_rel_ret"),
    }
    if name in simple:
        return simple[name]
    if name == "rbp":
        return Column("rbp")
    for pattern, why in NOT_COMPUTED.items():
        if re.fullmatch(pattern, name):
            return why
    raise AssertionError(f"trec_eval measure {name!r} is neither reproduced nor listed")


# ---------------------------------------------------------------------------------------
# One evaluation per config, shared by all its measures


def call_options(config: Config) -> dict[str, Any]:
    """fm.evaluate's options for a config's flags (everything else from the preset)."""
    opts: dict[str, Any] = {"convention": "trec_eval", "score": "score"}
    if config.relevance_level != 1:
        opts["threshold"] = config.relevance_level  # -l
    if config.average_complete:
        opts["users"] = "truth"  # -c
    return opts


@dataclass(frozen=True)
class Computed:
    config: Config
    truth: pl.DataFrame
    run: pl.DataFrame
    deep: int
    graded: bool
    expected: dict[str, dict[str, float]]
    specs: dict[str, Spec | str]
    per_user: pl.DataFrame
    means: pl.DataFrame
    num_rel: dict[str, int]
    num_ret: dict[str, int]

    def topics(self) -> list[str]:
        return self.per_user["user"].to_list()

    def user_value(self, metric: str, qid: str) -> float:
        row = self.per_user.filter(pl.col("user") == qid)
        assert row.height == 1, f"topic {qid}: {row.height} rows in the per-user output"
        return float(row[metric][0])

    def value(self, spec: Spec, qid: str) -> float:
        """The package's value of ``spec`` for a topic or for ``all``."""
        if isinstance(spec, Column):
            if qid == "all":
                return float(self.means[spec.metric][0])
            return self.user_value(spec.metric, qid)
        if spec.name == "num_q":
            assert qid == "all"
            n = int(self.means["n_users"][0])
            assert n == self.per_user.height
            return float(n)
        counts: Callable[[str], float]
        if spec.name == "num_rel":
            counts = lambda q: float(self.num_rel.get(q, 0))  # noqa: E731
        elif spec.name == "num_ret":
            counts = lambda q: float(self.num_ret.get(q, 0))  # noqa: E731
        else:  # num_rel_ret: recall over the whole list times num_rel, a whole number
            counts = lambda q: float(  # noqa: E731
                round(self.user_value(f"recall@{self.deep}", q) * self.num_rel.get(q, 0))
            )
        if qid == "all":
            return sum(counts(q) for q in self.topics())
        return counts(qid)


@functools.cache
def computed(name: str) -> Computed:
    config = _configs()[name]
    truth = read_qrels(DATA_DIR / config.qrels)
    run = read_run(DATA_DIR / config.run, config.max_docs)
    longest = _largest(run.group_by("user").len()["len"])
    most_relevant = _largest(truth.filter(pl.col("relevance") > 0).group_by("user").len()["len"])
    deep = max(1000, longest, most_relevant)
    graded = _largest(truth["relevance"]) > 1
    expected = read_expected(DATA_DIR / config.expected)
    specs = {measure: spec_for(measure, deep, graded) for measure in expected}
    metrics = [s.metric for s in specs.values() if isinstance(s, Column)]
    metrics.append(f"recall@{deep}")  # num_rel_ret
    metrics = list(dict.fromkeys(metrics))
    num_rel = dict(
        truth.filter(pl.col("relevance") >= config.relevance_level)
        .group_by("user")
        .len()
        .iter_rows()
    )
    num_ret = dict(run.group_by("user").len().iter_rows())
    opts = call_options(config)
    per_user = fm.evaluate(run, truth, metrics=metrics, **opts).sort("user")
    means = fm.evaluate(run, truth, metrics=metrics, aggregate=True, **opts)
    return Computed(
        config, truth, run, deep, graded, expected, specs, per_user, means, num_rel, num_ret
    )


# ---------------------------------------------------------------------------------------
# Test cases, one per (config, measure computed), read at collection time when possible


def _cases() -> list[Any]:
    if not (DATA_DIR / "configs.json").is_file():
        return [pytest.param("", "", marks=pytest.mark.skip(reason=MISSING), id="no-data")]
    configs = _configs()
    cases: list[Any] = []
    for name in CONFIG_NAMES:
        config = configs[name]
        graded = _largest(read_qrels(DATA_DIR / config.qrels)["relevance"]) > 1
        for measure in read_expected(DATA_DIR / config.expected):
            # The cutoff past every list only names the metric: any value tells which are computed.
            if isinstance(spec_for(measure, 1000, graded), str):
                continue
            cases.append(pytest.param(name, measure, id=f"{name}-{measure}"))
    return cases


def _differences(c: Computed, measure: str) -> list[str]:
    spec = c.specs[measure]
    assert not isinstance(spec, str), f"{measure}: {spec}"
    wrong = []
    for qid, want in c.expected[measure].items():
        got = c.value(spec, qid)
        if not math.isclose(got, want, rel_tol=0.0, abs_tol=TOL):
            wrong.append(f"{measure} {qid}: trec_eval {want:.4f}, frame_metrics {got!r}")
    return wrong


@pytest.fixture(scope="module")
def data() -> Path:
    if not (DATA_DIR / "configs.json").is_file():
        pytest.skip(MISSING)
    return DATA_DIR


@pytest.mark.parametrize(("config", "measure"), _cases())
def test_measure(data: Path, config: str, measure: str) -> None:
    """One trec_eval measure of one config: every topic (``-q``) and ``all``."""
    c = computed(config)
    assert not _differences(c, measure)


def test_configs_are_the_ones_tested(data: Path) -> None:
    assert tuple(_configs()) == CONFIG_NAMES


@pytest.mark.parametrize("config", CONFIG_NAMES)
def test_topics_evaluated(data: Path, config: str) -> None:
    """The package evaluates the topics trec_eval reports, no more, no fewer."""
    c = computed(config)
    if "num_q" in c.expected:  # not in out.test.meas_params (no -m num_q)
        assert int(c.means["n_users"][0]) == c.expected["num_q"]["all"]
    assert c.per_user.height == int(c.means["n_users"][0])
    per_topic = {q for values in c.expected.values() for q in values if q != "all"}
    if per_topic:  # a -q file
        assert set(c.topics()) == per_topic


@pytest.mark.parametrize("config", CONFIG_NAMES)
def test_every_measure_is_accounted_for(data: Path, config: str) -> None:
    """Each measure printed is reproduced or listed as not computed, with a reason."""
    c = computed(config)
    names = _measure_names(DATA_DIR / c.config.expected)
    specs = {name: spec_for(name, c.deep, c.graded) for name in names}
    reproduced = [n for n, s in specs.items() if not isinstance(s, str)]
    assert reproduced, "no measure of this config is reproduced"
    assert set(reproduced) <= set(c.expected)


def test_rbp_graded_from_binary_levels(data: Path) -> None:
    """out.test.aql's rbp (graded qrels), rebuilt from the spec's binary rbp.

    trec_eval 10.0 gains rel / m, m the topic's largest judged level (the preset's
    ``rbp_gain="relative"``). As rel = Σ_{l >= 1} [rel >= l], that rbp is also
    Σ_l rbp(threshold=l) / m with the spec's binary rbp at every level: an independent
    check of the relative gain, and of what it changes.
    """
    c = computed("out.test.aql")
    top = _largest(c.truth["relevance"])
    levels = [
        fm.evaluate(
            c.run,
            c.truth,
            metrics=["rbp"],
            score="score",
            convention="trec_eval",
            threshold=level,
            rbp_gain="binary",
            gain_scope="relevant",  # the threshold applies (the preset's rbp ignores it)
        )
        .sort("user")
        .rename({"rbp": f"rbp_{level}"})
        for level in range(1, top + 1)
    ]
    per_level = functools.reduce(lambda a, b: a.join(b, on="user"), levels)
    largest = c.truth.group_by("user").agg(pl.col("relevance").max().clip(lower_bound=1).alias("m"))
    graded = per_level.join(largest, on="user").select(
        "user", (pl.sum_horizontal(pl.exclude("user", "m")) / pl.col("m")).alias("rbp")
    )
    got = dict(graded.iter_rows())
    got["all"] = float(graded.select(pl.col("rbp").mean()).item())
    want = c.expected["rbp"]
    assert set(got) == set(want)
    wrong = {q: (want[q], got[q]) for q in want if not math.isclose(got[q], want[q], abs_tol=TOL)}
    assert not wrong
    # ... and the spec's binary rbp is not trec_eval's on these graded qrels.
    binary = levels[c.config.relevance_level - 1].filter(pl.col("user") == "301")
    assert not math.isclose(float(binary.item(0, 1)), want["301"], abs_tol=TOL)


def test_out_test_means_on_every_frame_kind(data: Path, constructor: Constructor) -> None:
    """out.test's ``all`` line, from recs and truth of each supported frame kind."""
    c = computed("out.test")
    columns = {m: s for m, s in c.specs.items() if isinstance(s, Column)}
    metrics = list(dict.fromkeys(s.metric for s in columns.values()))
    out = to_polars(
        fm.evaluate(
            constructor(c.run),
            constructor(c.truth),
            metrics=metrics,
            aggregate=True,
            **call_options(c.config),
        )
    )
    assert int(out["n_users"][0]) == c.expected["num_q"]["all"]
    wrong = {}
    for measure, spec in columns.items():
        want, got = c.expected[measure]["all"], float(out[spec.metric][0])
        if not math.isclose(got, want, abs_tol=TOL):
            wrong[measure] = (want, got)
    assert not wrong


# ---------------------------------------------------------------------------------------
# trec_eval's own names and ir_measures' (spec section 8): no convention, no mapping

#: trec_eval measures the package accepts by trec_eval's own name.
TREC_EVAL_NAMES = r"(P|recall|success|map_cut|ndcg_cut)_\d+|recip_rank|Rprec|Rprec_mult_1\.00"

_IR_MEASURES_CUT = {
    "P": "P",
    "recall": "R",
    "success": "Success",
    "map_cut": "AP",
    "ndcg_cut": "nDCG",
}


def ir_measures_name(measure: str) -> str | None:
    """ir_measures' name for a trec_eval measure (ir_measures runs trec_eval for these)."""
    m = re.fullmatch(r"(P|recall|success|map_cut|ndcg_cut)_(\d+)", measure)
    if m:
        return f"{_IR_MEASURES_CUT[m[1]]}@{m[2]}"
    return {"recip_rank": "RR", "Rprec": "Rprec", "bpref": "Bpref"}.get(measure)


@pytest.mark.parametrize("config", CONFIG_NAMES)
def test_trec_eval_and_ir_measures_names(data: Path, config: str) -> None:
    """The measures asked for by their trec_eval and ir_measures names give trec_eval's
    output: no convention and no mapping, only the config's flags (-l, -c)."""
    c = computed(config)
    spelled = {
        measure: [
            *([measure] if re.fullmatch(TREC_EVAL_NAMES, measure) else []),
            *([name] if (name := ir_measures_name(measure)) else []),
        ]
        for measure in c.expected
    }
    spelled = {measure: names for measure, names in spelled.items() if names}
    assert spelled, "no measure of this config has a trec_eval or ir_measures name"
    metrics = list(dict.fromkeys(name for names in spelled.values() for name in names))
    flags = {k: v for k, v in call_options(c.config).items() if k != "convention"}
    per_user = fm.evaluate(c.run, c.truth, metrics=metrics, **flags).sort("user")
    means = fm.evaluate(c.run, c.truth, metrics=metrics, aggregate=True, **flags)
    assert per_user.columns == ["user", *metrics]
    assert per_user["user"].to_list() == c.topics()
    wrong = []
    for measure, names in spelled.items():
        for name in names:
            for qid, want in c.expected[measure].items():
                if qid == "all":
                    got = float(means[name][0])
                else:
                    got = float(per_user.filter(pl.col("user") == qid)[name][0])
                if not math.isclose(got, want, rel_tol=0.0, abs_tol=TOL):
                    wrong.append(f"{measure} as {name!r}, {qid}: trec_eval {want}, got {got!r}")
    assert not wrong
