"""AggreVaTeD: advantages, roll-in mixture, updates, save/load, determinism, hyperparameters."""

from __future__ import annotations

import copy
import inspect
import math
import warnings
import zipfile
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch as th
import yaml
from gymnasium import spaces
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.logger import configure
from stable_baselines3.common.vec_env import VecNormalize

from sb3ext.algos.aggrevated import AggreVaTeD, MatchedDAgger
from sb3ext.algos.aggrevated.aggrevated import expected_advantages, leave_one_out_advantages
from sb3ext.algos.aggrevated.buffers import ExpertActionMemory, StateAggregationBuffer
from sb3ext.algos.aggrevated.estimators import critic_signal_and_noise
from sb3ext.algos.aggrevated.losses import surrogate_terms
from sb3ext.algos.aggrevated.rollin import PromisedReturns
from sb3ext.common.resources import hyperparams_path
from sb3ext.experts import load_expert
from tests.conftest import shared_expert
from tests.toy_experts import NoisyTwinExpert, QuadraticExpert, TableExpert

SMALL = dict(n_steps=8, batch_size=32, n_epochs=2, n_action_samples=4, aggregation_window=4, policy_kwargs=dict(net_arch=[16]))


def pendulum_model(**kwargs) -> AggreVaTeD:
    env = make_vec_env("Pendulum-v1", n_envs=2, seed=0)
    params = {**SMALL, "expert": shared_expert("sac/Pendulum-v1_1"), "seed": 0, **kwargs}
    return AggreVaTeD("MlpPolicy", env, **params)


# ---------------------------------------------------------------------- advantages
def test_leave_one_out_advantages_sum_to_zero_and_ignore_state_offsets() -> None:
    q = th.randn(8, 50)
    adv = leave_one_out_advantages(q)
    th.testing.assert_close(adv.sum(dim=0), th.zeros(50), atol=1e-5, rtol=0)
    offset = th.randn(1, 50) * 100.0
    th.testing.assert_close(leave_one_out_advantages(q + offset), adv, atol=1e-4, rtol=0)
    # hand-computed: K=3, q = (1, 2, 6): baselines (4, 3.5, 1.5)
    th.testing.assert_close(leave_one_out_advantages(th.tensor([[1.0], [2.0], [6.0]])).flatten(), th.tensor([-3.0, -1.5, 4.5]))
    with pytest.raises(ValueError, match="at least 2"):
        leave_one_out_advantages(th.randn(1, 3))


def test_expected_advantages_are_zero_mean_under_the_old_policy() -> None:
    q = th.randn(20, 3)
    probs = th.softmax(th.randn(20, 3), dim=-1)
    adv = expected_advantages(q, probs)
    th.testing.assert_close((probs * adv).sum(dim=-1), th.zeros(20), atol=1e-5, rtol=0)
    th.testing.assert_close(expected_advantages(q + th.randn(20, 1), probs), adv, atol=1e-5, rtol=0)


# ---------------------------------------------------------------------- updates move toward Q*'s optimum
def test_one_update_moves_the_mean_toward_the_quadratic_optimum() -> None:
    env = make_vec_env("Pendulum-v1", n_envs=2, seed=0)
    target = np.array([1.5], dtype=np.float32)
    expert = QuadraticExpert(env.observation_space, env.action_space, target)
    model = AggreVaTeD("MlpPolicy", env, expert=expert, seed=0, beta_init=0.0, **{**SMALL, "n_epochs": 10})
    old_policy = copy.deepcopy(model.policy)
    model.learn(16)  # one iteration: 8 steps x 2 envs, then one update on these 16 states
    obs = th.as_tensor(model._aggregation.get()[0])
    assert len(obs) == 16 and model.imitation_iterations == 1
    before = old_policy.get_distribution(obs).distribution.mean.detach()
    after = model.policy.get_distribution(obs).distribution.mean.detach()
    assert (after - before).mean().item() > 0.02, "the mean should move toward a* = 1.5"
    assert ((after - 1.5).abs() < (before - 1.5).abs()).float().mean() > 0.95
    # V*(s0) at the 2 envs' first states (train/return_shortfall); then Q* scored K=4 fresh learner samples at each
    # of the 16 states (then the expert's own action, for q_gap)
    assert [tuple(inputs.shape) for inputs in expert.critic_inputs] == [(2, 1), (4, 16, 1), (16, 1)]


def test_discrete_update_raises_the_probability_of_the_best_action() -> None:
    env = make_vec_env("CartPole-v1", n_envs=2, seed=0)
    expert = TableExpert(env.observation_space, env.action_space, np.array([0.0, 1.0]))
    model = AggreVaTeD("MlpPolicy", env, expert=expert, seed=0, beta_init=0.0, **{**SMALL, "n_epochs": 10})
    old_policy = copy.deepcopy(model.policy)
    model.learn(16)
    obs = th.as_tensor(model._aggregation.get()[0])
    before = old_policy.get_distribution(obs).distribution.probs[:, 1].detach()
    after = model.policy.get_distribution(obs).distribution.probs[:, 1].detach()
    # Adam descends the batch objective (not each state's): most states and the mean move up clearly
    assert (after > before).float().mean() >= 0.8 and (after - before).mean() > 0.005


def test_real_critic_inputs_stay_in_unit_box() -> None:
    model = pendulum_model(beta_init=0.0)
    expert = model._expert
    seen = []
    original = expert.policy.critic.forward

    def recording(obs, actions):
        seen.append(actions.detach().clone())
        return original(obs, actions)

    expert.policy.critic.forward = recording
    with th.no_grad():
        model.policy.log_std.fill_(2.0)  # wide samples: most fall outside [-2, 2]
    model.learn(32)
    assert seen and all(a.abs().max() <= 1.0 + 1e-6 for a in seen)
    assert any(a.abs().max() == 1.0 for a in seen)


# ---------------------------------------------------------------------- roll-in mixture
class ActionRecorder(BaseCallback):
    def __init__(self) -> None:
        super().__init__()
        self.executed: list[np.ndarray] = []
        self.obs: list[np.ndarray] = []

    def _on_step(self) -> bool:
        self.executed.append(np.array(self.locals["clipped_actions"]))
        self.obs.append(self.locals["obs_tensor"].numpy().copy())
        return True


@pytest.mark.parametrize("beta", [0.0, 1.0])
def test_beta_decides_who_acts(beta: float) -> None:
    model = pendulum_model(beta_init=beta, beta_decay=1.0)
    recorder = ActionRecorder()
    model.learn(32, callback=recorder)
    expert_actions = np.stack([model._expert.predict(o)[0] for o in recorder.obs])
    executed = np.stack(recorder.executed)
    logged = model.logger.name_to_value
    assert all(logged[f"time/{key}"] > 0 for key in ("rollin_s", "scoring_s", "update_s"))
    if beta == 1.0:
        np.testing.assert_allclose(executed, expert_actions, atol=1e-6)
        assert model._last_expert_fraction == 1.0
        assert 0 < logged["time/rollin_expert_s"] < logged["time/rollin_s"]
    else:
        assert np.abs(executed - expert_actions).min() > 0  # a Gaussian sample never equals the expert's action
        assert model._last_expert_fraction == 0.0
        assert logged["time/rollin_expert_s"] == 0.0  # the expert was never asked to act


