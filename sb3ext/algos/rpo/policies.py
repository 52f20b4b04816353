"""Policies of RPO: SB3's actor-critic policies whose action mean is perturbed by U(-alpha, alpha) in the update."""

from __future__ import annotations

from typing import Any

import torch as th
from stable_baselines3.common.distributions import DiagGaussianDistribution, Distribution
from stable_baselines3.common.policies import ActorCriticCnnPolicy, ActorCriticPolicy, MultiInputActorCriticPolicy
from torch.distributions import Normal


class RPOMixin:
    """Adds RPO's perturbation to an SB3 actor-critic policy.

    ``evaluate_actions`` (the update's log-probabilities, entropy and values) evaluates the actions under
    N(mu(s) + z, sigma) with z ~ U(-rpo_alpha, rpo_alpha) drawn independently per sample and action
    dimension from torch's generator; acting (``forward``, ``predict``) is unchanged. ``rpo_alpha = 0``
    draws nothing and is exactly the base policy.
    """

    rpo_alpha: float = 0.0
    _perturb_mean: bool = False

    def evaluate_actions(self, obs: Any, actions: th.Tensor) -> tuple[th.Tensor, th.Tensor, th.Tensor | None]:
        self._perturb_mean = self.rpo_alpha > 0
        try:
            return super().evaluate_actions(obs, actions)  # type: ignore[misc]
        finally:
            self._perturb_mean = False

    def _get_action_dist_from_latent(self, latent_pi: th.Tensor) -> Distribution:
        distribution = super()._get_action_dist_from_latent(latent_pi)  # type: ignore[misc]
        if self._perturb_mean:
            assert isinstance(distribution, DiagGaussianDistribution)
            normal = distribution.distribution
            noise = th.empty_like(normal.mean).uniform_(-self.rpo_alpha, self.rpo_alpha)
            distribution.distribution = Normal(normal.mean + noise, normal.stddev)
        return distribution

    def _get_constructor_parameters(self) -> dict[str, Any]:
        data = super()._get_constructor_parameters()  # type: ignore[misc]
        data["rpo_alpha"] = self.rpo_alpha
        return data


class RPOPolicy(RPOMixin, ActorCriticPolicy):
    def __init__(self, *args: Any, rpo_alpha: float = 0.0, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.rpo_alpha = rpo_alpha


class RPOCnnPolicy(RPOMixin, ActorCriticCnnPolicy):
    def __init__(self, *args: Any, rpo_alpha: float = 0.0, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.rpo_alpha = rpo_alpha


class RPOMultiInputPolicy(RPOMixin, MultiInputActorCriticPolicy):
    def __init__(self, *args: Any, rpo_alpha: float = 0.0, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.rpo_alpha = rpo_alpha


MlpPolicy = RPOPolicy
CnnPolicy = RPOCnnPolicy
MultiInputPolicy = RPOMultiInputPolicy
