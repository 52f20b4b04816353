"""Shared by the benchmark scripts: one training through the unmodified zoo CLI, resumable, with its curve.

Two protocols:

* :func:`train_through_zoo`: the zoo's own EvalCallback during training (the curve comes from the zoo);
* :func:`zoo_train` + :func:`evaluate_checkpoints`: SB3's ``CheckpointCallback`` through the YAML ``callback``
  key (with each checkpoint's VecNormalize statistics), every checkpoint evaluated afterwards on the same seeded
  deterministic episodes as the expert and a random policy (:func:`references`). Cached per run folder.
"""

from __future__ import annotations

import ast
import csv
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np


def train_through_zoo(
    algo: str,
    env_id: str,
    seed: int,
    budget: int,
    eval_freq: int,
    folder: Path,
    eval_episodes: int = 10,
    extra: list[str] | None = None,
) -> dict:
    """``python -m rl_zoo3.train`` with the zoo's EvalCallback; returns (and caches in folder/result.json) the curve.

    A finished run is not repeated: delete its folder to run it again.
    """
    result_file = folder / "result.json"
    if result_file.exists():
        return json.loads(result_file.read_text())
    folder.mkdir(parents=True, exist_ok=True)
    command = [
        sys.executable, "-m", "rl_zoo3.train", "--algo", algo, "--env", env_id, "--seed", str(seed),
        "-n", str(budget), "--eval-freq", str(eval_freq), "--eval-episodes", str(eval_episodes), "--n-eval-envs", "1",
        "-f", str(folder / "logs"), "--num-threads", "1", "--device", "cpu", "--log-interval", "-2", *(extra or []),
    ]  # fmt: skip
    start = time.perf_counter()
    with open(folder / "train.log", "w") as log:
        subprocess.run(command, check=True, stdout=log, stderr=subprocess.STDOUT, cwd=folder)
    wall = time.perf_counter() - start
    evaluations = np.load(next((folder / "logs" / algo).glob(f"{env_id.replace('/', '-')}_*/evaluations.npz")))
    result = {
        "algo": algo,
        "env_id": env_id,
        "seed": seed,
        "wall_s": wall,
        "budget": budget,
        "timesteps": evaluations["timesteps"].tolist(),
        "returns": evaluations["results"].mean(axis=1).tolist(),
        "lengths": evaluations["ep_lengths"].mean(axis=1).tolist(),
    }
    result_file.write_text(json.dumps(result))
    print(f"  {algo:10s} {env_id:26s} seed {seed}: {wall:6.1f} s", flush=True)
    return result


def save_figure(fig, ax, ylabel: str, title: str, path: Path) -> Path:  # type: ignore[no-untyped-def]
    """The benchmarks' common figure finish: axis labels, grid, legend, PNG at 110 dpi, figure closed."""
    import matplotlib.pyplot as plt

    ax.set_xlabel("environment steps")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


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


def evaluate_checkpoints(
    algo: str, env_id: str, work: Path, episodes: int, seed: int, frame_stack: int = 0
) -> tuple[list[int], list[float]]:
    """Mean return of every checkpoint of a run on ``episodes`` seeded episodes (``seed``, ``seed + 1`` ...);
    cached in ``work/eval.json`` with its episodes and seed (a cache of other episodes is evaluated again). The
    checkpoints are this benchmark's own, loaded with the zoo's algorithm class.

    :param frame_stack: the run's ``frame_stack`` (its observations are stacked the same way)
    """
    cached = evaluation_cache(work, episodes, seed)
    if cached is not None:
        return cached["steps"], cached["returns"]
    done = work / "eval.json"
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
        episode = episode_returns(env_id, NormalizedLearner(model, norm), episodes, seed=seed, frame_stack=frame_stack)[0]
        steps.append(n)
        returns.append(float(np.mean(episode)))
        print(f"  {work.name}: {n:>7,} steps  return {returns[-1]:7.1f} ± {np.std(episode):.1f}", flush=True)
    done.write_text(json.dumps({"episodes": episodes, "seed": seed, "steps": steps, "returns": returns}))
    return steps, returns


def evaluation_cache(work: Path, episodes: int, seed: int) -> dict | None:
    """The run's cached checkpoint evaluation (``work/eval.json``) if it was made on ``episodes`` episodes from
    ``seed``; else None (a cache written before the file recorded them counts as another evaluation)."""
    done = work / "eval.json"
    if not done.exists():
        return None
    cached = json.loads(done.read_text())
    return cached if (cached.get("episodes"), cached.get("seed")) == (episodes, seed) else None  # type: ignore[no-any-return]


