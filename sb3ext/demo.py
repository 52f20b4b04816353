"""sb3ext's main job: AggreVaTeD learns Pendulum-v1 from the shipped SAC expert, offline.

    python -m sb3ext.demo [--timesteps 4000] [--seed 0] [--out demo_output] [--expert PATH] [--env Pendulum-v1]

It evaluates the expert and a uniformly random policy, trains AggreVaTeD with the default
hyperparameters of ``hyperparams/aggrevated.yml`` while evaluating the learner every
``--eval-freq`` env steps (deterministic actions), then prints a table of the learner's return
against the expert's and writes ``<out>/aggrevated_<env>.png`` and ``<out>/aggrevated_<env>.csv``.
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from sb3ext.experts.references import PENDULUM_EXPERT, SHIPPED_ROOT

EMBEDDED_EXPERT = SHIPPED_ROOT / PENDULUM_EXPERT

# Zoo-only keys of a hyperparameter entry, handled here rather than by the constructor.
_ZOO_KEYS = {"n_envs", "n_timesteps", "policy", "expert", "normalize", "env_wrapper", "frame_stack", "callback"}


def default_hyperparams(env_id: str) -> dict[str, Any]:
    """The entry of ``hyperparams/aggrevated.yml`` for ``env_id`` (zoo keys included)."""
    import yaml

    from sb3ext.common.resources import hyperparams_path

    entries = yaml.safe_load(hyperparams_path("aggrevated").read_text())
    if env_id not in entries:
        raise ValueError(f"No AggreVaTeD hyperparameters for {env_id!r}; available: {', '.join(entries)}")
    return dict(entries[env_id])


def plot(out_png: Path, env_id: str, steps: np.ndarray, means: np.ndarray, stds: np.ndarray,
         expert: tuple[float, float], random_return: float, threshold: float) -> None:  # fmt: skip
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    ax.plot(steps, means, marker="o", ms=3, label="AggreVaTeD learner (deterministic)")
    ax.fill_between(steps, means - stds, means + stds, alpha=0.2)
    ax.axhline(expert[0], color="tab:green", ls="--", label=f"expert ({expert[0]:.0f} ± {expert[1]:.0f})")
    ax.axhspan(expert[0] - expert[1], expert[0] + expert[1], color="tab:green", alpha=0.08)
    ax.axhline(random_return, color="tab:red", ls=":", label=f"random policy ({random_return:.0f})")
    ax.axhline(threshold, color="gray", ls="-.", lw=0.8, label="90% of random → expert")
    ax.set_xlabel("environment steps (learner + expert roll-in)")
    ax.set_ylabel("episode return")
    ax.set_title(f"AggreVaTeD on {env_id}")
    ax.legend(loc="lower right", fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out_png, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="Pendulum-v1", help="environment id (default: Pendulum-v1)")
    parser.add_argument("--expert", default=str(EMBEDDED_EXPERT), help="expert zoo folder or .zip (default: shipped SAC)")
    parser.add_argument("--timesteps", type=int, default=4000, help="AggreVaTeD env steps (default: 4000)")
    parser.add_argument("--eval-freq", type=int, default=256, help="evaluate every N env steps (default: 256)")
    parser.add_argument("--eval-episodes", type=int, default=5, help="episodes per evaluation (default: 5)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="demo_output", help="output folder for the PNG and CSV")
    args = parser.parse_args(argv)
    for name in ("timesteps", "eval_freq", "eval_episodes"):
        if getattr(args, name) <= 0:
            parser.error(f"--{name.replace('_', '-')} must be positive, got {getattr(args, name)}")

    import torch as th
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    from sb3ext.algos.aggrevated import AggreVaTeD
    from sb3ext.callbacks import ExpertGapEvalCallback, episode_returns
    from sb3ext.experts import load_expert

    th.set_num_threads(1)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    hyperparams = default_hyperparams(args.env)
    n_envs = int(hyperparams.get("n_envs", 1))
    kwargs = {k: v for k, v in hyperparams.items() if k not in _ZOO_KEYS}

    print(f"[1/4] Loading the expert from {args.expert}", flush=True)
    expert = load_expert(args.expert, env_id=args.env)
    eval_env = make_vec_env(args.env, n_envs=1, seed=10_000 + args.seed)
    env = make_vec_env(args.env, n_envs=n_envs, seed=args.seed)
    if hyperparams.get("normalize"):
        env = VecNormalize(env, norm_reward=False)
        eval_env = VecNormalize(eval_env, training=False, norm_reward=False)
    expert_returns, _ = episode_returns(args.env, expert, 20, 10_000 + args.seed, expert.make_env)
    callback = ExpertGapEvalCallback(
        eval_env,
        env_id=args.env,
        expert=expert,
        expert_return=float(np.mean(expert_returns)),
        reference_seed=10_000 + args.seed,
        eval_freq=max(1, args.eval_freq // n_envs),
        n_eval_episodes=args.eval_episodes,
        deterministic=True,
        log_path=str(out),
        verbose=0,
    )
    callback.measure_references()
    assert callback.expert_return is not None and callback.random_return is not None
    random_return, threshold = callback.random_return, callback.threshold
    expert_stats = (callback.expert_return, float(np.std(expert_returns)))
    print(f"      expert {expert_stats[0]:.1f} ± {expert_stats[1]:.1f}, random policy {random_return:.1f} (20 episodes each)")

    print(f"[2/4] Training AggreVaTeD for {args.timesteps} env steps ({n_envs} envs), evaluating every {args.eval_freq}")
    model = AggreVaTeD(hyperparams.get("policy", "MlpPolicy"), env, expert=expert, seed=args.seed, **kwargs)
    start = time.perf_counter()
    model.learn(args.timesteps, callback=callback, progress_bar=sys.stdout.isatty())
    elapsed = time.perf_counter() - start
    steps = np.asarray(callback.evaluations_timesteps)
    results = np.asarray(callback.evaluations_results, dtype=float)
    means, stds = results.mean(axis=1), results.std(axis=1)

    print(f"[3/4] Learner vs expert ({elapsed:.1f} s of training)")
    print(f"      {'env steps':>9} | {'learner':>9} | {'expert':>8} | gap closed")
    span = expert_stats[0] - random_return
    for step, mean in zip(steps, means):
        closed = 100.0 * (mean - random_return) / span if span else float("nan")
        print(f"      {step:>9d} | {mean:>9.1f} | {expert_stats[0]:>8.1f} | {closed:6.1f} %")
    reached = callback.threshold_crossed_at
    verdict = f"after {reached} env steps" if reached is not None else f"not within {args.timesteps} env steps"
    print(
        f"      90% of the way from random ({random_return:.0f}) to expert ({expert_stats[0]:.0f}) = {threshold:.0f}: "
        f"{verdict}"
    )

    print("[4/4] Writing results")
    stem = f"aggrevated_{args.env.replace('/', '_')}"
    with open(out / f"{stem}.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["env_steps", "learner_mean", "learner_std", "expert_mean", "expert_std", "random_mean"])
        for step, mean, std in zip(steps, means, stds):
            writer.writerow(
                [
                    int(step),
                    f"{mean:.2f}",
                    f"{std:.2f}",
                    f"{expert_stats[0]:.2f}",
                    f"{expert_stats[1]:.2f}",
                    f"{random_return:.2f}",
                ]
            )
    plot(out / f"{stem}.png", args.env, steps, means, stds, expert_stats, random_return, threshold)
    model.save(out / f"{stem}_model.zip")
    print(f"      {out / (stem + '.png')}\n      {out / (stem + '.csv')}\n      {out / (stem + '_model.zip')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
