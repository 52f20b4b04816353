"""AggreVaTeD's buffers: the aggregated states, and the visited states with the expert's actions there
(``MatchedDAgger``'s ``expert_action_memory``)."""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from sb3ext.experts import Expert

#: how many of a terminated episode's last states the fall store keeps (128 was measured no better)
FALL_STEPS = 64


class DictObs:
    """Observations of a ``Dict`` space stored as one array per key, indexed like one array: ``store[idx]`` is a dict
    of the keys' rows, ``store[idx] = {key: rows}`` writes each key's rows."""

    def __init__(self, arrays: dict[str, np.ndarray]):
        self.arrays = arrays

    def __getitem__(self, idx: Any) -> dict[str, np.ndarray]:
        return {key: array[idx] for key, array in self.arrays.items()}

    def __setitem__(self, idx: Any, value: dict[str, np.ndarray]) -> None:
        for key, array in self.arrays.items():
            array[idx] = value[key]

    def __len__(self) -> int:
        return len(next(iter(self.arrays.values())))


def obs_store(leading: tuple[int, ...], shape: Any, dtype: Any) -> Any:
    """Zeros for observations of ``shape`` (a tuple, or a dict of tuples for a ``Dict`` space, with a dict of dtypes)
    after the ``leading`` axes: an array, or a :class:`DictObs`."""
    if isinstance(shape, dict):
        return DictObs({key: np.zeros((*leading, *shape[key]), dtype=dtype[key]) for key in shape})
    return np.zeros((*leading, *shape), dtype=dtype)


def observation_layout(space: spaces.Space) -> tuple[Any, Any]:
    """(shape, dtype) of one observation of ``space``, as :func:`obs_store` takes them: dicts for a ``Dict`` space."""
    if isinstance(space, spaces.Dict):
        if not all(isinstance(sub, spaces.Box) for sub in space.spaces.values()):
            raise ValueError(f"AggreVaTeD: Dict observations of Box spaces only, got {space}")
        return {k: sub.shape for k, sub in space.spaces.items()}, {k: sub.dtype for k, sub in space.spaces.items()}
    return space.shape, space.dtype


def batch_size_of(obs: Any) -> int:
    """The number of observations in a batch (an array, or a dict of arrays)."""
    return len(next(iter(obs.values()))) if isinstance(obs, dict) else len(obs)


def select(obs: Any, idx: Any) -> Any:
    """Rows ``idx`` of a batch of observations (an array or tensor, or a dict of them)."""
    return {key: value[idx] for key, value in obs.items()} if isinstance(obs, dict) else obs[idx]


