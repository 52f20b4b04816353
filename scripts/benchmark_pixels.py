"""Pixel policies taught by a state expert: AggreVaTeD from frames beside stock PPO from frames.

    python scripts/benchmark_pixels.py                                   # both tasks, 3 seeds (~2 h on 2 cores)
    python scripts/benchmark_pixels.py --tasks cartpole --seeds 0        # one quick pass

Tasks: sb3ext's pixel envs (84x84 grayscale frames, 4 stacked), each with its shipped state expert, which acts on the
env's ``info["state"]`` (``sb3ext.common.expert_state``) while the learner sees only frames.

Per task and seed:

* **AggreVaTeD**: ``python -m rl_zoo3.train --algo aggrevated --env <pixel env> --seed <seed>``, everything from
  ``hyperparams/aggrevated.yml`` (the shipped state expert is the entry's default), its ``n_timesteps`` env steps,
  a checkpoint every ``--save-freq`` env steps;
* **DAgger**: the same command with ``--algo dagger`` (``MatchedDAgger``): AggreVaTeD's roll-ins, aggregation,
  network and budget, but the update clones the state expert's actions (Box: the Gaussian mean regressed on them;
  Discrete: their cross-entropy) instead of following its critic (DAgger at matched settings; imitation's DAgger
  cannot run sb3ext's pixel envs in its own venv);
* **PPO**: stock PPO from frames with sb3ext's ``hyperparams/ppo.yml`` entry (Atari-style settings), ``--ppo-budget``
  env steps (0: skip).

Every checkpoint is evaluated on the same ``--eval-episodes`` deterministic episodes (seeds 50,000, 50,001, ...;
frames stacked as in training) as the state expert (reading ``info["state"]``) and a uniformly random policy.
Threshold: 90% of the way from random to the expert. Reported: env steps and wall-clock (from the checkpoints'
file times) to the first checkpoint at the threshold, the share of later checkpoints that hold it, the final return.
Writes ``docs/benchmarks/pixels.{md,csv}``, ``pixels_<task>.png`` (curves) and ``pixels_observation_<task>.png``
(the four stacked frames the learner sees). Runs are cached under ``--work-dir``: re-running resumes.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))
from zoo_bench import (  # noqa: E402
    decorate_curve_axes,
    evaluate_checkpoints,
    merge_earlier_runs,
    references,
    save_figure,
    zoo_train,
)

DOCS = ROOT / "docs" / "benchmarks"
#: the page's summary rows and its runs' curves (a partial re-run keeps the rest from them)
ROWS_FILE = DOCS / "pixels.csv"
RUNS_FILE = DOCS / "pixels_runs.json"
CSV_FIELDS = [
    "task",
    "method",
    "seed",
    "budget",
    "steps_to_threshold",
    "wall_s_to_threshold",
    "held",
    "best",
    "final",
    "wall_s",
    "steps_per_s",
]
METHODS = ("aggrevated", "dagger", "ppo")
LABELS = {
    "aggrevated": "AggreVaTeD (frames, state expert)",
    "dagger": "DAgger (same settings, cloning the state expert)",
    "ppo": "PPO from frames",
}
#: the zoo algorithm and extra hyperparameters each method runs with
ZOO_RUNS: dict[str, tuple[str, list[str]]] = {
    "aggrevated": ("aggrevated", []),
    "dagger": ("dagger", []),
    "ppo": ("ppo", []),
}
#: the budget of the stock-PPO runs on the pixel envs in docs/benchmarks/envs.md
PPO_REFERENCE_BUDGET = 200_000


@dataclass(frozen=True)
class PixelTask:
    name: str
    env: str
    #: what is known of stock PPO from frames at the reference budget
    ppo_reference: str

    def entry(self, algo: str) -> dict[str, Any]:
        return dict(yaml.safe_load((ROOT / "hyperparams" / f"{algo}.yml").read_text())[self.env])

    @property
    def expert(self) -> str:
        return str(self.entry("aggrevated")["expert"])


TASKS = {
    t.name: t
    for t in [
        PixelTask(
            "cartpole",
            "sb3ext/CartPolePixels-v1",
            "Its 200,000-step runs in [envs.md](envs.md) (3 seeds) end at 95-140, far below this threshold: PPO's "
            "wall-clock to it is above that.",
        ),
        PixelTask(
            "cartpole-v2",
            "sb3ext/CartPolePixels-v2",
            "No 200,000-step run from these frames has been measured; the longest run above is PPO's curve so far.",
        ),
        PixelTask("plate", "sb3ext/BallPlatePixels-v0", "No longer PPO run from these frames has been measured."),
    ]
}


def wall_curve(work: Path, steps: list[int], wall_s: float) -> list[float]:
    """Seconds from the start of training to each checkpoint, from the checkpoints' file times."""
    end = (work / "train.json").stat().st_mtime
    start = end - wall_s
    return [(work / "checkpoints" / f"rl_model_{n}_steps.zip").stat().st_mtime - start for n in steps]


