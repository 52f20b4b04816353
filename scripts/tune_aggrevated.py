"""Tune AggreVaTeD with several zoo workers on one PostgreSQL study, export the best trial, compare it.

    python scripts/tune_aggrevated.py                      # Pendulum-v1, 2 workers, 20 trials of 2,000 steps
    python scripts/tune_aggrevated.py --storage postgresql+psycopg2://user@host/db   # an existing server

Without ``--storage`` it starts a throw-away PostgreSQL server from Debian's packages (installed with
apt-get when missing, as the tests do). Steps, each the documented recipe of docs/tuning.md:

1. ``python -m sb3ext.tune create`` (before the workers: the zoo's start-up races on a fresh database);
2. ``--workers`` unmodified ``python -m rl_zoo3.train --algo aggrevated -optimize --storage ... --study-name ...
   --max-total-trials N`` processes in parallel;
3. ``python -m sb3ext.tune export`` of the best trial to ``docs/tuning/aggrevated_<env>_best.yml``;
4. ``--seeds`` zoo trainings each with the default YAML and with the exported one (``-conf``) at the same
   budget, 10 deterministic evaluation episodes every ``--eval-freq`` steps.

Writes ``docs/tuning/aggrevated_<env>.{md,png,csv}``; raw logs in ``--work-dir``.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sb3ext.experts.references import PENDULUM_EXPERT, shipped_expert  # noqa: E402 - after the path line


def run(args: list[str], cwd: Path, log: Path) -> None:
    with open(log, "w") as out:
        subprocess.run([sys.executable, *args], cwd=cwd, stdout=out, stderr=subprocess.STDOUT, check=True)


def evaluations(folder: Path) -> tuple[np.ndarray, np.ndarray]:
    data = np.load(sorted(folder.glob("*/evaluations.npz"))[-1])
    return data["timesteps"], data["results"].mean(axis=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="Pendulum-v1")
    parser.add_argument("--expert", type=Path, default=shipped_expert(PENDULUM_EXPERT))
    parser.add_argument("--storage", default=None, help="database URL (default: a throw-away local PostgreSQL server)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--trial-timesteps", type=int, default=2000, help="budget of each trial")
    parser.add_argument("--trial-episodes", type=int, default=10, help="evaluation episodes of each trial")
    parser.add_argument("-n", "--timesteps", type=int, default=5000, help="budget of each comparison run")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--eval-freq", type=int, default=250)
    parser.add_argument("--work-dir", type=Path, default=ROOT / "bench_runs" / "tuning")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "tuning")
    args = parser.parse_args()
    work = args.work_dir / f"aggrevated-{args.env}-{int(time.time())}"
    work.mkdir(parents=True)
    args.out.mkdir(parents=True, exist_ok=True)
    expert = f"expert:'{args.expert.resolve()}'"
    study_name = f"aggrevated-{args.env}"

    with contextlib.ExitStack() as stack:
        storage = args.storage
        if storage is None:
            import pg_server  # scripts/pg_server.py, beside this script

            storage = stack.enter_context(pg_server.running_server())
        print(f"storage: {storage.split('@')[-1]}", flush=True)
        run(["-m", "sb3ext.tune", "create", "--storage", storage, "--study-name", study_name], work, work / "create.log")
        optimize = [
            "-m", "rl_zoo3.train", "--algo", "aggrevated", "--env", args.env, "-optimize", "--storage", storage,
            "--study-name", study_name, "--max-total-trials", str(args.trials), "-n", str(args.trial_timesteps),
            "--n-evaluations", "4", "--eval-episodes", str(args.trial_episodes), "--no-optim-plots", "--num-threads", "1",
            "--hyperparams", expert,
        ]  # fmt: skip
        start = time.perf_counter()
        workers = []
        for index in range(args.workers):
            log = open(work / f"worker_{index}.log", "w")
            command = [sys.executable, *optimize, "-f", str(work / f"worker_{index}")]
            workers.append((subprocess.Popen(command, cwd=work, stdout=log, stderr=subprocess.STDOUT), log))
        for process, log in workers:
            if process.wait() != 0:
                raise SystemExit(f"a worker failed: see {log.name}")
            log.close()
        tuning_wall = time.perf_counter() - start
        run(["-m", "sb3ext.tune", "status", "--storage", storage, "--study-name", study_name], work, work / "status.log")
        best_yaml = args.out / f"aggrevated_{args.env}_best.yml"
        export = [
            "-m", "sb3ext.tune", "export", "--storage", storage, "--study-name", study_name, "--algo", "aggrevated",
            "--env", args.env, "-o", str(best_yaml),
        ]  # fmt: skip
        run(export, work, work / "export.log")
        import optuna

        from sb3ext import tuning

        study = tuning.load_study(storage, study_name)
        trials = study.get_trials()
        best = study.best_trial
    print((work / "status.log").read_text(), flush=True)

    curves: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {"default YAML": [], "tuned YAML": []}
    for seed in range(args.seeds):
        # the exported YAML names the default Hub expert; both runs get the local expert the same way
        for label, extra in (("default YAML", []), ("tuned YAML", ["-conf", str(best_yaml)])):
            folder = work / ("default" if label == "default YAML" else "tuned") / str(seed)
            folder.mkdir(parents=True)
            train = [
                "-m", "rl_zoo3.train", "--algo", "aggrevated", "--env", args.env, "--seed", str(seed), "-n",
                str(args.timesteps), "--eval-freq", str(args.eval_freq), "--eval-episodes", "10", "--num-threads", "1",
                "-f", str(folder), *extra, "--hyperparams", expert,
            ]  # fmt: skip
            run(train, work, folder / "train.log")
            curves[label].append(evaluations(folder / "aggrevated"))
            print(f"{label} seed {seed}: final {curves[label][-1][1][-1]:.1f}", flush=True)

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    rows = []
    summary = {}
    for color, (label, runs) in zip(("tab:blue", "tab:orange"), curves.items()):
        steps = runs[0][0]
        values = np.stack([values for _, values in runs])
        for seed, curve in enumerate(values):
            ax.plot(steps, curve, color=color, alpha=0.3, lw=1)
            rows += [(label, seed, int(s), float(v)) for s, v in zip(steps, curve)]
        ax.plot(steps, np.median(values, axis=0), color=color, lw=2, label=f"{label} (median of {len(runs)} seeds)")
        summary[label] = values
    ax.set_xlabel("environment steps")
    ax.set_ylabel("evaluation return (10 deterministic episodes)")
    ax.set_title(f"AggreVaTeD on {args.env}: default vs tuned hyperparameters")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    png = args.out / f"aggrevated_{args.env}.png"
    fig.savefig(png, dpi=110)
    with open(args.out / f"aggrevated_{args.env}.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["config", "seed", "timesteps", "mean_return"])
        writer.writerows(rows)

    states = {state.name: sum(t.state == state for t in trials) for state in optuna.trial.TrialState}
    command = ("python scripts/tune_aggrevated.py " + " ".join(sys.argv[1:])).strip()
    lines = [
        f"# Tuning AggreVaTeD on {args.env}: {args.workers} workers on one PostgreSQL study",
        "",
        f"Generated by `{command}` on {time.strftime('%Y-%m-%d')}; tuning took {tuning_wall / 60:.1f} min wall-clock "
        f"({os.cpu_count()} cores).",
        "",
        f"* study: {len(trials)} trials ({', '.join(f'{n} {s}' for s, n in states.items() if n)}), TPE sampler, "
        f"median pruner, {args.trial_timesteps:,} env steps each, objective = mean return of {args.trial_episodes} "
        "deterministic episodes at the end of the trial",
        f"* best trial {best.number}: {best.value:.1f}; exported to [`{best_yaml.name}`]({best_yaml.name})",
        f"* comparison: {args.seeds} seeds each, {args.timesteps:,} steps, 10 deterministic episodes every "
        f"{args.eval_freq} steps",
        "",
        f"| hyperparameters | return at {args.trial_timesteps:,} steps (tuning budget), median (seeds) "
        f"| return at {args.timesteps:,} steps, median (seeds) | mean of all evaluations |",
        "|---|---|---|---|",
    ]
    steps = curves["default YAML"][0][0]
    at_budget = int(np.searchsorted(steps, args.trial_timesteps))
    for label, values in summary.items():
        cells = []
        for column in (values[:, min(at_budget, values.shape[1] - 1)], values[:, -1]):
            cells.append(f"{np.median(column):.1f} ({', '.join(f'{v:.0f}' for v in column)})")
        lines.append(f"| {label} | {cells[0]} | {cells[1]} | {values.mean():.1f} |")
    lines += ["", f"![{args.env}]({png.name})", ""]
    (args.out / f"aggrevated_{args.env}.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
