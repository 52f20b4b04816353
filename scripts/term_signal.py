"""How much signal the reinforcement term (``rl_coef``) gets from one roll-in, and how much from several.

    python scripts/term_signal.py bench_runs/walkers/BipedalWalkerHardcore-v3/aggrevated/seed0/checkpoints \\
        100000 BipedalWalkerHardcore-v3 ../shared/experts/ppo/BipedalWalkerHardcore-v3_1 --rollins 32

Continues a saved AggreVaTeD learner (a zoo checkpoint and its VecNormalize statistics) with ``rl_coef`` 1 and,
instead of training, takes the term's policy gradient on each roll-in: the clipped surrogate's gradient at the
roll-in's own policy (ratio 1), on the learner's sampled steps scored by GAE(λ) on V*, over the actor's weights.
The policy does not move, so every roll-in is an independent draw of the same gradient.

Prints the cosine between the mean gradients of disjoint groups of ``k`` roll-ins, for k = 1, 2, 4, ...: near 0,
two estimates point in unrelated directions (the step is noise); near 1, they agree. And where the advantage's weight
sits: the share of ``sum |A|`` on the steps within ``--near`` steps of a fall (a terminated episode). With
``--lambdas``, the same roll-ins are scored with each GAE λ (0: the one-step TD error on V*). The
`aggrevated` history page (2026-11-28, third) used it.
"""

from __future__ import annotations

import argparse
import itertools
from pathlib import Path

import numpy as np
import torch as th
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import VecNormalize

from sb3ext import AggreVaTeD
from sb3ext.algos.aggrevated.losses import surrogate_terms
from sb3ext.algos.aggrevated.shaped_rl import shaped_scores
from sb3ext.common.ppo import actor_critic_parameters


def term_gradients(
    model: AggreVaTeD, n_rollins: int, near: int, lambdas: list[float]
) -> tuple[dict[float, list[np.ndarray]], list[float], list[float]]:
    """The term's actor gradient on each of ``n_rollins`` roll-ins for each GAE λ in ``lambdas`` (the same roll-ins),
    the number of scored steps, and the share of ``sum |A|`` (λ as the model's, before scaling) within ``near`` steps
    of a fall."""
    gradients: dict[float, list[np.ndarray]] = {lam: [] for lam in lambdas}
    steps: list[float] = []
    fall_share: list[float] = []
    actor = actor_critic_parameters(model.policy)[0]  # the term's own Adam steps these

    def measure() -> None:  # in place of train(): the gradient, no step (beta stays: no iteration counted)
        next(model.rollout_buffer.get(batch_size=None))  # flattens the roll-in, as train() does first
        shaped = model._shaped
        assert shaped is not None and shaped.last_values is not None, "the roll-in kept no V* (is rl_coef > 0?)"
        raw = shaped.advantages(shaped.last_values)
        falls = shaped.dones[: shaped.step] & (shaped.next_values[: shaped.step] == 0)
        close = np.zeros_like(falls)
        for lag in range(near):  # steps that end in a fall within `near` steps (same env)
            close[: shaped.step - lag] |= falls[lag:]
        sampled = shaped.sampled[: shaped.step]
        weight = np.abs(raw[sampled])
        fall_share.append(float(weight[close[sampled]].sum() / max(weight.sum(), 1e-12)))
        for lam in lambdas:
            shaped.gae_lambda = lam
            scored = shaped_scores(shaped, model.rollout_buffer, model.device)
            assert scored is not None
            obs, scores, _ = scored
            idx = th.arange(len(scores.advantages[0]))
            distribution = model.policy.get_distribution(obs)
            terms = surrogate_terms(scores, idx, distribution, 0.2, model.action_space, model.device)  # ratio 1: no clip acts
            model.policy.zero_grad()
            terms.policy_loss.backward()
            gradients[lam].append(th.cat([p.grad.flatten() for p in actor if p.grad is not None]).cpu().numpy().copy())
        steps.append(float(len(idx)))

    model.train = measure  # type: ignore[method-assign]
    model.learn(n_rollins * model.n_steps * model.n_envs, reset_num_timesteps=False)
    return gradients, steps, fall_share


def agreement(gradients: list[np.ndarray], group: int, rng: np.random.Generator, draws: int = 200) -> tuple[float, float]:
    """Mean and standard deviation of the cosine between the means of two disjoint random groups of ``group``."""
    cosines = []
    for _ in range(draws):
        order = rng.permutation(len(gradients))
        a = np.mean([gradients[i] for i in order[:group]], axis=0)
        b = np.mean([gradients[i] for i in order[group : 2 * group]], axis=0)
        cosines.append(float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-12)))
    return float(np.mean(cosines)), float(np.std(cosines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoints", type=Path, help="the run's checkpoint folder (rl_model_<N>_steps.zip)")
    parser.add_argument("step", type=int, help="which checkpoint, in env steps")
    parser.add_argument("env")
    parser.add_argument("expert", help="the expert (a zoo folder or .zip)")
    parser.add_argument("--rollins", type=int, default=32)
    parser.add_argument("--near", type=int, default=50, help="steps before a fall that count as near it")
    parser.add_argument("--lambdas", type=float, nargs="+", default=None, help="GAE λs to compare (default: the model's)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    stats = args.checkpoints / f"rl_model_vecnormalize_{args.step}_steps.pkl"
    model = AggreVaTeD.load(args.checkpoints / f"rl_model_{args.step}_steps.zip", device="cpu", rl_coef=1.0, verbose=0)
    venv = VecNormalize.load(str(stats), make_vec_env(args.env, n_envs=model.n_envs, seed=args.seed))
    venv.training = False  # the learner's statistics stay as saved
    model.set_env(venv)
    model.set_expert(args.expert)
    th.manual_seed(args.seed)
    lambdas = args.lambdas if args.lambdas else [float(model.gae_lambda)]
    gradients, steps, fall_share = term_gradients(model, args.rollins, args.near, lambdas)
    print(
        f"{len(steps)} roll-ins at beta {model.beta:.3f}: {np.mean(steps):.0f} scored steps each (the learner's own "
        f"samples); share of sum |A| within {args.near} steps of a fall: median {np.median(fall_share):.2f} "
        f"(range {min(fall_share):.2f}-{max(fall_share):.2f})"
    )
    rng = np.random.default_rng(args.seed)
    print("GAE λ | roll-ins per estimate | scored steps | cosine between two disjoint estimates: mean (sd over draws)")
    for lam in lambdas:
        for group in itertools.takewhile(lambda g: 2 * g <= len(steps), (2**i for i in range(10))):
            mean, sd = agreement(gradients[lam], group, rng)
            print(f"{lam:>5} | {group:>21} | {group * np.mean(steps):>12,.0f} | {mean:.3f} ({sd:.3f})")


if __name__ == "__main__":
    main()
