"""Jobs spread over many machines through the Optuna storage that tuning already uses, as a job queue.

``enqueue`` puts each unfinished job into a study as a waiting trial (its key in the trial's user attributes);
every ``work`` process, on any machine that reaches the storage, takes waiting trials one at a time (Optuna hands
each to one worker), runs the job and stores its result in the trial. With a database storage, sb3ext's heartbeat
fails the trials of killed workers and queues them again (``sb3ext.tuning.storages``). ``fetch`` copies the results
into the local work folder for the report.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import TrialState

from benchmarks.suite import Job

RESULT_ATTR = "result"
JOB_ATTR = "job"


def study_name(suite: str) -> str:
    return f"benchmarks-{suite}"


def open_study(storage: str, suite: str) -> optuna.Study:
    from sb3ext.tuning.storages import make_storage

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna.create_study(storage=make_storage(storage), study_name=study_name(suite), load_if_exists=True)


def enqueue(study: optuna.Study, jobs: list[Job]) -> int:
    """Queue the jobs that are neither finished nor already queued or running; returns how many were queued."""
    known = {
        t.user_attrs.get(JOB_ATTR)
        for t in study.get_trials(deepcopy=False, states=(TrialState.WAITING, TrialState.RUNNING, TrialState.COMPLETE))
    }
    fresh = [job for job in jobs if job.key not in known]
    for job in fresh:
        study.enqueue_trial({}, user_attrs={JOB_ATTR: job.key})
    return len(fresh)


def work(study: optuna.Study, jobs: dict[str, Job], run: Callable[[Job], dict[str, Any]]) -> int:
    """Run queued jobs until none is waiting; returns how many this worker ran."""
    ran = 0

    def objective(trial: optuna.Trial) -> float:
        nonlocal ran
        key = trial.user_attrs.get(JOB_ATTR)
        if key is None:  # another worker took the last waiting trial between our check and our ask
            trial.set_user_attr(JOB_ATTR, "(none: the queue was empty)")
            raise optuna.TrialPruned()
        if key not in jobs:
            raise ValueError(f"queued job {key!r} is not in this suite file; known: {sorted(jobs)}")
        result = run(jobs[key])
        trial.set_user_attr(RESULT_ATTR, json.dumps(result))
        ran += 1
        return float(result["returns"][-1]) if result["returns"] else float("nan")

    def stop_when_empty(study: optuna.Study, _: Any) -> None:
        if not study.get_trials(deepcopy=False, states=(TrialState.WAITING,)):
            study.stop()

    if study.get_trials(deepcopy=False, states=(TrialState.WAITING,)):
        study.optimize(objective, callbacks=[stop_when_empty], catch=(Exception,))
    return ran


def fetch(study: optuna.Study, jobs: dict[str, Job], work_dir: Path) -> int:
    """Write every finished job's result from the study into its folder under ``work_dir``; returns how many."""
    fetched = 0
    for trial in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        key, result = trial.user_attrs.get(JOB_ATTR), trial.user_attrs.get(RESULT_ATTR)
        if key in jobs and result is not None:
            folder = jobs[key].folder(work_dir)
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "result.json").write_text(result)
            refs = folder.parent.parent / "references.json"
            if not refs.exists():
                refs.write_text(json.dumps(json.loads(result)["references"]))
            fetched += 1
    return fetched
