"""AggreVaTeD with a value-only (PPO) expert through the unmodified zoo, e.g. BipedalWalkerHardcore-v3.

    python scripts/benchmark_value_expert.py                       # BipedalWalkerHardcore-v3, 300k steps
    python scripts/benchmark_value_expert.py --env BipedalWalker-v3 --expert ppo/BipedalWalker-v3_1 -n 200000

Runs ``python -m rl_zoo3.train --algo aggrevated --env <env> --hyperparams expert:<expert>`` with the
defaults of ``hyperparams/aggrevated.yml`` and the zoo's EvalCallback (deterministic episodes), measures
the expert's and a uniformly random policy's return with the same number of episodes, and writes
``docs/benchmarks/aggrevated_value_<env>.{png,md}``. Raw zoo logs go to ``--work-dir``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def returns_of(policy, env_id: str, episodes: int, seed: int) -> list[float]:
    import gymnasium as gym

    env = gym.make(env_id)
    env.action_space.seed(seed)
    totals = []
    for episode in range(episodes):
        obs, _ = env.reset(seed=seed + episode)
        total, done = 0.0, False
        while not done:
            action = env.action_space.sample() if policy is None else policy.predict(obs[None])[0][0]
            obs, reward, terminated, truncated, _ = env.step(action)
            total += float(reward)
            done = terminated or truncated
        totals.append(total)
    return totals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="BipedalWalkerHardcore-v3")
    parser.add_argument("--expert", default="ppo/BipedalWalkerHardcore-v3_1", help="relative to --experts")
    parser.add_argument("--experts", type=Path, default=ROOT.parent / "shared" / "experts")
    parser.add_argument("-n", "--timesteps", type=int, default=300_000)
    parser.add_argument("--eval-freq", type=int, default=20_000)
    parser.add_argument("--eval-episodes", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--hyperparams", nargs="*", default=[], help="extra zoo hyperparameters, e.g. expert_gae_lambda:0.95 (zoo syntax)"
    )
    parser.add_argument("--tag", default="", help="suffix of the output files and work folder")
    parser.add_argument("--work-dir", type=Path, default=ROOT / "bench_runs" / "value_expert")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks")
    args = parser.parse_args()
    expert_path = args.experts / args.expert
    suffix = f"_{args.tag}" if args.tag else ""
    work = args.work_dir / f"{args.env}-{args.seed}{suffix}"
    work.mkdir(parents=True, exist_ok=True)
    args.out.mkdir(parents=True, exist_ok=True)

    command = [
        sys.executable, "-m", "rl_zoo3.train", "--algo", "aggrevated", "--env", args.env, "--seed", str(args.seed),
        "-n", str(args.timesteps), "--eval-freq", str(args.eval_freq), "--eval-episodes", str(args.eval_episodes),
        "-f", str(work / "logs"), "--num-threads", "1", "--device", "cpu", "--hyperparams", f"expert:'{expert_path}'",
        *args.hyperparams,
    ]  # fmt: skip
    print("Running:", " ".join(command), flush=True)
    start = time.perf_counter()
    with open(work / "train.log", "w") as log:
        subprocess.run(command, check=True, stdout=log, stderr=subprocess.STDOUT)
    wall = time.perf_counter() - start
    evaluations = np.load(sorted((work / "logs" / "aggrevated").glob(f"{args.env}_*/evaluations.npz"))[-1])
    steps, results = evaluations["timesteps"], evaluations["results"]

    from sb3ext.experts import load_expert

    expert = load_expert(expert_path)
    expert_returns = returns_of(expert, args.env, args.eval_episodes, 5000)
    random_returns = returns_of(None, args.env, 2 * args.eval_episodes, 6000)
    expert_mean, random_mean = float(np.mean(expert_returns)), float(np.mean(random_returns))

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    means, stds = results.mean(axis=1), results.std(axis=1)
    ax.plot(steps, means, marker="o", ms=3, label="AggreVaTeD learner (value-only PPO expert)")
    ax.fill_between(steps, means - stds, means + stds, alpha=0.2)
    ax.axhline(expert_mean, color="tab:green", ls="--", label=f"PPO expert ({expert_mean:.0f})")
    ax.axhline(random_mean, color="tab:red", ls=":", label=f"random policy ({random_mean:.0f})")
    ax.set_xlabel("environment steps")
    ax.set_ylabel(f"evaluation return ({args.eval_episodes} deterministic episodes)")
    ax.set_title(f"AggreVaTeD on {args.env} with a value-only expert")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    png = args.out / f"aggrevated_value_{args.env}{suffix}.png"
    fig.savefig(png, dpi=110)

    command_text = ("python scripts/benchmark_value_expert.py " + " ".join(sys.argv[1:])).strip()
    lines = [
        f"# AggreVaTeD on {args.env} with a value-only expert",
        "",
        f"Generated by `{command_text}` on {time.strftime('%Y-%m-%d')} "
        f"({wall / 60:.1f} min wall-clock including evaluations).",
        "",
        f"Expert: `{args.expert}` (PPO + VecNormalize: V* only, no Q*), estimator A* = r + γ V*(s') − V*(s) on the",
        "learner's own steps. Learner: `hyperparams/aggrevated.yml` defaults through `python -m rl_zoo3.train`"
        + (f", with {' '.join(args.hyperparams)}." if args.hyperparams else "."),
        "",
        f"* random policy: {random_mean:.1f} (mean of {len(random_returns)} episodes)",
        f"* expert: {expert_mean:.1f} ({', '.join(f'{r:.0f}' for r in expert_returns)})",
        f"* learner, final evaluation: {means[-1]:.1f} ± {stds[-1]:.1f}; "
        f"best: {means.max():.1f} at {int(steps[means.argmax()]):,} steps",
        "",
        "| env steps | learner return (mean ± std) |",
        "|---|---|",
        *[f"| {int(s):,} | {m:.1f} ± {d:.1f} |" for s, m, d in zip(steps, means, stds)],
        "",
        f"![{args.env}]({png.name})",
    ]
    (args.out / f"aggrevated_value_{args.env}{suffix}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
