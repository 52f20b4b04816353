"""Callbacks (L3): SB3 ``BaseCallback`` / ``EvalCallback`` subclasses, usable from the zoo YAML ``callback:`` key."""

from sb3ext.callbacks.evaluation import ExpertGapEvalCallback, episode_returns, first_crossing, threshold_between

__all__ = ["ExpertGapEvalCallback", "episode_returns", "first_crossing", "threshold_between"]
