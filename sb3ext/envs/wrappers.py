"""Observation wrappers for sb3ext's pixel environments (zoo YAML: ``env_wrapper``)."""

from __future__ import annotations

from collections import deque
from typing import Any

import gymnasium as gym
import numpy as np


class FrameHistory(gym.ObservationWrapper):
    """
    Stack ``n_frames`` frames taken ``spacing`` steps apart (the newest last, on the channel axis), in place of the
    zoo's ``frame_stack`` (consecutive frames). A velocity read from frames is a difference of positions over the
    time the stack spans: at the same position error, a stack that spans ``spacing`` times longer reads the velocity
    ``spacing`` times more precisely (``sb3ext/BallPlatePixels-v1``: docs/envs.md). At the start of an episode the
    history holds copies of the first frame (a body at rest).

    :param env: an env whose observation is a ``uint8`` image ``(H, W, C)``, or a ``Dict`` holding one under ``key``
    :param n_frames: frames in the stack, >= 1
    :param spacing: env steps between two stacked frames, >= 1 (1: the zoo's ``frame_stack``)
    :param key: the image's key in a ``Dict`` observation (the other keys pass through); ignored for a ``Box``
    """

    def __init__(self, env: gym.Env, n_frames: int = 4, spacing: int = 3, key: str = "camera"):
        super().__init__(env)
        for name, value in (("n_frames", n_frames), ("spacing", spacing)):
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 1:
                raise ValueError(f"FrameHistory: {name} must be an integer >= 1, got {value!r}")
        space = env.observation_space
        parts = dict(space.spaces) if isinstance(space, gym.spaces.Dict) else None
        if parts is not None and key not in parts:
            raise ValueError(f"FrameHistory: no {key!r} in the observation; it has {', '.join(parts)}")
        self._key = key if parts is not None else None
        image = parts[key] if parts is not None else space
        if not (isinstance(image, gym.spaces.Box) and image.dtype == np.uint8 and len(image.shape) == 3):
            raise ValueError(f"FrameHistory stacks uint8 images (H, W, C); got {image}")
        self.n_frames, self.spacing = int(n_frames), int(spacing)
        stacked = gym.spaces.Box(0, 255, (*image.shape[:2], image.shape[2] * self.n_frames), np.uint8)
        self.observation_space = stacked if parts is None else gym.spaces.Dict({**parts, key: stacked})
        self._frames: deque[np.ndarray] = deque(maxlen=(self.n_frames - 1) * self.spacing + 1)

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        self._frames.clear()
        return super().reset(**kwargs)

    def observation(self, observation: Any) -> Any:
        frame = observation[self._key] if self._key is not None else observation
        if not self._frames:
            self._frames.extend([frame] * (self._frames.maxlen or 1))
        else:
            self._frames.append(frame)
        stacked = np.concatenate([self._frames[i] for i in range(0, len(self._frames), self.spacing)], axis=-1)
        if self._key is None:
            return stacked
        return {**observation, self._key: stacked}
