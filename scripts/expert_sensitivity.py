"""How close a copy of an expert must be to hold the expert's level: copies with perturbed weights, on the harness's
seeded episodes.

    python -m scripts.expert_sensitivity ../shared/experts/a2c/Walker2d-v3_1 Walker2d-v5 --scales 0.02 0.1 --copies 12 \\
        --learner bench_runs/any_expert/a2c-Walker2d/aggrevated/seed0/checkpoints/rl_model_100000_steps.zip

Each copy multiplies every weight of the expert's policy by ``1 + scale * z`` (``z`` standard normal, seeded per
copy), so it errs as a clone does: systematically, state by state, not by fresh noise at each step. For each copy it
prints the mean absolute gap between its deterministic actions and the expert's on the states it visits, and its mean
return on the benchmark harness's episodes (``--episodes`` from seed ``--seed``); for each scale, how many copies
reach the harness's threshold (90% of the way from a uniformly random policy to the expert). With ``--learner`` (a
zoo checkpoint or final model, with its VecNormalize statistics where the zoo saves them), the same for the learner:
its gap then says how often a copy that close holds the threshold: near 100% for an expert whose return is smooth in
its actions, near 50% for one on a knife edge, which only a learner past it can hold.
The `aggrevated` history page (2026-11-29, fourth) used it.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np
import torch as th
from rl_zoo3 import ALGOS  # sb3ext's plug-in registers its algorithms in it

from benchmarks.games import scored_env
from benchmarks.runs import load_saved_learner
from sb3ext.callbacks.evaluation import episode_returns
from sb3ext.experts import Expert, load_expert


class GapRecorder:
    """Acts as ``copy`` (an expert's copy or a saved learner: anything with SB3's ``predict`` on raw observations)
    and records the mean absolute gap of its actions to ``reference``'s on the same observations."""

    def __init__(self, copy: Any, reference: Expert):
        self.copy, self.reference = copy, reference
        self.gaps: list[float] = []

    def predict(self, obs: np.ndarray, deterministic: bool = True) -> tuple[np.ndarray, Any]:
        action, state = self.copy.predict(obs, deterministic=deterministic)
        expert_action, _ = self.reference.predict(obs, deterministic=deterministic)
        self.gaps.append(float(np.abs(np.asarray(action, float) - np.asarray(expert_action, float)).mean()))
        return action, state


def perturb(expert: Expert, original: dict[str, th.Tensor], scale: float, seed: int) -> None:
    """Every floating weight of ``expert``'s policy set to its ``original`` value times ``1 + scale * z``."""
    generator = th.Generator().manual_seed(seed)
    with th.no_grad():
        for name, param in expert.policy.state_dict().items():
            if param.dtype.is_floating_point:
                noise = th.randn(param.shape, generator=generator, dtype=param.dtype)
                param.copy_(original[name] * (1 + scale * noise))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("expert", help="a zoo folder or .zip")
    parser.add_argument("env")
    parser.add_argument("--scales", type=float, nargs="+", default=[0.02, 0.1, 0.25])
    parser.add_argument("--copies", type=int, default=12, help="copies per scale")
    parser.add_argument("--episodes", type=int, default=30)
    parser.add_argument("--seed", type=int, default=50_000)
    parser.add_argument("--learner", type=Path, default=None, help="a saved learner's .zip, to measure alike")
    parser.add_argument("--algo", default="aggrevated", help="the saved learner's algorithm (the zoo's name)")
    args = parser.parse_args()
    if args.copies < 1 or args.episodes < 1:
        parser.error("--copies and --episodes must be at least 1")
    if args.learner is not None and not args.learner.is_file():
        parser.error(f"--learner {args.learner}: no such file")
    if args.algo not in ALGOS:
        parser.error(f"--algo {args.algo!r}: not one of the zoo's algorithms ({', '.join(sorted(ALGOS))})")
    reference = load_expert(args.expert, env_id=args.env)
    copy = load_expert(args.expert, env_id=args.env)
    original = {name: value.clone() for name, value in copy.policy.state_dict().items()}

    def make(env_id: str) -> Any:
        return scored_env(env_id, reference.wrap_env)

    expert_mean = float(np.mean(episode_returns(args.env, reference, args.episodes, args.seed, make)[0]))
    random_mean = float(np.mean(episode_returns(args.env, None, args.episodes, args.seed, make)[0]))
    threshold = random_mean + 0.9 * (expert_mean - random_mean)
    print(f"{args.expert} on {args.env}: expert {expert_mean:.1f}, random {random_mean:.1f}, threshold {threshold:.1f} "
          f"({args.episodes} episodes from seed {args.seed})")  # fmt: skip
    if args.learner is not None:
        recorder = GapRecorder(load_saved_learner(args.learner, args.algo, args.env, make), reference)
        mean = float(np.mean(episode_returns(args.env, recorder, args.episodes, args.seed, make)[0]))
        print(f"learner {args.learner}: action gap {np.mean(recorder.gaps):.4f}, return {mean:.1f}")
    print("scale | copy | action gap | return")
    for scale in args.scales:
        means, gaps = [], []
        for index in range(args.copies):
            perturb(copy, original, scale, seed=index)
            recorder = GapRecorder(copy, reference)
            means.append(float(np.mean(episode_returns(args.env, recorder, args.episodes, args.seed, make)[0])))
            gaps.append(float(np.mean(recorder.gaps)))
            print(f"{scale:g} | {index} | {gaps[-1]:.4f} | {means[-1]:.1f}", flush=True)
        held = sum(mean >= threshold for mean in means)
        print(f"scale {scale:g}: action gap {min(gaps):.4f} to {max(gaps):.4f} (median {np.median(gaps):.4f}); return "
              f"{min(means):.1f} to {max(means):.1f}; {held} of {args.copies} copies at or above the threshold")  # fmt: skip


if __name__ == "__main__":
    main()
