"""What an expert's critic promises against what its own episodes get: V*(s0) (V* of a value-only expert, Q*(s0,
expert's action) of a Q one) beside the discounted return of the expert's deterministic episodes from the same
seeded first states, in the expert's gamma and reward scale. AggreVaTeD's reinforcement term (``rl_coef``) weans the
imitation off as the roll-in's returns reach V*(s0): its weight is the shortfall ``mean(V* - return) / mean|V*|``
clipped to [0, 1] (``train/return_shortfall``). The script prints that shortfall for the expert's own episodes, the
weight a learner at the expert's level would get: below 0, the imitation stops before the learner is there; above
0, it never stops.

    python scripts/expert_promise.py ../shared/experts/sac/Walker2d-v3_1 Walker2d-v5
    python scripts/expert_promise.py ../shared/experts/a2c/Humanoid-v3_1 Humanoid-v4 --episodes 10
"""

from __future__ import annotations

import argparse

import gymnasium as gym
import numpy as np

import sb3ext.envs  # noqa: F401  (registers the sb3ext/ envs)
from sb3ext.algos.aggrevated.rollin import PromisedReturns, promised_values
from sb3ext.experts import POLICY_ONLY, Expert, load_expert


def run_episode(expert: Expert, env: gym.Env, seed: int, tracker: PromisedReturns) -> tuple[float, int]:
    """One seeded deterministic episode of the expert, tracked as the roll-in tracks its episodes (V*(s0) and the
    discounted return in the expert's reward scale, appended to ``tracker.finished``); the env's return and length."""
    obs, _ = env.reset(seed=seed)
    tracker.start(np.array([True]), promised_values(expert, expert.normalize_obs(obs[None])).reshape(-1))
    total, steps, done = 0.0, 0, False
    while not done:
        obs, reward, terminated, truncated, _ = env.step(expert.act(expert.normalize_obs(obs[None]))[0])
        done = terminated or truncated
        tracker.step(expert.normalize_reward(np.array([reward], dtype=np.float64)), np.array([done]))
        total += float(reward)
        steps += 1
    return total, steps


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("expert", help="a zoo run folder or .zip")
    parser.add_argument("env", help="the env id (with the version the expert fits)")
    parser.add_argument("--episodes", type=int, default=4)
    parser.add_argument("--seed", type=int, default=1000, help="the first episode's seed")
    args = parser.parse_args(argv)
    expert = load_expert(args.expert)
    if expert.kind == POLICY_ONLY:
        parser.error(f"{args.expert} is policy-only: it has no V* to compare")
    env = expert.make_env(args.env)
    tracker = PromisedReturns(1, expert.gamma, episodes=args.episodes)
    for episode in range(args.episodes):
        total, steps = run_episode(expert, env, args.seed + episode, tracker)
        promised, discounted = tracker.finished[-1]
        print(f"seed {args.seed + episode}: V*(s0) {promised:.2f}, discounted return {discounted:.2f} "
              f"(return {total:.0f} in {steps} steps)")  # fmt: skip
    shortfall = tracker.shortfall()
    print(f"gamma {expert.gamma}: the expert's own shortfall from V*(s0) is {shortfall:+.2f} over {args.episodes} episodes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
