"""TanhPPO's distribution: a tanh-squashed Gaussian over pre-tanh samples."""

from __future__ import annotations

import math
from typing import Any, TypeVar

import torch as th
from stable_baselines3.common.distributions import Distribution
from torch import nn
from torch.distributions import Normal
from torch.nn import functional as F


def log_one_minus_tanh_squared(u: th.Tensor) -> th.Tensor:
    """log(1 - tanh(u)^2), exact and stable for any u (no epsilon): 2 (log 2 - u - softplus(-2u))."""
    return 2.0 * (math.log(2.0) - u - F.softplus(-2.0 * u))


SelfTanh = TypeVar("SelfTanh", bound="TanhDiagGaussianDistribution")


class TanhDiagGaussianDistribution(Distribution):
    """Gaussian with a state-dependent diagonal covariance, squashed by tanh, over **pre-tanh** samples.

    Samples, modes and ``log_prob`` arguments are pre-tanh values u (what the rollout buffer stores); the
    action is a = tanh(u) in (-1, 1), mapped to the env's bounds by the policy. With u ~ N(mu, sigma):

        log pi(a) = log N(u; mu, sigma) - sum_i log(1 - tanh(u_i)^2)

    computed from u itself, so there is no atanh of a saturated action and no epsilon. The squashed
    distribution has no closed-form entropy: :meth:`entropy` is the one-sample (reparameterised, so
    differentiable) estimate H(a) = H(u) + E[sum_i log(1 - tanh(u_i)^2)].

    :param action_dim: dimension of the action space
    :param log_std_min: lower clamp of the network's log standard deviation
    :param log_std_max: upper clamp of the network's log standard deviation
    """

    def __init__(self, action_dim: int, log_std_min: float = -5.0, log_std_max: float = 1.0):
        super().__init__()
        if not log_std_min < log_std_max:
            raise ValueError(f"log_std_min={log_std_min} must be smaller than log_std_max={log_std_max}")
        self.action_dim = action_dim
        self.log_std_min = log_std_min
        self.log_std_max = log_std_max
        self.gaussian: Normal

    def proba_distribution_net(self, latent_dim: int) -> nn.Module:  # type: ignore[override]
        """One linear layer giving the mean and the (unclamped) log-std of every action dimension."""
        return nn.Linear(latent_dim, 2 * self.action_dim)

    def proba_distribution(self: SelfTanh, mean_and_log_std: th.Tensor) -> SelfTanh:  # type: ignore[override]
        mean, log_std = mean_and_log_std.chunk(2, dim=-1)
        log_std = th.clamp(log_std, self.log_std_min, self.log_std_max)
        self.gaussian = Normal(mean, log_std.exp())
        self.distribution = self.gaussian
        return self

    def log_prob(self, gaussian_actions: th.Tensor) -> th.Tensor:
        correction = log_one_minus_tanh_squared(gaussian_actions).sum(dim=-1)
        return self.gaussian.log_prob(gaussian_actions).sum(dim=-1) - correction

    def entropy(self) -> th.Tensor:
        sample = self.gaussian.rsample()
        return self.gaussian.entropy().sum(dim=-1) + log_one_minus_tanh_squared(sample).sum(dim=-1)

    def sample(self) -> th.Tensor:
        return self.gaussian.sample()

    def mode(self) -> th.Tensor:
        return self.gaussian.mean  # the deterministic action is tanh(mean), as in SAC

    def actions_from_params(self, mean_and_log_std: th.Tensor, deterministic: bool = False, **kwargs: Any) -> th.Tensor:
        self.proba_distribution(mean_and_log_std)
        return self.get_actions(deterministic=deterministic)

    def log_prob_from_params(self, mean_and_log_std: th.Tensor, **kwargs: Any) -> tuple[th.Tensor, th.Tensor]:
        actions = self.actions_from_params(mean_and_log_std)
        return actions, self.log_prob(actions)

    @property
    def std(self) -> th.Tensor:
        return self.gaussian.stddev
