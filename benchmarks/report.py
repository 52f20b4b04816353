"""One report format: a page per suite (``docs/benchmarks/<suite>.md``) headed by its command, a table per task,
learning curves (``<suite>_<task>.png``) and every run's row (``<suite>.csv``)."""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import record
from benchmarks.suite import ROOT, Suite, Task, task_folder

THRESHOLD_FRACTION = 0.9
COLORS = ["tab:blue", "tab:red", "tab:gray", "tab:brown", "tab:orange", "tab:purple", "tab:green", "tab:olive"]
LABELS = {
    "aggrevated": "AggreVaTeD",
    "aggrevated_imitation": "AggreVaTeD, rl_coef 0 (imitation only)",
    "aggrevated_rl": "AggreVaTeD + rl_coef 1",
    "dagger": "DAgger (matched)",
    "imitation_dagger": "imitation DAgger",
    "imitation_bc": "imitation BC",
    "ppo": "PPO (zoo)",
    "sac": "SAC (zoo)",
    "stage": "AggreVaTeD, then the stage",
    "stage_50k": "AggreVaTeD, then the stage from 50k",
    "stage_no_floor": "AggreVaTeD, then the stage, the env's own rewards",
}


def label(method: str, tasks: Iterable[Task]) -> str:
    """A method's column and legend name: its label, or, where its zoo entry comes from a file under benchmarks/
    (``entry``), its name and that entry (the zoo's own settings are not what it ran)."""
    spec = next((t.methods[method] for t in tasks if method in t.methods), None)
    if spec is not None and spec.entry:
        return f"{method} ({spec.entry})"
    return LABELS.get(method, method)


def threshold_of(task: Task, refs: dict[str, Any]) -> float:
    """90% of the way from a random policy to the expert on the same episodes; a task's ``goal`` without an expert."""
    if "expert" in refs:
        return refs["random"] + THRESHOLD_FRACTION * (refs["expert"] - refs["random"])
    assert task.goal is not None  # the suite loader requires one or the other
    return task.goal


@dataclass(frozen=True)
class RunSummary:
    """One run against its task's threshold."""

    task: str
    method: str
    seed: int
    budget: int
    steps_to_threshold: int | None  # env steps of the first checkpoint at the threshold
    wall_to_threshold_s: float | None  # seconds from the start of training to that checkpoint
    held: float  # share of the checkpoints from that one on that stay at the threshold
    final: float  # the last checkpoint's return
    best: float
    train_wall_s: float
    train_cpu_s: float | None  # None: trained before CPU time was recorded (see cpu_hours_cell)
    machine: str


def return_text(value: float) -> str:
    """A return as the pages print it: whole numbers from 100 up, one decimal below (Atari's 9.6 is not 10)."""
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.1f}"


def summarise(result: dict[str, Any], threshold: float) -> RunSummary:
    if "summary" in result:  # recorded without its curve (benchmarks/record.py)
        summary = {"train_cpu_s": None, **result["summary"]}  # recorded before CPU time was: none
        return RunSummary(**{key: summary[key] for key in RunSummary.__dataclass_fields__})
    steps, returns = np.asarray(result["steps"]), np.asarray(result["returns"], dtype=float)
    hits = np.flatnonzero(returns >= threshold)
    first = int(hits[0]) if hits.size else None
    return RunSummary(
        task=result["task"],
        method=result["method"],
        seed=result["seed"],
        budget=result["budget"],
        steps_to_threshold=None if first is None else int(steps[first]),
        wall_to_threshold_s=None if first is None else float(result["wall_s"][first]),
        held=0.0 if first is None else float(np.mean(returns[first:] >= threshold)),
        final=float(returns[-1]) if returns.size else math.nan,
        best=float(returns.max()) if returns.size else math.nan,
        train_wall_s=float(result.get("train_wall_s", 0.0)),
        train_cpu_s=None if result.get("train_cpu_s") is None else float(result["train_cpu_s"]),
        machine=str(result.get("machine", "not recorded")),
    )


