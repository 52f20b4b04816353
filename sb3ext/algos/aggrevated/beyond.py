"""The stage after the imitation: SB3's SAC, kickstarted from the imitation learner (``beyond_after``).

The imitation stops at the expert's level; the learner's own returns can take it further. After ``beyond_after`` env
steps of imitation, :class:`~sb3ext.algos.aggrevated.AggreVaTeD` hands its env over to :class:`KickstartSAC`, SB3's
SAC with three changes and one option, each from the literature on reincarnating RL:

- the imitation learner (the *prior*) plays SAC's warm-up (and on, until one of its episodes has ended), so the
  first replay is its own (Uchendu et al.'s JSRL, Zhou et al.'s WSRL: a fresh critic first sees the policy it must
  not wipe out). Each env's first episode of the stage is played uniformly at random instead: its return is the
  shortfall's zero below;
- SAC's squashed actor is cloned onto the prior on the warm-up's states before its first update;
- optionally (``beyond_reward_floor``), the critic learns from rewards floored at a value: a fall's large penalty
  (Hardcore's -100) softened for the critic alone, as the cheapest published Hardcore recipes do;
- the actor's loss carries a pull toward the prior, ``lam * mean|Q| * |tanh(mu(s)) - a_prior(s)|^2`` (TD3+BC's
  scale, Fujimoto & Gu 2021, so that ``lam`` is a share of the critic's pull), ``lam`` = :data:`ANCHOR` times the
  actor's return shortfall over its last :data:`RECENT_EPISODES` episodes on a normalised score (QDagger's rule,
  Agarwal et al. 2022): 0 at or above the prior's own return, :data:`ANCHOR` at the random episodes'. It joins SAC's
  own ``train`` through two torch hooks (the critics' output kept, the pull's gradient added before the actor's
  optimizer steps), so that SAC's update is SB3's and not a copy.

The observation statistics of the imitation are frozen from the hand-over on: the prior and the replay see one scale.
Measured on the ``beyond`` page (``docs/benchmarks/beyond.md``): the lander, Hopper, BipedalWalker-v3, Walker2d-v5 and,
with the floor, BipedalWalkerHardcore-v3; the variants measured no better are on the history page.
"""

from __future__ import annotations

import math
import os
import warnings
from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3 import SAC
from stable_baselines3.common.buffers import ReplayBuffer
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.type_aliases import MaybeCallback, ReplayBufferSamples
from stable_baselines3.common.utils import configure_logger, obs_as_tensor
from torch.nn import functional as F

from sb3ext.algos.aggrevated.normalization import observation_normalizer
from sb3ext.algos.aggrevated.replay import load_replay, save_replay
from sb3ext.common.validation import check_ranges

#: the model that owns the stage: an AggreVaTeD (not imported here: it imports this module)
AggreVaTeD = Any

#: the prior: observations (as SAC's buffer gives them) -> (its deterministic action, a sampled one), in [-1, 1]
Prior = Callable[[th.Tensor], tuple[th.Tensor, th.Tensor]]

#: SAC's settings in the stage: the cost Hardcore's 1M env steps in 2 CPU-hours asks for ([256, 256], minibatch 256,
#: one gradient step per 4 env steps), SAC's own entropy target, a replay of the zoo's size
NET_ARCH = [256, 256]
BATCH_SIZE = 256
UPDATES_PER_ENV_STEP = 0.25
BUFFER_SIZE = 1_000_000
ENT_COEF = "auto_0.1"
#: env steps of the warm-up (the prior's, and the random episodes'), then gradient steps of the clone
WARMUP_STEPS = 10_000
CLONE_STEPS = 5_000
#: the pull's weight at a random policy's return, and the actor's episodes its shortfall is averaged over
ANCHOR = 1.0
RECENT_EPISODES = 10
#: the clone's targets stay inside tanh's range, where the squashed actor can reach them
CLONE_TARGET_LIMIT = 0.97

