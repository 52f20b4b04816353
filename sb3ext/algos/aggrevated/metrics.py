"""What an AggreVaTeD iteration logs: the minibatch means of its loss terms, the estimator's statistics and the
seconds of each part (``train/*``, ``time/*``)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

import torch as th

from sb3ext.algos.aggrevated.losses import SurrogateTerms


@dataclass
class ImitationMetrics:
    """What an imitation iteration logs as ``train/<field>``: the mean over its minibatches. Kept as tensors, one
    synchronisation per iteration instead of one per minibatch."""

    policy_loss: list[th.Tensor] = field(default_factory=list)
    bound_penalty: list[th.Tensor] = field(default_factory=list)
    entropy_loss: list[th.Tensor] = field(default_factory=list)
    clip_fraction: list[th.Tensor] = field(default_factory=list)
    approx_kl: list[th.Tensor] = field(default_factory=list)
    expert_bc: list[th.Tensor] = field(default_factory=list)
    expert_bc_fraction: list[th.Tensor] = field(default_factory=list)
    value_loss: list[th.Tensor] = field(default_factory=list)
    expert_bc_memory: list[th.Tensor] = field(default_factory=list)  # cloning on DAgger's memory, while it is used
    rl_loss: list[th.Tensor] = field(default_factory=list)  # the reinforcement term (rl_coef), while it is used
    rl_approx_kl: list[th.Tensor] = field(default_factory=list)  # its approximate KL

    def add(self, terms: SurrogateTerms, value_loss: th.Tensor) -> None:
        for name in (f.name for f in fields(SurrogateTerms)):
            getattr(self, name).append(getattr(terms, name).detach())
        self.value_loss.append(value_loss.detach())

    def means(self) -> dict[str, float]:
        return {f.name: th.stack(getattr(self, f.name)).mean().item() for f in fields(self) if getattr(self, f.name)}


def record_iteration(
    logger: Any, metrics: ImitationMetrics, stats: dict[str, th.Tensor], timings: dict[str, float], **values: float | None
) -> None:
    """Log an imitation iteration: ``time/<part>_s``, the minibatch means and the estimator's statistics as
    ``train/<name>``, and the other ``values`` as ``train/<name>`` (those that are not None)."""
    for key, seconds in timings.items():
        logger.record(f"time/{key}", seconds)
    for key, value in {**metrics.means(), **{k: float(v) for k, v in stats.items()}, **values}.items():
        if value is not None:
            logger.record(f"train/{key}", value)
