"""A learner's safe load against SB3's own: ``python -m benchmarks.load_speed`` (writes
``docs/benchmarks/load_speed.md``).

Each sb3ext algorithm, and stock PPO and SAC, is built, trained for one iteration and saved; the same file is then
loaded alternately by the safe load (sb3ext's default ``load``; for a stock algorithm, what ``rl_zoo3.train -i`` uses:
the checked fields, no unpickling, the policy exercised once; see ``docs/experts.md``) and by SB3's ``load``, several
times each, on one torch thread. The page reports the median seconds of each and their ratio; the promise is a ratio
of at most 2.
"""

from __future__ import annotations

import platform
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.report import command_of, page_head, page_parser
from benchmarks.suite import experts_folder

#: the promise of issue 46: a learner's safe load takes at most twice SB3's time
MAX_RATIO = 2.0


def _cases() -> list[tuple[str, Callable[[], Any]]]:
    """(label, a function that returns a trained model) for each algorithm and observation kind."""
    import ale_py
    import gymnasium as gym
    from stable_baselines3.common.env_util import make_atari_env, make_vec_env
    from stable_baselines3.common.vec_env import VecFrameStack

    from sb3ext.algos.aggrevated import AggreVaTeD
    from sb3ext.algos.ppo_kl import KLPPO
    from sb3ext.algos.ppo_tanh import TanhPPO
    from sb3ext.algos.rpo import RPO

    gym.register_envs(ale_py)
    pendulum_expert = str(experts_folder() / "sac" / "Pendulum-v1_1")

    def aggrevated_mlp() -> Any:
        env = make_vec_env("Pendulum-v1", n_envs=4, seed=0)
        return AggreVaTeD("MlpPolicy", env, expert=pendulum_expert, n_steps=64, seed=0).learn(256)

    def aggrevated_big() -> Any:
        env = make_vec_env("Pendulum-v1", n_envs=4, seed=0)
        model = AggreVaTeD(
            "MlpPolicy", env, expert=pendulum_expert, n_steps=256, seed=0, policy_kwargs={"net_arch": [256, 256]}
        )
        return model.learn(4096)

    def ppo_variant(cls: type) -> Callable[[], Any]:
        return lambda: cls("MlpPolicy", make_vec_env("Pendulum-v1", n_envs=4, seed=0), n_steps=64, seed=0).learn(256)

    def klppo_atari() -> Any:
        env = VecFrameStack(make_atari_env("PongNoFrameskip-v4", n_envs=2, seed=0), n_stack=4)
        return KLPPO("CnnPolicy", env, n_steps=32, batch_size=64, seed=0).learn(64)

    def stock(cls: type, **kwargs: Any) -> Callable[[], Any]:
        return lambda: cls("MlpPolicy", make_vec_env("Pendulum-v1", n_envs=1, seed=0), seed=0, **kwargs).learn(256)

    from stable_baselines3 import PPO, SAC

    return [
        ("AggreVaTeD, Pendulum-v1, 64-64", aggrevated_mlp),
        ("AggreVaTeD, Pendulum-v1, 256-256", aggrevated_big),
        ("KLPPO, Pendulum-v1, 64-64", ppo_variant(KLPPO)),
        ("RPO, Pendulum-v1, 64-64", ppo_variant(RPO)),
        ("TanhPPO, Pendulum-v1, 64-64", ppo_variant(TanhPPO)),
        ("KLPPO, Pong, NatureCNN", klppo_atari),
        ("PPO (stock, train -i), Pendulum-v1, 64-64", stock(PPO, n_steps=64)),
        ("SAC (stock, train -i), Pendulum-v1, 256-256", stock(SAC, buffer_size=1024, learning_starts=128)),
    ]


def _loaders(cls: type) -> dict[bool, Callable[[Path], Any]]:
    """The safe load (False) and SB3's own (True) of a class: sb3ext's ``load`` with and without trust; for a stock
    class, sb3ext's learner loader (``rl_zoo3.train -i``) against the class's own ``load``."""
    from sb3ext.algos.loading import SafeLoad
    from sb3ext.experts.learner import load_learner

    if issubclass(cls, SafeLoad):
        return {
            trusted: (lambda path, t=trusted: cls.load(path, device="cpu", trust_remote_code=t)) for trusted in (False, True)
        }
    return {False: lambda path: load_learner(cls, path, device="cpu"), True: lambda path: cls.load(path, device="cpu")}


def measure(repeats: int) -> list[dict[str, Any]]:
    import torch as th

    th.set_num_threads(1)
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for label, build in _cases():
            model = build()
            path = Path(folder) / "model.zip"
            model.save(path)
            loaders = _loaders(type(model))
            times: dict[bool, list[float]] = {False: [], True: []}
            for _ in range(repeats):
                for trusted in (False, True):  # alternate, so drift in the machine's speed hits both alike
                    start = time.perf_counter()
                    loaders[trusted](path)
                    times[trusted].append(time.perf_counter() - start)
            safe, sb3 = statistics.median(times[False]), statistics.median(times[True])
            rows.append({"case": label, "size_kb": path.stat().st_size / 1024, "safe": safe, "sb3": sb3})
            print(f"{label}: safe {safe * 1000:.1f} ms, SB3 {sb3 * 1000:.1f} ms, ratio {safe / sb3:.2f}", flush=True)
    return rows


def write_page(rows: list[dict[str, Any]], command: str, repeats: int, out: Path) -> None:
    worst = max(row["safe"] / row["sb3"] for row in rows)
    made_by = (
        f"Made by `{command}` on {platform.processor() or platform.machine()}, one torch thread, "
        f"the median of {repeats} loads each, alternating."
    )
    lines = [
        *page_head("A learner's safe load against SB3's load", made_by, __doc__),
        "| checkpoint | zip (kB) | safe load (ms) | SB3 load (ms) | ratio |",
        "|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row['case']} | {row['size_kb']:,.0f} | {row['safe'] * 1000:.1f} | {row['sb3'] * 1000:.1f} | "
            f"{row['safe'] / row['sb3']:.2f} |"
        )
    verdict = "within" if worst <= MAX_RATIO else "NOT within"
    lines += ["", f"Largest ratio {worst:.2f}: {verdict} the promised {MAX_RATIO:g}x.", ""]
    out.write_text("\n".join(lines))


def main(argv: list[str] | None = None) -> int:
    parser = page_parser("benchmarks.load_speed", __doc__, "load_speed.md")
    parser.add_argument("--repeats", type=int, default=15, help="loads of each kind per checkpoint")
    args = parser.parse_args(argv)
    rows = measure(args.repeats)
    command = command_of("benchmarks.load_speed", argv)
    write_page(rows, command, args.repeats, args.out)
    print(args.out.read_text())
    return 0 if max(row["safe"] / row["sb3"] for row in rows) <= MAX_RATIO else 1


if __name__ == "__main__":
    raise SystemExit(main())
