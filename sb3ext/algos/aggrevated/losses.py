"""AggreVaTeD's loss terms: the clipped surrogate on the estimators' scores, the bound penalty, the pull toward the
expert's action, DAgger's cloning term on its memory, and the optimiser step that applies them."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch as th
from gymnasium import spaces
from stable_baselines3.common.utils import obs_as_tensor
from torch.nn import functional as F

from sb3ext.algos.aggrevated.buffers import ExpertActionMemory, select
from sb3ext.algos.aggrevated.estimators import DistributionScores, Scores, torch_distribution
from sb3ext.common.ppo import approx_kl, clip_fraction, clipped_surrogate


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


@dataclass(frozen=True)
class SurrogateTerms:
    """The loss terms of one minibatch (scalar tensors); ``clip_fraction`` and ``approx_kl`` are for logging and the
    trust region."""

    policy_loss: th.Tensor
    bound_penalty: th.Tensor  # the Gaussian mean outside the action bounds
    entropy_loss: th.Tensor
    clip_fraction: th.Tensor
    approx_kl: th.Tensor
    expert_bc: th.Tensor  # the pull toward the expert's action
    expert_bc_fraction: th.Tensor  # the share of states it pulled at


@dataclass(frozen=True)
class LossWeights:
    """The weights of an iteration's loss terms. Cloning (``imitate``: ``MatchedDAgger``, or a critic found
    untrustworthy) drops the critic's surrogate and pulls toward the expert's action on every state, with a weight of
    at least 1; otherwise the pull acts at ``expert_bc_coef`` on the states beyond ``expert_bc_margin`` (None: off)."""

    policy: float
    bound: float
    entropy: float
    expert_bc: float
    expert_bc_margin: float | None

    @classmethod
    def of(cls, imitate: bool, expert_bc_coef: float, expert_bc_margin: float, bound: float, entropy: float) -> LossWeights:
        if imitate:
            return cls(0.0, bound, entropy, max(float(expert_bc_coef), 1.0), -math.inf)
        bc_coef = float(expert_bc_coef)
        return cls(1.0, bound, entropy, bc_coef, float(expert_bc_margin) if bc_coef > 0 else None)

    def total(self, terms: SurrogateTerms) -> th.Tensor:
        """The weighted sum of the policy's terms (the value loss and any extra term are added by the caller)."""
        return (
            self.policy * terms.policy_loss
            + self.bound * terms.bound_penalty
            + self.entropy * terms.entropy_loss
            + self.expert_bc * terms.expert_bc
        )


def memory_cloning_loss(
    policy: Any, memory: ExpertActionMemory, batch_size: int, view: Callable[[Any], Any] | None, action_space: spaces.Space
) -> th.Tensor:
    """DAgger's term: cloning the expert's actions on a minibatch of ``batch_size`` states drawn from its memory of
    visited states (``view``: what the learner sees of the stored observations now; None: as stored)."""
    idx = th.randint(memory.size, (min(batch_size, memory.size),)).numpy()
    learner_obs, expert_actions = memory.stored()
    obs = select(learner_obs, idx) if view is None else view(select(learner_obs, idx))
    distribution = policy.get_distribution(obs_as_tensor(obs, policy.device))
    target = th.as_tensor(expert_actions[idx], device=policy.device)
    return expert_action_loss(torch_distribution(distribution), target, action_space).mean()


def surrogate_terms(
    scores: Scores,
    idx: th.Tensor,
    distribution: Any,
    clip_range: float,
    action_space: spaces.Space,
    device: th.device,
    expert_bc_margin: float | None = None,
) -> SurrogateTerms:
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
    return SurrogateTerms(policy_loss, bound_penalty, entropy_loss, fraction, kl, expert_bc, expert_bc_fraction)


def optimizer_step(
    policy: Any, optimizer: th.optim.Optimizer, loss: th.Tensor, groups: Sequence[list[th.nn.Parameter]],
    max_grad_norm: float, log_std_floor: th.Tensor | None,
) -> None:  # fmt: skip
    """One step of ``optimizer`` on ``loss``. The actor's and the critic's gradients (``groups``) are clipped
    separately: the value loss is on the env's reward scale and would otherwise shrink the policy gradient to nothing.
    The Gaussian std stays at or above its floor."""
    optimizer.zero_grad()
    loss.backward()
    for group in groups:
        th.nn.utils.clip_grad_norm_(group, max_grad_norm, foreach=True)
    optimizer.step()
    if log_std_floor is not None:
        with th.no_grad():
            policy.log_std.copy_(th.maximum(policy.log_std, log_std_floor))
