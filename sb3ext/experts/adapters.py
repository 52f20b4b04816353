"""What an expert saw in training, rebuilt from the env it acts in now: observation adapters on the expert's side.

The learner observes the current env; the expert gets the layout it was trained on. sb3ext's other expert-side view,
``info["state"]`` for a pixel learner, is :mod:`sb3ext.common.expert_state`.

Known cases, keyed by the env id an expert was trained on (its zoo file or Hub name):

* ``Ant-v3``: with MuJoCo 2.x, mujoco-py's ``cfrc_ext`` stayed zero (openai/gym issue 1541), so the zoo's ``-v3`` Ant
  experts saw 27 position and velocity numbers, then 84 contact-force numbers that were always zero. Ant-v4 (with or
  without ``use_contact_forces``) and Ant-v5 start with the same 27 numbers; their real forces, or their absence,
  cripple those experts. The adapter keeps the 27, writes 84 zeros and keeps what the expert's own wrappers append
  after the env's numbers (the zoo PPO expert's ``TimeFeatureWrapper``: one number).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from gymnasium import spaces


@dataclass(frozen=True)
class ZeroedTail:
    """The expert's observation: the env's first ``keep`` numbers, ``zeros`` zeros, then the ``appended`` numbers that
    the expert's own wrappers add after the env's (taken from the end of the current observation).

    :param trained_on: the env id the expert was trained on (for messages)
    :param why: one line: what differed where it was trained
    :param keep: leading numbers kept as they are
    :param zeros: numbers that were always zero in training
    :param appended: numbers appended by the expert's wrappers (e.g. a time feature), kept from the end
    :param sizes: the observation sizes of the env's versions, before those wrappers
    """

    trained_on: str
    why: str
    keep: int
    zeros: int
    appended: int = 0
    sizes: tuple[int, ...] = ()

    def reads(self, size: int) -> bool:
        """Whether an observation of this size is one of the env's versions with the expert's wrappers."""
        return size - self.appended in self.sizes

    @property
    def size(self) -> int:
        """The expert's observation size."""
        return self.keep + self.zeros + self.appended

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        """The expert's view of a batch of observations (first axis: batch)."""
        obs = np.asarray(obs, dtype=np.float32)
        if obs.ndim != 2 or not self.reads(obs.shape[1]):
            raise ValueError(
                f"expert trained on {self.trained_on} reads observations of size {' or '.join(map(str, self.sizes))}"
                f"{f' with {self.appended} appended by its env_wrapper' if self.appended else ''}; got shape {obs.shape[1:]}"
            )
        parts = [obs[:, : self.keep], np.zeros((len(obs), self.zeros), dtype=np.float32)]
        if self.appended:
            parts.append(obs[:, obs.shape[1] - self.appended :])
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
        return f"the env's first {self.keep} numbers, {self.zeros} zeros{tail}: {self.why}"


#: env id trained on -> (numbers kept, numbers that were zero in training, the env versions' sizes, why)
_KNOWN: dict[str, tuple[int, int, tuple[int, ...], str]] = {
    # Ant-v4: 27, or 111 with use_contact_forces; Ant-v5: 105 (its contact forces leave out the world body)
    "Ant-v3": (27, 84, (27, 105, 111), "its contact forces were all zero where it was trained (mujoco-py, MuJoCo 2.x)"),
}


def observation_adapter(trained_on: str | None, observation_space: spaces.Space) -> ZeroedTail | None:
    """The adapter that rebuilds an expert's training observations, or None when none is known.

    :param trained_on: the env id the expert was trained on (``Expert.env_id``)
    :param observation_space: the expert's own observation space (its size says what its wrappers append)
    """
    known = _KNOWN.get(trained_on or "")
    if known is None or not isinstance(observation_space, spaces.Box) or len(observation_space.shape) != 1:
        return None
    keep, zeros, sizes, why = known
    appended = observation_space.shape[0] - keep - zeros
    if appended < 0:
        return None
    return ZeroedTail(trained_on or "", why, keep, zeros, appended, sizes)