def test_rollin_deterministic_envs_act_with_the_learners_mode() -> None:
    model = pendulum_model(beta_init=0.0, rollin_deterministic=0.5)  # 2 envs: env 0 with the mode, env 1 samples
    recorder = ActionRecorder()
    model._setup_learn(16, recorder)
    model.collect_rollouts(model.env, model._init_callback(recorder), model.rollout_buffer, model.n_steps)
    obs = th.as_tensor(np.stack(recorder.obs))
    with th.no_grad():
        distribution = model.policy.get_distribution(obs.reshape(-1, 3))
        mode = distribution.mode().reshape(-1, 2, 1).numpy()
    executed = np.stack(recorder.executed)
    np.testing.assert_allclose(executed[:, 0], np.clip(mode[:, 0], -2, 2), atol=1e-6)
    assert np.abs(executed[:, 1] - np.clip(mode[:, 1], -2, 2)).min() > 0
    with th.no_grad():  # the buffer holds the learner's log-probs of the executed actions
        expected = distribution.log_prob(th.as_tensor(model.rollout_buffer.actions.reshape(-1, 1))).numpy()
    np.testing.assert_allclose(model.rollout_buffer.log_probs.reshape(-1), expected, atol=1e-5)


def test_expert_bc_pulls_the_mean_to_the_expert_only_where_the_expert_clearly_wins() -> None:
    env = make_vec_env("Pendulum-v1", n_envs=2, seed=0)
    expert = QuadraticExpert(env.observation_space, env.action_space, np.array([1.5], dtype=np.float32))
    model = AggreVaTeD("MlpPolicy", env, expert=expert, seed=0, beta_init=0.0, expert_bc_coef=1.0, **SMALL)
    with th.no_grad():
        model.policy.log_std.fill_(-3.0)  # narrow samples around a mean near 0: none comes near the expert's 1.5
    obs = th.zeros(6, 3)
    scores, _ = model._estimator.score(model.policy, obs, obs)
    assert scores.expert_gap_z is not None and (scores.expert_gap_z > 3.0).all()
    idx = th.arange(6)
    terms = surrogate_terms(scores, idx, model.policy.get_distribution(obs), 0.2, env.action_space, model.device, 3.0)
    assert terms.expert_bc_fraction.item() == 1.0 and terms.expert_bc.item() > 0.4  # ((0 - 0.75))^2 ~ 0.56
    off = surrogate_terms(scores, idx, model.policy.get_distribution(obs), 0.2, env.action_space, model.device, 1e9)
    assert off.expert_bc_fraction.item() == 0.0 and off.expert_bc.item() == 0.0
    model.learn(16 * 4)
    assert model.logger.name_to_value["train/expert_bc_fraction"] > 0


def test_critic_signal_and_noise_separate_action_differences_from_critic_disagreement() -> None:
    g = th.Generator().manual_seed(0)
    q = th.randn(8, 5, generator=g)  # K = 8 actions, N = 5 states
    offsets = th.randn(1, 5, generator=g) * 100.0
    same, none = critic_signal_and_noise(q, th.stack([q, q + offsets]))  # critics differ by a state-only offset
    assert none is None or th.allclose(none, th.zeros(5), atol=1e-4)
    single_signal, single_noise = critic_signal_and_noise(q, q[None])
    assert single_noise is None and th.allclose(single_signal, same)
    # signal: the root mean square of the leave-one-out advantages of each state
    th.testing.assert_close(same, leave_one_out_advantages(q).pow(2).mean(dim=0).sqrt())
    wiggle = th.randn(8, 5, generator=g)
    _, noise = critic_signal_and_noise(q, th.stack([q - wiggle, q + wiggle]))  # critics differ by +-wiggle per action
    assert noise is not None
    th.testing.assert_close(noise, leave_one_out_advantages(wiggle).pow(2).mean(dim=0).sqrt())


def _noisy_twin_model(slope: float, episode_steps: int = 200, **kwargs: Any) -> AggreVaTeD:
    env = make_vec_env("Pendulum-v1", n_envs=2, seed=0, env_kwargs={"max_episode_steps": episode_steps})
    expert = NoisyTwinExpert(env.observation_space, env.action_space, target=1.0, slope=slope, amplitude=1.0)
    return AggreVaTeD("MlpPolicy", env, expert=expert, seed=0, beta_init=0.0, **{**SMALL, **kwargs})


def test_expert_bc_margin_minus_inf_pulls_on_every_state() -> None:
    obs = th.zeros(16, 3)
    model = _noisy_twin_model(slope=50.0, expert_bc_coef=0.5, expert_bc_margin=-math.inf)
    scores, _ = model._estimator.score(model.policy, obs, obs)
    distribution = model.policy.get_distribution(obs)
    idx = th.arange(16)
    every = surrogate_terms(scores, idx, distribution, 0.2, model.action_space, model.device, -math.inf)
    chosen = surrogate_terms(scores, idx, distribution, 0.2, model.action_space, model.device, 3.0)
    # a steep critic that finds what the expert does: no state beats the samples by 3 std, but -inf takes them all
    assert chosen.expert_bc_fraction.item() == 0.0
    assert every.expert_bc_fraction.item() == 1.0 and every.expert_bc.item() > 0.1  # mean ~0 vs the expert's 0.5


def test_expert_cap_gives_no_credit_for_beating_the_experts_own_action() -> None:
    env = make_vec_env("Pendulum-v1", n_envs=2, seed=0)
    expert = QuadraticExpert(env.observation_space, env.action_space, np.array([1.5], dtype=np.float32))
    expert.act = lambda obs: np.zeros((len(obs), 1), dtype=np.float32)  # acts 0, but its critic prefers 1.5
    obs = th.zeros(32, 3)
    for cap in (False, True):
        model = AggreVaTeD("MlpPolicy", env, expert=expert, seed=0, beta_init=0.0, expert_cap=cap, **SMALL)
        scores, _ = model._estimator.score(model.policy, obs, obs)
        actions, advantages = scores.actions[..., 0].clamp(-2, 2), scores.advantages
        beats_expert = (actions - 1.5).abs() < 1.5  # Q*(s, a) > Q*(s, 0)
        assert beats_expert.any() and (~beats_expert).any()
        best = th.where(beats_expert, advantages, th.full_like(advantages, -th.inf)).amax(dim=0)
        lowest_capped = th.where(beats_expert, advantages, th.full_like(advantages, th.inf)).amin(dim=0)
        has_both = beats_expert.any(dim=0) & (beats_expert.sum(dim=0) > 1)
        spread = (best - lowest_capped)[has_both]
        if cap:  # every sample the critic rates above the expert's action gets the same advantage
            assert th.allclose(spread, th.zeros_like(spread), atol=1e-5)
        else:
            assert (spread > 1e-3).all()
        worse = th.where(~beats_expert, advantages, th.full_like(advantages, -th.inf)).amax(dim=0)
        mixed = beats_expert.any(dim=0) & (~beats_expert).any(dim=0)
        assert (worse[mixed] < lowest_capped[mixed]).all()  # worse than the expert: still below


def test_low_critic_signal_warns_once_and_a_normal_expert_stays_silent() -> None:
    # episodes of 8 steps: those after the first low ratio end soon; the toy's V* (0) promises more than Pendulum gives
    model = _noisy_twin_model(slope=0.001, episode_steps=8)
    with pytest.warns(UserWarning, match="barely separates the learner's actions") as record:
        model.learn(16 * 6)
    assert sum("barely separates" in str(w.message) for w in record) == 1
    assert model.logger.name_to_value["train/critic_snr"] < 1.0
    assert model.logger.name_to_value["train/return_shortfall"] > 1.0
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*barely separates")
        normal = pendulum_model(beta_init=0.0, n_steps=64)
        normal.learn(64 * 2 * 4)  # 4 iterations with the shipped SAC Pendulum expert
    assert normal.logger.name_to_value["train/critic_snr"] > 2.0


