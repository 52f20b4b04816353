"""Robust Policy Optimization (Rahman and Xue, 2022): PPO whose update perturbs the Gaussian mean."""

from __future__ import annotations

from typing import Any, ClassVar, TypeVar

import torch as th
from gymnasium import spaces
from stable_baselines3 import PPO
from stable_baselines3.common.buffers import RolloutBuffer
from stable_baselines3.common.policies import ActorCriticPolicy, BasePolicy
from stable_baselines3.common.type_aliases import GymEnv, MaybeCallback, Schedule

from sb3ext.algos.loading import SafeLoad
from sb3ext.algos.rpo.policies import CnnPolicy, MlpPolicy, MultiInputPolicy, RPOMixin
from sb3ext.common.validation import invalid, unknown_kwargs_message

SelfRPO = TypeVar("SelfRPO", bound="RPO")


class RPO(SafeLoad, PPO):
    """
    Robust Policy Optimization (RPO).

    PPO in which the log-probabilities of the update are computed under a Gaussian whose mean is
    perturbed by uniform noise, pi'(a|s) = N(a; mu(s) + z, sigma(s)), z ~ U(-alpha, alpha) per sample
    and action dimension, freshly drawn at every minibatch; rollouts use the unperturbed policy. The
    perturbation keeps the policy's entropy from collapsing in continuous control (the paper's
    motivation). ``rpo_alpha = 0`` is exactly stock PPO. Continuous (Box) actions only.

    Paper: https://arxiv.org/abs/2212.07536

    :param policy: The policy model to use (MlpPolicy, CnnPolicy, MultiInputPolicy)
    :param env: The environment to learn from (if registered in Gym, can be str)
    :param rpo_alpha: Half-width alpha of the uniform perturbation of the action mean (>= 0; paper: 0.5)
    The other parameters are PPO's, with the same defaults (see ``stable_baselines3.PPO``).
    """

    #: the zoo plug-in refuses it on Discrete-action envs (Atari) before reading any YAML
    continuous_actions_only: ClassVar[bool] = True
    policy_aliases: ClassVar[dict[str, type[BasePolicy]]] = {
        "MlpPolicy": MlpPolicy,
        "CnnPolicy": CnnPolicy,
        "MultiInputPolicy": MultiInputPolicy,
    }

    def __init__(
        self,
        policy: str | type[ActorCriticPolicy],
        env: GymEnv | str,
        learning_rate: float | Schedule = 3e-4,
        n_steps: int = 2048,
        batch_size: int = 64,
        n_epochs: int = 10,
        gamma: float = 0.99,
        gae_lambda: float = 0.95,
        clip_range: float | Schedule = 0.2,
        clip_range_vf: float | Schedule | None = None,
        normalize_advantage: bool = True,
        ent_coef: float = 0.0,
        vf_coef: float = 0.5,
        max_grad_norm: float = 0.5,
        rpo_alpha: float = 0.5,
        rollout_buffer_class: type[RolloutBuffer] | None = None,
        rollout_buffer_kwargs: dict[str, Any] | None = None,
        target_kl: float | None = None,
        stats_window_size: int = 100,
        tensorboard_log: str | None = None,
        policy_kwargs: dict[str, Any] | None = None,
        verbose: int = 0,
        seed: int | None = None,
        device: th.device | str = "auto",
        _init_setup_model: bool = True,
        **unknown_kwargs: Any,
    ):
        if unknown_kwargs:
            raise TypeError(unknown_kwargs_message(type(self), unknown_kwargs))
        super().__init__(
            policy,
            env,
            learning_rate=learning_rate,
            n_steps=n_steps,
            batch_size=batch_size,
            n_epochs=n_epochs,
            gamma=gamma,
            gae_lambda=gae_lambda,
            clip_range=clip_range,
            clip_range_vf=clip_range_vf,
            normalize_advantage=normalize_advantage,
            ent_coef=ent_coef,
            vf_coef=vf_coef,
            max_grad_norm=max_grad_norm,
            rollout_buffer_class=rollout_buffer_class,
            rollout_buffer_kwargs=rollout_buffer_kwargs,
            target_kl=target_kl,
            stats_window_size=stats_window_size,
            tensorboard_log=tensorboard_log,
            policy_kwargs=policy_kwargs,
            verbose=verbose,
            seed=seed,
            device=device,
            _init_setup_model=False,
        )
        self.rpo_alpha = rpo_alpha
        if _init_setup_model:
            self._setup_model()

    def _setup_model(self) -> None:
        if not isinstance(self.action_space, spaces.Box):
            raise invalid("RPO", "action_space", self.action_space, "Box (RPO perturbs a Gaussian mean)")
        if not float(self.rpo_alpha) >= 0:
            raise invalid("RPO", "rpo_alpha", self.rpo_alpha, "a number >= 0")
        if "rpo_alpha" in self.policy_kwargs:
            raise invalid("RPO", "policy_kwargs['rpo_alpha']", self.policy_kwargs["rpo_alpha"], "RPO(rpo_alpha=...) instead")
        super()._setup_model()
        if not isinstance(self.policy, RPOMixin):
            raise invalid("RPO", "policy", type(self.policy).__name__, "MlpPolicy, CnnPolicy, MultiInputPolicy or an RPOMixin")
        self.policy.rpo_alpha = float(self.rpo_alpha)

    def train(self) -> None:
        super().train()
        self.logger.record("train/rpo_alpha", self.rpo_alpha)

    def learn(
        self: SelfRPO,
        total_timesteps: int,
        callback: MaybeCallback = None,
        log_interval: int = 1,
        tb_log_name: str = "RPO",
        reset_num_timesteps: bool = True,
        progress_bar: bool = False,
    ) -> SelfRPO:
        return super().learn(
            total_timesteps=total_timesteps,
            callback=callback,
            log_interval=log_interval,
            tb_log_name=tb_log_name,
            reset_num_timesteps=reset_num_timesteps,
            progress_bar=progress_bar,
        )
