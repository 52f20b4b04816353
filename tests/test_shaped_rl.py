"""AggreVaTeD's reinforcement term (``rl_coef``): GAE on the expert's V*, and the imitation weaned off."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from gymnasium import spaces
from stable_baselines3.common.env_util import make_vec_env

from sb3ext.algos.aggrevated import AggreVaTeD, MatchedDAgger
from sb3ext.algos.aggrevated.shaped_rl import ShapedReturns, rl_target_kl
from sb3ext.experts import CallableExpert
from tests.toy_experts import GaussianPolicyExpert


def test_advantages_are_gae_on_the_experts_value_with_falls_time_limits_and_the_last_state() -> None:
    """Two envs, three steps, gamma 0.5, lambda 0.5, computed by hand.

    env 0: V* = 1, 2, 3, then 4 after the roll-in; rewards 1, 1, 1; no end.
    env 1: V* = 1, 2, 3; rewards 0, 2, 0; falls after step 0 (no bootstrap), cut by its time limit after step 2
    (V* of its last state: 8); V* after the roll-in (a new episode's first state): 100, not used.
    """
    shaped = ShapedReturns(n_steps=3, n_envs=2, gamma=0.5, gae_lambda=0.5)
    for values, rewards, dones, cut in (
        ([1.0, 1.0], [1.0, 0.0], [False, True], [0.0, 0.0]),
        ([2.0, 2.0], [1.0, 2.0], [False, False], [0.0, 0.0]),
        ([3.0, 3.0], [1.0, 0.0], [False, True], [0.0, 8.0]),
    ):
        shaped.add(np.array(values), np.array([True, True]))
        shaped.observe(np.array(rewards), np.array(dones), np.array(cut))
    adv = shaped.advantages(np.array([4.0, 100.0]))
    # env 0: deltas 1 + 1 - 1 = 1, 1 + 1.5 - 2 = 0.5, 1 + 2 - 3 = 0; A = 1 + 0.25 (0.5 + 0.25 * 0), 0.5, 0
    np.testing.assert_allclose(adv[:, 0], [1.125, 0.5, 0.0])
    # env 1: deltas 0 - 1 = -1 (fell), 2 + 1.5 - 2 = 1.5, 0 + 4 - 3 = 1 (cut: V* of its last state)
    np.testing.assert_allclose(adv[:, 1], [-1.0, 1.75, 1.0])
    # lambda 0: the one-step TD errors
    shaped.gae_lambda = 0.0
    np.testing.assert_allclose(shaped.advantages(np.array([4.0, 100.0]))[:, 1], [-1.0, 1.5, 1.0])


class Bandit(gym.Env):
    """One step per episode; the observation is always 1; reward ``1 - (a - 0.5)^2``: 0.5 is the best action."""

    observation_space = spaces.Box(0.0, 2.0, (1,), np.float32)
    action_space = spaces.Box(-1.0, 1.0, (1,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.ones(1, np.float32), {}

    def step(self, action):
        reward = 1.0 - float((np.clip(action[0], -1, 1) - 0.5) ** 2)
        return np.ones(1, np.float32), reward, True, False, {}


def bandit_learner(rl_coef: float, expert_value: float) -> AggreVaTeD:
    """A learner on :class:`Bandit` with a value-only expert whose policy acts -0.5 (a poor action: return 0) and
    whose V* promises ``expert_value``."""
    env = make_vec_env(Bandit, n_envs=4, seed=0)
    expert = GaussianPolicyExpert(env.observation_space, env.action_space, np.array([-0.5], np.float32), std=0.3)
    expert.slope = expert_value  # V*(s) = expert_value * s[0], and s[0] = 1
    return AggreVaTeD("MlpPolicy", env, expert=expert, seed=0, beta_init=0.0, rl_coef=rl_coef, n_steps=16,
                      batch_size=64, n_epochs=5, n_action_samples=4, aggregation_window=4, learning_rate=3e-3,
                      policy_kwargs=dict(net_arch=[16], log_std_init=-1.0))  # fmt: skip


def mean_action(model: AggreVaTeD) -> float:
    return float(model.predict(np.ones((1, 1), np.float32), deterministic=True)[0][0, 0])


def test_the_reinforcement_term_passes_a_poor_expert_once_its_promise_is_met() -> None:
    """The expert acts -0.5 (return 0.0) and promises 0.5; the learner, at 0.75 from its first iterations, is past
    the promise: the imitation is weaned off (weight 0) and the reinforcement term climbs to the best action 0.5.
    Without the term, the learner imitates the expert's poor action."""
    learner = bandit_learner(rl_coef=1.0, expert_value=0.5)
    learner.learn(1600)
    assert learner.logger.name_to_value["train/imitation_weight"] == 0.0
    assert mean_action(learner) > 0.35, mean_action(learner)
    imitator = bandit_learner(rl_coef=0.0, expert_value=0.5)
    imitator.learn(1600)
    assert "train/imitation_weight" not in imitator.logger.name_to_value
    assert mean_action(imitator) < -0.3, mean_action(imitator)


def test_the_imitation_stays_while_the_learner_falls_short_of_the_promise() -> None:
    """The same expert promising 10 (far above any return here, at most 1): the imitation keeps a weight above 0.9
    and pulls the learner toward the expert's action; the reinforcement term has the rest (below 0.1)."""
    learner = bandit_learner(rl_coef=1.0, expert_value=10.0)
    learner.learn(1600)
    assert learner.logger.name_to_value["train/imitation_weight"] > 0.9
    assert mean_action(learner) < 0.0, mean_action(learner)


def test_rl_coef_is_checked_and_is_off_with_a_warning_for_an_expert_without_a_value() -> None:
    env = make_vec_env(Bandit, n_envs=2, seed=0)
    with pytest.raises(ValueError, match="rl_coef.*>= 0"):
        AggreVaTeD("MlpPolicy", env, rl_coef=-1.0)
    policy_only = CallableExpert(lambda obs: np.zeros((len(obs), 1)), env.observation_space, env.action_space)
    # a YAML default with the term must still hold for a policy-only expert: it imitates, and says so
    with pytest.warns(UserWarning, match="rl_coef=1.0 needs the expert's value .* is policy-only: the term is off"):
        imitator = AggreVaTeD("MlpPolicy", env, expert=policy_only, rl_coef=1.0, beta_init=0.0, n_steps=8, batch_size=16)
    imitator.learn(32)
    assert "train/rl_loss" not in imitator.logger.name_to_value
    assert "train/policy_loss" in imitator.logger.name_to_value
    # DAgger clones from the start: the term is never used, and a policy-only expert is fine
    dagger = MatchedDAgger("MlpPolicy", env, expert=policy_only, rl_coef=1.0, n_steps=8, batch_size=16)
    dagger.learn(32)
    assert "train/rl_loss" not in dagger.logger.name_to_value
    assert th.isfinite(th.as_tensor(dagger.logger.name_to_value["train/expert_bc"]))


def test_the_reinforcement_term_starts_from_the_policy_that_sampled_its_steps() -> None:
    """PPO's ratio and KL stop measure from the roll-in's policy: the term's passes run before the imitation's moves
    the policy (after it, the ratio was off from the first minibatch and the KL stop fired at once on Hardcore)."""
    learner = bandit_learner(rl_coef=1.0, expert_value=0.5)
    gaps: list[float] = []
    reinforce = learner._reinforcement._passes

    def checked(model, obs, scores, *args, **kwargs):
        with th.no_grad():
            log_prob = learner.policy.get_distribution(obs).log_prob(scores.actions[0])
        gaps.append(float((log_prob - scores.log_prob_old[0]).abs().max()))
        return reinforce(model, obs, scores, *args, **kwargs)

    learner._reinforcement._passes = checked  # type: ignore[method-assign]
    learner.learn(640)
    assert len(gaps) >= 5, gaps
    assert max(gaps) < 1e-4, gaps


def test_a_weaned_imitation_leaves_the_policy_to_the_reinforcement_term() -> None:
    """With the imitation's weight at 0, its pass leaves the actor where the term's passes put it. (When both shared
    one Adam, the term's momentum went on moving the actor through tens of the imitation's steps of zero gradient.)"""
    learner = bandit_learner(rl_coef=1.0, expert_value=0.5)
    actor = [p for name, p in learner.policy.named_parameters() if "value" not in name]
    after_term: list[list[th.Tensor]] = []
    moved: list[float] = []
    reinforce, train = learner._reinforcement._passes, learner.train

    def recorded(*args, **kwargs):
        reinforce(*args, **kwargs)
        after_term.append([p.detach().clone() for p in actor])

    def checked():
        after_term.clear()
        train()
        if after_term and learner.logger.name_to_value.get("train/imitation_weight") == 0.0:
            moved.append(max(float((p - q).abs().max()) for p, q in zip(actor, after_term[0], strict=True)))

    learner._reinforcement._passes = recorded  # type: ignore[method-assign]
    learner.train = checked  # type: ignore[method-assign]
    learner.learn(960)
    assert len(moved) >= 5, moved
    assert max(moved) == 0.0, moved


@pytest.mark.parametrize("dict_obs", [False, True])
def test_shaped_scores_take_the_sampled_steps_in_the_roll_ins_order(dict_obs: bool) -> None:
    """Two envs, three steps; the learner's samples act at (step 0, env 1), (step 1, env 0) and (step 2, env 1). The
    scored steps come out env by env, as SB3's get() flattens the buffer, with their own observations, actions and
    log-probs (each observation holds 10 * step + env)."""
    from stable_baselines3.common.buffers import DictRolloutBuffer, RolloutBuffer

    from sb3ext.algos.aggrevated.shaped_rl import shaped_scores

    box = spaces.Box(-100.0, 100.0, (1,), np.float32)
    obs_space = spaces.Dict({"x": box}) if dict_obs else box
    buffer_class = DictRolloutBuffer if dict_obs else RolloutBuffer
    buffer = buffer_class(3, obs_space, box, gamma=0.5, gae_lambda=0.5, n_envs=2)
    shaped = ShapedReturns(n_steps=3, n_envs=2, gamma=0.5, gae_lambda=0.5)
    sampled = np.array([[False, True], [True, False], [False, True]])
    for step in range(3):
        x = np.array([[10.0 * step], [10.0 * step + 1]], np.float32)
        buffer.add({"x": x} if dict_obs else x, -x, np.zeros(2), np.zeros(2, bool), th.zeros(2), th.as_tensor(-x[:, 0]))
        shaped.add(np.zeros(2), sampled[step])
        shaped.observe(np.array([1.0, 2.0]) * step, np.zeros(2, bool), np.zeros(2))
    shaped.last_values = np.zeros(2)
    buffer.compute_returns_and_advantage(th.zeros(2), np.zeros(2))
    next(buffer.get(batch_size=None))
    result = shaped_scores(shaped, buffer, th.device("cpu"))
    assert result is not None
    obs, scores, stats = result
    x = (obs["x"] if dict_obs else obs)[:, 0].tolist()
    assert x == [10.0, 1.0, 21.0]  # env 0's step 1, then env 1's steps 0 and 2
    assert scores.actions[0, :, 0].tolist() == [-10.0, -1.0, -21.0]
    assert scores.log_prob_old[0].tolist() == [-10.0, -1.0, -21.0]
    assert float(stats["rl_steps"]) == 3.0


def test_the_reinforcement_terms_trust_region_shrinks_with_a_roll_in_smaller_than_a_minibatch() -> None:
    """``target_kl`` is the trust region of a pass over ``batch_size`` states; the term's passes over one roll-in of
    64 steps, with a ``batch_size`` of 640, stop at a tenth of it (checked before each step: a pass may end one step
    past it). Without clipping, only the KL stop bounds a pass."""
    assert rl_target_kl(0.5, 64, 640) == 0.05 and rl_target_kl(0.5, 1024, 256) == 0.5 and rl_target_kl(None, 64, 640) is None
    learner = bandit_learner(rl_coef=1.0, expert_value=0.5)
    learner.target_kl, learner.n_epochs, learner.batch_size = 0.5, 30, 640
    learner.clip_range = lambda _: 10.0
    moves: list[float] = []
    reinforce = learner._reinforcement._passes

    def measured(model, obs, *args, **kwargs):
        with th.no_grad():
            before = learner.policy.get_distribution(obs).distribution
        reinforce(model, obs, *args, **kwargs)
        with th.no_grad():
            after = learner.policy.get_distribution(obs).distribution
        moves.append(float(th.distributions.kl_divergence(before, after).sum(-1).mean()))

    learner._reinforcement._passes = measured  # type: ignore[method-assign]
    learner.learn(1600)
    assert len(moves) >= 10, moves
    assert max(moves) < 0.3, moves  # 0.13 here; with the limit at 0.5, the first pass moved the learner by 1.2