def test_promised_returns_compare_each_episodes_discounted_return_with_v_star_at_its_first_state() -> None:
    tracker = PromisedReturns(2, gamma=0.5, episodes=4)
    tracker.step(np.array([1.0, 1.0]), np.array([True, False]))  # began before tracking: not compared
    assert len(tracker.finished) == 0
    tracker.start(np.array([True, True]), np.array([3.0, 10.0]))
    tracker.step(np.array([2.0, 0.0]), np.array([False, False]))
    tracker.step(np.array([2.0, 0.0]), np.array([True, False]))  # env 0: 2 + 0.5 * 2 = 3, as promised
    assert list(tracker.finished) == [(0, 3.0, 3.0)]  # (its running number, V*(s0), return)
    assert tracker.shortfall() is None  # 1 of 4 episodes: too few to tell
    tracker.start(np.array([True, False]), np.array([3.0]))
    tracker.step(np.array([2.0, 0.0]), np.array([True, True]))  # env 0: 2 of 3; env 1: 0 of 10
    assert list(tracker.finished) == [(0, 3.0, 3.0), (2, 3.0, 2.0), (1, 10.0, 0.0)]
    assert tracker.shortfall() == pytest.approx((0 + 1 + 10) / 3 / ((3 + 3 + 10) / 3))
    tracker.start(np.array([True, True]), np.array([4.0, 4.0]))  # episodes 3 and 4
    mark = tracker.n_started  # a reader that judges only the episodes from here on
    tracker.step(np.array([0.0, 0.0]), np.array([True, False]))
    assert tracker.shortfall(since=mark) is None and tracker.shortfall() is not None  # it began before the mark
    tracker.start(np.array([True, False]), np.array([4.0]))
    tracker.step(np.array([4.0, 0.0]), np.array([True, True]))
    assert tracker.shortfall(since=mark) is None  # 1 of 4 since the mark: too few
    for _ in range(2):
        tracker.start(np.array([True, True]), np.array([4.0, 4.0]))
        tracker.step(np.array([4.0, 0.0]), np.array([True, True]))
    assert tracker.shortfall(since=mark) == pytest.approx((0 + 4 + 0 + 4) / 4 / 4)  # the latest 4 since the mark
    assert len(tracker.finished) == 4 + 2  # enough for the latest 4 begun after any mark, with 2 envs straddling it


class _FixedShortfall:
    """Stands in for the roll-in's PromisedReturns: a given shortfall from any episode on; what was asked is noted."""

    n_started = 7

    def __init__(self, shortfall: float | None):
        self.value, self.asked = shortfall, []

    def shortfall(self, since: int = 0) -> float | None:
        self.asked.append(since)
        return self.value


@pytest.mark.parametrize(
    "fallback, shortfall, warns",
    [(False, 0.0, False), (False, None, False), (False, 0.5, True), (True, 0.0, True), (True, None, True)],
)
def test_a_low_critic_signal_warns_without_fallback_only_once_later_episodes_get_less_than_promised(
    fallback: bool, shortfall: float | None, warns: bool
) -> None:
    """A learner at its expert's level sits where the critic is flat around its actions: the ratio is low there,
    harmlessly. Without the fallback, the warning waits for the episodes that begin after the first low ratio and
    fires only if they fall short of V*(s0). The fallback does not wait (it would act after a collapse), and
    announces itself."""
    model = _noisy_twin_model(slope=0.001, low_signal_fallback=fallback)
    model.set_logger(configure(None, [""]))
    model._promised = tracker = _FixedShortfall(shortfall)
    low = {"critic_snr": th.tensor(0.5), "critic_low_signal_fraction": th.tensor(1.0)}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model._check_critic_signal({**low, "critic_snr": th.tensor(1.5)})  # a clear signal: nothing happens
        assert model._low_signal.since is None and not caught
        model._check_critic_signal(low)  # the first low ratio
        assert model._low_signal.since == (None if fallback else (tracker, 7))  # the episodes from here on
        assert bool(caught) == fallback
        model._check_critic_signal(low)  # later: the returns since then decide
    assert sum("barely separates" in str(w.message) for w in caught) == int(warns)
    assert (model.low_signal_iteration is not None) == fallback
    assert tracker.asked == ([] if fallback else [7])  # only the episodes that began after the first low ratio


@pytest.mark.parametrize("fallback", [False, True])
@pytest.mark.parametrize("shortfall, distrusted", [(0.0, False), (None, False), (0.3, False), (0.7, True)])
def test_a_critic_that_rates_the_learner_at_the_experts_level_is_judged_by_the_returns(
    fallback: bool, shortfall: float | None, distrusted: bool
) -> None:
    """One critic (no ratio to measure): q_gap <= 0 says the learner's samples are worth the expert's action, so by the
    performance-difference lemma its returns should reach V*(s0). Only episodes that begin after the gap first closed
    are judged, with or without the fallback. A critic's own bias (30% on the shipped plate expert) is tolerated; half the
    promise missing distrusts it (70% on the shared DDPG lander expert)."""
    model = _noisy_twin_model(slope=0.001, low_signal_fallback=fallback)
    model.set_logger(configure(None, [""]))
    model._promised = tracker = _FixedShortfall(shortfall)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model._check_critic_signal({"q_gap": th.tensor(0.3)})  # the critic still prefers the expert: nothing happens
        assert model._low_signal.since is None
        model._check_critic_signal({"q_gap": th.tensor(-0.1)})  # the gap closes: the episodes from here on decide
        assert model._low_signal.since == (tracker, 7) and not caught and model.low_signal_iteration is None
        model._check_critic_signal({"q_gap": th.tensor(-0.1)})
    assert sum("breaks its promise" in str(w.message) for w in caught) == int(distrusted)
    assert (model.low_signal_iteration is not None) == (fallback and distrusted)
    assert tracker.asked == [7]


def test_low_signal_fallback_clones_the_expert_from_the_first_low_signal_iteration() -> None:
    model = _noisy_twin_model(slope=0.001, low_signal_fallback=True, n_epochs=10, target_kl=None, learning_rate=1e-2)
    with pytest.warns(UserWarning, match="is DAgger: it clones the expert's actions"):
        model.learn(16 * 10)
    assert model.low_signal_iteration == 0 and model.logger.name_to_value["train/low_signal_imitation"] == 1.0
    assert model.logger.name_to_value["train/expert_bc_fraction"] == 1.0
    obs = th.as_tensor(model._aggregation.get()[0])  # the states it was trained on
    mean = model.policy.get_distribution(obs).distribution.mean
    assert (mean - 1.0).abs().mean().item() < 0.1  # the expert acts 1.0; the flat critic says nothing
    # from then on it is DAgger: it clones on every visited state (10 roll-ins of 16), beyond the window's 64
    memory = model._bc_memory
    assert memory is not None and memory.size == 16 * 10 and len(model._aggregation) == 64
    assert model.logger.name_to_value["train/bc_memory_states"] == 16 * 10
    remembered, actions = memory.stored()
    assert np.all(actions == 1.0) and model.logger.name_to_value["train/expert_bc_memory"] < 0.05
    mean = model.policy.get_distribution(th.as_tensor(remembered)).distribution.mean
    assert (mean - 1.0).abs().mean().item() < 0.1
    follow = _noisy_twin_model(slope=0.001, episode_steps=8, n_epochs=10, target_kl=None, learning_rate=1e-2)
    with pytest.warns(UserWarning, match="Set low_signal_fallback=True"):
        follow.learn(16 * 10)
    assert follow.low_signal_iteration is None and follow.logger.name_to_value["train/low_signal_imitation"] == 0.0
    assert follow._bc_memory is None  # no fallback: no memory, no expert query at states it does not act on


