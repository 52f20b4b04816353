"""Wrappers for any gymnasium env, named in a zoo entry's ``env_wrapper``.

:class:`RawActions` gives the env the policy's sampled actions as they are. SB3's on-policy algorithms clip a
sampled Gaussian action to the env's Box before ``step`` (and ``predict`` clips too); OpenAI baselines' PPO, whose
runs the PPO paper reports, did not, so gym's MuJoCo envs charged their control cost on the raw sample: a policy
whose mean or noise grows past the bounds pays for it without limit (HalfCheetah's cost is 0.1 times the squared
action). Under ``RawActions`` that is so here as well; the simulator still clamps the controls it applies to its
ranges.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from sb3ext.common.validation import invalid

#: the declared bound: SB3 requires finite ones, and no Gaussian policy's sample comes near it
BOUND = 1e6


class RawActions(gym.ActionWrapper):
    """Declare the env's Box action space as ``[-BOUND, BOUND]`` (same shape and dtype), so that no algorithm's clip
    touches an action; the action reaches the env unchanged. Zoo: ``env_wrapper: sb3ext.envs.wrappers.RawActions``."""

    def __init__(self, env: gym.Env):
        if not isinstance(env.action_space, spaces.Box):
            raise invalid("RawActions", "action_space", env.action_space, "a Box (continuous actions)")
        super().__init__(env)
        box = env.action_space
        self.action_space = spaces.Box(-BOUND, BOUND, shape=box.shape, dtype=box.dtype)  # type: ignore[arg-type]

    def action(self, action: np.ndarray) -> np.ndarray:
        return action
