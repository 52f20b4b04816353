"""scripts/term_signal.py: the agreement of independent gradient estimates, and a run on a saved learner."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import VecNormalize

from sb3ext.algos.aggrevated import AggreVaTeD
from sb3ext.demo import EMBEDDED_EXPERT
from scripts.term_signal import agreement

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "term_signal.py"


def test_agreement_is_one_for_one_direction_and_near_zero_for_independent_noise() -> None:
    rng = np.random.default_rng(0)
    direction = rng.normal(size=5_000)
    same = [direction * scale for scale in rng.uniform(0.5, 2.0, size=8)]
    assert abs(agreement(same, 2, rng, draws=20)[0] - 1.0) < 1e-9
    noise = [rng.normal(size=5_000) for _ in range(8)]
    assert abs(agreement(noise, 2, rng, draws=50)[0]) < 0.05
    # signal plus noise: the agreement grows with the group, as k s^2 / (1 + k s^2) (s^2 = 0.25 per estimate)
    mixed = [direction + rng.normal(size=5_000) * 2.0 for _ in range(16)]
    one, four = agreement(mixed, 1, rng)[0], agreement(mixed, 4, rng)[0]
    assert 0.1 < one < 0.4 and 0.4 < four < 0.7 and four > one


def test_the_script_measures_a_saved_learner_for_each_lambda(tmp_path: Path) -> None:
    venv = VecNormalize(make_vec_env("Pendulum-v1", n_envs=2, seed=0), norm_reward=False)
    model = AggreVaTeD("MlpPolicy", venv, expert=str(EMBEDDED_EXPERT), n_steps=64, batch_size=64, n_epochs=1, seed=0,
                       beta_init=0.0)  # fmt: skip
    model.learn(256)
    model.save(tmp_path / "rl_model_256_steps.zip")
    venv.save(str(tmp_path / "rl_model_vecnormalize_256_steps.pkl"))
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path), "256", "Pendulum-v1", str(EMBEDDED_EXPERT), "--rollins", "4",
         "--lambdas", "0", "0.95"],
        capture_output=True, text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.strip().splitlines()
    assert lines[0].startswith("4 roll-ins at beta") and "128 scored steps each" in lines[0], lines[0]
    rows = [line.split("|") for line in lines[2:]]
    assert [(float(r[0]), int(r[1])) for r in rows] == [(0.0, 1), (0.0, 2), (0.95, 1), (0.95, 2)], done.stdout
    assert all(-1.0 <= float(r[3].split()[0]) <= 1.0 for r in rows)
