"""A PyBullet ball-on-plate: keep a rolling ball on a plate tilted about two axes by torques."""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from sb3ext.envs.bullet import BulletEnv


class BulletBallPlateEnv(BulletEnv):
    """
    Ball on a plate (``sb3ext/BallPlate-v0``, ``sb3ext/BallPlateContinuous-v0``, ``sb3ext/BallPlatePixels-v0`` and
    ``-v1``).

    A 0.5 m x 0.5 m plate (0.5 kg) sits on a two-axis gimbal whose joints ("tilt_x" about the world x axis,
    "tilt_y" about the gimbal's y axis) are limited to +-0.25 rad and viscously damped (2 N m s/rad), so a
    joint torque mostly sets the tilt *rate* (1 N m -> 0.5 rad/s). A solid ball (radius 2.5 cm, 50 g) rolls
    on it; on a plate tilted by theta it accelerates at about 5/7 g sin(theta) (0.6 m/s^2 at 5 degrees).
    Physics at 200 Hz, four physics steps per env step (0.02 s).

    Actions: ``Box(-1, 1, (2,))`` -> joint torques scaled by ``max_torque`` (x, y); or ``Discrete(9)`` -> the
    torque signs (-1, 0, +1) of both joints times ``max_torque``, index = 3 * (sign_x + 1) + (sign_y + 1).

    Observation (``obs_type="state"``, float32): [tilt_x, tilt_y (rad), tilt_x rate, tilt_y rate (rad/s),
    ball x, ball y (m, from the plate's centre, world frame), ball x velocity, ball y velocity (m/s)].
    ``obs_type="pixels"``: an 84x84 grayscale frame (uint8, (84, 84, 1)) from an oblique camera, for
    ``CnnPolicy`` with frame stacking (``sb3ext/BallPlatePixels-v0``: its frames carry the plate's tilt rates and
    the ball's velocity too coarsely to learn from, docs/benchmarks/history/pixels_state_plate.md).
    ``obs_type="pixels_joints"`` (``sb3ext/BallPlatePixels-v1``): a ``Dict`` of that frame (``camera``) and the
    plate's tilt angles and rates (``joints``, float32 (4,)), what a robot reads from its encoders, for
    ``MultiInputPolicy``. Pixel observations put the state in ``info["state"]``.

    Reward per step: 1 - 0.5 (d / 0.25 m)^2 with d the ball's distance from the centre (between 0 and 1
    while the ball is on the plate). Terminated when the ball's centre leaves the plate (|x| or |y| >
    0.25 m) or drops below it; the time limit (500 steps = 10 s) is set in the registration.

    :param continuous: continuous torques instead of torque signs
    :param obs_type: "state", "pixels" or "pixels_joints"
    :param max_torque: torque magnitude in N m (per joint)
    :param render_mode: None, "rgb_array" or "human"
    """

    HALF_SIZE = 0.25
    BALL_RADIUS = 0.025
    SURFACE_Z = 0.01
    PHYSICS_DT = 0.005
    FRAME_SKIP = 4
    JOINT_STATE = slice(0, 4)  # tilt angles and rates: what the gimbal's encoders give

    def __init__(
        self, continuous: bool = False, obs_type: str = "state", max_torque: float = 1.0, render_mode: str | None = None
    ):
        super().__init__(obs_type, render_mode, max_torque=max_torque)
        self.continuous = continuous
        self.max_torque = float(max_torque)
        self.action_space: spaces.Space = spaces.Box(-1.0, 1.0, (2,), np.float32) if continuous else spaces.Discrete(9)
        self._set_spaces(np.array([0.3, 0.3, np.inf, np.inf, 0.4, 0.4, np.inf, np.inf], dtype=np.float32))
        self.plate = self.sim.load_urdf("plate.urdf", fixed=True)
        self.ball = self.sim.load_urdf("ball.urdf", position=(0.0, 0.0, self.SURFACE_Z + self.BALL_RADIUS))
        self.joints = [self.sim.joint_index(self.plate, "tilt_x"), self.sim.joint_index(self.plate, "tilt_y")]
        self.sim.free_joints(self.plate, self.joints)
        plate_link = self.sim.joint_index(self.plate, "tilt_y")  # the plate is the child link of tilt_y
        for body, link in ((self.plate, plate_link), (self.ball, -1)):
            self.sim.set_dynamics(body, link, lateralFriction=0.8, rollingFriction=0.0, spinningFriction=0.0, restitution=0.0)

    def _state(self) -> tuple[np.ndarray, float]:
        (ax, vx), (ay, vy) = self.sim.joint_states(self.plate, self.joints)
        (bx, by, bz), (bvx, bvy, _) = self.sim.base_state(self.ball)
        return np.array((ax, ay, vx, vy, bx, by, bvx, bvy), dtype=np.float32), bz

    def _camera(self, width: int, height: int) -> np.ndarray:
        return self.sim.render(width, height, target=(0.0, 0.0, 0.0), distance=0.62, yaw=0.0, pitch=-60.0, fov=60.0)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        rng = self.np_random
        for joint, angle in zip(self.joints, rng.uniform(-0.02, 0.02, size=2)):
            self.sim.reset_joint(self.plate, joint, float(angle), 0.0)
        x, y = rng.uniform(-0.1, 0.1, size=2)
        vx, vy = rng.uniform(-0.05, 0.05, size=2)
        self.sim.reset_base(self.ball, (x, y, self.SURFACE_Z + self.BALL_RADIUS + 0.002), (vx, vy, 0.0))
        self.sim.step_simulation()  # let the ball settle onto the plate
        state, _ = self._state()
        return self._observation(state), self._info(state)

    def _torques(self, action: Any) -> list[float]:
        if self.continuous:
            torque = np.clip(np.asarray(action, dtype=np.float64).reshape(-1)[:2], -1.0, 1.0) * self.max_torque
            return [float(torque[0]), float(torque[1])]
        if not self.action_space.contains(action):
            raise ValueError(f"invalid action {action!r} for {self.action_space}")
        index = int(action)
        return [(index // 3 - 1) * self.max_torque, (index % 3 - 1) * self.max_torque]

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        torques = self._torques(action)
        self.sim.step_with_torques(self.plate, self.joints, torques, self.FRAME_SKIP)
        state, ball_z = self._state()
        x, y = float(state[4]), float(state[5])
        off = abs(x) > self.HALF_SIZE or abs(y) > self.HALF_SIZE or ball_z < self.SURFACE_Z - 0.05
        reward = 0.0 if off else 1.0 - 0.5 * (x * x + y * y) / self.HALF_SIZE**2
        return self._observation(state), reward, bool(off), False, self._info(state)
