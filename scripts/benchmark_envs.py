"""Benchmarks of sb3ext's PyBullet environments.

    python scripts/benchmark_envs.py                 # throughput + stock PPO on the cart-poles and plates
    python scripts/benchmark_envs.py --skip-learning # throughput only (~2 min)
    python scripts/benchmark_envs.py --tasks sb3ext/BallPlateContinuous-v0 --seeds 0

Throughput, side by side in one process, alternating, repeated (median): env steps per second of each
env (the gymnasium env, random actions), of a bare loop over the same scene (load the same URDFs, apply
the same forces and call ``stepSimulation`` the same number of times per step, nothing else), and of
gymnasium's ``CartPole-v1``.

Learning: stock SB3 PPO with sb3ext's ``hyperparams/ppo.yml`` through the unmodified zoo
(``python -m rl_zoo3.train --algo ppo --env <id>``), the zoo's EvalCallback (deterministic episodes);
reported per seed: the first evaluation that meets the task's goal, and the final one, beside a
uniformly random policy.

Writes ``docs/benchmarks/envs.md`` and ``docs/benchmarks/envs_ppo_*.png``; raw logs in ``--work-dir``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from zoo_bench import save_figure, train_through_zoo

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Task:
    env_id: str
    budget: int
    eval_freq: int
    metric: str  # "returns" or "lengths" (mean episode length of the evaluation)
    goal: float  # the evaluation metric to reach
    goal_text: str


TASKS = {
    task.env_id: task
    for task in [
        Task("sb3ext/CartPole-v0", 100_000, 5_000, "returns", 475, "return >= 475"),
        Task("sb3ext/BallPlateContinuous-v0", 1_000_000, 20_000, "lengths", 475, "ball on for >= 95% of 500 steps"),
        Task("sb3ext/BallPlate-v0", 300_000, 10_000, "lengths", 475, "ball on for >= 95% of 500 steps"),
        Task("sb3ext/CartPolePixels-v1", 200_000, 10_000, "returns", 100, "return >= 100 (5x random)"),
    ]
}


def rate_env(env_id: str, steps: int) -> float:
    import gymnasium as gym

    env = gym.make(env_id)
    env.action_space.seed(0)
    env.reset(seed=0)
    actions = [env.action_space.sample() for _ in range(steps)]
    start = time.perf_counter()
    for action in actions:
        _, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            env.reset()
    elapsed = time.perf_counter() - start
    env.close()
    return steps / elapsed


def rate_bare_cartpole(steps: int) -> float:
    """The cart-pole scene and physics work per step, without the env (no observation, reward or checks)."""
    from sb3ext.envs.bullet import BulletSim
    from sb3ext.envs.cartpole import BulletCartPoleEnv

    sim = BulletSim(None, timestep=BulletCartPoleEnv.PHYSICS_DT)
    body = sim.load_urdf("cartpole.urdf", fixed=True)
    joints = [sim.joint_index(body, "slider"), sim.joint_index(body, "hinge")]
    sim.free_joints(body, joints)
    client, torque = sim.client, sim.p.TORQUE_CONTROL
    start = time.perf_counter()
    for step in range(steps):
        for _ in range(BulletCartPoleEnv.FRAME_SKIP):
            client.setJointMotorControlArray(body, joints, torque, forces=[10.0 if step % 2 else -10.0, 0.0])
            client.stepSimulation()
        if step % 20 == 0:  # keep the cart on the rail, as the env's resets do
            client.resetJointState(body, joints[0], 0.0, 0.0)
            client.resetJointState(body, joints[1], 0.0, 0.0)
    elapsed = time.perf_counter() - start
    sim.close()
    return steps / elapsed


def rate_bare_plate(steps: int) -> float:
    """The plate scene (plate + ball) and its physics work per step, without the env."""
    from sb3ext.envs.bullet import BulletSim
    from sb3ext.envs.plate import BulletBallPlateEnv as Plate

    sim = BulletSim(None, timestep=Plate.PHYSICS_DT)
    plate = sim.load_urdf("plate.urdf", fixed=True)
    ball = sim.load_urdf("ball.urdf", position=(0.0, 0.0, Plate.SURFACE_Z + Plate.BALL_RADIUS))
    joints = [sim.joint_index(plate, "tilt_x"), sim.joint_index(plate, "tilt_y")]
    sim.free_joints(plate, joints)
    client, torque = sim.client, sim.p.TORQUE_CONTROL
    start = time.perf_counter()
    for step in range(steps):
        torques = [0.5 if step % 2 else -0.5, -0.5 if step % 3 else 0.5]
        for _ in range(Plate.FRAME_SKIP):
            client.setJointMotorControlArray(plate, joints, torque, forces=torques)
            client.stepSimulation()
        if step % 75 == 0:  # the ball falls off a random policy's plate after ~75 steps: reset as the env does
            client.resetBasePositionAndOrientation(ball, (0.0, 0.0, 0.037), (0, 0, 0, 1))
            client.resetBaseVelocity(ball, (0, 0, 0), (0, 0, 0))
    elapsed = time.perf_counter() - start
    sim.close()
    return steps / elapsed


MEASURES = {
    "sb3ext/CartPole-v0": lambda steps: rate_env("sb3ext/CartPole-v0", steps),
    "bare cart-pole": rate_bare_cartpole,
    "sb3ext/BallPlateContinuous-v0": lambda steps: rate_env("sb3ext/BallPlateContinuous-v0", steps),
    "bare plate": rate_bare_plate,
    "CartPole-v1": lambda steps: rate_env("CartPole-v1", steps),
}


def throughput(repeats: int, steps: int) -> dict[str, float]:
    rates: dict[str, list[float]] = {name: [] for name in MEASURES}
    for _ in range(repeats):
        for name, measure in MEASURES.items():
            rates[name].append(measure(steps))
    return {name: float(np.median(values)) for name, values in rates.items()}


def random_policy(env_id: str, episodes: int = 20) -> tuple[float, float]:
    """(mean return, mean episode length) of uniformly random actions."""
    from sb3ext.callbacks import episode_returns

    returns, lengths = episode_returns(env_id, None, episodes, seed=100)
    return float(np.mean(returns)), float(np.mean(lengths))


def plot(out: Path, task: Task, runs: list[dict], random_value: float) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for run in runs:
        ax.plot(run["timesteps"], run[task.metric], marker="o", ms=3, label=f"seed {run['seed']}")
    ax.axhline(task.goal, color="gray", ls="--", label=task.goal_text)
    ax.axhline(random_value, color="tab:red", ls=":", label=f"random policy ({random_value:.0f})")
    what = "evaluation return" if task.metric == "returns" else "evaluation episode length (ball on the plate)"
    title = f"Stock PPO (sb3ext hyperparams/ppo.yml) on {task.env_id}"
    path = out / f"envs_ppo_{task.env_id.split('/')[-1]}.png"
    return save_figure(fig, ax, f"{what}, 10 deterministic episodes", title, path)


def main() -> None:
    from sb3ext.callbacks import first_crossing

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="trainings run in parallel")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--skip-learning", action="store_true")
    parser.add_argument("--skip-throughput", action="store_true", help="only train (e.g. to fill the run cache)")
    parser.add_argument("--work-dir", type=Path, default=ROOT / "bench_runs" / "envs")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    if args.skip_throughput:
        args.out = args.work_dir / "report"  # a partial run must not overwrite the docs
        args.out.mkdir(parents=True, exist_ok=True)
        rates = {name: float("nan") for name in MEASURES}
    else:
        rates = throughput(args.repeats, 20_000)
    command = ("python scripts/benchmark_envs.py " + " ".join(sys.argv[1:])).strip()
    lines = [
        "# sb3ext PyBullet environments",
        "",
        f"Generated by `{command}` on {time.strftime('%Y-%m-%d')}.",
        "",
        "## Step throughput",
        "",
        f"Random actions, 20,000 steps, {args.repeats} alternating repeats in one process, median steps per second:",
        "",
        "| what | steps/s | ratio to its bare loop | ratio to gymnasium CartPole-v1 |",
        "|---|---|---|---|",
    ]
    bare_of = {"sb3ext/CartPole-v0": "bare cart-pole", "sb3ext/BallPlateContinuous-v0": "bare plate"}
    labels = {
        "sb3ext/CartPole-v0": "`sb3ext/CartPole-v0` (gymnasium env)",
        "bare cart-pole": "bare `stepSimulation` loop, cart-pole scene",
        "sb3ext/BallPlateContinuous-v0": "`sb3ext/BallPlateContinuous-v0` (gymnasium env)",
        "bare plate": "bare `stepSimulation` loop, plate + ball scene",
        "CartPole-v1": "gymnasium `CartPole-v1`",
    }
    for name, label in labels.items():
        to_bare = f"{rates[name] / rates[bare_of[name]]:.2f}x" if name in bare_of else "—"
        lines.append(f"| {label} | {rates[name]:,.0f} | {to_bare} | {rates[name] / rates['CartPole-v1']:.2f}x |")
    print("\n".join(lines), flush=True)

    if not args.skip_learning:
        jobs = [(TASKS[env_id], seed) for env_id in args.tasks for seed in args.seeds]

        def run(job: tuple[Task, int]) -> dict:
            task, seed = job
            folder = args.work_dir / f"ppo-{task.env_id.split('/')[-1]}-{seed}"
            return train_through_zoo("ppo", task.env_id, seed, task.budget, task.eval_freq, folder)

        with ThreadPoolExecutor(args.jobs) as pool:
            results = list(pool.map(run, jobs))
        lines += ["", "## Stock PPO on sb3ext's environments", ""]
        lines += [
            "`python -m rl_zoo3.train --algo ppo --env <id> --seed <seed> -n <budget>` with sb3ext's `hyperparams/ppo.yml`, "
            "evaluated by the zoo's EvalCallback on 10 deterministic episodes.",
            "",
        ]
        for env_id in args.tasks:
            task = TASKS[env_id]
            runs = [r for r in results if r["env_id"] == env_id]
            random_return, random_length = random_policy(env_id)
            random_value = random_return if task.metric == "returns" else random_length
            png = plot(args.out, task, runs, random_value)
            unit = "return" if task.metric == "returns" else "episode length"
            lines += [
                f"### `{env_id}`: {task.goal_text}, budget {task.budget:,} steps",
                "",
                f"Random policy: return {random_return:.1f}, episode length {random_length:.0f} (20 episodes).",
                "",
                f"| seed | first evaluation with {task.goal_text} | final {unit} |"
                + (" final return |" if task.metric != "returns" else ""),
                "|---|---|---|" + ("---|" if task.metric != "returns" else ""),
            ]
            for r in runs:
                values = np.asarray(r[task.metric])
                reached, _held = first_crossing(np.asarray(r["timesteps"]), values, task.goal)
                first = f"{reached:,} steps" if reached is not None else "not reached"
                extra = f" {r['returns'][-1]:.1f} |" if task.metric != "returns" else ""
                lines.append(f"| {r['seed']} | {first} | {values[-1]:.1f} |{extra}")
            lines += ["", f"![PPO on {env_id}]({png.name})", ""]
    (args.out / "envs.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"Wrote {args.out / 'envs.md'}")


if __name__ == "__main__":
    main()
