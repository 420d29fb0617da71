"""Record Open Bandit Pipeline's own bandit feedback and estimates, for CI to compare with.

obp 0.5.7 cannot be installed where the tests run in CI (it declares Python < 3.11 and
imports torch at import time), so its output is recorded here, once, by obp itself, and
``tests/test_policy_value_obp.py`` compares ``fm.policy_value`` with it everywhere. Run
this with a Python where obp 0.5.7 is installed (``pip install --no-deps
--ignore-requires-python obp==0.5.7`` beside a CPU build of torch and scikit-learn)::

    python3 tests/data/obp/record.py

It writes two files beside itself (whatever the working directory):

- ``feedback.npz``: for each setting of :data:`SETTINGS`, obp's
  ``SyntheticBanditDataset(...).obtain_batch_bandit_feedback(n_rounds=2000)`` (``len_list``
  1) as ``<name>/action``, ``<name>/reward`` and ``<name>/pscore``; ``<name>/top``, the
  evaluated policy's three best actions per round, best first (its top 1 is the first
  column, its top 3 all three); ``<name>/qhat``, obp's ``RegressionModel`` q̂ per round
  and action, rounded to float32 (half the bytes; the estimates are computed on the
  rounded values, so the comparison stays exact).
- ``estimates.json``: obp's ``InverseProbabilityWeighting`` (without and with
  ``lambda_``), ``SelfNormalizedInverseProbabilityWeighting``, ``DoublyRobust`` (without
  and with ``lambda_``) and, for the top 1, ``ReplayMethod``, run by obp on exactly the
  arrays of ``feedback.npz``; with the versions of obp, Python, numpy and scikit-learn and
  the command that produced it.

The test imports :func:`load`, :func:`action_dist` and, where obp is installed,
:func:`generate` and :func:`estimate`, so that the arrays it rebuilds are the ones obp
read, and re-running obp on them must give the recorded numbers. obp and scikit-learn are
imported inside the functions that use them: the module imports without them (pytest's
``--doctest-modules`` imports it in CI).
"""

from __future__ import annotations

import io
import json
import platform
import shlex
import sys
import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

HERE = Path(__file__).resolve().parent
FEEDBACK = HERE / "feedback.npz"
ESTIMATES = HERE / "estimates.json"

N_ROUNDS = 2000
DIM_CONTEXT = 5
#: The evaluated policies: the deterministic top 1 and top 3 (π_e = 1/k on each of them).
KS = (1, 3)
TOP = max(KS)

Arrays = dict[str, npt.NDArray[Any]]


@dataclass(frozen=True)
class Setting:
    """One synthetic dataset: obp's generator's options and the seed of everything.

    Attributes
    ----------
    name : str
        The key prefix of its arrays in ``feedback.npz`` and its name in the JSON.
    n_actions : int
        ``SyntheticBanditDataset(n_actions=...)``.
    reward_type : str
        ``"binary"`` (``logistic_reward_function``, q̂ by ``LogisticRegression``) or
        ``"continuous"`` (``linear_reward_function``, q̂ by ``Ridge``).
    behavior_policy : str
        ``"default"`` (obp's: a softmax of the expected reward) or ``"linear"``
        (``linear_behavior_policy``: a softmax of random linear logits, wider pscores).
    seed : int
        The ``random_state`` of the dataset and of the regression model, and the seed of
        the noise added to the expected reward to make the evaluated policy's scores.
    """

    name: str
    n_actions: int
    reward_type: str
    behavior_policy: str
    seed: int

    def lambdas(self, k: int) -> tuple[float, float]:
        """obp's ``lambda_`` (frame_metrics' ``max_weight``) for the top k's clipped estimators.

        The weights 1/(k·pscore) of the rounds the policy matches are near n_actions/k, as
        the pscores are near 1/n_actions: 0.8 and 1.2 times that (to one decimal) clip
        some of them and not others in most settings, so clipping binds without taking
        every weight (not in continuous-10's top 1, whose matched rounds have pscores
        well above 1/n_actions: the clipped values equal the unclipped there).

        Parameters
        ----------
        k : int
            The evaluated policy's top k.

        Returns
        -------
        tuple of float
            The two ``lambda_`` values.
        """
        return (round(0.8 * self.n_actions / k, 1), round(1.2 * self.n_actions / k, 1))


