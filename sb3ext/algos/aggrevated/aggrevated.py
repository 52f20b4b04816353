"""AggreVaTeD: differentiable imitation learning from an expert's cost-to-go, inside Stable-Baselines3."""

from __future__ import annotations

import dataclasses
import math
import os
import time
import warnings
from typing import Any, ClassVar

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3 import PPO
from stable_baselines3.common.buffers import RolloutBuffer
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.policies import ActorCriticPolicy, BasePolicy
from stable_baselines3.common.type_aliases import GymEnv, MaybeCallback, Schedule
from stable_baselines3.common.utils import explained_variance, obs_as_tensor
from stable_baselines3.common.vec_env import VecEnv
from torch.nn import functional as F

from sb3ext.algos.aggrevated.beyond import StageHost
from sb3ext.algos.aggrevated.buffers import (
    ExpertActionMemory,
    StateAggregationBuffer,
    batch_size_of,
    observation_layout,
    select,
)
from sb3ext.algos.aggrevated.estimators import Estimator, expected_advantages, leave_one_out_advantages, make_estimator
from sb3ext.algos.aggrevated.fit import check_learner_wrapping, env_id_of, expert_reads_state
from sb3ext.algos.aggrevated.losses import LossWeights, memory_cloning_loss, optimizer_step, surrogate_terms
from sb3ext.algos.aggrevated.low_signal import LowSignalMonitor
from sb3ext.algos.aggrevated.metrics import ImitationMetrics, record_iteration
from sb3ext.algos.aggrevated.normalization import learner_view, observation_normalizer, start_from_expert_statistics
from sb3ext.algos.aggrevated.policies import (
    CnnPolicy,
    MlpPolicy,
    MultiInputPolicy,
    distribution_and_values,
    log_std_floor_of,
    to_channels_last,
)
from sb3ext.algos.aggrevated.rollin import PromisedReturns, RollIn
from sb3ext.algos.aggrevated.shaped_rl import ReinforcementTerm
from sb3ext.algos.loading import SafeLoad
from sb3ext.common.expert_state import StateTracker, base_vec_env
from sb3ext.common.ppo import actor_critic_parameters, kl_exceeded
from sb3ext.common.validation import check_ranges, invalid, unknown_kwargs_message
from sb3ext.experts import Expert, load_expert

__all__ = ["AggreVaTeD", "expected_advantages", "leave_one_out_advantages"]


