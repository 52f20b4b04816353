"""imitation's DAgger and BC from the same zoo experts, beside AggreVaTeD and zoo-tuned PPO.

imitation 1.0.1 pins SB3 2.2 and gymnasium 0.29, so it runs in a venv of its own, built here when missing
(``--venv``; CPU torch 2.13.0 first, then ``imitation==1.0.1 'numpy<2' 'pandas<3' 'pyarrow<18' 'datasets<3'
'gymnasium[box2d]'``; box2d-py builds with Debian's ``swig``, installed with apt-get when missing and root).
Each run is ``scripts/imitation_worker.py`` under that venv's interpreter.

Same expert, same network size as AggreVaTeD's YAML (64-64 on the small tasks, 256-256 on the walkers), same
thresholds (random + 0.9 (expert - random), the references measured as in ``benchmark_aggrevated.py``:
50 random and 20 expert episodes), deterministic evaluation episodes of the learner. Env steps count every
env step DAgger's collector or BC's demonstration rollouts take.

    python scripts/benchmark_imitation.py                                  # the four small tasks, 3 seeds
    python scripts/benchmark_imitation.py --tasks CartPole-v1 --seeds 0    # one quick run

Writes ``docs/benchmarks/imitation.md`` (with the AggreVaTeD and PPO medians of
``docs/benchmarks/aggrevated_runs.csv`` beside them) and ``docs/benchmarks/imitation_runs.csv``.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
PINS = ["imitation==1.0.1", "numpy<2", "pandas<3", "pyarrow<18", "datasets<3", "gymnasium[box2d]"]
#: for the MuJoCo tasks: TQC experts (sb3-contrib of imitation's SB3 2.2) and a MuJoCo for gymnasium 0.29's -v4 envs
MUJOCO_PINS = ["sb3-contrib==2.2.1", "mujoco==2.3.7", "imageio"]


@dataclass(frozen=True)
class Task:
    env_id: str
    expert: str  # relative to the experts folder
    expert_algo: str
    budget: int
    eval_every: int
    eval_episodes: int
    net_arch: tuple[int, ...]


TASKS = {
    task.env_id: task
    for task in [
        Task("Pendulum-v1", "sac/Pendulum-v1_1", "sac", 60_000, 2_000, 10, (64, 64)),
        Task("MountainCarContinuous-v0", "sac/MountainCarContinuous-v0_1", "sac", 20_000, 2_000, 10, (64, 64)),
        Task("CartPole-v1", "dqn/CartPole-v1_1", "dqn", 20_000, 1_000, 10, (64, 64)),
        Task("Acrobot-v1", "dqn/Acrobot-v1_1", "dqn", 20_000, 1_000, 10, (64, 64)),
        Task("BipedalWalkerHardcore-v3", "ppo/BipedalWalkerHardcore-v3_1", "ppo", 300_000, 20_000, 30, (256, 256)),
    ]
}


def ensure_venv(venv: Path, mujoco: bool = False) -> Path:
    """The imitation venv's interpreter, building the venv when it cannot import imitation (and, with ``mujoco``,
    adding sb3-contrib and MuJoCo when missing)."""
    python = venv / "bin" / "python"
    probe = [str(python), "-c", "import imitation, stable_baselines3, Box2D"]
    mujoco_probe = [str(python), "-c", "import sb3_contrib, mujoco, imageio"]
    if python.exists() and subprocess.run(probe, capture_output=True).returncode == 0:
        if mujoco and subprocess.run(mujoco_probe, capture_output=True).returncode != 0:
            subprocess.run([str(python), "-m", "pip", "install", "-q", *PINS, *MUJOCO_PINS], check=True)
        return python
    print(f"building the imitation venv in {venv} (a few minutes)", flush=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", "torch==2.13.0"], check=True)
    if shutil.which("swig") is None and os.geteuid() == 0:
        subprocess.run(["apt-get", "update", "-qq"], check=False)
        subprocess.run(["apt-get", "install", "-y", "-qq", "swig"], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", *PINS, *(MUJOCO_PINS if mujoco else [])], check=True)
    return python


def references(task: Task, experts: Path, stats_dir: Path) -> tuple[float, float, Path | None]:
    """(random return, expert return, npz of the expert's VecNormalize statistics or None), as benchmark_aggrevated."""
    from sb3ext.callbacks import episode_returns
    from sb3ext.experts import load_expert

    random_returns, _ = episode_returns(task.env_id, None, 50, seed=1000)
    expert = load_expert(experts / task.expert)
    expert_returns, _ = episode_returns(task.env_id, expert, 20, seed=2000, make_env=expert.make_env)
    stats = write_statistics(expert, stats_dir / f"{task.env_id}.npz")
    return float(np.mean(random_returns)), float(np.mean(expert_returns)), stats


def write_statistics(expert: Any, path: Path) -> Path | None:
    """The expert's frozen VecNormalize observation statistics as an npz for imitation_worker.py; None without."""
    norm = expert.normalization
    if norm is None or norm.obs_rms is None:
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, mean=norm.obs_rms.mean, var=norm.obs_rms.var, epsilon=norm.epsilon, clip_obs=norm.clip_obs)
    return path


