"""AggreVaTeD's advantage estimators, one per kind of expert, and the clipped surrogate they feed.

* :class:`QContinuousEstimator` (SAC, TD3, DDPG, TQC): K fresh learner samples per aggregated state, scored by
  Q*(s, a), with the leave-one-out baseline ``A_k = q_k - mean_{j != k} q_j``;
* :class:`QDiscreteEstimator` (DQN, QR-DQN): the exact expectation over all actions, with the baseline
  ``sum_a pi_old(a|s) Q*(s, a)``;
* :class:`ValueOnlyEstimator` (PPO, A2C): on the steps the learner itself executed in the latest roll-in,
  ``A* = r + gamma V*(s') - V*(s)`` in the expert's reward scale, optionally lambda-weighted.

Each returns the learner observations to update at, typed scores (:class:`SampledScores` or
:class:`DistributionScores`) and statistics to log; :func:`surrogate_terms` turns scores into the loss terms.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import torch as th
from gymnasium import spaces
from torch.nn import functional as F

from sb3ext.algos.aggrevated.buffers import RollInArrays, StateAggregationBuffer
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


def expected_advantages(q: th.Tensor, probs: th.Tensor) -> th.Tensor:
    """A(s, a) = Q*(s, a) - sum_b pi_old(b|s) Q*(s, b): the exact per-state baseline for discrete actions."""
    return q - (probs * q).sum(dim=-1, keepdim=True)


class SampledScores(NamedTuple):
    """Scored actions: K fresh samples per state (Q* experts) or the one executed (value-only experts)."""

    actions: th.Tensor  # (K, N, *action_shape)
    log_prob_old: th.Tensor  # (K, N)
    advantages: th.Tensor  # (K, N)


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
    :param per_state_normalization: divide each state's advantages by its largest |A| (None: the kind's default)
    :param normalize_advantage: divide all advantages by their standard deviation
    :param device: torch device of the learner
    """

    def __init__(
        self,
        expert: Expert,
        n_action_samples: int,
        per_state_normalization: bool | None,
        normalize_advantage: bool,
        device: th.device,
    ):
        self.expert = expert
        self.n_action_samples = n_action_samples
        self.per_state_normalization = per_state_normalization
        self.normalize_advantage = normalize_advantage
        self.device = device


class _QEstimator(Estimator):
    def samples(self, policy: Any, aggregation: StateAggregationBuffer) -> tuple[th.Tensor, Scores, dict[str, th.Tensor]]:
        """Score the learner at every aggregated state (no gradient)."""
        learner_np, expert_np = aggregation.get()
        learner_obs = th.as_tensor(learner_np, device=self.device)
        scores, stats = self.score(policy, th.as_tensor(expert_np, device=self.device), learner_obs)
        return learner_obs, scores, stats

    def score(self, policy: Any, expert_obs: th.Tensor, learner_obs: th.Tensor) -> tuple[Scores, dict[str, th.Tensor]]:
        raise NotImplementedError

    def _normalize(self, advantages: th.Tensor, per_state: bool, scale_axis: int) -> th.Tensor:
        if per_state:
            advantages = advantages / (advantages.abs().amax(dim=scale_axis, keepdim=True) + 1e-8)
        if self.normalize_advantage:
            advantages = advantages / (advantages.std() + 1e-8)
        return advantages


class QContinuousEstimator(_QEstimator):
    """K learner samples per state scored by Q*(s, a), leave-one-out baseline."""

    def score(self, policy: Any, expert_obs: th.Tensor, learner_obs: th.Tensor) -> tuple[Scores, dict[str, th.Tensor]]:
        expert = self.expert
        with th.no_grad():
            distribution = torch_distribution(policy.get_distribution(learner_obs))
            actions = distribution.sample((self.n_action_samples,))  # (K, N, act_dim)
            log_prob_old = distribution.log_prob(actions).sum(dim=-1)
            q = expert.q_values(expert_obs, actions)  # (K, N)
            advantages = leave_one_out_advantages(q)
            expert_actions = th.as_tensor(expert.act(expert_obs.cpu().numpy()), device=self.device, dtype=th.float32)
            expert_q = expert.q_values(expert_obs, expert_actions)
            stats = {
                "q_mean": q.mean(),
                "q_std": q.std(),
                "q_gap": (expert_q - q.mean(dim=0)).mean(),
                "q_twin_spread": expert.q_spread(expert_obs, actions[0]).mean(),
            }
            advantages = self._normalize(advantages, bool(self.per_state_normalization), 0)
        return SampledScores(actions, log_prob_old, advantages), stats


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
            per_state = True if self.per_state_normalization is None else self.per_state_normalization
            advantages = self._normalize(advantages, per_state, -1)
        return DistributionScores(probs, q, advantages), stats


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
        gamma, lam = expert.gamma, float(self.gae_lambda)
        deltas = record.rewards + gamma * next_values_np * (1.0 - record.terminated) - values_np
        advantages = np.zeros_like(deltas)
        running = np.zeros(n_envs, dtype=np.float32)
        for step in reversed(range(n_steps)):
            running = deltas[step] + gamma * lam * (1.0 - record.dones[step]) * running
            advantages[step] = running
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


def make_estimator(expert: Expert, **kwargs: Any) -> Estimator:
    """The estimator for this kind of expert."""
    gae_lambda = kwargs.pop("gae_lambda", 0.0)
    if expert.kind == Q_CONTINUOUS:
        return QContinuousEstimator(expert, **kwargs)
    if expert.kind == Q_DISCRETE:
        return QDiscreteEstimator(expert, **kwargs)
    return ValueOnlyEstimator(expert, gae_lambda=gae_lambda, **kwargs)


def surrogate_terms(
    scores: Scores, idx: th.Tensor, distribution: Any, clip_range: float, action_space: spaces.Space, device: th.device
) -> dict[str, th.Tensor]:
    """PPO-clipped surrogate of the AggreVaTeD objective on the scored samples of the states ``idx``."""
    torch_dist = torch_distribution(distribution)
    bound_penalty = th.zeros((), device=device)
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
            low = th.as_tensor(action_space.low, device=device)
            high = th.as_tensor(action_space.high, device=device)
            normalized_mean = 2.0 * (torch_dist.mean - low) / (high - low) - 1.0
            bound_penalty = (F.relu(normalized_mean.abs() - 1.0) ** 2).sum(dim=-1).mean()
    entropy = distribution.entropy()
    entropy_loss = -th.mean(entropy) if entropy is not None else th.zeros((), device=device)
    return {
        "policy_loss": policy_loss,
        "bound_penalty": bound_penalty,
        "entropy_loss": entropy_loss,
        "clip_fraction": fraction,
        "approx_kl": kl,
    }
