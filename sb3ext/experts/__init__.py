"""Experts (L1): references, safe checkpoint reading, and the :class:`Expert` an imitation learner queries.

* :mod:`sb3ext.experts.references`: local paths, Hub ids (through the Hugging Face cache), ``shipped:`` names;
* :mod:`sb3ext.experts.checkpoint`: the checkpoint zip, read with size caps;
* :mod:`sb3ext.experts.building`: the frozen model, its VecNormalize statistics and zoo config, from untrusted files;
* :mod:`sb3ext.experts.expert`: :class:`Expert` (actions, Q*, V*), :class:`CallableExpert` (a user's policy) and
  :func:`load_expert`.

The folders beside these modules (``sac/Pendulum-v1_1`` ...) are the shipped experts, made by
``scripts/train_embedded_expert.py``.
"""

from sb3ext.experts.expert import (
    POLICY_ONLY,
    Q_CONTINUOUS,
    Q_DISCRETE,
    VALUE_ONLY,
    CallableExpert,
    Expert,
    ExpertFiles,
    Normalization,
    find_expert_files,
    load_expert,
    spaces_match,
)
from sb3ext.experts.references import PENDULUM_EXPERT, shipped_expert, shipped_experts

__all__ = [
    "POLICY_ONLY",
    "Q_CONTINUOUS",
    "Q_DISCRETE",
    "VALUE_ONLY",
    "CallableExpert",
    "Expert",
    "ExpertFiles",
    "Normalization",
    "PENDULUM_EXPERT",
    "find_expert_files",
    "load_expert",
    "shipped_expert",
    "shipped_experts",
    "spaces_match",
]
