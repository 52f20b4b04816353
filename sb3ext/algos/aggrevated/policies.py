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
    categorical action distribution (the two kinds AggreVaTeD supports). With a shared features extractor the value
    head reads detached features: during imitation it learns on the policy's features without shaping them (the RL
    phase, PPO's ``train``, shares them as PPO does).
    """
    n_policy = len(policy_obs)
    features = policy.extract_features(th.cat([policy_obs, value_obs]))
    if isinstance(features, th.Tensor):  # policy.share_features_extractor
        # a shared features extractor (CnnPolicy's) learns from the imitation loss only: the value loss on the env's
        # returns would swamp it (BallPlatePixels: no learning in 20k steps with it, 256 at 10k without)
        latent_pi = policy.mlp_extractor.forward_actor(features[:n_policy])
        latent_vf = policy.mlp_extractor.forward_critic(features[n_policy:].detach())
    else:
        pi_features, vf_features = features
        latent_pi = policy.mlp_extractor.forward_actor(pi_features[:n_policy])
        latent_vf = policy.mlp_extractor.forward_critic(vf_features[n_policy:])
    mean_actions = policy.action_net(latent_pi)
    action_dist = policy.action_dist
    distribution: Any
    if isinstance(action_dist, DiagGaussianDistribution):
        distribution = action_dist.proba_distribution(mean_actions, policy.log_std)
    elif isinstance(action_dist, CategoricalDistribution):
        distribution = action_dist.proba_distribution(action_logits=mean_actions)
    else:
        raise TypeError(f"AggreVaTeD needs a Gaussian or categorical policy, got {type(action_dist).__name__}")
    return distribution, policy.value_net(latent_vf).flatten()
