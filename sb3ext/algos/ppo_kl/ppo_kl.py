"""PPO with an adaptive KL penalty (Schulman et al. 2017, section 4), with optional clipping on top."""

from __future__ import annotations

from typing import Any, ClassVar, TypeVar

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.on_policy_algorithm import OnPolicyAlgorithm
from stable_baselines3.common.policies import ActorCriticPolicy, BasePolicy
from stable_baselines3.common.type_aliases import GymEnv, MaybeCallback, Schedule
from stable_baselines3.common.utils import FloatSchedule, explained_variance
from torch.nn import functional as F

from sb3ext.algos.loading import SafeLoad
from sb3ext.algos.ppo_kl.buffers import DistributionRolloutBuffer
from sb3ext.algos.ppo_kl.distributions import kl_from_params
from sb3ext.algos.ppo_kl.policies import CnnPolicy, MlpPolicy
from sb3ext.common.ppo import approx_kl, clip_fraction, clipped_surrogate, kl_exceeded
from sb3ext.common.validation import invalid, unknown_kwargs_message

SelfKLPPO = TypeVar("SelfKLPPO", bound="KLPPO")


def adapt_kl_coef(kl_coef: float, kl: float, kl_target: float, tolerance: float = 1.5, factor: float = 2.0) -> float:
    """The PPO paper's rule (section 4): divide beta by ``factor`` when d < d_targ / ``tolerance``, multiply it by
    ``factor`` when d > d_targ * ``tolerance``, else keep it."""
    if kl < kl_target / tolerance:
        return kl_coef / factor
    if kl > kl_target * tolerance:
        return kl_coef * factor
    return kl_coef


