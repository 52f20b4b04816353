"""Experts with known, hand-written Q-functions for exact tests of AggreVaTeD."""

from __future__ import annotations

import numpy as np
import torch as th
from gymnasium import spaces

from sb3ext.experts import Q_CONTINUOUS, Q_DISCRETE, VALUE_ONLY, Expert


class _ToyExpert(Expert):
    """An expert without a network: subclasses define what it answers."""

    def __init__(self, observation_space: spaces.Space, action_space: spaces.Space, kind: str, source: str):
        self.observation_space = observation_space
        self.action_space = action_space
        self.kind = kind
        self.source = source
        self.algo_name = "toy"
        self.config = {}
        self.normalization = None
        self.model = None  # no SB3 model: the default discount factor
        self.device = th.device("cpu")

    @property
    def ent_coef(self) -> None:
        return None


class QuadraticExpert(_ToyExpert):
    """Q*(s, a) = -||a - a*(s)||^2 with a*(s) = target (a constant action in env units)."""

    def __init__(self, observation_space: spaces.Box, action_space: spaces.Space, target: np.ndarray):
        super().__init__(observation_space, action_space, Q_CONTINUOUS, "quadratic-toy")
        self.target = th.as_tensor(target, dtype=th.float32)
        self.critic_inputs: list[th.Tensor] = []

    def act(self, expert_obs: np.ndarray) -> np.ndarray:
        return np.repeat(self.target.numpy()[None], len(expert_obs), axis=0)

    def q_values(self, obs: th.Tensor, actions: th.Tensor) -> th.Tensor:
        self.critic_inputs.append(actions.detach().clone())
        low = th.as_tensor(self.action_space.low)
        high = th.as_tensor(self.action_space.high)
        return -((actions.clamp(low, high) - self.target) ** 2).sum(dim=-1)

    def q_critics(self, obs: th.Tensor, actions: th.Tensor) -> th.Tensor:
        return self.q_values(obs, actions)[None]  # one critic

    def combine_critics(self, q_critics: th.Tensor) -> th.Tensor:
        return q_critics[0]

    def q_spread(self, obs: th.Tensor, actions: th.Tensor) -> th.Tensor:
        return th.zeros(actions.shape[:-1])


class NoisyTwinExpert(_ToyExpert):
    """Two critics ``Q_i(s, a) = -slope ||a - target||^2 +- amplitude sin(37 a_0)``: a quadratic signal of size
    ``slope`` and a wiggle the critics disagree on, of size ``amplitude``; Q* is their mean (as TQC's), the signal."""

    def __init__(self, observation_space: spaces.Box, action_space: spaces.Box, target: float, slope: float, amplitude: float):
        super().__init__(observation_space, action_space, Q_CONTINUOUS, "noisy-twin-toy")
        self.target, self.slope, self.amplitude = float(target), float(slope), float(amplitude)

    def act(self, expert_obs: np.ndarray) -> np.ndarray:
        return np.full((len(expert_obs), *self.action_space.shape), self.target, dtype=np.float32)

    def q_critics(self, obs: th.Tensor, actions: th.Tensor) -> th.Tensor:
        signal = -self.slope * ((actions - self.target) ** 2).sum(dim=-1)
        wiggle = self.amplitude * th.sin(37.0 * actions[..., 0])
        return th.stack([signal + wiggle, signal - wiggle])

    def q_values(self, obs: th.Tensor, actions: th.Tensor) -> th.Tensor:
        return self.combine_critics(self.q_critics(obs, actions))

    def combine_critics(self, q_critics: th.Tensor) -> th.Tensor:
        return q_critics.mean(dim=0)


class TableExpert(_ToyExpert):
    """Discrete expert with Q*(s, .) = fixed vector ``q`` for every state."""

    def __init__(self, observation_space: spaces.Box, action_space: spaces.Discrete, q: np.ndarray):
        super().__init__(observation_space, action_space, Q_DISCRETE, "table-toy")
        self.q = th.as_tensor(q, dtype=th.float32)

    def act(self, expert_obs: np.ndarray) -> np.ndarray:
        return np.full(len(expert_obs), int(self.q.argmax()))

    def q_all(self, obs: th.Tensor) -> th.Tensor:
        return self.q.expand(len(obs), -1)


class LinearValueExpert(_ToyExpert):
    """Value-only expert with V*(s) = slope * s[0], gamma given, acting 0."""

    def __init__(self, observation_space: spaces.Box, action_space: spaces.Space, slope: float, gamma: float):
        super().__init__(observation_space, action_space, VALUE_ONLY, "linear-value-toy")
        self.slope = slope
        self._gamma = gamma

    @property
    def gamma(self) -> float:
        return self._gamma

    def act(self, expert_obs: np.ndarray) -> np.ndarray:
        return np.zeros((len(expert_obs), *self.action_space.shape), dtype=np.float32)

    def value(self, obs: th.Tensor) -> th.Tensor:
        return self.slope * obs[:, 0]


class GaussianPolicyExpert(LinearValueExpert):
    """Value-only expert with V* = 0 and a Gaussian policy pi*(.|s) = N(target, std^2) in every state."""

    def __init__(self, observation_space: spaces.Box, action_space: spaces.Box, target: np.ndarray, std: float = 0.5):
        super().__init__(observation_space, action_space, slope=0.0, gamma=0.99)
        self.source = "gaussian-policy-toy"
        self.target = th.as_tensor(target, dtype=th.float32)
        self.std = std

    def act(self, expert_obs: np.ndarray) -> np.ndarray:
        return np.repeat(self.target.numpy()[None], len(expert_obs), axis=0)

    def log_prob(self, obs: th.Tensor, actions: th.Tensor) -> th.Tensor:
        low, high = th.as_tensor(self.action_space.low), th.as_tensor(self.action_space.high)
        return th.distributions.Normal(self.target, self.std).log_prob(actions.clamp(low, high)).sum(dim=-1)


class CategoricalPolicyExpert(LinearValueExpert):
    """Value-only expert with V* = 0 and the same categorical policy pi*(.|s) = ``probs`` in every state."""

    def __init__(self, observation_space: spaces.Box, action_space: spaces.Discrete, probs: np.ndarray):
        super().__init__(observation_space, action_space, slope=0.0, gamma=0.99)
        self.source = "categorical-policy-toy"
        self.probs = th.as_tensor(probs, dtype=th.float32)

    def act(self, expert_obs: np.ndarray) -> np.ndarray:
        return np.full(len(expert_obs), int(self.probs.argmax()), dtype=np.int64)

    def log_prob(self, obs: th.Tensor, actions: th.Tensor) -> th.Tensor:
        return self.probs.log()[actions.long()]