def test_the_fallbacks_memory_is_kept_from_the_start_and_cloned_on_only_after_the_fallback(tmp_path: Path) -> None:
    """The states visited before the critic is distrusted are remembered too (DAgger's memory of every visited state),
    but a learner whose critic stays trusted never clones on them: its update is AggreVaTeD's alone."""
    model = _noisy_twin_model(slope=0.001, low_signal_fallback=True)
    model._check_critic_signal = lambda stats: None  # a critic never distrusted
    model.learn(16 * 3)
    assert model._bc_memory is not None and model._bc_memory.size == 16 * 3
    logged = model.logger.name_to_value
    assert "train/expert_bc_memory" not in logged and "train/bc_memory_states" not in logged
    model.low_signal_iteration = model.imitation_iterations  # distrusted now: DAgger on all it has visited
    model.learn(16, reset_num_timesteps=False)
    logged = model.logger.name_to_value
    assert logged["train/bc_memory_states"] == 16 * 4 and logged["train/expert_bc_memory"] > 0
    model.save(tmp_path / "fallen")
    loaded = AggreVaTeD.load(tmp_path / "fallen", env=model.env)
    assert loaded.low_signal_iteration == 3 and loaded._bc_memory is None  # no expert yet: nothing to clone
    loaded.set_expert(model._expert)
    assert loaded._bc_memory is not None and loaded._bc_memory.size == 0  # the memory is not saved: it starts anew
    loaded.learn(16 * 2, reset_num_timesteps=False)
    assert loaded._bc_memory.size == 16 * 2 and loaded.logger.name_to_value["train/expert_bc_memory"] > 0


class _ContraryExpert(QuadraticExpert):
    """Its critic prefers +1.5, it acts -1.0: cloning and following the critic pull the learner apart."""

    def act(self, expert_obs: np.ndarray) -> np.ndarray:
        return np.full((len(expert_obs), 1), -1.0, dtype=np.float32)


def test_matched_dagger_copies_the_experts_actions_instead_of_following_its_critic() -> None:
    means = {}
    for clone in (True, False):
        env = make_vec_env("Pendulum-v1", n_envs=2, seed=0)
        expert = _ContraryExpert(env.observation_space, env.action_space, np.array([1.5], dtype=np.float32))
        settings = {**SMALL, "n_epochs": 10, "learning_rate": 1e-2}
        algo = MatchedDAgger if clone else AggreVaTeD
        model = algo("MlpPolicy", env, expert=expert, seed=0, beta_init=0.0, **settings)
        model.learn(16 * 10)
        obs = th.as_tensor(model._aggregation.get()[0])  # the states it was trained on
        means[clone] = model.policy.get_distribution(obs).distribution.mean.mean().item()
        assert model.logger.name_to_value["train/expert_bc_fraction"] == (1.0 if clone else 0.0)
        assert model.low_signal_iteration is None  # cloning was asked for, not forced by the critic
    assert abs(means[True] - (-1.0)) < 0.2 and means[False] > 0.2, means  # the critic pulls toward +1.5


def test_the_kl_limit_stops_the_critics_term_and_the_pull_goes_on() -> None:
    """A tight target_kl stops the critic's term within the first epoch; the pull toward the expert's action (a fixed
    target) keeps its epochs and reaches the expert's -1, while without a pull the epochs stop as PPO's."""
    means, updates = {}, {}
    for bc_coef in (5.0, 0.0):
        env = make_vec_env("Pendulum-v1", n_envs=2, seed=0)
        expert = _ContraryExpert(env.observation_space, env.action_space, np.array([1.5], dtype=np.float32))
        settings = {**SMALL, "n_epochs": 20, "batch_size": 8, "learning_rate": 1e-2, "target_kl": 1e-4}
        model = AggreVaTeD("MlpPolicy", env, expert=expert, seed=0, beta_init=0.0, expert_bc_coef=bc_coef,
                           expert_bc_margin=-math.inf, **settings)  # fmt: skip
        model.learn(16)  # one iteration on 16 states: 2 minibatches per epoch
        obs = th.as_tensor(model._aggregation.get()[0])
        means[bc_coef] = model.policy.get_distribution(obs).distribution.mean.mean().item()
        updates[bc_coef] = model._n_updates
    assert updates == {5.0: 20, 0.0: 1}, updates
    assert abs(means[5.0] - (-1.0)) < 0.3 and abs(means[0.0]) < 0.2, means


def test_matched_dagger_on_discrete_actions_learns_the_experts_choices() -> None:
    env = make_vec_env("CartPole-v1", n_envs=2, seed=0)
    expert = load_expert(shared_expert("dqn/CartPole-v1_1"))
    settings = {**SMALL, "n_epochs": 10, "learning_rate": 1e-2}
    model = MatchedDAgger("MlpPolicy", env, expert=expert, seed=0, beta_init=0.0, **settings)
    model.learn(16 * 10)
    assert model.logger.name_to_value["train/expert_bc_fraction"] == 1.0
    assert model.logger.name_to_value["train/expert_bc"] > 0
    learner_obs, expert_obs = model._aggregation.get()  # the states it was trained on
    probs = model.policy.get_distribution(th.as_tensor(learner_obs)).distribution.probs
    wanted = th.as_tensor(expert.act(expert_obs)).long().reshape(-1)
    agreement = (probs.argmax(dim=-1) == wanted).float().mean().item()
    assert agreement > 0.9, agreement  # a policy at chance agrees on about half of them


def test_buffer_log_probs_always_come_from_the_learner() -> None:
    """beta = 1: the expert acts on every step, yet the buffer's log-probabilities are the learner's, for the
    policy that acted; checked on every roll-in of a training run (the policy changes between them)."""
    model = pendulum_model(beta_init=1.0, beta_decay=1.0)
    checked: list[float] = []

    class Check(BaseCallback):
        def _on_step(self) -> bool:
            return True

        def _on_rollout_end(self) -> None:  # the policy is still the one that acted
            buffer = self.model.rollout_buffer
            obs = th.as_tensor(buffer.observations.reshape(-1, 3))
            actions = th.as_tensor(buffer.actions.reshape(-1, 1))
            with th.no_grad():
                _, log_prob, _ = self.model.policy.evaluate_actions(obs, actions)
            np.testing.assert_allclose(buffer.log_probs.reshape(-1), log_prob.numpy(), rtol=1e-5, atol=1e-5)
            checked.append(float(np.abs(buffer.log_probs).mean()))

    model.learn(64, callback=Check())
    assert len(checked) == 4 and model.imitation_iterations == 4  # every roll-in, the last three after updates


def test_beta_schedule_decays_per_iteration() -> None:
    model = pendulum_model(beta_init=0.8, beta_decay=0.5)
    betas = []

    class Beta(BaseCallback):
        def _on_rollout_start(self) -> None:
            betas.append(self.model.beta)

        def _on_step(self) -> bool:
            return True

    model.learn(48, callback=Beta())
    assert betas == pytest.approx([0.8, 0.4, 0.2])


# ---------------------------------------------------------------------- hyperparameters take effect
def test_aggregation_window_and_samples_take_effect() -> None:
    model = pendulum_model(aggregation_window=3, n_action_samples=5, beta_init=0.0)
    model.learn(16 * 5)
    assert model._aggregation.capacity == 3 * 16
    assert model.logger.name_to_value["train/aggregated_states"] == 48
    data, _ = model._estimator.score(model.policy, th.zeros(7, 3), th.zeros(7, 3))
    assert data.actions.shape == (5, 7, 1)


def test_aggregation_reservoir_is_rescored_beside_the_window() -> None:
    model = pendulum_model(aggregation_window=2, aggregation_reservoir=40, beta_init=0.0)
    model.learn(16 * 3)  # the third roll-in evicts the first: 16 states in the reservoir
    assert model.logger.name_to_value["train/aggregated_states"] == 32 + 16
    model.learn(16 * 3, reset_num_timesteps=False)
    assert model.logger.name_to_value["train/aggregated_states"] == 32 + 40
    learner_obs, expert_obs = model._aggregation.get()
    assert len(np.unique(learner_obs, axis=0)) == 72  # no state twice: the reservoir holds only evicted ones


