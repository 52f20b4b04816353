"""The reinforcement term that lets AggreVaTeD pass its expert (``rl_coef``).

Imitation stops at the expert's level. This term scores the learner's own sampled roll-in actions by what they led
to, with the expert's value as the critic: the GAE(λ) advantage on V*,
``A_t = sum_k (gamma lambda)^k delta_{t+k}``, ``delta_t = r_t + gamma V*(s_{t+1}) - V*(s_t)``, in the expert's
reward scale and discount (THOR, Sun et al. 2018: a λ below 1 truncates the learner's horizon where V* takes over).
V* is trained and frozen, so the term needs no value head of the learner's, which at the hand-over knows nothing
of the learner's returns.

The imitation term is weaned off as the learner's returns approach what V* promises at the episodes' first states
(QDagger's weight, Agarwal et al. 2022: ``w = 1 - R_learner / R_expert``, in [0, 1]), measured on the roll-in's own
episodes (:meth:`~sb3ext.algos.aggrevated.rollin.PromisedReturns.shortfall`), and this term takes its place: the
imitation's pass steps at ``w`` and this term's at ``rl_coef * (1 - w)`` times the learning rate (as step sizes: a
loss weight does not scale Adam's steps). Far below the expert, the learner only imitates, as without it.
"""

from __future__ import annotations

import time
import warnings
from typing import Any

import numpy as np
import torch as th

from sb3ext.algos.aggrevated.buffers import batch_size_of, select
from sb3ext.algos.aggrevated.estimators import SampledScores
from sb3ext.algos.aggrevated.losses import optimizer_step, surrogate_terms
from sb3ext.algos.aggrevated.metrics import ImitationMetrics
from sb3ext.algos.aggrevated.policies import log_std_floor_of
from sb3ext.common.ppo import actor_critic_parameters, kl_exceeded
from sb3ext.experts import POLICY_ONLY, Expert


def rl_target_kl(target_kl: float | None, n_samples: int, batch_size: int) -> float | None:
    """The KL limit of the term's passes over one roll-in of ``n_samples`` steps: ``target_kl``, the trust region of
    a pass over ``batch_size`` states, times ``n_samples / batch_size`` where the roll-in is smaller. The term's
    gradient on one roll-in is mostly noise (the gradients of two halves of it have a mean cosine of 0.00-0.02 on
    Humanoid and BipedalWalker), and Adam's steps are as long on noise as on signal: a pass over fewer samples moved
    the learner as far on less evidence (Humanoid: at the limit on 3 iterations of 4)."""
    if target_kl is None:
        return None
    return float(target_kl) * min(1.0, n_samples / batch_size)


class ShapedReturns:
    """The expert's values along one roll-in, and the learner's own sampled steps among them.

    :param n_steps: steps per env of the roll-in
    :param n_envs: number of envs
    :param gamma: the expert's discount factor
    :param gae_lambda: λ of the advantage (0: the one-step ``delta_t``; 1: the learner's whole return to the
        roll-in's end, then V*)
    """

    def __init__(self, n_steps: int, n_envs: int, gamma: float, gae_lambda: float):
        self.gamma = float(gamma)
        self.gae_lambda = float(gae_lambda)
        shape = (n_steps, n_envs)
        self.values = np.zeros(shape, dtype=np.float64)  # V*(s_t)
        self.rewards = np.zeros(shape, dtype=np.float64)  # r_t, the expert's reward scale
        self.next_values = np.zeros(shape, dtype=np.float64)  # V*(s_{t+1}) where the episode goes on or is cut
        self.dones = np.zeros(shape, dtype=bool)
        self.sampled = np.zeros(shape, dtype=bool)  # the learner's own sample was executed
        self.step = 0
        self.last_values: np.ndarray | None = None  # V* after the roll-in's last step (set when it ends)

    def add(self, values: np.ndarray, sampled: np.ndarray) -> None:
        """The state of the current step: its V* and whether the learner's sample acts there."""
        self.values[self.step] = values
        self.sampled[self.step] = sampled

    def observe(self, rewards: np.ndarray, dones: np.ndarray, truncated_values: np.ndarray) -> None:
        """The step's rewards (the expert's scale) and ends; ``truncated_values``: V* of the last state of episodes
        cut by a time limit (0 where an episode fell or goes on)."""
        self.rewards[self.step] = rewards
        self.dones[self.step] = dones
        self.next_values[self.step] = truncated_values
        self.step += 1

    def advantages(self, last_values: np.ndarray) -> np.ndarray:
        """GAE(λ) on V* over the roll-in, shape ``(n_steps, n_envs)``; ``last_values``: V* after its last step."""
        n_steps = self.step
        next_values = self.next_values[:n_steps].copy()
        # a step whose episode goes on is followed by the next step's state
        going_on = ~self.dones[:n_steps]
        following = np.concatenate([self.values[1:n_steps], last_values[None]], axis=0)
        next_values[going_on] = following[going_on]
        deltas = self.rewards[:n_steps] + self.gamma * next_values - self.values[:n_steps]
        advantages = np.zeros_like(deltas)
        running = np.zeros(deltas.shape[1])
        for t in reversed(range(n_steps)):
            running = deltas[t] + self.gamma * self.gae_lambda * going_on[t] * running
            advantages[t] = running
        return advantages


