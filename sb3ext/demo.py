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

import numpy as np

from sb3ext.experts.references import PENDULUM_EXPERT, SHIPPED_ROOT

EMBEDDED_EXPERT = SHIPPED_ROOT / PENDULUM_EXPERT


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
    from rl_zoo3.exp_manager import ExperimentManager

    from sb3ext import zoo
    from sb3ext.callbacks import ExpertGapEvalCallback, episode_returns
    from sb3ext.experts import load_expert

    zoo.register()  # idempotent: the interpreter-start hook normally did it
    th.set_num_threads(1)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    print(f"[1/4] Loading the expert from {args.expert}", flush=True)
    expert = load_expert(args.expert, env_id=args.env)
    expert_returns, _ = episode_returns(args.env, expert, 20, 10_000 + args.seed, expert.make_env)
    expert_stats = (float(np.mean(expert_returns)), float(np.std(expert_returns)))
    # The zoo's own machinery reads hyperparams/aggrevated.yml (n_envs, normalize, policy, ...), builds the envs
    # and the model, and creates the evaluation callback from the YAML `callback:` syntax.
    evaluation = {
        "env_id": args.env,
        "expert": str(args.expert),
        "expert_return": expert_stats[0],
        "reference_seed": 10_000 + args.seed,
        "eval_seed": 10_000 + args.seed,
        "n_eval_episodes": args.eval_episodes,
        "deterministic": True,
        "log_path": str(out),
        "verbose": 0,
    }
    # the run folder's args.yml is written from these: the zoo's replay scripts read `env_kwargs` from it
    run_args = argparse.Namespace(**vars(args), algo="aggrevated", env_kwargs=None)
    manager = ExperimentManager(
        run_args,
        "aggrevated",
        args.env,
        str(out / "logs"),
        n_timesteps=args.timesteps,
        eval_freq=-1,
        hyperparams={"expert": str(args.expert), "callback": [{"sb3ext.callbacks.ExpertGapEvalCallback": evaluation}]},
        seed=args.seed,
        log_interval=-1,
        verbose=0,
        device="cpu",
        show_progress=sys.stdout.isatty(),
    )
    results = manager.setup_experiment()
    assert results is not None
    model, _ = results
    callback = next(c for c in manager.callbacks if isinstance(c, ExpertGapEvalCallback))
    callback.eval_freq = max(1, args.eval_freq // manager.n_envs)  # callback calls count vectorised steps
    callback.measure_references()
    assert callback.random_return is not None
    random_return, threshold = callback.random_return, callback.threshold
    print(f"      expert {expert_stats[0]:.1f} ± {expert_stats[1]:.1f}, random policy {random_return:.1f} (20 episodes each)")

    print(
        f"[2/4] Training AggreVaTeD for {args.timesteps} env steps ({manager.n_envs} envs), evaluating every {args.eval_freq}"
    )
    start = time.perf_counter()
    manager.learn(model)
    elapsed = time.perf_counter() - start
    manager.save_trained_model(model)
    steps = np.asarray(callback.evaluations_timesteps)
    results_array = np.asarray(callback.evaluations_results, dtype=float)
    means, stds = results_array.mean(axis=1), results_array.std(axis=1)

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
    print(f"      {out / (stem + '.png')}\n      {out / (stem + '.csv')}\n      {manager.save_path} (the zoo's run folder)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
