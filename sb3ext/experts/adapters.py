"""What an expert saw in training, rebuilt from the env it acts in now: observation adapters on the expert's side.

The learner observes the current env; the expert gets the layout it was trained on. sb3ext's other expert-side view,
``info["state"]`` for a pixel learner, is :mod:`sb3ext.common.expert_state`.

Known cases, keyed by the env id an expert was trained on (its zoo file or Hub name):

* ``Ant-v3``: 27 position and velocity numbers, then 84 contact forces (14 bodies x 6, the world body's first). With
  MuJoCo 2.x, mujoco-py's ``cfrc_ext`` stayed zero (openai/gym issue 1541), so most of the zoo's ``-v3`` Ant experts
  saw 84 zeros, and real forces cripple them. ``Ant-v4`` has the 27 numbers alone, or the same 111 with
  ``use_contact_forces``; ``Ant-v5`` has 105 (its forces leave out the world body). The adapter keeps the 27, writes the
  forces as the expert saw them, and keeps what the expert's own wrappers append after the env's numbers (the zoo PPO
  expert's ``TimeFeatureWrapper``: one number). Whether the expert saw zeros is read from its ``VecNormalize``
  statistics where it has them (an expert trained with real forces has spread there, and gets the env's forces in its
  own layout); an expert without them is taken to have seen zeros, as the zoo's were trained.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from gymnasium import spaces

#: a statistic this small means a number that never moved in training
_NEVER_MOVED = 1e-6


@dataclass(frozen=True)
class ContactLayout:
    """The expert's observation: the env's first ``keep`` numbers, its ``forces`` contact forces (zeros, or the env's
    own in the trained layout), then the ``appended`` numbers its own wrappers add (taken from the end).

    :param trained_on: the env id the expert was trained on (for messages)
    :param keep: leading numbers kept as they are
    :param forces: contact-force numbers in the trained layout (the world body's ``world`` first)
    :param world: the world body's numbers, first among the forces (an env may leave them out: they are zero)
    :param zero_forces: the expert saw zeros there in training
    :param appended: numbers appended by the expert's wrappers (e.g. a time feature), kept from the end
    :param sizes: the observation sizes of the env's versions, before those wrappers
    """

    trained_on: str
    keep: int
    forces: int
    world: int
    zero_forces: bool
    appended: int = 0
    sizes: tuple[int, ...] = ()

    @property
    def size(self) -> int:
        """The expert's observation size."""
        return self.keep + self.forces + self.appended

    def reads(self, size: int) -> bool:
        """Whether an observation of this size is one of the env's versions with the expert's wrappers."""
        return size - self.appended in self.sizes

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        """The expert's view of a batch of observations (first axis: batch)."""
        obs = np.asarray(obs, dtype=np.float32)
        if obs.ndim != 2 or not self.reads(obs.shape[1]):
            raise ValueError(
                f"expert trained on {self.trained_on} reads observations of size {' or '.join(map(str, self.sizes))}"
                f"{f' with {self.appended} appended by its env_wrapper' if self.appended else ''}; got shape {obs.shape[1:]}"
            )
        n_env = obs.shape[1] - self.appended
        given = n_env - self.keep  # the env's own contact forces: all of them, all but the world body's, or none
        forces = np.zeros((len(obs), self.forces), dtype=np.float32)
        if not self.zero_forces and given > 0:
            forces[:, self.forces - given :] = obs[:, self.keep : n_env]
        parts = [obs[:, : self.keep], forces]
        if self.appended:
            parts.append(obs[:, n_env:])
        return np.concatenate(parts, axis=1)

    def space(self, observation_space: spaces.Space) -> spaces.Space:
        """The expert's view of an env's observation space (returned unchanged where it does not apply: the caller's
        space check then names the mismatch)."""
        if not isinstance(observation_space, spaces.Box) or len(observation_space.shape) != 1:
            return observation_space
        if not self.reads(observation_space.shape[0]):
            return observation_space
        low, high = (
            np.asarray(self(bound[None]), dtype=observation_space.dtype)[0]
            for bound in (observation_space.low, observation_space.high)
        )
        return spaces.Box(low, high, dtype=observation_space.dtype)  # type: ignore[arg-type]

    def describe(self) -> str:
        tail = f", then its last {self.appended} (its wrappers')" if self.appended else ""
        if self.zero_forces:
            return (
                f"the env's first {self.keep} numbers, {self.forces} zeros{tail}: its contact forces were all zero where "
                "it was trained (mujoco-py with MuJoCo 2.x)"
            )
        return (
            f"the env's first {self.keep} numbers and its contact forces in {self.trained_on}'s layout ({self.forces}, "
            f"the world body's {self.world} first; zeros where the env has none){tail}: it saw real forces in training"
        )


#: env id trained on -> (numbers kept, contact-force numbers, the world body's among them, the env versions' sizes)
_KNOWN: dict[str, tuple[int, int, int, tuple[int, ...]]] = {
    # Ant-v4: 27, or 111 with use_contact_forces; Ant-v5: 105 (its contact forces leave out the world body)
    "Ant-v3": (27, 84, 6, (27, 105, 111)),
}


def observation_adapter(trained_on: str | None, observation_space: spaces.Space, obs_rms: Any = None) -> ContactLayout | None:
    """The adapter that rebuilds an expert's training observations, or None when none is known.

    :param trained_on: the env id the expert was trained on (``Expert.env_id``)
    :param observation_space: the expert's own observation space (its size says what its wrappers append)
    :param obs_rms: its ``VecNormalize`` observation statistics, if any: whether it saw zero contact forces
    """
    known = _KNOWN.get(trained_on or "")
    if known is None or not isinstance(observation_space, spaces.Box) or len(observation_space.shape) != 1:
        return None
    keep, forces, world, sizes = known
    appended = observation_space.shape[0] - keep - forces
    if appended < 0:
        return None
    zero_forces = True
    if obs_rms is not None and np.shape(obs_rms.var) == observation_space.shape:
        seen = slice(keep, keep + forces)
        zero_forces = bool(
            np.all(np.asarray(obs_rms.var)[seen] <= _NEVER_MOVED)
            and np.all(np.abs(np.asarray(obs_rms.mean)[seen]) <= _NEVER_MOVED)
        )
    return ContactLayout(trained_on or "", keep, forces, world, zero_forces, appended, sizes)
