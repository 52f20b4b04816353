"""AggreVaTeD's buffers: the aggregated states (Q* experts) and the latest roll-in's transitions (value-only experts)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class StateAggregationBuffer:
    """Ring buffer of the states visited by the last ``window`` roll-ins (the "Aggre" of AggreVaTeD).

    Each state is kept twice: as the learner observes it and as the expert observes it (after the
    expert's own frozen observation normalisation). Q* labels do not depend on the learner, so the
    stored states can be re-scored with fresh samples of the current policy at every iteration.

    :param window: number of roll-ins kept
    :param states_per_rollout: states added per roll-in (``n_steps * n_envs``)
    :param learner_shape: shape of one learner observation
    :param expert_shape: shape of one expert observation
    """

    def __init__(self, window: int, states_per_rollout: int, learner_shape: tuple[int, ...], expert_shape: tuple[int, ...]):
        self.window = window
        self.capacity = window * states_per_rollout
        self.learner_obs = np.zeros((self.capacity, *learner_shape), dtype=np.float32)
        self.expert_obs = np.zeros((self.capacity, *expert_shape), dtype=np.float32)
        self.pos = 0
        self.size = 0

    def add(self, learner_obs: np.ndarray, expert_obs: np.ndarray) -> None:
        """Add a batch of states (one per env)."""
        n = len(learner_obs)
        idx = (self.pos + np.arange(n)) % self.capacity
        self.learner_obs[idx] = learner_obs
        self.expert_obs[idx] = expert_obs
        self.pos = int((self.pos + n) % self.capacity)
        self.size = min(self.size + n, self.capacity)

    def get(self) -> tuple[np.ndarray, np.ndarray]:
        """All stored states: (learner observations, expert observations)."""
        return self.learner_obs[: self.size], self.expert_obs[: self.size]


class RollInArrays(NamedTuple):
    """One roll-in of a value-only expert, stacked to ``(n_steps, n_envs, ...)``."""

    expert_obs: np.ndarray  # s, as the expert observes it
    use_expert: np.ndarray  # whether the expert acted at s
    rewards: np.ndarray  # r, on the scale of the expert's value function
    next_expert_obs: np.ndarray  # s' (the real last observation at truncations), as the expert observes it
    terminated: np.ndarray  # V*(s') = 0
    dones: np.ndarray  # the episode ended (terminated or truncated): no lambda-return across it


class RollInRecord:
    """The transitions of the latest roll-in that a value-only expert's estimator needs (typed, not a dict)."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self._states: list[tuple[np.ndarray, np.ndarray]] = []
        self._steps: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []

    def add_state(self, expert_obs: np.ndarray, use_expert: np.ndarray) -> None:
        self._states.append((expert_obs, use_expert))

    def add_step(self, rewards: np.ndarray, next_expert_obs: np.ndarray, terminated: np.ndarray, dones: np.ndarray) -> None:
        self._steps.append((rewards, next_expert_obs, terminated, dones))

    def arrays(self) -> RollInArrays:
        expert_obs, use_expert = (np.stack(column) for column in zip(*self._states))
        rewards, next_expert_obs, terminated, dones = (np.stack(column) for column in zip(*self._steps))
        return RollInArrays(expert_obs, use_expert, rewards, next_expert_obs, terminated, dones)