def test_aggregated_states_are_normalized_with_the_current_statistics() -> None:
    """With the learner's VecNormalize, the aggregated states keep the env's observations and are normalised with
    the statistics of the iteration that trains on them, not those of the iteration that visited them."""
    env = VecNormalize(make_vec_env("Pendulum-v1", n_envs=2, seed=0), norm_reward=False)
    model = AggreVaTeD(
        "MlpPolicy", env, **{**SMALL, "aggregation_window": 2, "aggregation_reservoir": 16},
        expert=shared_expert("sac/Pendulum-v1_1"), seed=0, beta_init=0.0,
    )  # fmt: skip
    seen: list[th.Tensor] = []
    samples = model._estimator.samples

    def recording(*args: Any) -> Any:
        result = samples(*args)
        seen.append(result[0])
        return result

    model._estimator.samples = recording  # type: ignore[method-assign]
    model.learn(16 * 4)
    learner_obs, expert_obs = model._aggregation.get()
    assert len(learner_obs) == 32 + 16
    # kept as the env emitted them: the (unnormalised) SAC expert observes the same numbers
    np.testing.assert_allclose(learner_obs, expert_obs, atol=1e-6)
    assert np.abs(env.normalize_obs(learner_obs) - learner_obs).max() > 0.1  # the statistics are not the identity
    # the last update trained on them normalised with the statistics the policy now acts with
    np.testing.assert_allclose(seen[-1].numpy(), env.normalize_obs(learner_obs), rtol=1e-5, atol=1e-6)


def test_reservoir_keeps_a_uniform_sample_of_the_evicted_states() -> None:
    """Each evicted state ends up in the reservoir with the same probability, whatever its age."""
    rng = np.random.default_rng(0)
    kept = []
    for _ in range(400):
        buffer = StateAggregationBuffer(1, 10, (1,), (1,), reservoir=20, rng=rng)
        for batch in range(100):
            labels = np.arange(batch * 10, batch * 10 + 10, dtype=np.float32).reshape(-1, 1)
            buffer.add(labels, -labels)
        learner_obs, expert_obs = buffer.get()
        np.testing.assert_array_equal(learner_obs, -expert_obs)  # the two views stay paired
        np.testing.assert_array_equal(learner_obs[:10, 0], np.arange(990, 1000))  # the window: the latest roll-in
        reservoir = learner_obs[10:, 0]
        assert len(reservoir) == 20 and len(set(reservoir)) == 20 and reservoir.max() < 990
        kept.append(reservoir)
    counts = np.bincount(np.concatenate(kept).astype(int), minlength=990) / 400  # P(kept) per state: 20/990 each
    # a first-20 or last-20 reservoir would give means near 10 or 980; uniform: 494.5 (std of this mean ~3)
    assert abs(np.concatenate(kept).mean() - 494.5) < 20
    assert abs(counts[:330].mean() - counts[-330:].mean()) < 0.005  # oldest and newest thirds: ~0.0202 each


def test_fall_store_keeps_the_last_states_of_terminated_episodes_only() -> None:
    buffer = StateAggregationBuffer(1, 2, (1,), (1,), falls=5, fall_steps=3, n_envs=2)
    none, env0, env1 = np.array([False, False]), np.array([True, False]), np.array([False, True])
    ends = {2: (none, env1), 4: (env0, none), 5: (env1, none)}  # step: (terminated, truncated)
    for step in range(6):
        labels = np.array([[10 * step], [10 * step + 1]], dtype=np.float32)  # 10 * step + env
        buffer.add(labels, -labels)
        buffer.episodes_ended(*ends.get(step, (none, none)))
    learner_obs, expert_obs = buffer.get()
    np.testing.assert_array_equal(learner_obs, -expert_obs)  # the two views stay paired
    np.testing.assert_array_equal(learner_obs[:2, 0], [50, 51])  # the window: the latest step
    # env 0 fell at step 4 (its last 3 states: 20, 30, 40); env 1's time limit at step 2 kept nothing; its fall at
    # step 5 keeps the 3 states of its new episode (31, 41, 51), the 5-state store overwriting its oldest (20)
    np.testing.assert_array_equal(learner_obs[2:, 0], [51, 30, 40, 31, 41])
    assert buffer.n_falls == 2 and buffer.fall_size == 5


def test_expert_action_memory_keeps_every_state_then_a_uniform_sample() -> None:
    memory = ExpertActionMemory(50, (1,), (1,), rng=np.random.default_rng(0))
    for batch in range(5):  # 40 states: all kept, in order
        labels = np.arange(batch * 8, batch * 8 + 8, dtype=np.float32).reshape(-1, 1)
        memory.add(labels, -labels)
    obs, actions = memory.stored()
    np.testing.assert_array_equal(obs[:, 0], np.arange(40))
    np.testing.assert_array_equal(actions, -obs)
    kept = []
    for trial in range(300):
        memory = ExpertActionMemory(50, (1,), (1,), rng=np.random.default_rng(trial))
        for batch in range(125):  # 1,000 states offered, 50 kept
            labels = np.arange(batch * 8, batch * 8 + 8, dtype=np.float32).reshape(-1, 1)
            memory.add(labels, -labels)
        obs, actions = memory.stored()
        np.testing.assert_array_equal(actions, -obs)  # each state keeps its own action
        assert memory.size == 50 and memory.seen == 1000 and len(np.unique(obs)) == 50
        kept.append(obs[:, 0])
    # uniform over the whole stream: mean 499.5 (std of this mean ~2); the first or the last 50 would give 25 or 975
    assert abs(np.concatenate(kept).mean() - 499.5) < 15


def test_matched_daggers_memory_keeps_the_experts_action_at_every_visited_state() -> None:
    for env_id, name in (("Pendulum-v1", "sac/Pendulum-v1_1"), ("CartPole-v1", "dqn/CartPole-v1_1")):
        env = make_vec_env(env_id, n_envs=2, seed=0)
        expert = load_expert(shared_expert(name))
        model = MatchedDAgger("MlpPolicy", env, expert=expert, seed=0, expert_action_memory=1000, **SMALL)
        model.learn(16 * 6)  # 96 states; the window holds 64
        obs, actions = model._bc_memory.stored()
        assert len(obs) == 96 and len(np.unique(obs, axis=0)) == 96
        # neither env normalises its observations: the learner's and the expert's views are the same numbers
        np.testing.assert_allclose(actions.reshape(96, -1), np.asarray(expert.act(obs)).reshape(96, -1), atol=1e-5)
        logged = model.logger.name_to_value
        assert logged["train/bc_memory_states"] == 96 and logged["train/expert_bc_memory"] > 0


def test_matched_daggers_memory_pulls_the_learner_on_the_states_it_remembers() -> None:
    """States the roll-ins do not visit still pull: an expert that pushes +1.5 everywhere, and 500 remembered copies
    of one state off the states Pendulum visits, labelled -1.5, where the cloning learner then pushes -1.5; without
    the memory, the same learner pushes there as it does elsewhere (0.5-1.9 on seeds 0-7)."""
    env = make_vec_env("Pendulum-v1", n_envs=2, seed=0)
    expert = QuadraticExpert(env.observation_space, env.action_space, np.array([1.5], dtype=np.float32))
    state = np.zeros((1, 3), dtype=np.float32)  # (cos, sin) = (0, 0): not a pendulum's angle
    settings = {
        **SMALL,
        "aggregation_window": 1,
        "n_epochs": 10,
        "learning_rate": 1e-2,
        "policy_kwargs": dict(net_arch=[64, 64]),
    }
    means = {}
    for memory in (0, 2000):
        model = MatchedDAgger("MlpPolicy", env, expert=expert, seed=0, beta_init=0.0, expert_action_memory=memory, **settings)
        if memory:
            model._bc_memory.add(np.repeat(state, 500, axis=0), np.full((500, 1), -1.5, dtype=np.float32))
        model.learn(16 * 10)
        means[memory] = model.policy.get_distribution(th.as_tensor(state)).distribution.mean.item()
    assert abs(means[2000] - (-1.5)) < 0.3 and means[0] > 0, means  # seeds 0-7: within 0.07 with it, above 0.5 without


