"""The benchmark harness: ``python -m benchmarks <command>``.

    python -m benchmarks list                                  # the suites, their tasks and methods
    python -m benchmarks run classic                           # every job of a suite, then its page
    python -m benchmarks run classic --tasks Pendulum-v1 --methods aggrevated ppo --seeds 0 --jobs 2
    python -m benchmarks report classic                        # the page again from the finished runs
    python -m benchmarks references walkers                    # the expert and random measured again here

Many machines (a shared Optuna storage as the job queue; the page from any of them):

    python -m benchmarks run classic --storage postgresql://... --enqueue-only   # once
    python -m benchmarks work classic --storage postgresql://... --jobs 16        # on each machine
    python -m benchmarks report classic --storage postgresql://...               # fetch the results, write the page

Runs are resumable: a finished stage (training, each checkpoint's evaluation, the run) is not repeated, so after a
crash the same command goes on. Raw runs go to ``--work-dir`` (``bench_runs/``); pages to ``docs/benchmarks/``, with
the record of every finished run (``docs/benchmarks/runs/<suite>.json``, committed): a recorded job is not run again.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import traceback
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

from benchmarks.suite import ROOT, SUITES_FILE, Job, Suite, SuiteError, get_suite, load_suites

DEFAULT_WORK = ROOT / "bench_runs"
DEFAULT_OUT = ROOT / "docs" / "benchmarks"


def _run_one(job: Job, work: Path, command: str) -> tuple[str, str | None]:
    from benchmarks.runs import run_job

    try:
        run_job(job, work, command)
        return job.key, None
    except Exception:  # one failed run must not stop the others; reported at the end
        return job.key, traceback.format_exc(limit=3)


def run_local(jobs: list[Job], work: Path, command: str, n_jobs: int) -> list[tuple[str, str]]:
    """Run the jobs over ``n_jobs`` local processes, the largest budgets first; the failures (key, traceback)."""
    jobs = sorted(jobs, key=lambda j: -j.method.budget)
    failures = []
    with ProcessPoolExecutor(max_workers=n_jobs) as pool:
        futures = [pool.submit(_run_one, job, work, command) for job in jobs]
        for done, future in enumerate(as_completed(futures), 1):
            key, error = future.result()
            print(f"[{done}/{len(jobs)}] {key}: {'failed' if error else 'done'}", flush=True)
            if error:
                failures.append((key, error))
    return failures


def _work_queue(storage: str, suite_name: str, suites: Path, work: Path, command: str) -> int:
    from benchmarks import job_queue as queue
    from benchmarks.runs import run_job

    suite = get_suite(suite_name, suites)
    jobs = {job.key: job for job in suite.select()}
    return queue.work(queue.open_study(storage, suite_name), jobs, lambda job: run_job(job, work, command))


def _references(suite: Suite, tasks: list[str] | None, work: Path, out: Path) -> int:
    """Measure each task's expert and random policy again on this machine, beside the recorded references."""
    from benchmarks import record
    from benchmarks.runs import measure_again
    from benchmarks.suite import task_folder

    suite.select(tasks)  # checks the task names
    record.seed_work_dir(suite, out, work)
    for task in suite.tasks.values():
        if tasks and task.name not in tasks:
            continue
        cache = task_folder(work, suite.name, task.name) / "references.json"
        cached, fresh = measure_again(task, suite.episodes, suite.eval_seed, cache)
        line = f"{task.name}: recorded on {cached.get('machine', 'an unrecorded machine')}: "
        for key in ("expert", "random"):
            if key in cached:
                line += f"{key} {cached[key]:.3f} -> {fresh[key]:.3f} here; "
        print(line + f"here: {fresh['machine']} ({fresh['packages']})", flush=True)
    print(f"`python -m benchmarks report {suite.name}` puts the measurements on the page", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    suites_help = "the suites file (default: benchmarks/suites.yml)"
    commands.add_parser("list", help="the suites, their tasks and methods").add_argument(
        "--suites", type=Path, default=SUITES_FILE, help=suites_help
    )
    for name in ("run", "work", "report", "references"):
        sub = commands.add_parser(name)
        sub.add_argument("suite")
        sub.add_argument("--suites", type=Path, default=SUITES_FILE, help=suites_help)
        sub.add_argument("--work-dir", type=Path, default=DEFAULT_WORK)
        sub.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where the page goes")
        sub.add_argument("--storage", help="an Optuna storage URL used as the job queue (several machines)")
        if name in ("run", "work"):
            sub.add_argument("--jobs", type=int, default=2, help="runs at a time on this machine (one core each)")
        if name in ("run", "references"):
            sub.add_argument("--tasks", nargs="+")
        if name == "run":
            sub.add_argument("--methods", nargs="+")
            sub.add_argument("--seeds", nargs="+", type=int)
            sub.add_argument("--enqueue-only", action="store_true", help="with --storage: queue the jobs, run none")
    args = parser.parse_args(argv)
    command = "python -m benchmarks " + " ".join(map(shlex.quote, sys.argv[1:] if argv is None else argv))
    try:
        if args.command == "list":
            for suite in load_suites(args.suites).values():
                print(f"{suite.name}: seeds {list(suite.seeds)}, {suite.episodes} episodes")
                for task in suite.tasks.values():
                    methods = ", ".join(f"{m.name} {m.budget:,}" for m in task.methods.values())
                    print(f"  {task.name} ({task.env}; expert {task.expert or '-'}): {methods}")
            return 0
        suite = get_suite(args.suite, args.suites)
        if args.command == "references":
            return _references(suite, args.tasks, args.work_dir, args.out)
        failures: list[tuple[str, str]] = []
        if args.command == "run":
            from benchmarks import record

            _, recorded_runs = record.load(suite, args.out)
            every = suite.select(args.tasks, args.methods, args.seeds)
            jobs = [job for job in every if not record.recorded(job, recorded_runs)]
            if len(jobs) < len(every):
                print(f"{len(every) - len(jobs)} of {len(every)} jobs are in {record.record_path(suite, args.out)}: "
                      "not run again", flush=True)  # fmt: skip
            record.seed_work_dir(suite, args.out, args.work_dir)
            if args.storage:
                from benchmarks import job_queue as queue

                queued = queue.enqueue(queue.open_study(args.storage, suite.name), jobs)
                print(f"queued {queued} of {len(jobs)} jobs in study {queue.study_name(suite.name)!r}", flush=True)
                if args.enqueue_only:
                    return 0
            else:
                failures = run_local(jobs, args.work_dir, command, args.jobs)
        if args.command in ("run", "work") and args.storage:
            with ProcessPoolExecutor(max_workers=args.jobs) as pool:
                ran = sum(
                    pool.map(_work_queue, *zip(*[(args.storage, suite.name, args.suites, args.work_dir, command)] * args.jobs))
                )
            print(f"ran {ran} queued jobs", flush=True)
        if args.storage:
            from benchmarks import job_queue as queue

            fetched = queue.fetch(
                queue.open_study(args.storage, suite.name), {j.key: j for j in suite.select()}, args.work_dir
            )
            print(f"fetched {fetched} finished jobs from the queue", flush=True)
        if args.command != "work":
            from benchmarks.report import write_page

            print(f"wrote {write_page(suite, args.work_dir, args.out)}", flush=True)
        for key, error in failures:
            print(f"FAILED {key}:\n{error}", file=sys.stderr)
        return 1 if failures else 0
    except SuiteError as error:
        parser.error(str(error))
        return 2


if __name__ == "__main__":
    sys.exit(main())
