"""What an off-policy stage costs per env step on this CPU, lever by lever: ``python -m benchmarks.beyond_cost``
(writes ``docs/benchmarks/beyond_cost.md``).

The stage that is to take a learner past its expert is built from SB3's and sb3-contrib's off-policy algorithms
(issue 78). Its cost is set by a few levers: the algorithm (SAC's twin critics, TQC's five, TD3's actor updated
every second step, CrossQ's batch-normalised critics without targets), the width of the networks, the minibatch,
the updates per decision (``train_freq`` and ``gradient_steps``), n-step returns (SB3's ``NStepReplayBuffer``) and
action repeat (rl_zoo3's ``FrameSkip``: one decision, and one update, per ``skip`` env steps). Each configuration
learns on BipedalWalkerHardcore-v3 for ``--steps`` env steps after its replay buffer holds 1,000 transitions, on one
torch thread; the page gives the CPU seconds (``time.process_time``) per 1,000 env steps, the hours of one core that
1M env steps take, and the ratio to the zoo's own TQC settings measured in the same run. Timings on a shared machine
are noisy: compare the ratios.
"""

from __future__ import annotations

import platform
import time
from pathlib import Path
from typing import Any

from benchmarks.report import command_of, page_head, page_parser

ENV = "BipedalWalkerHardcore-v3"
#: name -> (algorithm, action repeat, settings): the zoo's TQC first (the reference), then one lever at a time
CONFIGS: dict[str, tuple[str, int, dict[str, Any]]] = {
    "zoo TQC (400-300, 5 critics, 1 update per step)": ("tqc", 1, {"policy_kwargs": {"net_arch": [400, 300]}}),
    "TQC 256-256": ("tqc", 1, {"policy_kwargs": {"net_arch": [256, 256]}}),
    "SAC 400-300": ("sac", 1, {"policy_kwargs": {"net_arch": [400, 300]}}),
    "SAC 256-256": ("sac", 1, {"policy_kwargs": {"net_arch": [256, 256]}}),
    "SAC 128-128": ("sac", 1, {"policy_kwargs": {"net_arch": [128, 128]}}),
    "SAC 256-256, minibatch 128": ("sac", 1, {"policy_kwargs": {"net_arch": [256, 256]}, "batch_size": 128}),
    "SAC 256-256, 3-step returns": ("sac", 1, {"policy_kwargs": {"net_arch": [256, 256]}, "n_step": 3}),
    "SAC 256-256, 1 update per 2 steps": ("sac", 1, {"policy_kwargs": {"net_arch": [256, 256]}, "train_freq": 2}),
    "SAC 256-256, 1 update per 4 steps": ("sac", 1, {"policy_kwargs": {"net_arch": [256, 256]}, "train_freq": 4}),
    "SAC 256-256, action repeat 2": ("sac", 2, {"policy_kwargs": {"net_arch": [256, 256]}}),
    "SAC 256-256, action repeat 4": ("sac", 4, {"policy_kwargs": {"net_arch": [256, 256]}}),
    "SAC 128-128, action repeat 4": ("sac", 4, {"policy_kwargs": {"net_arch": [128, 128]}}),
    "TD3 256-256 (actor every 2nd update)": ("td3", 1, {"policy_kwargs": {"net_arch": [256, 256]}}),
    "TD3 256-256, action repeat 2": ("td3", 2, {"policy_kwargs": {"net_arch": [256, 256]}}),
    "CrossQ (its defaults)": ("crossq", 1, {}),
}


def build(algo: str, repeat: int, settings: dict[str, Any]) -> Any:
    """The model on ``ENV`` (wrapped in ``FrameSkip(repeat)``), 1,000 transitions in its buffer, not yet updated."""
    import gymnasium as gym
    from rl_zoo3.wrappers import FrameSkip
    from sb3_contrib import TQC, CrossQ
    from stable_baselines3 import SAC, TD3
    from stable_baselines3.common.buffers import NStepReplayBuffer

    env = gym.make(ENV)
    env = FrameSkip(env, skip=repeat) if repeat > 1 else env
    settings = dict(settings)
    n_step = settings.pop("n_step", 1)
    if n_step > 1:
        settings.update(replay_buffer_class=NStepReplayBuffer, replay_buffer_kwargs={"n_steps": n_step})
    cls = {"sac": SAC, "tqc": TQC, "crossq": CrossQ, "td3": TD3}[algo]
    model = cls("MlpPolicy", env, learning_starts=1_000, buffer_size=200_000, seed=0, device="cpu", **settings)
    model.learn(1_000)
    return model


def measure(steps: int) -> list[dict[str, Any]]:
    """Per configuration: CPU seconds per 1,000 env steps (env steps: decisions times the action repeat)."""
    import torch as th

    th.set_num_threads(1)
    rows = []
    for name, (algo, repeat, settings) in CONFIGS.items():
        model = build(algo, repeat, settings)
        decisions = max(1, steps // repeat)
        start = time.process_time()
        model.learn(decisions, reset_num_timesteps=False)
        seconds = time.process_time() - start
        rows.append({"name": name, "per_1k": 1_000 * seconds / (decisions * repeat)})
        print(f"{name}: {rows[-1]['per_1k']:.1f} CPU-s per 1k env steps", flush=True)
    return rows


def write_page(rows: list[dict[str, Any]], command: str, out: Path, steps: int) -> None:
    reference = rows[0]["per_1k"]
    lines = [
        *page_head(
            "An off-policy stage: what each lever costs (CPU)",
            f"Made by `{command}` on {platform.processor() or platform.machine()}, one torch thread, {steps:,} env "
            "steps per configuration.",
            __doc__,
        ),
        "| configuration | CPU-s per 1k env steps | CPU-h per 1M env steps | against the zoo's TQC |",
        "|---|---|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row['name']} | {row['per_1k']:.1f} | {row['per_1k'] * 1_000 / 3_600:.2f} | {row['per_1k'] / reference:.2f} |"
        )
    lines.append("")
    out.write_text("\n".join(lines))


def main(argv: list[str] | None = None) -> int:
    parser = page_parser("benchmarks.beyond_cost", __doc__, "beyond_cost.md")
    parser.add_argument("--steps", type=int, default=2_000, help="env steps measured per configuration")
    args = parser.parse_args(argv)
    rows = measure(args.steps)
    write_page(rows, command_of("benchmarks.beyond_cost", argv), args.out, args.steps)
    print(args.out.read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
