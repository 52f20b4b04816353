"""Policy-only experts: ARS checkpoints (no critic) and a user's own policy (:class:`CallableExpert`).

They load, act as their weights say, and give AggreVaTeD a score centred on their action; AggreVaTeD says once that
this is a cloning signal. Learning from them is checked in ``tests/test_learning_kinds.py``.
"""

from __future__ import annotations

import io
import warnings
import zipfile

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from gymnasium import spaces
from stable_baselines3.common.env_util import make_vec_env

from sb3ext.algos.aggrevated import AggreVaTeD
from sb3ext.algos.aggrevated.dagger import MatchedDAgger
from sb3ext.experts import POLICY_ONLY, CallableExpert, load_expert
from tests.conftest import needs, shared_expert


def test_linear_ars_expert_of_an_older_sb3_contrib_acts_as_its_weights_say() -> None:
    """The zoo's ARS Walker2d stores its linear policy as ``action_net.weight`` (a bare Linear, sb3-contrib < 2.0);
    the action must be W @ normalised observation, clipped to the bounds."""
    folder = shared_expert("ars/Walker2d-v3_1")
    expert = load_expert(folder)
    assert expert.kind == POLICY_ONLY
    with zipfile.ZipFile(folder / "Walker2d-v3.zip") as archive:
        weights = th.load(io.BytesIO(archive.read("policy.pth")), weights_only=True)["action_net.weight"].numpy()
    states = np.random.default_rng(0).normal(size=(32, 17)).astype(np.float32)
    by_hand = np.clip(expert.normalize_obs(states) @ weights.T, -1.0, 1.0)
    np.testing.assert_allclose(expert.predict(states)[0], by_hand, rtol=1e-5, atol=1e-6)
    assert expert.normalization is not None  # the zoo trained it under VecNormalize: the statistics apply


def test_the_policy_only_score_is_centred_on_the_experts_action() -> None:
    expert = CallableExpert(lambda obs: np.full((len(obs), 2), 0.5), spaces.Box(-1, 1, (3,)), spaces.Box(-2, 2, (2,)))
    obs = th.zeros((4, 3))
    actions = th.tensor([[[0.5, 0.5]] * 4, [[1.5, 0.5]] * 4, [[9.0, 0.5]] * 4])  # (K=3, N=4, 2)
    scores = expert.log_prob(obs, actions)
    assert scores.shape == (3, 4)
    np.testing.assert_allclose(scores[0], 0.0)
    np.testing.assert_allclose(scores[1], -0.5 * (1.0 / 2.0) ** 2)  # one unit off in a half range of 2
    np.testing.assert_allclose(scores[2], -0.5 * (1.5 / 2.0) ** 2)  # clipped to the bound 2 first, as the env does

    discrete = CallableExpert(lambda obs: np.ones(len(obs), dtype=int), spaces.Box(-1, 1, (3,)), spaces.Discrete(3))
    all_actions = th.arange(3).reshape(-1, 1).expand(3, 4)
    np.testing.assert_array_equal(discrete.log_prob(obs, all_actions).T.numpy(), [[-1.0, 0.0, -1.0]] * 4)


def test_callable_expert_refuses_what_it_cannot_use() -> None:
    box = spaces.Box(-1, 1, (3,))
    with pytest.raises(TypeError, match="policy is a str; allowed: a callable"):
        CallableExpert("controller", box, spaces.Box(-1, 1, (1,)))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="allowed: Box or Discrete"):
        CallableExpert(lambda obs: obs, box, spaces.MultiBinary(2))
    wrong = CallableExpert(lambda obs: np.zeros((len(obs), 3)), box, spaces.Box(-1, 1, (1,)), name="mpc")
    with pytest.raises(ValueError, match=r"CallableExpert mpc: returned actions of shape \(5, 3\) for 5 observations; "):
        wrong.predict(np.zeros((5, 3), dtype=np.float32))
    with pytest.raises(TypeError, match="no state-value head"):
        wrong.value(th.zeros((1, 3)))


def test_aggrevated_says_once_that_a_policy_only_expert_gives_a_cloning_signal() -> None:
    env = make_vec_env("Pendulum-v1", n_envs=2, seed=0)
    expert = CallableExpert(lambda obs: -obs[:, 2:3], env.observation_space, env.action_space, name="damping")
    with pytest.warns(UserWarning, match="Expert damping .* has no critic: .* a cloning signal with no cost-to-go"):
        model = AggreVaTeD("MlpPolicy", env, expert=expert, n_steps=8, batch_size=16, n_epochs=1, seed=0)
    model.learn(16)
    assert model._promised is None  # no V*(s0) to compare returns with
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # DAgger clones by design: nothing to say
        MatchedDAgger("MlpPolicy", env, expert=expert, n_steps=8, batch_size=16, n_epochs=1, seed=0)


def test_callable_expert_drives_the_rollin_with_its_own_actions() -> None:
    """beta = 1: every executed action is the callable's (a user's controller reaches the env)."""
    seen: list[np.ndarray] = []

    def controller(obs: np.ndarray) -> np.ndarray:
        seen.append(obs)
        return np.full((len(obs), 1), 1.25)

    env = make_vec_env("Pendulum-v1", n_envs=2, seed=0)
    model = MatchedDAgger("MlpPolicy", env, expert=CallableExpert(controller, env.observation_space, env.action_space),
                          n_steps=8, batch_size=16, n_epochs=1, beta_init=1.0, beta_decay=1.0, seed=0)  # fmt: skip
    model.learn(16)
    assert seen and all(obs.shape[1:] == (3,) for obs in seen)
    assert np.allclose(model.rollout_buffer.actions, 1.25)


def test_every_ars_expert_of_the_shared_folder_fits_its_env() -> None:
    needs("mujoco")
    for folder, env_id in (("ars/Swimmer-v3_1", "Swimmer-v5"), ("ars/Walker2d-v3_1", "Walker2d-v5")):
        expert = load_expert(shared_expert(folder))
        env = gym.make(env_id)
        expert.check_spaces(env.observation_space, env.action_space)
        obs, _ = env.reset(seed=0)
        assert env.action_space.contains(expert.predict(obs[None])[0][0].astype(np.float32))