RANDOM, PRIOR, ACTOR = "random", "prior", "actor"  # who plays an env's current episode


def anchor_weight(anchor: float, recent: float, random_return: float, prior_return: float) -> float:
    """``anchor * clip(1 - (recent - random_return) / (prior_return - random_return), 0, 1)``."""
    span = prior_return - random_return
    if not span > 0:
        return 0.0
    return float(anchor * np.clip(1.0 - (recent - random_return) / span, 0.0, 1.0))


def schedule(n_envs: int) -> tuple[int, int]:
    """``(train_freq, gradient_steps)`` giving :data:`UPDATES_PER_ENV_STEP` for ``n_envs`` envs."""
    train_freq = max(1, round(1.0 / (UPDATES_PER_ENV_STEP * n_envs)))
    return train_freq, max(1, round(UPDATES_PER_ENV_STEP * n_envs * train_freq))


class KickstartSAC(SAC):
    """SAC kickstarted from a prior policy (see the module's docstring): a prior-played warm-up after random first
    episodes, a clone of the actor onto the prior, and a pull toward it weighted by the actor's return shortfall.

    :param prior: the prior (None: plain SAC); not saved
    :param random_return: the random first episodes' mean return (None: not yet measured)
    :param prior_return: the prior's warm-up episodes' mean return (None: not yet measured)
    :param reward_floor: the replay's rewards floored at this (None: as the env gives them)
    """

    def __init__(
        self, *args: Any, prior: Prior | None = None, random_return: float | None = None,
        prior_return: float | None = None, reward_floor: float | None = None, **kwargs: Any,
    ) -> None:  # fmt: skip
        self.prior = prior
        self.reward_floor = reward_floor
        self.random_return, self.prior_return = random_return, prior_return
        self._played: dict[str, list[float]] = {RANDOM: [], PRIOR: []}
        self._recent: deque[float] = deque(maxlen=RECENT_EPISODES)  # the actor's own episodes
        self._players: list[str] = []
        self.steps_before = 0  # the model's env steps before the stage's first (its logs' count starts there)
        super().__init__(*args, **kwargs)

    def _excluded_save_params(self) -> list[str]:
        transient = ["prior", "reward_floor", "_played", "_recent", "_players", "steps_before"]  # the owner's fields
        transient += ["_lam_now", "_batch", "_q_pi", "_gaps"]
        return [*super()._excluded_save_params(), *transient]

    def lam(self) -> float:
        """The pull's weight now: :data:`ANCHOR` until the actor's episodes can be compared, then by their shortfall."""
        if self.prior is None:
            return 0.0
        if self.num_timesteps < self.learning_starts or not self._recent:
            return ANCHOR
        if self.random_return is None or self.prior_return is None:
            return ANCHOR
        return anchor_weight(ANCHOR, float(np.mean(self._recent)), self.random_return, self.prior_return)

    def _player(self) -> str:
        """Who plays an episode that begins now."""
        if self.random_return is None:
            return RANDOM
        warming_up = self.num_timesteps < self.learning_starts or self.prior_return is None  # one episode at least
        return PRIOR if self.prior is not None and warming_up else ACTOR

    def _setup_learn(  # type: ignore[override]
        self, total_timesteps: int, callback: MaybeCallback = None, reset_num_timesteps: bool = True,
        tb_log_name: str = "run", progress_bar: bool = False,
    ) -> Any:  # fmt: skip
        """SB3's; where it resets the env, every episode begins now, with its player."""
        resets = reset_num_timesteps or self._last_obs is None or len(self._players) != self.n_envs
        result = super()._setup_learn(total_timesteps, callback, reset_num_timesteps, tb_log_name, progress_bar)
        if resets:
            self._players = [self._player()] * self.n_envs
        return result

    def _sample_action(self, learning_starts: int, action_noise: Any = None, n_envs: int = 1) -> tuple[np.ndarray, np.ndarray]:
        """SAC's (uniform during the warm-up, the actor after), with the prior on the envs it plays and uniform
        actions on the envs whose first, random episode goes on past the warm-up."""
        action, buffer_action = super()._sample_action(learning_starts, action_noise, n_envs)
        players = np.array(self._players[:n_envs])
        if not isinstance(self.action_space, spaces.Box) or not (players != ACTOR).any():
            return action, buffer_action
        scaled = np.array(buffer_action, copy=True)
        random = players == RANDOM
        if random.any():
            uniform = np.array([self.action_space.sample() for _ in range(int(random.sum()))])
            scaled[random] = self.policy.scale_action(uniform)
        playing = players == PRIOR
        if playing.any() and self.prior is not None:
            _, sampled = self.prior(obs_as_tensor(self._last_obs, self.device))  # type: ignore[arg-type]
            scaled[playing] = sampled.cpu().numpy()[playing]
        return self.policy.unscale_action(scaled), scaled

    def _update_info_buffer(self, infos: list[dict[str, Any]], dones: np.ndarray | None = None) -> None:
        """SB3's, and each ended episode's return to its player's record; the env's next episode gets a player."""
        super()._update_info_buffer(infos, dones)
        for idx, info in enumerate(infos):
            episode = info.get("episode")
            if episode is None or idx >= len(self._players):
                continue
            player = self._players[idx]
            (self._recent.append if player == ACTOR else self._played[player].append)(float(episode["r"]))
            if player == RANDOM:
                self.random_return = float(np.mean(self._played[RANDOM]))
            elif player == PRIOR:
                self.prior_return = float(np.mean(self._played[PRIOR]))
            self._players[idx] = self._player()

    def _store_transition(
        self, replay_buffer: ReplayBuffer, buffer_action: np.ndarray, new_obs: Any, reward: np.ndarray,
        dones: np.ndarray, infos: list[dict[str, Any]],
    ) -> None:  # fmt: skip
        """SB3's, then the stored rewards floored at ``reward_floor``: SB3 stores VecNormalize's original reward, not
        the ``reward`` it is passed, so the floor goes on the row it wrote."""
        super()._store_transition(replay_buffer, buffer_action, new_obs, reward, dones, infos)
        if self.reward_floor is not None:
            last = (replay_buffer.pos - 1) % replay_buffer.buffer_size
            np.maximum(replay_buffer.rewards[last], self.reward_floor, out=replay_buffer.rewards[last])

    def dump_logs(self) -> None:
        """SB3's, on the model's env-step count (``steps_before``: the env steps before the stage) rather than the
        stage's own, so that the stage's logs go on from the imitation's."""
        counts = self.num_timesteps, self._num_timesteps_at_start
        self.num_timesteps, self._num_timesteps_at_start = (count + self.steps_before for count in counts)
        try:
            super().dump_logs()
        finally:
            self.num_timesteps, self._num_timesteps_at_start = counts

    def clone(self, batch_size: int) -> None:
        """The actor's deterministic action regressed onto the prior's on the buffer's states."""
        assert self.prior is not None and self.replay_buffer is not None
        for _ in range(CLONE_STEPS):
            obs = self.replay_buffer.sample(batch_size, env=self._vec_normalize_env).observations
            target, _ = self.prior(obs)  # type: ignore[arg-type]
            loss = F.mse_loss(self.actor(obs, deterministic=True), target.clamp(-CLONE_TARGET_LIMIT, CLONE_TARGET_LIMIT))
            self.actor.optimizer.zero_grad()
            loss.backward()
            self.actor.optimizer.step()
        self.logger.record("beyond/clone_loss", loss.item())

    def _setup_model(self) -> None:
        """SAC's; the pull enters SAC's own ``train`` through two torch hooks: the critic's output is kept, and the
        actor's optimizer adds the pull's gradient before each step."""
        super()._setup_model()
        self._lam_now = 0.0  # the pull's weight in the current train call
        self._batch: ReplayBufferSamples | None = None  # the batch of the current gradient step
        self._q_pi: tuple[th.Tensor, ...] | None = None  # the critics' last output: the actor's actions' values
        self._gaps: list[float] = []  # the pull's gap to the prior at each of the current train call's steps
        self.critic.register_forward_hook(self._record_q)
        self.actor.optimizer.register_step_pre_hook(self._pull)

    def _record_q(self, module: th.nn.Module, args: Any, output: tuple[th.Tensor, ...]) -> None:
        """The critics' output; the last before the actor's step is their values of the actor's actions."""
        self._q_pi = output

    def _pull(self, optimizer: th.optim.Optimizer, args: Any, kwargs: Any) -> None:
        """Before the actor's step, the pull's gradient joins the actor's loss's: ``lam * mean|min Q| * |tanh(mu(s)) -
        a_prior(s)|^2`` on the step's batch, ``min Q`` the critics' values of the actor's actions in that loss."""
        if self._lam_now <= 0 or self._batch is None or self.prior is None or self._q_pi is None:
            return
        obs = self._batch.observations
        prior_actions, _ = self.prior(obs)  # type: ignore[arg-type]
        gap = ((self.actor(obs, deterministic=True) - prior_actions) ** 2).sum(dim=1).mean()
        scale = th.cat(self._q_pi, dim=1).min(dim=1).values.abs().mean().detach()
        (self._lam_now * scale * gap).backward()
        self._gaps.append(gap.item())

    def train(self, gradient_steps: int, batch_size: int = 64) -> None:
        """SAC's (unchanged: the pull joins through :meth:`_pull`), the actor cloned onto the prior before the first
        update."""
        if self._n_updates == 0 and self.prior is not None:
            self.clone(batch_size)
        self._lam_now = self.lam()
        buffer = self.replay_buffer
        assert buffer is not None
        sample = buffer.sample

        def recorded(*args: Any, **kwargs: Any) -> ReplayBufferSamples:
            self._batch = sample(*args, **kwargs)
            return self._batch

        buffer.sample = recorded  # type: ignore[method-assign]
        try:
            super().train(gradient_steps, batch_size)
        finally:
            del buffer.sample
            self._batch, self._q_pi = None, None
        self.logger.record("beyond/lam", self._lam_now)
        if self._gaps:
            self.logger.record("beyond/prior_gap", float(np.mean(self._gaps)))
            self._gaps = []
        for name, value in (("random_return", self.random_return), ("prior_return", self.prior_return)):
            if value is not None:
                self.logger.record(f"beyond/{name}", value)