def reservoir_slots(seen: int, n: int, capacity: int, rng: np.random.Generator) -> np.ndarray:
    """Algorithm R for a batch: where the next ``n`` items (after ``seen`` so far) go in a reservoir of ``capacity``.

    The i-th item (0-based, over the whole stream) takes slot i while the reservoir fills, then replaces a random slot
    with probability ``capacity / (i + 1)``. A slot ``>= capacity`` means the item is dropped. Applied in order, a
    later item of the batch drawing the same slot wins, as it would one at a time.
    """
    index = seen + np.arange(n)
    return np.where(index < capacity, index, rng.integers(0, index + 1))


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

    A third part keeps the states that led to falls: the last ``fall_steps`` states of every episode that ends in a
    termination (not a time limit), first in first out, ``falls`` states in all. A learner that rarely falls visits
    those states rarely, and the window lets them go after a few roll-ins.

    :param window: number of roll-ins kept
    :param states_per_rollout: states added per roll-in (``n_steps * n_envs``)
    :param learner_shape: shape of one learner observation (a dict of shapes for a ``Dict`` space, see
        :func:`observation_layout`)
    :param expert_shape: shape of one expert observation
    :param reservoir: number of older states kept (0: none)
    :param rng: the reservoir's random generator
    :param learner_dtype: dtype of the learner's observations (frames stay ``uint8``: a quarter of float32's memory; a
        dict of dtypes for a ``Dict`` space)
    :param falls: number of states before terminations kept (0: none)
    :param fall_steps: how many of the last states of a terminated episode are kept
    :param n_envs: number of envs (one history of recent states each; needed with ``falls``)
    :param expert_dtype: dtype of the expert's observations (an Atari expert's frames stay ``uint8`` too)
    """

    def __init__(
        self,
        window: int,
        states_per_rollout: int,
        learner_shape: Any,
        expert_shape: tuple[int, ...],
        reservoir: int = 0,
        rng: np.random.Generator | None = None,
        learner_dtype: Any = np.float32,
        falls: int = 0,
        fall_steps: int = 64,
        n_envs: int = 1,
        expert_dtype: Any = np.float32,
    ):
        self.window = window
        self.capacity = window * states_per_rollout
        self.reservoir = reservoir
        self.falls = falls
        # window in [0, capacity), reservoir in [capacity, capacity + reservoir), falls after them
        total = self.capacity + reservoir + falls
        self.learner_obs = obs_store((total,), learner_shape, learner_dtype)
        self.expert_obs = np.zeros((total, *expert_shape), dtype=expert_dtype)
        self.pos = 0
        self.size = 0
        self.reservoir_size = 0
        self.evicted = 0  # states that have left the window so far
        self._rng = rng if rng is not None else np.random.default_rng()
        self.fall_pos = 0
        self.fall_size = 0
        self.n_falls = 0  # terminated episodes whose last states were kept
        # per env, its latest `fall_steps` states (a ring shared by the envs, which step together)
        history = fall_steps if falls else 0
        self._recent_learner = obs_store((history, n_envs), learner_shape, learner_dtype)
        self._recent_expert = np.zeros((history, n_envs, *expert_shape), dtype=expert_dtype)
        self._recent_pos = 0
        self._recent_count = np.zeros(n_envs, dtype=np.int64)  # states of the current episode in the ring

    @classmethod
    def for_expert(
        cls, expert: Expert, learner_space: spaces.Space, window: int, n_steps: int, n_envs: int,
        reservoir: int, falls: int, seed: int | None,
    ) -> StateAggregationBuffer:  # fmt: skip
        """The buffer of a model: roll-ins of ``n_steps`` on ``n_envs`` envs, observed by the learner through
        ``learner_space`` and by ``expert``; the reservoir draws from its own stream of ``seed``."""
        learner_shape, learner_dtype = observation_layout(learner_space)
        return cls(window, n_steps * n_envs, learner_shape, expert.observation_space.shape,  # type: ignore[arg-type]
                   reservoir=reservoir, falls=falls, fall_steps=FALL_STEPS, n_envs=n_envs,
                   rng=np.random.default_rng(None if seed is None else [seed, 1]),  # not the roll-in's stream
                   learner_dtype=learner_dtype, expert_dtype=expert.obs_dtype)  # fmt: skip

    def add(self, learner_obs: Any, expert_obs: np.ndarray) -> None:
        """Add a batch of states (one per env); the ones they replace in the window go to the reservoir."""
        n = batch_size_of(learner_obs)
        idx = (self.pos + np.arange(n)) % self.capacity
        if self.reservoir and self.size == self.capacity:
            self._offer(idx)
        self.learner_obs[idx] = learner_obs
        self.expert_obs[idx] = expert_obs
        self.pos = int((self.pos + n) % self.capacity)
        self.size = min(self.size + n, self.capacity)
        if self.falls:
            history = len(self._recent_learner)
            self._recent_learner[self._recent_pos] = learner_obs
            self._recent_expert[self._recent_pos] = expert_obs
            self._recent_pos = (self._recent_pos + 1) % history
            self._recent_count = np.minimum(self._recent_count + 1, history)

    def episodes_ended(self, terminated: np.ndarray, truncated: np.ndarray) -> None:
        """After a step: keep the latest states of the envs whose episode terminated; forget those of every ended one.

        :param terminated: per env, whether its episode ended in a termination (a fall) at this step
        :param truncated: per env, whether it ended at a time limit
        """
        if not self.falls:
            return
        history = len(self._recent_learner)
        for env in np.flatnonzero(terminated):
            count = int(self._recent_count[env])
            rows = (self._recent_pos - count + np.arange(count)) % history  # oldest first
            slots = (self.fall_pos + np.arange(count)) % self.falls
            # a fall longer than the store: its last `falls` states win, as they would one at a time
            slots, rows = slots[-self.falls :], rows[-self.falls :]
            base = self.capacity + self.reservoir
            self.learner_obs[base + slots] = self._recent_learner[rows, env]
            self.expert_obs[base + slots] = self._recent_expert[rows, env]
            self.fall_pos = int((self.fall_pos + count) % self.falls)
            self.fall_size = min(self.fall_size + count, self.falls)
            self.n_falls += 1
        self._recent_count[np.asarray(terminated, dtype=bool) | np.asarray(truncated, dtype=bool)] = 0

    def _offer(self, idx: np.ndarray) -> None:
        """Algorithm R over the evicted states (see :func:`reservoir_slots`)."""
        slots = reservoir_slots(self.evicted, len(idx), self.reservoir, self._rng)
        keep = slots < self.reservoir
        # a later state of this batch drawing the same slot wins, as it would one at a time
        target = self.capacity + slots[keep]
        self.learner_obs[target] = self.learner_obs[idx[keep]]
        self.expert_obs[target] = self.expert_obs[idx[keep]]
        self.evicted += len(idx)
        self.reservoir_size = min(self.evicted, self.reservoir)

    def __len__(self) -> int:
        """The number of states :meth:`get` returns."""
        return self.size + self.reservoir_size + self.fall_size

    def get(self) -> tuple[Any, np.ndarray]:
        """All stored states, window, reservoir, then the states before falls: (learner observations, expert
        observations)."""
        if self.reservoir_size == 0 and self.fall_size == 0:
            return self.learner_obs[: self.size], self.expert_obs[: self.size]
        full = self.size == self.capacity and self.reservoir_size == self.reservoir and self.fall_size == self.falls
        if full:  # no copy
            return self.learner_obs, self.expert_obs
        falls = self.capacity + self.reservoir
        rows = np.r_[0 : self.size, self.capacity : self.capacity + self.reservoir_size, falls : falls + self.fall_size]
        return self.learner_obs[rows], self.expert_obs[rows]


class ExpertActionMemory:
    """States the roll-ins visited, with the expert's action at each: what ``MatchedDAgger`` clones on.

    DAgger's aggregation: every visited state while there is room, then a uniform sample of all of them (reservoir
    sampling, as :class:`StateAggregationBuffer`'s reservoir). The expert's action is queried once, when the state is
    visited (a fixed expert's action at a state does not change), so the memory is never re-scored.

    :param capacity: number of states kept
    :param learner_shape: shape of one learner observation (a dict of shapes for a ``Dict`` space)
    :param action_shape: shape of one action
    :param rng: the reservoir's random generator
    :param learner_dtype: dtype of the learner's observations (a dict of dtypes for a ``Dict`` space)
    :param action_dtype: dtype of the expert's actions (int64 for discrete actions)
    """

    def __init__(
        self,
        capacity: int,
        learner_shape: Any,
        action_shape: tuple[int, ...],
        rng: np.random.Generator | None = None,
        learner_dtype: Any = np.float32,
        action_dtype: Any = np.float32,
    ):
        self.capacity = capacity
        self.learner_obs = obs_store((capacity,), learner_shape, learner_dtype)
        self.expert_actions = np.zeros((capacity, *action_shape), dtype=action_dtype)
        self.seen = 0  # states offered so far
        self.size = 0
        self._rng = rng if rng is not None else np.random.default_rng()

    @classmethod
    def for_spaces(
        cls, capacity: int, learner_space: spaces.Space, action_space: spaces.Space, seed: int | None,
        max_bytes: int | None = None,
    ) -> ExpertActionMemory:  # fmt: skip
        """The memory of a model whose learner observes ``learner_space``: at most ``capacity`` states, and at most
        ``max_bytes`` of observations (None: no limit); the reservoir draws from its own stream of ``seed``."""
        discrete = isinstance(action_space, spaces.Discrete)
        learner_shape, learner_dtype = observation_layout(learner_space)
        if max_bytes is not None:
            shapes = learner_shape if isinstance(learner_shape, dict) else {"": learner_shape}
            dtypes = learner_dtype if isinstance(learner_dtype, dict) else {"": learner_dtype}
            one = sum(np.dtype(dtypes[key]).itemsize * int(np.prod(shapes[key])) for key in shapes)
            capacity = max(1, min(int(capacity), max_bytes // max(1, one)))
        return cls(
            int(capacity),
            learner_shape,
            () if discrete else action_space.shape,  # type: ignore[arg-type]
            rng=np.random.default_rng(None if seed is None else [seed, 2]),  # not the roll-in's or the reservoir's
            learner_dtype=learner_dtype,
            action_dtype=np.int64 if discrete else np.float32,
        )

    def add(self, learner_obs: Any, expert_actions: np.ndarray) -> None:
        """Offer a batch of states (one per env) and the expert's actions there."""
        n = batch_size_of(learner_obs)
        slots = reservoir_slots(self.seen, n, self.capacity, self._rng)
        keep = slots < self.capacity
        self.learner_obs[slots[keep]] = select(learner_obs, keep)
        self.expert_actions[slots[keep]] = np.asarray(expert_actions).reshape(n, *self.expert_actions.shape[1:])[keep]
        self.seen += n
        self.size = min(self.seen, self.capacity)

    def stored(self) -> tuple[Any, np.ndarray]:
        """The stored states and the expert's actions there (views, no copy)."""
        return self.learner_obs[: self.size], self.expert_actions[: self.size]
