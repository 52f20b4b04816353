"""Does the expert fit the learner's env? What it observes (the learner's observation or the env's state), and
whether the learner's env is wrapped as the expert's was. Raises ``ValueError`` naming what does not fit."""

from __future__ import annotations

from gymnasium import spaces
from stable_baselines3.common.vec_env import VecEnv, VecFrameStack

from sb3ext.common.expert_state import STATE_KEY, state_space_of, vec_env_chain
from sb3ext.experts import Expert
from sb3ext.experts.expert import describe_space


def env_id_of(env: VecEnv | None) -> str | None:
    """The gymnasium id of the (first) env of ``env``, or None where it has no spec."""
    if env is None:
        return None
    try:
        spec = env.get_attr("spec", [0])[0]
    except (AttributeError, IndexError):
        return None
    return spec.id if spec is not None else None


def expert_reads_state(
    expert: Expert, observation_space: spaces.Space, action_space: spaces.Space, env: VecEnv | None, env_id: str | None
) -> bool:
    """Whether the expert observes the env's state (``info["state"]``, ``sb3ext.common.expert_state``) rather than
    the learner's observation; raise ``ValueError`` naming the spaces when it fits neither.

    The learner's observation wins when both fit. Frame stacking and the zoo's wrappers change the learner's
    observation only, so a pixel learner with a state expert is told apart by the spaces alone.
    """
    state_space = state_space_of(env)
    if state_space is None or expert.fits(observation_space):
        expert.check_spaces(observation_space, action_space, env_id)  # raises, with hints, when it does not fit
        return False
    if expert.fits(state_space):
        expert.check_spaces(state_space, action_space)  # trained on the state twin of this env, as intended: no warning
        return True
    raise ValueError(
        f"Expert {expert.source} observes {describe_space(expert.observation_space)}, which matches neither the "
        f"learner's observation space {describe_space(observation_space)} nor the env's state (info[{STATE_KEY!r}]) "
        f"space {describe_space(state_space)}"
    )


def check_learner_wrapping(expert: Expert, env: VecEnv) -> None:
    """An expert trained on stacked frames (``frame_stack`` in its ``config.yml``) or with ``env_wrapper`` s (the zoo's
    ``AtariWrapper``) reads the learner's observations only if the learner's env makes them the same way: raise
    ``ValueError`` naming what the learner's hyperparameters lack."""
    missing = []
    n_stack = expert.frame_stack
    if n_stack is not None and n_stack > 1:
        stack = next((e for e in vec_env_chain(env) if isinstance(e, VecFrameStack)), None)
        if stack is None or stack.stacked_obs.n_stack != n_stack:
            missing.append(f"frame_stack: {n_stack}" + (f" (it stacks {stack.stacked_obs.n_stack})" if stack else ""))
    for wrapper, _ in expert.wrapper_classes():
        if not all(env.env_is_wrapped(wrapper)):
            missing.append(f"env_wrapper {wrapper.__module__}.{wrapper.__qualname__}")
    if missing:
        raise ValueError(
            f"Expert {expert.source} observes what its config.yml's wrappers make, and the learner's env is not wrapped "
            f"the same way: add {'; '.join(missing)} to the learner's hyperparameters (the zoo's `atari` entries have both)"
        )
