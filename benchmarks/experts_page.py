"""Every shared zoo expert, seen as it was trained: ``python -m benchmarks.experts_page`` (writes
``docs/benchmarks/experts.md``).

For each expert folder of the shared experts: its own record (the last evaluation of its zoo folder's
``evaluations.npz``) beside its score here, on the env and the seeded episodes of the benchmark task that uses it (the
task's recorded references: ``docs/benchmarks/runs/<suite>.json``). An expert no suite uses is measured here on the same
protocol (30 seeded episodes from 50,000, on the newest registered version of its env that it fits), and kept in
``docs/benchmarks/runs/experts.json``. They differ where the gap exceeds both the recorded spread and three standard
errors; the reason, measured, is the task's ``as_trained`` in ``benchmarks/suites.yml``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from benchmarks.report import command_of, page_head, page_parser, recorded_level
from benchmarks.suite import ROOT, Task, experts_folder, load_suites

#: the harness's protocol for an expert no suite uses
EPISODES, SEED = 30, 50_000


def shared_experts() -> list[str]:
    """Every expert folder of the shared experts, as ``<algo>/<Env>_<n>``."""
    root = experts_folder()
    return sorted(f"{p.parent.name}/{p.name}" for p in root.glob("*/*_[0-9]*") if p.is_dir())


def task_references() -> dict[str, tuple[Task, dict[str, Any], int]]:
    """For each expert a suite uses: (the task, its recorded references, the suite's episodes); ``any_expert``'s
    first, then the other suites."""
    found: dict[str, tuple[Task, dict[str, Any], int]] = {}
    suites = load_suites()
    for name in ["any_expert", *sorted(s for s in suites if s != "any_expert")]:
        record = ROOT / "docs" / "benchmarks" / "runs" / f"{name}.json"
        refs = json.loads(record.read_text())["references"] if record.exists() else {}
        for task in suites[name].tasks.values():
            if task.expert and task.expert not in found and "expert" in refs.get(task.name, {}):
                found[task.expert] = (task, refs[task.name], suites[name].episodes)
    return found


def newest_fitting_env(expert: Any) -> str:
    """The newest registered version of the expert's env family whose spaces it fits (through its wrappers)."""
    import gymnasium as gym

    from sb3ext.experts.expert import import_env_packages

    import_env_packages()
    family = re.sub(r"-v\d+$", "", expert.env_id or "")
    versions = sorted((k for k in gym.registry if re.fullmatch(re.escape(family) + r"-v\d+", k)),
                      key=lambda k: int(k.rsplit("-v", 1)[1]), reverse=True)  # fmt: skip
    for env_id in versions:
        try:
            env = expert.make_env(env_id)
        except Exception:  # a version that cannot be built here (mujoco-py's -v3) does not fit
            continue
        fits = expert.fits(env.observation_space) and env.action_space == expert.action_space
        env.close()
        if fits:
            return env_id
    raise ValueError(f"{expert.source}: no registered version of {family} fits it")


def measure(folder: str, cache: Path) -> dict[str, Any]:
    """The expert's score on :data:`EPISODES` seeded episodes of its newest fitting env (cached)."""
    measured = json.loads(cache.read_text()) if cache.exists() else {}
    if folder not in measured:
        import numpy as np

        from sb3ext.callbacks import episode_returns
        from sb3ext.experts import load_expert

        expert = load_expert(experts_folder() / folder)
        env_id = newest_fitting_env(expert)
        returns, _ = episode_returns(env_id, expert, EPISODES, SEED, expert.make_env)
        measured[folder] = {"env": env_id, "expert": float(np.mean(returns)), "expert_std": float(np.std(returns))}
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text(json.dumps(measured, indent=1, sort_keys=True) + "\n")
    return measured[folder]  # type: ignore[no-any-return]


def rows(cache: Path) -> tuple[list[str], list[str]]:
    from sb3ext.experts.recorded import beyond_noise

    tasks = task_references()
    lines = ["| expert | env here | recorded | here | differs | where |", "|---|---|---|---|---|---|"]
    why = []
    for folder in shared_experts():
        if folder in tasks:
            task, refs, episodes = tasks[folder]
            env, where = task.env, f"task `{task.name}`"
        else:
            refs, episodes, task = measure(folder, cache), EPISODES, None
            env, where = refs["env"], "measured here (no suite uses it)"
        recorded = recorded_level(str(experts_folder() / folder))
        differs = "" if recorded is None else "no"
        if recorded is not None and beyond_noise(recorded, refs["expert"], refs["expert_std"], episodes):
            differs = "above" if refs["expert"] > recorded.mean else "below"
        cell = "—" if recorded is None else f"{recorded.mean:,.1f} ± {recorded.std:,.1f} ({recorded.episodes})"
        lines.append(f"| `{folder}` | {env} | {cell} | {refs['expert']:,.1f} ± {refs['expert_std']:,.1f} ({episodes}) | "
                     f"{differs} | {where} |")  # fmt: skip
        if task is not None and task.as_trained:
            why.append(f"- `{folder}` ({differs}): {task.as_trained}")
        elif differs in ("above", "below"):
            why.append(f"- `{folder}` ({differs}): not diagnosed yet.")
    return lines, why


def main(argv: list[str] | None = None) -> int:
    parser = page_parser("benchmarks.experts_page", __doc__, "experts.md")
    args = parser.parse_args(argv)
    table, why = rows(ROOT / "docs" / "benchmarks" / "runs" / "experts.json")
    lines = [
        *page_head(
            "Every shared expert: recorded and here", f"Made by `{command_of('benchmarks.experts_page', argv)}`.", __doc__
        ),
        "Recorded and here: mean ± standard deviation of the episode returns (episodes in brackets).",
        "",
        *table,
        "",
        "Why they differ:",
        "",
        *why,
        "",
    ]
    args.out.write_text("\n".join(lines))
    print(args.out.read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