def median_or_none(values: list[float | int | None]) -> float | None:
    """The median with a missing value counted as infinite (never reached); None when that median is infinite."""
    if not values:
        return None
    median = float(np.median([math.inf if v is None else v for v in values]))
    return None if math.isinf(median) else median


def steps_cell(runs: list[RunSummary]) -> str:
    median = median_or_none([r.steps_to_threshold for r in runs])
    each = ", ".join("—" if r.steps_to_threshold is None else f"{r.steps_to_threshold:,}" for r in runs)
    head = f"not in {max(r.budget for r in runs):,}" if median is None else f"**{median:,.0f}**"
    return f"{head} ({each})"


def cpu_hours(runs: list[RunSummary]) -> tuple[float, bool]:
    """The runs' training CPU-hours, and whether some are bounded by wall-clock: a run trained before CPU time was
    recorded counts its training wall-clock (one thread: its CPU time is at most that)."""
    return sum(r.train_wall_s if r.train_cpu_s is None else r.train_cpu_s for r in runs) / 3600, any(
        r.train_cpu_s is None for r in runs
    )


def cpu_hours_cell(runs: list[RunSummary]) -> str:
    hours, bounded = cpu_hours(runs)
    return f"{'≤ ' if bounded else ''}{hours:.2f}"


def held_cell(runs: list[RunSummary], results: dict[tuple[str, int], dict[str, Any]], threshold: float) -> str:
    held = total = 0
    for run in runs:
        if run.steps_to_threshold is None:
            continue
        result = results[(run.method, run.seed)]
        if "summary" in result:  # recorded without its curve: the share and the number of later checkpoints
            later_count = int(result["summary"]["later"])
            held, total = held + round(run.held * later_count), total + later_count
            continue
        later = [r for s, r in zip(result["steps"], result["returns"]) if s >= run.steps_to_threshold]
        held, total = held + sum(r >= threshold for r in later), total + len(later)
    return "—" if not total else f"{held}/{total} ({100 * held / total:.0f}%)"


def task_table(task: Task, refs: dict[str, Any], results: list[dict[str, Any]]) -> tuple[list[str], list[RunSummary]]:
    threshold = threshold_of(task, refs)
    lines = [
        "| method | env steps to the threshold: median (seeds) | checkpoints holding it from the crossing on "
        "| final return: median (seeds) | wall-clock to the threshold (median) | training wall-clock (median) "
        "| training CPU-hours (all seeds) |",
        "|---|---|---|---|---|---|---|",
    ]
    summaries = []
    by_key = {(r["method"], r["seed"]): r for r in results}
    for method in task.methods:
        runs = sorted((summarise(r, threshold) for r in results if r["method"] == method), key=lambda s: s.seed)
        if not runs:
            continue
        summaries += runs
        wall = median_or_none([r.wall_to_threshold_s for r in runs])
        finals = ", ".join(f"{r.final:.1f}" for r in runs)
        lines.append(
            f"| {label(method, [task])} | {steps_cell(runs)} | {held_cell(runs, by_key, threshold)} "
            f"| {np.median([r.final for r in runs]):.1f} ({finals}) | {'—' if wall is None else f'{wall:,.0f} s'} "
            f"| {np.median([r.train_wall_s for r in runs]):,.0f} s | {cpu_hours_cell(runs)} |"
        )
    return lines, summaries


def expert_bar(refs: dict[str, Any], episodes: int) -> tuple[float, float]:
    """The expert's standard error on the page's episodes, and the bar 3 standard errors above its mean: a learner
    past it is past the expert beyond the noise of the expert's own score."""
    se = refs["expert_std"] / math.sqrt(episodes)
    return se, refs["expert"] + 3 * se


def gap_closed(final: float, expert: float, best: float) -> float:
    """The share of the gap from the expert to the zoo's best agent that a final return closes (below the expert:
    negative)."""
    return (final - expert) / (best - expert)


def beyond_cells(runs: list[RunSummary], expert: float, best: float) -> tuple[str, str]:
    """A method's gap closed and its env steps past the bar (``runs`` summarised against the bar), median (seeds)."""
    shares = [gap_closed(r.final, expert, best) for r in runs]
    each = ", ".join(f"{s:.0%}" for s in shares)
    return f"{np.median(shares):.0%} ({each})", steps_cell(runs)


