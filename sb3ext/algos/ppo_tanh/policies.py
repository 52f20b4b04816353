"""Policies of TanhPPO: separate actor and critic networks, each with its own optimizer, and a tanh-squashed Gaussian."""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor, FlattenExtractor, NatureCNN
from stable_baselines3.common.type_aliases import PyTorchObs, Schedule
from torch import nn

from sb3ext.algos.ppo_tanh.distributions import TanhDiagGaussianDistribution


class TanhActorCriticPolicy(ActorCriticPolicy):
    """Actor and critic with nothing shared (features extractors, networks, optimizers), tanh-squashed actions.

    The actor's last layer gives the mean and the log standard deviation of a Gaussian per action dimension
    (state-dependent, clamped to [``log_std_min``, ``log_std_max``]); actions are a = tanh(u), u ~ N(mu, sigma).
    The policy's outputs (``forward``, ``_predict``, the rollout buffer's actions) are the **pre-tanh** u;
    :meth:`unscale_action`, which SB3 applies to every policy output before it reaches the env, maps u to
    the bounds: low + (tanh(u) + 1) (high - low) / 2, always inside them. ``optimizer`` updates the actor,
    ``critic_optimizer`` the critic.

    :param log_std_init: initial log standard deviation (bias of the log-std outputs)
    :param log_std_min: lower clamp of the log standard deviation
    :param log_std_max: upper clamp of the log standard deviation
    The other parameters are those of SB3's ``ActorCriticPolicy`` (no gSDE; the features extractor is never shared).
    """

    def __init__(
        self,
        observation_space: spaces.Space,
        action_space: spaces.Space,
        lr_schedule: Schedule,
        net_arch: list[int] | dict[str, list[int]] | None = None,
        activation_fn: type[nn.Module] = nn.Tanh,
        ortho_init: bool = True,
        log_std_init: float = 0.0,
        log_std_min: float = -5.0,
        log_std_max: float = 1.0,
        features_extractor_class: type[BaseFeaturesExtractor] = FlattenExtractor,
        features_extractor_kwargs: dict[str, Any] | None = None,
        normalize_images: bool = True,
        optimizer_class: type[th.optim.Optimizer] = th.optim.Adam,
        optimizer_kwargs: dict[str, Any] | None = None,
        use_sde: bool = False,
        share_features_extractor: bool = False,
    ):
        bounded = isinstance(action_space, spaces.Box) and bool(np.isfinite(action_space.low).all())
        if not bounded or not np.isfinite(action_space.high).all():  # type: ignore[attr-defined]
            raise ValueError(f"TanhPPO needs a Box action space with finite bounds, got {action_space}")
        if not log_std_min < log_std_max or not log_std_min <= log_std_init <= log_std_max:
            raise ValueError(
                f"TanhPPO policy: need log_std_min <= log_std_init <= log_std_max and log_std_min < log_std_max, got "
                f"log_std_min={log_std_min}, log_std_init={log_std_init}, log_std_max={log_std_max}"
            )
        if use_sde or share_features_extractor:
            raise ValueError("TanhPPO policy: use_sde and share_features_extractor must be False (separate actor and critic)")
        self.log_std_min = log_std_min
        self.log_std_max = log_std_max
        super().__init__(
            observation_space,
            action_space,
            lr_schedule,
            net_arch=net_arch,
            activation_fn=activation_fn,
            ortho_init=ortho_init,
            log_std_init=log_std_init,
            features_extractor_class=features_extractor_class,
            features_extractor_kwargs=features_extractor_kwargs,
            share_features_extractor=False,
            normalize_images=normalize_images,
            optimizer_class=optimizer_class,
            optimizer_kwargs=optimizer_kwargs,
        )

    @property
    def squash_output(self) -> bool:
        """Outputs go through :meth:`unscale_action` (tanh, then the bounds) instead of being clipped."""
        return True

    def unscale_action(self, scaled_action: np.ndarray) -> np.ndarray:
        return super().unscale_action(np.tanh(scaled_action))

    def scale_action(self, action: np.ndarray) -> np.ndarray:
        """Inverse of :meth:`unscale_action` (env action -> pre-tanh u), finite at the bounds."""
        squashed = np.clip(super().scale_action(action), -1 + 1e-6, 1 - 1e-6)
        return np.arctanh(squashed)

    def _get_constructor_parameters(self) -> dict[str, Any]:
        data = super()._get_constructor_parameters()
        for key in ("squash_output", "full_std", "use_expln"):
            data.pop(key, None)
        data.update(log_std_min=self.log_std_min, log_std_max=self.log_std_max)
        return data

    def _build(self, lr_schedule: Schedule) -> None:
        assert isinstance(self.action_space, spaces.Box)
        self.action_dist = TanhDiagGaussianDistribution(
            int(np.prod(self.action_space.shape)), log_std_min=self.log_std_min, log_std_max=self.log_std_max
        )
        self._build_mlp_extractor()
        self.action_net = self.action_dist.proba_distribution_net(latent_dim=self.mlp_extractor.latent_dim_pi)
        self.value_net = nn.Linear(self.mlp_extractor.latent_dim_vf, 1)
        if self.ortho_init:  # SB3's gains (ActorCriticPolicy._build with separate features extractors)
            module_gains = {
                self.pi_features_extractor: np.sqrt(2),
                self.vf_features_extractor: np.sqrt(2),
                self.mlp_extractor: np.sqrt(2),
                self.action_net: 0.01,
                self.value_net: 1,
            }
            for module, gain in module_gains.items():
                module.apply(partial(self.init_weights, gain=gain))
        with th.no_grad():
            self.action_net.bias[self.action_dist.action_dim :].fill_(self.log_std_init)  # type: ignore[index]
        self.optimizer = self.optimizer_class(self.actor_parameters(), lr=lr_schedule(1), **self.optimizer_kwargs)  # type: ignore[call-arg]
        self.critic_optimizer = self.optimizer_class(self.critic_parameters(), lr=lr_schedule(1), **self.optimizer_kwargs)  # type: ignore[call-arg]

    def actor_parameters(self) -> list[nn.Parameter]:
        modules = (self.pi_features_extractor, self.mlp_extractor.policy_net, self.action_net)
        return [parameter for module in modules for parameter in module.parameters()]

    def critic_parameters(self) -> list[nn.Parameter]:
        modules = (self.vf_features_extractor, self.mlp_extractor.value_net, self.value_net)
        return [parameter for module in modules for parameter in module.parameters()]

    def _get_action_dist_from_latent(self, latent_pi: th.Tensor) -> TanhDiagGaussianDistribution:  # type: ignore[override]
        assert isinstance(self.action_dist, TanhDiagGaussianDistribution)
        return self.action_dist.proba_distribution(self.action_net(latent_pi))

    def get_distribution(self, obs: PyTorchObs) -> TanhDiagGaussianDistribution:  # type: ignore[override]
        return super().get_distribution(obs)  # type: ignore[return-value]


class TanhActorCriticCnnPolicy(TanhActorCriticPolicy):
    """:class:`TanhActorCriticPolicy` with NatureCNN features extractors (one for the actor, one for the critic)."""

    def __init__(
        self,
        observation_space: spaces.Space,
        action_space: spaces.Space,
        lr_schedule: Schedule,
        features_extractor_class: type[BaseFeaturesExtractor] = NatureCNN,
        **kwargs: Any,
    ):
        kwargs["features_extractor_class"] = features_extractor_class
        super().__init__(observation_space, action_space, lr_schedule, **kwargs)


MlpPolicy = TanhActorCriticPolicy
CnnPolicy = TanhActorCriticCnnPolicy
