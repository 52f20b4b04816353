"""Beyond the expert: AggreVaTeD from imperfect zoo experts, beside the expert, DAgger, BC and zoo-tuned PPO.

    python scripts/benchmark_beyond_expert.py                                 # everything, 3 seeds (hours, 2 cores)
    python scripts/benchmark_beyond_expert.py --methods aggrevated --seeds 0  # one quick pass

Tasks: imperfect experts of ``../shared/experts``:

* the zoo's PPO ``BipedalWalker-v3`` expert (value-only, VecNormalize): it walks when it does not fall, and it falls
  early on some episodes;
* the zoo's TQC ``Hopper-v3`` expert on ``Hopper-v5``: some of its episodes fall too;
* sb3ext's shipped ``sac/Pendulum-v1_2``: the zoo's SAC recipe stopped after 2,800 steps, while it learns to swing
  up (about -420 against the finished expert's -150; ``scripts/train_embedded_expert.py --index 2``).

Each task has its own budgets (``SETTINGS``: AggreVaTeD's YAML ``n_timesteps`` scale, the zoo PPO entry's) and
network (AggreVaTeD's YAML one, which DAgger and BC use too); ``--budget`` and the like override them.

Per task and seed:

* **AggreVaTeD**: ``python -m rl_zoo3.train --algo aggrevated --env <env> --hyperparams expert:'<expert>'``,
  everything else from ``hyperparams/aggrevated.yml``, the task's budget;
* **PPO (zoo)**: the zoo's own ``ppo.yml`` entry (``-v4`` for ``-v5`` envs), from scratch, the task's PPO budget;
* **DAgger, BC**: imitation 1.0.1 from the same expert in its own venv (``scripts/benchmark_imitation.py``'s), the
  same learner network as AggreVaTeD's, the task's budget (``--imitation-seeds``).

Every checkpoint is evaluated on the same ``--eval-episodes`` deterministic episodes (seeds 50,000, 50,001, ...) as
the expert and a uniformly random policy. Target: the expert's return + 10% of (expert - random). Reported per method:
the final returns, how many seeds end at the target, env steps and wall-clock to the first checkpoint at it, the
fraction of later checkpoints that hold it; and the env steps zoo PPO needs to reach AggreVaTeD's median final
return. Writes ``docs/benchmarks/beyond_expert_<task>.{md,png}`` for the tasks it runs, their rows of
``beyond_expert.csv``, and ``beyond_expert.md`` from every task's section, so one task can be re-run alone. Runs are
cached under ``--work-dir`` (the same layout as ``benchmark_locomotion.py``): re-running resumes.
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))
from benchmark_locomotion import (  # noqa: E402
    LABELS,
    Task,
    add_run_arguments,
    finished,
    plot,
    run_imitation,
    run_zoo,
    task_references,
)


@dataclass(frozen=True)
class Setting:
    """A task's budgets and evaluation points (AggreVaTeD, DAgger and BC share ``budget``; PPO has its own)."""

    budget: int
    save_freq: int
    rl_budget: int
    rl_save_freq: int
    net_arch: tuple[int, ...]  # AggreVaTeD's YAML network: DAgger's and BC's learner too
    normalize_obs: bool  # AggreVaTeD's YAML `normalize`: DAgger's and BC's learner too
    shipped: bool = False  # the expert is one of sb3ext's shipped experts (else relative to --experts)


TASKS = {
    t.name: t
    for t in [
        Task("ppo-BipedalWalker", "BipedalWalker-v3", "ppo/BipedalWalker-v3_1"),
        Task("tqc-Hopper", "Hopper-v5", "tqc/Hopper-v3_1"),
        Task("sac-Pendulum-early", "Pendulum-v1", "sac/Pendulum-v1_2"),
    ]
}
SETTINGS = {
    "ppo-BipedalWalker": Setting(100_000, 20_000, 250_000, 25_000, (256, 256), True),
    "tqc-Hopper": Setting(100_000, 20_000, 200_000, 25_000, (256, 256), True),
    # the YAML's Pendulum budget (10k); the zoo's PPO entry's own (1e5)
    "sac-Pendulum-early": Setting(10_000, 1_000, 100_000, 5_000, (64, 64), False, shipped=True),
}
METHODS = ("aggrevated", "ppo", "dagger", "bc")
#: how far above the expert the learner must end, as a fraction of (expert - random)
MARGIN = 0.1


def target_of(refs: dict[str, float]) -> float:
    return refs["expert"] + MARGIN * (refs["expert"] - refs["random"])


