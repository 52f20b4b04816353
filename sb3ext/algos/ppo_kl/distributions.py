"""KLPPO's distribution helpers: a distribution's parameters as one tensor, and the analytic KL against them."""

from __future__ import annotations

import torch as th
from stable_baselines3.common.distributions import (
    BernoulliDistribution,
    CategoricalDistribution,
    DiagGaussianDistribution,
    Distribution,
    MultiCategoricalDistribution,
)
from torch.distributions import Bernoulli, Categorical, Normal, kl_divergence

KL_DISTRIBUTIONS = (DiagGaussianDistribution, CategoricalDistribution, MultiCategoricalDistribution, BernoulliDistribution)


def distribution_params(distribution: Distribution) -> th.Tensor:
    """The parameters of a batch of SB3 distributions as one ``(batch, P)`` tensor (see :func:`kl_from_params`).

    Gaussian: mean and log-std; categorical(s) and Bernoulli: logits.
    """
    if type(distribution) is DiagGaussianDistribution:  # not its subclass SquashedDiagGaussianDistribution
        normal = distribution.distribution
        return th.cat([normal.mean, normal.stddev.log()], dim=1)
    if isinstance(distribution, CategoricalDistribution):
        return distribution.distribution.logits
    if isinstance(distribution, MultiCategoricalDistribution):
        return th.cat([part.logits for part in distribution.distribution], dim=1)
    if isinstance(distribution, BernoulliDistribution):
        return distribution.distribution.logits
    raise ValueError(
        f"analytic KL is not available for {type(distribution).__name__}; "
        f"supported: {', '.join(cls.__name__ for cls in KL_DISTRIBUTIONS)} (no gSDE)"
    )


def kl_from_params(old_params: th.Tensor, distribution: Distribution) -> th.Tensor:
    """KL(old || new) per sample, summed over action dimensions; ``old_params`` from :func:`distribution_params`."""
    if type(distribution) is DiagGaussianDistribution:
        new = distribution.distribution
        old_mean, old_log_std = old_params.chunk(2, dim=1)
        old = Normal(old_mean, old_log_std.exp())
        return kl_divergence(old, new).sum(dim=1)
    if isinstance(distribution, CategoricalDistribution):
        return kl_divergence(Categorical(logits=old_params), distribution.distribution)
    if isinstance(distribution, MultiCategoricalDistribution):
        parts = th.split(old_params, list(distribution.action_dims), dim=1)
        return th.stack(
            [kl_divergence(Categorical(logits=old), new) for old, new in zip(parts, distribution.distribution, strict=True)],
            dim=1,
        ).sum(dim=1)
    if isinstance(distribution, BernoulliDistribution):
        return kl_divergence(Bernoulli(logits=old_params), distribution.distribution).sum(dim=1)
    distribution_params(distribution)  # raises the explanatory error
    raise AssertionError("unreachable")