def expert_statistics(expert_path: Path, path: Path) -> Path | None:
    """``write_statistics`` for the expert at ``expert_path`` (loaded without an env check)."""
    from sb3ext.experts import load_expert

    return write_statistics(load_expert(expert_path), path)


def result_path(work: Path, method: str, task: Task, seed: int, eval_seed: int) -> Path:
    """Where ``run`` caches a run's result: named by its evaluation episodes too, so that a benchmark evaluating
    on other episodes runs again instead of reading another evaluation back."""
    return work / f"{method}-{task.env_id}-{seed}-eval{eval_seed}x{task.eval_episodes}.json"


def run(
    python: Path,
    method: str,
    task: Task,
    seed: int,
    experts: Path,
    stats: Path | None,
    work: Path,
    eval_seed: int = 50_000,
    bc_epochs: int = 4,
    normalize_obs: bool = False,
) -> dict:
    out = result_path(work, method, task, seed, eval_seed)
    if out.exists():
        return json.loads(out.read_text())
    command = [
        str(python), str(ROOT / "scripts" / "imitation_worker.py"), "--method", method, "--env", task.env_id,
        "--expert", str(next((experts / task.expert).glob("*.zip"))), "--expert-algo", task.expert_algo,
        "--budget", str(task.budget), "--eval-every", str(task.eval_every), "--eval-episodes", str(task.eval_episodes),
        "--net-arch", *map(str, task.net_arch), "--seed", str(seed), "--eval-seed", str(eval_seed), "--out", str(out),
        "--bc-epochs", str(bc_epochs), *(["--normalize-obs"] if normalize_obs else []),
    ]  # fmt: skip
    if stats is not None:
        command += ["--stats", str(stats)]
    with open(out.with_suffix(".log"), "w") as log:
        subprocess.run(command, check=True, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "OMP_NUM_THREADS": "1"})
    result = json.loads(out.read_text())
    print(
        f"  {method:6s} {task.env_id:26s} seed {seed}: {result['timesteps'][-1]} steps, {result['wall_s'][-1]:.0f} s",
        flush=True,
    )
    return result