def beyond_table(task: Task, refs: dict[str, Any], results: list[dict[str, Any]], episodes: int) -> list[str]:
    """A task with ``zoo_best``: each method's final return, the share of the gap from the expert to the zoo's best
    agent it closes, and the env steps it takes to pass the expert by 3 standard errors, beside the expert and the
    zoo's best (runs recorded without their curves are left out: their crossing of the bar is not known)."""
    assert task.zoo_best is not None
    best, agent = task.zoo_best
    se, bar = expert_bar(refs, episodes)
    lines = [
        f"Past the expert: its mean {return_text(refs['expert'])} plus 3 standard errors ({se:.1f} each over "
        f"{episodes} episodes) is {return_text(bar)}. The gap runs from the expert to the zoo's best agent ({agent}, "
        f"{return_text(best)} as the zoo published it).",
        "",
        "| method | final return: median (seeds) | share of the gap to the zoo's best closed: median (seeds) "
        f"| env steps to pass {return_text(bar)}: median (seeds) | training CPU-hours (all seeds) "
        "| CPU-s per 1k env steps (median) |",
        "|---|---|---|---|---|---|",
        f"| expert | {return_text(refs['expert'])} ± {se:.1f} (s.e.) | 0% | — | — | — |",
    ]
    for method in task.methods:
        runs = sorted((summarise(r, bar) for r in results if r["method"] == method and r.get("steps")),
                      key=lambda s: s.seed)  # fmt: skip
        if runs:
            share, steps = beyond_cells(runs, refs["expert"], best)
            finals = ", ".join(return_text(r.final) for r in runs)
            rates = [r.train_cpu_s / r.budget * 1000 for r in runs if r.train_cpu_s is not None]
            rate = f"{np.median(rates):.1f}" if rates else "—"
            lines.append(f"| {label(method, [task])} | {return_text(float(np.median([r.final for r in runs])))} "
                         f"({finals}) | {share} | {steps} | {cpu_hours_cell(runs)} | {rate} |")  # fmt: skip
    return [*lines, f"| zoo's best ({agent}) | {return_text(best)} | 100% | — | — | — |", ""]


def beyond_summary(suite: Suite, refs: dict[str, dict[str, Any]], results: dict[str, list[dict[str, Any]]]) -> list[str]:
    """One row per task with ``zoo_best`` and results, one column per method: the median share of the gap to the zoo's
    best closed, and the median env steps to pass the expert by 3 standard errors."""
    methods = [m for m in dict.fromkeys(m for t in suite.tasks.values() if t.zoo_best for m in t.methods)]
    lines = ["| task | expert (+3 s.e.) | zoo's best | " + " | ".join(label(m, suite.tasks.values()) for m in methods) + " |",
             "|" + "---|" * (3 + len(methods))]  # fmt: skip
    for task in suite.tasks.values():
        task_refs = refs.get(task.name, {})
        if task.zoo_best is None or not results.get(task.name) or "expert" not in task_refs:
            continue
        _, bar = expert_bar(task_refs, suite.episodes)
        cells = []
        for method in methods:
            runs = [summarise(r, bar) for r in results[task.name] if r["method"] == method and r.get("steps")]
            if not runs:
                cells.append("—")
                continue
            share = np.median([gap_closed(r.final, task_refs["expert"], task.zoo_best[0]) for r in runs])
            median = median_or_none([r.steps_to_threshold for r in runs])
            past = f"not past in {max(r.budget for r in runs):,}" if median is None else f"past at {median:,.0f}"
            cells.append(f"{share:.0%} closed; {past} ({len(runs)} seed{'' if len(runs) == 1 else 's'})")
        lines.append(f"| {task.name} | {return_text(task_refs['expert'])} ({return_text(bar)}) "
                     f"| {return_text(task.zoo_best[0])} | " + " | ".join(cells) + " |")  # fmt: skip
    return lines