def test_matched_dagger_is_aggrevated_with_cloning_and_its_yaml_and_saves(tmp_path: Path) -> None:
    """The baseline takes AggreVaTeD's arguments (and so its YAML entries) plus its memory's size, refuses a bad size
    naming it, is a zoo algorithm with AggreVaTeD's YAML, and loads back with its memory's size."""
    from sb3ext import zoo

    with pytest.raises(ValueError, match=r"MatchedDAgger: invalid expert_action_memory=-1; allowed: an integer >= 0"):
        MatchedDAgger("MlpPolicy", make_vec_env("Pendulum-v1", n_envs=2, seed=0), expert_action_memory=-1)
    with pytest.raises(TypeError, match="unknown hyperparameter"):
        MatchedDAgger("MlpPolicy", make_vec_env("Pendulum-v1", n_envs=2, seed=0), expert_action_memry=10)
    model = MatchedDAgger("MlpPolicy", make_vec_env("Pendulum-v1", n_envs=2, seed=0),
                          expert=shared_expert("sac/Pendulum-v1_1"), seed=0, expert_action_memory=100, **SMALL)  # fmt: skip
    model.learn(16)
    logged = model.logger.name_to_value  # it clones because it is DAgger, not because the critic said too little
    assert logged["train/low_signal_imitation"] == 0.0 and logged["train/bc_memory_states"] > 0
    assert logged["train/expert_bc"] > 0 and model._bc_memory is not None
    model.save(tmp_path / "dagger.zip")
    loaded = MatchedDAgger.load(tmp_path / "dagger.zip")
    assert type(loaded) is MatchedDAgger and loaded.expert_action_memory == 100
    assert zoo.BASELINES["dagger"] == ("sb3ext.algos.aggrevated:MatchedDAgger", "aggrevated")
    assert zoo._sb3ext_config("dagger", "Pendulum-v1") == hyperparams_path("aggrevated")


def test_fall_store_is_rescored_beside_the_window() -> None:
    """Episodes that terminate (here: after 70 steps) leave their last 64 states (FALL_STEPS) in the store; Pendulum's
    time limit does not count as a fall."""

    last_64: list[np.ndarray] = []  # the states an episode's 7th to 70th (last) actions were taken in

    class FallsAfterSeventy(gym.Wrapper):
        def reset(self, **kwargs: Any) -> Any:
            self.steps = 0
            return self.env.reset(**kwargs)

        def step(self, action: Any) -> Any:
            obs, reward, terminated, truncated, info = self.env.step(action)
            self.steps += 1
            if 6 <= self.steps <= 69:
                last_64.append(obs)
            return obs, reward, terminated or self.steps == 70, truncated, info

    env = make_vec_env("Pendulum-v1", n_envs=2, seed=0, wrapper_class=FallsAfterSeventy)
    model = AggreVaTeD(
        "MlpPolicy", env, **{**SMALL, "aggregation_window": 1, "aggregation_falls": 256},
        expert=shared_expert("sac/Pendulum-v1_1"), seed=0, beta_init=0.0,
    )  # fmt: skip
    model.learn(8 * 2 * 9)  # 72 steps per env: one fall each
    assert model._aggregation.n_falls == 2
    assert model.logger.name_to_value["train/aggregated_falls"] == 2
    assert model.logger.name_to_value["train/aggregated_states"] == 16 + 2 * 64
    learner_obs, _ = model._aggregation.get()
    assert len(model._aggregation) == len(learner_obs) == 16 + 2 * 64  # window, then the falls
    expected = np.stack(last_64)
    assert len(expected) == 128
    np.testing.assert_array_equal(np.unique(learner_obs[16:], axis=0), np.unique(expected, axis=0))

    plain = pendulum_model(aggregation_window=1, aggregation_falls=64)  # Pendulum alone ends only at its time limit
    plain.learn(8 * 2 * 26)  # 208 steps per env: one truncation each
    assert plain._aggregation.n_falls == 0 and plain.logger.name_to_value["train/aggregated_states"] == 16


def test_std_floor_holds() -> None:
    model = pendulum_model(beta_init=0.0)
    with th.no_grad():
        model.policy.log_std.fill_(-5.0)
    model.learn(16)
    # MIN_STD (0.1) of Pendulum's half range 2, exactly: the update pushed it lower and the floor put it back
    assert th.exp(model.policy.log_std).min().item() == pytest.approx(0.1 * 2.0, rel=1e-6)


def test_bound_penalty_pushes_the_mean_back_inside() -> None:
    env = make_vec_env("Pendulum-v1", n_envs=2, seed=0)
    expert = QuadraticExpert(env.observation_space, env.action_space, np.array([0.0], dtype=np.float32))
    model = AggreVaTeD("MlpPolicy", env, expert=expert, seed=0, beta_init=0.0, bound_coef=10.0, **SMALL)
    with th.no_grad():
        model.policy.action_net.bias.fill_(6.0)  # mean far outside [-2, 2]: all samples clip to the same action
    model.learn(16)
    assert model.logger.name_to_value["train/bound_penalty"] > 0
    assert model.policy.action_net.bias.item() < 6.0


def test_discrete_advantages_are_scaled_per_state() -> None:
    """Discrete actions: each state's exact advantages are divided by their largest |A| (the Q* gaps of 10 here)."""
    env = make_vec_env("CartPole-v1", n_envs=2, seed=0)
    expert = TableExpert(env.observation_space, env.action_space, np.array([0.0, 10.0]))
    model = AggreVaTeD("MlpPolicy", env, expert=expert, seed=0, normalize_advantage=False, **SMALL)
    obs = th.zeros(4, 4)
    assert model._estimator.score(model.policy, obs, obs)[0].advantages.abs().amax(dim=-1).tolist() == pytest.approx([1.0] * 4)


def test_a_saved_learner_hands_over_to_stock_ppo(tmp_path: Path) -> None:
    """The RL hand-over (docs/algos/aggrevated.md): ``PPO.load`` of a learner's checkpoint, with PPO's own settings,
    acts and values exactly as the learner, and trains on as stock PPO."""
    from stable_baselines3 import PPO

    model = pendulum_model()
    model.learn(64)
    model.save(tmp_path / "learner.zip")
    env = make_vec_env("Pendulum-v1", n_envs=2, seed=1)
    ppo = PPO.load(tmp_path / "learner.zip", env=env, n_steps=64, batch_size=64, n_epochs=2)
    assert type(ppo) is PPO and ppo.n_steps == 64 and ppo.n_epochs == 2
    obs = th.as_tensor(np.random.default_rng(0).normal(size=(8, 3)), dtype=th.float32)
    np.testing.assert_array_equal(
        ppo.predict(obs.numpy(), deterministic=True)[0], model.predict(obs.numpy(), deterministic=True)[0]
    )
    th.testing.assert_close(ppo.policy.predict_values(obs), model.policy.predict_values(obs), rtol=0, atol=0)
    before = [p.detach().clone() for p in ppo.policy.parameters()]
    ppo.learn(128)
    assert ppo.num_timesteps == 128 and "train/policy_gradient_loss" in ppo.logger.name_to_value
    assert any(not th.equal(a, b) for a, b in zip(before, ppo.policy.parameters()))


# ---------------------------------------------------------------------- errors
def test_unknown_hyperparameter_names_it_and_suggests() -> None:
    with pytest.raises(
        TypeError, match=r"unknown hyperparameter\(s\) 'n_action_sample' \(did you mean 'n_action_samples'\?\)"
    ):
        pendulum_model(n_action_sample=3)


