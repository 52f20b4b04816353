"""Loads hostile checkpoints one after another in a fresh process and reports, per fixture, as JSON lines:
the error, the time, the peak memory, whether a payload ran and whether any class of the process changed.

Usage: ``python -m tests.hostile_worker [--broken-loader] MARKER FOLDER...`` (run by
tests/test_hostile_checkpoints.py). ``MARKER`` is the file the fixtures' payloads write (``hostile.marker_path``).
A marker that appears during a load is renamed to ``MARKER.<folder's fixture name>``: the evidence stays, and each
report names only the load that ran it. ``--broken-loader`` is the control: before each real load it imports the
module a zip's ``env`` field names, from the folder beside it (what SB3's load does through ``gym.make``), so a
payload runs and the real loader still refuses; the tests show their checks catch it.
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


def broken_load(folder: str) -> None:
    """The control's loader: runs the env module a checkpoint names, then the real (refusing) load."""
    import importlib
    import zipfile

    from sb3ext.experts import load_expert

    for archive in Path(folder).glob("*.zip"):
        with zipfile.ZipFile(archive) as opened:
            env = json.loads(opened.read("data")).get("env")
        if isinstance(env, str) and ":" in env:
            sys.path.insert(0, folder)
            try:
                importlib.import_module(env.split(":")[0])
            finally:
                sys.path.remove(folder)
    load_expert(folder)


def main(arguments: list[str]) -> None:
    from sb3ext.common.serialization import UnsafeObjectError
    from sb3ext.experts import load_expert

    broken = arguments[:1] == ["--broken-loader"]
    marker_argument, *folders = arguments[1:] if broken else arguments
    marker = Path(marker_argument)
    if marker.name != "MARKER" or marker.exists():
        raise SystemExit(f"usage: the marker must be a file named MARKER that does not exist yet, got {marker}")
    load = broken_load if broken else load_expert

    # a guard for the machine: a hostile load that escaped the caps fails here instead of swapping
    vm_kb = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmSize:"))
    limit = vm_kb * 1024 + (4 << 30)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    baseline = fingerprint()
    for folder in folders:
        start, cpu_start = time.perf_counter(), time.process_time()
        error, message = None, ""
        try:
            load(folder)
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
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu_start
        ran = marker.is_file()
        if ran:  # keep the evidence, named after this load, and leave the marker free for the next one
            marker.rename(marker.with_name(f"{marker.name}.{Path(folder).parents[1].name}"))
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
            "cpu_seconds": cpu,
            "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "marker": ran,
            "changed": changed,
        }
        print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
