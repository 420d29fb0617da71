"""fm.policy_value against Open Bandit Pipeline (obp 0.5.7, st-tech/zr-obp).

obp's estimators take arrays, one round per logged row: ``action``, ``reward``,
``pscore`` = π_b(action | x), ``action_dist`` (rounds x actions x len_list) = π_e, and
for DR ``estimated_rewards_by_reg_model`` (same shape) = q̂. A round here is a user with
one logged row; the evaluated policy is a deterministic top k (π_e = 1/k on each of its
k actions: ``len_list=1``, a distribution over the actions), given to policy_value
through ``probability=`` and by its ranks.

obp 0.5.7 declares Python < 3.11 and pins numpy 1.23, pandas 1.5 and torch 1.12, so it
cannot be a dependency here; where it is installed (``pip install --no-deps
--ignore-requires-python obp==0.5.7`` beside torch), the first tests run it. Its
estimators' arithmetic is transcribed below from ``obp/ope/estimators.py`` (0.5.7) so
that the comparison runs without it too, on bandit feedback generated here as
``SyntheticBanditDataset`` generates it (a softmax logging policy over linear logits,
Bernoulli rewards); where obp is installed, the transcription is checked against it.

obp's own output is checked everywhere too: ``tests/data/obp/record.py``, run once with obp
installed, stored obp's ``SyntheticBanditDataset`` feedback, its regression model's q̂ and
the evaluated policies' top actions (``feedback.npz``) and obp's estimates on exactly those
arrays (``estimates.json``, with the versions and the command); the last tests rebuild the
frames from the arrays and compare with the recorded numbers, and where obp is installed,
re-run obp on them.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import polars as pl
import pytest

import frame_metrics as fm
from tests.data.obp import record

REL = 1e-12


# -- obp/ope/estimators.py (0.5.7), transcribed ---------------------------------------------
# Each is obp's `_estimate_round_rewards(...)` followed by `.mean()` of
# `estimate_policy_value`, with position None (len_list 1: position 0).


def obp_ipw(
    reward: np.ndarray,
    action: np.ndarray,
    pscore: np.ndarray,
    action_dist: np.ndarray,
    lambda_: float = np.inf,
) -> float:
    position = np.zeros(action_dist.shape[0], dtype=int)
    iw = action_dist[np.arange(action.shape[0]), action, position] / pscore
    iw = np.minimum(iw, lambda_)  # weight clipping
    return float((reward * iw).mean())


def obp_snipw(
    reward: np.ndarray, action: np.ndarray, pscore: np.ndarray, action_dist: np.ndarray
) -> float:
    # SelfNormalizedInverseProbabilityWeighting: no clipping (lambda_ is not read).
    position = np.zeros(action_dist.shape[0], dtype=int)
    iw = action_dist[np.arange(action.shape[0]), action, position] / pscore
    return float((reward * iw / iw.mean()).mean())


def obp_dr(
    reward: np.ndarray,
    action: np.ndarray,
    pscore: np.ndarray,
    action_dist: np.ndarray,
    estimated_rewards_by_reg_model: np.ndarray,
    lambda_: float = np.inf,
) -> float:
    position = np.zeros(action_dist.shape[0], dtype=int)
    n = action.shape[0]
    iw = action_dist[np.arange(n), action, position] / pscore
    iw = np.minimum(iw, lambda_)  # weight clipping
    q_hat_at_position = estimated_rewards_by_reg_model[np.arange(n), :, position]
    q_hat_factual = estimated_rewards_by_reg_model[np.arange(n), action, position]
    pi_e_at_position = action_dist[np.arange(n), :, position]
    estimated_rewards = np.average(q_hat_at_position, weights=pi_e_at_position, axis=1)
    estimated_rewards += iw * (reward - q_hat_factual)
    return float(estimated_rewards.mean())


def obp_replay(reward: np.ndarray, action: np.ndarray, action_dist: np.ndarray) -> float:
    # ReplayMethod: the rounds where the (deterministic) policy picks the logged action.
    position = np.zeros(action_dist.shape[0], dtype=int)
    action_match = np.array(action_dist[np.arange(action.shape[0]), action, position] == 1)
    return float((action_match * reward / action_match.mean()).mean())


# -- bandit feedback and the evaluated policy ---------------------------------------------


def _feedback(n_rounds: int, n_actions: int, seed: int) -> dict[str, Any]:
    """Bandit feedback as SyntheticBanditDataset makes it (len_list 1, binary reward).

    Contexts ~ N(0, 1); the logging policy a softmax of linear logits; rewards
    Bernoulli(sigmoid(linear)); q̂ a noisy estimate of the expected reward.
    """
    rng = np.random.default_rng(seed)
    context = rng.normal(size=(n_rounds, 5))
    logits = context @ rng.normal(size=(5, n_actions))
    pi_b = np.exp(logits - logits.max(axis=1, keepdims=True))
    pi_b /= pi_b.sum(axis=1, keepdims=True)
    action = np.array([rng.choice(n_actions, p=p) for p in pi_b])
    expected = 1 / (1 + np.exp(-(context @ rng.normal(size=(5, n_actions)))))
    reward = rng.binomial(1, expected[np.arange(n_rounds), action])
    qhat = np.clip(expected + rng.normal(0, 0.05, expected.shape), 0, 1)
    return {
        "action": action,
        "reward": reward,
        "pscore": pi_b[np.arange(n_rounds), action],
        "expected_reward": expected,
        "qhat": qhat[:, :, None],
    }


def _top_k_policy(score: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """A deterministic top k of ``score`` per round: ranks (1 = top) and action_dist."""
    n, n_actions = score.shape
    order = np.argsort(-score, axis=1, kind="stable")
    ranks = np.empty_like(order)
    ranks[np.arange(n)[:, None], order] = np.arange(1, n_actions + 1)
    action_dist = np.where(ranks <= k, 1.0 / k, 0.0)[:, :, None]
    return ranks, action_dist


def _frames(
    bf: dict[str, Any], ranks: np.ndarray, action_dist: np.ndarray, qhat: np.ndarray
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Round i as user i: one logged row each; recs holds every action of every round."""
    n, n_actions = ranks.shape
    logs = pl.DataFrame(
        {
            "user": np.arange(n),
            "item": bf["action"],
            "reward": np.asarray(bf["reward"], dtype=np.float64),
            "pscore": bf["pscore"],
        }
    )
    recs = pl.DataFrame(
        {
            "user": np.repeat(np.arange(n), n_actions),
            "item": np.tile(np.arange(n_actions), n),
            "rank": ranks.ravel(),
            "p": action_dist[:, :, 0].ravel(),
            "q": qhat[:, :, 0].ravel(),
        }
    )
    return logs, recs


