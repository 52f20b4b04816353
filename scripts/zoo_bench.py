"""Shared by the benchmark scripts: one training through the unmodified zoo CLI, resumable, with its curve."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np


def train_through_zoo(
    algo: str,
    env_id: str,
    seed: int,
    budget: int,
    eval_freq: int,
    folder: Path,
    eval_episodes: int = 10,
    extra: list[str] | None = None,
) -> dict:
    """``python -m rl_zoo3.train`` with the zoo's EvalCallback; returns (and caches in folder/result.json) the curve.

    A finished run is not repeated: delete its folder to run it again.
    """
    result_file = folder / "result.json"
    if result_file.exists():
        return json.loads(result_file.read_text())
    folder.mkdir(parents=True, exist_ok=True)
    command = [
        sys.executable, "-m", "rl_zoo3.train", "--algo", algo, "--env", env_id, "--seed", str(seed),
        "-n", str(budget), "--eval-freq", str(eval_freq), "--eval-episodes", str(eval_episodes), "--n-eval-envs", "1",
        "-f", str(folder / "logs"), "--num-threads", "1", "--device", "cpu", "--log-interval", "-2", *(extra or []),
    ]  # fmt: skip
    start = time.perf_counter()
    with open(folder / "train.log", "w") as log:
        subprocess.run(command, check=True, stdout=log, stderr=subprocess.STDOUT, cwd=folder)
    wall = time.perf_counter() - start
    evaluations = np.load(next((folder / "logs" / algo).glob(f"{env_id.replace('/', '-')}_*/evaluations.npz")))
    result = {
        "algo": algo,
        "env_id": env_id,
        "seed": seed,
        "wall_s": wall,
        "budget": budget,
        "timesteps": evaluations["timesteps"].tolist(),
        "returns": evaluations["results"].mean(axis=1).tolist(),
        "lengths": evaluations["ep_lengths"].mean(axis=1).tolist(),
    }
    result_file.write_text(json.dumps(result))
    print(f"  {algo:10s} {env_id:26s} seed {seed}: {wall:6.1f} s", flush=True)
    return result


def save_figure(fig, ax, ylabel: str, title: str, path: Path) -> Path:  # type: ignore[no-untyped-def]
    """The benchmarks' common figure finish: axis labels, grid, legend, PNG at 110 dpi, figure closed."""
    import matplotlib.pyplot as plt

    ax.set_xlabel("environment steps")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
