"""Loading a learner's own checkpoint (sb3ext's algorithms) without running code from the file.

SB3's ``load`` unpickles every ``:serialized:`` field of ``data``, copies every field onto the model, passes the
``env`` field to ``gym.make`` (which imports the module it names) and sizes buffers from ``n_steps``. Here, as for
experts (:mod:`sb3ext.experts.building`):

* the policy class must be one of the algorithm's own (matched by the names its pickle holds, never unpickled);
  the rollout buffer class one of SB3's or sb3ext's; spaces and ``policy_kwargs`` go through the restricted
  unpickler; schedules are rebuilt from SB3's schedule classes and numbers only; the episode buffers from plain
  containers; any other serialized field (the last observations too: training goes on from a reset, as after
  ``load(env=...)``) is scanned for the names it holds and dropped;
* plain fields must be finite JSON scalars (+-inf in ``max_grad_norm``, no clipping, and where the class lists the
  field in ``infinite_fields``); ``env``
  and ``expert`` must be absent (a genuine save never writes them), ``tensorboard_log`` comes from the caller;
  sizes (``n_steps``, ``n_envs``, windows, memories) are bounded, and so are the buffers they size; fields the class
  no longer has (settings since removed) are dropped;
* ``policy.pth`` must hold exactly the policy's parameters, finite, and the optimizer entries plain state dicts.

Every refusal is one line, an ``UnsafeObjectError`` or a ``ValueError`` naming the file and the entry.
"""

from __future__ import annotations

import math
import os
from collections import deque
from pathlib import Path
from typing import Any

import torch as th
from gymnasium import spaces
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.save_util import recursive_getattr
from stable_baselines3.common.utils import ConstantSchedule, FloatSchedule, LinearSchedule, check_for_correct_spaces

from sb3ext.common.serialization import Recipe, UnsafeObjectError, printable, restricted_loads
from sb3ext.experts.building import (
    check_finite,
    check_fit,
    check_policy_kwargs,
    check_state,
    load_variables,
    named_globals,
    read_policy_kwargs,
    read_space,
    scan_field,
)
from sb3ext.experts.checkpoint import CheckpointArchive
from sb3ext.experts.exercise import exercise_policy

#: fields holding schedules (numbers or SB3's schedule classes)
SCHEDULE_FIELDS = (
    "learning_rate", "lr_schedule", "clip_range", "clip_range_vf", "critic_learning_rate", "critic_lr_schedule",
    "exploration_schedule",
)  # fmt: skip
#: fields holding the last observations (dropped, as after a reset) or episode buffers
ARRAY_FIELDS = ("_last_obs", "_last_episode_starts", "_last_original_obs")
EPISODE_FIELDS = ("ep_info_buffer", "ep_success_buffer")
#: fields the model rebuilds in ``_setup_model`` (dropped from the file)
DERIVED_FIELDS = ("batch_norm_stats", "batch_norm_stats_target", "lr_schedule")
READ_ABOVE = ("policy_class", "observation_space", "action_space", "policy_kwargs")
#: integer fields that size buffers or loops, with their largest allowed value
SIZE_LIMITS = {
    "n_envs": 1 << 12,
    "n_steps": 1 << 24,
    "batch_size": 1 << 24,
    "n_epochs": 1 << 12,
    "critic_n_epochs": 1 << 12,
    "n_action_samples": 1 << 12,
    "aggregation_window": 1 << 12,
    "aggregation_reservoir": 1 << 26,
    "aggregation_falls": 1 << 20,
    "expert_action_memory": 1 << 26,
    "_stats_window_size": 1 << 20,
    "buffer_size": 1 << 24,
    "gradient_steps": 1 << 16,
}
#: fields every SB3 algorithm gives a meaning at infinity: ``max_grad_norm`` inf clips nothing (the PPO paper's set-up)
INFINITE_FIELDS = frozenset({"max_grad_norm"})
#: the most elements one buffer the fields size may hold (1 GiB of float32)
MAX_BUFFER_ELEMENTS = 1 << 28
#: an off-policy replay buffer may hold more (4 GiB of float32: the zoo's 1M transitions of Humanoid's 376 numbers)
MAX_REPLAY_ELEMENTS = 1 << 30


