"""The roll-in: which of the expert and the learner acts at each step, and what is kept of the visited states.

* :class:`PromisedReturns`: how far the roll-in's episodes fall short of what the expert's critic promises at
  their first states (``train/return_shortfall``).
* :class:`RollIn`: one roll-in of the mixture ``beta * expert + (1 - beta) * learner``; called by the
  algorithm's ``collect_rollouts`` at each vectorised step (the executed action only decides which states are
  visited; the learner's distribution gives every executed action its log-probability).
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any

import numpy as np
import torch as th
from stable_baselines3.common.vec_env import VecNormalize

from sb3ext.algos.aggrevated.buffers import ExpertActionMemory, StateAggregationBuffer
from sb3ext.algos.aggrevated.shaped_rl import ShapedReturns
from sb3ext.common.expert_state import StateTracker
from sb3ext.experts import POLICY_ONLY, Q_CONTINUOUS, Q_DISCRETE, VALUE_ONLY, Expert


class PromisedReturns:
    """Per roll-in episode: what the expert's critic promises at its first state, V*(s0), and the discounted return
    the roll-in then got (the expert's gamma and reward scale, no bootstrap at the end). A measurement of the
    roll-in, read by the low-signal monitor and the reinforcement term; neither changes it.

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
        self.episodes = episodes
        self.promised = np.full(n_envs, np.nan)  # NaN: the episode began before tracking did (not compared)
        self.returns = np.zeros(n_envs)
        self.discounts = np.ones(n_envs)
        self.started = np.zeros(n_envs, dtype=np.int64)  # the running number of each env's episode
        self.n_started = 0  # episodes begun so far
        # (number, V*(s0), return): enough for the latest `episodes` begun after any mark (n_envs may straddle it)
        self.finished: deque[tuple[int, float, float]] = deque(maxlen=episodes + n_envs)

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
        idx = np.flatnonzero(starts)
        self.promised[idx] = promised
        self.returns[idx] = 0.0
        self.discounts[idx] = 1.0
        self.started[idx] = self.n_started + np.arange(len(idx))
        self.n_started += len(idx)

    def step(self, rewards: np.ndarray, dones: np.ndarray) -> None:
        """Add one vectorised step's rewards (the expert's reward scale); close the episodes that ended."""
        self.returns += self.discounts * rewards
        self.discounts *= self.gamma
        for idx in np.flatnonzero(dones):
            if np.isfinite(self.promised[idx]):
                self.finished.append((int(self.started[idx]), float(self.promised[idx]), float(self.returns[idx])))
            self.promised[idx] = np.nan

    def shortfall(self, since: int = 0) -> float | None:
        """Mean of V*(s0) - return over the latest finished episodes that began as episode ``since`` or later,
        relative to the mean |V*(s0)|; None before half of them have finished. About 0 at the expert's level (below 0
        above it), about 1 or more far behind."""
        latest = [(p, r) for number, p, r in self.finished if number >= since][-self.episodes :]
        if len(latest) < max(1, self.episodes // 2):
            return None
        promised, returns = np.array(latest).T
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

    def end(self, last_obs: Any) -> None:
        """The roll-in ends at ``last_obs``: V* there, for the reinforcement term's advantages (when it is on)."""
        if self.shaped is not None:
            self.shaped.last_values = self.last_values(last_obs)

    def last_values(self, last_obs: Any) -> np.ndarray:
        """V* at the states the roll-in ends on (the learner's ``last_obs``), for :meth:`ShapedReturns.advantages`."""
        return promised_values(self.expert, self.expert.normalize_obs(self.original_obs(last_obs)))
