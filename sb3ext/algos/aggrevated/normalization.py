"""The learner's observation normalisation beside the expert's: where its ``VecNormalize`` statistics start,
and how stored observations are shown to the learner with the current ones."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
from stable_baselines3.common.running_mean_std import RunningMeanStd
from stable_baselines3.common.vec_env import VecEnv, VecNormalize

from sb3ext.experts import Expert


def observation_normalizer(env: VecEnv | None) -> VecNormalize | None:
    """The learner's ``VecNormalize`` when it normalises observations and is the outermost wrapper, else None.

    The aggregated states then keep the learner's observations as the env emitted them (``get_original_obs``) and
    are normalised with the current statistics when they are re-scored and trained on (:func:`learner_view`).
    Stored normalised, a state would keep the statistics of the iteration that visited it: the running mean and
    variance move most in the first iterations, and a state kept for long (``aggregation_reservoir``) would
    show the policy an observation it no longer maps to that state. With a wrapper outside the ``VecNormalize``
    (the zoo's frame stacking), the stored observation is the learner's own, as before.
    """
    return env if isinstance(env, VecNormalize) and env.norm_obs else None


def learner_view(normalizer: VecNormalize | None, dtype: Any) -> Any:
    """Maps stored learner observations to what the learner sees now (None: stored as seen)."""
    if normalizer is None:
        return None

    def view(raw: Any) -> Any:
        normalized = normalizer.normalize_obs(raw)
        if isinstance(normalized, dict):  # a Dict space: each key keeps its own dtype (float32 once normalised)
            keys = normalizer.norm_obs_keys or []
            return {key: np.asarray(value, dtype=np.float32 if key in keys else value.dtype)
                    for key, value in normalized.items()}  # fmt: skip
        return np.asarray(normalized, dtype=dtype)

    return view


def start_from_expert_statistics(normalizer: VecNormalize, expert: Expert, verbose: int = 0) -> bool:
    """Start the learner's ``VecNormalize`` observation statistics from a copy of the expert's frozen ones (mean,
    variance and count; e.g. a zoo PPO expert's ``vecnormalize.pkl``) when both read the same observations: the
    learner reads its inputs on the expert's scale from the first iteration on. They keep updating, weighted by that
    count. Whether they were copied (not for Dict observations, or an expert that observes something else)."""
    stats = getattr(expert.normalization, "obs_rms", None)
    own = normalizer.obs_rms
    if not isinstance(stats, RunningMeanStd) or not isinstance(own, RunningMeanStd):
        return False
    if np.shape(stats.mean) != np.shape(own.mean):
        return False
    normalizer.obs_rms = copy.deepcopy(stats)
    if verbose >= 1:
        print(f"The learner's observation statistics start from the expert's ({expert.source})")
    return True
