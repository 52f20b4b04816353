"""Train the experts that sb3ext ships, with the unmodified zoo.

* ``sac`` on ``Pendulum-v1`` (the embedded default): the zoo's tuned SAC hyperparameters, a 64-64 network;
* ``sac`` on ``sb3ext/BallPlateContinuous-v0``: sb3ext's ``hyperparams/sac.yml``, a 64-64 network;
* ``tqc`` on ``MountainCarContinuous-v0``: the zoo's own ``tqc.yml`` entry, unchanged (50k steps, gamma 0.9999,
  gSDE). An *imperfect* expert on purpose: it is lazy (some episodes never reach the flag) and its critic is
  almost flat across actions; AggreVaTeD's tests and the beyond-the-expert benchmark use it.
* ``sac`` on ``Pendulum-v1``, run 2 (``--index 2``): the same recipe stopped after 2,800 steps, mid-way through
  learning to swing up: an *imperfect* expert (about -400 against the finished expert's -150) whose critic already
  ranks actions better than its policy acts; the beyond-the-expert benchmark starts from it.
* ``ppo`` on ``sb3ext/CartPole-v0``: sb3ext's ``hyperparams/ppo.yml`` (the zoo's tuned CartPole-v1 settings), 100k
  steps: the state expert of the pixel cart-pole (``sb3ext/CartPolePixels-v1`` gives it the state in
  ``info["state"]``); about 2 minutes.
* ``ppo`` on ``BreakoutNoFrameskip-v4``: the zoo's own ``ppo.yml`` Atari entry, unchanged, 600k steps (about 37
  minutes on one core): the atari benchmark's expert. Its CNN is large (1.7M parameters), so the shipped file keeps
  the weights as float16 (they load into the float32 network; the file is the expert, measured as it is) and no
  optimizer moments, which acting never reads: 3.9 MB instead of 20.7. Scored as the benchmark scores games (all
  lives, sticky actions: ``benchmarks/games.py``) on seeds 50,000 and up. Another CPU trains another expert from the
  same seed, which is why it is shipped.

Fixed seed, CPU, so the result has the zoo layout (``<Env>.zip`` + ``<Env>/config.yml``) like every Hub
checkpoint, and is copied to ``sb3ext/experts/<algo>/<Env>_1/``. Then it is evaluated and the score written
beside it (``evaluation.yml``). Pendulum takes about 3 minutes on 2 cores, the plate about 10, the TQC
mountain car about 30 (one core).

    python scripts/train_embedded_expert.py [--env Pendulum-v1] [--timesteps 20000] [--seed 0]
    python scripts/train_embedded_expert.py --env Pendulum-v1 --index 2
    python scripts/train_embedded_expert.py --env sb3ext/BallPlateContinuous-v0
    python scripts/train_embedded_expert.py --algo tqc --env MountainCarContinuous-v0
    python scripts/train_embedded_expert.py --algo ppo --env sb3ext/CartPole-v0
    python scripts/train_embedded_expert.py --algo ppo --env BreakoutNoFrameskip-v4 --eval-episodes 30 [--run FOLDER]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
#: (algo, env id, run index) -> (default training steps, extra zoo --hyperparams)
SMALL_NET = ("policy_kwargs:dict(net_arch=[64, 64])",)  # the network of the zoo's Pendulum expert: a ~0.3 MB zip
EXPERTS: dict[tuple[str, str, int], tuple[int, tuple[str, ...]]] = {
    ("sac", "Pendulum-v1", 1): (20_000, SMALL_NET),
    ("sac", "Pendulum-v1", 2): (2_800, SMALL_NET),  # imperfect on purpose: stopped while learning to swing up
    ("sac", "sb3ext/BallPlateContinuous-v0", 1): (50_000, SMALL_NET),
    ("tqc", "MountainCarContinuous-v0", 1): (50_000, ()),  # the zoo's tqc.yml as it is (its net is 64-64)
    ("ppo", "sb3ext/CartPole-v0", 1): (100_000, ()),  # hyperparams/ppo.yml: the zoo's tuned CartPole-v1 settings
    ("ppo", "BreakoutNoFrameskip-v4", 1): (600_000, ()),  # the zoo's ppo.yml atari entry as it is
}
#: experts shipped in half precision (their networks are large): see the module's docstring
HALF_PRECISION = {("ppo", "BreakoutNoFrameskip-v4", 1)}


def target(env_id: str, algo: str = "sac", index: int = 1) -> Path:
    """The shipped expert's folder, named as the zoo names runs (``sb3ext/X-v0`` -> ``sb3ext-X-v0_<index>``)."""
    from sb3ext.experts.references import SHIPPED_ROOT

    return SHIPPED_ROOT / algo / f"{env_id.replace('/', '-')}_{index}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--algo", default="sac", choices=sorted({algo for algo, _, _ in EXPERTS}))
    parser.add_argument("--env", default="Pendulum-v1", choices=sorted({env for _, env, _ in EXPERTS}))
    parser.add_argument("--index", type=int, default=1, help="the run's index: the folder <algo>/<env>_<index>")
    parser.add_argument("--timesteps", type=int, default=None, help="training steps (default: per expert)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--eval-episodes", type=int, default=20)
    parser.add_argument("--evaluate-only", action="store_true", help="only re-evaluate the shipped expert")
    parser.add_argument("--run", type=Path, help="ship this finished zoo run (logs/<algo>/<Env>_1) instead of training")
    args = parser.parse_args()
    if (args.algo, args.env, args.index) not in EXPERTS:
        known = ", ".join(f"--algo {a} --env {e} --index {i}" for a, e, i in EXPERTS)
        parser.error(f"no shipped expert {args.algo} on {args.env} with index {args.index}; known: {known}")
    default_steps, extra = EXPERTS[(args.algo, args.env, args.index)]
    timesteps = default_steps if args.timesteps is None else args.timesteps
    if not args.evaluate_only:
        if args.run is not None:
            ship(args.run, target(args.env, args.algo, args.index), args.env.replace("/", "-"))
        else:
            train(args.algo, args.env, args.index, timesteps, args.seed, extra)
        if (args.algo, args.env, args.index) in HALF_PRECISION:
            compact(args.algo, args.env, args.index)
    evaluate(args.algo, args.env, args.index, timesteps, args.seed, args.eval_episodes)


