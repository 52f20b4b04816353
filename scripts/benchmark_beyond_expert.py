"""Beyond the expert: AggreVaTeD from imperfect zoo experts, beside the expert, DAgger, BC and zoo-tuned PPO.

    python scripts/benchmark_beyond_expert.py                                 # everything, 3 seeds (hours, 2 cores)
    python scripts/benchmark_beyond_expert.py --methods aggrevated --seeds 0  # one quick pass

Tasks: imperfect experts of ``../shared/experts``:

* the zoo's PPO ``BipedalWalker-v3`` expert (value-only, VecNormalize): it walks when it does not fall, and it falls
  early on some episodes;
* the zoo's TQC ``Hopper-v3`` expert on ``Hopper-v5``: some of its episodes fall too.

Per task and seed:

* **AggreVaTeD**: ``python -m rl_zoo3.train --algo aggrevated --env <env> --hyperparams expert:'<expert>'``,
  everything else from ``hyperparams/aggrevated.yml``, ``--budget`` env steps;
* **PPO (zoo)**: the zoo's own ``ppo.yml`` entry (``-v4`` for ``-v5`` envs), from scratch, ``--rl-budget`` env steps;
* **DAgger, BC**: imitation 1.0.1 from the same expert in its own venv (``scripts/benchmark_imitation.py``'s), the
  same 256-256 learner, ``--budget`` env steps (``--imitation-seeds``).

Every checkpoint is evaluated on the same ``--eval-episodes`` deterministic episodes (seeds 50,000, 50,001, ...) as
the expert and a uniformly random policy. Target: the expert's return + 10% of (expert - random). Reported per method:
the final returns, how many seeds end at the target, env steps and wall-clock to the first checkpoint at it, the
fraction of later checkpoints that hold it; and the env steps zoo PPO needs to reach AggreVaTeD's median final
return. Writes ``docs/benchmarks/beyond_expert.{md,csv}`` and ``beyond_expert_<task>.png``. Runs are cached under
``--work-dir`` (the same layout as ``benchmark_locomotion.py``): re-running resumes.
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from concurrent.futures import ThreadPoolExecutor
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

TASKS = {
    t.name: t
    for t in [
        Task("ppo-BipedalWalker", "BipedalWalker-v3", "ppo/BipedalWalker-v3_1"),
        Task("tqc-Hopper", "Hopper-v5", "tqc/Hopper-v3_1"),
    ]
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS))
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--imitation-seeds", nargs="+", type=int, default=None, help="DAgger/BC seeds (default: --seeds)")
    parser.add_argument("--rl-seeds", nargs="+", type=int, default=None, help="zoo PPO seeds (default: --seeds)")
    parser.add_argument("--budget", type=int, default=100_000, help="env steps of AggreVaTeD, DAgger and BC")
    parser.add_argument("--rl-budget", type=int, default=200_000, help="env steps of zoo PPO")
    parser.add_argument("--save-freq", type=int, default=20_000, help="env steps between evaluations")
    parser.add_argument("--rl-save-freq", type=int, default=25_000, help="env steps between PPO's evaluations")
    parser.add_argument("--eval-episodes", type=int, default=30)
    add_run_arguments(parser, "beyond_expert")
    args = parser.parse_args()

    tasks = [TASKS[name] for name in args.tasks]
    refs = task_references(args, tasks)
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
        if not args.cached_only or finished(args, method, task, seed)
    ]
    python = None
    if any(job[0] in ("dagger", "bc") for job in jobs) and not args.cached_only:
        from benchmark_imitation import ensure_venv

        python = ensure_venv(args.venv, mujoco=True)

    def one(job: tuple[str, Task, int]) -> dict[str, Any]:
        method, task, seed = job
        if method in ("dagger", "bc"):
            return run_imitation(args, python or args.venv / "bin" / "python", method, task, seed)
        return run_zoo(args, method, task, seed)

    with ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(one, jobs))
    rows = [summarise(result, target_of(refs[result["task"]])) for result in results]
    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / "beyond_expert.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    plot(args, tasks, results, refs, "beyond_expert", target_of, f"target: expert + {MARGIN:.0%}")
    write_page(args, tasks, results, rows, refs)


def write_page(
    args: argparse.Namespace, tasks: list[Task], results: list[dict[str, Any]], rows: list[dict], refs: dict[str, dict]
) -> None:
    fmt = lambda v: f"{v:,}" if v is not None else "—"  # noqa: E731
    command = ("python scripts/benchmark_beyond_expert.py " + " ".join(sys.argv[1:])).strip()
    lines = [
        "# Beyond the expert: AggreVaTeD from imperfect experts",
        "",
        f"Generated by `{command}` on {time.strftime('%Y-%m-%d')} (2-core CPU machine, one thread per run).",
        "",
        f"Every method is evaluated on the same {args.eval_episodes} deterministic episodes (seeds "
        f"{args.eval_seed}-{args.eval_seed + args.eval_episodes - 1}) as the expert and a uniformly random policy. "
        f"Target: expert + {MARGIN:.0%} of (expert - random). AggreVaTeD: the YAML defaults through the zoo CLI with "
        f"the expert given on the command line, {args.budget:,} env steps, evaluated every {args.save_freq:,}. PPO: "
        f"the zoo's own tuned entry, from scratch, {args.rl_budget:,} env steps, evaluated every "
        f"{args.rl_save_freq:,}. DAgger and BC: imitation 1.0.1 from the same expert, 256-256 learner with running "
        f'observation normalisation, {args.budget:,} env steps. "held": the share of the checkpoints after the '
        "first one at the target that are at the target too.",
        "",
    ]
    for task in tasks:
        r = refs[task.name]
        target = target_of(r)
        mine = [row for row in rows if row["task"] == task.name]
        lines += [
            f"## {task.env}, expert `{task.expert}`",
            "",
            f"Expert {r['expert']:.1f} ± {r['expert_std']:.1f}, random {r['random']:.1f}, target {target:.1f}.",
            "",
            "| method | seeds | final returns | seeds ending at the target | env steps to the target | "
            "wall-clock to it (s) | held | best |",
            "|---|---|---|---|---|---|---|---|",
            f"| expert | — | {r['expert']:.0f} | — | — | — | — | — |",
        ]
        for method in METHODS:
            runs = [row for row in mine if row["method"] == method]
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
        ours = [row["final"] for row in mine if row["method"] == "aggrevated"]
        ppo = [res for res in results if res["task"] == task.name and res["method"] == "ppo"]
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
    (args.out / "beyond_expert.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
