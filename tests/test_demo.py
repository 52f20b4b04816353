"""The README's main job, shortened: the demo runs offline and writes what it says."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT


def test_demo_runs_and_writes_its_outputs(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    args = ["-m", "sb3ext.demo", "--timesteps", "512", "--eval-freq", "256", "--eval-episodes", "1", "--out", str(out)]
    result = subprocess.run([sys.executable, *args], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                            env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"})  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert "[4/4] Writing results" in result.stdout and "gap closed" in result.stdout
    rows = (out / "aggrevated_Pendulum-v1.csv").read_text().splitlines()
    assert rows[0].startswith("env_steps,learner_mean") and [r.split(",")[0] for r in rows[1:]] == ["256", "512"]
    assert (out / "aggrevated_Pendulum-v1.png").stat().st_size > 10_000
    assert (out / "logs" / "aggrevated" / "Pendulum-v1_1" / "Pendulum-v1.zip").is_file()
    # the README's replay command on the demo's output (it failed with KeyError: 'env_kwargs' before)
    enjoy = ["-m", "rl_zoo3.enjoy", "--algo", "aggrevated", "--env", "Pendulum-v1", "-f", str(out / "logs"),
             "-n", "50", "--no-render"]  # fmt: skip
    replay = subprocess.run([sys.executable, *enjoy], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                            env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"})  # fmt: skip
    assert replay.returncode == 0, replay.stderr[-3000:]