def evaluate_final(algo: str, env_id: str, work: Path, episodes: int, seed: int, frame_stack: int) -> tuple[int, float]:
    """(env steps, mean return) of the model the zoo saved at the end of training; cached in ``work/final.json``."""
    done = work / "final.json"
    if done.exists():
        cached = json.loads(done.read_text())
        return cached["steps"], cached["return"]
    from rl_zoo3 import ALGOS

    from sb3ext.callbacks import episode_returns

    name = env_id.replace("/", "-")
    model = ALGOS[algo].load(next((work / "logs" / algo).glob(f"{name}_*/{name}.zip")), device="cpu")
    returns, _ = episode_returns(env_id, model, episodes, seed=seed, frame_stack=frame_stack)
    result = {"steps": int(model.num_timesteps), "return": float(np.mean(returns))}
    done.write_text(json.dumps(result))
    print(
        f"  {work.name}: {result['steps']:>7,} steps  return {result['return']:7.1f} ± {np.std(returns):.1f} (final)",
        flush=True,
    )
    return result["steps"], result["return"]


def run(args: argparse.Namespace, method: str, task: PixelTask, seed: int) -> dict[str, Any]:
    work = args.work_dir / task.name / f"{method}_seed{seed}"
    algo, extra = ZOO_RUNS[method]
    entry = task.entry("aggrevated" if algo == "dagger" else algo)  # MatchedDAgger runs AggreVaTeD's entry
    budget = int(float(entry["n_timesteps"])) if algo in ("aggrevated", "dagger") else args.ppo_budget
    save_freq = args.ppo_save_freq if method == "ppo" and args.ppo_save_freq else args.save_freq
    trained = zoo_train(algo, task.env, seed, work, budget, save_freq, int(entry["n_envs"]), extra)
    frame_stack = int(entry.get("frame_stack", 0))
    steps, returns = evaluate_checkpoints(algo, task.env, work, args.eval_episodes, args.eval_seed, frame_stack)
    final_steps, final_return = evaluate_final(algo, task.env, work, args.eval_episodes, args.eval_seed, frame_stack)
    walls = wall_curve(work, steps, trained["wall_s"])
    if final_steps > steps[-1]:
        steps, returns, walls = [*steps, final_steps], [*returns, final_return], [*walls, trained["wall_s"]]
    return {
        "method": method,
        "task": task.name,
        "seed": seed,
        "budget": final_steps,  # the env steps the run made (its cached model's), whatever this invocation's budget
        "steps": steps,
        "returns": returns,
        "wall_s": trained["wall_s"],
        "wall_curve": walls,
    }


def summarise(result: dict[str, Any], threshold: float) -> dict[str, Any]:
    from sb3ext.callbacks import first_crossing

    crossed, held = first_crossing(np.array(result["steps"]), np.array(result["returns"]), threshold)
    wall_to = result["wall_curve"][result["steps"].index(crossed)] if crossed is not None else None
    return {
        "task": result["task"],
        "method": result["method"],
        "seed": result["seed"],
        "budget": result["budget"],
        "steps_to_threshold": crossed,
        "wall_s_to_threshold": None if wall_to is None else round(wall_to),
        "held": round(held, 2),
        "best": round(max(result["returns"]), 1),
        "final": round(result["returns"][-1], 1),
        "wall_s": round(result["wall_s"]),
        "steps_per_s": round(result["budget"] / result["wall_s"], 1),
    }


def median_or_none(values: list[float | None]) -> float | None:
    """The median, counting a seed that never reached the threshold as infinitely late; None if that is the median."""
    median = float(np.median([np.inf if v is None else v for v in values]))
    return None if not np.isfinite(median) else median


