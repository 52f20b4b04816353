"""python -m benchmarks.diagnose fragile: perturbed copies of an expert, their action gap and their returns."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import VecNormalize

from benchmarks.diagnose import GapRecorder, perturb
from benchmarks.runs import load_saved_learner
from sb3ext.algos.aggrevated import AggreVaTeD
from sb3ext.demo import EMBEDDED_EXPERT
from sb3ext.experts import load_expert

ROOT = Path(__file__).resolve().parent.parent


def test_perturb_scales_each_weight_from_the_original_and_the_recorder_measures_the_gap() -> None:
    reference = load_expert(str(EMBEDDED_EXPERT), env_id="Pendulum-v1")
    copy = load_expert(str(EMBEDDED_EXPERT), env_id="Pendulum-v1")
    original = {name: value.clone() for name, value in copy.policy.state_dict().items()}
    obs = np.random.default_rng(0).uniform(-1, 1, size=(64, 3)).astype(np.float32)

    perturb(copy, original, 0.0, seed=0)
    recorder = GapRecorder(copy, reference)
    recorder.predict(obs)
    assert recorder.gaps == [0.0]

    perturb(copy, original, 0.5, seed=0)
    state = copy.policy.state_dict()
    ratios = [(state[n] / original[n])[original[n] != 0] for n in original if original[n].dtype.is_floating_point]
    spread = float(np.std(np.concatenate([r.flatten().numpy() for r in ratios])))
    assert 0.4 < spread < 0.6  # 1 + 0.5 z, from the original weights
    recorder.predict(obs)
    assert recorder.gaps[-1] > 0.01
    perturb(copy, original, 0.5, seed=0)  # from the original again, not compounded
    assert all(np.allclose(copy.policy.state_dict()[n].numpy(), state[n].numpy()) for n in state)


def test_the_script_counts_the_copies_that_hold_the_threshold_and_measures_a_load_saved_learner(tmp_path: Path) -> None:
    venv = VecNormalize(make_vec_env("Pendulum-v1", n_envs=2, seed=0), norm_reward=False)
    model = AggreVaTeD("MlpPolicy", venv, expert=str(EMBEDDED_EXPERT), n_steps=64, batch_size=64, n_epochs=1, seed=0)
    model.learn(128)
    model.save(tmp_path / "rl_model_128_steps.zip")
    venv.save(str(tmp_path / "rl_model_vecnormalize_128_steps.pkl"))
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.diagnose", "fragile", str(EMBEDDED_EXPERT), "Pendulum-v1", "--scales", "0", "3",
         "--copies", "2", "--episodes", "3", "--learner", str(tmp_path / "rl_model_128_steps.zip")],
        capture_output=True, text=True, timeout=300, cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.strip().splitlines()
    assert "threshold" in lines[0] and lines[2] == "scale | copy | action gap | return", done.stdout
    learner = lines[1].split("action gap ")[1]  # an untrained learner: far from the expert's actions
    assert lines[1].startswith("learner ") and float(learner.split(",")[0]) > 0.05, lines[1]
    unchanged = [line.split(" | ") for line in lines if line.startswith("0 | ")]
    assert [float(row[2]) for row in unchanged] == [0.0, 0.0]  # scale 0: the expert itself
    assert "2 of 2 copies at or above the threshold" in next(line for line in lines if line.startswith("scale 0:"))
    wrecked = [line.split(" | ") for line in lines if line.startswith("3 | ")]
    assert all(float(row[2]) > 0.05 for row in wrecked), done.stdout  # weights scrambled: another controller


def test_a_saved_learner_finds_its_statistics_as_the_zoo_saves_them(tmp_path: Path) -> None:
    venv = VecNormalize(make_vec_env("Pendulum-v1", n_envs=1, seed=0), norm_reward=False)
    model = AggreVaTeD("MlpPolicy", venv, expert=str(EMBEDDED_EXPERT), n_steps=64, batch_size=64, n_epochs=1, seed=0)
    model.save(tmp_path / "rl_model_64_steps.zip")  # a checkpoint: the statistics beside it
    venv.save(str(tmp_path / "rl_model_vecnormalize_64_steps.pkl"))
    model.save(tmp_path / "Pendulum-v1.zip")  # the final model: the statistics in <env>/vecnormalize.pkl
    (tmp_path / "Pendulum-v1").mkdir()
    venv.save(str(tmp_path / "Pendulum-v1" / "vecnormalize.pkl"))
    model.save(tmp_path / "bare.zip")  # no statistics: raw observations

    def make(env_id: str) -> Any:
        return gym.make(env_id)

    assert load_saved_learner(tmp_path / "rl_model_64_steps.zip", "aggrevated", "Pendulum-v1", make).norm is not None
    assert load_saved_learner(tmp_path / "Pendulum-v1.zip", "aggrevated", "Pendulum-v1", make).norm is not None
    assert load_saved_learner(tmp_path / "bare.zip", "aggrevated", "Pendulum-v1", make).norm is None