#: Two numbers of actions, two seeds, both reward types and both behaviour policies, in
#: three datasets: q̂ (rounds x actions) is most of the bytes, so not every combination.
SETTINGS = (
    Setting("binary-10", 10, "binary", "default", 12345),
    Setting("binary-30-linear", 30, "binary", "linear", 2024),
    Setting("continuous-10", 10, "continuous", "default", 2024),
)


def generate(setting: Setting) -> Arrays:
    """obp's bandit feedback, q̂ and the evaluated policy's top actions, as stored.

    Parameters
    ----------
    setting : Setting
        The dataset to generate.

    Returns
    -------
    dict of str to numpy.ndarray
        ``action`` (int16), ``reward`` (int8 when binary, else float64), ``pscore``
        (float64), ``top`` (int16, rounds x 3, best first) and ``qhat`` (float32, rounds x
        actions): small dtypes that hold the values exactly (q̂ once rounded).
    """
    from obp.dataset import (
        SyntheticBanditDataset,
        linear_behavior_policy,
        linear_reward_function,
        logistic_reward_function,
    )
    from obp.ope import RegressionModel
    from sklearn.linear_model import LogisticRegression, Ridge

    binary = setting.reward_type == "binary"
    dataset = SyntheticBanditDataset(
        n_actions=setting.n_actions,
        dim_context=DIM_CONTEXT,
        reward_type=setting.reward_type,
        reward_function=logistic_reward_function if binary else linear_reward_function,
        behavior_policy_function=(
            linear_behavior_policy if setting.behavior_policy == "linear" else None
        ),
        random_state=setting.seed,
    )
    bf = dataset.obtain_batch_bandit_feedback(n_rounds=N_ROUNDS)
    assert bf["position"] is None  # len_list 1: obp's estimators read position 0
    base = LogisticRegression(random_state=setting.seed) if binary else Ridge()
    model = RegressionModel(n_actions=setting.n_actions, base_model=base, len_list=1)
    qhat = model.fit_predict(
        context=bf["context"],
        action=bf["action"],
        reward=bf["reward"],
        random_state=setting.seed,
    )
    # The evaluated policy: the best actions of a noisy copy of the expected reward (as the
    # live obp test does), ties to the lower action (a stable sort).
    noise = np.random.default_rng(setting.seed).normal(0, 0.2, bf["expected_reward"].shape)
    order = np.argsort(-(bf["expected_reward"] + noise), axis=1, kind="stable")
    return {
        "action": bf["action"].astype(np.int16),
        "reward": bf["reward"].astype(np.int8 if binary else np.float64),
        "pscore": bf["pscore"].astype(np.float64),
        "top": order[:, :TOP].astype(np.int16),
        "qhat": qhat[:, :, 0].astype(np.float32),
    }


def action_dist(top: npt.NDArray[Any], n_actions: int, k: int) -> npt.NDArray[np.float64]:
    """obp's ``action_dist`` of the deterministic top k: 1/k on each of ``top[:, :k]``.

    Parameters
    ----------
    top : numpy.ndarray
        The best actions per round, best first (rounds x at least k).
    n_actions : int
        The number of actions.
    k : int
        How many of the best actions the policy shows.

    Returns
    -------
    numpy.ndarray
        Rounds x actions x 1 (``len_list`` 1), float64.
    """
    n = top.shape[0]
    dist = np.zeros((n, n_actions, 1))
    dist[np.arange(n)[:, None], top[:, :k], 0] = 1.0 / k
    return dist