def summarise(result: dict[str, Any], target: float) -> dict[str, Any]:
    """One run's row: final and best return, first checkpoint at ``target`` and the share of later ones holding it."""
    from sb3ext.callbacks import first_crossing

    steps, returns = np.array(result["steps"]), np.array(result["returns"])
    crossed, held = first_crossing(steps, returns, target)
    wall_to = None
    if crossed is not None:
        curve = result.get("wall_curve")
        wall_to = curve[result["steps"].index(crossed)] if curve else result["wall_s"] * crossed / steps[-1]
    return {
        "task": result["task"], "method": result["method"], "seed": result["seed"], "final": float(returns[-1]),
        "best": float(returns.max()), "steps_to_target": None if crossed is None else int(crossed),
        "wall_to_target_s": wall_to, "held": float(held), "budget": int(steps[-1]), "wall_s": result["wall_s"],
    }  # fmt: skip


def steps_to_reach(results: list[dict[str, Any]], level: float) -> list[int | None]:
    """Per run, the env steps of its first checkpoint at ``level`` or above (None: never)."""
    out: list[int | None] = []
    for result in results:
        hits = [s for s, r in zip(result["steps"], result["returns"]) if r >= level]
        out.append(hits[0] if hits else None)
    return out


#: the settings the command line can override for every task it runs
TUNABLE = ("budget", "save_freq", "rl_budget", "rl_save_freq")


def task_args(args: argparse.Namespace, task: Task) -> argparse.Namespace:
    """``args`` with the task's own budgets, evaluation points and experts folder (a value given on the command
    line wins over the task's)."""
    from sb3ext.experts.references import SHIPPED_ROOT

    setting = SETTINGS[task.name]
    own = {key: getattr(args, key) if getattr(args, key) is not None else getattr(setting, key) for key in TUNABLE}
    experts = SHIPPED_ROOT if setting.shipped else args.experts
    return argparse.Namespace(**{**vars(args), **own, "experts": experts})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS))
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--imitation-seeds", nargs="+", type=int, default=None, help="DAgger/BC seeds (default: --seeds)")
    parser.add_argument("--rl-seeds", nargs="+", type=int, default=None, help="zoo PPO seeds (default: --seeds)")
    parser.add_argument("--budget", type=int, help="env steps of AggreVaTeD, DAgger and BC (default: the task's)")
    parser.add_argument("--rl-budget", type=int, help="env steps of zoo PPO (default: the task's)")
    parser.add_argument("--save-freq", type=int, help="env steps between evaluations (default: the task's)")
    parser.add_argument("--rl-save-freq", type=int, help="env steps between PPO's evaluations (default: the task's)")
    parser.add_argument("--eval-episodes", type=int, default=30)
    add_run_arguments(parser, "beyond_expert")
    args = parser.parse_args()

    tasks = [TASKS[name] for name in args.tasks]
    per_task = {task.name: task_args(args, task) for task in tasks}
    refs = {task.name: task_references(per_task[task.name], [task])[task.name] for task in tasks}
    for task in tasks:
        print(f"{task.name}: target {target_of(refs[task.name]):.1f}", flush=True)

    seeds = {
        "aggrevated": args.seeds,
        "ppo": args.rl_seeds or args.seeds,
        "dagger": args.imitation_seeds or args.seeds,
        "bc": args.imitation_seeds or args.seeds,
    }
    jobs = [
        (method, task, seed)
        for task in tasks
        for method in args.methods
        for seed in seeds[method]
        if not args.cached_only or finished(per_task[task.name], method, task, seed)
    ]
    python = None
    if any(job[0] in ("dagger", "bc") for job in jobs) and not args.cached_only:
        from benchmark_imitation import ensure_venv

        python = ensure_venv(args.venv, mujoco=True)

    def one(job: tuple[str, Task, int]) -> dict[str, Any]:
        method, task, seed = job
        own, setting = per_task[task.name], SETTINGS[task.name]
        if method in ("dagger", "bc"):
            venv_python = python or args.venv / "bin" / "python"
            return run_imitation(own, venv_python, method, task, seed, setting.net_arch, setting.normalize_obs)
        return run_zoo(own, method, task, seed)

    with ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(one, jobs))
    rows = [summarise(result, target_of(refs[result["task"]])) for result in results]
    args.out.mkdir(parents=True, exist_ok=True)
    write_rows(args.out / "beyond_expert.csv", rows, {task.name for task in tasks})
    for task in tasks:
        own = per_task[task.name]
        plot(own, [task], results, refs, "beyond_expert", target_of, f"target: expert + {MARGIN:.0%}")
        mine = [result for result in results if result["task"] == task.name]
        section = task_section(own, task, mine, [row for row in rows if row["task"] == task.name], refs[task.name])
        (args.out / f"beyond_expert_{task.name}.md").write_text(section)
    write_page(args)


def write_rows(path: Path, rows: list[dict[str, Any]], tasks_run: set[str]) -> None:
    """The CSV of every task: this invocation's rows replace those of the tasks it ran; the others are kept."""
    kept: list[dict[str, Any]] = []
    if path.exists():
        with open(path, newline="") as handle:
            kept = [row for row in csv.DictReader(handle) if row["task"] not in tasks_run]
    order = list(TASKS)
    merged = sorted(kept + rows, key=lambda row: order.index(row["task"]) if row["task"] in order else len(order))
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]) if rows else list(merged[0]))
        writer.writeheader()
        writer.writerows(merged)