def observation_picture(task: PixelTask, path: Path) -> None:
    """The four stacked frames a learner sees, after a few seeded expert steps."""
    import gymnasium as gym
    import matplotlib.pyplot as plt

    from sb3ext.callbacks.evaluation import StackedFrames
    from sb3ext.common.expert_state import STATE_KEY
    from sb3ext.experts import load_expert

    expert = load_expert(task.expert)
    env = StackedFrames(gym.make(task.env), int(task.entry("aggrevated")["frame_stack"]))
    obs, info = env.reset(seed=3)
    for _ in range(12):
        obs, _, _, _, info = env.step(expert.act(info[STATE_KEY][None])[0])
    fig, axes = plt.subplots(1, obs.shape[-1], figsize=(2.2 * obs.shape[-1], 2.6))
    for i, ax in enumerate(axes):
        ax.imshow(obs[..., i], cmap="gray", vmin=0, vmax=255)
        ax.set_title(f"frame t-{obs.shape[-1] - 1 - i}" if i < obs.shape[-1] - 1 else "frame t", fontsize=9)
        ax.set_xticks([])
        ax.set_yticks([])
    fig.suptitle(f"{task.env}: what the learner sees (84x84 grayscale, 4 stacked)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    env.close()


def plot(task: PixelTask, results: list[dict[str, Any]], refs: dict[str, float], threshold: float, episodes: int) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    colors = {"aggrevated": "tab:blue", "dagger": "tab:purple", "ppo": "tab:orange"}
    for method in METHODS:
        for i, result in enumerate(r for r in results if r["method"] == method):
            label = LABELS[method] if i == 0 else None
            ax.plot(result["steps"], result["returns"], color=colors[method], alpha=0.8, marker=".", label=label)
    decorate_curve_axes(ax, refs, threshold, task.env, episodes, "90% threshold")
    lengths = [r["steps"][-1] for r in results if r["steps"]]
    if lengths and max(lengths) > 5 * min(lengths):  # a long PPO run beside 30k-step imitation runs
        ax.set_xscale("log")
    return save_figure(
        fig, ax, f"mean return, {episodes} seeded episodes", f"{task.env} from frames", DOCS / f"pixels_{task.name}.png"
    )


def fmt(value: float | None, unit: str = "") -> str:
    return "not reached" if value is None else f"{value:,.0f}{unit}"


def merge_earlier(results: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """This invocation's runs, plus the other tasks' and methods' from ``pixels_runs.json`` (curves) or ``pixels.csv``
    (rows only): ``zoo_bench.merge_earlier_runs``."""
    ints = ("seed", "budget", "steps_to_threshold", "wall_s_to_threshold", "wall_s")
    return merge_earlier_runs(results, RUNS_FILE, ROWS_FILE, set(TASKS), ints)


def write_page(
    args: argparse.Namespace, rows: list[dict[str, Any]], refs: dict[str, dict[str, float]], ran: list[str]
) -> None:
    kept = [name for name in refs if name not in ran]
    lines = [
        "# Pixel policies taught by a state expert",
        "",
        f"Generated by `python scripts/benchmark_pixels.py {' '.join(args.argv)}`".rstrip()
        + f" on {time.strftime('%Y-%m-%d')}.",
        "",
        "The learner sees 84x84 grayscale frames (4 stacked, `CnnPolicy`); its expert is the shipped state expert, which",
        'reads the env\'s `info["state"]`. AggreVaTeD runs through `python -m rl_zoo3.train --algo aggrevated --env <id>`',
        "with every setting from `hyperparams/aggrevated.yml`; DAgger is the same command with",
        "`--algo dagger` (`MatchedDAgger`: the update clones the state expert's actions instead of following its",
        "critic: the Gaussian mean regressed on them, or their cross-entropy for discrete actions); PPO from frames",
        "with sb3ext's `hyperparams/ppo.yml`.",
        f"Every checkpoint ({args.save_freq:,} env steps apart) is evaluated on the same {args.eval_episodes} deterministic",
        f"episodes (seeds {args.eval_seed:,}...). Threshold: 90% of the way from random to the expert. Wall-clock: one",
        "core per run (`--num-threads 1`), from the checkpoints' file times.",
        "",
    ]
    if kept or any(r.get("carried") for r in rows):
        lines += [
            f"This command ran {', '.join(ran)}. The other runs on this page ({', '.join(kept) or 'none'} and the rows "
            "marked *) are an earlier generation's, kept from `pixels_runs.json` and `pixels.csv` (see their history "
            "for the command and date); rows marked * have no curve in the plots.",
            "",
        ]
    for name, task_refs in refs.items():
        task = TASKS[name]
        threshold = task_refs["random"] + 0.9 * (task_refs["expert"] - task_refs["random"])
        lines += [
            f"## `{task.env}`",
            "",
            f"Expert `{task.expert}`: {task_refs['expert']:.1f} ± {task_refs['expert_std']:.1f}; random "
            f"{task_refs['random']:.1f}; threshold **{threshold:.1f}**.",
            "",
            "| method | seed | env steps run | env steps to threshold | wall-clock to threshold "
            "| later checkpoints holding it | best | final | steps/s |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for row in (r for r in rows if r["task"] == name):
            lines.append(
                f"| {LABELS[row['method']]}{' *' if row.get('carried') else ''} | {row['seed']} | {row['budget']:,} "
                f"| {fmt(row['steps_to_threshold'])} "
                f"| {fmt(row['wall_s_to_threshold'], ' s')} | {row['held']:.0%} | {row['best']:.1f} | {row['final']:.1f} "
                f"| {row['steps_per_s']:.0f} |"
            )
        lines.append("")
        for method in METHODS:
            mine = [r for r in rows if r["task"] == name and r["method"] == method]
            if mine:
                steps = median_or_none([r["steps_to_threshold"] for r in mine])
                wall = median_or_none([r["wall_s_to_threshold"] for r in mine])
                lines.append(
                    f"- {LABELS[method]}: median env steps to the threshold {fmt(steps)}, median wall-clock {fmt(wall, ' s')} "
                    f"({len(mine)} seed{'s' if len(mine) > 1 else ''})."
                )
                if method == "ppo" and max(r["budget"] for r in mine) < PPO_REFERENCE_BUDGET:
                    rate = float(np.median([r["steps_per_s"] for r in mine]))
                    minutes = PPO_REFERENCE_BUDGET / rate / 60
                    lines.append(
                        f"- PPO ran {max(r['budget'] for r in mine):,} steps here, to measure its throughput: {rate:.0f} "
                        f"steps/s, so {PPO_REFERENCE_BUDGET:,} steps take {minutes:.0f} min. {task.ppo_reference}"
                    )
        lines += ["", f"![curves](pixels_{name}.png)", "", f"![what the learner sees](pixels_observation_{name}.png)", ""]
    (DOCS / "pixels.md").write_text("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", nargs="+", choices=sorted(TASKS), default=sorted(TASKS))
    parser.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--ppo-budget", type=int, default=PPO_REFERENCE_BUDGET, help="PPO's env steps (envs.md: 2e5)")
    parser.add_argument("--ppo-seeds", nargs="+", type=int, help="PPO's seeds (default: --seeds)")
    parser.add_argument("--save-freq", type=int, default=2048)
    parser.add_argument("--ppo-save-freq", type=int, default=0, help="PPO's checkpoint interval in env steps (0: --save-freq)")
    parser.add_argument("--eval-episodes", type=int, default=10)
    parser.add_argument("--eval-seed", type=int, default=50_000)
    parser.add_argument("--jobs", type=int, default=2, help="runs in parallel (one core each)")
    parser.add_argument("--work-dir", type=Path, default=ROOT / "bench_runs" / "pixels")
    args = parser.parse_args()
    args.argv = sys.argv[1:]
    DOCS.mkdir(parents=True, exist_ok=True)
    tasks = [TASKS[name] for name in args.tasks]
    for task in tasks:
        observation_picture(task, DOCS / f"pixels_observation_{task.name}.png")
    seeds = {m: args.seeds for m in METHODS}
    if args.ppo_seeds is not None:
        seeds["ppo"] = args.ppo_seeds
    # seed-major order: with --jobs 2 each seed's methods run side by side, so their wall-clocks share the machine
    jobs = sorted(
        ((m, t, s) for m in args.methods for t in tasks for s in seeds[m]),
        key=lambda job: (job[2], METHODS.index(job[0])),
    )
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        results = list(pool.map(lambda job: run(args, *job), jobs))
    results, carried = merge_earlier(results)
    shown = [name for name in TASKS if any(r["task"] == name for r in results + carried)]
    refs = {  # the expert and random policy on the evaluation episodes, cached per task in --work-dir
        name: references(
            TASKS[name].env,
            TASKS[name].expert,
            args.eval_episodes,
            args.eval_seed,
            args.work_dir / name / "references.json",
            True,
        )
        for name in shown
    }
    rows = []
    for name in shown:
        task_refs = refs[name]
        threshold = task_refs["random"] + 0.9 * (task_refs["expert"] - task_refs["random"])
        mine = [r for r in results if r["task"] == name]
        rows += [summarise(r, threshold) for r in mine] + [r for r in carried if r["task"] == name]
        if name in args.tasks:  # the other tasks' plots stay as they were drawn
            plot(TASKS[name], mine, task_refs, threshold, args.eval_episodes)
    order = {name: i for i, name in enumerate(TASKS)}
    rows.sort(key=lambda r: (order[r["task"]], METHODS.index(r["method"]), r["seed"]))
    with open(ROWS_FILE, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=CSV_FIELDS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    RUNS_FILE.write_text(json.dumps(results, indent=1))
    write_page(args, rows, refs, [t.name for t in tasks])
    print(f"wrote {DOCS / 'pixels.md'}")


if __name__ == "__main__":
    main()
