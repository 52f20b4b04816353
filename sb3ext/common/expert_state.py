"""An expert that observes the state while the learner observes something else (frames): the env's ``info["state"]``.

sb3ext's convention, for its pixel envs and a user's own env:

* the env has an attribute ``state_space`` (a gymnasium ``Space``: what the expert was trained on);
* ``reset`` and every ``step`` put the current state in ``info["state"]`` (``STATE_KEY``), an array of that space.

The learner's observation can then be anything (frames, frame-stacked by the zoo); the zoo's wrappers and
``VecFrameStack`` touch observations only, so the state reaches the expert unchanged. :class:`ExpertState` adds both
to an existing env from a function of it. AggreVaTeD reads the state through :class:`StateTracker` whenever the
expert's observation space is the env's ``state_space`` and not the learner's observation space.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
from stable_baselines3.common.vec_env import VecEnv, VecEnvWrapper

#: the ``info`` key holding the state an expert observes
STATE_KEY = "state"


class ExpertState(gym.Wrapper):
    """Give an env sb3ext's expert-state convention: ``state_space`` and ``info["state"] = state_fn(env)``.

    :param env: the env (its observations, e.g. frames, are left as they are)
    :param state_space: the space of the state (the expert's observation space)
    :param state_fn: the current state of ``env.unwrapped``, e.g. ``lambda env: env.unwrapped.state``
    """

    def __init__(self, env: gym.Env, state_space: gym.Space, state_fn: Callable[[gym.Env], Any]):
        super().__init__(env)
        self.state_space = state_space
        self.state_fn = state_fn

    def _state(self) -> np.ndarray:
        state = np.asarray(self.state_fn(self.env.unwrapped), dtype=self.state_space.dtype)
        if state.shape != self.state_space.shape:
            raise ValueError(f"state_fn returned shape {state.shape}, state_space has shape {self.state_space.shape}")
        return state

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        return obs, {**info, STATE_KEY: self._state()}

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, reward, terminated, truncated, {**info, STATE_KEY: self._state()}


def state_space_of(env: VecEnv | None) -> gym.Space | None:
    """The ``state_space`` of a vectorised env's first env (through its wrappers), or None if it has none."""
    if env is None:
        return None
    try:
        space = env.get_attr("state_space", [0])[0]
    except AttributeError:
        return None
    return space if isinstance(space, gym.Space) else None


def vec_env_chain(env: VecEnv) -> list[VecEnv]:
    """The VecEnv and every VecEnv it wraps, outermost first."""
    chain = [env]
    while isinstance(chain[-1], VecEnvWrapper):
        chain.append(chain[-1].venv)
    return chain


def base_vec_env(env: VecEnv) -> VecEnv:
    """The innermost VecEnv: the one whose ``reset_infos`` the envs filled (wrappers keep their own, empty ones)."""
    return vec_env_chain(env)[-1]


def _state(info: dict[str, Any], where: str, idx: int) -> np.ndarray:
    if STATE_KEY not in info:
        raise KeyError(
            f"env {idx} gave no info[{STATE_KEY!r}] at {where}: the expert observes the env's state_space, so every "
            f"reset and step must put the state in info[{STATE_KEY!r}] (wrap the env in "
            "sb3ext.common.expert_state.ExpertState)"
        )
    return np.asarray(info[STATE_KEY], dtype=np.float32)


class StateTracker:
    """The current state of each env of a VecEnv, from ``info["state"]`` (reset infos after an episode's end).

    :param env: the (possibly wrapped) VecEnv the learner steps
    """

    def __init__(self, env: VecEnv):
        self.base = base_vec_env(env)
        self.states: np.ndarray | None = None

    def reset(self) -> None:
        """The env was reset (a new ``learn``): the next states come from its reset infos."""
        self.states = None

    def current(self) -> np.ndarray:
        """Each env's current state."""
        if self.states is None:
            self.states = np.stack([_state(info, "reset", i) for i, info in enumerate(self.base.reset_infos)])
        return self.states

    def step(self, dones: np.ndarray, infos: list[dict[str, Any]]) -> np.ndarray:
        """Record a vectorised step; return each env's next state (for an env whose episode ended: its last state)."""
        next_states = np.stack([_state(info, "step", i) for i, info in enumerate(infos)])
        current = next_states.copy()
        for idx in np.flatnonzero(dones):
            current[idx] = _state(self.base.reset_infos[idx], "reset", int(idx))
        self.states = current
        return next_states