def _ours(logs: pl.DataFrame, recs: pl.DataFrame, k: int, **kwargs: Any) -> tuple[float, float]:
    """policy_value by probability= and by the top k of the ranks: both values."""
    if kwargs.get("estimator") == "dr":
        kwargs["reward_model"] = "q"
    by_p = fm.policy_value(logs, recs, probability="p", n_resamples=0, **kwargs)
    by_rank = fm.policy_value(logs, recs, k=k, n_resamples=0, **kwargs)
    return by_p["value"].item(), by_rank["value"].item()


def _agree(got: tuple[float, float], want: float) -> None:
    for value in got:
        assert math.isclose(value, want, rel_tol=REL), (value, want)


def _check_all(bf: dict[str, Any], score: np.ndarray, qhat: np.ndarray, k: int) -> None:
    ranks, action_dist = _top_k_policy(score, k)
    logs, recs = _frames(bf, ranks, action_dist, qhat)
    args = (bf["reward"], bf["action"], bf["pscore"], action_dist)
    _agree(_ours(logs, recs, k, estimator="ips"), obp_ipw(*args))
    _agree(_ours(logs, recs, k, estimator="snips"), obp_snipw(*args))
    _agree(_ours(logs, recs, k, estimator="dr"), obp_dr(*args, qhat))
    for lam in (1.5, 4.0):
        _agree(_ours(logs, recs, k, estimator="ips", max_weight=lam), obp_ipw(*args, lam))
        _agree(_ours(logs, recs, k, estimator="dr", max_weight=lam), obp_dr(*args, qhat, lam))