def task_section(
    args: argparse.Namespace, task: Task, results: list[dict[str, Any]], rows: list[dict], r: dict[str, float]
) -> str:
    """One task's part of the page: how it was run, the table, PPO's steps to AggreVaTeD's level, the curves."""
    fmt = lambda v: f"{v:,}" if v is not None else "—"  # noqa: E731
    setting = SETTINGS[task.name]
    command = f"python scripts/benchmark_beyond_expert.py --tasks {task.name}"
    if args.seeds != [0, 1, 2]:
        command += " --seeds " + " ".join(map(str, args.seeds))
    for key in TUNABLE:
        if getattr(args, key) != getattr(setting, key):
            command += f" --{key.replace('_', '-')} {getattr(args, key)}"
    target = target_of(r)
    shipped = " (shipped with sb3ext)" if setting.shipped else ""
    net = "-".join(map(str, setting.net_arch))
    lines = [
        f"## {task.env}, expert `{task.expert}`{shipped}",
        "",
        f"`{command}` ({time.strftime('%Y-%m-%d')}). AggreVaTeD: {args.budget:,} env steps, evaluated every "
        f"{args.save_freq:,}. PPO: {args.rl_budget:,} env steps, evaluated every {args.rl_save_freq:,}. DAgger and "
        f"BC: {args.budget:,} env steps, a {net} learner"
        + (" with running observation normalisation" if setting.normalize_obs else "")
        + " (AggreVaTeD's YAML network).",
        "",
        f"Expert {r['expert']:.1f} ± {r['expert_std']:.1f}, random {r['random']:.1f}, target {target:.1f}.",
        "",
        "| method | seeds | final returns | seeds ending at the target | env steps to the target | "
        "wall-clock to it (s) | held | best |",
        "|---|---|---|---|---|---|---|---|",
        f"| expert | — | {r['expert']:.0f} | — | — | — | — | — |",
    ]
    for method in METHODS:
        runs = [row for row in rows if row["method"] == method]
        if not runs:
            continue
        at = sum(row["final"] >= target for row in runs)
        walls = ", ".join(f"{row['wall_to_target_s']:.0f}" if row["wall_to_target_s"] else "—" for row in runs)
        held = ", ".join(f"{row['held']:.0%}" if row["steps_to_target"] is not None else "—" for row in runs)
        seeds = ", ".join(str(row["seed"]) for row in runs)
        finals = ", ".join(f"{row['final']:.0f}" for row in runs)
        bests = ", ".join(f"{row['best']:.0f}" for row in runs)
        to_target = ", ".join(fmt(row["steps_to_target"]) for row in runs)
        lines.append(
            f"| {LABELS[method]} | {seeds} | {finals} | {at} of {len(runs)} | {to_target} (budget "
            f"{runs[0]['budget']:,}) | {walls} | {held} | {bests} |"
        )
    ours = [row["final"] for row in rows if row["method"] == "aggrevated"]
    ppo = [res for res in results if res["method"] == "ppo"]
    if ours and ppo:
        level = float(np.median(ours))
        reached = steps_to_reach(ppo, level)
        lines += [
            "",
            f"Zoo PPO from scratch to AggreVaTeD's median final return ({level:.0f}): "
            + ", ".join(fmt(v) if v is not None else f"not within {res['steps'][-1]:,}" for v, res in zip(reached, ppo))
            + " env steps (per seed).",
        ]
    lines += ["", f"![{task.name}](beyond_expert_{task.name}.png)", ""]
    return "\n".join(lines)


def write_page(args: argparse.Namespace) -> None:
    """``beyond_expert.md``: the protocol, then every task's section that has been generated (``beyond_expert_<task>.md``,
    each from its own invocation, so that one task can be re-run without the others' runs)."""
    lines = [
        "# Beyond the expert: AggreVaTeD from imperfect experts",
        "",
        "Generated by `python scripts/benchmark_beyond_expert.py` (2-core CPU machine, one thread per run); each task's "
        "section says the command and date of its runs.",
        "",
        f"Every method is evaluated on the same {args.eval_episodes} deterministic episodes (seeds "
        f"{args.eval_seed}-{args.eval_seed + args.eval_episodes - 1}) as the expert and a uniformly random policy. "
        f"Target: expert + {MARGIN:.0%} of (expert - random). AggreVaTeD: the YAML defaults through the zoo CLI with "
        "the expert given on the command line. PPO: the zoo's own tuned entry, from scratch. DAgger and BC: "
        'imitation 1.0.1 from the same expert, with AggreVaTeD\'s network. "held": the share of the checkpoints '
        "after the first one at the target that are at the target too.",
        "",
    ]
    for name in TASKS:
        section = args.out / f"beyond_expert_{name}.md"
        if section.exists():
            lines.append(section.read_text())
    (args.out / "beyond_expert.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
