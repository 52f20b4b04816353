"""Exercise what was loaded: one pass of a loaded policy on observations drawn from its own spaces.

Finite weights can still overflow when used (a layer scaled to 1e38 gives infinite activations, then NaN), and
``policy_kwargs`` can describe a distribution torch refuses to build (a scale of 0). Neither shows in the file. After a
load, :func:`exercise_policy` runs the policy once, as it will be used, on a few observations drawn from its
observation space (within its normaliser's range where it has one) and refuses, in one line naming the file, any
non-finite action, value, Q-value or log-probability, and any distribution that cannot be built.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.policies import ActorCriticPolicy, BasePolicy

#: observations drawn per pass (a batch: one forward of each network)
N_OBSERVATIONS = 16
#: a Box dimension with a wider span is drawn as an unbounded one (old gym spaces bound them by +-float32 max)
MAX_BOUNDED_SPAN = 1e4


def draw_observations(space: spaces.Space, rng: np.random.Generator, obs_rms: Any = None, n: int = N_OBSERVATIONS,
                      reach: float = 10.0, epsilon: float = 1e-8) -> Any:  # fmt: skip
    """``n`` observations of ``space``: uniform within finite bounds; elsewhere half within three standard deviations
    of the normaliser's mean (without one: of 0, unit scale) and half across its whole clipping range, ``reach``
    standard deviations, its ends included; a ``Dict`` space key by key."""
    if isinstance(space, spaces.Dict):
        return {
            key: draw_observations(sub, rng, obs_rms.get(key) if isinstance(obs_rms, dict) else None, n, reach, epsilon)
            for key, sub in space.spaces.items()
        }
    if isinstance(space, spaces.Discrete):
        return rng.integers(int(space.start), int(space.start + space.n), size=n)
    if isinstance(space, (spaces.MultiDiscrete, spaces.MultiBinary)):
        return np.stack([space.sample() for _ in range(n)])
    assert isinstance(space, spaces.Box), space
    shape = (n, *space.shape)
    low = np.broadcast_to(np.asarray(space.low, dtype=np.float64), space.shape)
    high = np.broadcast_to(np.asarray(space.high, dtype=np.float64), space.shape)
    if obs_rms is not None and np.shape(obs_rms.mean) == space.shape:
        centre = np.asarray(obs_rms.mean, dtype=np.float64)
        scale = np.sqrt(np.asarray(obs_rms.var, dtype=np.float64) + epsilon)  # a constant input: its epsilon's scale
    else:
        centre, scale = np.zeros(space.shape), np.ones(space.shape)
    spread = np.where(np.arange(n) < n // 2, 3.0, reach).reshape(n, *([1] * len(space.shape)))
    unit = rng.uniform(-1.0, 1.0, size=shape)
    unit[-2:] = np.sign(unit[-2:]) * np.array([1.0, -1.0]).reshape(2, *([1] * len(space.shape)))  # the range's ends
    drawn = centre + spread * scale * unit
    with np.errstate(over="ignore", invalid="ignore"):
        bounded = np.isfinite(low) & np.isfinite(high) & (high - low <= MAX_BOUNDED_SPAN)  # old gym: +-float32 max
        drawn = np.where(bounded, low + (high - low) * rng.uniform(0.0, 1.0, size=shape), drawn)
    drawn = np.clip(drawn, low, high)
    if np.issubdtype(space.dtype, np.integer):
        drawn = np.rint(drawn)
    return drawn.astype(space.dtype)


_DISTRIBUTION_ERROR = re.compile(
    r"Expected parameter (\w+) .*? of distribution (\w+)\(.*? to satisfy the constraint (.*?), but found invalid values"
)


def policy_error_reason(exc: Exception) -> str:
    """Ours, in a few words: torch's refusal of a distribution's parameters, else the first 160 characters."""
    text = " ".join(str(exc).split())
    match = _DISTRIBUTION_ERROR.search(text)
    if match:
        name, distribution, constraint = match.groups()
        return f"its {distribution} distribution's {name} breaks {constraint}: non-finite or out-of-range values"
    return f"{type(exc).__name__}: {text[:160]}"


def _outputs(policy: BasePolicy, obs: Any) -> dict[str, th.Tensor]:
    """What the policy computes when it is used: its actions, and its values, Q-values and log-probabilities."""
    if isinstance(policy, ActorCriticPolicy):
        actions = policy._predict(obs, deterministic=True)
        values, log_prob, _ = policy.evaluate_actions(obs, actions)
        return {"actions": actions, "values": values, "log-probabilities": log_prob}
    q_net = getattr(policy, "q_net", None) or getattr(policy, "quantile_net", None)
    if q_net is not None:  # DQN, QR-DQN
        return {"Q-values": q_net(obs)}
    actor, critic = getattr(policy, "actor", None), getattr(policy, "critic", None)
    if actor is not None and critic is not None:  # SAC, TD3, DDPG, TQC
        actions = actor(obs, deterministic=True) if "deterministic" in actor.forward.__code__.co_varnames else actor(obs)
        q = critic(obs, actions)
        return {"actions": actions, "Q-values": th.cat(list(q), dim=1) if isinstance(q, (tuple, list)) else q}
    return {"actions": policy._predict(obs, deterministic=True)}  # ARS and other policies without a critic


def exercise_policy(policy: BasePolicy, where: str, normalization: Any = None, seed: int = 0) -> None:
    """Run ``policy`` once on observations drawn from its observation space (see the module docstring).

    :param where: the file, for the message
    :param normalization: the expert's frozen ``VecNormalize`` statistics (``obs_rms``, ``epsilon``, ``clip_obs``): the
        observations are drawn in its range and normalised as the expert sees them
    :raises ValueError: one line naming ``where`` and what was not finite, or the distribution torch refused
    """
    rng = np.random.default_rng(seed)
    obs_rms = getattr(normalization, "obs_rms", None)
    raw = draw_observations(
        policy.observation_space, rng, obs_rms, reach=float(getattr(normalization, "clip_obs", 10.0)),
        epsilon=float(getattr(normalization, "epsilon", 1e-8)),
    )  # fmt: skip
    if obs_rms is not None and isinstance(raw, np.ndarray):
        raw = np.clip(
            (raw - obs_rms.mean) / np.sqrt(obs_rms.var + normalization.epsilon),
            -normalization.clip_obs,
            normalization.clip_obs,
        ).astype(np.float32)
    training = policy.training
    policy.set_training_mode(False)
    try:
        with th.no_grad():
            obs, _ = policy.obs_to_tensor(raw)
            outputs = _outputs(policy, obs)
    except (ValueError, RuntimeError) as exc:  # torch's distribution checks: a multi-line message
        raise ValueError(
            f"{where}: refused; its policy cannot act on observations of its own space ({policy_error_reason(exc)})"
        ) from None
    finally:
        policy.set_training_mode(training)
    for what, tensor in outputs.items():
        if tensor.is_floating_point() and not bool(th.isfinite(tensor).all()):
            raise ValueError(
                f"{where}: refused; its policy gives non-finite {what} on observations of its own space (weights that "
                "overflow when used)"
            )
