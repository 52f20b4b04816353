"""python -m benchmarks.diagnose terms: a saved learner's seeded episodes, their reward terms and body orientation."""

from __future__ import annotations

import re
from collections import OrderedDict
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest
import yaml
from sb3_contrib.common.wrappers import TimeFeatureWrapper
from stable_baselines3 import PPO

from benchmarks.diagnose import main
from sb3ext.callbacks.evaluation import StackedFrames

EPISODE = re.compile(r"^(deterministic|sampled) seed \d+: return (-?\d+), length (\d+), reward_forward (-?\d+), "
                     r"reward_ctrl (-?\d+), upside_down ([\d.]+)$", re.M)  # fmt: skip


def a_harness_run(folder: Path, env: gym.Env, settings: dict[str, Any]) -> Path:
    """An untrained PPO saved as the harness saves a checkpoint, with the zoo's config.yml of its run."""
    checkpoint = folder / "checkpoints" / "rl_model_0_steps.zip"
    PPO("MlpPolicy", env, seed=0, device="cpu").save(checkpoint)
    config = folder / "logs" / "ppo" / "HalfCheetah-v5_1" / "HalfCheetah-v5" / "config.yml"
    config.parent.mkdir(parents=True)
    config.write_text(yaml.dump(OrderedDict([*settings.items(), ("policy", "MlpPolicy")])))  # as the zoo writes it
    return checkpoint


@pytest.mark.parametrize("observes", ["time feature", "2 frames"])
def test_each_episode_is_its_reward_terms_in_the_env_its_run_observed(
    observes: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the learner saw 18 numbers (17 and the time feature) or 34 (2 frames of 17): it acts only in the env its run's
    # config.yml names
    if observes == "time feature":
        env: gym.Env = TimeFeatureWrapper(gym.make("HalfCheetah-v5"))
        settings: dict[str, Any] = {"env_wrapper": "sb3_contrib.common.wrappers.TimeFeatureWrapper"}
    else:
        env, settings = StackedFrames(gym.make("HalfCheetah-v5"), 2), {"frame_stack": 2}
    checkpoint = a_harness_run(tmp_path, env, settings)
    assert main(["terms", str(checkpoint), "HalfCheetah-v5", "--algo", "ppo", "--episodes", "2", "--root-angle", "2"]) == 0
    out = capsys.readouterr().out
    episodes = EPISODE.findall(out)
    assert [mode for mode, *_ in episodes] == ["deterministic"] * 2 + ["sampled"] * 2, out
    for _, total, length, forward, ctrl, upside_down in episodes:
        assert int(length) == 1000  # HalfCheetah's time limit: no termination
        assert abs(int(total) - int(forward) - int(ctrl)) <= 2, out  # its reward is exactly these two terms
        assert 0.0 <= float(upside_down) <= 1.0
    sampled_ctrl = [int(ctrl) for mode, _, _, _, ctrl, _ in episodes if mode == "sampled"]
    assert all(-600 <= c < -50 for c in sampled_ctrl), out  # noise of std 1, clipped to the box: a cost of up to 0.6 a step
    for mode in ("deterministic", "sampled"):
        counts = re.findall(rf"^{mode}: (\d+) of 2 episodes (?:upside down|upright) on most steps", out, re.M)
        assert sum(map(int, counts)) == 2, out


def test_bad_input_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    checkpoint = tmp_path / "pendulum.zip"
    PPO("MlpPolicy", "Pendulum-v1", seed=0, device="cpu").save(checkpoint)
    with pytest.raises(SystemExit):
        main(["terms", str(checkpoint), "Pendulum-v1", "--algo", "ppo", "--episodes", "1", "--root-angle", "2"])
    assert "--root-angle: Pendulum-v1 is not a MuJoCo env" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["terms", str(tmp_path / "missing.zip"), "Pendulum-v1", "--algo", "ppo"])
    assert "missing.zip: no such file" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["terms", str(checkpoint), "Pendulum-v1", "--algo", "nope"])
    assert "--algo 'nope': not one of the zoo's algorithms" in capsys.readouterr().err
