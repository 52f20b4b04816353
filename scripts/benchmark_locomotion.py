"""AggreVaTeD on MuJoCo locomotion with the zoo's SAC/TQC experts, beside zoo-tuned PPO and SAC, DAgger and BC.

    python scripts/benchmark_locomotion.py                                  # everything, 3 seeds (hours on 2 cores)
    python scripts/benchmark_locomotion.py --methods aggrevated --seeds 0   # one quick pass
    python scripts/benchmark_locomotion.py --timing                         # + where AggreVaTeD's time goes

Tasks: the shared zoo experts of ``../shared/experts`` (trained on the ``-v3`` envs), on the gymnasium ``-v5`` envs:
SAC HalfCheetah, TQC HalfCheetah, TQC Hopper, SAC Swimmer. Per task and seed:

* **AggreVaTeD**: ``python -m rl_zoo3.train --algo aggrevated --env <Env>-v5 --hyperparams expert:'<expert>'``,
  everything else from ``hyperparams/aggrevated.yml``, ``--budget`` env steps;
* **PPO, SAC**: the zoo's own tuned ``ppo.yml`` / ``sac.yml`` entries for ``<Env>-v4`` (the zoo has no ``-v5``
  entries; they are copied unchanged under the ``-v5`` id into a ``--conf-file``), ``--rl-budget`` env steps
  (the zoo trains them for 1M; its published returns at 1M are quoted beside ours);
* **DAgger, BC**: imitation 1.0.1 from the same expert in its own venv (``scripts/benchmark_imitation.py``'s),
  the same 256-256 learner; imitation's gymnasium 0.29 has no ``-v5`` envs, so they run on ``-v4`` (same
  observation layout, same reward terms) and are evaluated there on the same episode seeds;
* **DAgger at matched settings** (``dagger_matched``): the same zoo command as AggreVaTeD's with ``--algo dagger``
  (``MatchedDAgger``) and ``expert_action_memory:<budget>``: DAgger with AggreVaTeD's own roll-ins (the same
  β mixture), network, observation normalisation, optimiser and epochs, regressing the learner on the expert's
  actions at every state visited so far (DAgger's aggregation) instead of following the critic. Its wall-clock
  includes the re-scoring, which cloning does not use.

Every checkpoint (every ``--save-freq`` env steps) is evaluated on the same ``--eval-episodes`` deterministic
episodes (seeds 50,000, 50,001, ...) as the expert and a uniformly random policy: 30 by default, since one flipped
HalfCheetah episode (~3k where the typical one scores ~11.5k) moves a 10-episode mean by ~850, across the
threshold. Threshold: random + 0.9 (expert - random). Reported: env steps and training wall-clock to the first
checkpoint at the threshold, the fraction of later checkpoints that hold it, the final return. Writes
``docs/benchmarks/locomotion.md``, ``locomotion.csv``, ``locomotion_runs.json`` (the curves),
``locomotion_timing.json`` (with ``--timing``) and ``locomotion_<task>.png``.
Runs are cached under ``--work-dir``: re-running resumes. A re-run of some tasks or methods keeps the others' rows
and curves from the files written before.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from collections.abc import Callable
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
    evaluation_cache,
    merge_earlier_runs,
    references,
    yaml_aggrevated,
    zoo_train,
)

#: the zoo's published returns at 1M steps (rl-baselines3-zoo benchmark.md, one run each, -v3 envs)
ZOO_PUBLISHED = {
    "HalfCheetah": {"ppo": 5819, "sac": 9535, "tqc": 12090},
    "Hopper": {"ppo": 2410, "sac": 2326, "tqc": 3754},
    "Swimmer": {"ppo": 282, "sac": 346, "tqc": 339},
    "Walker2d": {"ppo": 3479, "sac": 3863, "tqc": 4381},
}


@dataclass(frozen=True)
class Task:
    name: str
    env: str  # the -v5 id AggreVaTeD, PPO and SAC run on
    expert: str  # relative to --experts

    @property
    def body(self) -> str:
        return self.env.split("-")[0]

    @property
    def expert_algo(self) -> str:
        return self.expert.split("/")[0]

    @property
    def imitation_env(self) -> str:
        """The id imitation's gymnasium 0.29 knows: the ``-v4`` twin of a ``-v5`` env, ``-v2`` of the lunar
        landers' ``-v3`` (the same dynamics without wind: v3 re-seeds the wind, fixes a leak of state between
        episodes and widens the observation bounds), else the env itself."""
        if self.env.endswith("-v5"):
            return self.env.rsplit("-", 1)[0] + "-v4"
        if self.env.startswith("LunarLander") and self.env.endswith("-v3"):
            return self.env.rsplit("-", 1)[0] + "-v2"
        return self.env


TASKS = {
    t.name: t
    for t in [
        Task("sac-HalfCheetah", "HalfCheetah-v5", "sac/HalfCheetah-v3_1"),
        Task("tqc-HalfCheetah", "HalfCheetah-v5", "tqc/HalfCheetah-v3_1"),
        Task("tqc-Hopper", "Hopper-v5", "tqc/Hopper-v3_1"),
        Task("sac-Swimmer", "Swimmer-v5", "sac/Swimmer-v3_1"),
    ]
}
METHODS = ("aggrevated", "dagger_matched", "ppo", "sac", "dagger", "bc")
LABELS = {"aggrevated": "AggreVaTeD", "dagger_matched": "DAgger (matched)", "ppo": "PPO (zoo)", "sac": "SAC (zoo)",
          "dagger": "DAgger", "bc": "BC"}  # fmt: skip
COLORS = {"aggrevated": "tab:blue", "dagger_matched": "tab:red", "ppo": "tab:gray", "sac": "tab:brown",
          "dagger": "tab:orange", "bc": "tab:purple"}  # fmt: skip
#: the methods trained with AggreVaTeD's YAML entry through the zoo: the zoo algorithm, and extra ``--hyperparams``
AGGREVATED_METHODS = {"aggrevated": ("aggrevated", lambda budget: []),
                      "dagger_matched": ("dagger", lambda budget: [f"expert_action_memory:{budget}"])}  # fmt: skip


def zoo_conf(algo: str, env: str, folder: Path) -> tuple[Path, int]:
    """A --conf-file holding the zoo's own entry of ``<algo>.yml`` for ``env`` (for a ``-v5`` env, which the zoo does
    not list, its ``-v4`` entry under the ``-v5`` id); its n_envs."""
    import rl_zoo3

    entries = yaml.safe_load((Path(rl_zoo3.__file__).parent / "hyperparams" / f"{algo}.yml").read_text())
    source = env if env in entries else env.rsplit("-", 1)[0] + "-v4"
    if source not in entries:
        raise ValueError(f"rl_zoo3's {algo}.yml has no {env} or {source} entry")
    path = folder / f"zoo_{algo}_{env}.yml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({env: entries[source]}))
    return path, int(entries[source].get("n_envs", 1))


def first_crossing_row(steps: list[int], returns: list[float], threshold: float) -> tuple[int | None, float]:
    from sb3ext.callbacks import first_crossing

    crossed, held = first_crossing(np.array(steps), np.array(returns), threshold)
    return (int(crossed) if crossed is not None else None), float(held)


def run_zoo(args: argparse.Namespace, method: str, task: Task, seed: int) -> dict[str, Any]:
    """AggreVaTeD or DAgger at its settings (per expert), or zoo PPO / SAC (per env), trained and evaluated; cached."""
    work = run_folder(args, method, task, seed)
    if method in AGGREVATED_METHODS:
        algo, extra = AGGREVATED_METHODS[method]
        entry = yaml.safe_load((ROOT / "hyperparams" / "aggrevated.yml").read_text())[task.env]
        hyperparams = [f"expert:'{args.experts / task.expert}'", *extra(args.budget)]
        trained = zoo_train(algo, task.env, seed, work, args.budget, args.save_freq, int(entry["n_envs"]), hyperparams)
    else:
        algo = method
        conf, n_envs = zoo_conf(method, task.env, args.work_dir / "conf")
        save_freq = getattr(args, "rl_save_freq", None) or args.save_freq
        trained = zoo_train(method, task.env, seed, work, args.rl_budget, save_freq, n_envs, conf_file=conf)
    steps, returns = evaluate_checkpoints(algo, task.env, work, args.eval_episodes, args.eval_seed)
    return {"method": method, "task": task.name, "seed": seed, "steps": steps, "returns": returns, "wall_s": trained["wall_s"],
            "episodes": args.eval_episodes}  # fmt: skip


def run_imitation(
    args: argparse.Namespace,
    python: Path,
    method: str,
    task: Task,
    seed: int,
    net_arch: tuple[int, ...] = (256, 256),
    normalize_obs: bool = True,
) -> dict[str, Any]:
    """imitation's DAgger or BC on the -v4 twin (its gymnasium has no -v5), same expert, net and episode seeds; an
    expert trained with VecNormalize acts on observations normalised with its frozen statistics.

    :param net_arch: the learner's hidden layers (AggreVaTeD's YAML network on the task)
    :param normalize_obs: running observation normalisation of the learner (AggreVaTeD's YAML ``normalize``)
    """
    from benchmark_imitation import expert_statistics, run

    imitation = imitation_task(args, task, net_arch)
    work = args.work_dir / f"imitation-{task.name}"
    work.mkdir(parents=True, exist_ok=True)
    result = run(
        python,
        method,
        imitation,
        seed,
        args.experts,
        expert_statistics(args.experts / task.expert, work / "expert_statistics.npz"),
        work,
        eval_seed=args.eval_seed,
        bc_epochs=args.bc_epochs,
        normalize_obs=normalize_obs,
    )
    wall = result["wall_s"]
    return {"method": method, "task": task.name, "seed": seed, "steps": result["timesteps"], "returns": result["returns"],
            "wall_s": wall[-1], "wall_curve": wall, "episodes": args.eval_episodes}  # fmt: skip


def imitation_task(args: argparse.Namespace, task: Task, net_arch: tuple[int, ...] = (256, 256)) -> Any:
    """``benchmark_imitation.Task`` of a task: its ``-v4`` twin env, the budget, checkpoints and evaluation."""
    from benchmark_imitation import Task as ImitationTask

    return ImitationTask(
        task.imitation_env, task.expert, task.expert_algo, args.budget, args.save_freq, args.eval_episodes, net_arch
    )


def run_folder(args: argparse.Namespace, method: str, task: Task, seed: int) -> Path:
    """Where a run's results live: its zoo work folder, or imitation's result file."""
    if method in AGGREVATED_METHODS:
        return args.work_dir / f"{method}-{task.name}-{seed}"
    if method in ("ppo", "sac"):
        return args.work_dir / f"{method}-{task.env}-{seed}"
    from benchmark_imitation import result_path

    return result_path(args.work_dir / f"imitation-{task.name}", method, imitation_task(args, task), seed, args.eval_seed)


def finished(args: argparse.Namespace, method: str, task: Task, seed: int) -> bool:
    folder = run_folder(args, method, task, seed)
    if method in ("dagger", "bc"):
        return folder.is_file()
    return evaluation_cache(folder, args.eval_episodes, args.eval_seed) is not None


def timing(task: Task, experts: Path, steps: int) -> dict[str, float]:
    """AggreVaTeD at the YAML settings in this process: env steps/s and the mean seconds per iteration of each part."""
    import torch as th

    th.set_num_threads(1)
    model = yaml_aggrevated(task.env, experts / task.expert)
    per_iteration = model.n_envs * model.n_steps
    # warm-up: fill the aggregation window, so that the timed iterations re-score a full window
    model.learn(per_iteration * model.aggregation_window)
    totals: dict[str, float] = {}
    iterations = 0
    start = time.perf_counter()
    while iterations * per_iteration < steps:
        model.learn(per_iteration, reset_num_timesteps=False)
        iterations += 1
        for key, value in model.logger.name_to_value.items():
            if key.startswith("time/"):
                totals[key[5:]] = totals.get(key[5:], 0.0) + float(value)
    wall = time.perf_counter() - start
    result = {key: value / iterations for key, value in totals.items()}
    result["env_steps_per_s"] = iterations * per_iteration / wall
    result["iteration_s"] = wall / iterations
    result["env_steps_per_iteration"] = per_iteration
    return result


def add_run_arguments(parser: argparse.ArgumentParser, name: str) -> None:
    """The arguments this script shares with ``benchmark_beyond_expert.py``: evaluation, parallelism, the experts,
    imitation's venv, the cache (``bench_runs/<name>``) and the output folder."""
    parser.add_argument("--eval-seed", type=int, default=50_000)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--bc-epochs", type=int, default=4, help="BC epochs per DAgger round / BC fit (imitation's: 4)")
    parser.add_argument("--experts", type=Path, default=ROOT.parent / "shared" / "experts")
    parser.add_argument("--venv", type=Path, default=ROOT.parent / "imitation_venv", help="imitation's venv")
    parser.add_argument(
        "--cached-only", action="store_true", help="run nothing new: report the runs already finished in --work-dir"
    )
    parser.add_argument("--work-dir", type=Path, default=ROOT / "bench_runs" / name)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks")


def task_references(args: argparse.Namespace, tasks: list[Task]) -> dict[str, dict[str, float]]:
    """The expert's and a random policy's returns on the evaluation episodes, per task (cached in --work-dir)."""
    refs = {}
    for task in tasks:
        cache = args.work_dir / f"references-{task.name}-{args.eval_seed}-{args.eval_episodes}.json"
        refs[task.name] = references(task.env, args.experts / task.expert, args.eval_episodes, args.eval_seed, cache)
        r = refs[task.name]
        print(f"{task.name}: expert {r['expert']:.1f} ± {r['expert_std']:.1f}, random {r['random']:.1f}", flush=True)
    return refs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS))
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument(
        "--budget", type=int, default=100_000, help="env steps of AggreVaTeD, DAgger and BC (the YAML's n_timesteps)"
    )
    parser.add_argument("--rl-budget", type=int, default=100_000, help="env steps of zoo PPO and SAC")
    parser.add_argument("--save-freq", type=int, default=5_000, help="env steps between checkpoints / evaluations")
    parser.add_argument("--eval-episodes", type=int, default=30, help="episodes per checkpoint evaluation")
    add_run_arguments(parser, "locomotion")
    parser.add_argument("--timing", action="store_true", help="also time AggreVaTeD's parts at the YAML settings")
    args = parser.parse_args()
    from sb3ext.callbacks import threshold_between

    tasks = [TASKS[name] for name in args.tasks]
    refs = task_references(args, tasks)

    python = None
    if {"dagger", "bc"} & set(args.methods) and not args.cached_only:
        from benchmark_imitation import ensure_venv

        python = ensure_venv(args.venv, mujoco=True)
    jobs = [
        (method, task, seed)
        for task in tasks
        for method in args.methods
        for seed in args.seeds
        if not args.cached_only or finished(args, method, task, seed)
    ]

    def one(job: tuple[str, Task, int]) -> dict[str, Any]:
        method, task, seed = job
        if method in ("dagger", "bc"):  # with --cached-only the venv is not needed: the results are read back
            return run_imitation(args, python or args.venv / "bin" / "python", method, task, seed)
        return run_zoo(args, method, task, seed)

    # zoo PPO / SAC runs depend on the env only: one run serves every expert of that env
    unique = {run_folder(args, *job): job for job in jobs}
    with ThreadPoolExecutor(args.jobs) as pool:
        by_folder = dict(zip(unique, pool.map(one, unique.values())))
    results = [{**by_folder[run_folder(args, *job)], "task": job[1].name} for job in jobs]

    results, carried = merge_earlier(args, results)
    # the page keeps every task with runs, this command's or an earlier one's: a re-run of one task keeps the others
    shown = {r["task"] for r in results + carried}
    tasks = [task for task in TASKS.values() if task.name in shown]
    refs = task_references(args, tasks)
    rows = []
    for result in results:
        r = refs[result["task"]]
        threshold = threshold_between(r["random"], r["expert"])
        crossed, held = first_crossing_row(result["steps"], result["returns"], threshold)
        wall_to = None
        if crossed is not None:
            index = result["steps"].index(crossed)
            curve = result.get("wall_curve")
            wall_to = curve[index] if curve else result["wall_s"] * crossed / result["steps"][-1]
        rows.append({
            "task": result["task"], "method": result["method"], "seed": result["seed"], "steps_to_threshold": crossed,
            "wall_to_threshold_s": wall_to, "held": held, "final": result["returns"][-1],
            "best": max(result["returns"]), "budget": result["steps"][-1], "wall_s": result["wall_s"],
            "episodes": result["episodes"],
        })  # fmt: skip
    rows += carried
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "locomotion_runs.json").write_text(json.dumps(results))
    with open(args.out / "locomotion.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=[k for k in rows[0] if k != "carried"], extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    # without --timing the page keeps the earlier generation's timings (locomotion_timing.json beside the page)
    kept_timings = args.out / "locomotion_timing.json"
    timings: dict[str, dict] = json.loads(kept_timings.read_text()) if kept_timings.exists() else {}
    if args.timing:  # every task on the page, cached in --work-dir/timing.json: delete it to measure again
        cache = args.work_dir / "timing.json"
        timings = json.loads(cache.read_text()) if cache.exists() else {}
        for task in tasks:
            if task.name not in timings:
                timings[task.name] = timing(task, args.experts, 8 * 1024)
                cache.write_text(json.dumps(timings, indent=1))
        kept_timings.write_text(json.dumps(timings, indent=1))
    plot(args, tasks, results, refs)
    write_page(args, tasks, rows, refs, timings)


def merge_earlier(
    args: argparse.Namespace, results: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """This invocation's runs, plus the other tasks' and methods' from ``locomotion_runs.json`` (curves) or
    ``locomotion.csv`` (rows only): ``zoo_bench.merge_earlier_runs``."""
    ints = ("seed", "steps_to_threshold", "budget", "episodes")
    curves, rows = args.out / "locomotion_runs.json", args.out / "locomotion.csv"
    return merge_earlier_runs(results, curves, rows, set(TASKS), ints)


def plot(
    args: argparse.Namespace,
    tasks: list[Task],
    results: list[dict[str, Any]],
    refs: dict[str, dict],
    name: str = "locomotion",
    level: Callable[[dict[str, float]], float] | None = None,
    level_label: str = "threshold",
) -> None:
    """Per task, every run's curve with the expert, random and ``level`` lines (default: the 90% threshold), saved as
    ``<out>/<name>_<task>.png``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from sb3ext.callbacks import threshold_between

    for task in tasks:
        fig, ax = plt.subplots(figsize=(7.5, 4.5))
        seen = set()
        for result in results:
            if result["task"] != task.name:
                continue
            method = result["method"]
            ax.plot(result["steps"], result["returns"], marker="o", ms=2.5, color=COLORS[method], alpha=0.75,
                    label=LABELS[method] if method not in seen else None)  # fmt: skip
            seen.add(method)
        r = refs[task.name]
        line = level(r) if level is not None else threshold_between(r["random"], r["expert"])
        decorate_curve_axes(ax, r, line, f"{task.env}, expert {task.expert}", args.eval_episodes, level_label)
        fig.tight_layout()
        fig.savefig(args.out / f"{name}_{task.name}.png", dpi=110)
        plt.close(fig)


def write_page(
    args: argparse.Namespace, tasks: list[Task], rows: list[dict], refs: dict[str, dict], timings: dict[str, dict]
) -> None:
    from sb3ext.callbacks import threshold_between

    fmt_steps = lambda v: f"{v:,}" if v is not None else "—"  # noqa: E731
    command = ("python scripts/benchmark_locomotion.py " + " ".join(sys.argv[1:])).strip()
    lines = [
        "# AggreVaTeD on MuJoCo locomotion (zoo SAC/TQC experts)",
        "",
        f"Generated by `{command}` on {time.strftime('%Y-%m-%d')} (2-core CPU machine, one thread per run).",
        "",
        f"Every checkpoint is evaluated on seeded deterministic episodes (seeds {args.eval_seed}, "
        f'{args.eval_seed + 1}, ...; how many: each row\'s "episodes" column; this command: {args.eval_episodes}), '
        f"every {args.save_freq:,} env steps; the expert and a uniformly random policy on this command's episodes. "
        "Threshold: random + 0.9 (expert - random). AggreVaTeD: the YAML "
        "defaults through the zoo CLI. PPO and SAC: the zoo's own tuned `-v4` entries (the zoo trains them for 1M). "
        "DAgger and BC: imitation 1.0.1, same expert, 256-256 learner with imitation's running observation "
        "normalisation (as AggreVaTeD's learner normalises its observations), on the `-v4` twin env (imitation's "
        "gymnasium 0.29 has no `-v5`). DAgger (matched): `--algo dagger` (`MatchedDAgger`) with AggreVaTeD's YAML "
        "entry and `expert_action_memory` (every visited state): DAgger with AggreVaTeD's roll-ins, network, "
        "normalisation and optimiser, regressing on the expert's actions at every state visited so far instead of "
        "following the critic (its wall-clock includes the re-scoring, which cloning does not use). "
        'Each run\'s length is in the "env steps run" column (this command: '
        + ", ".join(
            f"{LABELS[m].replace(' (zoo)', '')} {args.rl_budget if m in ('ppo', 'sac') else args.budget:,}"
            for m in args.methods
        )
        + "). "
        '"held": the fraction of the checkpoints from the first crossing to the end of the run that are at the '
        "threshold (the crossing counts).",
        "",
    ]
    others = [task.name for task in tasks if task.name not in args.tasks]
    if others:
        lines += [
            f"This command ran {', '.join(args.tasks)}; the sections of {', '.join(others)} are the earlier "
            "generation's runs, kept from `locomotion_runs.json` and `locomotion.csv` (see their history for the "
            "command and date).",
            "",
        ]
    kept = sorted({row["method"] for row in rows if row["method"] not in args.methods and not row.get("carried")},
                  key=METHODS.index)  # fmt: skip
    if kept:
        lines += [
            f"The {', '.join(LABELS[m] for m in kept)} rows were not re-run by this command: their curves are the "
            "earlier generation's, kept from `locomotion_runs.json` (see its history for the command and date).",
            "",
        ]
    if any(row.get("carried") for row in rows):
        lines += [
            "Rows marked * were not re-run by this command: they are the earlier generation's rows of "
            "`locomotion.csv` (see the file's history for the command and date), without a curve in the plots.",
            "",
        ]
    for task in tasks:
        r = refs[task.name]
        threshold = threshold_between(r["random"], r["expert"])
        published = ZOO_PUBLISHED.get(task.body, {})
        lines += [
            f"## {task.env}, expert `{task.expert}`",
            "",
            f"Expert {r['expert']:.1f} ± {r['expert_std']:.1f}, random {r['random']:.1f}, threshold {threshold:.1f}. "
            f"The zoo's published returns at 1M steps: PPO {published.get('ppo', '?')}, SAC {published.get('sac', '?')}, "
            f"TQC {published.get('tqc', '?')}.",
            "",
            "| method | seeds | env steps run | episodes | median env steps to threshold | per seed | "
            "wall-clock to threshold (s) | held | final returns | best |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for method in METHODS:
            mine = [row for row in rows if row["task"] == task.name and row["method"] == method]
            if not mine:
                continue
            values = [row["steps_to_threshold"] for row in mine]
            reached = [v for v in values if v is not None]
            if len(reached) * 2 > len(values):
                median = f"{int(np.median([v if v is not None else np.inf for v in values])):,}"
            else:
                median = f"not reached (> {max(int(row['budget']) for row in mine):,})"
            walls = ", ".join(f"{row['wall_to_threshold_s']:.0f}" if row["wall_to_threshold_s"] else "—" for row in mine)
            held = ", ".join(f"{row['held']:.0%}" if row["steps_to_threshold"] is not None else "—" for row in mine)
            finals = ", ".join(f"{row['final']:.0f}" for row in mine)
            bests = ", ".join(f"{row['best']:.0f}" for row in mine)
            per_seed = ", ".join(fmt_steps(v) for v in values)
            seeds = ", ".join(str(row["seed"]) for row in mine)
            label = LABELS[method] + (" *" if mine[0].get("carried") else "")
            run = ", ".join(f"{b:,}" for b in sorted({int(row["budget"]) for row in mine}))
            episodes = ", ".join(str(e) for e in sorted({int(row["episodes"]) for row in mine}))
            lines.append(
                f"| {label} | {seeds} | {run} | {episodes} | {median} | {per_seed} | {walls} | {held} | {finals} | {bests} |"
            )
        lines += ["", f"![{task.name}](locomotion_{task.name}.png)", ""]
    if timings:
        lines += [
            "## Where AggreVaTeD's time goes",
            "",
            "At the YAML settings, in one process and one thread, after the aggregation window has filled; mean "
            "seconds per iteration (`time/*` keys of the logger):",
            "",
            "| task | env steps / iteration | env steps/s | roll-in (env + learner) | of which expert actions | "
            "re-scoring | update |",
            "|---|---|---|---|---|---|---|",
        ]
        for name, t in timings.items():
            lines.append(
                f"| {name} | {t['env_steps_per_iteration']:,} | {t['env_steps_per_s']:.0f} | {t['rollin_s']:.3f} | "
                f"{t['rollin_expert_s']:.3f} | {t['scoring_s']:.3f} | {t['update_s']:.3f} |"
            )
        lines.append("")
    (args.out / "locomotion.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
