"""sb3ext's benchmark harness (not part of the library): suites as data (``suites.yml``), one evaluation protocol
(``runs.py``), one report format (``report.py``), local processes or an Optuna storage as the job queue
(``job_queue.py``). Usage: ``python -m benchmarks --help`` and docs/benchmarks.md."""
