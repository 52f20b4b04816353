"""Can the pixel learner's network read, from its frames, the state its expert acts on? (issue 15's diagnosis)

    python scripts/diagnose_pixel_state.py                     # the plate, 20k frames, 8 epochs, 2 seeds (~10 min)

1. roll out the shipped state expert on ``--frames`` env steps of the pixel env, its actions perturbed as in
   ``diagnose_pixel_cloning.py`` (the same collector), keeping every stacked frame with the env's state
   (``info["state"]``) it was rendered from;
2. train the learner's own feature extractor (SB3's ``NatureCNN`` on 4 stacked 84x84 frames, as ``CnnPolicy``) with
   a linear head to output the standardised state, squared error, Adam at lr 2.5e-4, batch 256, 10% held out;
3. report the held-out R^2 of every state component (1: read exactly, 0: no better than its mean), and run the
   expert *on the network's estimate of the state* on the benchmark's evaluation episodes (seeds 50,000, ...).

The closed-loop return of "state estimator + expert" says whether the frames, read by this network from this many
frames, carry the state precisely enough for the expert's own control law. A pixel learner need not copy that law
(it may find one that needs less), but if the estimate cannot drive the expert, imitating the expert from these
frames has no easy road either. Writes ``--out`` (default ``docs/benchmarks/pixels_state_plate.md``).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch as th
import torch.nn.functional as F
from gymnasium import spaces
from stable_baselines3.common.torch_layers import NatureCNN

sys.path.insert(0, str(Path(__file__).resolve().parent))
from diagnose_pixel_cloning import DOCS, EVAL_SEED, ROOT, collect, parse_checked

sys.path.insert(0, str(ROOT))
from sb3ext.callbacks.evaluation import episode_returns
from sb3ext.experts import load_expert

PLATE_STATE = ("tilt x", "tilt y", "tilt rate x", "tilt rate y", "ball x", "ball y", "ball velocity x", "ball velocity y")


class EstimatedStateExpert:
    """The expert acting on the network's estimate of the state from the stacked frames (SB3's ``predict``)."""

    def __init__(self, network: th.nn.Module, mean: np.ndarray, std: np.ndarray, expert: Any):
        self.network, self.mean, self.std, self.expert = network, mean, std, expert

    def predict(self, obs: np.ndarray, state: Any = None, episode_start: Any = None, deterministic: bool = True) -> Any:
        frames = th.as_tensor(np.asarray(obs)).permute(0, 3, 1, 2).float() / 255.0  # channels last -> first
        with th.no_grad():
            estimate = self.network(frames).numpy() * self.std + self.mean
        return self.expert.act(estimate.astype(np.float32)), None


def fit(args: argparse.Namespace, expert: Any, seed: int) -> list[tuple[int, np.ndarray, np.ndarray]]:
    """(epoch, held-out R^2 per state component, closed-loop returns) after each epoch in ``args.epochs``."""
    th.manual_seed(seed)
    start = time.perf_counter()
    frames, _, states = collect(args.env, expert, args.frames, args.noise, seed)
    print(f"  seed {seed}: {len(frames):,} frames collected in {time.perf_counter() - start:.0f} s", flush=True)
    mean, std = states.mean(axis=0), states.std(axis=0) + 1e-8
    x = th.as_tensor(frames)
    y = th.as_tensor((states - mean) / std, dtype=th.float32)
    extractor = NatureCNN(spaces.Box(0, 255, tuple(frames.shape[1:]), np.uint8), features_dim=512)
    network = th.nn.Sequential(extractor, th.nn.Linear(512, states.shape[1]))
    optimizer = th.optim.Adam(network.parameters(), lr=args.lr)
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(x))
    held, train = order[: len(x) // 10], order[len(x) // 10 :]
    results = []
    for epoch in range(1, max(args.epochs) + 1):
        rng.shuffle(train)
        for i in range(0, len(train), 256):
            idx = th.as_tensor(train[i : i + 256])
            optimizer.zero_grad()
            F.mse_loss(network(x[idx].float() / 255.0), y[idx]).backward()
            optimizer.step()
        with th.no_grad():
            r2 = 1.0 - ((network(x[held].float() / 255.0) - y[held]) ** 2).mean(dim=0).numpy()
        line = f"  seed {seed} epoch {epoch}: held-out R^2 " + " ".join(f"{v:.2f}" for v in r2)
        if epoch in args.epochs:
            driver = EstimatedStateExpert(network, mean, std, expert)
            returns = episode_returns(args.env, driver, args.eval_episodes, EVAL_SEED, frame_stack=4)[0]
            results.append((epoch, r2, returns))
            line += f", expert on the estimate {returns.mean():.1f} ± {returns.std():.1f}"
        print(line, f"({time.perf_counter() - start:.0f} s)", flush=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="sb3ext/BallPlatePixels-v0")
    parser.add_argument("--expert", default="shipped:sac/sb3ext-BallPlateContinuous-v0_1")
    parser.add_argument("--frames", type=int, default=20_000, help="frames with their states (the benchmark's env steps)")
    parser.add_argument("--epochs", type=int, nargs="+", default=[8], help="evaluate after these epochs")
    parser.add_argument("--noise", type=float, default=0.3, help="roll-in action noise (half action ranges)")
    args = parse_checked(parser, DOCS / "pixels_state_plate.md")
    th.set_num_threads(1)
    expert = load_expert(args.expert)
    if not isinstance(expert.action_space, spaces.Box):
        parser.error(f"--expert {args.expert} acts in {expert.action_space}: this diagnosis is for Box experts")
    reference = episode_returns(args.env, expert, args.eval_episodes, EVAL_SEED, observe_state=True)[0]
    random = episode_returns(args.env, None, args.eval_episodes, EVAL_SEED)[0]
    print(f"{args.env}: expert {reference.mean():.1f} ± {reference.std():.1f}, random {random.mean():.1f}", flush=True)
    rows = [(seed, *result) for seed in args.seeds for result in fit(args, expert, seed)]

    n_state = len(rows[0][2])
    names = PLATE_STATE if args.env.startswith("sb3ext/BallPlate") and n_state == len(PLATE_STATE) else None
    names = names or tuple(f"state[{i}]" for i in range(n_state))
    command = "python scripts/diagnose_pixel_state.py " + " ".join(sys.argv[1:])
    lines = [
        f"# Reading the state from the frames: `{args.env}`",
        "",
        f"Generated by `{command.strip()}` on {time.strftime('%Y-%m-%d')}.",
        "",
        f"The pixel learner's feature extractor (NatureCNN, 4 stacked 84x84 frames) with a linear head, trained to "
        f"output the env's state from {args.frames:,} stacked frames that `{args.expert}` visits with action noise "
        f"{args.noise} (half ranges); Adam lr {args.lr}, batch 256, 10% held out. Then the expert acts on the "
        f"network's estimate of the state, on the benchmark's {args.eval_episodes} evaluation episodes (seeds "
        f"{EVAL_SEED:,}...). See the script's docstring for what this bounds.",
        "",
        f"On the same episodes: the expert on the true state {reference.mean():.1f} ± {reference.std():.1f}, a random "
        f"policy {random.mean():.1f}."
        + (f" The benchmark's threshold: {args.threshold:.1f}." if args.threshold is not None else ""),
        "",
        "Held-out R^2 per state component (1: read exactly, 0: no better than its mean):",
        "",
        "| seed | epochs | " + " | ".join(names) + " | expert on the estimate | min | max |",
        "|---" * (len(names) + 5) + "|",
    ]
    for seed, epoch, r2, returns in rows:
        lines.append(
            f"| {seed} | {epoch} | "
            + " | ".join(f"{v:.2f}" for v in r2)
            + f" | {returns.mean():.1f} ± {returns.std():.1f} | {returns.min():.1f} | {returns.max():.1f} |"
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
