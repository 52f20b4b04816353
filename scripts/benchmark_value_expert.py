"""AggreVaTeD with a value-only (PPO) expert through the unmodified zoo, beside imitation's DAgger and BC.

    python scripts/benchmark_value_expert.py                                     # Hardcore, PPO expert, 3 seeds
    python scripts/benchmark_value_expert.py --env BipedalWalker-v3 --expert ppo/BipedalWalker-v3_1 -n 100000

Each seed runs ``python -m rl_zoo3.train --algo aggrevated --env <env> --hyperparams expert:'<expert>'
[--hyperparams ...]`` with everything else from ``hyperparams/aggrevated.yml``, saving a checkpoint (and its
VecNormalize statistics) every ``--save-freq`` env steps. Every checkpoint is then evaluated on the *same*
``--eval-episodes`` seeded episodes (seeds ``--eval-seed``, ``--eval-seed + 1`` ...) as the expert and a uniformly
random policy, and as ``scripts/imitation_worker.py`` evaluates DAgger and BC. Threshold: 90% of the way from
random to expert. Reported per seed: env steps to the first checkpoint at the threshold, the fraction of later
checkpoints that hold it, training wall-clock (without evaluations) and env steps per second.

Writes ``docs/benchmarks/aggrevated_value_<env>[_<tag>].{md,png,csv}``; with ``--imitation-dir`` (the work
folder of ``scripts/benchmark_imitation.py``), DAgger's and BC's curves on the same env join the table and plot.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))
from zoo_bench import decorate_curve_axes, evaluate_checkpoints, references, zoo_train  # noqa: E402


def imitation_curves(folder: Path | None, env_id: str) -> dict[str, list[dict]]:
    """DAgger and BC results of scripts/benchmark_imitation.py for this env, by method."""
    curves: dict[str, list[dict]] = {}
    if folder is None:
        return curves
    for path in sorted(folder.glob(f"*-{env_id}-*.json")):
        result = json.loads(path.read_text())
        curves.setdefault(result["method"], []).append(result)
    return curves


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="BipedalWalkerHardcore-v3")
    parser.add_argument("--expert", default="ppo/BipedalWalkerHardcore-v3_1", help="relative to --experts")
    parser.add_argument("--experts", type=Path, default=ROOT.parent / "shared" / "experts")
    parser.add_argument("-n", "--timesteps", type=int, default=200_000)
    parser.add_argument("--save-freq", type=int, default=20_000, help="env steps between checkpoints (all envs)")
    parser.add_argument("--eval-episodes", type=int, default=30)
    parser.add_argument("--eval-seed", type=int, default=50_000)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--hyperparams", nargs="*", default=[], help="extra zoo hyperparameters (zoo syntax)")
    parser.add_argument("--tag", default="", help="suffix of the output files and work folders")
    parser.add_argument("--imitation-dir", type=Path, default=None, help="work folder of benchmark_imitation.py")
    parser.add_argument("--work-dir", type=Path, default=ROOT / "bench_runs" / "value_expert")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks")
    args = parser.parse_args()
    from sb3ext.callbacks import first_crossing, threshold_between

    suffix = f"_{args.tag}" if args.tag else ""
    import yaml

    n_envs = int(yaml.safe_load((ROOT / "hyperparams" / "aggrevated.yml").read_text())[args.env].get("n_envs", 1))
    works = {seed: args.work_dir / f"{args.env}{suffix}-{seed}" for seed in args.seeds}
    cache = args.work_dir / f"{args.env}-references-{args.eval_seed}-{args.eval_episodes}.json"
    refs = references(args.env, args.experts / args.expert, args.eval_episodes, args.eval_seed, cache)
    threshold = threshold_between(refs["random"], refs["expert"])
    print(f"expert {refs['expert']:.1f}, random {refs['random']:.1f}, threshold {threshold:.1f}", flush=True)

    def one(seed: int) -> dict:
        hyperparams = [f"expert:'{args.experts / args.expert}'", *args.hyperparams]
        trained = zoo_train("aggrevated", args.env, seed, works[seed], args.timesteps, args.save_freq, n_envs, hyperparams)
        steps, returns = evaluate_checkpoints("aggrevated", args.env, works[seed], args.eval_episodes, args.eval_seed)
        return {**trained, "steps": steps, "returns": returns}

    with ThreadPoolExecutor(args.jobs) as pool:
        runs = list(pool.map(one, args.seeds))

    rows = []
    for run in runs:
        crossed, held = first_crossing(np.array(run["steps"]), np.array(run["returns"]), threshold)
        rows.append({
            "method": "AggreVaTeD", "seed": run["seed"], "steps_to_threshold": crossed, "held": held,
            "wall_s": run["wall_s"], "steps_per_s": args.timesteps / run["wall_s"], "final": run["returns"][-1],
        })  # fmt: skip
    others = imitation_curves(args.imitation_dir, args.env)
    for method, results in others.items():
        for result in results:
            crossed, held = first_crossing(np.array(result["timesteps"]), np.array(result["returns"]), threshold)
            rows.append({
                "method": {"dagger": "DAgger", "bc": "BC"}.get(method, method), "seed": result["seed"],
                "steps_to_threshold": crossed, "held": held, "wall_s": result["wall_s"][-1],
                "steps_per_s": result["timesteps"][-1] / result["wall_s"][-1], "final": result["returns"][-1],
                "budget": result["timesteps"][-1],
            })  # fmt: skip

    def median_cell(method: str) -> str:
        values = [r["steps_to_threshold"] for r in rows if r["method"] == method]
        reached = sorted(v for v in values if v is not None)
        if len(reached) * 2 > len(values):
            return f"{int(np.median([v if v is not None else np.inf for v in values])):,}"
        return "not reached"

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for i, run in enumerate(runs):
        ax.plot(run["steps"], run["returns"], marker="o", ms=3, color="tab:blue", alpha=0.8,
                label="AggreVaTeD (zoo CLI)" if i == 0 else None)  # fmt: skip
    colors = {"dagger": "tab:orange", "bc": "tab:purple"}
    for method, results in others.items():
        for i, result in enumerate(results):
            ax.plot(result["timesteps"], result["returns"], marker="s", ms=3, color=colors.get(method, "gray"), alpha=0.7,
                    label=f"imitation {method.upper() if method == 'bc' else 'DAgger'}" if i == 0 else None)  # fmt: skip
    last = max([args.timesteps] + [r["timesteps"][-1] for results in others.values() for r in results])
    ax.set_xlim(0, last * 1.03)
    decorate_curve_axes(ax, refs, threshold, f"{args.env}, value-only expert {args.expert}", args.eval_episodes)
    fig.tight_layout()
    stem = f"aggrevated_value_{args.env}{suffix}"
    args.out.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out / f"{stem}.png", dpi=110)

    with open(args.out / f"{stem}.csv", "w", newline="") as handle:
        writer = csv.DictWriter(
            handle, fieldnames=["method", "seed", "steps_to_threshold", "held", "wall_s", "steps_per_s", "final", "budget"]
        )
        writer.writeheader()
        for row in rows:
            writer.writerow({"budget": args.timesteps, **row})

    command_text = ("python scripts/benchmark_value_expert.py " + " ".join(sys.argv[1:])).strip()
    fmt = lambda v: f"{v:,}" if v is not None else "—"  # noqa: E731
    lines = [
        f"# AggreVaTeD on {args.env} with a value-only expert",
        "",
        f"Generated by `{command_text}` on {time.strftime('%Y-%m-%d')}.",
        "",
        f"Expert `{args.expert}`; every learner is evaluated on the same {args.eval_episodes} seeded episodes "
        f"(seeds {args.eval_seed}-{args.eval_seed + args.eval_episodes - 1}) as the expert and a random policy: "
        f"expert {refs['expert']:.1f} ± {refs['expert_std']:.1f}, random {refs['random']:.1f}, "
        f"threshold (90% of the way) {threshold:.1f}. AggreVaTeD: `python -m rl_zoo3.train --algo aggrevated --env "
        f"{args.env} --hyperparams expert:'<expert>' {' '.join(args.hyperparams)}`, everything else from "
        f"`hyperparams/aggrevated.yml`, a checkpoint every {args.save_freq:,} env steps, budget {args.timesteps:,}.",
        "",
        "| method | seed | env steps to threshold | later evaluations holding it | final return | wall-clock (s) "
        "| env steps/s |",
        "|---|---|---|---|---|---|---|",
        *[
            f"| {r['method']} | {r['seed']} | {fmt(r['steps_to_threshold'])} | {r['held']:.0%} | {r['final']:.1f} | "
            f"{r['wall_s']:.0f} | {r['steps_per_s']:.0f} |"
            for r in rows
        ],
        "",
        "Median env steps to threshold: "
        + ", ".join(f"{m} {median_cell(m)}" for m in dict.fromkeys(r["method"] for r in rows))
        + ".",
        "AggreVaTeD's wall-clock is the zoo training alone (checkpoint evaluations run afterwards); DAgger's and BC's "
        "include their evaluations.",
        "",
        "| env steps | " + " | ".join(f"seed {run['seed']}" for run in runs) + " |",
        "|---|" + "---|" * len(runs),
        *[
            f"| {s:,} | " + " | ".join(f"{run['returns'][i]:.1f}" if i < len(run["returns"]) else "" for run in runs) + " |"
            for i, s in enumerate(runs[0]["steps"])
        ],
        "",
        f"![{args.env}]({stem}.png)",
    ]
    (args.out / f"{stem}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
