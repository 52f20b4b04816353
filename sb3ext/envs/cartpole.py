"""A PyBullet cart-pole: balance a 1 m pole on a cart driven by a horizontal force."""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from sb3ext.envs.bullet import BulletEnv


class BulletCartPoleEnv(BulletEnv):
    """
    Cart-pole in PyBullet (``sb3ext/CartPole-v0``, ``sb3ext/CartPoleContinuous-v0``, ``sb3ext/CartPolePixels-v1``,
    ``sb3ext/CartPolePixels-v2``).

    A cart (1.0 kg) slides on a frictionless rail; a pole (0.1 kg, 1 m, centre of mass at 0.5 m) hinges on
    it freely (both joints' default velocity motors are disabled). The action is a horizontal force on the
    cart: ``Discrete(2)`` -> -max_force / +max_force, or ``Box(-1, 1, (1,))`` -> scaled by max_force.
    Physics at 100 Hz, two physics steps per env step (0.02 s, as the classic task).

    Observation (``obs_type="state"``): [x (m), x_dot (m/s), theta (rad, 0 = upright), theta_dot (rad/s)];
    ``obs_type="pixels"``: an 84x84 grayscale frame of the scene (uint8, shape (84, 84, 1)) from the
    TinyRenderer, for ``CnnPolicy`` with frame stacking (a single frame does not show velocities). The
    frame spans the rail (+-2.7 m) horizontally and 2.7 m vertically (stretched x2 so the pole covers ~30
    pixels), with the pole drawn dark on the white background. At 6.4 cm per pixel across, a tilt of a few degrees
    moves the pole's top by less than a pixel: ``-v1`` renders at 84x84 (such tilts are invisible), ``-v2`` at 4x
    that, averaged down (``supersample=4``: sub-pixel positions show as grey levels).
    Reward: +1 per step. Terminated when |x| > 2.4 m or |theta| > 12 degrees; the time limit (500 steps)
    is set in the registration (truncation).

    :param continuous: continuous force instead of two discrete pushes
    :param obs_type: "state" or "pixels"
    :param max_force: force magnitude in newtons
    :param render_mode: None, "rgb_array" or "human"
    :param supersample: pixel observations rendered this many times larger per axis and averaged down to 84x84
    """

    X_LIMIT = 2.4
    THETA_LIMIT = 12 * 2 * np.pi / 360
    PHYSICS_DT = 0.01
    FRAME_SKIP = 2

    def __init__(
        self,
        continuous: bool = False,
        obs_type: str = "state",
        max_force: float = 10.0,
        render_mode: str | None = None,
        supersample: int = 1,
    ):
        super().__init__(obs_type, render_mode, supersample, max_force=max_force)
        self.continuous = continuous
        self.max_force = float(max_force)
        self.action_space: spaces.Space = spaces.Box(-1.0, 1.0, (1,), np.float32) if continuous else spaces.Discrete(2)
        self._set_spaces(np.array([3.0, np.inf, np.pi, np.inf], dtype=np.float32))
        self.body = self.sim.load_urdf("cartpole.urdf", fixed=True)
        self.joints = [self.sim.joint_index(self.body, "slider"), self.sim.joint_index(self.body, "hinge")]
        self.sim.free_joints(self.body, self.joints)
        if obs_type == "pixels":  # contrast for the grayscale observation: a dark pole on the white background
            self.sim.set_color(self.body, self.joints[1], (0.1, 0.1, 0.1, 1.0))

    def _state(self) -> np.ndarray:
        (x, x_dot), (theta, theta_dot) = self.sim.joint_states(self.body, self.joints)
        return np.array((x, x_dot, theta, theta_dot), dtype=np.float32)

    def _observation_camera(self, size: int) -> np.ndarray:  # the wide scene stretched into a square frame
        return self.sim.render(size, size, target=(0.0, 0.0, 0.45), distance=3.4, yaw=0.0, pitch=0.0, fov=43.3, aspect=2.0)

    def _camera(self, width: int, height: int) -> np.ndarray:
        return self.sim.render(width, height, target=(0.0, 0.0, 0.4), distance=3.4, yaw=0.0, pitch=-8.0, fov=75.0)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        x, x_dot, theta, theta_dot = self.np_random.uniform(-0.05, 0.05, size=4)
        self.sim.reset_joint(self.body, self.joints[0], x, x_dot)
        self.sim.reset_joint(self.body, self.joints[1], theta, theta_dot)
        state = self._state()
        return self._observation(state), self._info(state)

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        if self.continuous:
            force = float(np.clip(np.asarray(action, dtype=np.float64).reshape(-1)[0], -1.0, 1.0)) * self.max_force
        else:
            if action not in (0, 1):  # ints and numpy integers of either value
                raise ValueError(f"invalid action {action!r} for {self.action_space}")
            force = self.max_force if action == 1 else -self.max_force
        self.sim.step_with_torques(self.body, self.joints, [force, 0.0], self.FRAME_SKIP)
        state = self._state()
        terminated = abs(state[0]) > self.X_LIMIT or abs(state[2]) > self.THETA_LIMIT
        return self._observation(state), 1.0, bool(terminated), False, self._info(state)