@pytest.mark.parametrize(
    "key,value",
    [
        ("beta_init", 1.5),
        ("beta_decay", -0.1),
        ("n_action_samples", 1),
        ("aggregation_window", 0),
        ("aggregation_reservoir", -1),
        ("aggregation_reservoir", 2.5),
        ("aggregation_falls", -1),
        ("rollin_deterministic", 1.5),
        ("expert_bc_coef", -1.0),
        ("expert_bc_margin", float("nan")),
        ("beta_init", "0.5"),  # a string, not a number
        ("n_action_samples", float("inf")),
        ("bound_coef", True),
    ],
)
def test_invalid_values_name_the_key(key: str, value: object) -> None:
    with pytest.raises(ValueError, match=rf"invalid {key}="):
        pendulum_model(**{key: value})


def test_learning_without_expert_fails_clearly() -> None:
    env = make_vec_env("Pendulum-v1", n_envs=1)
    model = AggreVaTeD("MlpPolicy", env, **SMALL)
    with pytest.raises(ValueError, match="AggreVaTeD needs an expert"):
        model.learn(16)


def test_expert_for_another_env_fails_before_training() -> None:
    env = make_vec_env("MountainCarContinuous-v0", n_envs=1)
    with pytest.raises(ValueError, match=r"expert observation space Box\(shape=\(3,\)"):
        AggreVaTeD("MlpPolicy", env, expert=shared_expert("sac/Pendulum-v1_1"), **SMALL)


def test_expert_of_the_wrong_kind_is_refused() -> None:
    env = make_vec_env("CartPole-v1", n_envs=1)
    with pytest.raises(ValueError, match="a DQN or QR-DQN expert with a Q-function, a PPO / A2C expert"):
        # a continuous-Q expert whose spaces match CartPole's: only its kind is wrong
        wrong_kind = QuadraticExpert(env.observation_space, env.action_space, np.zeros(1))
        AggreVaTeD("MlpPolicy", env, expert=wrong_kind, **SMALL)


# ---------------------------------------------------------------------- save / load / determinism
def test_save_load_predicts_without_the_expert(tmp_path: Path) -> None:
    model = pendulum_model()
    model.learn(32)
    model.save(tmp_path / "agent.zip")
    with zipfile.ZipFile(tmp_path / "agent.zip") as archive:
        data = archive.read("data").decode()
    assert '"expert"' not in data and '"_expert"' not in data and '"_aggregation"' not in data
    loaded = AggreVaTeD.load(tmp_path / "agent.zip")
    assert loaded._expert is None and loaded.imitation_iterations == model.imitation_iterations
    obs = np.stack([gym.make("Pendulum-v1").observation_space.sample() for _ in range(10)])
    np.testing.assert_array_equal(model.predict(obs, deterministic=True)[0], loaded.predict(obs, deterministic=True)[0])
    with pytest.raises(ValueError, match="needs an expert"):
        loaded.set_env(make_vec_env("Pendulum-v1", n_envs=2))
        loaded.learn(16)
    loaded.set_expert(shared_expert("sac/Pendulum-v1_1"))
    loaded.learn(16, reset_num_timesteps=False)
    assert loaded.imitation_iterations == model.imitation_iterations + 1


def test_set_expert_on_a_trained_model_says_it_drops_the_aggregated_states() -> None:
    model = pendulum_model()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model.set_expert(shared_expert("sac/Pendulum-v1_1"))  # nothing aggregated yet: silent
    model.learn(32)
    with pytest.warns(UserWarning, match=r"set_expert: the 32 aggregated states of the previous expert are dropped"):
        model.set_expert(shared_expert("sac/Pendulum-v1_1"))
    assert model._aggregation is not None and model._aggregation.get()[0].shape[0] == 0


def test_load_with_expert_kwarg_continues_the_schedule(tmp_path: Path) -> None:
    model = pendulum_model(beta_init=0.5, beta_decay=0.5)
    model.learn(32)
    model.save(tmp_path / "agent.zip")
    env = make_vec_env("Pendulum-v1", n_envs=2, seed=1)
    loaded = AggreVaTeD.load(tmp_path / "agent.zip", env=env, expert=shared_expert("sac/Pendulum-v1_1"))
    assert loaded._expert is not None and loaded.beta == pytest.approx(0.5 * 0.5**2)


def test_model_saved_before_value_estimators_loads_and_trains(tmp_path: Path) -> None:
    """A checkpoint without ``aggregation_reservoir`` (saved by an older sb3ext), or with the settings since removed
    (``noise_floor``, ``policy_average``, ``value_estimator``, ...), loads, predicts the same, and trains on with a
    value-only expert."""
    import json

    env = make_vec_env("BipedalWalker-v3", n_envs=2, seed=0)
    model = AggreVaTeD("MlpPolicy", env, expert=shared_expert("ppo/BipedalWalker-v3_1"), seed=0, **SMALL)
    model.learn(16)
    model.save(tmp_path / "agent.zip")
    old = tmp_path / "old.zip"
    with zipfile.ZipFile(tmp_path / "agent.zip") as source, zipfile.ZipFile(old, "w") as target:
        for item in source.infolist():
            content = source.read(item.filename)
            if item.filename == "data":
                data = json.loads(content)
                assert "aggregation_reservoir" in data and "obs_stats_from_expert" in data
                del data["aggregation_reservoir"], data["obs_stats_from_expert"]
                removed = {"noise_floor": False, "expert_bc_snr": 0.0, "policy_average": 0.0, "min_std": 0.1,
                           "per_state_normalization": None, "aggregation_fall_steps": 64, "expert_obs_stats": True,
                           "value_estimator": "learned_q", "critic_kwargs": None, "expert_gae_lambda": 0.0}  # fmt: skip
                assert not set(removed) & set(data)
                data.update(removed)  # as a checkpoint of 0.1.0-dev before the distillation has them
                content = json.dumps(data).encode()
            target.writestr(item, content)
    loaded = AggreVaTeD.load(old, env=make_vec_env("BipedalWalker-v3", n_envs=2, seed=1))
    obs = np.stack([env.observation_space.sample() for _ in range(5)])
    np.testing.assert_array_equal(model.predict(obs, deterministic=True)[0], loaded.predict(obs, deterministic=True)[0])
    assert loaded.aggregation_reservoir == 0 and not loaded.obs_stats_from_expert
    loaded.set_expert(shared_expert("ppo/BipedalWalker-v3_1"))
    loaded.learn(16, reset_num_timesteps=False)
    assert loaded.imitation_iterations == 2


def test_learner_observation_statistics_start_from_the_experts_once() -> None:
    """Under the learner's VecNormalize, a fresh learner starts from the expert's frozen observation statistics (a
    zoo PPO expert's), keeps updating them, and does not copy them again on a later learn()."""
    expert = load_expert(shared_expert("ppo/BipedalWalker-v3_1"))
    assert expert.normalization is not None and expert.normalization.obs_rms is not None
    expert_rms = expert.normalization.obs_rms

    def model(**kwargs: Any) -> AggreVaTeD:
        env = VecNormalize(make_vec_env("BipedalWalker-v3", n_envs=2, seed=0), norm_reward=False)
        return AggreVaTeD("MlpPolicy", env, expert=expert, seed=0, **SMALL, **kwargs)

    learner = model()
    learner.learn(16)
    norm = learner.get_vec_normalize_env()
    assert norm is not None and learner.obs_stats_from_expert
    assert norm.obs_rms is not expert_rms and norm.obs_rms.count == pytest.approx(expert_rms.count + 16 + 2)
    np.testing.assert_allclose(norm.obs_rms.mean, expert_rms.mean, atol=1e-3)
    # what the learner saw last is its raw observation on the expert's scale
    np.testing.assert_allclose(learner._last_obs, expert.normalize_obs(norm.get_original_obs()), atol=1e-3)
    learner.learn(16)  # reset_num_timesteps=True, but not a fresh learner: its statistics go on
    assert norm.obs_rms.count == pytest.approx(expert_rms.count + 32 + 4)


