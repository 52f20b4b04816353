"""PPO's loss pieces, shared by the algorithms that own their ``train()`` (KLPPO, TanhPPO, AggreVaTeD).

The same expressions as SB3's ``PPO.train`` (stable_baselines3 2.9.2, ``ppo/ppo.py``), so that an algorithm
built from them reproduces stock PPO exactly at neutral settings.
"""

from __future__ import annotations

import torch as th


def clipped_surrogate(advantages: th.Tensor, ratio: th.Tensor, clip_range: float) -> th.Tensor:
    """Elementwise ``min(A r, A clip(r, 1 - eps, 1 + eps))`` (PPO paper, eq. 7), to be maximised."""
    return th.min(advantages * ratio, advantages * th.clamp(ratio, 1 - clip_range, 1 + clip_range))


def clip_fraction(ratio: th.Tensor, clip_range: float) -> th.Tensor:
    """Fraction of ratios outside ``[1 - eps, 1 + eps]``."""
    return th.mean((th.abs(ratio - 1) > clip_range).float())


def approx_kl(log_ratio: th.Tensor) -> th.Tensor:
    """The low-variance KL(old || new) estimate ``E[(r - 1) - log r]`` (http://joschu.net/blog/kl-approx.html)."""
    return th.mean((th.exp(log_ratio) - 1) - log_ratio)


def actor_critic_parameters(policy: th.nn.Module) -> tuple[list[th.nn.Parameter], list[th.nn.Parameter]]:
    """(actor parameters, critic parameters) of an actor-critic policy, for separate optimizers or gradient clipping.

    A policy that defines ``actor_parameters()`` / ``critic_parameters()`` decides; otherwise (SB3's
    ``ActorCriticPolicy``) the critic is the value head, the value MLP and a separate value features extractor,
    and everything else (a shared features extractor included) is the actor's.
    """
    own_actor, own_critic = getattr(policy, "actor_parameters", None), getattr(policy, "critic_parameters", None)
    if callable(own_actor) and callable(own_critic):
        return list(own_actor()), list(own_critic())
    actor: list[th.nn.Parameter] = []
    critic: list[th.nn.Parameter] = []
    for name, parameter in policy.named_parameters():
        (critic if "value_net" in name or name.startswith("vf_features_extractor.") else actor).append(parameter)
    return actor, critic


def kl_exceeded(approx_kl_value: float, target_kl: float | None) -> bool:
    """SB3's early stop of an update's epochs: the approximate KL above 1.5 x ``target_kl``."""
    return target_kl is not None and approx_kl_value > 1.5 * target_kl


__all__ = ["actor_critic_parameters", "approx_kl", "clip_fraction", "clipped_surrogate", "kl_exceeded"]