def _finite(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or abs(value) > 1e12:
        raise ValueError(f"{where}: {value!r}; allowed: a finite number")
    return float(value)


def _schedule_recipes() -> dict[tuple[str, str], Recipe]:
    module = "stable_baselines3.common.utils"

    def constant(inst: Any, source: str) -> ConstantSchedule:
        return ConstantSchedule(_finite((inst.state or {}).get("val"), f"{source} ConstantSchedule.val"))

    def linear(inst: Any, source: str) -> LinearSchedule:
        state = inst.state or {}
        values = [_finite(state.get(k), f"{source} LinearSchedule.{k}") for k in ("start", "end", "end_fraction")]
        if values[2] <= 0:
            raise ValueError(f"{source}: LinearSchedule.end_fraction {values[2]!r}; allowed: a number > 0")
        return LinearSchedule(*values)

    def float_schedule(inst: Any, source: str) -> FloatSchedule:
        inner = (inst.state or {}).get("value_schedule")
        if not isinstance(inner, (ConstantSchedule, LinearSchedule, FloatSchedule)):
            raise UnsafeObjectError(f"{source}: FloatSchedule of a {type(inner).__name__}; allowed: SB3's schedules")
        return FloatSchedule(inner)

    def zoo_linear(inst: Any, source: str) -> LinearSchedule:  # rl_zoo3's lin_<x>: x * progress, as SB3's class
        return LinearSchedule(_finite((inst.state or {}).get("initial_value"), f"{source} SimpleLinearSchedule"), 0.0, 1.0)

    return {
        (module, "ConstantSchedule"): Recipe("ConstantSchedule", new=True, attrs=frozenset({"val"}), finish=constant),
        (module, "LinearSchedule"): Recipe(
            "LinearSchedule", new=True, attrs=frozenset({"start", "end", "end_fraction"}), finish=linear
        ),
        (module, "FloatSchedule"): Recipe(
            "FloatSchedule", new=True, attrs=frozenset({"value_schedule"}), finish=float_schedule
        ),
        ("rl_zoo3.utils", "SimpleLinearSchedule"): Recipe(
            "SimpleLinearSchedule", new=True, attrs=frozenset({"initial_value"}), finish=zoo_linear
        ),
    }


def _train_freq_recipes() -> dict[tuple[str, str], Recipe]:
    """SB3's ``TrainFreq(frequency, unit)`` of an off-policy checkpoint, rebuilt from checked values."""
    from stable_baselines3.common.type_aliases import TrainFreq, TrainFrequencyUnit

    module = "stable_baselines3.common.type_aliases"
    units = {unit.value: unit for unit in TrainFrequencyUnit}

    def unit(inst: Any, args: tuple[Any, ...]) -> TrainFrequencyUnit:
        if len(args) != 1 or args[0] not in units:
            raise ValueError(f"TrainFrequencyUnit{printable(repr(args), 40)}; allowed: {', '.join(units)}")
        return units[args[0]]

    def train_freq(inst: Any, source: str) -> TrainFreq:
        args = inst.args
        if len(args) != 2 or not isinstance(args[1], TrainFrequencyUnit):
            raise ValueError(f"{source}: TrainFreq needs a frequency and a TrainFrequencyUnit")
        frequency = args[0]
        if isinstance(frequency, bool) or not isinstance(frequency, int) or not 1 <= frequency <= 1 << 24:
            raise ValueError(
                f"{source}: TrainFreq frequency {printable(repr(frequency), 40)}; allowed: an integer in [1, {1 << 24}]"
            )
        return TrainFreq(frequency, args[1])

    return {
        (module, "TrainFrequencyUnit"): Recipe("TrainFrequencyUnit", call=unit),
        (module, "TrainFreq"): Recipe("TrainFreq", new=True, finish=train_freq),
    }


def _replay_buffers() -> dict[tuple[str, str], type]:
    from stable_baselines3.common.buffers import DictReplayBuffer, ReplayBuffer

    return {(c.__module__, c.__qualname__): c for c in (ReplayBuffer, DictReplayBuffer)}


def _class_field(archive: CheckpointArchive, data: dict[str, Any], key: str, allowed: dict[tuple[str, str], type]) -> type:
    raw = archive.serialized(data, key)
    source = f"{archive.path} [data: {key}]"
    if raw is None:
        raise ValueError(f"{source}: missing or not a serialized class")
    refs = named_globals(raw, source)
    if len(refs) != 1 or refs[0] not in allowed:
        shown = ", ".join(printable(f"{m}.{n}") for m, n in refs[:5]) or "nothing"
        names = ", ".join(sorted(f"{m}.{n}" for m, n in allowed))
        raise UnsafeObjectError(f"{source}: refused {shown}; allowed: {names}")
    return allowed[refs[0]]


def _plain(value: Any, where: str, infinite: bool = False) -> Any:
    """A plain JSON scalar; ``infinite``: a float may also be +-inf (a field the class gives a meaning at infinity)."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        if abs(value) > 1 << 62:
            raise ValueError(f"{where}: an integer of {len(str(value))} digits; allowed: at most 2**62 in size")
        return value
    if isinstance(value, float):
        if math.isnan(value) or (math.isinf(value) and not infinite):
            raise ValueError(f"{where}: {value!r}; allowed: a {'non-NaN' if infinite else 'finite'} number")
        return value
    if isinstance(value, str) and len(value) <= 256:
        return value
    raise ValueError(f"{where}: a {type(value).__name__}; allowed: null, a boolean, a finite number or a short string")


def _check_sizes(fields: dict[str, Any], observation_space: spaces.Space, action_space: spaces.Space, where: str) -> None:
    for key, limit in SIZE_LIMITS.items():
        value = fields.get(key)
        low = -1 if key == "gradient_steps" else 0  # -1: as many gradient steps as env steps
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or not low <= value <= limit):
            raise ValueError(f"{where} field {key}: {value!r}; allowed: an integer in [{low}, {limit}]")
    parts = observation_space.spaces.values() if isinstance(observation_space, spaces.Dict) else [observation_space]
    obs = sum(math.prod(part.shape or (1,)) for part in parts)
    act = math.prod(action_space.shape or (1,))
    steps = fields.get("n_steps") or 1
    envs = fields.get("n_envs") or 1
    buffers = {
        "n_steps x n_envs (the rollout buffer)": steps * envs * (obs + act),
        "aggregation_window x n_steps x n_envs": (fields.get("aggregation_window") or 0) * steps * envs * obs,
        "aggregation_reservoir": (fields.get("aggregation_reservoir") or 0) * obs,
        "expert_action_memory": (fields.get("expert_action_memory") or 0) * (obs + act),
        "n_action_samples x n_steps x n_envs": (fields.get("n_action_samples") or 0) * steps * envs * act,
    }
    replay = (fields.get("buffer_size") or 0) * (2 * obs + act)
    for name, size, limit in [*((n, v, MAX_BUFFER_ELEMENTS) for n, v in buffers.items()),
                              ("buffer_size (the replay buffer)", replay, MAX_REPLAY_ELEMENTS)]:  # fmt: skip
        if size > limit:
            raise UnsafeObjectError(f"{where}: {name} would hold {size} values; at most {limit} are allowed for one buffer")


def _optimizer_state(archive: CheckpointArchive, name: str) -> dict[str, Any]:
    where = archive.where(name)
    state = archive.torch_object(name)
    if not isinstance(state, dict) or set(state) != {"state", "param_groups"}:
        raise ValueError(f"{where}: not an optimizer state dict (a mapping of 'state' and 'param_groups')")
    if not isinstance(state["param_groups"], list) or not all(isinstance(g, dict) for g in state["param_groups"]):
        raise ValueError(f"{where}: param_groups is not a list of mappings")
    for group in state["param_groups"]:
        for key, value in group.items():
            if key == "params":
                if not isinstance(value, list) or not all(isinstance(i, int) for i in value):
                    raise ValueError(f"{where}: param_groups' params is not a list of integers")
            elif isinstance(value, th.Tensor) and not bool(th.isfinite(value).all()):
                raise ValueError(f"{where}: param_groups' {key} is not finite")
            elif isinstance(value, float) and not math.isfinite(value):
                raise ValueError(f"{where}: param_groups' {key} is not finite")
    if not isinstance(state["state"], dict):
        raise ValueError(f"{where}: 'state' is not a mapping")
    for index, slots in state["state"].items():
        if not isinstance(slots, dict):
            raise ValueError(f"{where}: the state of parameter {index} is not a mapping")
        for key, value in slots.items():
            if isinstance(value, th.Tensor) and not bool(th.isfinite(value).all()):
                raise ValueError(f"{where}: the {key} of parameter {index} is not finite")
    return state


def load_learner(
    cls: type[BaseAlgorithm],
    path: str | os.PathLike[str],
    env: Any = None,
    device: th.device | str = "auto",
    custom_objects: dict[str, Any] | None = None,
    force_reset: bool = True,
    rollout_buffers: dict[tuple[str, str], type] | None = None,
    **kwargs: Any,
) -> BaseAlgorithm:
    """A model of ``cls`` from its checkpoint, as SB3's ``load`` returns it, without running code from the file.

    :param rollout_buffers: the rollout buffer classes its ``rollout_buffer_class`` may name, by (module, name)
    :param custom_objects: fields to take from the caller instead of the file (as in SB3's ``load``)
    :param kwargs: attributes to set on the model after its fields, as in SB3's ``load``
    """
    from stable_baselines3.common.buffers import DictRolloutBuffer, RolloutBuffer

    rollout_buffers = {
        ("stable_baselines3.common.buffers", "RolloutBuffer"): RolloutBuffer,
        ("stable_baselines3.common.buffers", "DictRolloutBuffer"): DictRolloutBuffer,
        **(rollout_buffers or {}),
    }
    path = Path(path)
    if not path.exists() and path.suffix != ".zip" and Path(f"{path}.zip").exists():
        path = Path(f"{path}.zip")  # SB3 adds the suffix too
    custom_objects = dict(custom_objects or {})
    with CheckpointArchive(path) as archive:
        data = archive.data()
        where = archive.where("data")
        for key in ("env", "expert"):
            if data.get(key) is not None and key not in custom_objects:
                raise UnsafeObjectError(
                    f"{where} field {key}: refused {str(data[key])[:80]!r}; {cls.__name__}.save never writes it (an env "
                    "would be imported by name, an expert loaded from it); pass env= or set_expert() yourself"
                )
        aliases = {(c.__module__, c.__qualname__): c for c in cls.policy_aliases.values()}
        policy_class = _class_field(archive, data, "policy_class", aliases)
        observation_space = read_space(archive, data, "observation_space", allow_dict=True)
        action_space = read_space(archive, data, "action_space")
        policy_kwargs = read_policy_kwargs(archive, data)
        fields: dict[str, Any] = {}
        for key, value in data.items():
            field_where = f"{where} field {key}"
            if key in custom_objects or key in kwargs or key in READ_ABOVE:
                continue  # read above, or the caller's value replaces the file's (not read)
            raw = archive.serialized(data, key)
            if key in DERIVED_FIELDS:  # rebuilt by _setup_model: dropped, once its names are checked
                if raw is not None:
                    scan_field(archive, data, key)
                continue
            if key in SCHEDULE_FIELDS:
                fields[key] = (
                    _plain(value, field_where)
                    if raw is None
                    else restricted_loads(raw, field_where, _schedule_recipes(), spaces=False)
                )
            elif key == "rollout_buffer_class":
                fields[key] = None if raw is None else _class_field(archive, data, key, rollout_buffers)
            elif key == "replay_buffer_class":
                fields[key] = None if raw is None else _class_field(archive, data, key, _replay_buffers())
            elif key == "train_freq" and raw is not None:
                fields[key] = restricted_loads(raw, field_where, _train_freq_recipes(), spaces=False)
            elif key == "replay_buffer_kwargs":
                if not isinstance(value, dict) or len(value) > 16:
                    raise UnsafeObjectError(f"{field_where}: {str(value)[:80]!r}; allowed: a small mapping of plain values")
                fields[key] = {str(k): _plain(v, f"{field_where}[{k!r}]") for k, v in value.items()}
            elif key in ARRAY_FIELDS:
                if raw is not None:
                    scan_field(archive, data, key)  # dropped: learn() starts from a reset of the env the caller gives
            elif key in EPISODE_FIELDS:
                episodes = [] if raw is None else restricted_loads(raw, field_where, spaces=False)
                if not isinstance(episodes, list):
                    raise ValueError(f"{field_where}: a {type(episodes).__name__}, not a list of episode records")
                window = data.get("_stats_window_size", 100)
                if (
                    isinstance(window, bool)
                    or not isinstance(window, int)
                    or not 1 <= window <= SIZE_LIMITS["_stats_window_size"]
                ):
                    limit = SIZE_LIMITS["_stats_window_size"]
                    raise ValueError(f"{where} field _stats_window_size: {window!r}; allowed: an integer in [1, {limit}]")
                fields[key] = deque(episodes, maxlen=window)
            elif key == "rollout_buffer_kwargs":
                if value not in ({}, None):
                    raise UnsafeObjectError(f"{field_where}: {str(value)[:80]!r}; allowed: empty (sb3ext passes none)")
                fields[key] = {}
            elif key in ("tensorboard_log", "device", "env", "expert"):
                continue  # from the caller only
            elif raw is not None:
                scan_field(archive, data, key)  # names only allowed modules, and is dropped
            else:
                infinite = key in INFINITE_FIELDS or key in getattr(cls, "infinite_fields", ())
                fields[key] = _plain(value, field_where, infinite)
        _check_sizes({**fields, **kwargs}, observation_space, action_space, where)
        state = archive.tensors("policy.pth")
        # a model's other policies (AggreVaTeD's stage beyond the expert: ``_stage.policy.pth``), checked below against
        # the names the model built from the fields saves
        other_states = {entry[: -len(".pth")]: archive.tensors(entry) for entry in sorted(archive.entries)
                        if entry.endswith(".policy.pth")}  # fmt: skip
        optimizers = {  # policy.optimizer; an off-policy model's actor.optimizer, critic.optimizer, ent_coef_optimizer
            entry[: -len(".pth")]: _optimizer_state(archive, entry)
            for entry in sorted(archive.entries)
            if entry.endswith("optimizer.pth")
        }
        variables_entry = next((e for e in ("pytorch_variables.pth", "tensors.pth") if archive.has(e)), None)
        variables = archive.tensors(variables_entry) if variables_entry else {}
    if env is not None:
        env = cls._wrap_env(env, fields.get("verbose", 0))
        try:
            check_for_correct_spaces(env, observation_space, action_space)
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None
        if force_reset:
            fields["_last_obs"] = None
        fields["n_envs"] = env.num_envs
    check_fit(policy_class, policy_kwargs, observation_space, str(path))
    check_policy_kwargs(policy_kwargs, policy_class, observation_space, action_space, state, f"{path} [data: policy_kwargs]")  # type: ignore[arg-type]
    model = cls(policy=policy_class, env=env, device=device, _init_setup_model=False)  # type: ignore[call-arg]
    defaults = dict(vars(model))
    known = set(defaults) | {"n_envs"}  # set from the env, or from the file without one
    for key, value in fields.items():  # a number where the class has a number, a flag where it has a flag
        if key in SCHEDULE_FIELDS or key == "train_freq":
            continue  # a number, a schedule or a TrainFreq, checked above
        default = defaults.get(key)
        if value is None:  # an optional setting switched off (target_kl, clip_range_vf ...)
            continue
        if isinstance(default, bool) and not isinstance(value, bool):
            raise ValueError(f"{where} field {key}: {value!r}; allowed: true or false")
        if isinstance(default, (int, float)) and not isinstance(default, bool):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError(f"{where} field {key}: {str(value)[:80]!r}; allowed: a number")
    model.__dict__.update({k: v for k, v in fields.items() if k in known})  # settings since removed are dropped
    model.__dict__.update(observation_space=observation_space, action_space=action_space, policy_kwargs=policy_kwargs)
    model.__dict__.update(custom_objects)
    model.__dict__.update(kwargs)
    try:
        model._setup_model()
    except (TypeError, ValueError, AssertionError, RuntimeError, AttributeError, KeyError, IndexError) as exc:
        reason = " ".join(str(exc).split())[:200]
        raise ValueError(f"{where}: the model its fields describe cannot be built ({type(exc).__name__}: {reason})") from None
    check_state(model.policy.state_dict(), state, f"{path} [policy.pth]")
    check_finite(state, f"{path} [policy.pth]")
    saved = set(model._get_torch_save_params()[0])
    for name in sorted({*other_states, *optimizers} - saved):
        raise UnsafeObjectError(f"{path} [{name}.pth]: refused; its fields' model saves {', '.join(sorted(saved))}")
    for name, other in other_states.items():
        check_state(recursive_getattr(model, name).state_dict(), other, f"{path} [{name}.pth]")
        check_finite(other, f"{path} [{name}.pth]")
    try:
        parameters: dict[str, Any] = {"policy": state, **other_states, **optimizers}
        model.set_parameters(parameters, exact_match=True, device=device)
    except (ValueError, RuntimeError, KeyError, AttributeError, TypeError) as exc:  # an optimizer the model has not
        reason = " ".join(str(exc).split())[:200]
        raise ValueError(f"{path}: its parameters do not fit the model ({type(exc).__name__}: {reason})") from None
    load_variables(model, variables, f"{path} [{variables_entry}]")
    exercise_policy(model.policy, str(path))
    for name in other_states:
        exercise_policy(recursive_getattr(model, name), f"{path} [{name}.pth]")
    return model