def _trajectory(seed: int) -> tuple[np.ndarray, np.ndarray]:
    model = pendulum_model(seed=seed)
    recorder = ActionRecorder()
    model.learn(48, callback=recorder)
    params = th.cat([p.detach().flatten() for p in model.policy.parameters()]).numpy()
    return np.stack(recorder.executed), params


def test_same_seed_same_actions_and_parameters() -> None:
    actions_a, params_a = _trajectory(3)
    actions_b, params_b = _trajectory(3)
    actions_c, _ = _trajectory(4)
    np.testing.assert_array_equal(actions_a, actions_b)
    np.testing.assert_array_equal(params_a, params_b)
    assert not np.array_equal(actions_a, actions_c)


# ---------------------------------------------------------------------- YAML
ZOO_KEYS = {
    "n_envs",
    "n_timesteps",
    "policy",
    "normalize",
    "env_wrapper",
    "frame_stack",
    "callback",
    "vec_env_wrapper",
    "monitor_kwargs",
    "env_kwargs",
}


def test_yaml_keys_are_constructor_arguments() -> None:
    entries = yaml.safe_load(hyperparams_path("aggrevated").read_text())
    allowed = set(inspect.signature(AggreVaTeD.__init__).parameters) - {"self", "unknown_kwargs"}
    required = {
        "Pendulum-v1",
        "MountainCarContinuous-v0",
        "CartPole-v1",
        "Acrobot-v1",
        "LunarLanderContinuous-v3",
        "BipedalWalker-v3",
        "BipedalWalkerHardcore-v3",
        *(f"{body}-{version}" for body in ("HalfCheetah", "Hopper", "Walker2d", "Swimmer") for version in ("v4", "v5")),
    }
    assert required <= set(entries)
    for env_id, entry in entries.items():
        unknown = set(entry) - allowed - ZOO_KEYS
        assert not unknown, f"{env_id}: {unknown} are not AggreVaTeD arguments"
        # the zoo's `atari` and `default` keys serve every game or env without an entry: the expert comes from the user
        assert ("expert" in entry) == (env_id not in ("atari", "default")), env_id
    assert {"default", *required, "Ant-v4", "Ant-v5"} <= set(entries)


def test_discrete_runs_with_the_real_dqn_expert() -> None:
    env = make_vec_env("CartPole-v1", n_envs=2, seed=0)
    model = AggreVaTeD("MlpPolicy", env, expert=load_expert(shared_expert("dqn/CartPole-v1_1")), seed=0, **SMALL)
    model.learn(32)
    assert model.imitation_iterations == 2
    assert isinstance(model.action_space, spaces.Discrete)
    # q_gap = E_s[max_a Q*(s, a) - sum_a pi(a|s) Q*(s, a)], by hand on states the test picks (not the model's)
    states = th.as_tensor(np.random.default_rng(0).normal(0.0, 0.5, (64, 4)), dtype=th.float32)
    _, stats = model._estimator.score(model.policy, states, states)
    with th.no_grad():
        q = model.expert.q_all(states)
        probs = model.policy.get_distribution(states).distribution.probs
    by_hand = (q.max(dim=1).values - (probs * q).sum(dim=1)).mean()
    assert stats["q_gap"].item() == pytest.approx(by_hand.item(), rel=1e-5)
    assert by_hand.item() > 1e-3  # the learner does not yet put all its mass on the expert's choice


# ---------------------------------------------------------------------- value-only experts (A* = r + gamma V*(s') - V*(s))
def test_expert_bc_works_with_a_value_only_expert_scored_by_its_policy() -> None:
    env = make_vec_env("BipedalWalker-v3", n_envs=2, seed=0)
    expert = load_expert(shared_expert("ppo/BipedalWalker-v3_1"))
    model = AggreVaTeD("MlpPolicy", env, expert=expert, seed=0, expert_bc_coef=1.0, expert_bc_margin=0.0, **SMALL)
    model.learn(16)
    obs = th.as_tensor(np.random.default_rng(0).normal(0.0, 0.1, (5, *env.observation_space.shape)), dtype=th.float32)
    scores, _ = model._estimator.score(model.policy, obs, obs)
    # the expert's own (deterministic) action, and how far its log-likelihood is above the learner's samples'
    np.testing.assert_allclose(scores.expert_actions.numpy(), expert.act(obs.numpy()), atol=1e-6)
    assert scores.expert_gap_z is not None and scores.expert_gap_z.shape == (5,)
    model.learn(32, reset_num_timesteps=False)
    # margin 0: wherever the expert's action is likelier under the expert than the learner's samples on average
    assert model.logger.name_to_value["train/expert_bc_fraction"] > 0.5
    assert model.logger.name_to_value["train/expert_bc"] > 0


def test_a_discrete_value_only_expert_is_matched_not_collapsed_onto_its_mode() -> None:
    """Discrete value-only expert: the score is the soft advantage log pi* - log pi (E_pi of it is -KL(pi || pi*)), so
    the learner converges to pi* = (0.7, 0.3) in every state; log pi* alone drives it onto the mode (p = 0.99+),
    where a softmax's gradient vanishes (the Breakout collapse, docs/benchmarks/atari.md)."""
    from tests.toy_experts import CategoricalPolicyExpert

    env = make_vec_env("CartPole-v1", n_envs=2, seed=0)
    expert = CategoricalPolicyExpert(env.observation_space, env.action_space, np.array([0.7, 0.3]))
    model = AggreVaTeD("MlpPolicy", env, expert=expert, seed=0, beta_init=0.0, learning_rate=3e-3, **{**SMALL, "n_epochs": 4})
    model.learn(512)
    obs = th.as_tensor(model._aggregation.get()[0])
    p_mode = model.policy.get_distribution(obs).distribution.probs[:, 0].detach()
    assert 0.62 < p_mode.min() and p_mode.max() < 0.8, (p_mode.min(), p_mode.max())
    assert model.logger.name_to_value["train/expert_kl"] < 0.02


def test_real_value_only_expert_trains() -> None:
    env = make_vec_env("BipedalWalker-v3", n_envs=2, seed=0)
    model = AggreVaTeD("MlpPolicy", env, expert=shared_expert("ppo/BipedalWalker-v3_1"), seed=0, **SMALL)
    model.learn(64)
    assert model.imitation_iterations == 4
    # K = 4 samples scored at the last 4 roll-ins' states (8 steps x 2 envs each)
    assert model.logger.name_to_value["train/aggregated_states"] == 64


def test_expert_policy_estimator_moves_the_mean_toward_the_experts() -> None:
    """A*(s, a) = alpha log pi*(a|s) with pi* = N(0.8, 0.5^2): one update moves the learner's mean toward 0.8."""
    from tests.toy_experts import GaussianPolicyExpert

    env = make_vec_env("Pendulum-v1", n_envs=2, seed=0)
    expert = GaussianPolicyExpert(env.observation_space, env.action_space, np.array([0.8], dtype=np.float32))
    model = AggreVaTeD("MlpPolicy", env, expert=expert, seed=0, beta_init=0.0, **{**SMALL, "n_epochs": 10})
    old_policy = copy.deepcopy(model.policy)
    model.learn(16)
    obs = th.as_tensor(model._aggregation.get()[0])
    before = old_policy.get_distribution(obs).distribution.mean.detach()
    after = model.policy.get_distribution(obs).distribution.mean.detach()
    assert ((after - 0.8).abs() < (before - 0.8).abs()).float().mean() > 0.95
    assert (after - before).mean().item() > 0.02
    assert model.logger.name_to_value["train/q_gap"] > 0  # the expert's own action is its most likely one
