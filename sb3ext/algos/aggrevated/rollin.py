"""The roll-in: which of the expert and the learner acts at each step, and what is kept of the visited states.

* :class:`PromisedReturns`: how far the roll-in's episodes fall short of what the expert's critic promises at
  their first states (``train/return_shortfall``).
* :class:`RollIn`: one roll-in of the mixture ``beta * expert + (1 - beta) * learner``; called by the
  algorithm's ``collect_rollouts`` at each vectorised step (the executed action only decides which states are
  visited; the learner's distribution gives every executed action its log-probability).
"""

from __future__ import annotations

import copy
import time
from collections import deque
from typing import Any

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.running_mean_std import RunningMeanStd
from stable_baselines3.common.vec_env import VecEnv, VecFrameStack, VecNormalize

from sb3ext.algos.aggrevated.buffers import ExpertActionMemory, StateAggregationBuffer
from sb3ext.algos.aggrevated.shaped_rl import ShapedReturns
from sb3ext.common.expert_state import STATE_KEY, StateTracker, state_space_of, vec_env_chain
from sb3ext.experts import POLICY_ONLY, Q_CONTINUOUS, Q_DISCRETE, VALUE_ONLY, Expert
from sb3ext.experts.expert import describe_space


class PromisedReturns:
    """Per roll-in episode: what the expert's critic promises at its first state, V*(s0), and the discounted return
    the roll-in then got (the expert's gamma and reward scale, no bootstrap at the end).

    A learner at the expert's level gets about what V* promises; one that is far behind gets much less. A critic
    that barely separates the learner's actions (``train/critic_snr`` below 1) is harmless in the first case: a
    learner whose mean action sits at the critic's maximum sees no first-order signal at all. It is a problem in
    the second. :meth:`shortfall` tells them apart.

    :param n_envs: number of envs of the roll-in
    :param gamma: the expert's discount factor
    :param episodes: number of latest finished episodes compared
    """

    def __init__(self, n_envs: int, gamma: float, episodes: int = 10):
        self.gamma = float(gamma)
        self.promised = np.full(n_envs, np.nan)  # NaN: the episode began before tracking did (not compared)
        self.returns = np.zeros(n_envs)
        self.discounts = np.ones(n_envs)
        self.finished: deque[tuple[float, float]] = deque(maxlen=episodes)

    @classmethod
    def renew(cls, previous: PromisedReturns | None, expert: Expert, n_envs: int) -> PromisedReturns | None:
        """The tracker for a roll-in: ``previous`` while it fits the env size and the expert's gamma, else a new one;
        None for a policy-only expert (no V*(s0) to compare the returns with)."""
        if expert.kind == POLICY_ONLY:
            return None
        if previous is None or len(previous.returns) != n_envs or previous.gamma != expert.gamma:
            return cls(n_envs, expert.gamma)
        return previous

    def start(self, starts: np.ndarray, promised: np.ndarray) -> None:
        """Episodes begin on the envs flagged in ``starts``, with V*(s0) = ``promised`` (one per flagged env)."""
        self.promised[starts] = promised
        self.returns[starts] = 0.0
        self.discounts[starts] = 1.0

    def step(self, rewards: np.ndarray, dones: np.ndarray) -> None:
        """Add one vectorised step's rewards (the expert's reward scale); close the episodes that ended."""
        self.returns += self.discounts * rewards
        self.discounts *= self.gamma
        for idx in np.flatnonzero(dones):
            if np.isfinite(self.promised[idx]):
                self.finished.append((float(self.promised[idx]), float(self.returns[idx])))
            self.promised[idx] = np.nan

    def restart(self) -> None:
        """Compare only the episodes that begin from now on."""
        self.finished.clear()
        self.promised[:] = np.nan

    def shortfall(self) -> float | None:
        """Mean of V*(s0) - return over the latest finished episodes, relative to the mean |V*(s0)|; None before
        half of them have finished. About 0 at the expert's level (below 0 above it), about 1 or more far behind."""
        if len(self.finished) < max(1, (self.finished.maxlen or 0) // 2):
            return None
        promised, returns = np.array(self.finished).T
        return float(np.mean(promised - returns) / (np.mean(np.abs(promised)) + 1e-8))


def promised_values(expert: Expert, expert_obs: np.ndarray) -> np.ndarray:
    """V*(s) = Q*(s, expert's action) of a Q* expert (the expert's own V* for a value-only one)."""
    obs = th.as_tensor(expert_obs, device=expert.device)
    if expert.kind == VALUE_ONLY:
        return expert.value(obs).cpu().numpy()
    if expert.kind == Q_DISCRETE:
        return expert.q_all(obs).max(dim=1).values.cpu().numpy()
    assert expert.kind == Q_CONTINUOUS
    actions = th.as_tensor(expert.act(expert_obs), device=expert.device, dtype=th.float32)
    return expert.q_values(obs, actions).cpu().numpy()


def expert_reads_state(
    expert: Expert, observation_space: spaces.Space, action_space: spaces.Space, env: VecEnv | None, env_id: str | None
) -> bool:
    """Whether the expert observes the env's state (``info["state"]``, ``sb3ext.common.expert_state``) rather than
    the learner's observation; raise ``ValueError`` naming the spaces when it fits neither.

    The learner's observation wins when both fit. Frame stacking and the zoo's wrappers change the learner's
    observation only, so a pixel learner with a state expert is told apart by the spaces alone.
    """
    state_space = state_space_of(env)
    if state_space is None or expert.fits(observation_space):
        expert.check_spaces(observation_space, action_space, env_id)  # raises, with hints, when it does not fit
        return False
    if expert.fits(state_space):
        expert.check_spaces(state_space, action_space)  # trained on the state twin of this env, as intended: no warning
        return True
    raise ValueError(
        f"Expert {expert.source} observes {describe_space(expert.observation_space)}, which matches neither the "
        f"learner's observation space {describe_space(observation_space)} nor the env's state (info[{STATE_KEY!r}]) "
        f"space {describe_space(state_space)}"
    )


def start_from_expert_statistics(normalizer: VecNormalize, expert: Expert, verbose: int = 0) -> bool:
    """Start the learner's ``VecNormalize`` observation statistics from a copy of the expert's frozen ones (mean,
    variance and count; e.g. a zoo PPO expert's ``vecnormalize.pkl``) when both read the same observations: the
    learner reads its inputs on the expert's scale from the first iteration on. They keep updating, weighted by that
    count. Whether they were copied (not for Dict observations, or an expert that observes something else)."""
    stats = getattr(expert.normalization, "obs_rms", None)
    own = normalizer.obs_rms
    if not isinstance(stats, RunningMeanStd) or not isinstance(own, RunningMeanStd):
        return False
    if np.shape(stats.mean) != np.shape(own.mean):
        return False
    normalizer.obs_rms = copy.deepcopy(stats)
    if verbose >= 1:
        print(f"The learner's observation statistics start from the expert's ({expert.source})")
    return True


def env_id_of(env: VecEnv | None) -> str | None:
    """The gymnasium id of the (first) env of ``env``, or None where it has no spec."""
    if env is None:
        return None
    try:
        spec = env.get_attr("spec", [0])[0]
    except (AttributeError, IndexError):
        return None
    return spec.id if spec is not None else None


def observation_normalizer(env: VecEnv | None) -> VecNormalize | None:
    """The learner's ``VecNormalize`` when it normalises observations and is the outermost wrapper, else None.

    The aggregated states then keep the learner's observations as the env emitted them (``get_original_obs``) and
    are normalised with the current statistics when they are re-scored and trained on (:func:`learner_view`).
    Stored normalised, a state would keep the statistics of the iteration that visited it: the running mean and
    variance move most in the first iterations, and a state kept for long (``aggregation_reservoir``) would
    show the policy an observation it no longer maps to that state. With a wrapper outside the ``VecNormalize``
    (the zoo's frame stacking), the stored observation is the learner's own, as before.
    """
    return env if isinstance(env, VecNormalize) and env.norm_obs else None


def learner_view(normalizer: VecNormalize | None, dtype: Any) -> Any:
    """Maps stored learner observations to what the learner sees now (None: stored as seen)."""
    if normalizer is None:
        return None

    def view(raw: Any) -> Any:
        normalized = normalizer.normalize_obs(raw)
        if isinstance(normalized, dict):  # a Dict space: each key keeps its own dtype (float32 once normalised)
            keys = normalizer.norm_obs_keys or []
            return {key: np.asarray(value, dtype=np.float32 if key in keys else value.dtype)
                    for key, value in normalized.items()}  # fmt: skip
        return np.asarray(normalized, dtype=dtype)

    return view


def check_learner_wrapping(expert: Expert, env: VecEnv) -> None:
    """An expert trained on stacked frames (``frame_stack`` in its ``config.yml``) or with ``env_wrapper`` s (the zoo's
    ``AtariWrapper``) reads the learner's observations only if the learner's env makes them the same way: raise
    ``ValueError`` naming what the learner's hyperparameters lack."""
    missing = []
    n_stack = expert.frame_stack
    if n_stack is not None and n_stack > 1:
        stack = next((e for e in vec_env_chain(env) if isinstance(e, VecFrameStack)), None)
        if stack is None or stack.stacked_obs.n_stack != n_stack:
            missing.append(f"frame_stack: {n_stack}" + (f" (it stacks {stack.stacked_obs.n_stack})" if stack else ""))
    for wrapper, _ in expert.wrapper_classes():
        if not all(env.env_is_wrapped(wrapper)):
            missing.append(f"env_wrapper {wrapper.__module__}.{wrapper.__qualname__}")
    if missing:
        raise ValueError(
            f"Expert {expert.source} observes what its config.yml's wrappers make, and the learner's env is not wrapped "
            f"the same way: add {'; '.join(missing)} to the learner's hyperparameters (the zoo's `atari` entries have both)"
        )


class RollIn:
    """One roll-in of the expert/learner mixture.

    :param expert: the expert
    :param beta: the expert's share of this roll-in
    :param rng: draws who acts (the algorithm's seeded generator)
    :param aggregation: the aggregated states (every visited state is added)
    :param record: the transitions of this roll-in (value-only experts), reset here
    :param vec_normalize: the learner's ``VecNormalize``, undone before the expert sees an observation
    :param learner_normalizer: the learner's ``VecNormalize`` when the aggregated states keep its observations as
        the env emitted them (see :func:`observation_normalizer`); None: as the learner saw them
    :param learner_mode: per env, whether the learner acts with its distribution's mode (its deterministic action,
        the one it is deployed with) instead of a sample; None: samples everywhere
    :param states: where the expert observes the env's ``info["state"]`` instead of the learner's observation
        (``sb3ext.common.expert_state``): the tracker of those states; None: the expert reads the observation
    :param promised: the episodes' returns against V*(s0), updated here (None: not tracked)
    :param memory: every visited state also goes here, with the expert's action at it (DAgger's memory:
        ``MatchedDAgger``'s ``expert_action_memory``, or AggreVaTeD's after its low-signal fallback; None: none)
    :param shaped: the expert's values along the roll-in and the learner's sampled steps (``rl_coef``; None: not
        kept)
    """

    def __init__(
        self,
        expert: Expert,
        beta: float,
        rng: np.random.Generator,
        aggregation: StateAggregationBuffer,
        vec_normalize: VecNormalize | None,
        learner_mode: np.ndarray | None = None,
        states: StateTracker | None = None,
        learner_normalizer: VecNormalize | None = None,
        promised: PromisedReturns | None = None,
        memory: ExpertActionMemory | None = None,
        shaped: ShapedReturns | None = None,
    ):
        self.expert = expert
        self.shaped = shaped
        self.memory = memory
        self.promised = promised
        self.learner_normalizer = learner_normalizer
        self.states = states
        self.learner_mode = learner_mode if learner_mode is not None and learner_mode.any() else None
        self.beta = beta
        self.rng = rng
        self.aggregation = aggregation
        self.vec_normalize = vec_normalize
        self.n_expert_actions = 0
        self.expert_seconds = 0.0  # wall-clock of the expert's action queries

    def original_obs(self, last_obs: Any) -> np.ndarray:
        """What the expert observes now: the env's state (``info["state"]``) if it reads that, else the observation
        as the environment emitted it (before the learner's VecNormalize)."""
        if self.states is not None:
            return self.states.current()
        if self.vec_normalize is not None:
            return self.vec_normalize.get_original_obs()  # type: ignore[return-value]
        return last_obs  # type: ignore[no-any-return]

    def act(
        self, last_obs: Any, actions: np.ndarray, distribution: Any, device: th.device, episode_starts: Any = None
    ) -> tuple[np.ndarray, th.Tensor | None]:
        """Keep the visited states and let the expert act where the draw says so.

        :param actions: the learner's sampled actions
        :param distribution: the learner's distribution at ``last_obs``
        :param episode_starts: per env, whether ``last_obs`` is the first of an episode (None: none is)
        :return: (executed actions, their learner log-probs if any action is not the learner's sample, else None)
        """
        expert = self.expert
        expert_obs = expert.normalize_obs(self.original_obs(last_obs))
        normalizer = self.learner_normalizer
        learner_obs = last_obs if normalizer is None else normalizer.get_original_obs()
        self.aggregation.add(learner_obs if isinstance(learner_obs, dict) else np.asarray(learner_obs), expert_obs)
        if self.promised is not None and episode_starts is not None and np.any(episode_starts):
            starts = np.asarray(episode_starts, dtype=bool)
            start = time.perf_counter()
            self.promised.start(starts, promised_values(expert, expert_obs[starts]))
            self.expert_seconds += time.perf_counter() - start
        use_expert = self.rng.random(len(expert_obs)) < self.beta
        if self.shaped is not None:
            start = time.perf_counter()
            learner_samples = ~use_expert if self.learner_mode is None else ~use_expert & ~self.learner_mode
            self.shaped.add(promised_values(expert, expert_obs), learner_samples)
            self.expert_seconds += time.perf_counter() - start
        per_env = (-1, *([1] * (actions.ndim - 1)))  # broadcasts one flag per env over the action dimensions
        changed = False
        if self.learner_mode is not None:
            mode = distribution.mode().cpu().numpy().reshape(actions.shape)
            actions = np.where(self.learner_mode.reshape(per_env), mode, actions)
            changed = True
        expert_actions = None
        if self.memory is not None or use_expert.any():  # one query serves both
            start = time.perf_counter()
            expert_actions = expert.act(expert_obs)
            self.expert_seconds += time.perf_counter() - start
        if self.memory is not None:
            assert expert_actions is not None
            self.memory.add(learner_obs, expert_actions)
        if use_expert.any():
            assert expert_actions is not None
            actions = np.where(use_expert.reshape(per_env), expert_actions.reshape(actions.shape), actions)
            self.n_expert_actions += int(use_expert.sum())
            changed = True
        if not changed:
            return actions, None
        # Old log-probs in the buffer always come from the learner's distribution, whoever chose the action
        with th.no_grad():
            log_probs = distribution.log_prob(th.as_tensor(actions, device=device))
        return actions, log_probs

    def observe(self, new_obs: Any, rewards: np.ndarray, dones: np.ndarray, infos: list[dict[str, Any]]) -> None:
        """Add the rewards to the episodes' returns (in the expert's reward scale), note the episodes that ended in a
        fall, and follow the env's state when the expert reads it."""
        next_states = self.states.step(dones, infos) if self.states is not None else None
        dones = np.asarray(dones, dtype=bool)
        truncated = dones & np.array([bool(info.get("TimeLimit.truncated", False)) for info in infos])
        terminated = dones & ~truncated  # for the aggregation: a fall
        self.aggregation.episodes_ended(terminated, truncated)  # a no-op without aggregation_falls
        vec_normalize = self.vec_normalize
        # a copy: SB3's time-limit bootstrap modifies `rewards` later
        raw_rewards = np.array(vec_normalize.get_original_reward() if vec_normalize is not None else rewards)
        expert_rewards = self.expert.normalize_reward(raw_rewards)
        if self.promised is not None:
            self.promised.step(expert_rewards, dones)
        if self.shaped is not None:
            start = time.perf_counter()
            cut_values = np.zeros(len(dones))  # V* of the last state of an episode cut by its time limit
            if truncated.any():
                cut = np.flatnonzero(truncated)
                last: Any
                if next_states is not None:
                    last = next_states[cut]
                else:
                    ends = [infos[idx]["terminal_observation"] for idx in cut]
                    dict_obs = isinstance(ends[0], dict)
                    last = {k: np.stack([end[k] for end in ends]) for k in ends[0]} if dict_obs else np.stack(ends)
                    if vec_normalize is not None:  # VecNormalize hands the last observation out normalised
                        last = vec_normalize.unnormalize_obs(last)
                cut_values[cut] = promised_values(self.expert, self.expert.normalize_obs(last))
            self.shaped.observe(expert_rewards, dones, cut_values)
            self.expert_seconds += time.perf_counter() - start

    def last_values(self, last_obs: Any) -> np.ndarray:
        """V* at the states the roll-in ends on (the learner's ``last_obs``), for :meth:`ShapedReturns.advantages`."""
        return promised_values(self.expert, self.expert.normalize_obs(self.original_obs(last_obs)))