class AggreVaTeD(SafeLoad, StageHost, PPO):
    """
    AggreVaTeD (Deeply AggreVaTeD, Sun et al. 2017): imitation by policy gradient on an expert's cost-to-go, with
    PPO's clipped trust region. Paper: https://arxiv.org/abs/1703.01030

    Each iteration rolls in with the mixture ``beta * expert + (1 - beta) * learner`` (the executed action only
    decides which states are visited), keeps the states of the last ``aggregation_window`` roll-ins, and scores fresh
    samples of the learner's current policy there with the frozen expert: its Q* where it has one, else its policy's
    soft advantage (one estimator per kind of expert, :mod:`sb3ext.algos.aggrevated.estimators`). A value head
    learns the env's returns, so that a saved learner can be handed over to PPO (``PPO.load(path, env=env)``).

    :param policy: The policy model to use (MlpPolicy, CnnPolicy)
    :param env: The environment to learn from (if registered in Gym, can be str)
    :param expert: the expert: a zoo folder, a ``.zip`` checkpoint or an :class:`sb3ext.experts.Expert`.
        It is never saved with the learner; ``load()`` without it still predicts.
    :param learning_rate: The learning rate, it can be a function of the current progress remaining (from 1 to 0)
    :param n_steps: The number of steps to run for each environment per iteration (roll-in length)
    :param batch_size: Minibatch size, in states (each state carries its K action samples or all its actions)
    :param n_epochs: Number of epochs over the aggregated states per iteration
    :param gamma: Discount factor of the learner's value head (the expert's own gamma scores the actions)
    :param gae_lambda: GAE lambda of the learner's value head
    :param clip_range: PPO clipping parameter of the trust region, it can be a function of the progress remaining
    :param clip_range_vf: Clipping parameter for the value function, see PPO
    :param normalize_advantage: Whether to divide the advantages by their batch standard deviation
    :param ent_coef: Entropy coefficient for the loss calculation
    :param vf_coef: Value function coefficient for the loss calculation
    :param max_grad_norm: The maximum value for the gradient clipping (of the actor and of the critic, each)
    :param beta_init: the expert's share of the roll-in at the first iteration, in [0, 1]; raise it where the
        learner's own early states teach nothing (1.0 on the discrete tasks)
    :param beta_decay: ``beta_n = beta_init * beta_decay ** n`` at imitation iteration n, in [0, 1]
    :param n_action_samples: K learner actions scored per state (continuous actions, K >= 2); fewer is faster, noisier
    :param aggregation_window: past roll-ins whose states are re-scored each iteration; more passes over more states
        per env step, at more scoring time
    :param aggregation_reservoir: older states (a uniform sample of all that left the window) re-scored beside it
        (0: none); for long episodes whose first steps the window forgets (MuJoCo, Hardcore)
    :param aggregation_falls: states that led to falls (the last 64 of each terminated episode) re-scored beside the
        window (0: none); for a learner at the expert's level that still falls now and then (Walker2d)
    :param rollin_deterministic: share of the envs (the first ones) on which the learner rolls in with its mode, so
        that the states its deployed policy visits are trained on (Hopper, Walker2d, Hardcore)
    :param expert_bc_coef: weight of a pull toward the expert's action (0: off; ``Box``: the Gaussian mean's squared
        distance in half ranges, ``Discrete``: the cross-entropy) on the states chosen by ``expert_bc_margin``
    :param expert_bc_margin: the states where the expert's action beats the learner's samples by more than this many
        of their standard deviations; ``-inf``: every state (Walker2d)
    :param expert_cap: score a sample with ``min(Q*(s, a), Q*(s, expert action))`` (Q* experts, ``Box``): no credit
        above the expert's own action, for critics nearly flat across actions that a learner can climb (MuJoCo)
    :param low_signal_fallback: become DAgger from the iteration on which the expert's critic is shown untrustworthy
        (``train/critic_snr`` < 1, or ``train/q_gap`` <= 0 while the returns fall short of V*'s promise; saved:
        ``low_signal_iteration``), cloning on every state visited so far (:mod:`~sb3ext.algos.aggrevated.low_signal`)
    :param bound_coef: weight of the penalty on a Gaussian mean outside the action bounds; raise it if the means
        drift past the bounds (HalfCheetah: 10)
    :param rl_coef: step size, in learning rates, of a reinforcement term on the learner's own sampled roll-in steps,
        scored by GAE on V* (0: off; :mod:`~sb3ext.algos.aggrevated.shaped_rl`); it takes over from the imitation as
        the roll-in's returns reach what V* promises (``train/imitation_weight``). Off for a policy-only expert
    :param beyond_after: env steps of imitation after which the stage beyond the expert takes over (None: imitation
        only): SAC kickstarted from the learner (:mod:`~sb3ext.algos.aggrevated.beyond`; ``Box`` actions, vector
        observations); ``predict``, ``save`` and the replay buffer are the stage's from then on
    :param beyond_reward_floor: the stage's critic learns from rewards floored at this (None: the env's own); the
        evaluations and the logged returns keep the env's (Hardcore: its fall's -100 seen as -10)
    :param target_kl: the trust region of the critic's term: above ``1.5 * target_kl`` the term stops for the
        iteration, the pull toward the expert's action (``expert_bc_coef``) goes on; without a pull the epochs stop
    :param stats_window_size: Window size for the rollout logging
    :param tensorboard_log: the log location for tensorboard (if None, no logging)
    :param policy_kwargs: additional arguments to be passed to the policy on creation
    :param verbose: Verbosity level: 0 for no output, 1 for info messages, 2 for debug messages
    :param seed: Seed for the pseudo random generators
    :param device: Device (cpu, cuda, ...) on which the code should be run.
    :param _init_setup_model: Whether or not to build the network at the creation of the instance
    """

    #: whether the update clones the expert's actions from the first iteration on (``MatchedDAgger``)
    clones_expert: ClassVar[bool] = False
    #: saved fields whose value may be +-inf (``expert_bc_margin: -inf``: pull on every state); the safe load accepts them
    infinite_fields: ClassVar[frozenset[str]] = frozenset({"expert_bc_margin"})

    policy_aliases: ClassVar[dict[str, type[BasePolicy]]] = {
        "MlpPolicy": MlpPolicy,
        "CnnPolicy": CnnPolicy,
        "MultiInputPolicy": MultiInputPolicy,
    }

    def __init__(
        self, policy: str | type[ActorCriticPolicy], env: GymEnv | str, expert: str | os.PathLike[str] | Expert | None = None,
        learning_rate: float | Schedule = 1e-3, n_steps: int = 16, batch_size: int = 256, n_epochs: int = 10,
        gamma: float = 0.99, gae_lambda: float = 0.95, clip_range: float | Schedule = 0.2,
        clip_range_vf: float | Schedule | None = None, normalize_advantage: bool = True, ent_coef: float = 0.0,
        vf_coef: float = 0.5, max_grad_norm: float = 0.5, beta_init: float = 0.5, beta_decay: float = 0.9,
        n_action_samples: int = 16, aggregation_window: int = 32, aggregation_reservoir: int = 0,
        aggregation_falls: int = 0, rollin_deterministic: float = 0.0, expert_bc_coef: float = 0.0,
        expert_bc_margin: float = 3.0, expert_cap: bool = False, low_signal_fallback: bool = False,
        bound_coef: float = 1.0, rl_coef: float = 0.0, beyond_after: int | None = None,
        beyond_reward_floor: float | None = None, target_kl: float | None = 0.02,
        stats_window_size: int = 100,
        tensorboard_log: str | None = None, policy_kwargs: dict[str, Any] | None = None, verbose: int = 0,
        seed: int | None = None, device: th.device | str = "auto", _init_setup_model: bool = True, **unknown_kwargs: Any,
    ):  # fmt: skip
        if unknown_kwargs:
            raise TypeError(unknown_kwargs_message(type(self), unknown_kwargs))
        with warnings.catch_warnings():
            # PPO warns when batch_size does not divide n_steps * n_envs; here batch_size counts aggregated states
            warnings.filterwarnings("ignore", message="You have specified a mini-batch size")
            super().__init__(
                policy, env, learning_rate=learning_rate, n_steps=n_steps, batch_size=batch_size, n_epochs=n_epochs,
                gamma=gamma, gae_lambda=gae_lambda, clip_range=clip_range, clip_range_vf=clip_range_vf,
                normalize_advantage=normalize_advantage, ent_coef=ent_coef, vf_coef=vf_coef, max_grad_norm=max_grad_norm,
                use_sde=False, target_kl=target_kl, stats_window_size=stats_window_size, tensorboard_log=tensorboard_log,
                policy_kwargs=policy_kwargs, verbose=verbose, seed=seed, device=device, _init_setup_model=False,
            )  # fmt: skip
        self.expert = expert
        self.beta_init, self.beta_decay = beta_init, beta_decay
        self.n_action_samples = n_action_samples
        self.aggregation_window, self.aggregation_reservoir, self.aggregation_falls = (
            aggregation_window, aggregation_reservoir, aggregation_falls)  # fmt: skip
        self.rollin_deterministic = rollin_deterministic
        self.expert_bc_coef, self.expert_bc_margin = expert_bc_coef, expert_bc_margin
        self.expert_cap = expert_cap
        self.low_signal_fallback = low_signal_fallback
        self.bound_coef, self.rl_coef = bound_coef, rl_coef
        self._init_stage(beyond_after, beyond_reward_floor)
        # saved with the model: the statistics are started from the expert's only once; the imitation iterations
        # (not reset by learn(reset_num_timesteps=True)) let `-i` / a resumed checkpoint continue the beta schedule
        self.obs_stats_from_expert = False
        self.imitation_iterations = 0
        self.low_signal_iteration: int | None = None
        if _init_setup_model:
            self._setup_model()

    # ------------------------------------------------------------------ setup
    def _check_hyperparameters(self) -> None:
        if not isinstance(self.action_space, (spaces.Box, spaces.Discrete)):
            raise ValueError(f"AggreVaTeD supports Box and Discrete action spaces, not {self.action_space}")
        observation_layout(self.observation_space)  # a Dict of Box spaces at most (raises naming the space)
        check_ranges("AggreVaTeD", self, _RANGES)
        self._check_stage()
        for flag in ("expert_cap", "low_signal_fallback"):
            if getattr(self, flag) not in (True, False):
                raise invalid("AggreVaTeD", flag, getattr(self, flag), "True or False")

    def _setup_model(self) -> None:
        self._check_hyperparameters()
        super()._setup_model()
        to_channels_last(self.policy)  # image policies on CPU: the same network, faster training passes
        self._mix_rng = np.random.default_rng(self.seed)
        # the mechanisms' owners (not saved): the watch on the critic's signal, the reinforcement term
        self._low_signal = LowSignalMonitor(bool(self.low_signal_fallback))
        self._reinforcement = ReinforcementTerm(float(self.rl_coef), float(self.gae_lambda))
        self._expert: Expert | None = None
        self._estimator: Estimator | None = None
        self._aggregation: StateAggregationBuffer | None = None
        self._promised: PromisedReturns | None = None  # the roll-in's returns against V*(s0) (train/return_shortfall)
        self._bc_memory: ExpertActionMemory | None = None  # DAgger's: every visited state, with the expert's action
        self._expert_reads_state = False
        self._state_tracker: StateTracker | None = None
        self._timings: dict[str, float] = {}  # seconds of the latest roll-in (logged as time/* by train)
        if self.expert is not None:
            self._set_expert(self.expert)
        self._setup_stage()

    def _set_expert(self, expert: str | os.PathLike[str] | Expert) -> None:
        env_id = env_id_of(self.env)
        loaded = load_expert(expert, env_id=env_id, device=self.device)
        self._reinforcement.attach(loaded, self.clones_expert)
        self._expert_reads_state = expert_reads_state(loaded, self.observation_space, self.action_space, self.env, env_id)
        if not self._expert_reads_state and self.env is not None:
            check_learner_wrapping(loaded, self.env)
        self._estimator = make_estimator(
            loaded, self.action_space, clones_expert=self.clones_expert, n_action_samples=int(self.n_action_samples),
            normalize_advantage=self.normalize_advantage, device=self.device, expert_cap=bool(self.expert_cap))  # fmt: skip
        self._expert, self.expert = loaded, expert
        self._aggregation = StateAggregationBuffer.for_expert(
            loaded, self.observation_space, int(self.aggregation_window), self.n_steps, self.n_envs,
            reservoir=int(self.aggregation_reservoir), falls=int(self.aggregation_falls), seed=self.seed)  # fmt: skip
        if self.low_signal_fallback:  # DAgger's memory from the start, for the fallback to clone on
            self._start_memory(FALLBACK_MEMORY, FALLBACK_MEMORY_BYTES)

    def _start_memory(self, capacity: int, max_bytes: int | None = None) -> None:
        """DAgger's aggregation from now on: the visited states, with the expert's action at each, cloned on by
        :func:`memory_cloning_loss` while the update clones (:class:`ExpertActionMemory`)."""
        self._bc_memory = ExpertActionMemory.for_spaces(capacity, self.observation_space, self.action_space, self.seed,
                                                        max_bytes)  # fmt: skip

    def set_expert(self, expert: str | os.PathLike[str] | Expert) -> None:
        """Attach (or replace) the expert of a model, e.g. after ``AggreVaTeD.load(path)``. The aggregated states are
        kept in the previous expert's view, so they start anew (a warning says how many are dropped); a saved model
        holds none of them (``load`` starts with an empty aggregation, as after ``set_expert``)."""
        held = len(self._aggregation) if self._aggregation is not None else 0
        self._set_expert(expert)
        if held:
            warnings.warn(f"set_expert: the {held} aggregated states of the previous expert are dropped", stacklevel=2)

    @property
    def beta(self) -> float:
        """Expert share of the roll-in at the current imitation iteration n: ``beta_init * beta_decay ** n``."""
        return float(self.beta_init) * float(self.beta_decay) ** self.imitation_iterations

    def _excluded_save_params(self) -> list[str]:
        unsaved = ["expert", "_expert", "_aggregation", "_mix_rng", "_estimator", "_promised", "_timings", "_low_signal",
                   "_reinforcement"]  # fmt: skip
        return [*super()._excluded_save_params(), *unsaved, "_state_tracker", "_expert_reads_state", "_bc_memory"]

    # ------------------------------------------------------------------ roll-in
    def collect_rollouts(
        self,
        env: VecEnv,
        callback: BaseCallback,
        rollout_buffer: RolloutBuffer,
        n_rollout_steps: int,
    ) -> bool:
        """
        Collect experiences with the roll-in mixture and fill a ``RolloutBuffer``.

        Copied from stable_baselines3 2.9.2 ``OnPolicyAlgorithm.collect_rollouts``; changes are marked ``# sb3ext:``.
        """
        assert self._last_obs is not None, "No previous observation was provided"
        rollin_start = time.perf_counter()  # sb3ext: where an iteration's time goes (time/* keys)
        # Switch to eval mode (this affects batch norm / dropout)
        self.policy.set_training_mode(False)

        n_steps = 0
        rollout_buffer.reset()
        # sb3ext: no gSDE (AggreVaTeD's use_sde is always False): SB3's reset_noise calls are left out

        # sb3ext: the roll-in mixture of this iteration (None without an expert)
        beta = self.beta
        rollin = self._make_rollin(env, beta) if self._expert is not None else None

        callback.on_rollout_start()

        while n_steps < n_rollout_steps:
            with th.no_grad():
                # Convert to pytorch tensor or to TensorDict
                obs_tensor = obs_as_tensor(self._last_obs, self.device)  # type: ignore[arg-type]
                # sb3ext: keep the learner's distribution (instead of `self.policy(obs_tensor)`), so that executed
                # expert actions get their learner log-probs without a second forward pass
                distribution = self.policy.get_distribution(obs_tensor)
                action_tensor = distribution.get_actions()
                log_probs = distribution.log_prob(action_tensor)
                values = self.policy.predict_values(obs_tensor)
            actions = action_tensor.cpu().numpy().reshape((-1, *(self.action_space.shape or ())))

            # sb3ext: remember the visited states (learner's and expert's view); mix expert actions in
            if rollin is not None:
                actions, mixed_log_probs = rollin.act(
                    self._last_obs, actions, distribution, self.device, self._last_episode_starts
                )
                if mixed_log_probs is not None:
                    log_probs = mixed_log_probs

            # Rescale and perform action
            clipped_actions = actions

            if isinstance(self.action_space, spaces.Box):
                if self.policy.squash_output:
                    # Unscale the actions to match env bounds
                    # if they were previously squashed (scaled in [-1, 1])
                    clipped_actions = self.policy.unscale_action(clipped_actions)
                else:
                    # Otherwise, clip the actions to avoid out of bound error
                    # as we are sampling from an unbounded Gaussian distribution
                    clipped_actions = np.clip(actions, self.action_space.low, self.action_space.high)

            new_obs, rewards, dones, infos = env.step(clipped_actions)

            self.num_timesteps += env.num_envs

            # sb3ext: transitions for a value-only expert, as the env emitted them (before any bootstrap)
            if rollin is not None:
                rollin.observe(new_obs, rewards, dones, infos)

            # Give access to local variables
            callback.update_locals(locals())
            if not callback.on_step():
                return False

            self._update_info_buffer(infos, dones)
            n_steps += 1

            if isinstance(self.action_space, spaces.Discrete):
                # Reshape in case of discrete action
                actions = actions.reshape(-1, 1)

            # Handle timeout by bootstrapping with value function
            # see GitHub issue #633
            for idx, done in enumerate(dones):
                if (
                    done
                    and infos[idx].get("terminal_observation") is not None
                    and infos[idx].get("TimeLimit.truncated", False)
                ):
                    terminal_obs = self.policy.obs_to_tensor(infos[idx]["terminal_observation"])[0]
                    with th.no_grad():
                        terminal_value = self.policy.predict_values(terminal_obs)[0]  # type: ignore[arg-type]
                    rewards[idx] += self.gamma * terminal_value

            rollout_buffer.add(
                self._last_obs,  # type: ignore[arg-type]
                actions,
                rewards,
                self._last_episode_starts,  # type: ignore[arg-type]
                values,
                log_probs,
            )
            self._last_obs = new_obs  # type: ignore[assignment]
            self._last_episode_starts = dones

        with th.no_grad():
            # Compute value for the last timestep
            values = self.policy.predict_values(obs_as_tensor(new_obs, self.device))  # type: ignore[arg-type]
        if rollin is not None:  # sb3ext: the roll-in ends (V* there, for the reinforcement term)
            rollin.end(new_obs)

        rollout_buffer.compute_returns_and_advantage(last_values=values, dones=dones)

        # sb3ext: log the roll-in mixture
        n_expert_actions = rollin.n_expert_actions if rollin is not None else 0
        self._last_expert_fraction = n_expert_actions / max(1, n_rollout_steps * env.num_envs)
        self.logger.record("rollout/beta", beta)
        self.logger.record("rollout/expert_fraction", self._last_expert_fraction)
        self._timings = {
            "rollin_s": time.perf_counter() - rollin_start,
            "rollin_expert_s": rollin.expert_seconds if rollin is not None else 0.0,
        }

        callback.update_locals(locals())

        callback.on_rollout_end()

        return True

    def _make_rollin(self, env: VecEnv, beta: float) -> RollIn:
        """The expert/learner mixture of one roll-in, recording the visited states in the aggregation."""
        assert self._expert is not None and self._aggregation is not None
        learner_mode = np.arange(env.num_envs) < int(round(float(self.rollin_deterministic) * env.num_envs))
        if self._expert_reads_state and (self._state_tracker is None or self._state_tracker.base is not base_vec_env(env)):
            self._state_tracker = StateTracker(env)  # the expert observes info["state"] (a new env: a new tracker)
        self._promised = PromisedReturns.renew(self._promised, self._expert, env.num_envs)
        shaped = self._reinforcement.begin(self.n_steps, env.num_envs, self._expert)
        return RollIn(self._expert, beta, self._mix_rng, self._aggregation, self.get_vec_normalize_env(), learner_mode,
                      self._state_tracker if self._expert_reads_state else None, observation_normalizer(self.env),
                      self._promised, self._bc_memory, shaped)  # fmt: skip

    # ------------------------------------------------------------------ update
    def train(self) -> None:
        """One iteration: the reinforcement term's passes (``rl_coef``), then the imitation update on the re-scored
        aggregated states, with the watch on the critic's signal (``low_signal_fallback``) between the two."""
        if self._expert is None or self._aggregation is None or self._estimator is None:
            raise ValueError(_NO_EXPERT_MESSAGE)
        self.policy.set_training_mode(True)
        self._update_learning_rate(self.policy.optimizer)
        clip_range = self.clip_range(self._current_progress_remaining)  # type: ignore[operator]
        rollout = next(self.rollout_buffer.get(batch_size=None))  # the value head's targets (flattens the buffer)
        metrics, timings = ImitationMetrics(), dict(self._timings)
        shortfall = self._promised.shortfall() if self._promised is not None else None
        # hook: the term's passes come first, while the policy is still the roll-in's (PPO's ratio and KL stop then
        # measure from the policy that sampled the steps); it says how much the imitation still steps (its weight)
        weight, rl_logs = self._reinforcement.update(self, shortfall, self._imitates(), clip_range, metrics, timings)
        start = time.perf_counter()
        view = learner_view(observation_normalizer(self.env), self.observation_space.dtype)
        learner_obs, scores, stats = self._estimator.samples(self.policy, self._aggregation, view)
        timings["scoring_s"] = time.perf_counter() - start
        self._check_critic_signal(stats)  # hook: a critic shown untrustworthy turns the update into cloning
        start = time.perf_counter()
        memory = self._imitate(learner_obs, scores, rollout, view, weight, clip_range, metrics)
        timings["update_s"] = time.perf_counter() - start
        self.imitation_iterations += 1
        fit = explained_variance(self.rollout_buffer.values.flatten(), self.rollout_buffer.returns.flatten())
        std = th.exp(self.policy.log_std).mean().item() if hasattr(self.policy, "log_std") else None
        record_iteration(self.logger, metrics, {**stats, **rl_logs}, timings, explained_variance=fit, std=std,
                         clip_range=clip_range, return_shortfall=shortfall, aggregated_states=batch_size_of(learner_obs),
                         low_signal_imitation=float(self.low_signal_iteration is not None),
                         bc_memory_states=memory.size if memory is not None else None,
                         expert_ent_coef=self._expert.ent_coef, imitation_iterations=self.imitation_iterations,
                         aggregated_falls=self._aggregation.n_falls if self._aggregation.falls else None)  # fmt: skip
        self.logger.record("train/n_updates", self._n_updates, exclude="tensorboard")

    def _imitate(
        self, learner_obs: Any, scores: Any, rollout: Any, view: Any, weight: float, clip_range: float,
        metrics: ImitationMetrics,
    ) -> ExpertActionMemory | None:  # fmt: skip
        """The imitation update: ``n_epochs`` over the aggregated states in minibatches of ``batch_size``, on the
        critic's clipped surrogate (or, cloning, the expert's actions) beside the value head's regression on the
        roll-in's returns. Its steps shrink by ``weight`` (a loss weight would not scale Adam's steps; 0: none).
        Returns DAgger's memory where it was cloned on."""
        imitate = self._imitates()
        memory = self._bc_memory if imitate and self._bc_memory is not None and self._bc_memory.size else None
        weights = LossWeights.of(imitate, self.expert_bc_coef, self.expert_bc_margin, self.bound_coef, self.ent_coef)
        for group in self.policy.optimizer.param_groups:
            group["lr"] *= weight
        groups, floor = actor_critic_parameters(self.policy), log_std_floor_of(self.policy, self.action_space)
        n_states, n_rollout = batch_size_of(learner_obs), len(rollout.returns)
        continue_training = weight > 0.0  # fully weaned: the reinforcement term alone moves the policy
        for epoch in range(self.n_epochs if continue_training else 0):
            permutation = th.randperm(n_states, device=self.device)
            for start in range(0, n_states, self.batch_size):
                idx = permutation[start : start + self.batch_size]
                value_idx = th.randint(n_rollout, (min(self.batch_size, n_rollout),), device=self.device)
                distribution, values = distribution_and_values(
                    self.policy, select(learner_obs, idx), select(rollout.observations, value_idx)
                )
                terms = surrogate_terms(scores, idx, distribution, clip_range, self.action_space, self.device,
                                        weights.expert_bc_margin)  # fmt: skip
                value_loss = F.mse_loss(rollout.returns[value_idx], values)
                # the trust region guards the critic-driven term; the pull toward the expert's action has a fixed
                # target and goes on without it for the rest of the iteration (no pull: the epochs stop, as PPO's)
                if not imitate and weights.policy > 0 and kl_exceeded(terms.approx_kl.item(), self.target_kl):
                    if self.verbose >= 1:
                        kept = "the pull goes on" if weights.expert_bc > 0 else "stopping"
                        print(f"Max kl at epoch {epoch} ({terms.approx_kl.item():.3f}): the critic's term stops, {kept}")
                    if weights.expert_bc <= 0:
                        continue_training = False
                        break
                    weights = dataclasses.replace(weights, policy=0.0)
                loss = weights.total(terms) + self.vf_coef * value_loss
                if memory is not None:
                    memory_loss = memory_cloning_loss(self.policy, memory, self.batch_size, view, self.action_space)
                    loss = loss + weights.expert_bc * memory_loss
                    metrics.expert_bc_memory.append(memory_loss.detach())
                optimizer_step(self.policy, self.policy.optimizer, loss, groups, self.max_grad_norm, floor)
                metrics.add(terms, value_loss)
            self._n_updates += 1
            if not continue_training:
                break
        return memory

    def _check_critic_signal(self, stats: dict[str, th.Tensor]) -> None:
        """Watch the critic's signal (:class:`LowSignalMonitor`); with ``low_signal_fallback``, become DAgger from the
        iteration on which it is first shown untrustworthy (``low_signal_iteration``, saved with the model)."""
        assert self._expert is not None
        distrusted = self._low_signal.check(stats, self._promised, self.imitation_iterations, self._expert)
        if distrusted and self.low_signal_fallback and self.low_signal_iteration is None:
            self.low_signal_iteration = self.imitation_iterations

    def _imitates(self) -> bool:
        """Whether this iteration clones the expert (DAgger): asked for, or the critic says too little."""
        return self.clones_expert or self.low_signal_iteration is not None

    # ------------------------------------------------------------------ learn
    def _setup_learn(  # type: ignore[override]
        self, total_timesteps: int, callback: MaybeCallback = None, reset_num_timesteps: bool = True, *args: Any
    ) -> Any:
        """SB3's, then on a fresh model the learner's observation statistics start from the expert's, once
        (:func:`start_from_expert_statistics`)."""
        if self._expert is None:
            raise ValueError(_NO_EXPERT_MESSAGE)
        if self._state_tracker is not None and (reset_num_timesteps or self._last_obs is None):
            self._state_tracker.reset()  # SB3's _setup_learn resets the env: the states come from its reset infos
        fresh = self.num_timesteps == 0  # before SB3 resets the counter: a loaded, trained model is not fresh
        result = super()._setup_learn(total_timesteps, callback, reset_num_timesteps, *args)
        normalizer = observation_normalizer(self.env)
        if fresh and not (self.obs_stats_from_expert or self._expert_reads_state) and normalizer is not None:
            self.obs_stats_from_expert = start_from_expert_statistics(normalizer, self._expert, self.verbose)
            if self.obs_stats_from_expert:  # the first observation, on the expert's scale
                self._last_obs = normalizer.normalize_obs(normalizer.get_original_obs())  # type: ignore[assignment]
        return result