def shaped_scores(
    shaped: ShapedReturns, rollout_buffer: Any, device: th.device
) -> tuple[Any, SampledScores, dict[str, th.Tensor]] | None:
    """The learner's sampled roll-in steps, scored by :meth:`ShapedReturns.advantages` (one sample per state, centred
    and scaled to unit standard deviation), as the clipped surrogate takes them; None with fewer than 2 such steps.

    :param rollout_buffer: the roll-in's SB3 ``RolloutBuffer`` (or ``DictRolloutBuffer``), once flattened env by env
        by its ``get()`` (``swap_and_flatten``)
    """
    if not rollout_buffer.generator_ready:
        raise RuntimeError("shaped_scores reads the rollout buffer once its get() has flattened it")
    if shaped.last_values is None:
        raise RuntimeError("shaped_scores needs V* after the roll-in's last step (ShapedReturns.last_values)")
    advantages = shaped.advantages(shaped.last_values)

    def flat(array: np.ndarray) -> np.ndarray:  # (n_steps, n_envs) in the buffer's order: env by env
        return array.swapaxes(0, 1).reshape(-1)

    mask = flat(shaped.sampled[: shaped.step])
    if mask.sum() < 2:
        return None
    idx = np.flatnonzero(mask)  # in the roll-in's order (SB3's get() would permute the steps)
    stored = rollout_buffer.observations
    obs = (
        {k: rollout_buffer.to_torch(v[idx]) for k, v in stored.items()}
        if isinstance(stored, dict)
        else rollout_buffer.to_torch(stored[idx])
    )
    actions = rollout_buffer.to_torch(rollout_buffer.actions[idx].astype(np.float32, copy=False))
    old_log_prob = rollout_buffer.to_torch(rollout_buffer.log_probs[idx].flatten())
    adv = th.as_tensor(flat(advantages)[mask], device=device, dtype=th.float32)
    stats = {"rl_advantage_mean": adv.mean(), "rl_advantage_std": adv.std(), "rl_steps": th.tensor(float(len(adv)))}
    adv = (adv - adv.mean()) / (adv.std() + 1e-8)  # centred and scaled, as PPO's
    return obs, SampledScores(actions[None], old_log_prob[None], adv[None]), stats