def plot_task(task: Task, refs: dict[str, Any], results: list[dict[str, Any]], path: Path, episodes: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for color, method in zip(COLORS, task.methods):
        runs = [r for r in results if r["method"] == method and r.get("steps")]
        for i, run in enumerate(runs):
            ax.plot(run["steps"], run["returns"], color=color, alpha=0.35 if len(runs) > 1 else 1.0, lw=1,
                    label=None if len(runs) > 1 or i else label(method, [task]))  # fmt: skip
        common = min((len(r["steps"]) for r in runs), default=0)
        if len(runs) > 1 and common:
            ax.plot(runs[0]["steps"][:common], np.median([r["returns"][:common] for r in runs], axis=0), color=color,
                    lw=2, label=f"{label(method, [task])} (median of {len(runs)})")  # fmt: skip
    threshold = threshold_of(task, refs)
    if "expert" in refs:
        ax.axhline(refs["expert"], color="tab:green", ls="--", label=f"expert ({return_text(refs['expert'])})")
    ax.axhline(threshold, color="black", ls="-.", lw=1, label=f"threshold ({return_text(threshold)})")
    if task.zoo_best is not None and "expert" in refs:
        bar = expert_bar(refs, episodes)[1]
        ax.axhline(bar, color="tab:green", ls=":", lw=1, label=f"expert + 3 s.e. ({return_text(bar)})")
        ax.axhline(task.zoo_best[0], color="tab:purple", ls="--", lw=1,
                   label=f"zoo's best ({task.zoo_best[1]}: {return_text(task.zoo_best[0])})")  # fmt: skip
    ax.axhline(refs["random"], color="tab:red", ls=":", label=f"random ({return_text(refs['random'])})")
    ax.set_xscale("log")
    ax.set_xlabel("environment steps (log scale)")
    ax.set_ylabel(f"mean return, {episodes} seeded episodes")
    ax.set_title(f"{task.name} ({task.env})" if task.name != task.env else task.env)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def file_stem(suite: Suite, task: Task) -> str:
    return f"{suite.name}_{task.name.replace('/', '-')}"


def summary_table(suite: Suite, refs: dict[str, dict[str, Any]], results: dict[str, list[dict[str, Any]]]) -> list[str]:
    """One row per task with results, one column per method: median env steps to the threshold, the share of later
    checkpoints holding it, and the median final return against the expert's (the suite at a glance)."""
    methods = [m for m in dict.fromkeys(m for t in suite.tasks.values() for m in t.methods)]
    header = "| task | expert | threshold | " + " | ".join(label(m, suite.tasks.values()) for m in methods) + " |"
    lines = [header, "|" + "---|" * (3 + len(methods))]
    for task in suite.tasks.values():
        if not results.get(task.name):
            continue
        threshold = threshold_of(task, refs[task.name])
        by_key = {(r["method"], r["seed"]): r for r in results[task.name]}
        cells = []
        for method in methods:
            runs = [summarise(r, threshold) for r in results[task.name] if r["method"] == method]
            if not runs:
                cells.append("—")
                continue
            median = median_or_none([r.steps_to_threshold for r in runs])
            steps = f"not in {max(r.budget for r in runs):,}" if median is None else f"{median:,.0f}"
            held = held_cell(runs, by_key, threshold).split(" ")[-1].strip("()")
            cells.append(f"{steps} ({held} held; final {return_text(float(np.median([r.final for r in runs])))})")
        expert = return_text(refs[task.name]["expert"]) if "expert" in refs[task.name] else "—"
        lines.append(f"| {task.name} | {expert} | {return_text(threshold)} | " + " | ".join(cells) + " |")
    return lines


def recorded_level(reference: str | None) -> Any:
    """The own recorded level (``sb3ext.experts.recorded``) of the expert at a local reference (a task's
    ``expert_reference``), None where it has none."""
    from sb3ext.experts import find_expert_files
    from sb3ext.experts.recorded import read_record

    if reference is None or reference.startswith("shipped:"):
        return None
    try:
        return read_record(find_expert_files(reference).record)
    except (ValueError, OSError):
        return None


def experts_table(suite: Suite, refs: dict[str, dict[str, Any]], work: Path) -> list[str]:
    """Each task's expert: its recorded level where it was trained and its score here (they differ where the gap
    exceeds the recorded spread and three standard errors); then, under the table, the tasks' ``as_trained``: why."""
    from sb3ext.experts.recorded import beyond_noise

    lines = ["| task | expert | recorded | here | differs |", "|---|---|---|---|---|"]
    why = []
    for task in suite.tasks.values():
        here = refs.get(task.name, {})
        try:
            recorded = recorded_level(task.expert_reference(work))
        except ValueError:  # an expert trained in the work dir, not there now
            recorded = None
        if task.expert is None or "expert" not in here:
            continue
        recorded_cell = "—" if recorded is None else f"{recorded.mean:,.1f} ± {recorded.std:,.1f} ({recorded.episodes})"
        differs = "" if recorded is None else "no"
        if recorded is not None and beyond_noise(recorded, here["expert"], here["expert_std"], suite.episodes):
            differs = "above" if here["expert"] > recorded.mean else "below"
        here_cell = f"{here['expert']:,.1f} ± {here['expert_std']:,.1f}"
        lines.append(f"| {task.name} | `{task.expert}` | {recorded_cell} | {here_cell} | {differs} |")
        if task.as_trained:
            why.append(f"- **{task.name}** ({differs or 'no record'}): {task.as_trained}")
    return lines + ([""] + why if why else [])


def paper_scores(
    suite: Suite, refs: dict[str, dict[str, Any]], results: dict[str, list[dict[str, Any]]],
    measure: Callable[[dict[str, Any]], float | None],
) -> tuple[dict[str, list[float]], dict[str, dict[str, float]]]:  # fmt: skip
    """Per method, each run's ``measure`` shifted and scaled per task so that the random policy scores 0 and the best
    method (its mean over its seeds) 1; per task, each method's mean. Only tasks where every method of the suite's
    ``paper_scores`` has a measured run count."""
    finals: dict[str, dict[str, list[float]]] = {}
    for task in suite.tasks.values():
        for result in results.get(task.name, []):
            value = measure(result)
            if value is not None:
                finals.setdefault(task.name, {}).setdefault(result["method"], []).append(value)
    methods = [m for m, _ in suite.paper_scores]
    runs: dict[str, list[float]] = {m: [] for m in methods}
    per_task: dict[str, dict[str, float]] = {}
    for task_name, by_method in finals.items():
        if not all(m in by_method for m in methods):
            continue
        best, random = max(np.mean(v) for v in by_method.values()), refs[task_name]["random"]
        scaled = {m: [(f - random) / (best - random) for f in v] for m, v in by_method.items()}
        per_task[task_name] = {m: float(np.mean(v)) for m, v in scaled.items()}
        for method in methods:
            runs[method] += scaled[method]
    return runs, per_task


def normalised_scores(suite: Suite, refs: dict[str, dict[str, Any]], results: dict[str, list[dict[str, Any]]],
                      out: Path) -> list[str]:  # fmt: skip
    """The PPO paper's score (Table 1) beside the suite's ``paper_scores`` (:func:`paper_scores`), on each run's final
    checkpoint's evaluation, and on the paper's own measure where runs have it: their last 100 training episodes
    (stochastic actions). Written to ``<suite>_normalised.csv`` as well."""
    methods, paper = [m for m, _ in suite.paper_scores], dict(suite.paper_scores)
    runs, per_task = paper_scores(suite, refs, results, lambda result: summarise(result, 0.0).final)
    trained, trained_tasks = paper_scores(suite, refs, results, lambda result: result.get("training_episodes", {}).get("mean"))
    if not per_task:
        return [f"No task has a run of every method yet ({', '.join(methods)})."]
    complete = list(per_task)
    lines = ["| method | score here (mean over runs) | the paper's | " + " | ".join(complete)
             + " | on the last 100 training episodes (runs) |", "|---" * (4 + len(complete)) + "|"]  # fmt: skip
    rows = []
    for method in methods:
        mean = float(np.mean(runs[method]))
        on_training = float(np.mean(trained[method])) if trained[method] else None
        rows.append({"method": method, "score": mean, "paper": paper[method], "runs": len(runs[method]),
                     **{t: per_task[t][method] for t in complete}, "training_score": on_training,
                     "training_runs": len(trained[method])})  # fmt: skip
        cells = " | ".join(f"{per_task[t][method]:.2f}" for t in complete)
        trained_cell = "—" if on_training is None else f"{on_training:.2f} ({len(trained[method])})"
        count = len(runs[method])
        lines.append(f"| {method} | {mean:.2f} ({count} run{'s' if count != 1 else ''}) | {paper[method]:.2f} | {cells} "
                     f"| {trained_cell} |")  # fmt: skip
    with open(out / f"{suite.name}_normalised.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=["method", "score", "paper", "runs", *complete, "training_score",
                                                    "training_runs"])  # fmt: skip
        writer.writeheader()
        writer.writerows(rows)
    paper_tasks = {name for name, task in suite.tasks.items() if set(methods) <= set(task.methods)}
    skipped = sorted({t for t, rs in results.items() if rs and t in paper_tasks} - set(complete))
    note = f" Tasks left out until every method has run there: {', '.join(skipped)}." if skipped else ""
    trained_note = (f" The last column scores the same way the mean of each run's last 100 training episodes, the "
                    f"paper's own measure, over the tasks where every method has it ({', '.join(trained_tasks)})."
                    if trained_tasks else " The last column (the paper's own measure, each run's last 100 training "
                    "episodes) waits for runs that recorded them.")  # fmt: skip
    return [*lines, "", f"Per task: the mean over that method's seeds.{note}{trained_note}"]


