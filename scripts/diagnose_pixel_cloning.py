"""How well can the pixel learner's network copy its state expert, given a budget of frames? (issue 15's diagnosis)

    python scripts/diagnose_pixel_cloning.py --threshold 433.7            # the plate, 20k frames, 2 seeds (~15 min)
    python scripts/diagnose_pixel_cloning.py --env sb3ext/CartPolePixels-v1 --expert shipped:ppo/sb3ext-CartPole-v0_1 \
        --frames 30000 --threshold 451.2 --out docs/benchmarks/pixels_cloning_cartpole.md

Supervised behaviour cloning with every label an imitation learner could ask for, and none of its noise:

1. roll out the shipped state expert (it reads ``info["state"]``) on ``--frames`` env steps of the pixel env, its
   actions perturbed (Box: Gaussian noise of ``--noise`` half action ranges; Discrete: a random action with
   probability ``--noise``) so that the frames cover the
   states around its path, and label every stacked frame with the expert's unperturbed action;
2. train the learner's own network (SB3's ``CnnPolicy``: NatureCNN, 4 stacked 84x84 frames) to output those actions
   (the Gaussian mean, squared error), Adam at lr 2.5e-4, batch 256, holding out 10% of the frames;
3. after each of ``--epochs`` epochs: the held-out squared error relative to the actions' variance (0: perfect,
   1: no better than their mean), and the closed-loop return of the deterministic policy on the benchmark's
   evaluation episodes (seeds 50,000, ...; frames stacked as in training).

If this cannot reach the benchmark's threshold from N frames, an interactive learner given N env steps has no easy
road to it either: its labels are the same expert's, and it spends part of its steps elsewhere.
Writes ``--out`` (default ``docs/benchmarks/pixels_cloning_plate.md``).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch as th
import torch.nn.functional as F
from gymnasium import spaces
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.policies import ActorCriticCnnPolicy
from stable_baselines3.common.vec_env import VecEnv, VecFrameStack, VecTransposeImage

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import sb3ext.envs  # noqa: E402,F401  (registers the sb3ext/ ids)
from sb3ext.callbacks.evaluation import episode_returns  # noqa: E402
from sb3ext.common.expert_state import StateTracker  # noqa: E402
from sb3ext.experts import load_expert  # noqa: E402

DOCS = ROOT / "docs" / "benchmarks"
EVAL_SEED = 50_000


def pixel_env(env_id: str, n_envs: int, seed: int) -> VecEnv:
    """The learner's view, as the zoo builds it for CnnPolicy: 4 stacked frames, channels first."""
    return VecTransposeImage(VecFrameStack(make_vec_env(env_id, n_envs=n_envs, seed=seed), 4))


