"""Benchmark AggreVaTeD against stock SB3 PPO with the zoo's tuned hyperparameters.

Sample efficiency: for each task and seed, both algorithms are trained through the *unmodified*
rl-zoo3 CLI (``python -m rl_zoo3.train``) with the same evaluation protocol: the zoo's
EvalCallback every ``--eval-freq`` env steps, 10 deterministic episodes. The threshold is 90% of
the way from a uniformly random policy's return to the expert's (each measured here over 50 / 20
episodes). Reported: env steps until the mean evaluation return first reaches the threshold, and
the fraction of later evaluations that stay above it.

Throughput: AggreVaTeD and PPO at matched settings (same env, n_envs, n_steps, n_epochs, batch
size; AggreVaTeD with K=2 samples and an aggregation window of 1, i.e. the same number of states
per update), timed side by side in one process, alternating, repeated; the ratio of median env
steps per second is reported. This measures sb3ext's machinery overhead, not AggreVaTeD's default
settings (which spend far more compute per env step, and far fewer env steps).

    python scripts/benchmark_aggrevated.py                      # everything (~30 min on 2 cores)
    python scripts/benchmark_aggrevated.py --tasks Pendulum-v1 --seeds 0 --skip-throughput

Writes ``docs/benchmarks/aggrevated.md`` (tables, the command), ``docs/benchmarks/aggrevated_*.png``
(curves) and ``docs/benchmarks/aggrevated_runs.csv``; raw zoo logs go to ``--work-dir``.
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
from zoo_bench import train_through_zoo

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_EXPERTS = ROOT.parent / "shared" / "experts"


@dataclass(frozen=True)
class Task:
    env_id: str
    expert: str  # relative to the experts folder
    eval_freq: int
    aggrevated_budget: int
    ppo_budget: int


TASKS = {
    task.env_id: task
    for task in [
        Task("Pendulum-v1", "sac/Pendulum-v1_1", 256, 8_000, 50_000),
        Task("MountainCarContinuous-v0", "sac/MountainCarContinuous-v0_1", 128, 3_000, 20_000),
        Task("CartPole-v1", "dqn/CartPole-v1_1", 256, 8_000, 50_000),
        Task("Acrobot-v1", "dqn/Acrobot-v1_1", 256, 8_000, 60_000),
        # sb3ext's own env and the SAC expert shipped in the package (a `shipped:` reference)
        Task("sb3ext/BallPlateContinuous-v0", "shipped:sac/sb3ext-BallPlateContinuous-v0_1", 2_000, 16_000, 120_000),
    ]
}


def zoo_run(algo: str, task: Task, seed: int, work: Path, experts: Path) -> dict:
    """Train through the zoo CLI; return the evaluation curve and the wall-clock time."""
    budget = task.aggrevated_budget if algo == "aggrevated" else task.ppo_budget
    extra = ["--hyperparams", f"expert:'{expert_reference(task, experts)}'"] if algo == "aggrevated" else []
    folder = work / f"{algo}-{task.env_id.replace('/', '-')}-{seed}"
    return train_through_zoo(algo, task.env_id, seed, budget, task.eval_freq, folder, extra=extra)


def plot_name(env_id: str) -> str:
    return f"aggrevated_{env_id.replace('/', '-')}.png"


def expert_reference(task: Task, experts: Path) -> str:
    return task.expert if task.expert.startswith("shipped:") else str(experts / task.expert)


def reference_returns(task: Task, experts: Path) -> tuple[float, float]:
    """(random policy mean return over 50 episodes, expert mean return over 20 episodes)."""
    from sb3ext.callbacks import episode_returns
    from sb3ext.experts import load_expert

    random_returns, _ = episode_returns(task.env_id, None, 50, seed=1000)
    expert = load_expert(expert_reference(task, experts))
    expert_returns, _ = episode_returns(task.env_id, expert, 20, seed=2000, make_env=expert.make_env)
    return float(np.mean(random_returns)), float(np.mean(expert_returns))


def steps_to_threshold(result: dict, threshold: float) -> tuple[int | None, float]:
    from sb3ext.callbacks import first_crossing

    return first_crossing(np.asarray(result["timesteps"]), np.asarray(result["returns"]), threshold)


def throughput(env_id: str, repeats: int, steps: int) -> dict:
    """Env steps per second of PPO and AggreVaTeD at matched settings, timed alternately in this process."""
    import torch as th
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env

    from sb3ext.algos.aggrevated import AggreVaTeD
    from sb3ext.experts import load_expert

    th.set_num_threads(1)
    task = TASKS[env_id]
    expert = load_expert(DEFAULT_EXPERTS_FOR_THROUGHPUT / task.expert)
    matched = dict(n_steps=64, batch_size=64, n_epochs=10, learning_rate=3e-4, target_kl=None, seed=0)
    rates: dict[str, list[float]] = {"ppo": [], "aggrevated": [], "aggrevated_beta0": []}
    for _ in range(repeats):
        for algo in rates:
            env = make_vec_env(env_id, n_envs=4, seed=0)
            if algo == "ppo":
                model = PPO("MlpPolicy", env, **matched)
            else:
                beta = {"beta_init": 0.0} if algo == "aggrevated_beta0" else {}
                model = AggreVaTeD(
                    "MlpPolicy", env, expert=expert, n_action_samples=2, aggregation_window=1, **beta, **matched
                )
            model.learn(256)  # warm-up
            start = time.perf_counter()
            model.learn(steps, reset_num_timesteps=False)
            rates[algo].append(steps / (time.perf_counter() - start))
    ppo, agg, agg0 = (float(np.median(rates[k])) for k in ("ppo", "aggrevated", "aggrevated_beta0"))
    return {
        "env_id": env_id,
        "ppo_fps": ppo,
        "aggrevated_fps": agg,
        "ratio": agg / ppo,
        "beta0_fps": agg0,
        "beta0_ratio": agg0 / ppo,
        "repeats": repeats,
    }


DEFAULT_EXPERTS_FOR_THROUGHPUT = DEFAULT_EXPERTS


def plot_task(
    out: Path, task: Task, results: list[dict], random_return: float, expert_return: float, threshold: float
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    colors = {"aggrevated": "tab:blue", "ppo": "tab:orange"}
    labels = {"aggrevated": "AggreVaTeD (sb3ext defaults)", "ppo": "PPO (default YAML)"}
    for algo in ("aggrevated", "ppo"):
        runs = [r for r in results if r["algo"] == algo]
        for i, run in enumerate(runs):
            ax.plot(
                run["timesteps"], run["returns"], color=colors[algo], alpha=0.8, lw=1.2, label=labels[algo] if i == 0 else None
            )
    ax.axhline(expert_return, color="tab:green", ls="--", label=f"expert ({expert_return:.0f})")
    ax.axhline(random_return, color="tab:red", ls=":", label=f"random ({random_return:.0f})")
    ax.axhline(threshold, color="gray", ls="-.", lw=0.8, label="threshold (90%)")
    ax.set_xscale("log")
    ax.set_xlabel("environment steps (log scale)")
    ax.set_ylabel("mean evaluation return (10 deterministic episodes)")
    ax.set_title(f"{task.env_id}: one line per seed")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--experts", type=Path, default=DEFAULT_EXPERTS, help="folder of the zoo experts (../shared/experts)")
    parser.add_argument("--work-dir", type=Path, default=ROOT / "bench_runs" / "aggrevated")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks")
    parser.add_argument("--jobs", type=int, default=2, help="zoo runs in parallel (default 2: one per core)")
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--report", default="aggrevated", help="name of the report: docs/benchmarks/<report>.md")
    parser.add_argument("--throughput-repeats", type=int, default=5)
    args = parser.parse_args()
    global DEFAULT_EXPERTS_FOR_THROUGHPUT
    DEFAULT_EXPERTS_FOR_THROUGHPUT = args.experts
    args.out.mkdir(parents=True, exist_ok=True)
    args.work_dir.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("OMP_NUM_THREADS", "1")

    jobs = [(algo, TASKS[env_id], seed) for env_id in args.tasks for seed in args.seeds for algo in ("aggrevated", "ppo")]
    print(f"{len(jobs)} zoo runs, {args.jobs} at a time; logs in {args.work_dir}", flush=True)
    with ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(lambda job: zoo_run(*job, args.work_dir, args.experts), jobs))

    rows = []
    summary = []
    for env_id in args.tasks:
        task = TASKS[env_id]
        random_return, expert_return = reference_returns(task, args.experts)
        threshold = random_return + 0.9 * (expert_return - random_return)
        task_results = [r for r in results if r["env_id"] == env_id]
        plot_task(args.out / plot_name(env_id), task, task_results, random_return, expert_return, threshold)
        per_algo: dict[str, list[int | None]] = {"aggrevated": [], "ppo": []}
        for result in task_results:
            steps, held = steps_to_threshold(result, threshold)
            per_algo[result["algo"]].append(steps)
            rows.append({
                "env_id": env_id, "algo": result["algo"], "seed": result["seed"], "steps_to_threshold": steps,
                "held_after": f"{held:.2f}", "final_return": f"{result['returns'][-1]:.1f}", "budget": result["budget"],
                "wall_s": f"{result['wall_s']:.1f}", "random": f"{random_return:.1f}", "expert": f"{expert_return:.1f}",
                "threshold": f"{threshold:.1f}",
            })  # fmt: skip
        summary.append((env_id, random_return, expert_return, threshold, per_algo))

    with open(args.out / f"{args.report}_runs.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)

    tput = (
        []
        if args.skip_throughput
        else [throughput(env_id, args.throughput_repeats, 4096) for env_id in ("Pendulum-v1", "CartPole-v1")]
    )
    write_report(args, summary, rows, tput)
    print(f"Wrote {args.out / (args.report + '.md')}")


def _fmt(steps: list[int | None], budget: int) -> str:
    values = [f"{s:,}" if s is not None else f">{budget:,}" for s in steps]
    reached = [s for s in steps if s is not None]
    median = f"{int(np.median(reached)):,}" if len(reached) == len(steps) else "—"
    return f"{median} ({', '.join(values)})"


def write_report(args: argparse.Namespace, summary: list, rows: list[dict], tput: list[dict]) -> None:
    command = "python scripts/benchmark_aggrevated.py " + " ".join(sys.argv[1:])
    lines = [
        "# AggreVaTeD vs zoo-tuned PPO",
        "",
        f"Generated by `{command.strip()}` (scripts/benchmark_aggrevated.py) on "
        f"{time.strftime('%Y-%m-%d')}, {os.cpu_count()} CPU cores, seeds {args.seeds}.",
        "",
        "Both algorithms are trained by the unmodified `python -m rl_zoo3.train` (AggreVaTeD with "
        "`hyperparams/aggrevated.yml`, PPO with the zoo's own `ppo.yml`, sb3ext's for `sb3ext/` ids) "
        "and evaluated by the zoo's "
        "EvalCallback with the same frequency and 10 deterministic episodes. Threshold: random + 0.9 x "
        "(expert - random). Steps: median over seeds (each seed in brackets); `>N`: not reached within the budget N.",
        "",
        "## Env steps to 90% of the expert's return",
        "",
        "| task (expert) | random | expert | threshold | AggreVaTeD steps | PPO steps | PPO / AggreVaTeD |",
        "|---|---|---|---|---|---|---|",
    ]
    for env_id, random_return, expert_return, threshold, per_algo in summary:
        task = TASKS[env_id]
        agg, ppo = per_algo["aggrevated"], per_algo["ppo"]
        ratio = "—"
        if all(s is not None for s in agg) and all(s is not None for s in ppo):
            ratio = f"{np.median(ppo) / np.median(agg):.1f}x"
        elif all(s is not None for s in agg):
            ratio = f">{task.ppo_budget / np.median(agg):.1f}x"
        expert_algo = task.expert.removeprefix("shipped:").split("/")[0].upper()
        lines.append(
            f"| {env_id} ({expert_algo}) | {random_return:.0f} | {expert_return:.0f} | {threshold:.0f} "
            f"| {_fmt(agg, task.aggrevated_budget)} | {_fmt(ppo, task.ppo_budget)} | {ratio} |"
        )
    lines += ["", "Per run (steps, fraction of later evaluations still above the threshold, final return, wall-clock "
              "of the whole zoo run including its evaluations):", "",
              "| task | algo | seed | steps | held after | final return | wall-clock s |",
              "|---|---|---|---|---|---|---|"]  # fmt: skip
    for row in rows:
        lines.append(
            f"| {row['env_id']} | {row['algo']} | {row['seed']} | {row['steps_to_threshold'] or '>' + str(row['budget'])} "
            f"| {row['held_after']} | {row['final_return']} | {row['wall_s']} |"
        )
    lines += [""] + [f"![{env_id}]({plot_name(env_id)})" for env_id, *_ in summary]
    if tput:
        lines += [
            "",
            "## Throughput at matched settings",
            "",
            "4 envs, n_steps 64, batch 64, 10 epochs, lr 3e-4, no KL early stop; "
            "AggreVaTeD with K=2 action samples and an aggregation "
            f"window of 1 (so one update sees the same 256 states as PPO's). {tput[0]['repeats']} alternating repeats "
            "of 4096 env steps in one process, median env steps per second:",
            "",
            "| env | PPO steps/s | AggreVaTeD steps/s (ratio) | AggreVaTeD without expert roll-in, beta 0 (ratio) |",
            "|---|---|---|---|",
        ]
        lines += [
            f"| {t['env_id']} | {t['ppo_fps']:.0f} | {t['aggrevated_fps']:.0f} ({t['ratio']:.2f}x) "
            f"| {t['beta0_fps']:.0f} ({t['beta0_ratio']:.2f}x) |"
            for t in tput
        ]
        lines += [
            "",
            "The default roll-in (beta 0.5, decaying x0.9 per iteration) runs the expert's actor on most env steps of "
            "the first iterations, which PPO never pays; the beta-0 column isolates sb3ext's own machinery.",
        ]
    (args.out / f"{args.report}.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