class KLPPO(SafeLoad, OnPolicyAlgorithm):
    """
    PPO with an adaptive KL penalty (PPO paper, section 4).

    The policy loss is the surrogate minus beta times the analytic KL divergence between the action
    distribution that collected the rollout (its parameters are stored per sample) and the current one:

        L(theta) = E[ r_t(theta) A_t - beta KL[pi_old(.|s_t), pi_theta(.|s_t)] ]

    After each update, d = E[KL] over the whole rollout is measured with the updated policy and beta is
    halved when d < d_targ / 1.5 and doubled when d > 1.5 d_targ (``kl_target=None``: beta stays fixed, the
    paper's fixed KL penalty). The adapted beta is state, ``beta``, saved with the model: ``kl_coef`` is only its
    start, so a model loaded with ``kl_coef`` among its keywords (the zoo's ``-i`` passes the entry's) goes on with
    the beta it had. With ``clip_range`` set, the clipped
    surrogate of PPO (section 3) is used instead of r_t A_t ("clipping on top"); with ``kl_coef=0`` (it
    then stays 0) and a ``clip_range`` this is exactly stock PPO.

    Paper: https://arxiv.org/abs/1707.06347

    KLPPO subclasses ``OnPolicyAlgorithm`` and owns its ``train()``, as sb3-contrib's TRPO does: its update
    differs from PPO's in the loss (optional clipping, the KL term) and after the epochs (the beta rule), so
    subclassing ``PPO`` would mean replacing ``train()`` anyway while working around PPO's constructor
    (which requires a clip range). The loss pieces it shares with PPO are ``sb3ext.common.ppo``'s.

    :param policy: The policy model to use (MlpPolicy, CnnPolicy, ...)
    :param env: The environment to learn from (if registered in Gym, can be str)
    :param learning_rate: The learning rate, it can be a function of the current progress remaining (from 1 to 0)
    :param n_steps: The number of steps to run for each environment per update
    :param batch_size: Minibatch size
    :param n_epochs: Number of epoch when optimizing the surrogate loss
    :param gamma: Discount factor
    :param gae_lambda: Factor for trade-off of bias vs variance for Generalized Advantage Estimator
    :param clip_range: Clipping parameter of the surrogate (a number or a schedule), or None for the unclipped
        surrogate of the paper's section 4 (the default)
    :param clip_range_vf: Clipping parameter for the value function, as in PPO
    :param normalize_advantage: Whether to normalize or not the advantage
    :param ent_coef: Entropy coefficient for the loss calculation
    :param vf_coef: Value function coefficient for the loss calculation
    :param max_grad_norm: The maximum value for the gradient clipping
    :param kl_coef: Initial KL coefficient beta (>= 0; 0 keeps it 0: no penalty)
    :param kl_target: Target KL divergence d_targ per update (> 0), or None for a fixed beta (the paper's "fixed
        KL penalty" of Table 1)
    :param kl_tolerance: beta changes when d leaves [d_targ / kl_tolerance, d_targ * kl_tolerance] (> 1; paper: 1.5)
    :param kl_factor: beta is divided or multiplied by this factor (> 1; paper: 2)
    :param target_kl: Optional early stopping of the epochs on the approximate KL, as in PPO (default: off)
    :param stats_window_size: Window size for the rollout logging
    :param tensorboard_log: the log location for tensorboard (if None, no logging)
    :param policy_kwargs: additional arguments to be passed to the policy on creation
    :param verbose: Verbosity level
    :param seed: Seed for the pseudo random generators
    :param device: Device (cpu, cuda, ...) on which the code should be run
    :param _init_setup_model: Whether or not to build the network at the creation of the instance
    """

    policy_aliases: ClassVar[dict[str, type[BasePolicy]]] = {"MlpPolicy": MlpPolicy, "CnnPolicy": CnnPolicy}
    policy: ActorCriticPolicy
    rollout_buffer: DistributionRolloutBuffer

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
        clip_range: float | Schedule | None = None,
        clip_range_vf: float | Schedule | None = None,
        normalize_advantage: bool = True,
        ent_coef: float = 0.0,
        vf_coef: float = 0.5,
        max_grad_norm: float = 0.5,
        kl_coef: float = 1.0,
        kl_target: float | None = 0.01,
        kl_tolerance: float = 1.5,
        kl_factor: float = 2.0,
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
            gamma=gamma,
            gae_lambda=gae_lambda,
            ent_coef=ent_coef,
            vf_coef=vf_coef,
            max_grad_norm=max_grad_norm,
            use_sde=False,
            sde_sample_freq=-1,
            rollout_buffer_class=DistributionRolloutBuffer,
            stats_window_size=stats_window_size,
            tensorboard_log=tensorboard_log,
            policy_kwargs=policy_kwargs,
            verbose=verbose,
            seed=seed,
            device=device,
            _init_setup_model=False,
            supported_action_spaces=(spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary),
        )
        self.batch_size = batch_size
        self.n_epochs = n_epochs
        self.clip_range = clip_range  # type: ignore[assignment]
        self.clip_range_vf = clip_range_vf  # type: ignore[assignment]
        self.normalize_advantage = normalize_advantage
        self.target_kl = target_kl
        self.kl_coef = kl_coef
        #: the adapted beta (None until the first update adapts it: ``kl_coef``); not a constructor argument, so that
        #: ``load``'s keywords do not reset it
        self.beta: float | None = None
        self.kl_target = kl_target
        self.kl_tolerance = kl_tolerance
        self.kl_factor = kl_factor
        if _init_setup_model:
            self._setup_model()

    #: its own buffer, also under its name before sb3ext's restructure
    rollout_buffers: ClassVar[dict[tuple[str, str], type]] = {
        ("sb3ext.algos.ppo_kl.buffers", "DistributionRolloutBuffer"): DistributionRolloutBuffer,
        ("sb3ext.common.buffers", "DistributionRolloutBuffer"): DistributionRolloutBuffer,
    }

    @classmethod
    def load(  # type: ignore[override]
        cls,
        path: Any,
        env: Any = None,
        device: th.device | str = "auto",
        custom_objects: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> Any:
        """SB3's ``load``; the rollout buffer class is always this module's (models saved before sb3ext's
        restructure name it ``sb3ext.common.buffers.DistributionRolloutBuffer``, which no longer exists)."""
        custom_objects = {"rollout_buffer_class": DistributionRolloutBuffer, **(custom_objects or {})}
        return super().load(path, env=env, device=device, custom_objects=custom_objects, **kwargs)

    @property
    def current_beta(self) -> float:
        """The beta of the next update: the adapted one, or ``kl_coef`` before any (and always with a fixed beta)."""
        return float(self.kl_coef if self.beta is None or self.kl_target is None else self.beta)

    def _setup_model(self) -> None:
        for name, value, allowed in (
            ("kl_coef", self.kl_coef, self.kl_coef >= 0),
            ("kl_target", self.kl_target, self.kl_target is None or self.kl_target > 0),
            ("kl_tolerance", self.kl_tolerance, self.kl_tolerance > 1),
            ("kl_factor", self.kl_factor, self.kl_factor > 1),
        ):
            if not allowed:
                raise invalid("KLPPO", name, value, "kl_coef >= 0, kl_target None or > 0, kl_tolerance > 1, kl_factor > 1")
        if isinstance(self.observation_space, spaces.Dict):
            raise invalid("KLPPO", "observation_space", self.observation_space, "Box, Discrete, ... (no Dict)")
        if int(self.batch_size) != self.batch_size or self.batch_size < (2 if self.normalize_advantage else 1):
            raise invalid("KLPPO", "batch_size", self.batch_size, "an integer >= 2 (>= 1 without normalize_advantage)")
        super()._setup_model()
        if self.clip_range is not None:
            self.clip_range = FloatSchedule(self.clip_range)  # type: ignore[assignment]
        if self.clip_range_vf is not None:
            if isinstance(self.clip_range_vf, (float, int)) and self.clip_range_vf <= 0:
                raise invalid("KLPPO", "clip_range_vf", self.clip_range_vf, "None or a positive number")
            self.clip_range_vf = FloatSchedule(self.clip_range_vf)  # type: ignore[assignment]

    def train(self) -> None:
        """
        Update policy using the currently gathered rollout buffer.
        """
        # Switch to train mode (this affects batch norm / dropout)
        self.policy.set_training_mode(True)
        # Update optimizer learning rate
        self._update_learning_rate(self.policy.optimizer)
        # Parameters of the distribution that collected the rollout (the policy is unchanged since)
        self.rollout_buffer.store_distributions(self.policy)
        # Clipping is optional
        clip_range = None if self.clip_range is None else self.clip_range(self._current_progress_remaining)  # type: ignore[operator]
        # Optional: clip range for the value function
        if self.clip_range_vf is not None:
            clip_range_vf = self.clip_range_vf(self._current_progress_remaining)  # type: ignore[operator]

        beta = self.current_beta
        entropy_losses = []
        pg_losses, value_losses = [], []
        clip_fractions = []
        kl_penalties = []

        continue_training = True
        # train for n_epochs epochs
        for epoch in range(self.n_epochs):
            approx_kl_divs = []
            # Do a complete pass on the rollout buffer
            for rollout_data in self.rollout_buffer.get(self.batch_size):
                actions = rollout_data.actions
                if isinstance(self.action_space, spaces.Discrete):
                    # Convert discrete action from float to long
                    actions = rollout_data.actions.long().flatten()

                values, log_prob, entropy = self.policy.evaluate_actions(rollout_data.observations, actions)
                # The distribution evaluate_actions just built (SB3's policies fill and return their
                # one `action_dist` object), for the analytic KL
                distribution = self.policy.action_dist
                values = values.flatten()
                # Normalize advantage
                advantages = rollout_data.advantages
                # Normalization does not make sense if mini batchsize == 1, see GH issue #325
                if self.normalize_advantage and len(advantages) > 1:
                    advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)

                # ratio between old and new policy, should be one at the first iteration
                ratio = th.exp(log_prob - rollout_data.old_log_prob)

                # The surrogate: the paper's section 4 (unclipped) or PPO's clipped one (section 3)
                if clip_range is None:
                    policy_loss = -(advantages * ratio).mean()
                    fraction = 0.0
                else:
                    policy_loss = -clipped_surrogate(advantages, ratio, clip_range).mean()
                    fraction = clip_fraction(ratio, clip_range).item()

                # Adaptive KL penalty (section 4); a zero coefficient adds nothing
                if beta > 0:
                    kl_penalty = kl_from_params(rollout_data.old_distribution_params, distribution).mean()
                    policy_loss = policy_loss + beta * kl_penalty
                    kl_penalties.append(kl_penalty.item())

                # Logging
                pg_losses.append(policy_loss.item())
                clip_fractions.append(fraction)

                if self.clip_range_vf is None:
                    # No clipping
                    values_pred = values
                else:
                    # Clip the difference between old and new value
                    # NOTE: this depends on the reward scaling
                    values_pred = rollout_data.old_values + th.clamp(
                        values - rollout_data.old_values, -clip_range_vf, clip_range_vf
                    )
                # Value loss using the TD(gae_lambda) target
                value_loss = F.mse_loss(rollout_data.returns, values_pred)
                value_losses.append(value_loss.item())

                # Entropy loss favor exploration
                if entropy is None:
                    # Approximate entropy when no analytical form
                    entropy_loss = -th.mean(-log_prob)
                else:
                    entropy_loss = -th.mean(entropy)

                entropy_losses.append(entropy_loss.item())

                loss = policy_loss + self.ent_coef * entropy_loss + self.vf_coef * value_loss

                # Approximate KL for the optional early stop (SB3's target_kl)
                with th.no_grad():
                    approx_kl_div = approx_kl(log_prob - rollout_data.old_log_prob).cpu().numpy()
                    approx_kl_divs.append(approx_kl_div)

                if kl_exceeded(float(approx_kl_div), self.target_kl):
                    continue_training = False
                    if self.verbose >= 1:
                        print(f"Early stopping at step {epoch} due to reaching max kl: {approx_kl_div:.2f}")
                    break

                # Optimization step
                self.policy.optimizer.zero_grad()
                loss.backward()
                # Clip grad norm
                th.nn.utils.clip_grad_norm_(self.policy.parameters(), self.max_grad_norm)
                self.policy.optimizer.step()

            self._n_updates += 1
            if not continue_training:
                break

        explained_var = explained_variance(self.rollout_buffer.values.flatten(), self.rollout_buffer.returns.flatten())

        # d = E[KL(old || new)] over the rollout with the updated policy, then the paper's beta rule
        kl = self._rollout_kl()
        if self.kl_target is not None:
            self.beta = adapt_kl_coef(beta, kl, self.kl_target, self.kl_tolerance, self.kl_factor)

        # Logs
        self.logger.record("train/entropy_loss", np.mean(entropy_losses))
        self.logger.record("train/policy_gradient_loss", np.mean(pg_losses))
        self.logger.record("train/value_loss", np.mean(value_losses))
        self.logger.record("train/approx_kl", np.mean(approx_kl_divs))
        self.logger.record("train/clip_fraction", np.mean(clip_fractions))
        self.logger.record("train/loss", loss.item())
        self.logger.record("train/explained_variance", explained_var)
        if hasattr(self.policy, "log_std"):
            self.logger.record("train/std", th.exp(self.policy.log_std).mean().item())

        self.logger.record("train/n_updates", self._n_updates, exclude="tensorboard")
        if clip_range is not None:
            self.logger.record("train/clip_range", clip_range)
        if self.clip_range_vf is not None:
            self.logger.record("train/clip_range_vf", clip_range_vf)
        # The KL penalty
        self.logger.record("train/kl", kl)
        self.logger.record("train/kl_coef", beta)
        if kl_penalties:
            self.logger.record("train/kl_penalty", np.mean(kl_penalties))

    def _rollout_kl(self) -> float:
        """Mean KL(old || new) over the (flattened) rollout, in order: no random permutation is drawn."""
        total, count = 0.0, 0
        size = self.rollout_buffer.buffer_size * self.rollout_buffer.n_envs
        with th.no_grad():
            for start in range(0, size, 4096):
                rollout_data = self.rollout_buffer._get_samples(np.arange(start, min(start + 4096, size)))
                distribution = self.policy.get_distribution(rollout_data.observations)
                kl = kl_from_params(rollout_data.old_distribution_params, distribution)
                total += kl.sum().item()
                count += len(kl)
        return total / max(count, 1)

    def learn(
        self: SelfKLPPO,
        total_timesteps: int,
        callback: MaybeCallback = None,
        log_interval: int = 1,
        tb_log_name: str = "KLPPO",
        reset_num_timesteps: bool = True,
        progress_bar: bool = False,
    ) -> SelfKLPPO:
        return super().learn(
            total_timesteps=total_timesteps,
            callback=callback,
            log_interval=log_interval,
            tb_log_name=tb_log_name,
            reset_num_timesteps=reset_num_timesteps,
            progress_bar=progress_bar,
        )