def collect(env_id: str, expert: object, n_frames: int, noise: float, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``n_frames`` stacked frames visited by the noisy expert, each with the expert's own action there and the
    env's state (``info["state"]``) it was rendered from."""
    env = pixel_env(env_id, 4, seed)
    tracker = StateTracker(env)
    rng = np.random.default_rng(seed)
    obs = env.reset()
    tracker.reset()
    frames, labels, states = [], [], []
    box = isinstance(env.action_space, spaces.Box)
    while len(frames) * env.num_envs < n_frames:
        state = tracker.current()
        action = expert.act(state)  # type: ignore[attr-defined]
        frames.append(obs.copy())
        labels.append(action.copy())
        states.append(state.copy())
        if box:
            half = (env.action_space.high - env.action_space.low) / 2
            noisy = action + rng.normal(0.0, noise, action.shape) * half
            action = np.clip(noisy, env.action_space.low, env.action_space.high)
        else:  # a uniformly random action with probability ``noise``
            explore = rng.random(len(action)) < noise
            action = np.where(explore, rng.integers(0, env.action_space.n, len(action)), action)
        obs, _, dones, infos = env.step(action)
        tracker.step(dones, infos)
    env.close()
    return tuple(np.concatenate(parts)[:n_frames] for parts in (frames, labels, states))  # type: ignore[return-value]


def clone(args: argparse.Namespace, expert: object, seed: int) -> list[tuple[int, float, np.ndarray]]:
    """(epoch, held-out relative error, closed-loop returns) after each epoch in ``args.epochs``."""
    th.manual_seed(seed)
    start = time.perf_counter()
    frames, actions, _ = collect(args.env, expert, args.frames, args.noise, seed)
    print(f"  seed {seed}: {len(frames):,} frames collected in {time.perf_counter() - start:.0f} s", flush=True)
    env = pixel_env(args.env, 1, seed)
    policy = ActorCriticCnnPolicy(env.observation_space, env.action_space, lambda _: args.lr)
    env.close()
    box = isinstance(policy.action_space, spaces.Box)
    x = th.as_tensor(frames)
    y = th.as_tensor(actions, dtype=th.float32 if box else th.long).reshape(len(actions), -1)
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(x))
    held, train = order[: len(x) // 10], order[len(x) // 10 :]

    def outputs(batch: th.Tensor) -> th.Tensor:  # Gaussian mean, or logits
        distribution = policy.get_distribution(batch).distribution
        return distribution.mean if box else distribution.logits

    def loss(batch: th.Tensor, target: th.Tensor) -> th.Tensor:
        out = outputs(batch)
        return F.mse_loss(out, target) if box else F.cross_entropy(out, target[:, 0])

    results = []
    for epoch in range(1, max(args.epochs) + 1):
        policy.set_training_mode(True)
        rng.shuffle(train)
        for i in range(0, len(train), 256):
            idx = th.as_tensor(train[i : i + 256])
            policy.optimizer.zero_grad()
            loss(x[idx], y[idx]).backward()
            policy.optimizer.step()
        policy.set_training_mode(False)
        with th.no_grad():
            error = loss(x[held], y[held]).item()
        relative = error / y[held].float().var(dim=0).mean().item() if box else error
        line = f"  seed {seed} epoch {epoch}: held-out {'relative squared error' if box else 'cross-entropy'} {relative:.3f}"
        if epoch in args.epochs:
            returns = episode_returns(args.env, policy, args.eval_episodes, EVAL_SEED, frame_stack=4)[0]
            results.append((epoch, relative, returns))
            line += f", closed loop {returns.mean():.1f} ± {returns.std():.1f}"
        print(line, f"({time.perf_counter() - start:.0f} s)", flush=True)
    return results


def parse_checked(parser: argparse.ArgumentParser, out: Path) -> argparse.Namespace:
    """The options this script shares with ``diagnose_pixel_state.py`` added to ``parser`` (which already has
    ``--frames`` and ``--epochs``), parsed and checked."""
    parser.add_argument("--lr", type=float, default=2.5e-4)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--eval-episodes", type=int, default=10)
    parser.add_argument("--threshold", type=float, default=None, help="the benchmark's threshold, quoted on the page")
    parser.add_argument("--out", type=Path, default=out)
    args = parser.parse_args()
    for name in ("frames", "eval_episodes"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if min(args.epochs) < 1:
        parser.error(f"--epochs must be >= 1, got {args.epochs}")
    return args


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="sb3ext/BallPlatePixels-v0")
    parser.add_argument("--expert", default="shipped:sac/sb3ext-BallPlateContinuous-v0_1")
    parser.add_argument("--frames", type=int, default=20_000, help="labelled frames (the benchmark's env steps)")
    parser.add_argument("--epochs", type=int, nargs="+", default=[15, 40], help="evaluate after these epochs")
    parser.add_argument(
        "--noise",
        type=float,
        default=0.3,
        help="roll-in action noise: half action ranges (Box), random-action probability (Discrete)",
    )
    args = parse_checked(parser, DOCS / "pixels_cloning_plate.md")
    th.set_num_threads(1)
    expert = load_expert(args.expert)
    reference = episode_returns(args.env, expert, args.eval_episodes, EVAL_SEED, observe_state=True)[0]
    print(f"{args.env}: expert {args.expert} {reference.mean():.1f} ± {reference.std():.1f}", flush=True)
    rows = [(seed, *result) for seed in args.seeds for result in clone(args, expert, seed)]

    command = "python scripts/diagnose_pixel_cloning.py " + " ".join(sys.argv[1:])
    noise_unit = "half ranges" if isinstance(expert.action_space, spaces.Box) else "random-action probability"
    lines = [
        f"# Cloning the state expert onto the pixel network: `{args.env}`",
        "",
        f"Generated by `{command.strip()}` on {time.strftime('%Y-%m-%d')}.",
        "",
        f'Supervised behaviour cloning of `{args.expert}` (it reads `info["state"]`) onto the pixel learner\'s own '
        f"`CnnPolicy`, from {args.frames:,} stacked frames that the expert visits with action noise {args.noise} "
        f"({noise_unit}), each labelled with the expert's action; Adam lr {args.lr}, batch 256, 10% held out. "
        f"Closed loop: the deterministic policy on {args.eval_episodes} evaluation episodes (seeds {EVAL_SEED:,}...), "
        "the benchmark's. See the script's docstring for what this bounds.",
        "",
        f"Expert on the same episodes: {reference.mean():.1f} ± {reference.std():.1f}."
        + (f" The benchmark's threshold: {args.threshold:.1f}." if args.threshold is not None else ""),
        "",
        "| seed | epochs | held-out error (Box: relative MSE, Discrete: CE) | closed-loop return | min | max |",
        "|---|---|---|---|---|---|",
    ]
    for seed, epoch, relative, returns in rows:
        lines.append(
            f"| {seed} | {epoch} | {relative:.3f} | {returns.mean():.1f} ± {returns.std():.1f} | {returns.min():.1f} "
            f"| {returns.max():.1f} |"
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