def estimate(arrays: Arrays, setting: Setting) -> list[dict[str, Any]]:
    """obp's estimates on ``arrays`` (as :func:`generate` gives or :func:`load` reads).

    Parameters
    ----------
    arrays : dict of str to numpy.ndarray
        One setting's arrays.
    setting : Setting
        Its setting (the number of actions, the ``lambda_`` values).

    Returns
    -------
    list of dict
        One record per evaluated policy and estimator: ``k``, ``estimator`` (obp's
        ``estimator_name``: ``ipw``, ``snipw``, ``dr`` or ``rm``), ``lambda_`` (None: no
        clipping) and ``value`` (a float).
    """
    from obp.ope import (
        DoublyRobust,
        InverseProbabilityWeighting,
        ReplayMethod,
        SelfNormalizedInverseProbabilityWeighting,
    )

    # obp's own dtypes: int64 actions and binary rewards, float64 q̂ (its regression
    # model's output type), rounds x actions x len_list.
    action = arrays["action"].astype(np.int64)
    reward = arrays["reward"].astype(np.int64 if arrays["reward"].dtype.kind == "i" else float)
    qhat = arrays["qhat"].astype(np.float64)[:, :, None]
    out: list[dict[str, Any]] = []
    for k in KS:
        kw = {
            "action": action,
            "reward": reward,
            "pscore": arrays["pscore"],
            "action_dist": action_dist(arrays["top"], setting.n_actions, k),
        }
        estimators: list[tuple[Any, float | None, dict[str, Any]]] = [
            (InverseProbabilityWeighting(), None, kw),
            (SelfNormalizedInverseProbabilityWeighting(), None, kw),
            (DoublyRobust(), None, {**kw, "estimated_rewards_by_reg_model": qhat}),
        ]
        for lam in setting.lambdas(k):
            estimators += [
                (InverseProbabilityWeighting(lambda_=lam), lam, kw),
                (DoublyRobust(lambda_=lam), lam, {**kw, "estimated_rewards_by_reg_model": qhat}),
            ]
        if k == 1:  # Replay needs a deterministic single action
            replay_kw = {key: kw[key] for key in ("action", "reward", "action_dist")}
            estimators.append((ReplayMethod(), None, replay_kw))
        for est, clip, args in estimators:
            value = float(est.estimate_policy_value(**args))
            out.append({"k": k, "estimator": est.estimator_name, "lambda_": clip, "value": value})
    return out


def load() -> tuple[dict[str, Any], dict[str, Arrays]]:
    """The recorded JSON and each setting's arrays, by setting name.

    Returns
    -------
    tuple of dict
        ``estimates.json`` as read, and ``{name: {field: array}}`` from ``feedback.npz``.
    """
    recorded = json.loads(ESTIMATES.read_text(encoding="utf-8"))
    arrays: dict[str, Arrays] = {}
    with np.load(FEEDBACK) as npz:
        for key in npz.files:
            name, field = key.split("/")
            arrays.setdefault(name, {})[field] = npz[key]
    return recorded, arrays


def setting(name: str) -> Setting:
    """The setting of :data:`SETTINGS` called ``name``."""
    return next(s for s in SETTINGS if s.name == name)


def _write_npz(path: Path, arrays: Arrays) -> None:
    # np.savez_compressed stamps each member with the current time; a fixed date keeps the
    # file byte-identical when re-run with the same versions, so a re-run shows no diff.
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for key, array in arrays.items():
            buffer = io.BytesIO()
            np.lib.format.write_array(buffer, np.ascontiguousarray(array), allow_pickle=False)
            info = zipfile.ZipInfo(f"{key}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, buffer.getvalue(), compresslevel=9)


def main() -> None:
    """Generate every setting with obp, run its estimators, write both files."""
    import obp
    import sklearn

    stored: Arrays = {}
    settings = []
    for s in SETTINGS:
        arrays = generate(s)
        stored.update({f"{s.name}/{field}": array for field, array in arrays.items()})
        # The estimates are obp's on the arrays as stored (q̂ rounded to float32).
        settings.append({**asdict(s), "estimates": estimate(arrays, s)})
    recorded = {
        "about": "Open Bandit Pipeline's estimates on feedback.npz; see record.py",
        "command": shlex.join([sys.executable, *sys.argv]),
        "obp": obp.__version__,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "scikit-learn": sklearn.__version__,
        "n_rounds": N_ROUNDS,
        "dim_context": DIM_CONTEXT,
        "settings": settings,
    }
    _write_npz(FEEDBACK, stored)
    ESTIMATES.write_text(json.dumps(recorded, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {FEEDBACK} ({FEEDBACK.stat().st_size} bytes) and {ESTIMATES}")


if __name__ == "__main__":
    main()