#: AggreVaTeD's own numeric parameters: (an integer?, lowest, highest, what is allowed)
_RANGES = {
    "beta_init": (False, 0.0, 1.0, "a number in [0, 1]"),
    "beta_decay": (False, 0.0, 1.0, "a number in [0, 1]"),
    "n_action_samples": (True, 2, math.inf, "an integer >= 2"),
    "aggregation_window": (True, 1, math.inf, "an integer >= 1"),
    "aggregation_reservoir": (True, 0, math.inf, "an integer >= 0"),
    "aggregation_falls": (True, 0, math.inf, "an integer >= 0"),
    "rollin_deterministic": (False, 0.0, 1.0, "a fraction of the envs in [0, 1]"),
    "expert_bc_coef": (False, 0.0, math.inf, "a number >= 0"),
    "expert_bc_margin": (False, -math.inf, math.inf, "a number (standard deviations of the samples' Q*; -inf: every state)"),
    "bound_coef": (False, 0.0, math.inf, "a number >= 0"),
    "rl_coef": (False, 0.0, math.inf, "a number >= 0 (0: off)"),
}

#: the fallback's DAgger memory: every visited state up to this many, then a uniform sample, in at most 1 GiB
FALLBACK_MEMORY = 1_000_000
FALLBACK_MEMORY_BYTES = 2**30

_NO_EXPERT_MESSAGE = (
    "AggreVaTeD needs an expert to learn: pass expert=<zoo folder or .zip> to the constructor, "
    "call model.set_expert(...) after load(), or with rl_zoo3 add --hyperparams expert:\"'<path>'\""
)
