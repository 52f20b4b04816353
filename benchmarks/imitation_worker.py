"""Runs imitation's DAgger or BC from a zoo expert; executed *inside* the separate imitation venv.

imitation 1.0.1 pins SB3 2.2 and gymnasium 0.29, so it cannot share sb3ext's environment: this file imports
nothing from sb3ext and is started by ``benchmarks/runs.py`` with that venv's interpreter.

The expert is loaded with SB3's own ``load`` (the shared, known zoo checkpoints and sb3ext's shipped ones; custom
objects replace the gym-era spaces and schedules, and the numpy-2 training state of newer checkpoints). Its frozen
VecNormalize statistics come from an ``.npz`` that the driver exported with sb3ext's safe loader; the expert acts
on observations normalised with them, as in training.

Protocol (the same as sb3ext's zoo benchmarks): every ``--eval-every`` env steps, the learner's mean return
over ``--eval-episodes`` deterministic episodes of seeded evaluation envs. Env steps are counted at the
environment (every step DAgger's collector or BC's demonstration rollouts take). Writes one JSON file.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch as th
from imitation.algorithms import bc
from imitation.algorithms.dagger import SimpleDAggerTrainer
from imitation.data import rollout
from imitation.data.wrappers import RolloutInfoWrapper
from stable_baselines3 import A2C, DQN, PPO, SAC, TD3
from stable_baselines3.common.policies import BasePolicy
from stable_baselines3.common.utils import constant_fn
from stable_baselines3.common.vec_env import DummyVecEnv, VecEnvWrapper

ALGOS = {"ppo": PPO, "a2c": A2C, "sac": SAC, "td3": TD3, "dqn": DQN}
try:  # TQC experts (the MuJoCo tasks): sb3-contrib of the same SB3 2.2
    from sb3_contrib import TQC

    ALGOS["tqc"] = TQC
except ImportError:
    pass


class StepCounter(VecEnvWrapper):
    """Counts the env steps taken through it (all envs)."""

    def __init__(self, venv):  # type: ignore[no-untyped-def]
        super().__init__(venv)
        self.steps = 0

    def reset(self):  # type: ignore[no-untyped-def]
        return self.venv.reset()

    def step_wait(self):  # type: ignore[no-untyped-def]
        self.steps += self.venv.num_envs
        return self.venv.step_wait()


class NormalizedExpert(BasePolicy):
    """The expert's policy acting on observations normalised with its frozen VecNormalize statistics."""

    def __init__(self, policy: BasePolicy, stats: dict[str, np.ndarray] | None):
        super().__init__(policy.observation_space, policy.action_space, squash_output=policy.squash_output)
        self.policy = policy
        self.stats = stats

    def _predict(self, observation: th.Tensor, deterministic: bool = False) -> th.Tensor:
        if self.stats is not None:
            mean = th.as_tensor(self.stats["mean"], dtype=observation.dtype)
            std = th.sqrt(th.as_tensor(self.stats["var"], dtype=observation.dtype) + float(self.stats["epsilon"]))
            clip = float(self.stats["clip_obs"])
            observation = th.clamp((observation - mean) / std, -clip, clip)
        return self.policy._predict(observation, deterministic=True)


def load_expert(path: Path, algo: str, env: gym.Env, stats_path: Path | None) -> NormalizedExpert:
    schedule = constant_fn(0.0)
    custom = {
        "observation_space": env.observation_space,
        "action_space": env.action_space,
        "learning_rate": 0.0,
        "lr_schedule": schedule,
        "clip_range": schedule,
        "exploration_schedule": schedule,
        # training state that a checkpoint saved under numpy 2 pickles with numpy 2's module names (numpy 1 of this
        # venv cannot read them; acting needs none of it): sb3ext's shipped experts
        **dict.fromkeys(("_last_obs", "_last_episode_starts", "_last_original_obs", "ep_info_buffer", "ep_success_buffer")),
    }
    kwargs = {"buffer_size": 1} if algo in ("sac", "td3", "dqn", "tqc") else {}
    model = ALGOS[algo].load(path, custom_objects=custom, device="cpu", **kwargs)
    stats = dict(np.load(stats_path)) if stats_path is not None else None
    return NormalizedExpert(model.policy, stats)


