"""PPO with separate actor and critic (own networks, optimizers, learning rates, epochs) and tanh-squashed actions."""

from __future__ import annotations

from typing import Any, ClassVar, TypeVar

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3 import PPO
from stable_baselines3.common.policies import BasePolicy
from stable_baselines3.common.type_aliases import GymEnv, MaybeCallback, Schedule
from stable_baselines3.common.utils import FloatSchedule, explained_variance, update_learning_rate
from torch.nn import functional as F

from sb3ext.algos.loading import SafeLoad
from sb3ext.algos.ppo_tanh.policies import CnnPolicy, MlpPolicy, TanhActorCriticPolicy
from sb3ext.common.ppo import actor_critic_parameters, approx_kl, clip_fraction, clipped_surrogate, kl_exceeded
from sb3ext.common.validation import invalid, unknown_kwargs_message

SelfTanhPPO = TypeVar("SelfTanhPPO", bound="TanhPPO")


class TanhPPO(SafeLoad, PPO):
    """
    PPO with a separate actor and critic and a tanh-squashed Gaussian policy.

    The actor maximises PPO's clipped surrogate (plus ``ent_coef`` times an entropy estimate) with its own
    optimizer, learning rate and number of epochs; the critic regresses the GAE returns with its own. The
    policy is a = tanh(u), u ~ N(mu(s), sigma(s)) with a state-dependent log-std clamped to a range; the
    rollout buffer stores the pre-tanh u, so log-probabilities are exact (no atanh of saturated actions):
    log pi(a|s) = log N(u; mu, sigma) - sum_i log(1 - tanh(u_i)^2). Actions always lie inside the bounds.
    The entropy of the squashed Gaussian has no closed form: the entropy bonus uses the one-sample
    estimate H(u) + E[sum_i log(1 - tanh(u_i)^2)]. Box action spaces with finite bounds only.

    :param policy: The policy model to use (MlpPolicy, CnnPolicy)
    :param env: The environment to learn from (if registered in Gym, can be str)
    :param learning_rate: The actor's learning rate, it can be a function of the current progress remaining (from 1 to 0)
    :param n_steps: The number of steps to run for each environment per update
    :param batch_size: Minibatch size (actor and critic)
    :param n_epochs: The actor's number of epochs over the rollout per update
    :param gamma: Discount factor
    :param gae_lambda: Factor for trade-off of bias vs variance for Generalized Advantage Estimator
    :param clip_range: Clipping parameter of the surrogate, as in PPO
    :param clip_range_vf: Clipping parameter for the value function, as in PPO
    :param normalize_advantage: Whether to normalize or not the advantage
    :param ent_coef: Coefficient of the entropy estimate in the actor's loss
    :param max_grad_norm: The maximum gradient norm (actor and critic clipped separately)
    :param critic_learning_rate: The critic's learning rate (number or schedule; None: same as ``learning_rate``)
    :param critic_n_epochs: The critic's number of epochs per update (None: same as ``n_epochs``)
    :param target_kl: Stops the actor's epochs (not the critic's) when the approximate KL exceeds 1.5 x this
    :param stats_window_size: Window size for the rollout logging
    :param tensorboard_log: the log location for tensorboard (if None, no logging)
    :param policy_kwargs: additional arguments to be passed to the policy on creation (e.g. ``log_std_min``)
    :param verbose: Verbosity level
    :param seed: Seed for the pseudo random generators
    :param device: Device (cpu, cuda, ...) on which the code should be run
    :param _init_setup_model: Whether or not to build the network at the creation of the instance
    """

    #: the zoo plug-in refuses it on Discrete-action envs (Atari) before reading any YAML
    continuous_actions_only: ClassVar[bool] = True
    policy_aliases: ClassVar[dict[str, type[BasePolicy]]] = {"MlpPolicy": MlpPolicy, "CnnPolicy": CnnPolicy}
    policy: TanhActorCriticPolicy

    def __init__(
        self,
        policy: str | type[TanhActorCriticPolicy],
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
        max_grad_norm: float = 0.5,
        critic_learning_rate: float | Schedule | None = None,
        critic_n_epochs: int | None = None,
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
            max_grad_norm=max_grad_norm,
            target_kl=target_kl,
            stats_window_size=stats_window_size,
            tensorboard_log=tensorboard_log,
            policy_kwargs=policy_kwargs,
            verbose=verbose,
            seed=seed,
            device=device,
            _init_setup_model=False,
        )
        self.critic_learning_rate = critic_learning_rate
        self.critic_n_epochs = critic_n_epochs
        if _init_setup_model:
            self._setup_model()

    def _setup_model(self) -> None:
        space = self.action_space
        if not isinstance(space, spaces.Box) or not np.all(np.isfinite(space.low) & np.isfinite(space.high)):
            raise invalid("TanhPPO", "action_space", space, "a Box with finite bounds (actions are tanh-squashed)")
        epochs = self.critic_n_epochs
        if epochs is not None and (int(epochs) != epochs or epochs < 1):
            raise invalid("TanhPPO", "critic_n_epochs", self.critic_n_epochs, "None or an integer >= 1")
        super()._setup_model()
        if not isinstance(self.policy, TanhActorCriticPolicy):
            raise invalid("TanhPPO", "policy", type(self.policy).__name__, "MlpPolicy, CnnPolicy or a TanhActorCriticPolicy")
        rate = self.learning_rate if self.critic_learning_rate is None else self.critic_learning_rate
        self.critic_lr_schedule = FloatSchedule(rate)

    def _get_torch_save_params(self) -> tuple[list[str], list[str]]:
        state_dicts, variables = super()._get_torch_save_params()
        return [*state_dicts, "policy.critic_optimizer"], variables

    def train(self) -> None:
        """One update: ``n_epochs`` actor epochs and ``critic_n_epochs`` critic epochs over the same minibatches."""
        self.policy.set_training_mode(True)
        self._update_learning_rate(self.policy.optimizer)
        critic_lr = self.critic_lr_schedule(self._current_progress_remaining)
        update_learning_rate(self.policy.critic_optimizer, critic_lr)
        clip_range = self.clip_range(self._current_progress_remaining)  # type: ignore[operator]
        clip_range_vf = None if self.clip_range_vf is None else self.clip_range_vf(self._current_progress_remaining)  # type: ignore[operator]
        actor_epochs = self.n_epochs
        critic_epochs = self.n_epochs if self.critic_n_epochs is None else int(self.critic_n_epochs)

        entropy_losses, pg_losses, value_losses, clip_fractions, approx_kl_divs, stds = [], [], [], [], [], []
        actor_active, actor_epochs_done = True, 0
        actor_params, critic_params = actor_critic_parameters(self.policy)
        for epoch in range(max(actor_epochs, critic_epochs)):
            train_actor = actor_active and epoch < actor_epochs
            train_critic = epoch < critic_epochs
            if not (train_actor or train_critic):
                break
            for rollout_data in self.rollout_buffer.get(self.batch_size):
                observations = rollout_data.observations
                if train_actor:
                    distribution = self.policy.get_distribution(observations)
                    log_prob = distribution.log_prob(rollout_data.actions)
                    advantages = rollout_data.advantages
                    if self.normalize_advantage and len(advantages) > 1:
                        advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
                    ratio = th.exp(log_prob - rollout_data.old_log_prob)
                    policy_loss = -clipped_surrogate(advantages, ratio, clip_range).mean()
                    entropy_loss = -distribution.entropy().mean()  # the one-sample estimate (no closed form)
                    with th.no_grad():
                        approx_kl_div = approx_kl(log_prob - rollout_data.old_log_prob).item()
                    pg_losses.append(policy_loss.item())
                    entropy_losses.append(entropy_loss.item())
                    clip_fractions.append(clip_fraction(ratio, clip_range).item())
                    approx_kl_divs.append(approx_kl_div)
                    stds.append(distribution.std.mean().item())
                    if kl_exceeded(approx_kl_div, self.target_kl):
                        actor_active = train_actor = False  # the critic keeps training
                        if self.verbose >= 1:
                            print(f"Early stopping of the actor at epoch {epoch} due to reaching max kl: {approx_kl_div:.2f}")
                    else:
                        self.policy.optimizer.zero_grad()
                        (policy_loss + self.ent_coef * entropy_loss).backward()
                        th.nn.utils.clip_grad_norm_(actor_params, self.max_grad_norm)
                        self.policy.optimizer.step()
                if train_critic:
                    values = self.policy.predict_values(observations).flatten()
                    if clip_range_vf is not None:
                        change = th.clamp(values - rollout_data.old_values, -clip_range_vf, clip_range_vf)
                        values = rollout_data.old_values + change
                    value_loss = F.mse_loss(rollout_data.returns, values)
                    value_losses.append(value_loss.item())
                    self.policy.critic_optimizer.zero_grad()
                    value_loss.backward()
                    th.nn.utils.clip_grad_norm_(critic_params, self.max_grad_norm)
                    self.policy.critic_optimizer.step()
            if train_actor:
                actor_epochs_done += 1
            self._n_updates += 1

        explained_var = explained_variance(self.rollout_buffer.values.flatten(), self.rollout_buffer.returns.flatten())
        self.logger.record("train/entropy_loss", np.mean(entropy_losses))
        self.logger.record("train/policy_gradient_loss", np.mean(pg_losses))
        self.logger.record("train/value_loss", np.mean(value_losses))
        self.logger.record("train/approx_kl", np.mean(approx_kl_divs))
        self.logger.record("train/clip_fraction", np.mean(clip_fractions))
        self.logger.record("train/explained_variance", explained_var)
        self.logger.record("train/std", np.mean(stds))
        self.logger.record("train/actor_epochs", actor_epochs_done)
        self.logger.record("train/critic_learning_rate", critic_lr)
        self.logger.record("train/n_updates", self._n_updates, exclude="tensorboard")
        self.logger.record("train/clip_range", clip_range)
        if clip_range_vf is not None:
            self.logger.record("train/clip_range_vf", clip_range_vf)

    def learn(
        self: SelfTanhPPO,
        total_timesteps: int,
        callback: MaybeCallback = None,
        log_interval: int = 1,
        tb_log_name: str = "TanhPPO",
        reset_num_timesteps: bool = True,
        progress_bar: bool = False,
    ) -> SelfTanhPPO:
        return super().learn(
            total_timesteps=total_timesteps,
            callback=callback,
            log_interval=log_interval,
            tb_log_name=tb_log_name,
            reset_num_timesteps=reset_num_timesteps,
            progress_bar=progress_bar,
        )
