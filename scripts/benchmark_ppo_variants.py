"""Benchmark sb3ext's PPO variants (ppo_kl, rpo, ppo_tanh) against stock SB3 PPO, all through the unmodified zoo.

Returns: each algorithm trains with its default YAML (the zoo's ppo.yml for stock PPO; sb3ext's
hyperparams/<algo>.yml for the variants, which start from the zoo's PPO entries without gSDE) through
``python -m rl_zoo3.train``, with the zoo's EvalCallback (deterministic episodes every ``eval_freq`` env
steps). Reported per task: the curves (median of the seeds, each seed faint), the final evaluation and the
mean of the last three evaluations.

Throughput: stock PPO, ``ppo_kl`` and ``rpo`` with identical settings (the Pendulum-v1 YAML entry without
gSDE; ppo_kl with clipping and its KL penalty, rpo with alpha 0.5), timed alternately in this process,
median of ``--repeats`` runs of ``--throughput-steps`` env steps; the ratio of env steps per second is reported.

    python scripts/benchmark_ppo_variants.py                                   # everything (see docs)
    python scripts/benchmark_ppo_variants.py --tasks Pendulum-v1 --seeds 0 --skip-throughput

Writes ``docs/benchmarks/ppo_variants.md``, ``docs/benchmarks/ppo_variants_<env>.png`` and
``docs/benchmarks/ppo_variants_runs.csv``; raw zoo logs in ``--work-dir`` (finished runs are reused).
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from zoo_bench import save_figure, train_through_zoo

ROOT = Path(__file__).resolve().parent.parent
ALGOS = ("ppo", "ppo_kl", "rpo", "ppo_tanh")


@dataclass(frozen=True)
class Task:
    env_id: str
    budget: int
    eval_freq: int
    eval_episodes: int


TASKS = {
    task.env_id: task
    for task in [
        Task("Pendulum-v1", 100_000, 5_000, 10),
        Task("LunarLanderContinuous-v3", 300_000, 15_000, 10),
        Task("BipedalWalker-v3", 300_000, 20_000, 5),
    ]
}


def throughput(repeats: int, steps: int) -> dict[str, float]:
    """Median env steps per second of PPO, KLPPO and RPO with identical settings, alternating in this process."""
    import torch as th
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env

    from sb3ext.algos.ppo_kl import KLPPO
    from sb3ext.algos.rpo import RPO

    th.set_num_threads(1)
    settings = dict(n_steps=1024, gae_lambda=0.95, gamma=0.9, n_epochs=10, learning_rate=1e-3, seed=0)
    makers = {
        "ppo": lambda env: PPO("MlpPolicy", env, **settings),
        "ppo_kl": lambda env: KLPPO("MlpPolicy", env, clip_range=0.2, kl_coef=1.0, **settings),
        "rpo": lambda env: RPO("MlpPolicy", env, rpo_alpha=0.5, **settings),
    }
    rates: dict[str, list[float]] = {name: [] for name in makers}
    for _ in range(repeats):
        for name, make in makers.items():
            model = make(make_vec_env("Pendulum-v1", n_envs=4, seed=0))
            model.learn(4096)  # warm-up
            start = time.perf_counter()
            model.learn(steps, reset_num_timesteps=False)
            rates[name].append(steps / (time.perf_counter() - start))
    return {name: float(np.median(values)) for name, values in rates.items()}


def plot_task(out: Path, task: Task, results: list[dict]) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for color, algo in zip(("black", "tab:blue", "tab:orange", "tab:green"), ALGOS):
        runs = [r for r in results if r["algo"] == algo]
        if not runs:
            continue
        length = min(len(r["returns"]) for r in runs)
        steps = np.asarray(runs[0]["timesteps"][:length])
        values = np.asarray([r["returns"][:length] for r in runs])
        for curve in values:
            ax.plot(steps, curve, color=color, alpha=0.25, lw=0.8)
        label = "PPO (zoo YAML)" if algo == "ppo" else algo
        ax.plot(steps, np.median(values, axis=0), color=color, lw=2, label=f"{label} (median of {len(runs)} seeds)")
    ylabel = f"evaluation return ({task.eval_episodes} deterministic episodes)"
    return save_figure(fig, ax, ylabel, f"PPO variants on {task.env_id}", out / f"ppo_variants_{task.env_id}.png")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS))
    parser.add_argument("--algos", nargs="+", default=list(ALGOS), choices=list(ALGOS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="trainings run in parallel")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--throughput-steps", type=int, default=8192)
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--work-dir", type=Path, default=ROOT / "bench_runs" / "ppo_variants")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()

    jobs = [(algo, TASKS[env], seed) for env in args.tasks for seed in args.seeds for algo in args.algos]
    print(f"{len(jobs)} zoo trainings, {args.jobs} at a time", flush=True)

    def run(job: tuple[str, Task, int]) -> dict:
        algo, task, seed = job
        folder = args.work_dir / f"{algo}-{task.env_id}-{seed}"
        return train_through_zoo(algo, task.env_id, seed, task.budget, task.eval_freq, folder, task.eval_episodes)

    with ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(run, jobs))
    tput = None if args.skip_throughput else throughput(args.repeats, args.throughput_steps)

    rows, lines = [], []
    for env in args.tasks:
        task = TASKS[env]
        task_results = [r for r in results if r["env_id"] == env]
        png = plot_task(args.out, task, task_results)
        lines += [
            f"### {env} ({task.budget:,} env steps, {task.eval_episodes} episodes every {task.eval_freq:,} steps)",
            "",
            "| algorithm | final return, median (seeds) | mean of the last 3 evaluations, median "
            "| mean of all evaluations (area under the curve), median | wall-clock per run |",
            "|---|---|---|---|---|",
        ]
        for algo in args.algos:
            runs = [r for r in task_results if r["algo"] == algo]
            finals = [r["returns"][-1] for r in runs]
            last3 = [float(np.mean(r["returns"][-3:])) for r in runs]
            area = [float(np.mean(r["returns"])) for r in runs]
            wall = float(np.median([r["wall_s"] for r in runs]))
            lines.append(
                f"| {algo} | {np.median(finals):.1f} ({', '.join(f'{v:.0f}' for v in finals)}) | "
                f"{np.median(last3):.1f} | {np.median(area):.1f} | {wall / 60:.1f} min |"
            )
            for r in runs:
                rows += [(algo, env, r["seed"], s, v) for s, v in zip(r["timesteps"], r["returns"])]
        lines += ["", f"![{env}]({png.name})", ""]
    with open(args.out / "ppo_variants_runs.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["algo", "env_id", "seed", "timesteps", "mean_return"])
        writer.writerows(rows)

    command = ("python scripts/benchmark_ppo_variants.py " + " ".join(sys.argv[1:])).strip()
    header = [
        "# PPO variants vs stock PPO",
        "",
        f"Generated by `{command}` on {time.strftime('%Y-%m-%d')} ({(time.perf_counter() - start) / 60:.0f} min, "
        f"{os.cpu_count()} cores). Every run: `python -m rl_zoo3.train --algo <algo> --env <env> --seed <seed> -n <budget>` "
        "with the default YAML (stock PPO: the zoo's `ppo.yml`, with gSDE where the zoo uses it; the variants: "
        "sb3ext's `hyperparams/<algo>.yml`, the same entries without gSDE), deterministic evaluation episodes.",
        "",
    ]
    if tput is not None:
        header += [
            f"Throughput (Pendulum-v1, identical settings, alternating in one process, median of {args.repeats} x "
            f"{args.throughput_steps:,} env steps): PPO {tput['ppo']:.0f} steps/s; "
            f"ppo_kl {tput['ppo_kl']:.0f} ({tput['ppo_kl'] / tput['ppo']:.2f}x); "
            f"rpo {tput['rpo']:.0f} ({tput['rpo'] / tput['ppo']:.2f}x).",
            "",
        ]
    (args.out / "ppo_variants.md").write_text("\n".join(header + lines))
    print("\n".join(header + lines))


if __name__ == "__main__":
    main()
