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

from typing import Any

import numpy as np
import torch as th

from sb3ext.algos.aggrevated.estimators import SampledScores


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
