"""AggreVaTeD's policies (SB3's actor-critic policies) and one pass of them over two batches."""

from __future__ import annotations

from typing import Any

import torch as th
from gymnasium import spaces
from stable_baselines3.common.distributions import CategoricalDistribution, DiagGaussianDistribution
from stable_baselines3.common.policies import ActorCriticCnnPolicy, ActorCriticPolicy, MultiInputActorCriticPolicy

MlpPolicy = ActorCriticPolicy
CnnPolicy = ActorCriticCnnPolicy
MultiInputPolicy = MultiInputActorCriticPolicy  # Dict observations: camera frames and joint readings

#: floor of the Gaussian policy's standard deviation, as a fraction of the half action range (0.3 and 0.02 were
#: measured no better: docs/algos/aggrevated_history.md)
MIN_STD = 0.1


def log_std_floor_of(policy: ActorCriticPolicy, action_space: spaces.Space) -> th.Tensor | None:
    """log(MIN_STD * half action range) for the policy's state-independent log-std, if it has one."""
    log_std = getattr(policy, "log_std", None)
    if isinstance(log_std, th.nn.Parameter) and isinstance(action_space, spaces.Box):
        half_range = th.as_tensor((action_space.high - action_space.low) / 2.0, device=log_std.device)
        return th.log(MIN_STD * half_range).to(log_std.dtype)
    return None


def distribution_and_values(policy: ActorCriticPolicy, policy_obs: Any, value_obs: Any) -> tuple[Any, th.Tensor]:
    """The policy's distribution at ``policy_obs`` and its values at ``value_obs``.

    The same computation as SB3's ``evaluate_actions`` on both batches. With separate features extractors (MLP
    policies by default) in one pass of the networks on the concatenated batch: one call of each instead of two
    (these small networks are dispatch-bound). The distribution is built through the public
    ``proba_distribution`` of the policy's Gaussian or categorical action distribution (the two kinds AggreVaTeD
    supports).

    With a shared features extractor (``CnnPolicy``'s) the value head reads detached features: during imitation it
    learns on the policy's features without shaping them (PPO, after a hand-over, shares them as it always does).
    Those features are computed in a pass without gradients: a convolution's backward pass runs over its whole
    input batch, detached rows included, so one joint pass costs half as much again (NatureCNN, 256 + 256 stacked
    84x84 frames, one thread: 0.15-0.16 s against 0.22-0.25 s per training step).
    """
    if policy.share_features_extractor:
        pi_features = policy.extract_features(policy_obs)
        with th.no_grad():
            # a shared features extractor (CnnPolicy's) learns from the imitation loss only: the value loss on the
            # env's returns would swamp it (BallPlatePixels: no learning in 20k steps with it, 256 at 10k without)
            vf_features = policy.extract_features(value_obs)
        assert isinstance(pi_features, th.Tensor) and isinstance(vf_features, th.Tensor)
        latent_pi = policy.mlp_extractor.forward_actor(pi_features)
        latent_vf = policy.mlp_extractor.forward_critic(vf_features)
    else:
        if isinstance(policy_obs, dict):  # a Dict space (MultiInputPolicy): one batch per key
            n_policy = len(next(iter(policy_obs.values())))
            joint: Any = {key: th.cat([policy_obs[key], value_obs[key]]) for key in policy_obs}
        else:
            n_policy, joint = len(policy_obs), th.cat([policy_obs, value_obs])
        pi_features, vf_features = policy.extract_features(joint)
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


def to_channels_last(policy: ActorCriticPolicy) -> bool:
    """Lay out the policy's convolutions channels-last on CPU (NHWC: oneDNN's fast path) for training passes.

    A speed-up only: the same network and outputs up to float rounding. Each features extractor with a ``Conv2d``
    gets channels-last weights and a forward pre-hook that converts its 4-D input when gradients are on (SB3's
    ``NatureCNN``, 256 stacked 84x84 frames, one thread: a training step 0.095 s against 0.142 s; with the weights
    alone it gains little). Inference passes keep their input as it is (copying a large re-scoring batch costs more
    than it saves); they run somewhat slower on these weights. On ``sb3ext/CartPolePixels-v1`` at its YAML settings
    (one thread, 4 iterations) the update took 9.8 s against 12.0 s, re-scoring 1.2 s against 0.8 s: 1.18x in all.
    Returns whether anything was converted (False on GPU and for policies without ``Conv2d``)."""
    if policy.device.type != "cpu":
        return False
    extractors = {id(m): m for m in (getattr(policy, name, None) for name in _EXTRACTORS) if isinstance(m, th.nn.Module)}
    converted = False
    for extractor in extractors.values():
        convolutions = [module for module in extractor.modules() if isinstance(module, th.nn.Conv2d)]
        if not convolutions:
            continue
        for conv in convolutions:  # in place: the optimizer keeps the same parameters
            conv.weight.data = conv.weight.data.contiguous(memory_format=th.channels_last)
        extractor.register_forward_pre_hook(_channels_last_input)
        converted = True
    return converted


_EXTRACTORS = ("features_extractor", "pi_features_extractor", "vf_features_extractor")


def _channels_last_input(module: th.nn.Module, args: tuple[Any, ...]) -> tuple[Any, ...]:
    if not th.is_grad_enabled():  # inference (re-scoring, acting): copying a large batch costs more than it saves
        return args
    four_d = (isinstance(a, th.Tensor) and a.dim() == 4 for a in args)
    return tuple(a.contiguous(memory_format=th.channels_last) if nhwc else a for a, nhwc in zip(args, four_d))