@pytest.mark.parametrize("k", [1, 3, 10])
def test_transcribed_obp_estimators(k: int) -> None:
    bf = _feedback(3000, 10, seed=k)
    score = bf["expected_reward"] + np.random.default_rng(7).normal(0, 0.1, (3000, 10))
    _check_all(bf, score, bf["qhat"], k)


def test_transcribed_replay_is_matching_at_k_1() -> None:
    bf = _feedback(2000, 8, seed=4)
    ranks, action_dist = _top_k_policy(bf["expected_reward"], 1)
    logs, recs = _frames(bf, ranks, action_dist, bf["qhat"])
    got = fm.policy_value(logs, recs, k=1, estimator="matching", n_resamples=0)
    want = obp_replay(bf["reward"], bf["action"], action_dist)
    assert math.isclose(got["value"].item(), want, rel_tol=REL)


# -- obp itself -----------------------------------------------------------------------------


def _obp() -> Any:
    return pytest.importorskip(
        "obp",
        reason="obp 0.5.7 declares Python < 3.11 and pins numpy/pandas/torch: install it with "
        "--no-deps --ignore-requires-python beside torch to run it; its estimators are "
        "transcribed above and its output recorded in tests/data/obp, so the comparison "
        "runs without it",
    )


@pytest.mark.parametrize("k", [1, 3, 5])
def test_obp_synthetic_bandit_feedback(k: int) -> None:
    _obp()
    from obp.dataset import SyntheticBanditDataset, logistic_reward_function
    from obp.ope import (
        DoublyRobust,
        InverseProbabilityWeighting,
        RegressionModel,
        ReplayMethod,
        SelfNormalizedInverseProbabilityWeighting,
    )
    from sklearn.linear_model import LogisticRegression

    dataset = SyntheticBanditDataset(
        n_actions=10,
        dim_context=5,
        reward_type="binary",
        reward_function=logistic_reward_function,
        random_state=12345,
    )
    bf = dataset.obtain_batch_bandit_feedback(n_rounds=5000)
    assert bf["position"] is None  # len_list 1: obp reads position 0
    # The evaluated policy: the top k of a noisy estimate of the expected reward.
    score = bf["expected_reward"] + np.random.default_rng(k).normal(0, 0.2, (5000, 10))
    ranks, action_dist = _top_k_policy(score, k)
    model = RegressionModel(
        n_actions=10, base_model=LogisticRegression(random_state=12345), len_list=1
    )
    qhat = model.fit_predict(
        context=bf["context"], action=bf["action"], reward=bf["reward"], random_state=12345
    )
    logs, recs = _frames(bf, ranks, action_dist, qhat)
    kw = {
        "action": bf["action"],
        "reward": bf["reward"],
        "pscore": bf["pscore"],
        "action_dist": action_dist,
    }
    ipw = InverseProbabilityWeighting().estimate_policy_value(**kw)
    snipw = SelfNormalizedInverseProbabilityWeighting().estimate_policy_value(**kw)
    dr = DoublyRobust().estimate_policy_value(**kw, estimated_rewards_by_reg_model=qhat)
    _agree(_ours(logs, recs, k, estimator="ips"), ipw)
    _agree(_ours(logs, recs, k, estimator="snips"), snipw)
    _agree(_ours(logs, recs, k, estimator="dr"), dr)
    for lam in (2.0, 5.0):
        ipw = InverseProbabilityWeighting(lambda_=lam).estimate_policy_value(**kw)
        dr = DoublyRobust(lambda_=lam).estimate_policy_value(
            **kw, estimated_rewards_by_reg_model=qhat
        )
        _agree(_ours(logs, recs, k, estimator="ips", max_weight=lam), ipw)
        _agree(_ours(logs, recs, k, estimator="dr", max_weight=lam), dr)
    # The transcription is obp's arithmetic.
    args = (bf["reward"], bf["action"], bf["pscore"], action_dist)
    assert obp_ipw(*args) == InverseProbabilityWeighting().estimate_policy_value(**kw)
    assert obp_snipw(*args) == snipw
    assert obp_dr(*args, qhat) == DoublyRobust().estimate_policy_value(
        **kw, estimated_rewards_by_reg_model=qhat
    )
    if k == 1:  # a deterministic single action: ReplayMethod is matching
        replay = ReplayMethod().estimate_policy_value(
            action=bf["action"], reward=bf["reward"], action_dist=action_dist
        )
        got = fm.policy_value(logs, recs, k=1, estimator="matching", n_resamples=0)
        assert math.isclose(got["value"].item(), replay, rel_tol=REL)
        assert obp_replay(bf["reward"], bf["action"], action_dist) == replay


