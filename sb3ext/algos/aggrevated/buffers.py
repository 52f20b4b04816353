"""AggreVaTeD's buffers."""

from __future__ import annotations

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
