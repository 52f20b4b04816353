"""sb3ext's PyBullet environments: registry-driven checks, determinism, rendering, resources."""

from __future__ import annotations

import gc
import os
import resource

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env as gym_check_env
from stable_baselines3.common.env_checker import check_env as sb3_check_env
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import SubprocVecEnv

import sb3ext.envs

ENV_IDS = [env_id for env_id in gym.envs.registry if env_id.startswith("sb3ext/")]


def test_registry_holds_the_documented_ids() -> None:
    assert set(ENV_IDS) == set(sb3ext.envs.ENV_IDS)
    for env_id in ENV_IDS:
        spec = gym.spec(env_id)
        assert spec.max_episode_steps is not None, f"{env_id}: time limit belongs in the registration"


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_gymnasium_and_sb3_checkers(env_id: str) -> None:
    env = gym.make(env_id, render_mode="rgb_array")
    try:
        # the "human" render mode opens a GUI, which needs a display: checked separately below
        gym_check_env(env.unwrapped, skip_render_check=True)
        sb3_check_env(env.unwrapped, warn=True)
    finally:
        env.close()


def rollout(env_id: str, seed: int, steps: int = 120) -> tuple[np.ndarray, np.ndarray, list[bool]]:
    env = gym.make(env_id)
    env.action_space.seed(seed)
    obs, _ = env.reset(seed=seed)
    observations, rewards, dones = [obs], [], []
    for _ in range(steps):
        obs, reward, terminated, truncated, _ = env.step(env.action_space.sample())
        observations.append(obs)
        rewards.append(reward)
        dones.append(terminated or truncated)
        if terminated or truncated:
            obs, _ = env.reset()
            observations.append(obs)
    env.close()
    if isinstance(obs, dict):  # a Dict observation: every key, flattened side by side
        return (
            np.stack([np.concatenate([o[k].ravel().astype(np.float64) for k in sorted(o)]) for o in observations]),
            np.asarray(rewards),
            dones,
        )
    return np.stack(observations), np.asarray(rewards), dones


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_same_seed_same_trajectory(env_id: str) -> None:
    obs_a, rewards_a, dones_a = rollout(env_id, seed=3)
    obs_b, rewards_b, dones_b = rollout(env_id, seed=3)
    obs_c, _, _ = rollout(env_id, seed=4)
    np.testing.assert_array_equal(obs_a, obs_b)
    np.testing.assert_array_equal(rewards_a, rewards_b)
    assert dones_a == dones_b and any(dones_a), "random actions should end episodes in 120 steps"
    assert not np.array_equal(obs_a[:5], obs_c[:5])


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_rgb_array_frames(env_id: str) -> None:
    env = gym.make(env_id, render_mode="rgb_array")
    env.reset(seed=0)
    frame = env.render()
    env.close()
    assert frame.shape == (240, 320, 3) and frame.dtype == np.uint8
    assert frame.std() > 5, "the frame should show the scene, not a blank image"
    quiet = gym.make(env_id)
    quiet.reset(seed=0)
    assert quiet.render() is None  # render_mode None renders nothing
    quiet.close()


def test_pixel_observations_show_the_pole_moving() -> None:
    env = gym.make("sb3ext/CartPolePixels-v1")
    first, _ = env.reset(seed=0)
    assert first.shape == (84, 84, 1) and first.dtype == np.uint8
    for _ in range(10):
        last, *_ = env.step(1)
    env.close()
    assert np.abs(last.astype(int) - first.astype(int)).sum() > 500


def test_supersampled_frames_show_a_sub_pixel_tilt_that_plain_frames_do_not() -> None:
    """v2 renders 4x larger and averages down: a tilt that moves the pole's top by a fraction of a pixel changes the
    frame's grey levels; v1's 84x84 rendering shows the same scene as before (only whole pixels)."""

    def frame(env_id: str, theta: float) -> np.ndarray:
        env = gym.make(env_id)
        env.reset(seed=0)
        unwrapped = env.unwrapped
        unwrapped.sim.reset_joint(unwrapped.body, unwrapped.joints[0], 0.0, 0.0)
        unwrapped.sim.reset_joint(unwrapped.body, unwrapped.joints[1], theta, 0.0)
        observation = unwrapped._observation(unwrapped._state())
        env.close()
        return observation.astype(int)

    upright_v2, tilted_v2 = frame("sb3ext/CartPolePixels-v2", 0.0), frame("sb3ext/CartPolePixels-v2", 0.01)
    assert np.abs(tilted_v2 - upright_v2).sum() > 100, "a 0.6 degree tilt should change the anti-aliased frame"
    assert len(np.unique(upright_v2)) > 2 * len(np.unique(frame("sb3ext/CartPolePixels-v1", 0.0)))  # grey levels


