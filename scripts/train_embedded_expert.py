"""Train the expert that sb3ext ships as its embedded default (SAC on Pendulum-v1).

It is trained with the unmodified zoo (its tuned SAC hyperparameters, a 64-64 network, fixed seed, CPU), so the
result has the zoo layout (``<Env>.zip`` + ``<Env>/config.yml``) like every Hub checkpoint, and is
copied to ``sb3ext/experts/sac/Pendulum-v1_1/``. Then it is evaluated and the score written beside
it (``evaluation.yml``). Takes about 3 minutes on 2 cores.

    python scripts/train_embedded_expert.py [--timesteps 20000] [--seed 0]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ENV_ID = "Pendulum-v1"
TARGET = ROOT / "sb3ext" / "experts" / "sac" / f"{ENV_ID}_1"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--timesteps", type=int, default=20_000, help="SAC training steps (zoo default: 20000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--eval-episodes", type=int, default=20)
    parser.add_argument("--evaluate-only", action="store_true", help="only re-evaluate the shipped expert")
    args = parser.parse_args()
    if not args.evaluate_only:
        train(args.timesteps, args.seed)
    evaluate(args.timesteps, args.seed, args.eval_episodes)


def train(timesteps: int, seed: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        command = [
            sys.executable, "-m", "rl_zoo3.train", "--algo", "sac", "--env", ENV_ID,
            "-n", str(timesteps), "--seed", str(seed), "--eval-freq", "-1",
            "--device", "cpu", "--num-threads", "1", "-f", tmp, "--log-interval", "5",
            # the network of the zoo's published Pendulum expert: keeps the shipped zip small (~0.3 MB)
            "--hyperparams", "policy_kwargs:dict(net_arch=[64, 64])",
        ]  # fmt: skip
        print("Running:", " ".join(command), flush=True)
        subprocess.run(command, check=True)
        run = Path(tmp) / "sac" / f"{ENV_ID}_1"
        if TARGET.exists():
            shutil.rmtree(TARGET)
        (TARGET / ENV_ID).mkdir(parents=True)
        shutil.copyfile(run / f"{ENV_ID}.zip", TARGET / f"{ENV_ID}.zip")
        for name in ("config.yml", "args.yml"):
            shutil.copyfile(run / ENV_ID / name, TARGET / ENV_ID / name)


def evaluate(timesteps: int, seed: int, eval_episodes: int) -> None:
    import gymnasium as gym
    import numpy as np
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.monitor import Monitor

    from sb3ext.common.experts import load_expert

    expert = load_expert(TARGET)
    env = Monitor(gym.make(ENV_ID))
    env.reset(seed=10_000)
    returns, _ = evaluate_policy(expert, env, n_eval_episodes=eval_episodes, return_episode_rewards=True)
    mean, std = float(np.mean(returns)), float(np.std(returns))
    (TARGET / "evaluation.yml").write_text(
        f"env_id: {ENV_ID}\nalgo: sac\ntimesteps: {timesteps}\nseed: {seed}\n"
        f"eval_episodes: {eval_episodes}\nmean_return: {mean:.2f}\nstd_return: {std:.2f}\n"
    )
    print(f"Expert in {TARGET}: mean return {mean:.1f} +/- {std:.1f} over {eval_episodes} episodes")


if __name__ == "__main__":
    main()
