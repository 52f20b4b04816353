"""DAgger at AggreVaTeD's settings: the baseline that AggreVaTeD's benchmarks compare with (zoo key ``dagger``)."""

from __future__ import annotations

import os
from typing import Any, ClassVar

from stable_baselines3.common.type_aliases import GymEnv

from sb3ext.algos.aggrevated.aggrevated import AggreVaTeD
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
        self._bc_memory = None  # its own memory only, never the fallback's (it clones from the start)
        if self.expert_action_memory:
            self._start_memory(self.expert_action_memory)
