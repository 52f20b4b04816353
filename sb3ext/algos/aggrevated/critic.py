"""A Q critic learned from a value-only expert: ``Q_phi(s, a) ~ r + gamma V*(s')``, a fixed (supervised) target.

A PPO or A2C expert has V* but no Q*. The one-step ``A* = r + gamma V*(s') - V*(s)`` scores only the action
that was executed, one noisy sample per state. A critic regressed onto the same target on every transition of
the last roll-ins (learner and expert actions alike) generalises across states and actions, and can then score
K fresh learner samples per state, as a Q* expert's critic does.

* :class:`TransitionBuffer`: ring buffer of roll-in transitions with their fixed targets;
* :class:`AdvantageCritic`: ``A_phi(s, a)``, the critic's part on top of V*(s) (so ``Q_phi = V*(s) + A_phi``):
  one output for a Box action (action concatenated to the observation), one per action for a Discrete space;
* :class:`CriticSettings`: the validated ``critic_kwargs`` of the algorithm.

The target never bootstraps on the critic itself, so the fit is plain regression and cannot diverge.
Each roll-in is scored by the critic before it is trained on: that error (``critic_td_error``) is a held-out
TD error on exactly the states the learner is about to be updated at.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np
import torch as th
from gymnasium import spaces
from torch import nn


@dataclass(frozen=True)
class CriticSettings:
    """Settings of the learned critic (``critic_kwargs``).

    :param net_arch: hidden layer sizes of the MLP
    :param learning_rate: Adam learning rate
    :param batch_size: transitions per gradient step
    :param epochs: gradient steps per iteration = ceil(epochs * new transitions / batch_size)
    :param buffer_size: transitions kept to train on (at least the states re-scored by the learner)
    :param target_lambda: lambda of the target, ``sum_k (gamma lambda)^k delta*_{t+k}`` along the roll-in (default
        0.9, which measured best; 0: the one-step ``delta* = r + gamma V*(s') - V*(s)``)
    """

    net_arch: tuple[int, ...] = field(default=(256, 256))
    learning_rate: float = 1e-3
    batch_size: int = 256
    epochs: float = 20.0
    buffer_size: int = 100_000
    target_lambda: float = 0.9

    @classmethod
    def from_kwargs(cls, kwargs: dict[str, Any] | None, owner: str = "AggreVaTeD") -> CriticSettings:
        """Validate ``critic_kwargs``: a ``ValueError`` names the bad key or value and what is allowed."""
        kwargs = dict(kwargs or {})
        allowed = [f.name for f in fields(cls)]
        unknown = sorted(set(kwargs) - set(allowed))
        if unknown:
            raise ValueError(
                f"{owner}: unknown critic_kwargs key(s) {', '.join(map(repr, unknown))}; allowed: {', '.join(allowed)}"
            )

        def bad(key: str, what: str) -> ValueError:
            return ValueError(f"{owner}: invalid critic_kwargs[{key!r}]={kwargs[key]!r}; allowed: {what}")

        if "net_arch" in kwargs:
            arch = kwargs["net_arch"]
            if (
                not isinstance(arch, (list, tuple))
                or not arch
                or not all(isinstance(n, int) and not isinstance(n, bool) and 1 <= n <= 4096 for n in arch)
            ):
                raise bad("net_arch", "a non-empty list of layer sizes, integers in [1, 4096]")
            kwargs["net_arch"] = tuple(arch)
        for key, low, kind in (("learning_rate", 0.0, float), ("epochs", 0.0, float)):
            if key in kwargs:
                value = kwargs[key]
                if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= low:
                    raise bad(key, "a finite number > 0")
                kwargs[key] = kind(value)
        if "target_lambda" in kwargs:
            value = kwargs["target_lambda"]
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
                raise bad("target_lambda", "a number in [0, 1]")
            kwargs["target_lambda"] = float(value)
        for key in ("batch_size", "buffer_size"):
            if key in kwargs:
                value = kwargs[key]
                if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                    raise bad(key, "an integer >= 1")
        return cls(**kwargs)


class TransitionBuffer:
    """The transitions of the last roll-ins: learner and expert views of s, the executed action, its fixed target.

    :param capacity: transitions kept (oldest overwritten first)
    :param learner_shape: shape of one learner observation
    :param expert_shape: shape of one expert observation
    :param action_shape: shape of one critic action (``(act_dim,)`` in [-1, 1], or ``()`` for a discrete index)
    """

    def __init__(
        self, capacity: int, learner_shape: tuple[int, ...], expert_shape: tuple[int, ...], action_shape: tuple[int, ...]
    ):
        self.capacity = capacity
        self.learner_obs = np.zeros((capacity, *learner_shape), dtype=np.float32)
        self.expert_obs = np.zeros((capacity, *expert_shape), dtype=np.float32)
        self.actions = np.zeros((capacity, *action_shape), dtype=np.float32)
        self.targets = np.zeros(capacity, dtype=np.float32)
        self.pos = 0
        self.size = 0

    def add(self, learner_obs: np.ndarray, expert_obs: np.ndarray, actions: np.ndarray, targets: np.ndarray) -> None:
        n = len(targets)
        if n > self.capacity:
            raise ValueError(f"TransitionBuffer: {n} transitions do not fit a buffer of {self.capacity}")
        idx = (self.pos + np.arange(n)) % self.capacity
        self.learner_obs[idx] = learner_obs
        self.expert_obs[idx] = expert_obs
        self.actions[idx] = actions
        self.targets[idx] = targets
        self.pos = int((self.pos + n) % self.capacity)
        self.size = min(self.size + n, self.capacity)

    def latest(self, n: int) -> np.ndarray:
        """Indices of the ``n`` most recent transitions (fewer if the buffer holds fewer)."""
        n = min(n, self.size)
        return (self.pos - n + np.arange(n)) % self.capacity


class AdvantageCritic(nn.Module):
    """``A_phi(s, a)``: an MLP on the expert's view of s (and a Box action scaled to [-1, 1]).

    :param obs_dim: size of the flat expert observation
    :param action_space: the action space (Box: one output; Discrete: one output per action)
    :param net_arch: hidden layer sizes
    """

    def __init__(self, obs_dim: int, action_space: spaces.Space, net_arch: tuple[int, ...]):
        super().__init__()
        self.discrete = isinstance(action_space, spaces.Discrete)
        in_dim = obs_dim + (0 if self.discrete else int(np.prod(action_space.shape or ())))
        out_dim = int(action_space.n) if self.discrete else 1  # type: ignore[attr-defined]
        layers: list[nn.Module] = []
        for size in net_arch:
            layers += [nn.Linear(in_dim, size), nn.ReLU()]
            in_dim = size
        layers.append(nn.Linear(in_dim, out_dim))
        self.net = nn.Sequential(*layers)

    def forward(self, obs: th.Tensor, actions: th.Tensor) -> th.Tensor:
        """A_phi at (s, a): actions (B, act_dim) scaled to [-1, 1], or (B,) indices; returns (B,)."""
        if self.discrete:
            return self.net(obs).gather(1, actions.long().reshape(-1, 1)).squeeze(1)
        return self.net(th.cat([obs, actions], dim=-1)).squeeze(-1)

    def all_actions(self, obs: th.Tensor) -> th.Tensor:
        """A_phi(s, .) for every discrete action, (B, n_actions)."""
        if not self.discrete:
            raise TypeError("all_actions needs a Discrete action space")
        return self.net(obs)  # type: ignore[no-any-return]


def scale_actions(actions: th.Tensor, space: spaces.Box) -> th.Tensor:
    """Env-unit actions -> [-1, 1] (clipped to the bounds first, as the env clips them)."""
    low = th.as_tensor(space.low, device=actions.device, dtype=actions.dtype)
    high = th.as_tensor(space.high, device=actions.device, dtype=actions.dtype)
    return 2.0 * (actions.clamp(low, high) - low) / (high - low) - 1.0