# -- obp's own output, recorded -------------------------------------------------------------
# Where obp cannot be installed (CI), the tests above compare with the transcription only; the
# ones below compare with numbers obp itself computed, on data obp itself generated.

RECORDED, FEEDBACK = record.load()
#: obp's estimator_name -> policy_value's estimator.
FM_ESTIMATOR = {"ipw": "ips", "snipw": "snips", "dr": "dr", "rm": "matching"}
RECORDED_CASES = [(s.name, k) for s in record.SETTINGS for k in record.KS]


def _recorded(name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(s for s in RECORDED["settings"] if s["name"] == name)
    return found


def _recorded_frames(name: str, k: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    """logs and recs of one recorded setting, with the top k's ``p`` column.

    recs ranks every action of every round: the stored top actions first (ranks 1, 2, 3,
    best first), then the others in action order; only whether a rank is <= k is read.
    """
    arrays = FEEDBACK[name]
    n_actions = record.setting(name).n_actions
    top = arrays["top"].astype(np.int64)  # stored as int16 to keep the file small
    n = top.shape[0]
    rows = np.arange(n)[:, None]
    rest = np.ones((n, n_actions), dtype=bool)
    rest[rows, top] = False
    order = np.concatenate([top, np.nonzero(rest)[1].reshape(n, -1)], axis=1)
    ranks = np.empty_like(order)
    ranks[rows, order] = np.arange(1, n_actions + 1)
    bf = {
        "action": arrays["action"].astype(np.int64),  # the recs' item dtype, for the join
        "reward": arrays["reward"],
        "pscore": arrays["pscore"],
    }
    qhat = arrays["qhat"].astype(np.float64)[:, :, None]  # exact: float32 -> float64
    return _frames(bf, ranks, record.action_dist(top, n_actions, k), qhat)


def test_obp_recorded_fixture_is_complete() -> None:
    """The recorded files hold what the comparison needs, and stay small.

    Every setting of ``record.SETTINGS`` has its arrays (``n_rounds`` rounds, q̂ for each
    action) and, for each top k, each estimator with and without ``lambda_``; the clipping
    binds in some of them (a ``lambda_`` that never clips would test nothing).
    """
    assert RECORDED["obp"] == "0.5.7"
    assert set(FEEDBACK) == {s.name for s in record.SETTINGS}
    clipped = 0
    for s in record.SETTINGS:
        arrays = FEEDBACK[s.name]
        n = RECORDED["n_rounds"]
        assert arrays["action"].shape == arrays["reward"].shape == arrays["pscore"].shape == (n,)
        assert arrays["top"].shape == (n, max(record.KS))
        assert arrays["qhat"].shape == (n, s.n_actions)
        estimates = _recorded(s.name)["estimates"]
        for k in record.KS:
            want = {(e, None) for e in ("ipw", "snipw", "dr")} | {
                (e, lam) for e in ("ipw", "dr") for lam in s.lambdas(k)
            }
            if k == 1:
                want.add(("rm", None))
            got = {(e["estimator"], e["lambda_"]) for e in estimates if e["k"] == k}
            assert got == want, (s.name, k)
            value = {(e["estimator"], e["lambda_"]): e["value"] for e in estimates if e["k"] == k}
            clipped += sum(value["ipw", lam] != value["ipw", None] for lam in s.lambdas(k))
    assert clipped >= len(record.SETTINGS)
    size = record.FEEDBACK.stat().st_size + record.ESTIMATES.stat().st_size
    assert size < 600_000  # a test fixture in the sdist, not a data set


@pytest.mark.parametrize(
    ("name", "k"), RECORDED_CASES, ids=[f"{n}-top{k}" for n, k in RECORDED_CASES]
)
def test_obp_recorded_estimates(name: str, k: int) -> None:
    """policy_value equals obp 0.5.7's own estimates, recorded, to 1e-12 relative.

    The numbers are in ``tests/data/obp/estimates.json``: obp's IPW (``lambda_`` = max_weight,
    or none), SNIPW, DR (with and without ``lambda_``) and, for the top 1, Replay, run by
    obp on the arrays of ``tests/data/obp/feedback.npz`` (obp's SyntheticBanditDataset, its
    RegressionModel's q̂, the deterministic top 1 and top 3 of a noisy expected reward).
    ``tests/data/obp/record.py`` made both files (its docstring has the command; the JSON the
    versions); regenerate them by running it again with obp installed. Each value is checked
    by ``probability=`` and by the top k of the ranks (matching: by the ranks).
    """
    logs, recs = _recorded_frames(name, k)
    estimates = [e for e in _recorded(name)["estimates"] if e["k"] == k]
    assert estimates
    for e in estimates:
        estimator = FM_ESTIMATOR[e["estimator"]]
        if estimator == "matching":  # Replay: the rounds whose logged action is the top 1
            got = fm.policy_value(logs, recs, k=k, estimator="matching", n_resamples=0)
            assert math.isclose(got["value"].item(), e["value"], rel_tol=REL), e
            continue
        kwargs: dict[str, Any] = {"estimator": estimator}
        if e["lambda_"] is not None:
            kwargs["max_weight"] = e["lambda_"]
        _agree(_ours(logs, recs, k, **kwargs), e["value"])


@pytest.mark.parametrize("name", [s.name for s in record.SETTINGS])
def test_obp_reproduces_recorded_fixture(name: str) -> None:
    """Where obp is installed: it gives the recorded files again, so they cannot drift.

    obp's estimators re-run on the stored arrays give the recorded numbers (to 1e-12: the
    same arithmetic; a numpy of another build may sum in another order); obp's generator
    re-run gives the stored feedback and policy (its RandomState streams are fixed), and
    its regression model q̂ to 1e-5 (the solver of another scikit-learn may stop elsewhere).
    """
    _obp()
    s = record.setting(name)
    stored = FEEDBACK[name]
    want = _recorded(name)["estimates"]
    got = record.estimate(stored, s)
    assert [(e["k"], e["estimator"], e["lambda_"]) for e in got] == [
        (e["k"], e["estimator"], e["lambda_"]) for e in want
    ]
    for g, w in zip(got, want, strict=True):
        assert math.isclose(g["value"], w["value"], rel_tol=REL), (g, w)
    fresh = record.generate(s)
    for field in ("action", "reward", "top"):
        np.testing.assert_array_equal(fresh[field], stored[field], err_msg=field)
        assert fresh[field].dtype == stored[field].dtype
    np.testing.assert_allclose(fresh["pscore"], stored["pscore"], rtol=REL, atol=0)
    np.testing.assert_allclose(fresh["qhat"], stored["qhat"], rtol=0, atol=1e-5)
