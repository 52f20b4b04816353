"""AggreVaTeD's ``collect_rollouts`` is a marked copy of SB3's ``OnPolicyAlgorithm.collect_rollouts``: these tests fail
when the installed SB3's version differs from the one it was copied from, or when the copy drops a line of it that
is not one of its marked changes. On a failure, diff SB3's new version with 2.9.2's, carry the change over to
``sb3ext/algos/aggrevated/aggrevated.py`` (each change marked ``# sb3ext:``), then update the digest here."""

from __future__ import annotations

import hashlib
import inspect

import stable_baselines3
from stable_baselines3.common.on_policy_algorithm import OnPolicyAlgorithm

from sb3ext.algos.aggrevated import AggreVaTeD

COPIED_FROM = "2.9.2"
#: sha256 of the source of SB3 2.9.2's OnPolicyAlgorithm.collect_rollouts (inspect.getsource)
COPIED_DIGEST = "07f9eed35d9d7392f6ce287dc9d55aede83d8b0f93d34cb5d643410cdf11e3b7"
#: SB3's statements the copy replaces, each at a `# sb3ext:` comment: gSDE noise (AggreVaTeD has no gSDE) and the
#: policy's forward pass (the copy keeps the distribution, for the expert's actions' log-probabilities)
REPLACED = {
    "if self.use_sde:",
    "self.policy.reset_noise(env.num_envs)",
    "if self.use_sde and self.sde_sample_freq > 0 and n_steps % self.sde_sample_freq == 0:",
    "actions, values, log_probs = self.policy(obs_tensor)",
    "actions = actions.cpu().numpy()",
}


def code_lines(function: object) -> list[str]:
    """The function's statements, stripped, without comments and its docstring."""
    source = inspect.getsource(function)  # type: ignore[arg-type]
    body = source.split('"""')[-1] if source.count('"""') >= 2 else source
    return [line.strip() for line in body.splitlines() if line.strip() and not line.strip().startswith("#")]


def test_the_installed_sb3_collect_rollouts_is_the_copied_version() -> None:
    digest = hashlib.sha256(inspect.getsource(OnPolicyAlgorithm.collect_rollouts).encode()).hexdigest()
    assert digest == COPIED_DIGEST, (
        f"stable-baselines3 {stable_baselines3.__version__}'s OnPolicyAlgorithm.collect_rollouts differs from "
        f"{COPIED_FROM}'s, which AggreVaTeD.collect_rollouts copies: carry the change over (module docstring)"
    )


def dropped_lines(copy: object, original: object) -> list[str]:
    """The statements of ``original`` that ``copy`` does not keep, in order."""
    ours = code_lines(copy)
    position, dropped = 0, []
    for line in code_lines(original):
        found = next((i for i in range(position, len(ours)) if ours[i] == line), None)
        if found is None:
            dropped.append(line)
        else:
            position = found + 1
    return dropped


def test_the_copy_keeps_every_line_of_sb3_but_its_marked_changes_in_order() -> None:
    dropped = dropped_lines(AggreVaTeD.collect_rollouts, OnPolicyAlgorithm.collect_rollouts)
    assert set(dropped) <= REPLACED, f"the copy drops SB3's {sorted(set(dropped) - REPLACED)} without a marked change"
    marks = inspect.getsource(AggreVaTeD.collect_rollouts).count("# sb3ext:")
    assert marks >= 6, f"{marks} marked changes"


#: sha256 of the source of SB3 2.9.2's SAC.train, whose order the stage beyond the expert's hooks rely on
#: (KickstartSAC._pull): one replay sample per gradient step, and the critics' last call before the actor's optimizer
#: steps is on the actor's actions
SAC_TRAIN_DIGEST = "0ac7abe1c18ba7fe1b8a5bbf2b301b6fff4f4573aa02c4342187a953600ce50c"


def test_the_installed_sb3_sac_train_is_the_one_the_stage_hooks_into() -> None:
    from stable_baselines3 import SAC

    digest = hashlib.sha256(inspect.getsource(SAC.train).encode()).hexdigest()
    assert digest == SAC_TRAIN_DIGEST, (
        f"stable-baselines3 {stable_baselines3.__version__}'s SAC.train differs from {COPIED_FROM}'s: check that "
        "KickstartSAC's hooks (sb3ext/algos/aggrevated/beyond.py) still see one batch per gradient step and the "
        "critics' values of the actor's actions last before the actor's step, then update the digest"
    )
