"""sb3ext's PyBullet environments: registry-driven checks, determinism, rendering, resources."""

from __future__ import annotations

import gc
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
    env = gym.make("sb3ext/CartPolePixels-v0")
    first, _ = env.reset(seed=0)
    assert first.shape == (84, 84, 1) and first.dtype == np.uint8
    for _ in range(10):
        last, *_ = env.step(1)
    env.close()
    assert np.abs(last.astype(int) - first.astype(int)).sum() > 500


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
    "kwargs,message", [({"obs_type": "rgb"}, "obs_type must be"), ({"max_force": 0}, "max_force must be positive")]
)
def test_bad_arguments_name_the_problem(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        gym.make("sb3ext/CartPole-v0", **kwargs)


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
    assert after - before < 60, f"RSS grew by {after - before:.0f} MB over 200 envs (~28 MB per leaked client)"


def test_subproc_vec_env_steps() -> None:
    env = make_vec_env("sb3ext/CartPoleContinuous-v0", n_envs=2, seed=0, vec_env_cls=SubprocVecEnv)
    try:
        obs = env.reset()
        for _ in range(50):
            obs, rewards, dones, infos = env.step(np.zeros((2, 1), dtype=np.float32))
        assert obs.shape == (2, 4) and rewards.shape == (2,)
    finally:
        env.close()


def test_ids_are_registered_in_a_fresh_interpreter_without_importing_sb3ext() -> None:
    import subprocess
    import sys

    code = "import gymnasium as gym, sys; env = gym.make('sb3ext/CartPole-v0'); print(env.reset(seed=0)[0].shape, 'pybullet' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd="/")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith("(4,) True")