def train(algo: str, env_id: str, index: int, timesteps: int, seed: int, extra: tuple[str, ...]) -> None:
    name = env_id.replace("/", "-")  # the zoo's file and folder names
    folder = target(env_id, algo, index)
    with tempfile.TemporaryDirectory() as tmp:
        command = [
            sys.executable, "-m", "rl_zoo3.train", "--algo", algo, "--env", env_id,
            "-n", str(timesteps), "--seed", str(seed), "--eval-freq", "-1",
            "--device", "cpu", "--num-threads", "1", "-f", tmp, "--log-interval", "5",
            *(["--hyperparams", *extra] if extra else []),
        ]  # fmt: skip
        print("Running:", " ".join(command), flush=True)
        subprocess.run(command, check=True)
        ship(Path(tmp) / algo / f"{name}_1", folder, name)


def ship(run: Path, folder: Path, name: str) -> None:
    """Copy a finished zoo run's final model, ``config.yml`` and ``args.yml`` into the shipped ``folder``."""
    if folder.exists():
        shutil.rmtree(folder)
    (folder / name).mkdir(parents=True)
    shutil.copyfile(run / f"{name}.zip", folder / f"{name}.zip")
    for file in ("config.yml", "args.yml"):
        shutil.copyfile(run / name / file, folder / name / file)


def compact(algo: str, env_id: str, index: int) -> None:
    """Rewrite the shipped zip with float16 weights and a fresh optimizer (no moments): half the size and less; the
    network loads it as float32. Prints how often the greedy action changes on frames of the expert's own games."""
    from rl_zoo3 import ALGOS

    path = target(env_id, algo, index) / f"{env_id.replace('/', '-')}.zip"
    model = ALGOS[algo].load(path, device="cpu")  # a checkpoint this script has just trained
    before = path.stat().st_size
    frames = _own_frames(model, env_id)
    greedy = model.predict(frames, deterministic=True)[0]
    model.policy.half()
    model.policy.optimizer = model.policy.optimizer_class(model.policy.parameters(), lr=model.lr_schedule(1.0))
    model.save(path)
    again = ALGOS[algo].load(path, device="cpu").predict(frames, deterministic=True)[0]
    print(
        f"{path}: {before / 1e6:.1f} MB -> {path.stat().st_size / 1e6:.1f} MB; the greedy action changes on "
        f"{np.mean(again != greedy):.1%} of {len(frames)} frames of its own play"
    )


def _own_frames(model: Any, env_id: str, n: int = 2000) -> np.ndarray:
    """``n`` observations of ``model`` playing ``env_id`` in its own wrappers (the zoo's Atari vec env)."""
    import ale_py
    import gymnasium as gym
    from stable_baselines3.common.env_util import make_atari_env
    from stable_baselines3.common.vec_env import VecFrameStack

    gym.register_envs(ale_py)
    env = VecFrameStack(make_atari_env(env_id, n_envs=1, seed=0), n_stack=4)
    obs, frames = env.reset(), []
    for _ in range(n):
        frames.append(obs[0])
        obs = env.step(model.predict(obs, deterministic=False)[0])[0]
    return np.stack(frames)


def evaluate(algo: str, env_id: str, index: int, timesteps: int, seed: int, eval_episodes: int) -> None:
    import gymnasium as gym
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.monitor import Monitor

    import sb3ext.envs  # noqa: F401 - registers the sb3ext ids
    from sb3ext.callbacks import episode_returns
    from sb3ext.experts import load_expert

    folder = target(env_id, algo, index)
    expert = load_expert(folder)
    if expert.frame_stack:  # an Atari game, scored as the atari benchmark scores it, on its seeds
        sys.path.insert(0, str(ROOT))
        from benchmarks.games import scored_env

        make_game = lambda game: scored_env(game, expert.wrap_env)  # noqa: E731
        returns = episode_returns(env_id, expert, eval_episodes, 50_000, make_game, expert.frame_stack)[0]
    else:
        env = Monitor(gym.make(env_id))
        env.reset(seed=10_000)
        returns, _ = evaluate_policy(expert, env, n_eval_episodes=eval_episodes, return_episode_rewards=True)
    mean, std = float(np.mean(returns)), float(np.std(returns))
    (folder / "evaluation.yml").write_text(
        f"env_id: {env_id}\nalgo: {algo}\ntimesteps: {timesteps}\nseed: {seed}\n"
        f"eval_episodes: {eval_episodes}\nmean_return: {mean:.2f}\nstd_return: {std:.2f}\n"
    )
    print(f"Expert in {folder}: mean return {mean:.1f} +/- {std:.1f} over {eval_episodes} episodes")


if __name__ == "__main__":
    main()