def prior_of(owner: AggreVaTeD) -> Prior:
    """The imitation learner as SAC's prior: its Gaussian's mean and a sample, clipped to the action bounds and
    scaled to SAC's [-1, 1]."""
    space = owner.action_space
    assert isinstance(space, spaces.Box)
    low = th.as_tensor(space.low, dtype=th.float32, device=owner.device)
    high = th.as_tensor(space.high, dtype=th.float32, device=owner.device)

    def prior(obs: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
        with th.no_grad():
            distribution = owner.policy.get_distribution(obs)
            mode, sample = distribution.mode(), distribution.sample()
        return tuple((2.0 * (a - low) / (high - low) - 1.0).clamp(-1.0, 1.0) for a in (mode, sample))  # type: ignore[return-value]

    return prior


def build_stage(owner: AggreVaTeD) -> KickstartSAC:
    """The stage of ``owner``, from its spaces and saved ``stage_*`` fields; without an env (``load`` for
    ``predict``) too. Its replay holds one transition until it learns (:func:`full_replay`)."""
    alias = next(name for name, cls in owner.policy_aliases.items() if cls is owner.policy_class)  # SAC's names too
    train_freq, gradient_steps = schedule(owner.n_envs)
    stage = KickstartSAC(
        alias, env=None, learning_rate=3e-4, buffer_size=1, learning_starts=WARMUP_STEPS,
        batch_size=BATCH_SIZE, gamma=float(owner.gamma), train_freq=train_freq, gradient_steps=gradient_steps,
        ent_coef=ENT_COEF, target_entropy=-float(np.prod(owner.action_space.shape)),
        policy_kwargs={"net_arch": list(NET_ARCH)}, verbose=0, seed=owner.seed,
        device=owner.device, prior=prior_of(owner), random_return=owner.stage_random_return,
        prior_return=owner.stage_prior_return, reward_floor=owner.beyond_reward_floor, _init_setup_model=False,
    )  # fmt: skip
    stage.observation_space, stage.action_space, stage.n_envs = owner.observation_space, owner.action_space, owner.n_envs
    stage.verbose = owner.verbose  # after the constructor: the model has said which device it uses
    stage._setup_model()
    stage.num_timesteps, stage._n_updates = int(owner.stage_timesteps), int(owner.stage_n_updates)
    return stage


def full_replay(stage: KickstartSAC) -> None:
    """Give ``stage`` its full replay (:data:`BUFFER_SIZE`), once, before it learns or loads one."""
    if stage.buffer_size == BUFFER_SIZE:
        return
    stage.buffer_size = BUFFER_SIZE
    assert stage.replay_buffer_class is not None  # set by SAC's _setup_model
    stage.replay_buffer = stage.replay_buffer_class(  # as SB3's OffPolicyAlgorithm._setup_model builds it
        BUFFER_SIZE, stage.observation_space, stage.action_space, device=stage.device, n_envs=stage.n_envs,
        optimize_memory_usage=stage.optimize_memory_usage, **(stage.replay_buffer_kwargs or {}),
    )  # fmt: skip


def sync_fields(owner: AggreVaTeD, stage: KickstartSAC) -> None:
    """The stage's counters and measured returns onto ``owner``'s saved fields."""
    owner.stage_timesteps, owner.stage_n_updates = int(stage.num_timesteps), int(stage._n_updates)
    owner.stage_random_return, owner.stage_prior_return = stage.random_return, stage.prior_return


class OwnerCallback(BaseCallback):
    """Runs the caller's callbacks, bound to the AggreVaTeD model, from the stage's ``learn``: each step sets the
    model's env-step count from the stage's, so that evaluations, checkpoints and pruning see the model they were
    given (its ``predict`` and ``save`` reach the stage)."""

    def __init__(self, inner: BaseCallback, owner: AggreVaTeD, stage: KickstartSAC) -> None:
        super().__init__()
        self.inner, self.owner, self.stage = inner, owner, stage
        self.offset = owner.num_timesteps - stage.num_timesteps

    def _sync(self) -> None:
        self.owner.num_timesteps = self.offset + self.stage.num_timesteps
        sync_fields(self.owner, self.stage)

    def _on_training_start(self) -> None:
        self._sync()  # the stage's total, on the model's count (a progress bar reads it)
        total = self.offset + int(self.locals.get("total_timesteps", self.stage.num_timesteps))
        self.inner.on_training_start({**self.locals, "total_timesteps": total}, self.globals)

    def _on_rollout_start(self) -> None:
        self.inner.on_rollout_start()

    def _on_step(self) -> bool:
        self._sync()
        self.inner.update_locals(self.locals)
        return self.inner.on_step()

    def _on_rollout_end(self) -> None:
        self.inner.on_rollout_end()

    def _on_training_end(self) -> None:
        self._sync()
        self.inner.on_training_end()


def learn_stage(
    owner: AggreVaTeD, stage: KickstartSAC, total_timesteps: int, callback: MaybeCallback, log_interval: int,
    tb_log_name: str, progress_bar: bool,
) -> None:  # fmt: skip
    """``total_timesteps`` env steps of the stage on ``owner``'s env, its observation statistics frozen, its logger
    and callbacks ``owner``'s."""
    if owner.env is None:
        raise ValueError("AggreVaTeD's stage beyond the expert needs an env: pass env= to load(), or call set_env()")
    normalizer = observation_normalizer(owner.env)
    if normalizer is not None:
        normalizer.training = False  # the prior's scale, and one scale for the replay
    if stage.env is not owner.env:
        stage.set_env(owner.env)
    full_replay(stage)
    assert stage.replay_buffer is not None
    if stage.num_timesteps > 0 and stage.replay_buffer.size() == 0:  # resumed from a checkpoint alone
        warnings.warn(
            f"AggreVaTeD's stage beyond the expert resumes at {stage.num_timesteps} env steps without its replay "
            f"buffer: the prior refills it for {WARMUP_STEPS} env steps before the updates go on (keep the buffer with "
            "save_replay_buffer, or the zoo's --save-replay-buffer, and load_replay_buffer before learn)",
            stacklevel=3,
        )
        stage.learning_starts = stage.num_timesteps + WARMUP_STEPS
    if not getattr(owner, "_custom_logger", False) and not hasattr(owner, "_logger"):
        owner.set_logger(configure_logger(owner.verbose, owner.tensorboard_log, tb_log_name, True))
    stage.set_logger(owner.logger)
    if owner.ep_info_buffer is None or owner.ep_success_buffer is None:
        owner.ep_info_buffer = deque(maxlen=owner._stats_window_size)
        owner.ep_success_buffer = deque(maxlen=owner._stats_window_size)
    stage.ep_info_buffer, stage.ep_success_buffer = owner.ep_info_buffer, owner.ep_success_buffer  # one record
    forward = OwnerCallback(owner._init_callback(callback, progress_bar), owner, stage)
    stage.steps_before = forward.offset
    stage.learn(total_timesteps, callback=forward, log_interval=log_interval, reset_num_timesteps=False)
    sync_fields(owner, stage)


class StageHost:
    """The stage's side of its owner (a mixin of :class:`~sb3ext.algos.aggrevated.AggreVaTeD`, before PPO): the
    hand-over in ``learn``, and ``predict``, the saved networks and the replay buffer, which are the stage's once it
    has begun. The owner calls :meth:`_init_stage`, :meth:`_check_stage` and :meth:`_setup_stage` from its own."""

    _stage: KickstartSAC | None

    def _init_stage(self: AggreVaTeD, beyond_after: int | None, beyond_reward_floor: float | None) -> None:
        """The stage's saved fields: its env steps and gradient steps once it has begun, and the returns its pull is
        weighed against; its networks are saved under ``_stage.``."""
        self.beyond_after, self.beyond_reward_floor = beyond_after, beyond_reward_floor
        self.stage_timesteps, self.stage_n_updates = 0, 0
        self.stage_random_return: float | None = None
        self.stage_prior_return: float | None = None

    def _check_stage(self: AggreVaTeD) -> None:
        if self.beyond_reward_floor is not None:
            floor = {"beyond_reward_floor": (False, -math.inf, math.inf, "a number or None (off)")}
            check_ranges(type(self).__name__, self, floor)
        if self.beyond_after is None:
            return
        check_ranges(type(self).__name__, self, {"beyond_after": (True, 0, math.inf, "an integer >= 0 or None (off)")})
        policy = next((n for n, c in self.policy_aliases.items() if c is self.policy_class), None)
        if not isinstance(self.action_space, spaces.Box) or policy not in ("MlpPolicy", "MultiInputPolicy"):
            raise ValueError(
                f"{type(self).__name__}: beyond_after={self.beyond_after!r} needs Box actions and vector observations "
                f"(MlpPolicy, MultiInputPolicy); this model has {self.action_space} and {policy or self.policy_class}"
            )

    def _setup_stage(self: AggreVaTeD) -> None:
        self._stage = build_stage(self) if self.stage_timesteps else None  # a model saved mid-stage has one

    def _excluded_save_params(self: AggreVaTeD) -> list[str]:
        return [*super()._excluded_save_params(), "_stage"]  # type: ignore[misc]

    def _get_torch_save_params(self: AggreVaTeD) -> tuple[list[str], list[str]]:
        """The owner's, and the stage's (its networks, optimizers and entropy coefficient) under ``_stage.``."""
        state_dicts, variables = super()._get_torch_save_params()  # type: ignore[misc]
        if self._stage is not None:
            stage_dicts, stage_variables = self._stage._get_torch_save_params()
            state_dicts += [f"_stage.{name}" for name in stage_dicts]
            variables += [f"_stage.{name}" for name in stage_variables]
        return state_dicts, variables

    def learn(
        self: AggreVaTeD, total_timesteps: int, callback: MaybeCallback = None, log_interval: int = 1,
        tb_log_name: str = "AggreVaTeD", reset_num_timesteps: bool = True, progress_bar: bool = False,
    ) -> AggreVaTeD:  # fmt: skip
        """The owner's (PPO's, logging to TensorBoard under ``AggreVaTeD``); with ``beyond_after``, the imitation up to
        that many env steps (over all calls), then the stage for the rest."""
        learn = super().learn  # type: ignore[misc]
        if self.beyond_after is None and self._stage is None:
            return learn(total_timesteps, callback, log_interval, tb_log_name, reset_num_timesteps, progress_bar)
        imitated = self.imitation_iterations * self.n_steps * self.n_envs
        imitation = 0 if self._stage is not None else min(total_timesteps, max(0, int(self.beyond_after or 0) - imitated))
        start = 0 if reset_num_timesteps else self.num_timesteps
        if imitation > 0:
            learn(imitation, callback, log_interval, tb_log_name, reset_num_timesteps, progress_bar)
            if self.num_timesteps - start < imitation:
                return self  # a callback stopped the training
        elif reset_num_timesteps:
            self.num_timesteps = 0
        remaining = total_timesteps - (self.num_timesteps - start)
        if remaining > 0:
            if self._stage is None:
                self._stage = build_stage(self)
            learn_stage(self, self._stage, remaining, callback, log_interval, tb_log_name, progress_bar)
        return self

    def predict(
        self: AggreVaTeD, observation: Any, state: tuple[np.ndarray, ...] | None = None,
        episode_start: np.ndarray | None = None, deterministic: bool = False,
    ) -> tuple[np.ndarray, tuple[np.ndarray, ...] | None]:  # fmt: skip
        """The imitation learner's action, or the stage's once it has updated its actor (before, in the stage's
        warm-up, its actor is untrained: the imitation learner still acts)."""
        if self._stage is not None and self._stage._n_updates > 0:
            return self._stage.predict(observation, state, episode_start, deterministic)
        return super().predict(observation, state, episode_start, deterministic)  # type: ignore[misc]

    @property
    def replay_buffer(self: AggreVaTeD) -> ReplayBuffer | None:
        """The stage's replay (None before it begins): SB3's checkpoint callback saves it when asked."""
        return self._stage.replay_buffer if self._stage is not None else None

    def save_replay_buffer(self: AggreVaTeD, path: str | os.PathLike[str]) -> None:
        """Write the stage's replay to ``path`` as plain arrays (:mod:`~sb3ext.algos.aggrevated.replay`); nothing
        before the stage begins."""
        if self._stage is not None and self._stage.replay_buffer is not None:
            save_replay(self._stage.replay_buffer, path)

    def load_replay_buffer(self: AggreVaTeD, path: str | os.PathLike[str], truncate_last_traj: bool = True) -> None:
        """Read a replay written by :meth:`save_replay_buffer` into the stage's, without unpickling."""
        if self._stage is None:
            raise ValueError(f"{path}: a replay buffer goes into the stage beyond the expert; this model has not begun it")
        full_replay(self._stage)
        assert self._stage.replay_buffer is not None
        load_replay(self._stage.replay_buffer, path, truncate_last_traj)
