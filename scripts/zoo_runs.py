"""Zoo CLI trainings with checkpoints, and their evaluation on seeded episodes (shared by the benchmark scripts).

* :func:`zoo_train` runs ``python -m rl_zoo3.train --algo <algo> --env <env>`` (the unmodified zoo, its YAML or a
  ``--conf-file``) with SB3's ``CheckpointCallback`` through the YAML ``callback`` key, which also saves each
  checkpoint's VecNormalize statistics (the zoo's ``--save-freq`` saves only the model);
* :func:`evaluate_checkpoints` evaluates every checkpoint on the same seeded deterministic episodes;
* :func:`references` measures the expert and a uniformly random policy on those episodes.

All results are cached in the run's work folder, so an interrupted benchmark resumes where it stopped.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def zoo_train(
    algo: str,
    env_id: str,
    seed: int,
    work: Path,
    timesteps: int,
    save_freq: int,
    n_envs: int,
    hyperparams: list[str] | tuple[str, ...] = (),
    conf_file: Path | None = None,
) -> dict:
    """One zoo training with a checkpoint every ``save_freq`` env steps; cached in ``work/train.json``.

    :param n_envs: the run's number of envs (the callback's ``save_freq`` counts vectorised steps)
    :param hyperparams: extra ``--hyperparams`` entries, zoo syntax (``key:value``)
    :param conf_file: a YAML file to read the hyperparameters from instead of the zoo's own
    """
    done = work / "train.json"
    if done.exists():
        return json.loads(done.read_text())  # type: ignore[no-any-return]
    work.mkdir(parents=True, exist_ok=True)
    callback = (
        f"callback:[{{'stable_baselines3.common.callbacks.CheckpointCallback': {{'save_freq': {max(1, save_freq // n_envs)},"
        f" 'save_path': '{work / 'checkpoints'}', 'save_vecnormalize': True}}}}]"
    )
    command = [
        sys.executable, "-m", "rl_zoo3.train", "--algo", algo, "--env", env_id, "--seed", str(seed),
        "-n", str(timesteps), "--eval-freq", "-1", "-f", str(work / "logs"),
        "--num-threads", "1", "--device", "cpu", "--log-interval", "-2",
        *(["--conf-file", str(conf_file)] if conf_file is not None else []),
        "--hyperparams", *hyperparams, callback,
    ]  # fmt: skip
    start = time.perf_counter()
    with open(work / "train.log", "w") as log:
        subprocess.run(
            command, check=True, stdout=log, stderr=subprocess.STDOUT, cwd=work, env={**os.environ, "OMP_NUM_THREADS": "1"}
        )
    result = {"seed": seed, "wall_s": time.perf_counter() - start, "command": " ".join(command[1:])}
    done.write_text(json.dumps(result))
    print(f"  trained {algo} {env_id} seed {seed}: {result['wall_s']:.0f} s", flush=True)
    return result


class NormalizedLearner:
    """A saved learner acting on raw observations through its checkpoint's frozen VecNormalize statistics."""

    def __init__(self, model: Any, norm: Any):
        self.model, self.norm = model, norm

    def predict(self, obs: np.ndarray, deterministic: bool = True) -> Any:
        return self.model.predict(self.norm.normalize_obs(obs) if self.norm is not None else obs, deterministic=True)


def evaluate_checkpoints(algo: str, env_id: str, work: Path, episodes: int, seed: int) -> tuple[list[int], list[float]]:
    """Mean return of every checkpoint of a run on ``episodes`` seeded episodes (``seed``, ``seed + 1`` ...);
    cached in ``work/eval.json``. The checkpoints are this benchmark's own, loaded with the zoo's algorithm class."""
    done = work / "eval.json"
    if done.exists():
        cached = json.loads(done.read_text())
        return cached["steps"], cached["returns"]
    from rl_zoo3 import ALGOS  # sb3ext's plug-in registers aggrevated and the PPO variants in it
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    from sb3ext.callbacks import episode_returns

    run_dir = work / "checkpoints"
    checkpoints = sorted(run_dir.glob("rl_model_*_steps.zip"), key=lambda p: int(p.stem.split("_")[2]))
    steps, returns = [], []
    for checkpoint in checkpoints:
        n = int(checkpoint.stem.split("_")[2])
        model = ALGOS[algo].load(checkpoint, device="cpu")
        stats = run_dir / f"rl_model_vecnormalize_{n}_steps.pkl"
        norm = VecNormalize.load(str(stats), make_vec_env(env_id, n_envs=1)) if stats.exists() else None
        episode = episode_returns(env_id, NormalizedLearner(model, norm), episodes, seed=seed)[0]
        steps.append(n)
        returns.append(float(np.mean(episode)))
        print(f"  {work.name}: {n:>7,} steps  return {returns[-1]:7.1f} ± {np.std(episode):.1f}", flush=True)
    done.write_text(json.dumps({"steps": steps, "returns": returns}))
    return steps, returns


def references(env_id: str, expert_path: Path, episodes: int, seed: int, cache: Path) -> dict[str, float]:
    """The expert and a uniformly random policy on the same seeded episodes; cached in ``cache``."""
    if cache.exists():
        return json.loads(cache.read_text())  # type: ignore[no-any-return]
    from sb3ext.callbacks import episode_returns
    from sb3ext.experts import load_expert

    expert = load_expert(expert_path, env_id=env_id)
    expert_returns, _ = episode_returns(env_id, expert, episodes, seed, expert.make_env)
    random_returns, _ = episode_returns(env_id, None, episodes, seed)
    refs = {
        "expert": float(np.mean(expert_returns)),
        "expert_std": float(np.std(expert_returns)),
        "random": float(np.mean(random_returns)),
    }
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps(refs))
    return refs
