"""AggreVaTeD's buffers: the aggregated states (Q* experts) and the latest roll-in's transitions (value-only experts)."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np


class StateAggregationBuffer:
    """The states visited by the last ``window`` roll-ins (the "Aggre" of AggreVaTeD), and a reservoir of older ones.

    Each state is kept twice: as the learner observes it and as the expert observes it (after the
    expert's own frozen observation normalisation). Q* labels do not depend on the learner, so the
    stored states can be re-scored with fresh samples of the current policy at every iteration.

    The paper aggregates every state ever visited; re-scoring them all at every iteration costs more and more.
    The window keeps the recent ones. States that leave it are offered to a reservoir of ``reservoir`` states
    (uniform reservoir sampling, Vitter's algorithm R): a fixed-size, uniform sample of all older states. It keeps
    states that recent roll-ins happen not to visit, such as the first steps of long episodes, which a window
    shorter than an episode holds only part of the time.

    :param window: number of roll-ins kept
    :param states_per_rollout: states added per roll-in (``n_steps * n_envs``)
    :param learner_shape: shape of one learner observation
    :param expert_shape: shape of one expert observation
    :param reservoir: number of older states kept (0: none)
    :param rng: the reservoir's random generator
    :param learner_dtype: dtype of the learner's observations (frames stay ``uint8``: a quarter of float32's memory)
    """

    def __init__(
        self,
        window: int,
        states_per_rollout: int,
        learner_shape: tuple[int, ...],
        expert_shape: tuple[int, ...],
        reservoir: int = 0,
        rng: np.random.Generator | None = None,
        learner_dtype: Any = np.float32,
    ):
        self.window = window
        self.capacity = window * states_per_rollout
        self.reservoir = reservoir
        total = self.capacity + reservoir  # window in [0, capacity), reservoir in [capacity, total)
        self.learner_obs = np.zeros((total, *learner_shape), dtype=learner_dtype)
        self.expert_obs = np.zeros((total, *expert_shape), dtype=np.float32)
        self.pos = 0
        self.size = 0
        self.reservoir_size = 0
        self.evicted = 0  # states that have left the window so far
        self._rng = rng if rng is not None else np.random.default_rng()

    def add(self, learner_obs: np.ndarray, expert_obs: np.ndarray) -> None:
        """Add a batch of states (one per env); the ones they replace in the window go to the reservoir."""
        n = len(learner_obs)
        idx = (self.pos + np.arange(n)) % self.capacity
        if self.reservoir and self.size == self.capacity:
            self._offer(idx)
        self.learner_obs[idx] = learner_obs
        self.expert_obs[idx] = expert_obs
        self.pos = int((self.pos + n) % self.capacity)
        self.size = min(self.size + n, self.capacity)

    def _offer(self, idx: np.ndarray) -> None:
        """Algorithm R: the i-th evicted state (0-based) replaces a random slot with probability reservoir / (i + 1)."""
        seen = self.evicted + np.arange(len(idx))
        slots = np.where(seen < self.reservoir, seen, self._rng.integers(0, seen + 1))
        keep = slots < self.reservoir
        # a later state of this batch drawing the same slot wins, as it would one at a time
        target = self.capacity + slots[keep]
        self.learner_obs[target] = self.learner_obs[idx[keep]]
        self.expert_obs[target] = self.expert_obs[idx[keep]]
        self.evicted += len(idx)
        self.reservoir_size = min(self.evicted, self.reservoir)

    def get(self) -> tuple[np.ndarray, np.ndarray]:
        """All stored states, window then reservoir: (learner observations, expert observations)."""
        if self.reservoir_size == 0:
            return self.learner_obs[: self.size], self.expert_obs[: self.size]
        if self.size == self.capacity and self.reservoir_size == self.reservoir:  # both full: no copy
            return self.learner_obs, self.expert_obs
        rows = np.r_[0 : self.size, self.capacity : self.capacity + self.reservoir_size]
        return self.learner_obs[rows], self.expert_obs[rows]


class RollInArrays(NamedTuple):
    """One roll-in of a value-only expert, stacked to ``(n_steps, n_envs, ...)``."""

    expert_obs: np.ndarray  # s, as the expert observes it
    use_expert: np.ndarray  # whether the expert acted at s
    rewards: np.ndarray  # r, on the scale of the expert's value function
    next_expert_obs: np.ndarray  # s' (the real last observation at truncations), as the expert observes it
    terminated: np.ndarray  # V*(s') = 0
    dones: np.ndarray  # the episode ended (terminated or truncated): no lambda-return across it
    learner_obs: np.ndarray  # s, as the learner observes it, or as the env emitted it (see ``rollin.learner_view``)


class RollInRecord:
    """The transitions of the latest roll-in that a value-only expert's estimator needs (typed, not a dict)."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self._states: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self._steps: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []

    def add_state(self, expert_obs: np.ndarray, use_expert: np.ndarray, learner_obs: np.ndarray) -> None:
        self._states.append((expert_obs, use_expert, learner_obs))

    def add_step(self, rewards: np.ndarray, next_expert_obs: np.ndarray, terminated: np.ndarray, dones: np.ndarray) -> None:
        self._steps.append((rewards, next_expert_obs, terminated, dones))

    def arrays(self) -> RollInArrays:
        expert_obs, use_expert, learner_obs = (np.stack(column) for column in zip(*self._states))
        rewards, next_expert_obs, terminated, dones = (np.stack(column) for column in zip(*self._steps))
        return RollInArrays(expert_obs, use_expert, rewards, next_expert_obs, terminated, dones, learner_obs)
