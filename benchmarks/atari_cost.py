"""Where AggreVaTeD's time goes on Atari on a CPU: ``python -m benchmarks.atari_cost`` (writes
``docs/benchmarks/atari_cost.md``).

The expert is a full-size zoo QR-DQN for Pong (NatureCNN, 200 quantiles), untrained: its play does not matter here,
only the cost of querying it. AggreVaTeD and MatchedDAgger run the aggrevated YAML's ``atari`` entry (8 envs x 64
steps per iteration, 4 stacked frames, window 4, 4 epochs) for a few iterations on one thread; the page reports env
steps per second and the seconds of each part of an iteration, as the algorithm logs them (``time/*``).
"""

from __future__ import annotations

import platform
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

from benchmarks.report import command_of, page_head, page_parser

GAME = "PongNoFrameskip-v4"
#: the zoo keys of the entry, not constructor arguments
ZOO_KEYS = ("env_wrapper", "frame_stack", "policy", "n_envs", "n_timesteps")


def measure(iterations: int) -> list[dict[str, float | str]]:
    """Per algorithm: env steps per second and the mean seconds of each part of an iteration."""
    import ale_py
    import gymnasium as gym
    import torch as th
    from sb3_contrib import QRDQN
    from stable_baselines3.common.env_util import make_atari_env
    from stable_baselines3.common.vec_env import VecFrameStack

    from sb3ext.algos.aggrevated import AggreVaTeD
    from sb3ext.algos.aggrevated.dagger import MatchedDAgger
    from sb3ext.common.resources import hyperparams_path

    gym.register_envs(ale_py)
    th.set_num_threads(1)
    entry = yaml.safe_load(hyperparams_path("aggrevated").read_text())["atari"]
    settings = {k: v for k, v in entry.items() if k not in ZOO_KEYS}
    rows: list[dict[str, float | str]] = []
    with tempfile.TemporaryDirectory() as folder:
        expert = Path(folder)
        (expert / GAME).mkdir()
        QRDQN("CnnPolicy", VecFrameStack(make_atari_env(GAME, n_envs=1, seed=0), 4), buffer_size=1, seed=0).save(
            expert / f"{GAME}.zip"
        )
        (expert / GAME / "config.yml").write_text(yaml.safe_dump({key: entry[key] for key in ("env_wrapper", "frame_stack")}))
        for algo in (AggreVaTeD, MatchedDAgger):
            env = VecFrameStack(make_atari_env(GAME, n_envs=entry["n_envs"], seed=0), n_stack=entry["frame_stack"])
            model = algo("CnnPolicy", env, expert=str(expert), seed=0, **settings)
            recorder = _timing_recorder()(None, [])
            model.set_logger(recorder)
            records = recorder.records
            steps = iterations * entry["n_envs"] * settings["n_steps"]
            start = time.perf_counter()
            model.learn(steps)
            total = time.perf_counter() - start
            later = records[1:] or records  # the first iteration has a small aggregation
            row: dict[str, float | str] = {"algorithm": algo.__name__, "steps_per_s": steps / total}
            for key in ("time/rollin_s", "time/rollin_expert_s", "time/scoring_s", "time/update_s"):
                row[key] = float(np.mean([r.get(key, 0.0) for r in later]))
            rows.append(row)
    return rows


def _timing_recorder() -> type:
    from stable_baselines3.common.logger import Logger

    class Recorder(Logger):
        """SB3's logger that also keeps each iteration's ``time/*`` values."""

        def __init__(self, *args: object) -> None:
            super().__init__(*args)  # type: ignore[arg-type]
            self.records: list[dict[str, float]] = []

        def dump(self, step: int = 0) -> None:
            self.records.append({k: float(v) for k, v in self.name_to_value.items() if k.startswith("time/")})
            super().dump(step)

    return Recorder


def write_page(rows: list[dict[str, float | str]], command: str, out: Path) -> None:
    lines = [
        *page_head(
            "AggreVaTeD on Atari: where the time goes (CPU)",
            f"Made by `{command}` on {platform.processor() or platform.machine()}, one torch thread.",
            __doc__,
        ),  # fmt: skip
        "| algorithm | env steps / s | roll-in (s) | of which the expert (s) | re-scoring (s) | update (s) |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row['algorithm']} | {float(row['steps_per_s']):.0f} | {float(row['time/rollin_s']):.2f} | "
            f"{float(row['time/rollin_expert_s']):.2f} | {float(row['time/scoring_s']):.2f} | "
            f"{float(row['time/update_s']):.2f} |"
        )
    lines += ["", "Seconds are per iteration (512 env steps), the mean over the iterations after the first.", ""]
    out.write_text("\n".join(lines))


def main(argv: list[str] | None = None) -> int:
    parser = page_parser("benchmarks.atari_cost", __doc__, "atari_cost.md")
    parser.add_argument("--iterations", type=int, default=6, help="the window (4 roll-ins) is full from the 4th on")
    args = parser.parse_args(argv)
    rows = measure(args.iterations)
    command = command_of("benchmarks.atari_cost", argv)
    write_page(rows, command, args.out)
    print(args.out.read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