def test_invalid_discrete_action_is_refused() -> None:
    env = gym.make("sb3ext/CartPole-v0")
    env.reset(seed=0)
    with pytest.raises(ValueError, match="invalid action 2 for Discrete"):
        env.unwrapped.step(2)
    env.close()


def test_human_mode_without_display_fails_clearly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DISPLAY", raising=False)
    with pytest.raises(RuntimeError, match="render_mode='human' needs a display"):
        gym.make(ENV_IDS[0], render_mode="human")


@pytest.mark.parametrize(
    "env_id,kwargs,message",
    [
        ("sb3ext/CartPole-v0", {"obs_type": "rgb"}, "obs_type must be"),
        ("sb3ext/CartPole-v0", {"max_force": 0}, "max_force must be positive"),
        ("sb3ext/BallPlate-v0", {"obs_type": "rgb"}, "obs_type must be"),
        ("sb3ext/BallPlate-v0", {"max_torque": -1}, "max_torque must be positive"),
        ("sb3ext/CartPolePixels-v2", {"supersample": 0}, "supersample must be an integer from 1 to 8, got 0"),
    ],
)
def test_bad_arguments_name_the_problem(env_id: str, kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        gym.make(env_id, **kwargs)


def _rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def test_opening_and_closing_200_envs_leaks_nothing() -> None:
    import pybullet

    def cycle(n: int) -> None:
        for i in range(n):
            env = gym.make(ENV_IDS[i % len(ENV_IDS)])
            env.reset(seed=i)
            env.step(env.action_space.sample())
            env.close()
        gc.collect()

    cycle(20)  # warm-up: imports, caches
    before = _rss_mb()
    probe = pybullet.connect(pybullet.DIRECT)
    pybullet.disconnect(probe)
    cycle(200)
    after = _rss_mb()
    probe_after = pybullet.connect(pybullet.DIRECT)
    pybullet.disconnect(probe_after)
    # client ids are reused once disconnected: a leak of 200 clients would push the next id past 200
    assert probe_after <= probe + 1, f"physics clients leaked: id {probe} -> {probe_after}"
    # a leaked client holds ~28 MB (5.6 GB over 200 envs); 1 MB per env leaves the allocator any machine's slack
    assert after - before < 200, f"RSS grew by {after - before:.0f} MB over 200 envs (~28 MB per leaked client)"


@pytest.mark.parametrize(
    ("env_id", "obs_dim", "action_dim"), [("sb3ext/CartPoleContinuous-v0", 4, 1), ("sb3ext/BallPlateContinuous-v0", 8, 2)]
)
def test_subproc_vec_env_steps(env_id: str, obs_dim: int, action_dim: int) -> None:
    env = make_vec_env(env_id, n_envs=2, seed=0, vec_env_cls=SubprocVecEnv)
    try:
        obs = env.reset()
        for _ in range(50):
            obs, rewards, dones, infos = env.step(np.zeros((2, action_dim), dtype=np.float32))
        assert obs.shape == (2, obs_dim) and rewards.shape == (2,)
    finally:
        env.close()


# ---------------------------------------------------------------------------------------------------- ball on plate


def level_plate_with_ball(x: float = 0.0, y: float = 0.0, tilt_y: float = 0.0):
    env = gym.make("sb3ext/BallPlateContinuous-v0").unwrapped
    env.reset(seed=0)
    env.sim.reset_joint(env.plate, env.joints[0], 0.0, 0.0)
    env.sim.reset_joint(env.plate, env.joints[1], tilt_y, 0.0)
    env.sim.client.resetBasePositionAndOrientation(env.ball, (x, y, env.SURFACE_Z + env.BALL_RADIUS), (0, 0, 0, 1))
    env.sim.client.resetBaseVelocity(env.ball, (0, 0, 0), (0, 0, 0))
    return env


def test_ball_rolls_down_a_tilted_plate_at_five_sevenths_g_sin_theta() -> None:
    env = level_plate_with_ball(tilt_y=np.deg2rad(5))
    for _ in range(25):  # 0.5 s
        obs, *_ = env.step(np.zeros(2, np.float32))
    env.close()
    acceleration = 2 * obs[4] / 0.5**2  # x = a t^2 / 2 (the ball starts at rest)
    assert acceleration == pytest.approx(5 / 7 * 9.81 * np.sin(np.deg2rad(5)), rel=0.05)


def test_plate_torque_sets_the_tilt_rate_within_the_limits() -> None:
    env = level_plate_with_ball()
    for _ in range(10):
        obs, *_ = env.step(np.array([1.0, -1.0], np.float32))
    assert obs[2] == pytest.approx(0.5, rel=0.1) and obs[3] == pytest.approx(-0.5, rel=0.1)  # 1 N m / 2 N m s/rad
    for _ in range(100):
        obs, *_ = env.step(np.array([1.0, -1.0], np.float32))
    env.close()
    assert 0.2 < obs[0] <= 0.26 and -0.26 <= obs[1] < -0.2  # held at the +-0.25 rad joint limits


def test_plate_discrete_actions_are_torque_signs() -> None:
    env = gym.make("sb3ext/BallPlate-v0", max_torque=0.7).unwrapped
    env.reset(seed=0)
    signs = {index: tuple(np.sign(env._torques(index))) for index in range(9)}
    assert signs[0] == (-1, -1) and signs[4] == (0, 0) and signs[8] == (1, 1) and signs[5] == (0, 1)
    assert len(set(signs.values())) == 9 and max(abs(t) for t in env._torques(2)) == 0.7
    with pytest.raises(ValueError, match="invalid action 9 for Discrete"):
        env.step(9)
    env.close()


def test_plate_reward_and_termination() -> None:
    env = level_plate_with_ball(x=0.125)
    _, reward, terminated, truncated, _ = env.step(np.zeros(2, np.float32))
    assert reward == pytest.approx(1 - 0.5 * 0.125**2 / 0.25**2, abs=0.01) and not terminated and not truncated
    env.sim.client.resetBasePositionAndOrientation(env.ball, (0.26, 0.0, 0.035), (0, 0, 0, 1))
    _, reward, terminated, _, _ = env.step(np.zeros(2, np.float32))
    env.close()
    assert terminated and reward == 0.0


def test_plate_pixels_show_the_ball_moving() -> None:
    env = gym.make("sb3ext/BallPlatePixels-v0")
    first, _ = env.reset(seed=0)
    assert first.shape == (84, 84, 1) and first.dtype == np.uint8
    for _ in range(15):
        last, *_ = env.step(np.array([0.0, 1.0], np.float32))
    env.close()
    assert np.abs(last.astype(int) - first.astype(int)).sum() > 500


def test_ids_are_registered_in_a_fresh_interpreter_without_importing_sb3ext() -> None:
    import subprocess
    import sys

    code = "import gymnasium as gym, sys; env = gym.make('sb3ext/CartPole-v0'); print(env.reset(seed=0)[0].shape, 'pybullet' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd="/")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith("(4,) True")


def test_the_learner_view_draws_the_stacked_observation_the_yaml_entry_gives(tmp_path) -> None:
    import subprocess
    import sys
    from pathlib import Path

    out = tmp_path / "view.png"
    done = subprocess.run([sys.executable, "-m", "benchmarks.diagnose", "view", "sb3ext/BallPlatePixels-v1", str(out),
                           "--steps", "3"], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parent.parent, env={**os.environ, "OMP_NUM_THREADS": "1"})  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    # the entry's frame_stack 4, as the zoo stacks it: four frames of the camera, four readings of the 4 joints
    assert done.stdout.strip().endswith("camera (84, 84, 4) uint8, joints (16,) float32"), done.stdout
    assert out.stat().st_size > 10_000


class _Received(gym.ActionWrapper):
    """Records every action the env receives."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self.received: list[np.ndarray] = []

    def action(self, action: np.ndarray) -> np.ndarray:
        self.received.append(np.array(action))
        return action


@pytest.mark.parametrize("raw", [False, True])
def test_raw_actions_reach_the_env_unclipped(raw: bool) -> None:
    """SB3's PPO clips its sampled actions to the Box (Pendulum: ±2); under ``RawActions`` the env receives the samples
    themselves (a wide policy noise: std e^2 ≈ 7.4, so most samples are out of bounds)."""
    from stable_baselines3 import PPO

    from sb3ext.envs.wrappers import RawActions

    inner = _Received(gym.make("Pendulum-v1"))
    env = RawActions(inner) if raw else inner
    model = PPO("MlpPolicy", env, n_steps=64, batch_size=64, n_epochs=1, seed=0, policy_kwargs={"log_std_init": 2.0})
    model.learn(64)
    largest = float(np.abs(np.concatenate(inner.received)).max())
    buffered = float(np.abs(model.rollout_buffer.actions).max())
    if raw:
        assert largest > 5.0 and largest == pytest.approx(buffered, rel=1e-6), "the sample itself, not clipped"
    else:
        assert largest == pytest.approx(2.0) and buffered > 5.0, "SB3 clips what the env receives"


def test_raw_actions_need_a_box() -> None:
    from sb3ext.envs.wrappers import RawActions

    with pytest.raises(ValueError, match=r"RawActions: invalid action_space=Discrete\(2\); allowed: a Box"):
        RawActions(gym.make("CartPole-v1"))