class ReinforcementTerm:
    """The owner of the term (``rl_coef``): the expert's values along each roll-in (:class:`ShapedReturns`, fed by
    the roll-in), the term's passes over the learner's own sampled steps, and its own Adam over the actor (not saved).

    The algorithm asks it for the roll-in's :class:`ShapedReturns` (:meth:`begin`), and lets it run its passes first
    in each update (:meth:`update`), which returns the weight of the imitation's steps.

    :param rl_coef: the term's step size, in learning rates (0: off)
    :param gae_lambda: λ of its advantage
    """

    def __init__(self, rl_coef: float, gae_lambda: float):
        self.rl_coef = float(rl_coef)
        self.gae_lambda = float(gae_lambda)
        self.on = self.rl_coef > 0
        self.returns: ShapedReturns | None = None  # V* along the latest roll-in
        self.optimizer: th.optim.Optimizer | None = None

    def attach(self, expert: Expert, clones_expert: bool) -> None:
        """The term needs V*: off for an expert without one (with a warning) and for cloning (``MatchedDAgger``)."""
        if self.rl_coef > 0 and expert.kind == POLICY_ONLY and not clones_expert:
            warnings.warn(
                f"rl_coef={self.rl_coef} needs the expert's value (V*) to score the learner's own steps, and expert "
                f"{expert.source} ({expert.algo_name}) is policy-only: the term is off, the learner imitates only",
                stacklevel=4,
            )
        self.on = self.rl_coef > 0 and not clones_expert and expert.kind != POLICY_ONLY

    def begin(self, n_steps: int, n_envs: int, expert: Expert) -> ShapedReturns | None:
        """The values the roll-in about to start fills in (None: the term is off)."""
        self.returns = ShapedReturns(n_steps, n_envs, expert.gamma, self.gae_lambda) if self.on else None
        return self.returns

    def update(
        self, model: Any, shortfall: float | None, imitating: bool, clip_range: float, metrics: ImitationMetrics,
        timings: dict[str, float],
    ) -> tuple[float, dict[str, Any]]:  # fmt: skip
        """The term's passes over the latest roll-in, before the imitation's (``model``: the algorithm, whose policy,
        rollout buffer and settings they use). Returns the imitation's weight w (1: the term stays out) and what to
        log: QDagger's ``w = 1 - R_learner / R_expert`` on the roll-in's latest episodes, in [0, 1], from
        ``shortfall``, the relative shortfall of their returns from V*(s0)
        (:meth:`~sb3ext.algos.aggrevated.rollin.PromisedReturns.shortfall`; None until enough episodes have
        finished: w = 1)."""
        shaped = None
        if self.returns is not None and self.returns.last_values is not None and not imitating:
            shaped = shaped_scores(self.returns, model.rollout_buffer, model.device)
        if shaped is None:
            return 1.0, {}
        weight = 1.0 if shortfall is None else float(np.clip(shortfall, 0.0, 1.0))
        start = time.perf_counter()
        if weight < 1.0:
            self._passes(model, shaped[0], shaped[1], self.rl_coef * (1.0 - weight), clip_range, metrics)
        timings["rl_update_s"] = time.perf_counter() - start
        return weight, {**shaped[2], "imitation_weight": weight}

    def _passes(
        self, model: Any, obs: Any, scores: SampledScores, step_scale: float, clip_range: float, metrics: ImitationMetrics
    ) -> None:
        """``n_epochs`` over the learner's sampled roll-in steps in minibatches of ``batch_size``, as PPO makes them,
        with the bound penalty and a KL stop of their own (:func:`rl_target_kl`), at ``step_scale`` times the
        learning rate. They have their own Adam over the actor: in the imitation's, their momentum carried on through
        the imitation's steps (tens of them, about ten times the term's own move, even with the imitation's loss
        weighted 0)."""
        policy = model.policy
        actor = actor_critic_parameters(policy)[:1]  # the actor's parameters, one group
        floor = log_std_floor_of(policy, model.action_space)
        if self.optimizer is None:
            self.optimizer = policy.optimizer_class(actor[0], lr=1.0, **policy.optimizer_kwargs)
        for group in self.optimizer.param_groups:
            group["lr"] = model.lr_schedule(model._current_progress_remaining) * step_scale
        n_samples = batch_size_of(obs)
        target_kl = rl_target_kl(model.target_kl, model.n_steps * model.n_envs, model.batch_size)
        for epoch in range(model.n_epochs):
            permutation = th.randperm(n_samples, device=model.device)
            for start in range(0, n_samples, model.batch_size):
                idx = permutation[start : start + model.batch_size]
                distribution = policy.get_distribution(select(obs, idx))
                terms = surrogate_terms(scores, idx, distribution, clip_range, model.action_space, model.device)
                if kl_exceeded(terms.approx_kl.item(), target_kl):
                    if model.verbose >= 1:
                        print(f"Early stopping the reinforcement term at epoch {epoch}: max kl {terms.approx_kl.item():.3f}")
                    return
                loss = terms.policy_loss + model.bound_coef * terms.bound_penalty
                optimizer_step(policy, self.optimizer, loss, actor, model.max_grad_norm, floor)
                metrics.rl_loss.append(terms.policy_loss.detach())
                metrics.rl_approx_kl.append(terms.approx_kl.detach())
