"""Train the experts that sb3ext ships: SAC on Pendulum-v1 (the embedded default) and on the continuous plate.

Each is trained with the unmodified zoo (for Pendulum-v1 its tuned SAC hyperparameters; for
``sb3ext/BallPlateContinuous-v0`` sb3ext's ``hyperparams/sac.yml``; a 64-64 network, fixed seed, CPU), so the
result has the zoo layout (``<Env>.zip`` + ``<Env>/config.yml``) like every Hub checkpoint, and is copied to
``sb3ext/experts/sac/<Env>_1/``. Then it is evaluated and the score written beside it (``evaluation.yml``).
Pendulum takes about 3 minutes on 2 cores, the plate about 10.

    python scripts/train_embedded_expert.py [--env Pendulum-v1] [--timesteps 20000] [--seed 0]
    python scripts/train_embedded_expert.py --env sb3ext/BallPlateContinuous-v0
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: env id -> default SAC training steps
EXPERTS = {"Pendulum-v1": 20_000, "sb3ext/BallPlateContinuous-v0": 50_000}


def target(env_id: str) -> Path:
    """The shipped expert's folder, named as the zoo names runs (``sb3ext/X-v0`` -> ``sb3ext-X-v0``)."""
    from sb3ext.experts.references import SHIPPED_ROOT

    return SHIPPED_ROOT / "sac" / f"{env_id.replace('/', '-')}_1"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="Pendulum-v1", choices=list(EXPERTS))
    parser.add_argument("--timesteps", type=int, default=None, help="SAC training steps (default: per env)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--eval-episodes", type=int, default=20)
    parser.add_argument("--evaluate-only", action="store_true", help="only re-evaluate the shipped expert")
    args = parser.parse_args()
    timesteps = EXPERTS[args.env] if args.timesteps is None else args.timesteps
    if not args.evaluate_only:
        train(args.env, timesteps, args.seed)
    evaluate(args.env, timesteps, args.seed, args.eval_episodes)


def train(env_id: str, timesteps: int, seed: int) -> None:
    name = env_id.replace("/", "-")  # the zoo's file and folder names
    folder = target(env_id)
    with tempfile.TemporaryDirectory() as tmp:
        command = [
            sys.executable, "-m", "rl_zoo3.train", "--algo", "sac", "--env", env_id,
            "-n", str(timesteps), "--seed", str(seed), "--eval-freq", "-1",
            "--device", "cpu", "--num-threads", "1", "-f", tmp, "--log-interval", "5",
            # the network of the zoo's published Pendulum expert: keeps the shipped zip small (~0.3 MB)
            "--hyperparams", "policy_kwargs:dict(net_arch=[64, 64])",
        ]  # fmt: skip
        print("Running:", " ".join(command), flush=True)
        subprocess.run(command, check=True)
        run = Path(tmp) / "sac" / f"{name}_1"
        if folder.exists():
            shutil.rmtree(folder)
        (folder / name).mkdir(parents=True)
        shutil.copyfile(run / f"{name}.zip", folder / f"{name}.zip")
        for file in ("config.yml", "args.yml"):
            shutil.copyfile(run / name / file, folder / name / file)


def evaluate(env_id: str, timesteps: int, seed: int, eval_episodes: int) -> None:
    import gymnasium as gym
    import numpy as np
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.monitor import Monitor

    import sb3ext.envs  # noqa: F401 - registers the sb3ext ids
    from sb3ext.experts import load_expert

    folder = target(env_id)
    expert = load_expert(folder)
    env = Monitor(gym.make(env_id))
    env.reset(seed=10_000)
    returns, _ = evaluate_policy(expert, env, n_eval_episodes=eval_episodes, return_episode_rewards=True)
    mean, std = float(np.mean(returns)), float(np.std(returns))
    (folder / "evaluation.yml").write_text(
        f"env_id: {env_id}\nalgo: sac\ntimesteps: {timesteps}\nseed: {seed}\n"
        f"eval_episodes: {eval_episodes}\nmean_return: {mean:.2f}\nstd_return: {std:.2f}\n"
    )
    print(f"Expert in {folder}: mean return {mean:.1f} +/- {std:.1f} over {eval_episodes} episodes")


if __name__ == "__main__":
    main()
