"""Loads hostile checkpoints one after another in a fresh process and reports, per fixture, as JSON lines:
the error, the time, the peak memory, whether a payload ran and whether any class of the process changed.

Usage: ``python -m tests.hostile_worker FOLDER...`` (run by tests/test_hostile_checkpoints.py).
"""

from __future__ import annotations

import json
import resource
import sys
import time
from pathlib import Path


def _classes() -> list[type]:
    import gymnasium.spaces
    import numpy as np
    import torch as th
    from stable_baselines3.common import utils
    from stable_baselines3.common.noise import VectorizedActionNoise
    from stable_baselines3.common.running_mean_std import RunningMeanStd
    from stable_baselines3.common.vec_env.vec_normalize import VecNormalize

    return [
        utils.ConstantSchedule,
        utils.FloatSchedule,
        utils.LinearSchedule,
        RunningMeanStd,
        VecNormalize,
        VectorizedActionNoise,
        gymnasium.spaces.Box,
        gymnasium.spaces.Discrete,
        gymnasium.spaces.Space,
        th.nn.Parameter,
        th.Tensor,
        th.nn.Module,
        np.ndarray,
        dict,
        list,
    ]


def fingerprint() -> dict[str, dict[str, int]]:
    """Identity of every attribute of the classes a hostile pickle could aim at."""
    return {f"{c.__module__}.{c.__qualname__}": {k: id(v) for k, v in vars(c).items()} for c in _classes()}


def main(folders: list[str]) -> None:
    from sb3ext.common.serialization import UnsafeObjectError
    from sb3ext.experts import load_expert

    # a guard for the machine: a hostile load that escaped the caps fails here instead of swapping
    vm_kb = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmSize:"))
    limit = vm_kb * 1024 + (4 << 30)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    marker = Path(folders[0]).parents[2] / "MARKER" if folders else None
    baseline = fingerprint()
    for folder in folders:
        start = time.perf_counter()
        error, message = None, ""
        try:
            load_expert(folder)
        except Exception as exc:  # the report says which
            # the two kinds of refusal: hostile (UnsafeObjectError) and malformed (ValueError and its subclasses)
            error = (
                "UnsafeObjectError"
                if isinstance(exc, UnsafeObjectError)
                else "ValueError"
                if isinstance(exc, ValueError)
                else type(exc).__name__
            )
            message = f"{type(exc).__name__}: {exc}"
        elapsed = time.perf_counter() - start
        now = fingerprint()
        changed = sorted(
            f"{cls}.{name}"
            for cls, attrs in now.items()
            for name in set(attrs) ^ set(baseline[cls])
            | {n for n in attrs if n in baseline[cls] and attrs[n] != baseline[cls][n]}
        )
        report = {
            "folder": folder,
            "error": error,
            "message": message,
            "seconds": elapsed,
            "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "marker": bool(marker and marker.exists()),
            "changed": changed,
        }
        print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
