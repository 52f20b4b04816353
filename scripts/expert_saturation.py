"""How bang-bang an expert is, and what its saturated torques cost it, on the harness's seeded episodes.

    python -m scripts.expert_saturation ../shared/experts/ppo/BipedalWalker-v3_1 BipedalWalker-v3 --limits 1 0.9 0.8

Prints the share of the expert's own steps with its action at a bound of the action box (per dimension), then its
mean return when its actions are clipped to ``±limit`` times the box's half range (1: as it is), on the same
episodes as the benchmark harness (``--episodes`` from seed ``--seed``). The `aggrevated` history page (2026-11-28)
used it: a near bang-bang expert that plays better with softer torques is passed by cloning's regression, which
under-shoots the bounds, while AggreVaTeD copies it.
"""

from __future__ import annotations

import argparse

import gymnasium as gym
import numpy as np

from benchmarks.games import scored_env
from sb3ext.callbacks.evaluation import episode_returns
from sb3ext.experts import load_expert


class ScaledBox(gym.ActionWrapper):
    """Clips the action to ``limit`` times the half range of the box, around its centre."""

    def __init__(self, env: gym.Env, limit: float):
        super().__init__(env)
        space = env.action_space
        assert isinstance(space, gym.spaces.Box)
        centre, half = (space.high + space.low) / 2, (space.high - space.low) / 2
        self.low, self.high = centre - limit * half, centre + limit * half

    def action(self, action: np.ndarray) -> np.ndarray:
        return np.clip(action, self.low, self.high)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("expert", help="a zoo folder or .zip")
    parser.add_argument("env")
    parser.add_argument("--limits", type=float, nargs="+", default=[1.0, 0.9, 0.8])
    parser.add_argument("--episodes", type=int, default=30)
    parser.add_argument("--seed", type=int, default=50_000)
    args = parser.parse_args()
    expert = load_expert(args.expert, env_id=args.env)

    env = scored_env(args.env, expert.wrap_env)
    space = env.action_space
    assert isinstance(space, gym.spaces.Box), "a Box action space is needed"
    at_bound = []
    obs, _ = env.reset(seed=args.seed)
    for _ in range(5_000):
        action = np.clip(expert.predict(obs[None])[0][0], space.low, space.high)
        at_bound.append(np.isclose(action, space.low) | np.isclose(action, space.high))
        obs, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            obs, _ = env.reset()
    share = np.mean(at_bound, axis=0)
    print(f"{args.expert}: its action at a bound on {', '.join(f'{s:.0%}' for s in share)} of 5,000 steps (per dimension)")

    for limit in args.limits:

        def make(env_id: str, limit: float = limit) -> gym.Env:
            return ScaledBox(scored_env(env_id, expert.wrap_env), limit)

        returns = np.array(episode_returns(args.env, expert, args.episodes, args.seed, make)[0])
        print(f"  actions within ±{limit:g} of the half range: {returns.mean():.1f} ± {returns.std():.1f} "
              f"({args.episodes} episodes from seed {args.seed})")  # fmt: skip


if __name__ == "__main__":
    main()
