"""The committed record of a suite's finished runs: ``docs/benchmarks/runs/<suite>.json``.

Raw runs (checkpoints, logs) stay in the work dir, which is not committed. Writing a page copies every finished
run's result (its curve, wall-clock, machine and command) and its task's references into the record, so a fresh
clone has every run its pages show: ``report`` redraws them, and ``run`` skips the recorded jobs and starts only
the missing ones. A run recorded before the record existed may carry its summary only (``summary``: its row of the
page's CSV and ``later``, the number of checkpoints from its crossing on); its curve is not drawn.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchmarks.suite import Job, Suite, task_folder


def record_path(suite: Suite, out: Path) -> Path:
    return out / "runs" / f"{suite.name}.json"


def run_key(result: dict[str, Any]) -> str:
    return f"{result['task']}/{result['method']}/{result['seed']}"


def load(suite: Suite, out: Path) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """The recorded references (per task) and results (per ``task/method/seed``); empty where none are recorded."""
    path = record_path(suite, out)
    if not path.exists():
        return {}, {}
    record = json.loads(path.read_text())
    return record["references"], record["runs"]


def save(suite: Suite, out: Path, refs: dict[str, dict[str, Any]], runs: dict[str, dict[str, Any]]) -> None:
    """The record, one run per line; a run of a task or method no longer in the suite is dropped."""
    kept = {
        key: result
        for key, result in sorted(runs.items())
        if result["task"] in suite.tasks and result["method"] in suite.tasks[result["task"]].methods
    }
    refs = {task: refs[task] for task in sorted(refs) if task in suite.tasks}
    path = record_path(suite, out)
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [f"  {json.dumps(key)}: {json.dumps(result, sort_keys=True)}" for key, result in kept.items()]
    path.write_text(
        '{\n"references": ' + json.dumps(refs, indent=1, sort_keys=True) + ',\n"runs": {\n' + ",\n".join(lines) + "\n}}\n"
    )


def recorded(job: Job, runs: dict[str, dict[str, Any]]) -> bool:
    """Whether the job has a recorded run at its method's budget (one at another budget is run again, and replaced)."""
    result = runs.get(f"{job.task.name}/{job.method.name}/{job.seed}")
    return result is not None and int(result["budget"]) == job.method.budget


def seed_work_dir(suite: Suite, out: Path, work: Path) -> None:
    """Each recorded task's references into the work dir (``references.json``), so new runs reuse them."""
    refs, _ = load(suite, out)
    for task, values in refs.items():
        cache = task_folder(work, suite.name, task) / "references.json"
        if not cache.exists():
            cache.parent.mkdir(parents=True, exist_ok=True)
            cache.write_text(json.dumps(values))
