"""Evaluation against the expert: reference returns, the gap closed, and the first crossing of a threshold.

* :func:`episode_returns`: returns (and lengths) of seeded episodes of a policy, or of uniformly random
  actions; the one implementation the demo, the benchmarks and :class:`ExpertGapEvalCallback` share.
* :func:`first_crossing`: the first evaluation at or above a threshold, and the fraction of later
  evaluations that hold it.
* :class:`ExpertGapEvalCallback`: SB3's ``EvalCallback`` that also measures the expert's and a random
  policy's returns once, and logs the learner's place between them after every evaluation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
from stable_baselines3.common.callbacks import EvalCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import VecEnv, VecNormalize
from stable_baselines3.common.vec_env.stacked_observations import StackedObservations

from sb3ext.common.expert_state import STATE_KEY
from sb3ext.experts import Expert, load_expert
from sb3ext.experts.recorded import check_recorded_level


class StackedFrames(gym.ObservationWrapper):
    """SB3's ``VecFrameStack`` for a single env (its ``StackedObservations``: the last ``n_stack`` observations on the
    channel axis, zeros before the first of an episode; every key of a ``Dict`` space); evaluation replays a
    frame-stacked learner with it."""

    def __init__(self, env: gym.Env, n_stack: int):
        super().__init__(env)
        self._stack = StackedObservations(1, n_stack, env.observation_space)  # type: ignore[arg-type]
        self.observation_space = self._stack.stacked_observation_space

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        return _single(self._stack.reset(_batched(obs))), info

    def observation(self, observation: Any) -> Any:
        stacked, _ = self._stack.update(_batched(observation), np.zeros(1, dtype=bool), [{}])
        return _single(stacked)


def _batched(obs: Any) -> Any:
    return {k: np.asarray(v)[None] for k, v in obs.items()} if isinstance(obs, dict) else np.asarray(obs)[None]


def _stacked(observations: list[Any]) -> Any:
    """One batch of several envs' observations (a ``Dict`` space's, key by key)."""
    if isinstance(observations[0], dict):
        return {k: np.stack([np.asarray(obs[k]) for obs in observations]) for k in observations[0]}
    return np.stack([np.asarray(obs) for obs in observations])


def _single(obs: Any) -> Any:
    return {k: v[0].copy() for k, v in obs.items()} if isinstance(obs, dict) else obs[0].copy()


def episode_returns(
    env_id: str,
    policy: Any = None,
    n_episodes: int = 20,
    seed: int = 0,
    make_env: Callable[[str], gym.Env] | None = None,
    frame_stack: int = 0,
    observe_state: bool = False,
    side_by_side: int = 1,
) -> tuple[np.ndarray, np.ndarray]:
    """Returns and lengths of ``n_episodes`` seeded episodes (``seed``, ``seed + 1`` ...).

    :param policy: anything with SB3's ``predict`` (deterministic actions; an :class:`~sb3ext.experts.Expert`
        acts on raw env observations); ``None``: uniformly random actions (the action space seeded with ``seed``)
    :param make_env: builds the env (default ``gym.make``); e.g. ``expert.make_env`` for an expert's wrappers
    :param frame_stack: stack this many observations, as the zoo's ``frame_stack`` (0: none)
    :param observe_state: the policy acts on the env's ``info["state"]`` (a state expert on a pixel env, see
        :mod:`sb3ext.common.expert_state`) instead of its observation
    :param side_by_side: run up to this many of the episodes at once, each in an env of its own, the policy acting on
        their observations in one batch (a small network's cost per call is mostly overhead). Each episode keeps its
        seed, but a batch's actions can differ from one observation's in the last float bits, so a long episode can
        part from its course one at a time. 1 (default): one episode after the other.
    """
    if side_by_side < 1:
        raise ValueError(f"side_by_side must be at least 1, got {side_by_side}")
    if side_by_side > 1 and policy is None:
        raise ValueError("side_by_side > 1 needs a policy: a random policy's draws follow the episodes one at a time")

    def build() -> gym.Env:
        env = make_env(env_id) if make_env is not None else gym.make(env_id)
        return StackedFrames(env, frame_stack) if frame_stack else env

    envs = [build() for _ in range(max(1, min(side_by_side, n_episodes)))]
    envs[0].action_space.seed(seed)
    returns, lengths = np.zeros(n_episodes), np.zeros(n_episodes, dtype=int)
    upcoming = iter(range(n_episodes))
    running: dict[int, list[Any]] = {}  # an env's slot: [its episode, its observation, its info]

    def begin(slot: int) -> None:
        episode = next(upcoming, None)
        if episode is not None:
            running[slot] = [episode, *envs[slot].reset(seed=seed + episode)]

    for slot in range(len(envs)):
        begin(slot)
    while running:
        slots = list(running)
        if policy is None:
            actions = [envs[0].action_space.sample()]
        else:
            seen = [running[slot][2][STATE_KEY] if observe_state else running[slot][1] for slot in slots]
            actions = policy.predict(_stacked(seen), deterministic=True)[0]
        for slot, action in zip(slots, actions):
            episode = running[slot][0]
            obs, reward, terminated, truncated, info = envs[slot].step(action)
            returns[episode] += float(reward)
            lengths[episode] += 1
            if terminated or truncated:
                del running[slot]
                begin(slot)
            else:
                running[slot][1:] = [obs, info]
    for env in envs:
        env.close()
    if isinstance(policy, Expert):  # expert-driven episodes: does it hold the level it recorded where it was trained?
        check_recorded_level(policy, list(returns), env_id)
    return returns, lengths


def threshold_between(random_return: float, expert_return: float, fraction: float = 0.9) -> float:
    """The return ``fraction`` of the way from the random policy to the expert."""
    return random_return + fraction * (expert_return - random_return)


def first_crossing(steps: np.ndarray, values: np.ndarray, threshold: float) -> tuple[int | None, float]:
    """(first step whose value reaches ``threshold`` or None, fraction of evaluations from then on that hold it)."""
    values = np.asarray(values, dtype=float)
    hits = np.flatnonzero(values >= threshold)
    if not hits.size:
        return None, 0.0
    return int(np.asarray(steps)[hits[0]]), float(np.mean(values[hits[0] :] >= threshold))


class ExpertGapEvalCallback(EvalCallback):
    """``EvalCallback`` that places the learner between a random policy and the expert.

    Before the first evaluation it measures the expert's return (deterministic) and a random policy's on
    ``reference_episodes`` seeded episodes of the raw env, unless they are given. After every evaluation it
    logs ``eval/expert_return``, ``eval/random_return``, ``eval/gap_closed`` ((learner - random) / (expert -
    random)) and, once reached, ``eval/threshold_crossed_at`` (the first step at ``threshold_fraction`` of the
    gap), then dumps the logger at the same step (TensorBoard, the zoo's CSV and stdout).

    Usable from the zoo's YAML ``callback:`` key (the zoo passes only keyword arguments), e.g.::

        callback:
          - sb3ext.callbacks.ExpertGapEvalCallback:
              env_id: Pendulum-v1
              expert: shipped:sac/Pendulum-v1_1
              eval_freq: 1000

    :param eval_env: the evaluation env (VecEnv or env); default: ``make_vec_env(env_id)``, wrapped in a frozen
        ``VecNormalize`` when the training env is one (its statistics are synced before each evaluation)
    :param env_id: the env id of the references (default: the id of ``eval_env``)
    :param expert: an expert reference or :class:`~sb3ext.experts.Expert` (optional when ``expert_return`` is given)
    :param expert_return: the expert's return, if known (skips its evaluation)
    :param random_return: a random policy's return, if known
    :param reference_episodes: episodes of each reference evaluation
    :param threshold_fraction: where between random and expert the threshold lies
    :param reference_seed: seed of the reference episodes
    :param eval_seed: seed of the evaluation env this callback makes (when ``eval_env`` is None)
    :param kwargs: ``EvalCallback``'s other arguments (``eval_freq``, ``n_eval_episodes``, ``log_path`` ...)
    """

    def __init__(
        self,
        eval_env: gym.Env | VecEnv | None = None,
        env_id: str | None = None,
        expert: Any = None,
        expert_return: float | None = None,
        random_return: float | None = None,
        reference_episodes: int = 20,
        threshold_fraction: float = 0.9,
        reference_seed: int = 10_000,
        eval_seed: int | None = None,
        **kwargs: Any,
    ):
        if eval_env is None and env_id is None:
            raise ValueError("ExpertGapEvalCallback needs eval_env or env_id")
        if expert is None and expert_return is None:
            raise ValueError("ExpertGapEvalCallback needs an expert (reference or Expert) or its expert_return")
        if not 0 < threshold_fraction <= 1:
            raise ValueError(f"threshold_fraction must be in (0, 1], got {threshold_fraction}")
        if reference_episodes < 1:
            raise ValueError(f"reference_episodes must be >= 1, got {reference_episodes}")
        self._own_env = eval_env is None
        if eval_env is None:
            eval_env = make_vec_env(env_id, n_envs=1, seed=eval_seed)  # type: ignore[arg-type]
        super().__init__(eval_env, **kwargs)
        self.env_id = env_id or self.eval_env.get_attr("spec")[0].id
        self.expert = expert
        self.expert_return = expert_return
        self.random_return = random_return
        self.reference_episodes = reference_episodes
        self.threshold_fraction = threshold_fraction
        self.reference_seed = reference_seed
        self.threshold_crossed_at: int | None = None

    @property
    def threshold(self) -> float:
        assert self.expert_return is not None and self.random_return is not None, "references not measured yet"
        return threshold_between(self.random_return, self.expert_return, self.threshold_fraction)

    def measure_references(self) -> None:
        """Evaluate the expert and the random policy (once; given values are kept)."""
        if self.expert_return is None:
            expert = self.expert if isinstance(self.expert, Expert) else load_expert(self.expert, env_id=self.env_id)
            self.expert = expert
            returns, _ = episode_returns(self.env_id, expert, self.reference_episodes, self.reference_seed, expert.make_env)
            self.expert_return = float(np.mean(returns))
        if self.random_return is None:
            returns, _ = episode_returns(self.env_id, None, self.reference_episodes, self.reference_seed + 10_000)
            self.random_return = float(np.mean(returns))

    def _init_callback(self) -> None:
        if self._own_env and isinstance(self.training_env, VecNormalize) and not isinstance(self.eval_env, VecNormalize):
            self.eval_env = VecNormalize(self.eval_env, training=False, norm_reward=False)
        super()._init_callback()
        self.measure_references()

    def _on_step(self) -> bool:
        continue_training = super()._on_step()
        if self.eval_freq > 0 and self.n_calls % self.eval_freq == 0:  # EvalCallback has just evaluated
            self._log_gap(float(self.last_mean_reward))
        return continue_training

    def _log_gap(self, mean: float) -> None:
        assert self.expert_return is not None and self.random_return is not None
        span = self.expert_return - self.random_return
        self.logger.record("eval/expert_return", self.expert_return)
        self.logger.record("eval/random_return", self.random_return)
        self.logger.record("eval/gap_closed", (mean - self.random_return) / span if span else float("nan"))
        if self.threshold_crossed_at is None and mean >= self.threshold:
            self.threshold_crossed_at = self.num_timesteps
        if self.threshold_crossed_at is not None:
            self.logger.record("eval/threshold_crossed_at", self.threshold_crossed_at)
        self.logger.dump(self.num_timesteps)
