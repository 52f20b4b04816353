"""Buffers shared by sb3ext algorithms."""

from __future__ import annotations

from collections.abc import Generator
from typing import NamedTuple

import numpy as np
import torch as th
from stable_baselines3.common.buffers import RolloutBuffer
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.vec_env import VecNormalize

from sb3ext.common.distributions import distribution_params


class StateAggregationBuffer:
    """Ring buffer of the states visited by the last ``window`` roll-ins (the "Aggre" of AggreVaTeD).

    Each state is kept twice: as the learner observes it and as the expert observes it (after the
    expert's own frozen observation normalisation). Q* labels do not depend on the learner, so the
    stored states can be re-scored with fresh samples of the current policy at every iteration.

    :param window: number of roll-ins kept
    :param states_per_rollout: states added per roll-in (``n_steps * n_envs``)
    :param learner_shape: shape of one learner observation
    :param expert_shape: shape of one expert observation
    """

    def __init__(self, window: int, states_per_rollout: int, learner_shape: tuple[int, ...], expert_shape: tuple[int, ...]):
        self.window = window
        self.capacity = window * states_per_rollout
        self.learner_obs = np.zeros((self.capacity, *learner_shape), dtype=np.float32)
        self.expert_obs = np.zeros((self.capacity, *expert_shape), dtype=np.float32)
        self.pos = 0
        self.size = 0

    def add(self, learner_obs: np.ndarray, expert_obs: np.ndarray) -> None:
        """Add a batch of states (one per env)."""
        n = len(learner_obs)
        idx = (self.pos + np.arange(n)) % self.capacity
        self.learner_obs[idx] = learner_obs
        self.expert_obs[idx] = expert_obs
        self.pos = int((self.pos + n) % self.capacity)
        self.size = min(self.size + n, self.capacity)

    def get(self) -> tuple[np.ndarray, np.ndarray]:
        """All stored states: (learner observations, expert observations)."""
        return self.learner_obs[: self.size], self.expert_obs[: self.size]


class DistributionRolloutBufferSamples(NamedTuple):
    observations: th.Tensor
    actions: th.Tensor
    old_values: th.Tensor
    old_log_prob: th.Tensor
    advantages: th.Tensor
    returns: th.Tensor
    old_distribution_params: th.Tensor


class DistributionRolloutBuffer(RolloutBuffer):
    """SB3's ``RolloutBuffer`` that also holds the parameters of the policy's action distribution per sample.

    :meth:`store_distributions` fills them from the policy that collected the rollout (call it before the
    first gradient step: the policy is then unchanged since collection), and the samples carry them as
    ``old_distribution_params`` for an analytic KL(old || new) (:func:`sb3ext.common.distributions.kl_from_params`).
    """

    old_distribution_params: np.ndarray

    def reset(self) -> None:
        super().reset()
        self.old_distribution_params = np.zeros((self.buffer_size, self.n_envs, 0), dtype=np.float32)

    def store_distributions(self, policy: ActorCriticPolicy, chunk: int = 4096) -> None:
        assert self.full and not self.generator_ready, "call store_distributions once, on a full buffer, before get()"
        observations = self.observations.reshape(-1, *self.obs_shape)
        params = []
        with th.no_grad():
            for start in range(0, len(observations), chunk):
                obs = self.to_torch(observations[start : start + chunk])
                params.append(distribution_params(policy.get_distribution(obs)).cpu().numpy())
        flat = np.concatenate(params).astype(np.float32)
        self.old_distribution_params = flat.reshape(self.buffer_size, self.n_envs, -1)

    def get(self, batch_size: int | None = None) -> Generator[DistributionRolloutBufferSamples, None, None]:  # type: ignore[override]
        if not self.generator_ready:
            self.old_distribution_params = self.swap_and_flatten(self.old_distribution_params)
        yield from super().get(batch_size)  # type: ignore[misc]

    def _get_samples(  # type: ignore[override]
        self, batch_inds: np.ndarray, env: VecNormalize | None = None
    ) -> DistributionRolloutBufferSamples:
        samples = super()._get_samples(batch_inds, env)
        return DistributionRolloutBufferSamples(*samples, self.to_torch(self.old_distribution_params[batch_inds]))
