"""AggreVaTeD's advantage estimators, one per kind of expert: how the learner's actions are scored.

* :class:`QContinuousEstimator` (SAC, TD3, DDPG, TQC): K fresh learner samples per aggregated state, scored by
  Q*(s, a), with the leave-one-out baseline ``A_k = q_k - mean_{j != k} q_j``;
* :class:`QDiscreteEstimator` (DQN, QR-DQN): the exact expectation over all actions, with the baseline
  ``sum_a pi_old(a|s) Q*(s, a)``;
* :class:`ExpertPolicyEstimator` (PPO, A2C, TRPO: value-only experts): the expert's own policy as its soft
  advantage ``alpha log pi*(a|s)``, scoring K learner samples per state as above; policy-only experts (ARS, a
  :class:`~sb3ext.experts.CallableExpert`) the same way, with a Gaussian (``Box``) or an indicator (``Discrete``)
  centred on their action as the policy (:meth:`~sb3ext.experts.Expert.log_prob`).

Each returns the learner observations to update at, typed scores (:class:`SampledScores` or
:class:`DistributionScores`) and statistics to log; :func:`~sb3ext.algos.aggrevated.losses.surrogate_terms` turns
scores into the loss terms.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import torch as th
from gymnasium import spaces
from stable_baselines3.common.utils import obs_as_tensor

from sb3ext.algos.aggrevated.buffers import StateAggregationBuffer
from sb3ext.experts import POLICY_ONLY, Q_CONTINUOUS, Q_DISCRETE, VALUE_ONLY, Expert


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
    """Advantages of the learner's actions under the expert's cost-to-go, at the aggregated states: one subclass per
    kind of expert, each implementing :meth:`score`.

    :param expert: the expert
    :param n_action_samples: K (continuous actions)
    :param normalize_advantage: divide all advantages by their standard deviation
    :param device: torch device of the learner
    :param expert_cap: Q* experts with ``Box`` actions: score a sample with ``min(Q*(s, a), Q*(s, expert action))``
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

    def samples(
        self, policy: Any, aggregation: StateAggregationBuffer, learner_view: Callable[[Any], Any] | None = None
    ) -> tuple[Any, Scores, dict[str, th.Tensor]]:
        """Score the learner at every aggregated state (no gradient).

        :param learner_view: maps the stored learner observations to what the learner sees now (its current
            observation normalisation); None: they are stored as it sees them
        """
        learner_np, expert_np = aggregation.get()
        if learner_view is not None:
            learner_np = learner_view(learner_np)
        learner_obs = obs_as_tensor(learner_np, self.device)
        scores, stats = self.score(policy, th.as_tensor(expert_np, device=self.device), learner_obs)
        return learner_obs, scores, stats

    def score(self, policy: Any, expert_obs: th.Tensor, learner_obs: Any) -> tuple[Scores, dict[str, th.Tensor]]:
        """Scores of the learner's current policy at the given states, and statistics to log (no gradient)."""
        raise NotImplementedError


def expert_gap_z(expert_score: th.Tensor, sample_scores: th.Tensor) -> th.Tensor:
    """Per state, by how many standard deviations of the K samples' scores (K, N) the expert's action's score (N,)
    beats their mean."""
    return (expert_score - sample_scores.mean(dim=0)) / (sample_scores.std(dim=0) + 1e-6)


class QContinuousEstimator(Estimator):
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


class QDiscreteEstimator(Estimator):
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


class ExpertPolicyEstimator(Estimator):
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
                log_probs = th.log(probs.clamp_min(1e-8))
                stats = {
                    "q_mean": learner_q.mean(),
                    "q_std": learner_q.std(),
                    "q_gap": (q.max(dim=-1).values - learner_q).mean(),
                    "expert_kl": (probs * (log_probs - q)).sum(dim=-1).mean(),
                }
                # A value-only expert's soft advantage with the learner's own entropy at the expert's temperature:
                # E_pi[log pi* - log pi] = -KL(pi || pi*), maximised by pi = pi* at every state (log pi* alone is
                # maximised by a one-hot policy, which a softmax cannot leave: its gradient vanishes there).
                # A policy-only expert's indicator has no temperature to match: it is scored as it is.
                soft = q - log_probs if expert.kind == VALUE_ONLY else q
                return DistributionScores(probs, q, self._normalize(expected_advantages(soft, probs), True, -1)), stats
            actions = distribution.sample((self.n_action_samples,))  # (K, N, act_dim)
            log_prob_old = distribution.log_prob(actions).sum(dim=-1)
            q = expert.log_prob(expert_obs, actions)  # (K, N)
            expert_actions = th.as_tensor(expert.act(expert_obs.cpu().numpy()), device=self.device, dtype=th.float32)
            expert_q = expert.log_prob(expert_obs, expert_actions)
            stats = {"q_mean": q.mean(), "q_std": q.std(), "q_gap": (expert_q - q.mean(dim=0)).mean()}
            advantages = self._normalize(leave_one_out_advantages(q), False, 0)
        # the expert's action and its gap let expert_bc_coef pull the mean to it, as with a Q* expert
        return SampledScores(actions, log_prob_old, advantages, expert_actions, expert_gap_z(expert_q, q)), stats


def make_estimator(expert: Expert, action_space: spaces.Space, clones_expert: bool = False, **kwargs: Any) -> Estimator:
    """The estimator for this kind of expert: its own Q* (continuous or discrete actions), or, for a value-only or
    policy-only expert, its policy's log-probabilities. An expert that cannot score this action space is refused; a
    policy-only expert gets a warning unless the learner clones anyway (``clones_expert``)."""
    wanted = Q_DISCRETE if isinstance(action_space, spaces.Discrete) else Q_CONTINUOUS
    if expert.kind not in (wanted, VALUE_ONLY, POLICY_ONLY):
        raise ValueError(
            f"Expert {expert.source} ({expert.algo_name}) cannot drive AggreVaTeD on this action space: "
            f"{'a DQN or QR-DQN' if wanted == Q_DISCRETE else 'a SAC, TD3, DDPG or TQC'} expert "
            "with a Q-function, a PPO / A2C expert with a value function, or a policy-only expert is needed"
        )
    if expert.kind == POLICY_ONLY and not clones_expert:
        warnings.warn(
            f"Expert {expert.source} ({expert.algo_name}) has no critic: AggreVaTeD scores the learner's actions by "
            "their closeness to the expert's action (a Gaussian centred on it), a cloning signal with no cost-to-go; "
            "it can reach the expert, not pass it (docs/algos/aggrevated.md, How it works)",
            UserWarning,
            stacklevel=4,
        )
    if expert.kind == Q_CONTINUOUS:
        return QContinuousEstimator(expert, **kwargs)
    if expert.kind == Q_DISCRETE:
        return QDiscreteEstimator(expert, **kwargs)
    return ExpertPolicyEstimator(expert, **kwargs)
