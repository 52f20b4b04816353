"""DAgger at AggreVaTeD's settings: the baseline that AggreVaTeD's benchmarks compare with (zoo key ``dagger``)."""

from __future__ import annotations

import os
from typing import Any, ClassVar

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.type_aliases import GymEnv
from stable_baselines3.common.utils import obs_as_tensor
from stable_baselines3.common.vec_env import VecEnv

from sb3ext.algos.aggrevated.aggrevated import AggreVaTeD
from sb3ext.algos.aggrevated.buffers import ExpertActionMemory, observation_layout, select
from sb3ext.algos.aggrevated.estimators import expert_action_loss, torch_distribution
from sb3ext.algos.aggrevated.rollin import RollIn
from sb3ext.common.validation import invalid
from sb3ext.experts import Expert


class MatchedDAgger(AggreVaTeD):
    """
    DAgger (Ross et al. 2011) with everything else AggreVaTeD's: the same roll-in mixture and β schedule, aggregated
    states, network, optimiser, epochs and observation normalisation (and so the same YAML entry). Only the update
    differs: it clones the expert's actions (``Box``: the Gaussian mean regressed on them, in half action ranges;
    ``Discrete``: their cross-entropy) instead of following the expert's critic. A comparison with it isolates what
    the critic adds.

    Paper: https://arxiv.org/abs/1011.0686

    :param policy: the policy model (``MlpPolicy``, ``CnnPolicy``)
    :param env: the environment
    :param expert_action_memory: DAgger's own aggregation: up to this many visited states (every one while there is
        room, then a uniform sample) with the expert's action queried once, at the visit; every minibatch adds the
        cloning term on as many states drawn from it (0: clone on AggreVaTeD's aggregated states only)
    :param kwargs: :class:`AggreVaTeD`'s arguments
    """

    clones_expert: ClassVar[bool] = True

    def __init__(self, policy: Any, env: GymEnv | str, expert_action_memory: int = 0, **kwargs: Any):
        if int(expert_action_memory) != expert_action_memory or expert_action_memory < 0:
            raise invalid("MatchedDAgger", "expert_action_memory", expert_action_memory, "an integer >= 0 (0: off)")
        self.expert_action_memory = int(expert_action_memory)  # before the setup, which builds the memory
        super().__init__(policy, env, **kwargs)

    def _set_expert(self, expert: str | os.PathLike[str] | Expert) -> None:
        super()._set_expert(expert)
        self._bc_memory: ExpertActionMemory | None = None
        if self.expert_action_memory:
            discrete = isinstance(self.action_space, spaces.Discrete)
            learner_shape, learner_dtype = observation_layout(self.observation_space)
            self._bc_memory = ExpertActionMemory(
                self.expert_action_memory,
                learner_shape,
                () if discrete else self.action_space.shape,  # type: ignore[arg-type]
                rng=np.random.default_rng(None if self.seed is None else [self.seed, 2]),  # its own stream
                learner_dtype=learner_dtype,
                action_dtype=np.int64 if discrete else np.float32,
            )

    def _excluded_save_params(self) -> list[str]:
        return [*super()._excluded_save_params(), "_bc_memory", "_memory_losses"]

    def _make_rollin(self, env: VecEnv, beta: float) -> RollIn:
        rollin = super()._make_rollin(env, beta)
        rollin.memory = self._bc_memory  # every visited state, with the expert's action there
        return rollin

    def _extra_loss(self, view: Any) -> th.Tensor | None:
        """Cloning on a minibatch drawn from the memory of visited states (None while it is empty or off)."""
        memory = self._bc_memory
        if memory is None or not memory.size:
            return None
        idx = th.randint(memory.size, (min(self.batch_size, memory.size),)).numpy()
        learner_obs, expert_actions = memory.stored()
        obs = select(learner_obs, idx) if view is None else view(select(learner_obs, idx))
        distribution = self.policy.get_distribution(obs_as_tensor(obs, self.device))
        target = th.as_tensor(expert_actions[idx], device=self.device)
        loss = expert_action_loss(torch_distribution(distribution), target, self.action_space).mean()
        self._memory_losses.append(loss.detach())
        return loss

    def train(self) -> None:
        self._memory_losses: list[th.Tensor] = []
        super().train()
        if self._bc_memory is not None and self._bc_memory.size:
            self.logger.record("train/bc_memory_states", self._bc_memory.size)
            if self._memory_losses:
                self.logger.record("train/expert_bc_memory", th.stack(self._memory_losses).mean().item())