def zoo_medians(csv_path: Path) -> dict[tuple[str, str], str]:
    """Median steps to threshold of AggreVaTeD and PPO per task, from benchmark_aggrevated's runs."""
    if not csv_path.exists():
        return {}
    rows = list(csv.DictReader(csv_path.open()))
    medians: dict[tuple[str, str], str] = {}
    for key in {(r["env_id"], r["algo"]) for r in rows}:
        steps = [r["steps_to_threshold"] for r in rows if (r["env_id"], r["algo"]) == key]
        reached = [int(s) for s in steps if s]
        medians[key] = f"{int(np.median(reached)):,}" if len(reached) * 2 > len(steps) else f">{rows[0]['budget']}"
    return medians


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", nargs="+", default=[t for t in TASKS if "Hardcore" not in t], choices=list(TASKS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--methods", nargs="+", default=["dagger", "bc"], choices=["dagger", "bc"])
    parser.add_argument("--experts", type=Path, default=ROOT.parent / "shared" / "experts")
    parser.add_argument("--venv", type=Path, default=ROOT / "bench_runs" / "imitation-venv")
    parser.add_argument("--work-dir", type=Path, default=ROOT / "bench_runs" / "imitation")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    from sb3ext.callbacks import first_crossing, threshold_between

    python = ensure_venv(args.venv)
    args.work_dir.mkdir(parents=True, exist_ok=True)
    refs = {name: references(TASKS[name], args.experts, args.work_dir / "stats") for name in args.tasks}
    jobs = [(m, TASKS[name], seed) for name in args.tasks for seed in args.seeds for m in args.methods]
    with ThreadPoolExecutor(args.jobs) as pool:
        results = list(
            pool.map(lambda j: run(python, j[0], j[1], j[2], args.experts, refs[j[1].env_id][2], args.work_dir), jobs)
        )
    zoo = zoo_medians(args.out / "aggrevated_runs.csv")
    rows, summary = [], []
    for name in args.tasks:
        random_return, expert_return, _ = refs[name]
        threshold = threshold_between(random_return, expert_return)
        cells = {}
        for method in args.methods:
            per_seed = []
            for result in (r for r in results if r["env"] == name and r["method"] == method):
                steps, held = first_crossing(np.asarray(result["timesteps"]), np.asarray(result["returns"]), threshold)
                if steps is not None and steps > TASKS[name].budget:  # DAgger's last round can overshoot the budget
                    steps, held = None, 0.0
                wall = None if steps is None else result["wall_s"][result["timesteps"].index(steps)]
                rows.append({"env_id": name, "method": method, "seed": result["seed"], "steps_to_threshold": steps or "",
                             "held_after": f"{held:.2f}", "wall_s_to_threshold": "" if wall is None else f"{wall:.1f}",
                             "final_return": f"{result['returns'][-1]:.1f}", "budget": TASKS[name].budget,
                             "threshold": f"{threshold:.1f}"})  # fmt: skip
                per_seed.append(steps)
            reached = [s for s in per_seed if s is not None]
            median = f"{int(np.median(reached)):,}" if len(reached) * 2 > len(per_seed) else f">{TASKS[name].budget:,}"
            cells[method] = f"{median} ({', '.join('-' if s is None else f'{s:,}' for s in per_seed)})"
        summary.append((name, random_return, expert_return, threshold, cells))
    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / "imitation_runs.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    lines = [
        "# DAgger and BC (imitation 1.0.1) beside AggreVaTeD and PPO",
        "",
        f"Generated by `python scripts/benchmark_imitation.py --tasks {' '.join(args.tasks)} --seeds "
        f"{' '.join(map(str, args.seeds))}` (imitation's own venv: {', '.join(PINS)}; SB3 2.2.1).",
        "",
        "Same expert (its frozen VecNormalize statistics applied), same learner network size as AggreVaTeD's YAML, "
        "same threshold (random + 0.9 (expert - random)); the learner is evaluated on deterministic seeded episodes "
        "every `eval_every` env steps. DAgger: imitation's `SimpleDAggerTrainer` (rounds of at least 3 episodes and "
        "500 steps, 4 BC epochs per round, its default beta schedule); BC: expert demonstrations grown by "
        "`eval_every` steps, a fresh BC fit (4 epochs) on all of them. Env steps: every step in the env (DAgger's "
        "mixed roll-ins, BC's demonstrations). AggreVaTeD and PPO: medians from "
        "[aggrevated.md](aggrevated.md) (the zoo CLI, 10-episode evaluations). Steps: median over seeds (each seed "
        "in brackets; `-`: not reached within the budget).",
        "",
        "| task | random | expert | threshold | AggreVaTeD | DAgger | BC | PPO (zoo) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, random_return, expert_return, threshold, cells in summary:
        lines.append(
            f"| {name} | {random_return:.0f} | {expert_return:.0f} | {threshold:.0f} | {zoo.get((name, 'aggrevated'), 'n/a')} "
            f"| {cells.get('dagger', 'n/a')} | {cells.get('bc', 'n/a')} | {zoo.get((name, 'ppo'), 'n/a')} |"
        )
    lines += ["", "Per run: [imitation_runs.csv](imitation_runs.csv).", ""]
    (args.out / "imitation.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
