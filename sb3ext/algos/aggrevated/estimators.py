"""AggreVaTeD's advantage estimators, one per kind of expert, and the clipped surrogate they feed.

* :class:`QContinuousEstimator` (SAC, TD3, DDPG, TQC): K fresh learner samples per aggregated state, scored by
  Q*(s, a), with the leave-one-out baseline ``A_k = q_k - mean_{j != k} q_j``;
* :class:`QDiscreteEstimator` (DQN, QR-DQN): the exact expectation over all actions, with the baseline
  ``sum_a pi_old(a|s) Q*(s, a)``;
* :class:`ExpertPolicyEstimator` (PPO, A2C; the default for value-only experts): the expert's own policy as its
  soft advantage ``alpha log pi*(a|s)``, scoring K learner samples per state as above;
* :class:`LearnedQEstimator` (PPO, A2C, ``value_estimator="learned_q"``): a critic regressed onto
  ``r + gamma V*(s')`` on the transitions of the last roll-ins scores K learner samples per state, as above;
* :class:`ValueOnlyEstimator` (PPO, A2C, ``value_estimator="td"``): on the steps the learner itself executed in
  the latest roll-in, ``A* = r + gamma V*(s') - V*(s)`` in the expert's reward scale, optionally lambda-weighted.

Each returns the learner observations to update at, typed scores (:class:`SampledScores` or
:class:`DistributionScores`) and statistics to log; :func:`surrogate_terms` turns scores into the loss terms.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import torch as th
from gymnasium import spaces
from torch.nn import functional as F

from sb3ext.algos.aggrevated.buffers import RollInArrays, StateAggregationBuffer
from sb3ext.algos.aggrevated.critic import AdvantageCritic, CriticSettings, TransitionBuffer, scale_actions
from sb3ext.common.ppo import approx_kl, clip_fraction, clipped_surrogate
from sb3ext.experts import Q_CONTINUOUS, Q_DISCRETE, Expert


def leave_one_out_advantages(q: th.Tensor) -> th.Tensor:
    """A_k = q_k - mean_{j != k} q_j over the first axis (K action samples per state, K >= 2).

    An unbiased per-state baseline: adding any f(s) to q leaves the result unchanged, and the
    advantages of each state sum to zero.
    """
    k = q.shape[0]
    if k < 2:
        raise ValueError("leave-one-out advantages need at least 2 samples per state")
    return q - (q.sum(dim=0, keepdim=True) - q) / (k - 1)


def critic_signal_and_noise(q: th.Tensor, q_critics: th.Tensor) -> tuple[th.Tensor, th.Tensor | None]:
    """Per state: how much Q* separates the K scored actions, and how much its critics disagree about that.

    :param q: Q* of K actions per state, shape (K, N)
    :param q_critics: each critic's Q of the same actions, shape (n_critics, K, N)
    :return: ``signal`` = the root mean square over the K actions of their leave-one-out advantages under Q*, and
        ``noise`` = the root mean square over the K actions of the spread (std) of those advantages across the
        critics (None with a single critic), both of shape (N,). A state whose signal is below its noise is one
        where the critics do not agree which of the learner's actions is better.
    """
    signal = leave_one_out_advantages(q).pow(2).mean(dim=0).sqrt()
    if q_critics.shape[0] < 2:
        return signal, None
    per_critic = leave_one_out_advantages(q_critics.transpose(0, 1))  # (K, n_critics, N)
    noise = per_critic.var(dim=1, unbiased=False).mean(dim=0).sqrt()
    return signal, noise


def rms_ratio(signal: th.Tensor, noise: th.Tensor) -> th.Tensor:
    """Root mean square of ``signal`` over root mean square of ``noise``."""
    return signal.pow(2).mean().sqrt() / (noise.pow(2).mean().sqrt() + 1e-8)


def expected_advantages(q: th.Tensor, probs: th.Tensor) -> th.Tensor:
    """A(s, a) = Q*(s, a) - sum_b pi_old(b|s) Q*(s, b): the exact per-state baseline for discrete actions."""
    return q - (probs * q).sum(dim=-1, keepdim=True)


def lambda_sums(deltas: np.ndarray, dones: np.ndarray, decay: float) -> np.ndarray:
    """``A_t = sum_k decay^k delta_{t+k}`` along each env's column of a roll-in (n_steps, n_envs), cut at episode ends.

    With ``decay = gamma * lambda`` this is GAE on the expert's value; the last step of the roll-in keeps its own
    delta only (the expert's V*(s') bootstraps it).
    """
    sums = np.zeros_like(deltas)
    running = np.zeros(deltas.shape[1:], dtype=deltas.dtype)
    for step in reversed(range(len(deltas))):
        running = deltas[step] + decay * (1.0 - dones[step]) * running
        sums[step] = running
    return sums


class SampledScores(NamedTuple):
    """Scored actions: K fresh samples per state (Q* experts) or the one executed (value-only experts)."""

    actions: th.Tensor  # (K, N, *action_shape)
    log_prob_old: th.Tensor  # (K, N)
    advantages: th.Tensor  # (K, N)
    # Q* experts: the expert's action per state, and by how many standard deviations of the K samples' Q* it
    # beats their mean (a large gap: the learner's local samples cannot find what the expert does there)
    expert_actions: th.Tensor | None = None  # (N, *action_shape)
    expert_gap_z: th.Tensor | None = None  # (N,)


class DistributionScores(NamedTuple):
    """Every action of a discrete space, weighted by the old policy (the exact expectation)."""

    probs_old: th.Tensor  # (N, n_actions)
    q: th.Tensor  # (N, n_actions)
    advantages: th.Tensor  # (N, n_actions)


Scores = SampledScores | DistributionScores


def torch_distribution(distribution: Any) -> Any:
    """The torch distribution inside an SB3 ``Distribution`` (Normal for Box, Categorical for Discrete)."""
    inner = distribution.distribution
    if not isinstance(inner, (th.distributions.Normal, th.distributions.Categorical)):
        raise TypeError(f"AggreVaTeD needs a Gaussian or categorical policy, got {type(inner).__name__}")
    return inner


class Estimator:
    """Advantages of the learner's actions under the expert's cost-to-go.

    :param expert: the expert
    :param n_action_samples: K (continuous actions)
    :param normalize_advantage: divide all advantages by their standard deviation
    :param device: torch device of the learner
    """

    def __init__(
        self,
        expert: Expert,
        n_action_samples: int,
        normalize_advantage: bool,
        device: th.device,
        expert_cap: bool = False,
    ):
        self.expert = expert
        self.n_action_samples = n_action_samples
        self.normalize_advantage = normalize_advantage
        self.device = device
        self.expert_cap = expert_cap

    def _normalize(self, advantages: th.Tensor, per_state: bool, scale_axis: int) -> th.Tensor:
        """Per state by the largest |A| of the state (``per_state``: the exact expectation over discrete actions),
        then by the batch standard deviation (``normalize_advantage``)."""
        if per_state:
            advantages = advantages / (advantages.abs().amax(dim=scale_axis, keepdim=True) + 1e-8)
        if self.normalize_advantage:
            advantages = advantages / (advantages.std() + 1e-8)
        return advantages


def expert_gap_z(expert_score: th.Tensor, sample_scores: th.Tensor) -> th.Tensor:
    """Per state, by how many standard deviations of the K samples' scores (K, N) the expert's action's score (N,)
    beats their mean."""
    return (expert_score - sample_scores.mean(dim=0)) / (sample_scores.std(dim=0) + 1e-6)


class _QEstimator(Estimator):
    def samples(
        self, policy: Any, aggregation: StateAggregationBuffer, learner_view: Callable[[np.ndarray], np.ndarray] | None = None
    ) -> tuple[th.Tensor, Scores, dict[str, th.Tensor]]:
        """Score the learner at every aggregated state (no gradient).

        :param learner_view: maps the stored learner observations to what the learner sees now (its current
            observation normalisation); None: they are stored as it sees them
        """
        learner_np, expert_np = aggregation.get()
        if learner_view is not None:
            learner_np = learner_view(learner_np)
        learner_obs = th.as_tensor(learner_np, device=self.device)
        scores, stats = self.score(policy, th.as_tensor(expert_np, device=self.device), learner_obs)
        return learner_obs, scores, stats

    def score(self, policy: Any, expert_obs: th.Tensor, learner_obs: th.Tensor) -> tuple[Scores, dict[str, th.Tensor]]:
        raise NotImplementedError


class QContinuousEstimator(_QEstimator):
    """K learner samples per state scored by Q*(s, a), leave-one-out baseline."""

    def score(self, policy: Any, expert_obs: th.Tensor, learner_obs: th.Tensor) -> tuple[Scores, dict[str, th.Tensor]]:
        expert = self.expert
        with th.no_grad():
            distribution = torch_distribution(policy.get_distribution(learner_obs))
            actions = distribution.sample((self.n_action_samples,))  # (K, N, act_dim)
            log_prob_old = distribution.log_prob(actions).sum(dim=-1)
            q_critics = expert.q_critics(expert_obs, actions)  # (n_critics, K, N)
            q = expert.combine_critics(q_critics)  # (K, N)
            expert_actions = th.as_tensor(expert.act(expert_obs.cpu().numpy()), device=self.device, dtype=th.float32)
            expert_q = expert.q_values(expert_obs, expert_actions)
            # expert_cap: no credit for a sample the critic rates above the expert's own action
            advantages = leave_one_out_advantages(th.minimum(q, expert_q[None]) if self.expert_cap else q)
            signal, noise = critic_signal_and_noise(q, q_critics)
            stats = {
                "q_mean": q.mean(),
                "q_std": q.std(),
                "q_gap": (expert_q - q.mean(dim=0)).mean(),
                "q_twin_spread": expert.critic_spread(q_critics[:, 0]).mean(),
                "critic_signal": signal.mean(),
            }
            if noise is not None:
                stats["critic_noise"] = noise.mean()
                stats["critic_snr"] = rms_ratio(signal, noise)
                stats["critic_low_signal_fraction"] = (signal < noise).float().mean()
            advantages = self._normalize(advantages, False, 0)
        return SampledScores(actions, log_prob_old, advantages, expert_actions, expert_gap_z(expert_q, q)), stats


class QDiscreteEstimator(_QEstimator):
    """Every action scored by Q*(s, .), weighted by the old policy."""

    def score(self, policy: Any, expert_obs: th.Tensor, learner_obs: th.Tensor) -> tuple[Scores, dict[str, th.Tensor]]:
        with th.no_grad():
            probs = torch_distribution(policy.get_distribution(learner_obs)).probs
            q = self.expert.q_all(expert_obs)
            advantages = expected_advantages(q, probs)
            expert_q = q.max(dim=-1).values
            learner_q = (probs * q).sum(dim=-1)
            stats = {"q_mean": learner_q.mean(), "q_std": learner_q.std(), "q_gap": (expert_q - learner_q).mean()}
            advantages = self._normalize(advantages, True, -1)
        return DistributionScores(probs, q, advantages), stats


class ExpertPolicyEstimator(_QEstimator):
    """A value-only expert's own policy as its soft advantage: ``A*(s, a) = alpha log pi*(a|s) + const(s)``.

    For an entropy-regularised optimal policy ``pi*(a|s) = exp((Q*(s, a) - V*(s)) / alpha)`` exactly; a PPO/A2C
    expert is only approximately that. The temperature alpha is one positive number: the batch-std normalisation
    removes it. Box: K learner samples per aggregated state (clipped to the bounds, as the env clips them), with
    the leave-one-out baseline; Discrete: every action, the exact expectation under the old policy.
    """

    def score(self, policy: Any, expert_obs: th.Tensor, learner_obs: th.Tensor) -> tuple[Scores, dict[str, th.Tensor]]:
        expert = self.expert
        with th.no_grad():
            distribution = torch_distribution(policy.get_distribution(learner_obs))
            if isinstance(distribution, th.distributions.Categorical):
                probs = distribution.probs
                n_actions = probs.shape[-1]
                all_actions = th.arange(n_actions, device=self.device).reshape(-1, 1).expand(n_actions, len(probs))
                q = expert.log_prob(expert_obs, all_actions).T  # (N, n_actions)
                learner_q = (probs * q).sum(dim=-1)
                stats = {
                    "q_mean": learner_q.mean(),
                    "q_std": learner_q.std(),
                    "q_gap": (q.max(dim=-1).values - learner_q).mean(),
                }
                return DistributionScores(probs, q, self._normalize(expected_advantages(q, probs), True, -1)), stats
            actions = distribution.sample((self.n_action_samples,))  # (K, N, act_dim)
            log_prob_old = distribution.log_prob(actions).sum(dim=-1)
            q = expert.log_prob(expert_obs, actions)  # (K, N)
            expert_actions = th.as_tensor(expert.act(expert_obs.cpu().numpy()), device=self.device, dtype=th.float32)
            expert_q = expert.log_prob(expert_obs, expert_actions)
            stats = {"q_mean": q.mean(), "q_std": q.std(), "q_gap": (expert_q - q.mean(dim=0)).mean()}
            advantages = self._normalize(leave_one_out_advantages(q), False, 0)
        # the expert's action and its gap let expert_bc_coef pull the mean to it, as with a Q* expert
        return SampledScores(actions, log_prob_old, advantages, expert_actions, expert_gap_z(expert_q, q)), stats


class ValueOnlyEstimator(Estimator):
    """``A* = r + gamma V*(s') - V*(s)`` (lambda-weighted) on the learner-executed steps of the latest roll-in.

    :param gae_lambda: lambda of ``A*_t = sum_k (gamma lambda)^k delta*_{t+k}`` (0: one step)
    """

    def __init__(self, *args: Any, gae_lambda: float = 0.0, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.gae_lambda = gae_lambda

    def samples(self, record: RollInArrays, rollout_buffer: Any) -> tuple[th.Tensor, Scores, dict[str, th.Tensor]]:
        expert = self.expert
        n_steps, n_envs = record.use_expert.shape
        with th.no_grad():
            values = expert.value(th.as_tensor(record.expert_obs.reshape(n_steps * n_envs, -1), device=self.device))
            next_values = expert.value(th.as_tensor(record.next_expert_obs.reshape(n_steps * n_envs, -1), device=self.device))
        values_np = values.cpu().numpy().reshape(n_steps, n_envs)
        next_values_np = next_values.cpu().numpy().reshape(n_steps, n_envs)
        gamma = expert.gamma
        deltas = record.rewards + gamma * next_values_np * (1.0 - record.terminated) - values_np
        advantages = lambda_sums(deltas, record.dones, gamma * float(self.gae_lambda))
        learner_steps = ~record.use_expert
        obs = th.as_tensor(rollout_buffer.observations[learner_steps], device=self.device)
        actions = th.as_tensor(rollout_buffer.actions[learner_steps], device=self.device)
        log_prob_old = th.as_tensor(rollout_buffer.log_probs[learner_steps], device=self.device)
        adv = th.as_tensor(advantages[learner_steps], device=self.device, dtype=th.float32)
        stats = {
            "expert_value_mean": values.mean(),
            "expert_advantage_mean": adv.mean() if len(adv) else th.zeros(()),
            "learner_steps": th.tensor(float(len(adv))),
        }
        if self.normalize_advantage and len(adv) > 1:
            adv = adv / (adv.std() + 1e-8)
        return obs, SampledScores(actions[None], log_prob_old[None], adv[None]), stats


class LearnedQEstimator(Estimator):
    """A value-only expert made into a Q one: ``Q_phi(s, a) = V*(s) + A_phi(s, a)`` regressed onto ``r + gamma V*(s')``.

    Every iteration: (1) the latest roll-in's transitions (learner and expert actions) get their fixed targets
    ``delta* = r + gamma V*(s') - V*(s)`` in the expert's reward scale; the critic's error on them, before it has
    trained on them, is logged (held-out TD error); (2) they join the transition buffer and the critic takes
    ``ceil(epochs * new / batch_size)`` Adam steps on it; (3) the states of the last ``score_window`` transitions
    are scored with K fresh learner samples each (Box: leave-one-out baseline) or every action (Discrete: the
    exact expectation), as with a Q* expert. V*(s) cancels in both baselines.

    :param action_space: the learner's action space (a bounded Box or Discrete)
    :param learner_shape: shape of one learner observation
    :param score_window: number of most recent states re-scored per iteration
    :param settings: the critic's settings
    :param seed: seeds the critic's minibatch draws
    """

    def __init__(
        self,
        *args: Any,
        action_space: spaces.Space,
        learner_shape: tuple[int, ...],
        score_window: int,
        settings: CriticSettings,
        seed: int | None = None,
        **kwargs: Any,
    ):
        super().__init__(*args, **kwargs)
        expert_shape = tuple(self.expert.observation_space.shape or ())
        if len(expert_shape) != 1:
            raise ValueError(
                f"The learned critic needs flat observations, the expert's are {expert_shape}: "
                "use value_estimator='td' for image observations"
            )
        if isinstance(action_space, spaces.Box) and not (
            np.all(np.isfinite(action_space.low)) and np.all(np.isfinite(action_space.high))
        ):
            raise ValueError(f"The learned critic needs a bounded action space, got {action_space}: use value_estimator='td'")
        self.action_space = action_space
        self.discrete = isinstance(action_space, spaces.Discrete)
        self.settings = settings
        self.score_window = score_window
        self.critic = AdvantageCritic(expert_shape[0], action_space, settings.net_arch).to(self.device)
        self.optimizer = th.optim.Adam(self.critic.parameters(), lr=settings.learning_rate)
        action_shape: tuple[int, ...] = () if self.discrete else tuple(action_space.shape or ())
        self.buffer = TransitionBuffer(max(settings.buffer_size, score_window), learner_shape, expert_shape, action_shape)
        self.rng = np.random.default_rng(seed)

    def _critic_actions(self, actions: th.Tensor) -> th.Tensor:
        if self.discrete:
            return actions.reshape(actions.shape[0], -1)[:, 0].long()
        assert isinstance(self.action_space, spaces.Box)
        return scale_actions(actions, self.action_space)

    def add(self, record: RollInArrays, rollout_buffer: Any) -> dict[str, th.Tensor]:
        """Targets of the latest roll-in; the critic's error on them before training on them."""
        n_steps, n_envs = record.use_expert.shape
        n = n_steps * n_envs
        expert_obs = th.as_tensor(record.expert_obs.reshape(n, -1), device=self.device)
        with th.no_grad():
            values = self.expert.value(expert_obs)
            next_values = self.expert.value(th.as_tensor(record.next_expert_obs.reshape(n, -1), device=self.device))
        not_terminated = th.as_tensor(1.0 - record.terminated.reshape(n), device=self.device, dtype=th.float32)
        rewards = th.as_tensor(record.rewards.reshape(n), device=self.device, dtype=th.float32)
        targets = rewards + self.expert.gamma * not_terminated * next_values - values
        if self.settings.target_lambda > 0:
            decay = self.expert.gamma * self.settings.target_lambda
            sums = lambda_sums(targets.cpu().numpy().reshape(n_steps, n_envs), record.dones, decay)
            targets = th.as_tensor(sums.reshape(n), device=self.device)
        actions = self._critic_actions(th.as_tensor(rollout_buffer.actions.reshape(n, -1), device=self.device))
        with th.no_grad():
            predicted = self.critic(expert_obs, actions)
        error = ((predicted - targets) ** 2).mean()
        variance = targets.var() if n > 1 else th.zeros((), device=self.device)
        self.buffer.add(
            record.learner_obs.reshape(n, *record.learner_obs.shape[2:]),
            record.expert_obs.reshape(n, -1),
            actions.cpu().numpy(),
            targets.cpu().numpy(),
        )
        return {
            "expert_value_mean": values.mean(),
            "expert_advantage_mean": targets.mean(),
            "critic_td_error": error,
            "critic_target_var": variance,
            "critic_explained_variance": 1.0 - error / (variance + 1e-8),
        }

    def fit(self, n_new: int) -> dict[str, th.Tensor]:
        """Adam steps on the buffer: ``ceil(epochs * n_new / batch_size)`` minibatches drawn uniformly."""
        settings, buffer = self.settings, self.buffer
        n_updates = math.ceil(settings.epochs * n_new / settings.batch_size)
        losses = []
        for _ in range(n_updates):
            idx = self.rng.integers(0, buffer.size, size=min(settings.batch_size, buffer.size))
            obs = th.as_tensor(buffer.expert_obs[idx], device=self.device)
            actions = th.as_tensor(buffer.actions[idx], device=self.device)
            targets = th.as_tensor(buffer.targets[idx], device=self.device)
            loss = ((self.critic(obs, actions) - targets) ** 2).mean()
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            losses.append(loss.detach())
        return {
            "critic_loss": th.stack(losses).mean() if losses else th.zeros(()),
            "critic_updates": th.tensor(float(n_updates)),
        }

    def samples(
        self,
        record: RollInArrays,
        rollout_buffer: Any,
        policy: Any,
        learner_view: Callable[[np.ndarray], np.ndarray] | None = None,
    ) -> tuple[th.Tensor, Scores, dict[str, th.Tensor]]:
        """Add the latest roll-in, fit the critic, and score the learner at the last ``score_window`` states
        (``learner_view``: as for the Q* experts' :meth:`_QEstimator.samples`)."""
        stats = self.add(record, rollout_buffer)
        stats.update(self.fit(record.use_expert.size))
        idx = self.buffer.latest(self.score_window)
        learner_np = self.buffer.learner_obs[idx]
        learner_obs = th.as_tensor(learner_np if learner_view is None else learner_view(learner_np), device=self.device)
        expert_obs = th.as_tensor(self.buffer.expert_obs[idx], device=self.device)
        scores, score_stats = self.score(policy, expert_obs, learner_obs)
        stats.update(score_stats)
        return learner_obs, scores, stats

    def score(self, policy: Any, expert_obs: th.Tensor, learner_obs: th.Tensor) -> tuple[Scores, dict[str, th.Tensor]]:
        """Score the learner's current policy at the given states with the critic (no gradient)."""
        critic = self.critic
        with th.no_grad():
            distribution = torch_distribution(policy.get_distribution(learner_obs))
            expert_actions = th.as_tensor(self.expert.act(expert_obs.cpu().numpy()), device=self.device)
            if self.discrete:
                probs = distribution.probs
                q = critic.all_actions(expert_obs)
                advantages = expected_advantages(q, probs)
                learner_q = (probs * q).sum(dim=-1)
                expert_q = q.gather(1, expert_actions.long().reshape(-1, 1)).squeeze(1)
                stats = {"q_mean": learner_q.mean(), "q_std": learner_q.std(), "q_gap": (expert_q - learner_q).mean(),
                         "critic_expert_preferred": (expert_q > learner_q).float().mean()}  # fmt: skip
                return DistributionScores(probs, q, self._normalize(advantages, True, -1)), stats
            assert isinstance(self.action_space, spaces.Box)
            k = self.n_action_samples
            actions = distribution.sample((k,))  # (K, N, act_dim)
            log_prob_old = distribution.log_prob(actions).sum(dim=-1)
            n = learner_obs.shape[0]
            repeated_obs = expert_obs.unsqueeze(0).expand(k, *expert_obs.shape).reshape(k * n, -1)
            q = critic(repeated_obs, scale_actions(actions.reshape(k * n, -1), self.action_space)).reshape(k, n)
            advantages = leave_one_out_advantages(q)
            expert_q = critic(expert_obs, scale_actions(expert_actions.float(), self.action_space))
            mean_q = q.mean(dim=0)
            stats = {
                "q_mean": mean_q.mean(),
                "q_std": q.std(),
                "q_gap": (expert_q - mean_q).mean(),
                "critic_action_spread": q.std(dim=0).mean(),
                "critic_expert_preferred": (expert_q > mean_q).float().mean(),
            }
            advantages = self._normalize(advantages, False, 0)
        return SampledScores(actions, log_prob_old, advantages), stats


#: ``value_estimator`` choices for value-only experts
VALUE_ESTIMATORS = ("learned_q", "expert_policy", "td")


def make_estimator(
    expert: Expert,
    *,
    gae_lambda: float = 0.0,
    value_estimator: str = "expert_policy",
    learned_q: dict[str, Any] | None = None,
    **kwargs: Any,
) -> Estimator:
    """The estimator for this kind of expert.

    :param gae_lambda: lambda of the ``td`` estimator
    :param value_estimator: for value-only experts, ``expert_policy`` (:class:`ExpertPolicyEstimator`),
        ``learned_q`` (:class:`LearnedQEstimator`) or ``td``
        (:class:`ValueOnlyEstimator`); Q experts always use their own Q*
    :param learned_q: the keyword arguments of :class:`LearnedQEstimator` beyond the common ones
    """
    if expert.kind == Q_CONTINUOUS:
        return QContinuousEstimator(expert, **kwargs)
    if expert.kind == Q_DISCRETE:
        return QDiscreteEstimator(expert, **kwargs)
    if value_estimator == "learned_q":
        return LearnedQEstimator(expert, **kwargs, **(learned_q or {}))
    if value_estimator == "expert_policy":
        return ExpertPolicyEstimator(expert, **kwargs)
    if value_estimator == "td":
        return ValueOnlyEstimator(expert, gae_lambda=gae_lambda, **kwargs)
    raise ValueError(f"invalid value_estimator={value_estimator!r}; allowed: {', '.join(map(repr, VALUE_ESTIMATORS))}")


def unit_actions(actions: th.Tensor, action_space: spaces.Box) -> th.Tensor:
    """Box actions mapped to [-1, 1] per dimension (the action box's half ranges)."""
    low = th.as_tensor(action_space.low, device=actions.device)
    high = th.as_tensor(action_space.high, device=actions.device)
    return 2.0 * (actions - low) / (high - low) - 1.0


def expert_action_loss(torch_dist: Any, expert_actions: th.Tensor, action_space: spaces.Space) -> th.Tensor:
    """Per state, how far the learner is from the expert's action: Box, the squared distance of the Gaussian mean
    to the action (clipped to the box), in half action ranges, averaged over dimensions; Discrete, the
    cross-entropy with the action."""
    if isinstance(action_space, spaces.Discrete):
        log_probs = torch_dist.logits.log_softmax(dim=-1)
        return -log_probs.gather(-1, expert_actions.long().reshape(-1, 1)).squeeze(-1)
    assert isinstance(action_space, spaces.Box)
    target = unit_actions(expert_actions, action_space).clamp(-1.0, 1.0)  # the action clipped to the box
    return ((unit_actions(torch_dist.mean, action_space) - target) ** 2).mean(dim=-1)


def surrogate_terms(
    scores: Scores,
    idx: th.Tensor,
    distribution: Any,
    clip_range: float,
    action_space: spaces.Space,
    device: th.device,
    expert_bc_margin: float | None = None,
) -> dict[str, th.Tensor]:
    """PPO-clipped surrogate of the AggreVaTeD objective on the scored samples of the states ``idx``.

    With ``expert_bc_margin`` (Q* experts, Box actions), also ``expert_bc``: the squared distance of the
    Gaussian mean to the expert's action (in half action ranges, averaged over dimensions) on the states where the
    expert's action beats the mean Q* of the learner's K samples by more than ``expert_bc_margin`` of their
    standard deviations (zero elsewhere), and ``expert_bc_fraction``, the share of such states. Discrete actions: the
    cross-entropy of the learner's distribution with the expert's action (the best-scored one: argmax Q*, or
    argmax log pi* for a value-only expert scored by its policy) on the states where that action's score beats the
    learner's expected score by more than ``expert_bc_margin`` standard deviations of the scores across actions.
    """
    torch_dist = torch_distribution(distribution)
    bound_penalty = th.zeros((), device=device)
    expert_bc = th.zeros((), device=device)
    expert_bc_fraction = th.zeros((), device=device)
    if isinstance(scores, DistributionScores):  # discrete actions, exact expectation over all actions
        probs_old = scores.probs_old[idx]
        advantages = scores.advantages[idx]
        log_probs = torch_dist.logits.log_softmax(dim=-1)
        log_probs_old = th.log(probs_old.clamp_min(1e-8))
        ratio = th.exp(log_probs - log_probs_old)
        surrogate = clipped_surrogate(advantages, ratio, clip_range)
        # Exact expectation over actions under pi_old: sum_a pi_old(a|s) * clipped ratio term
        policy_loss = -(probs_old * surrogate).sum(dim=-1).mean()
        fraction = (probs_old * ((ratio - 1).abs() > clip_range).float()).sum(dim=-1).mean()
        kl = (probs_old * (log_probs_old - log_probs)).sum(dim=-1).mean()
        if expert_bc_margin is not None:
            q = scores.q[idx]
            best = q.max(dim=-1)
            gap_z = (best.values - (probs_old * q).sum(dim=-1)) / (q.std(dim=-1) + 1e-6)
            weight = (gap_z > expert_bc_margin).float()
            expert_bc = (weight * expert_action_loss(torch_dist, best.indices, action_space)).mean()
            expert_bc_fraction = weight.mean()
    else:
        actions = scores.actions[:, idx]
        advantages = scores.advantages[:, idx]
        if isinstance(action_space, spaces.Discrete):
            log_prob = torch_dist.log_prob(actions.long().squeeze(-1))
        else:
            log_prob = torch_dist.log_prob(actions).sum(dim=-1)
        log_ratio = log_prob - scores.log_prob_old[:, idx]
        ratio = th.exp(log_ratio)
        policy_loss = -clipped_surrogate(advantages, ratio, clip_range).mean()
        fraction = clip_fraction(ratio, clip_range)
        kl = approx_kl(log_ratio)
        if isinstance(action_space, spaces.Box):
            normalized_mean = unit_actions(torch_dist.mean, action_space)
            bound_penalty = (F.relu(normalized_mean.abs() - 1.0) ** 2).sum(dim=-1).mean()
            if expert_bc_margin is not None and scores.expert_actions is not None and scores.expert_gap_z is not None:
                weight = (scores.expert_gap_z[idx] > expert_bc_margin).float()
                expert_bc = (weight * expert_action_loss(torch_dist, scores.expert_actions[idx], action_space)).mean()
                expert_bc_fraction = weight.mean()
    entropy = distribution.entropy()
    entropy_loss = -th.mean(entropy) if entropy is not None else th.zeros((), device=device)
    return {
        "policy_loss": policy_loss,
        "bound_penalty": bound_penalty,
        "entropy_loss": entropy_loss,
        "clip_fraction": fraction,
        "approx_kl": kl,
        "expert_bc": expert_bc,
        "expert_bc_fraction": expert_bc_fraction,
    }