def references(
    env_id: str, expert_path: Path | str, episodes: int, seed: int, cache: Path, observe_state: bool = False
) -> dict[str, float]:
    """The expert and a uniformly random policy on the same seeded episodes; cached in ``cache``.

    :param observe_state: the expert is a state expert acting on the env's ``info["state"]`` (a pixel env)
    """
    if cache.exists():
        return json.loads(cache.read_text())  # type: ignore[no-any-return]
    from sb3ext.callbacks import episode_returns
    from sb3ext.experts import load_expert

    if observe_state:
        expert = load_expert(expert_path)
        expert_returns, _ = episode_returns(env_id, expert, episodes, seed, observe_state=True)
    else:
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


def decorate_curve_axes(
    ax: Any, refs: dict[str, float], threshold: float, title: str, eval_episodes: int, threshold_label: str = "threshold"
) -> None:
    """Expert, threshold and random lines, labels, grid and legend of a learning-curve plot."""
    ax.axhline(refs["expert"], color="tab:green", ls="--", label=f"expert ({refs['expert']:.0f})")
    ax.axhline(threshold, color="gray", ls="-.", label=f"{threshold_label} ({threshold:.0f})")
    ax.axhline(refs["random"], color="tab:red", ls=":", label=f"random ({refs['random']:.0f})")
    ax.set_xlabel("environment steps")
    ax.set_ylabel(f"mean return, {eval_episodes} seeded episodes")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")


def parse_policy_kwargs(value: Any) -> dict[str, Any]:
    """The zoo's ``"dict(key=literal, ...)"`` policy_kwargs string as a dict (literals only)."""
    if value is None or isinstance(value, dict):
        return dict(value or {})
    call = ast.parse(value, mode="eval").body
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "dict"):
        raise ValueError(f"policy_kwargs: expected dict(...), got {value!r}")
    return {str(kw.arg): ast.literal_eval(kw.value) for kw in call.keywords}


def yaml_aggrevated(env_id: str, expert: Any, seed: int = 0, **overrides: Any) -> Any:
    """AggreVaTeD in this process with the ``hyperparams/aggrevated.yml`` entry of ``env_id`` (its ``normalize`` as
    a VecNormalize of the observations), the given expert and overrides, on CPU."""
    import yaml
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    from sb3ext.algos.aggrevated import AggreVaTeD

    root = Path(__file__).resolve().parent.parent
    entry = dict(yaml.safe_load((root / "hyperparams" / "aggrevated.yml").read_text())[env_id])
    for key in ("expert", "n_timesteps", "normalize", "policy"):
        entry.pop(key, None)
    n_envs = int(entry.pop("n_envs", 1))
    entry["policy_kwargs"] = parse_policy_kwargs(entry.get("policy_kwargs"))
    for key in ("learning_rate", "clip_range"):  # the zoo's schedule syntax: lin_<initial value>
        if isinstance(entry.get(key), str) and entry[key].startswith("lin_"):
            from rl_zoo3.utils import linear_schedule

            entry[key] = linear_schedule(float(entry[key][len("lin_") :]))
    env = VecNormalize(make_vec_env(env_id, n_envs=n_envs, seed=seed), norm_reward=False)
    return AggreVaTeD("MlpPolicy", env, expert=expert, seed=seed, device="cpu", **{**entry, **overrides})


def merge_earlier_runs(
    results: list[dict[str, Any]], curves_file: Path, rows_file: Path, tasks: Any, ints: tuple[str, ...]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The runs of a benchmark invocation, plus the (task, method) pairs it did not run, read back from the files a
    page was written from: their curves from ``curves_file`` (a JSON list of runs, re-plotted), or else only their
    summary rows from ``rows_file`` (a CSV), returned apart and marked ``carried`` (no curve to plot). A partial
    re-run (``--tasks ...``, ``--methods ...``) so keeps the rest of the page.

    :param tasks: the task names the benchmark still has (others are dropped)
    :param ints: the CSV columns read back as integers; the other numeric ones as floats (empty: None)
    """
    ran = {(r["task"], r["method"]) for r in results}
    earlier = json.loads(curves_file.read_text()) if curves_file.exists() else []
    kept = [r for r in earlier if r["task"] in tasks and (r["task"], r["method"]) not in ran]
    have = ran | {(r["task"], r["method"]) for r in kept}
    carried = []
    if rows_file.exists():
        with open(rows_file, newline="") as handle:
            for row in csv.DictReader(handle):
                if row["task"] in tasks and (row["task"], row["method"]) not in have:
                    carried.append({**parse_csv_row(row, ints), "carried": True})
    return results + kept, carried


def parse_csv_row(row: dict[str, str], ints: tuple[str, ...]) -> dict[str, Any]:
    """A benchmark CSV row with its numbers back: ``ints`` as integers, other numbers as floats, empty as None."""
    out: dict[str, Any] = {}
    for key, value in row.items():
        if key in ("task", "method"):
            out[key] = value
        elif value in ("", None):
            out[key] = None
        else:
            out[key] = int(float(value)) if key in ints else float(value)
    return out
