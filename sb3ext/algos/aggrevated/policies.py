"""AggreVaTeD's policies (SB3's actor-critic policies) and one pass of them over two batches."""

from __future__ import annotations

from typing import Any

import torch as th
from stable_baselines3.common.distributions import CategoricalDistribution, DiagGaussianDistribution
from stable_baselines3.common.policies import ActorCriticCnnPolicy, ActorCriticPolicy

MlpPolicy = ActorCriticPolicy
CnnPolicy = ActorCriticCnnPolicy


def distribution_and_values(policy: ActorCriticPolicy, policy_obs: th.Tensor, value_obs: th.Tensor) -> tuple[Any, th.Tensor]:
    """The policy's distribution at ``policy_obs`` and its values at ``value_obs``, in one pass of the networks.

    The same computation as SB3's ``evaluate_actions`` on the concatenated batch: one call of the features
    extractor and of the MLP extractor instead of two of each (these small networks are dispatch-bound).
    The distribution is built through the public ``proba_distribution`` of the policy's Gaussian or
    categorical action distribution (the two kinds AggreVaTeD supports).
    """
    n_policy = len(policy_obs)
    features = policy.extract_features(th.cat([policy_obs, value_obs]))
    if policy.share_features_extractor:
        latent_pi, latent_vf = policy.mlp_extractor(features)
    else:
        pi_features, vf_features = features
        latent_pi = policy.mlp_extractor.forward_actor(pi_features)
        latent_vf = policy.mlp_extractor.forward_critic(vf_features)
    mean_actions = policy.action_net(latent_pi[:n_policy])
    action_dist = policy.action_dist
    distribution: Any
    if isinstance(action_dist, DiagGaussianDistribution):
        distribution = action_dist.proba_distribution(mean_actions, policy.log_std)
    elif isinstance(action_dist, CategoricalDistribution):
        distribution = action_dist.proba_distribution(action_logits=mean_actions)
    else:
        raise TypeError(f"AggreVaTeD needs a Gaussian or categorical policy, got {type(action_dist).__name__}")
    return distribution, policy.value_net(latent_vf[n_policy:]).flatten()
