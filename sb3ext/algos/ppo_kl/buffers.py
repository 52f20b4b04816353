"""KLPPO's rollout buffer: keeps the parameters of the distribution that collected each sample."""

from __future__ import annotations

from collections.abc import Generator
from typing import NamedTuple

import numpy as np
import torch as th
from stable_baselines3.common.buffers import RolloutBuffer
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.vec_env import VecNormalize

from sb3ext.algos.ppo_kl.distributions import distribution_params


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
    ``old_distribution_params`` for an analytic KL(old || new) (:func:`sb3ext.algos.ppo_kl.distributions.kl_from_params`).
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