def evaluate(policy, env_id: str, episodes: int, seed: int) -> float:  # type: ignore[no-untyped-def]
    env = gym.make(env_id)
    returns = []
    for episode in range(episodes):
        obs, _ = env.reset(seed=seed + episode)
        total, done = 0.0, False
        while not done:
            action, _ = policy.predict(obs[None], deterministic=True)
            obs, reward, terminated, truncated, _ = env.step(action[0])
            total, done = total + float(reward), terminated or truncated
        returns.append(total)
    return float(np.mean(returns))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--method", choices=["dagger", "bc"], required=True)
    parser.add_argument("--env", required=True)
    parser.add_argument("--expert", type=Path, required=True, help="the expert's .zip")
    parser.add_argument("--expert-algo", required=True, choices=sorted(ALGOS))
    parser.add_argument("--stats", type=Path, default=None, help="npz of the expert's VecNormalize statistics")
    parser.add_argument("--budget", type=int, required=True, help="env steps")
    parser.add_argument("--eval-every", type=int, required=True)
    parser.add_argument("--eval-episodes", type=int, default=10)
    parser.add_argument("--n-envs", type=int, default=4)
    parser.add_argument("--net-arch", type=int, nargs="+", default=[32, 32], help="learner MLP (imitation's default: 32 32)")
    parser.add_argument("--bc-epochs", type=int, default=4, help="BC epochs per DAgger round / per BC fit")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--eval-seed", type=int, default=50_000, help="seed of the first evaluation episode")
    parser.add_argument(
        "--normalize-obs", action="store_true", help="imitation's NormalizeFeaturesExtractor (running mean/std) in the learner"
    )
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    th.set_num_threads(1)
    rng = np.random.default_rng(args.seed)
    env = gym.make(args.env)
    expert = load_expert(args.expert, args.expert_algo, env, args.stats)
    venv = StepCounter(DummyVecEnv([lambda: RolloutInfoWrapper(gym.make(args.env)) for _ in range(args.n_envs)]))
    venv.seed(args.seed)
    policy_kwargs: dict = {"net_arch": list(args.net_arch)}
    from imitation.policies.base import (
        FeedForward32Policy,  # noqa: F401 - imitation's default policy family
        NormalizeFeaturesExtractor,
    )

    if args.normalize_obs:  # as AggreVaTeD's learner normalises its observations (the zoo's `normalize`)
        policy_kwargs["features_extractor_class"] = NormalizeFeaturesExtractor
    from stable_baselines3.common.policies import ActorCriticPolicy

    def new_bc() -> bc.BC:
        policy = ActorCriticPolicy(env.observation_space, env.action_space, lambda _: 1e-3, **policy_kwargs)
        return bc.BC(observation_space=env.observation_space, action_space=env.action_space, rng=rng, policy=policy)

    curve: list[tuple[int, float, float]] = []
    start = time.perf_counter()
    if args.method == "dagger":
        with tempfile.TemporaryDirectory() as scratch:
            trainer = SimpleDAggerTrainer(venv=venv, scratch_dir=scratch, expert_policy=expert, rng=rng, bc_trainer=new_bc())
            # SimpleDAggerTrainer.train's rounds (its defaults: >= 3 episodes and >= 500 steps per round, BC on all
            # data after each), evaluated after the first round that crosses each --eval-every mark: train(n)
            # itself counts only finished trajectories and overshoots its budget by far on long episodes
            next_eval = args.eval_every
            while venv.steps < args.budget:
                collector = trainer.create_trajectory_collector()
                sample_until = rollout.make_sample_until(min_timesteps=max(500, trainer.batch_size), min_episodes=3)
                rollout.generate_trajectories(
                    policy=trainer.expert_policy, venv=collector, sample_until=sample_until,
                    deterministic_policy=True, rng=collector.rng,
                )  # fmt: skip
                trainer.extend_and_update({"n_epochs": args.bc_epochs, "progress_bar": False})
                if venv.steps >= next_eval or venv.steps >= args.budget:
                    while next_eval <= venv.steps:
                        next_eval += args.eval_every
                    curve.append(
                        (
                            venv.steps,
                            evaluate(trainer.policy, args.env, args.eval_episodes, args.eval_seed),
                            time.perf_counter() - start,
                        )
                    )
                    print(f"dagger {args.env} seed {args.seed}: {curve[-1][0]} steps, return {curve[-1][1]:.1f}", flush=True)
    else:
        trajectories: list = []
        while venv.steps < args.budget:
            trajectories += rollout.rollout(expert, venv, rollout.make_sample_until(min_timesteps=args.eval_every), rng=rng)
            trainer = new_bc()
            trainer.set_demonstrations(rollout.flatten_trajectories(trajectories))
            trainer.train(n_epochs=args.bc_epochs, progress_bar=False)
            curve.append(
                (
                    venv.steps,
                    evaluate(trainer.policy, args.env, args.eval_episodes, args.eval_seed),
                    time.perf_counter() - start,
                )
            )
            print(f"bc {args.env} seed {args.seed}: {curve[-1][0]} steps, return {curve[-1][1]:.1f}", flush=True)
    expert_return = evaluate(expert, args.env, args.eval_episodes, args.eval_seed)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "method": args.method, "env": args.env, "seed": args.seed, "net_arch": args.net_arch,
                "normalize_obs": args.normalize_obs, "bc_epochs": args.bc_epochs,
                "timesteps": [c[0] for c in curve], "returns": [c[1] for c in curve], "wall_s": [c[2] for c in curve],
                "expert_return_same_protocol": expert_return,
            }
        )
    )  # fmt: skip


if __name__ == "__main__":
    main()