def collect(suite: Suite, work: Path, out: Path) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """The references (per task) and finished results (per ``task/method/seed``) of the suite: the committed record
    under ``out`` with the runs finished under ``work`` over it."""
    refs, runs = record.load(suite, out)
    for task in suite.tasks.values():
        folder = task_folder(work, suite.name, task.name)
        if (folder / "references.json").exists():
            refs[task.name] = json.loads((folder / "references.json").read_text())
            for path in sorted(folder.glob("*/seed*/result.json")):
                result = json.loads(path.read_text())
                runs[record.run_key(result)] = result
    budgets = {(t.name, name): m.budget for t in suite.tasks.values() for name, m in t.methods.items()}
    return refs, {  # a run at a budget the suite no longer gives its method is run again, and is not shown
        key: r for key, r in runs.items() if budgets.get((r["task"], r["method"]), r["budget"]) == r["budget"]
    }


def provenance(suite: str, task: Task, refs: dict[str, Any], results: list[dict[str, Any]]) -> list[str]:
    """Where the references were measured, the runs that ran elsewhere, and what the references read on the other
    machines they were measured on again (``python -m benchmarks references``): a chaotic simulation (a walker)
    scores one policy differently on another CPU or with other simulator versions, and the threshold moves with it.
    Then the runs whose episodes were played side by side (``runs.SIDE_BY_SIDE``), for the same reason."""
    check = f"`python -m benchmarks references {suite} --tasks {task.name}` measures them again here"
    if "machine" not in refs:
        lines = ["The references were measured before the harness recorded where."]
        if not refs.get("elsewhere"):
            lines.append(f"{check[0].upper()}{check[1:]}.")
    else:
        lines = [f"References measured on {refs['machine']} ({refs['packages']})."]
        elsewhere = [r for r in results if r.get("machine", refs["machine"]) != refs["machine"]
                     or r.get("packages", refs["packages"]) != refs["packages"]]  # fmt: skip
        if elsewhere:
            lines.append(f"{len(elsewhere)} of the {len(results)} runs ran on another machine or other packages; {check}.")
    for other in refs.get("elsewhere", []):
        expert = f"the expert scores {other['expert']:.1f} ± {other['expert_std']:.1f}, " if "expert" in other else ""
        lines.append(f"Measured again on {other['machine']} ({other['packages']}): {expert}random {other['random']:.1f}; "
                     f"the threshold there would be {threshold_of(task, other):.1f}.")  # fmt: skip
    together = [r for r in results if max(r.get("side_by_side", [1]), default=1) > 1]
    if together:
        most = max(max(r["side_by_side"]) for r in together)
        lines.append(f"{len(together)} of the {len(results)} runs played their checkpoints' episodes up to {most} at "
                     "a time (the policy acting on them in one batch, its actions equal to one at a time's but in the "
                     "last float bits, so that a long episode can part from its course one at a time); the others "
                     "one after the other.")  # fmt: skip
    return [" ".join(lines), ""]


