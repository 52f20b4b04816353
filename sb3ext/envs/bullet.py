"""One PyBullet physics client per environment, and the few operations sb3ext's envs need.

``render_mode="human"`` opens the GUI; anything else (``None``, ``"rgb_array"``) a DIRECT client
rendered with the TinyRenderer (headless, no display needed). Every call passes this client's
id; URDFs are loaded by absolute path from the package's ``assets`` (no process-wide search path).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from sb3ext.common.expert_state import STATE_KEY

PIXEL_SIZE = 84


def to_grayscale(frame: np.ndarray, size: int = PIXEL_SIZE, supersample: int = 1) -> np.ndarray:
    """RGB (H, W, 3) uint8 -> grayscale (size, size, 1) uint8 (ITU-R 601 luma).

    :param supersample: the frame is ``supersample`` times larger than ``size`` on each axis; each output pixel is the
        mean of its block (anti-aliasing: an edge that crosses a pixel shows as a grey level, not all or nothing)
    """
    gray = frame[..., 0] * 0.299 + frame[..., 1] * 0.587 + frame[..., 2] * 0.114
    assert gray.shape == (size * supersample, size * supersample)
    if supersample > 1:
        gray = gray.reshape(size, supersample, size, supersample).mean(axis=(1, 3))
    return gray.astype(np.uint8)[..., None]


def asset_path(name: str) -> Path:
    """Absolute path of a URDF shipped in ``sb3ext/envs/assets``."""
    path = Path(str(resources.files("sb3ext.envs") / "assets" / name))
    if not path.is_file():
        raise FileNotFoundError(f"sb3ext asset {name!r} not found at {path}")
    return path


class BulletSim:
    """A PyBullet client owned by one environment.

    :param render_mode: None, "rgb_array" (DIRECT + TinyRenderer) or "human" (GUI)
    :param timestep: physics time step in seconds
    :param gravity: gravity along z (m/s^2)
    """

    def __init__(self, render_mode: str | None = None, timestep: float = 0.01, gravity: float = -9.81):
        import os

        import pybullet
        from pybullet_utils.bullet_client import BulletClient

        if render_mode == "human" and not os.environ.get("DISPLAY"):
            # pybullet's GUI connection exits the whole process when there is no X server
            raise RuntimeError("render_mode='human' needs a display (DISPLAY is not set); use render_mode='rgb_array'")
        self.p = pybullet
        self.render_mode = render_mode
        self.client = BulletClient(connection_mode=pybullet.GUI if render_mode == "human" else pybullet.DIRECT)
        self.timestep = timestep
        self.client.setTimeStep(timestep)
        self.client.setGravity(0.0, 0.0, gravity)
        self._closed = False
        # hot path: bound pybullet calls (this client's id already applied by BulletClient)
        self._get_joint_states = self.client.getJointStates
        self._get_base_pose = self.client.getBasePositionAndOrientation
        self._get_base_velocity = self.client.getBaseVelocity
        self._set_motors = self.client.setJointMotorControlArray
        self._step_simulation = self.client.stepSimulation
        self._torque_control = pybullet.TORQUE_CONTROL

    @property
    def id(self) -> int:
        return int(self.client._client)

    def load_urdf(self, name: str, position: tuple[float, float, float] = (0.0, 0.0, 0.0), fixed: bool = False) -> int:
        return int(self.client.loadURDF(str(asset_path(name)), basePosition=position, useFixedBase=fixed))

    def joint_index(self, body: int, name: str) -> int:
        for index in range(self.client.getNumJoints(body)):
            if self.client.getJointInfo(body, index)[1].decode() == name:
                return index
        raise KeyError(f"no joint {name!r} in body {body}")

    def free_joints(self, body: int, joints: list[int]) -> None:
        """Disable the default velocity motor of the joints (it would brake them) so torques/forces act freely."""
        for joint in joints:
            self.client.setJointMotorControl2(body, joint, self.p.VELOCITY_CONTROL, force=0.0)

    def reset_joint(self, body: int, joint: int, position: float, velocity: float = 0.0) -> None:
        self.client.resetJointState(body, joint, position, velocity)

    def set_color(self, body: int, link: int, rgba: tuple[float, float, float, float]) -> None:
        self.client.changeVisualShape(body, link, rgbaColor=list(rgba))

    def set_dynamics(self, body: int, link: int, **dynamics: float) -> None:
        """``changeDynamics`` (lateralFriction, rollingFriction, restitution, ...)."""
        self.client.changeDynamics(body, link, **dynamics)

    def reset_base(
        self, body: int, position: tuple[float, float, float], velocity: tuple[float, float, float] = (0.0, 0.0, 0.0)
    ) -> None:
        """Put a free body at ``position`` (unrotated) with linear ``velocity`` and no spin."""
        self.client.resetBasePositionAndOrientation(body, position, (0, 0, 0, 1))
        self.client.resetBaseVelocity(body, velocity, (0.0, 0.0, 0.0))

    def step_simulation(self) -> None:
        self._step_simulation()

    def step_with_torques(self, body: int, joints: list[int], torques: list[float], substeps: int) -> None:
        """Apply the joint torques (forces for prismatic joints) and advance ``substeps`` physics steps.

        The hot path of every env step: the pybullet functions are bound once (``BulletClient`` builds a
        partial on every attribute access).
        """
        for _ in range(substeps):
            self._set_motors(body, joints, self._torque_control, forces=torques)
            self._step_simulation()

    def joint_states(self, body: int, joints: list[int]) -> list[tuple[float, float]]:
        """(position, velocity) of each joint."""
        return [(state[0], state[1]) for state in self._get_joint_states(body, joints)]

    def base_state(self, body: int) -> tuple[tuple[float, float, float], tuple[float, float, float]]:
        """(position, linear velocity) of a free body."""
        position, _ = self._get_base_pose(body)
        velocity, _ = self._get_base_velocity(body)
        return position, velocity

    def render(
        self,
        width: int,
        height: int,
        target: tuple[float, float, float],
        distance: float,
        yaw: float,
        pitch: float,
        fov: float = 60.0,
        aspect: float | None = None,
    ) -> np.ndarray:
        """An RGB frame (height, width, 3) uint8 from the TinyRenderer (works headless).

        ``fov`` is the vertical field of view; ``aspect`` (horizontal / vertical extent, default width / height)
        other than width / height stretches the picture (e.g. a wide, flat scene into a square frame).
        """
        view = self.client.computeViewMatrixFromYawPitchRoll(target, distance, yaw, pitch, 0.0, 2)
        projection = self.client.computeProjectionMatrixFOV(fov, aspect or width / height, 0.05, 20.0)
        _, _, rgba, _, _ = self.client.getCameraImage(
            width, height, view, projection, renderer=self.p.ER_TINY_RENDERER, flags=self.p.ER_NO_SEGMENTATION_MASK
        )
        return np.asarray(rgba, dtype=np.uint8).reshape(height, width, 4)[..., :3]

    def close(self) -> None:
        if not getattr(self, "_closed", True):
            self._closed = True
            try:
                self.client.disconnect()
            except Exception:  # already disconnected (e.g. GUI window closed)
                pass

    def __del__(self) -> None:
        self.close()


class BulletEnv(gym.Env):
    """What sb3ext's PyBullet envs share: argument checks, the simulator, pixel observations, rendering, close.

    Subclasses set ``PHYSICS_DT``, build their scene on ``self.sim`` and implement ``_camera(width, height)`` (and
    ``_observation_camera(size)`` when the observation's camera differs from the rendering one).

    :param supersample: pixel observations are rendered ``supersample`` times larger on each axis and averaged down
        to 84x84 (anti-aliased: sub-pixel motion shows as grey levels); 1: rendered at 84x84
    """

    metadata = {"render_modes": ["human", "rgb_array"], "render_fps": 50}
    PHYSICS_DT = 0.01
    #: the part of the state a robot reads from its joint encoders (``obs_type="pixels_joints"``); None: not offered
    JOINT_STATE: slice | None = None

    def __init__(self, obs_type: str, render_mode: str | None, supersample: int = 1, **positive: float):
        kinds = ("state", "pixels", "pixels_joints") if self.JOINT_STATE is not None else ("state", "pixels")
        if obs_type not in kinds:
            raise ValueError(f"obs_type must be one of {', '.join(map(repr, kinds))}, got {obs_type!r}")
        if not (isinstance(supersample, (int, np.integer)) and 1 <= supersample <= 8):
            raise ValueError(f"supersample must be an integer from 1 to 8, got {supersample!r}")
        if render_mode not in (None, *self.metadata["render_modes"]):
            raise ValueError(f"render_mode must be None, 'rgb_array' or 'human', got {render_mode!r}")
        for name, value in positive.items():
            if value <= 0:
                raise ValueError(f"{name} must be positive, got {value}")
        self.obs_type = obs_type
        self.supersample = int(supersample)
        self.render_mode = render_mode
        self.sim = BulletSim(render_mode, timestep=self.PHYSICS_DT)

    def _set_spaces(self, state_high: np.ndarray) -> None:
        """``state_space`` (the physical state) and ``observation_space``: that state, 84x84 grayscale frames, or
        (``pixels_joints``) a ``Dict`` of the frames (``camera``) and the joint part of the state (``joints``)."""
        self.state_space = gym.spaces.Box(-state_high, state_high, dtype=np.float32)
        frames = gym.spaces.Box(0, 255, (PIXEL_SIZE, PIXEL_SIZE, 1), np.uint8)
        if self.obs_type == "state":
            self.observation_space: gym.spaces.Space = self.state_space
        elif self.obs_type == "pixels":
            self.observation_space = frames
        else:
            joints = gym.spaces.Box(-state_high[self.JOINT_STATE], state_high[self.JOINT_STATE], dtype=np.float32)
            self.observation_space = gym.spaces.Dict({"camera": frames, "joints": joints})

    def _observation(self, state: np.ndarray) -> Any:
        if self.obs_type == "state":
            return state
        size = PIXEL_SIZE * self.supersample
        frame = to_grayscale(self._observation_camera(size), PIXEL_SIZE, self.supersample)
        if self.obs_type == "pixels":
            return frame
        return {"camera": frame, "joints": state[self.JOINT_STATE].copy()}

    def _observation_camera(self, size: int) -> np.ndarray:
        """The RGB frame (size, size, 3) that pixel observations are made of; by default the rendering camera."""
        return self._camera(size, size)

    def _info(self, state: np.ndarray) -> dict[str, Any]:
        """Pixel envs give the physical state in ``info["state"]`` (sb3ext's convention for an expert that observes
        the state while the learner sees frames: ``sb3ext.common.expert_state``)."""
        return {STATE_KEY: state.copy()} if self.obs_type != "state" else {}

    def _camera(self, width: int, height: int) -> np.ndarray:
        raise NotImplementedError

    def render(self) -> Any:
        if self.render_mode == "rgb_array":
            return self._camera(320, 240)
        return None

    def close(self) -> None:
        self.sim.close()