def made_by(suite: Suite, runs: dict[str, dict[str, Any]]) -> list[str]:
    """The page's first lines: the one command that makes it, the runs it still lacks, the invocations that ran."""
    if not runs:
        return ["No runs yet."]
    commands = sorted({r["command"] for r in runs.values() if r.get("command")})
    missing = [job.key.removeprefix(f"{suite.name}/") for job in suite.select() if not record.recorded(job, runs)]
    lines = [f"Made by `python -m benchmarks run {suite.name}` (every task, method and seed of the suite; finished runs "
             "are kept, so the same command completes the page)."]  # fmt: skip
    if missing:
        lines += ["", f"Not run yet ({len(missing)}): " + ", ".join(f"`{m}`" for m in missing) + "."]
    if commands:
        lines += ["", "The runs shown were started by " + ", ".join(f"`{c}`" for c in commands) + "."]
    lost = sum("summary" in r for r in runs.values())
    if lost:
        lines += ["", f"{lost} of the {len(runs)} runs were recorded by an earlier harness that kept their summaries "
                  "only (their rows and held counts are kept; their curves are not drawn again)."]  # fmt: skip
    return lines


def write_page(suite: Suite, work: Path, out: Path) -> Path:
    """``out/<suite>.md`` (with its curves and CSV) from every finished run of the suite: those recorded under
    ``out/runs`` and those under ``work``, which join the record."""
    refs, runs = collect(suite, work, out)
    record.save(suite, out, refs, runs)
    results: dict[str, list[dict[str, Any]]] = {}
    for result in runs.values():
        results.setdefault(result["task"], []).append(result)
    lines = [
        f"# Benchmark suite `{suite.name}`",
        "",
        *made_by(suite, runs),
        "",
        suite.about,
        "",
        f"Protocol: every checkpoint of every run is evaluated on the same {suite.episodes} seeded deterministic "
        f"episodes (seeds {suite.eval_seed:,}-{suite.eval_seed + suite.episodes - 1:,}) as the expert and a uniformly "
        f"random policy; the threshold is {THRESHOLD_FRACTION:.0%} of the way from random to the expert (or the "
        "task's goal). Wall-clock runs from the start of training to the checkpoint file (evaluation not included); "
        "runs shared the machine's cores, so compare it within a table. CPU-hours are the training processes' "
        "CPU time (user and system; one thread each), summed over seeds; ≤: some runs predate its recording and "
        "count their wall-clock, an upper bound.",
        "",
    ]
    cost_at = len(lines)  # the page's CPU-hours go here once the tables are made
    if sum(bool(results.get(t)) for t in suite.tasks) > 1:
        lines += ["## Summary", "", "Per method: median env steps to the threshold (the share of later checkpoints "
                  "holding it; the median final return).", "", *summary_table(suite, refs, results), ""]  # fmt: skip
    if any(t.zoo_best and results.get(t.name) for t in suite.tasks.values()):
        lines += ["## Beyond the expert", "", "Per method: the median share of the gap from the expert to the zoo's best "
                  "agent that its final return closes; the median env steps to pass the expert by 3 standard errors.",
                  "", *beyond_summary(suite, refs, results), ""]  # fmt: skip
    if suite.paper_scores and results:
        out.mkdir(parents=True, exist_ok=True)
        lines += ["## The paper's score", "", "Each run's final return shifted and scaled per task so that a uniformly "
                  "random policy scores 0 and the task's best method (its mean over seeds) 1, averaged over the runs, "
                  "beside the paper's Table 1.", "", *normalised_scores(suite, refs, results, out), ""]  # fmt: skip
    table = experts_table(suite, refs, work)
    if len(table) > 2:
        lines += ["## The experts: recorded and here", "",
                  "Each expert's own record (the last evaluation in its zoo folder's `evaluations.npz`: mean ± standard "
                  "deviation over its episodes, their number in brackets) beside its score on this page's "
                  f"{suite.episodes} episodes. It differs where the gap exceeds both the recorded spread and three "
                  "standard errors.", "", *table, ""]  # fmt: skip
    out.mkdir(parents=True, exist_ok=True)
    rows: list[RunSummary] = []
    for task in suite.tasks.values():
        if not results.get(task.name):
            continue
        task_refs = refs[task.name]
        threshold = threshold_of(task, task_refs)
        lines += [f"## {task.name}", ""]
        expert = (
            f"expert `{task.expert}`: {task_refs['expert']:.1f} ± {task_refs['expert_std']:.1f}; "
            if "expert" in task_refs
            else ""
        )
        lines += [f"Env `{task.env}`; {expert}random {task_refs['random']:.1f}; threshold {threshold:.1f}.", ""]
        lines += provenance(suite.name, task, task_refs, results[task.name])
        table, summaries = task_table(task, task_refs, results[task.name])
        rows += summaries
        machines = sorted({r.get("machine", "not recorded") for r in results[task.name]})
        if len(machines) > 1:
            lines += [f"The runs of this task ran on {len(machines)} machines ({'; '.join(machines)}): compare wall-clock "
                      "only between runs of one machine (the `machine` column of the CSV).", ""]  # fmt: skip
        else:
            lines += [f"Machine: {machines[0]}.", ""]
        imitation = [r for r in results[task.name] if "expert_return_imitation_env" in r]
        lines += table + [""]
        if task.zoo_best is not None and "expert" in task_refs:
            lines += beyond_table(task, task_refs, results[task.name], suite.episodes)
        if task.note:
            lines += [task.note, ""]
        if imitation:
            lines += [
                f"imitation's runs act in its own gymnasium 0.29 (`{imitation[0]['imitation_env']}`); the expert scores "
                f"{np.median([r['expert_return_imitation_env'] for r in imitation]):.1f} there on the same seeds.",
                "",
            ]
        png = out / f"{file_stem(suite, task)}.png"
        if any(r.get("steps") for r in results[task.name]) or not png.exists():
            plot_task(task, task_refs, results[task.name], png, suite.episodes)
        lost = sorted(f"{r['method']} seed {r['seed']}" for r in results[task.name] if "summary" in r)
        if lost and any(r.get("steps") for r in results[task.name]):
            lines += [f"Not drawn (summaries only): {', '.join(lost)}.", ""]
        lines += [f"![{task.name}]({png.name})", ""]
    if rows:
        hours, bounded = cpu_hours(rows)
        lines[cost_at:cost_at] = [
            f"Training CPU-hours of the runs on this page: {'at most ' if bounded else ''}{hours:.1f}.",
            "",
        ]
    with open(out / f"{suite.name}.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(RunSummary.__dataclass_fields__))
        writer.writeheader()
        writer.writerows(asdict(r) for r in rows)
    page = out / f"{suite.name}.md"
    page.write_text("\n".join(lines).rstrip() + "\n")
    return page


def page_head(title: str, made_by: str, doc: str) -> list[str]:
    """A one-page measurement's first lines: its title, the line that says what made it, and its module's description
    (the docstring after its first paragraph)."""
    return [f"# {title}", "", made_by, "", doc.split("\n\n", 1)[1].strip(), ""]


def page_parser(module: str, doc: str, page: str) -> argparse.ArgumentParser:
    """The command line of a one-page measurement (``python -m benchmarks.<module>``), with ``--out`` defaulting to
    ``docs/benchmarks/<page>``."""
    parser = argparse.ArgumentParser(prog=f"python -m {module}", description=doc)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks" / page, help="where the page goes")
    return parser


def command_of(module: str, argv: list[str] | None) -> str:
    """The command that made a page, for its first line."""
    return f"python -m {module}" + "".join(f" {a}" for a in (argv if argv is not None else sys.argv[1:]))
