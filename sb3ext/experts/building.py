"""Building a frozen expert from an untrusted SB3 / sb3-contrib checkpoint, without SB3's ``load``.

SB3's ``BaseAlgorithm.load`` unpickles every ``:serialized:`` field of the zip's ``data``, copies every field
onto the model (``n_steps``, ``buffer_size`` ... size its buffers), passes the plain-JSON ``env`` field to
``gym.make`` (which imports the module named before a ``:``) and writes tensors to whatever attribute path
their names spell. None of that happens here:

* only the fields an expert needs are read: ``policy_class`` (matched against an allow-list by its opcodes,
  never unpickled), ``observation_space`` / ``action_space`` (restricted unpickler, spaces and numpy only),
  ``policy_kwargs`` (restricted unpickler, then checked against the policy class's signature and against a
  size bound derived from the checkpoint's own tensors), ``gamma`` and ``ent_coef`` (checked numbers);
  every other serialized field is only scanned for the globals it names and never built;
* the model is constructed with ``_init_setup_model=False``, given those fields and sb3ext's own sizes
  (one env, no replay buffer, a one-step rollout buffer), then set up;
* ``policy.pth`` must hold exactly the parameter names and shapes of that policy, and the variables entry
  (``pytorch_variables.pth``) only the algorithm's own variables (``log_ent_coef``), with their shapes;
  optimizer states are never read.

``vecnormalize.pkl`` and ``config.yml`` are read here too, with their statistics and sizes checked.
"""

from __future__ import annotations

import importlib
import inspect
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3 import A2C, DDPG, DQN, PPO, SAC, TD3
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.policies import BasePolicy
from stable_baselines3.common.running_mean_std import RunningMeanStd
from stable_baselines3.common.save_util import recursive_getattr
from stable_baselines3.common.utils import ConstantSchedule

from sb3ext.common.files import read_regular
from sb3ext.common.serialization import (
    MAX_TEXT,
    Recipe,
    UnsafeObjectError,
    check_shape,
    pickle_globals,
    printable,
    record_args,
    restricted_loads,
    safe_yaml_load,
    trusting_loads,
)
from sb3ext.experts.checkpoint import CheckpointArchive

#: Fields of ``data`` an expert is built from; every other serialized field is only scanned, never built.
USED_FIELDS = ("policy_class", "observation_space", "action_space", "policy_kwargs")
#: Modules whose names may appear in the serialized fields that are scanned but never built.
_SCANNED_MODULES = (
    "numpy",
    "gym",
    "gymnasium",
    "collections",
    "stable_baselines3",
    "sb3_contrib",
    "torch",
    "cloudpickle",
    "copyreg",
    "types",
    "functools",
    "_codecs",
)
_SCANNED_BUILTINS = {"float", "int", "getattr", "set", "frozenset", "bool", "list", "dict", "tuple", "object", "type"}
#: Single names from other trusted packages that scanned fields may hold: the zoo's own schedule class, which
#: ``rl_zoo3.train`` pickles by reference into ``learning_rate`` / ``lr_schedule`` / ``clip_range`` of every
#: agent it trains with a ``lin_`` schedule (never built here either)
_SCANNED_NAMES = {("rl_zoo3.utils", "SimpleLinearSchedule")}


# ------------------------------------------------------------------------------------------------ allow-lists
def policy_allow_list() -> dict[tuple[str, str], tuple[type[BasePolicy], type[BaseAlgorithm]]]:
    """(module, class name) of every SB3 / sb3-contrib policy class -> (class, algorithm to build it with)."""
    from sb3_contrib import ARS, QRDQN, TQC, TRPO

    modules: list[tuple[str, type[BaseAlgorithm]]] = [
        ("sb3_contrib.ars.policies", ARS),
        ("stable_baselines3.common.policies", PPO),
        ("stable_baselines3.ppo.policies", PPO),
        ("stable_baselines3.a2c.policies", A2C),
        ("stable_baselines3.sac.policies", SAC),
        ("stable_baselines3.td3.policies", TD3),
        ("stable_baselines3.dqn.policies", DQN),
        ("sb3_contrib.qrdqn.policies", QRDQN),
        ("sb3_contrib.tqc.policies", TQC),
        ("sb3_contrib.trpo.policies", TRPO),
    ]
    allowed: dict[tuple[str, str], tuple[type[BasePolicy], type[BaseAlgorithm]]] = {}
    for module_name, algo in modules:
        module = importlib.import_module(module_name)
        for name, obj in vars(module).items():
            if isinstance(obj, type) and issubclass(obj, BasePolicy) and obj is not BasePolicy:
                allowed[(module_name, name)] = (obj, algo)
    return allowed


def _device_call(inst: Any, args: tuple[Any, ...]) -> th.device:
    if not args or not isinstance(args[0], str) or len(args[0]) > 16:
        raise ValueError(f"torch.device called with {args!r}")
    return th.device("cpu")  # the stored device is discarded (SB3 does the same)


def policy_kwargs_recipes() -> dict[tuple[str, str], Recipe]:
    """Globals a serialized ``policy_kwargs`` may name: layer, extractor and optimizer classes (as values only)."""
    import torch.nn.modules.activation as activations

    recipes: dict[tuple[str, str], Recipe] = {("torch", "device"): Recipe("torch.device", call=_device_call)}
    for name in ("ReLU", "Tanh", "ELU", "LeakyReLU", "SiLU", "GELU", "Sigmoid", "Softplus", "Mish", "Identity"):
        if hasattr(activations, name):
            recipes[("torch.nn.modules.activation", name)] = Recipe(f"torch.nn.{name}", value=getattr(activations, name))
    recipes[("torch.nn.modules.linear", "Identity")] = Recipe("torch.nn.Identity", value=th.nn.Identity)
    for module_name, names in {
        "torch.optim.adam": ["Adam"],
        "torch.optim.adamw": ["AdamW"],
        "torch.optim.rmsprop": ["RMSprop"],
        "torch.optim.sgd": ["SGD"],
        "stable_baselines3.common.sb2_compat.rmsprop_tf_like": ["RMSpropTFLike"],
        "stable_baselines3.common.torch_layers": ["FlattenExtractor", "NatureCNN"],
    }.items():
        module = importlib.import_module(module_name)
        for name in names:
            recipes[(module_name, name)] = Recipe(f"{module_name}.{name}", value=getattr(module, name))
    return recipes


#: Attribute names a pickled ``VecNormalize`` has had across SB3 versions.
VECNORMALIZE_ATTRS = frozenset(
    {
        "obs_rms",
        "ret_rms",
        "clip_obs",
        "clip_reward",
        "gamma",
        "epsilon",
        "training",
        "norm_obs",
        "norm_reward",
        "num_envs",
        "observation_space",
        "action_space",
        "obs_keys",
        "norm_obs_keys",
        "obs_spaces",
        "old_obs",
        "old_reward",
        "render_mode",
        "metadata",
        "reset_infos",
        "_options",
        "_seeds",
        "returns",
    }
)


@dataclass
class VecNormalizeState:
    """The state of a pickled ``VecNormalize``, without building the wrapper."""

    state: Any


def _rms_finish(inst: Any, source: str) -> RunningMeanStd:
    state = inst.state
    if state is None:  # RunningMeanStd(epsilon, shape) called directly
        shape = inst.args[1] if len(inst.args) > 1 else inst.kwargs.get("shape", ())
        return RunningMeanStd(shape=check_shape(shape, source, "RunningMeanStd"))
    if not isinstance(state, dict):
        raise ValueError(f"{source}: RunningMeanStd state is a {type(state).__name__}, not a mapping")
    rms = RunningMeanStd.__new__(RunningMeanStd)
    rms.mean = state.get("mean")  # type: ignore[assignment]
    rms.var = state.get("var")  # type: ignore[assignment]
    rms.count = state.get("count")  # type: ignore[assignment]
    return rms


def vecnormalize_recipes() -> dict[tuple[str, str], Recipe]:
    return {
        ("stable_baselines3.common.running_mean_std", "RunningMeanStd"): Recipe(
            "RunningMeanStd", call=record_args, new=True, attrs=frozenset({"mean", "var", "count"}), finish=_rms_finish
        ),
        ("stable_baselines3.common.vec_env.vec_normalize", "VecNormalize"): Recipe(
            "VecNormalize", new=True, attrs=VECNORMALIZE_ATTRS, finish=lambda inst, source: VecNormalizeState(inst.state)
        ),
    }


# ------------------------------------------------------------------------------------------------ data fields
def scan_field(archive: CheckpointArchive, data: dict[str, Any], key: str) -> None:
    raw = archive.serialized(data, key)
    if raw is None:
        return
    source = f"{archive.path} [data: {key}]"
    for module, name in named_globals(raw, source):
        root = module.split(".")[0]
        if (root in ("builtins", "__builtin__") and name in _SCANNED_BUILTINS) or root in _SCANNED_MODULES:
            continue
        if (module, name) in _SCANNED_NAMES:
            continue
        raise UnsafeObjectError(
            f"{source}: refused to load {printable(f'{module}.{name}')} (this field is never built, but a checkpoint "
            f"naming it is not a plain SB3 checkpoint; allowed modules: {', '.join(_SCANNED_MODULES)})"
        )


def named_globals(raw: bytes, source: str) -> list[tuple[str, str]]:
    try:
        return pickle_globals(raw)
    except Exception as exc:  # pickletools raises ValueError and others on garbage
        raise ValueError(f"{source}: malformed pickle ({type(exc).__name__}: {exc})") from None


def _policy_class(archive: CheckpointArchive, data: dict[str, Any]) -> tuple[type[BasePolicy], type[BaseAlgorithm]]:
    raw = archive.serialized(data, "policy_class")
    source = f"{archive.path} [data: policy_class]"
    if raw is None:
        raise ValueError(f"{source}: missing (an SB3 checkpoint stores its policy class there)")
    refs = named_globals(raw, source)
    policies = policy_allow_list()
    if len(refs) != 1 or refs[0] not in policies:
        shown = ", ".join(printable(f"{m}.{n}") for m, n in refs[:5]) or "nothing"
        raise UnsafeObjectError(f"{source}: refused policy class {shown} (allowed: SB3 and sb3-contrib policies)")
    policy_class, algo_class = policies[refs[0]]
    if issubclass(algo_class, (PPO, A2C)) or algo_class.__name__ == "TRPO":
        # PPO, A2C and TRPO share ActorCriticPolicy: tell them apart by their own hyperparameters
        from sb3_contrib import TRPO

        algo_class = TRPO if "cg_max_steps" in data else PPO if "clip_range" in data else A2C
    return policy_class, algo_class


def read_space(archive: CheckpointArchive, data: dict[str, Any], key: str, allow_dict: bool = False) -> spaces.Space:
    """A checkpoint's space; ``allow_dict``: a ``Dict`` of flat spaces too (a learner's ``MultiInputPolicy``)."""
    raw = archive.serialized(data, key)
    source = f"{archive.path} [data: {key}]"
    if raw is None:
        raise ValueError(f"{source}: missing (an SB3 checkpoint stores its spaces there)")
    space = restricted_loads(raw, source)
    flat = (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary)
    if not isinstance(space, flat) and not (allow_dict and isinstance(space, spaces.Dict)):
        allowed = (
            "Box, Discrete, MultiDiscrete, MultiBinary or Dict"
            if allow_dict
            else "Box, Discrete, MultiDiscrete or MultiBinary"
        )
        raise ValueError(f"{source}: a {type(space).__name__}, not a {allowed} space")
    return space


def read_policy_kwargs(archive: CheckpointArchive, data: dict[str, Any]) -> dict[str, Any]:
    raw = archive.serialized(data, "policy_kwargs")
    source = f"{archive.path} [data: policy_kwargs]"
    kwargs = (
        restricted_loads(raw, source, policy_kwargs_recipes(), spaces=False)
        if raw is not None
        else data.get("policy_kwargs", {})
    )
    if kwargs is None:
        kwargs = {}
    if not isinstance(kwargs, dict) or not all(isinstance(k, str) for k in kwargs):
        raise ValueError(f"{source}: a {type(kwargs).__name__}, not a mapping of keyword arguments")
    kwargs = dict(kwargs)
    kwargs.pop("device", None)
    arch = kwargs.get("net_arch")
    if isinstance(arch, list) and arch and isinstance(arch[0], dict):  # SB3 < 1.8 format, converted as SB3 does
        kwargs["net_arch"] = arch[0]
    return kwargs


def _number(data: dict[str, Any], key: str, default: float, low: float, high: float, where: str) -> float:
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (low <= value <= high):
        raise ValueError(f"{where} field {key}: {value!r}; allowed: a number in [{low}, {high}]")
    return float(value)


def _ent_coef(data: dict[str, Any], where: str) -> str | float:
    value = data.get("ent_coef", "auto")
    if isinstance(value, str) and re.fullmatch(r"auto(_\d+(\.\d*)?(e-?\d+)?)?", value):
        if "_" not in value or 0 < float(value.split("_")[1]) < 1e6:
            return value
    if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value < 1e6:
        return float(value)
    raise ValueError(f"{where} field ent_coef: {value!r}; allowed: 'auto', 'auto_<positive number>' or a number >= 0")


# ------------------------------------------------------------------------------------------------ size bound
def _real_elements(tensor: th.Tensor) -> int:
    """Elements a tensor really stores (a zero-stride view of 50000x50000 stores 1)."""
    return min(tensor.numel(), tensor.untyped_storage().nbytes() // max(tensor.element_size(), 1))


def _flat_dim(space: spaces.Space) -> int:
    if isinstance(space, spaces.Discrete):
        return int(space.n)
    if isinstance(space, spaces.MultiDiscrete):
        return int(np.sum(space.nvec))
    return int(math.prod(space.shape or (1,)))


def check_policy_kwargs(
    kwargs: dict[str, Any],
    policy_class: type[BasePolicy],
    observation_space: spaces.Space,
    action_space: spaces.Space,
    state: dict[str, th.Tensor],
    where: str,
) -> None:
    """Keys the policy accepts, values of sane types, and a network no larger than the stored tensors."""
    accepted: list[str] = []
    for klass in policy_class.__mro__:  # a policy that passes **kwargs on accepts its parent's keys too
        if klass is object or "__init__" not in vars(klass):
            continue
        parameters = inspect.signature(klass.__init__).parameters.values()  # type: ignore[misc]
        accepted += [
            p.name
            for p in parameters
            if p.name not in ("self", "observation_space", "action_space", "lr_schedule", *accepted)
            and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        ]
        if not any(p.kind == p.VAR_KEYWORD for p in parameters):
            break
    unknown = sorted(set(kwargs) - set(accepted))
    if unknown:
        raise ValueError(
            f"{where}: key(s) {', '.join(unknown)} not accepted by {policy_class.__name__}; allowed: {', '.join(accepted)}"
        )
    stored = sum(_real_elements(t) for t in state.values())
    n_tensors = len(state)
    stack: list[tuple[str, Any, int]] = [(k, v, 1) for k, v in kwargs.items()]
    while stack:
        key, value, depth = stack.pop()
        if depth > 8:
            raise ValueError(f"{where}: {key} nested deeper than 8 levels")
        if isinstance(value, bool) or value is None or isinstance(value, type):
            continue
        if isinstance(value, (int, np.integer)):
            if not -stored <= int(value) <= stored:
                raise UnsafeObjectError(f"{where}: {key}={int(value)} exceeds the {stored} numbers stored in policy.pth")
        elif isinstance(value, (float, np.floating)):
            if not math.isfinite(float(value)):
                raise ValueError(f"{where}: {key}={value} is not finite")
        elif isinstance(value, str):
            if len(value) > 64:
                raise ValueError(f"{where}: {key} is a {len(value)}-character string")
        elif isinstance(value, (list, tuple, dict)):
            if len(value) > n_tensors + 16:
                raise UnsafeObjectError(f"{where}: {key} has {len(value)} items, more than policy.pth's {n_tensors} tensors")
            items = value.items() if isinstance(value, dict) else enumerate(value)
            stack.extend((f"{key}[{k!r}]", v, depth + 1) for k, v in items)
        else:
            raise ValueError(
                f"{where}: {key} is a {type(value).__name__}; allowed: numbers, strings, lists, mappings, classes"
            )
    n_critics = int(kwargs.get("n_critics", 1) or 1)
    if n_critics < 1 or n_critics > max(n_tensors // 2, 1):
        raise UnsafeObjectError(f"{where}: n_critics={n_critics}, but policy.pth holds only {n_tensors} tensors")
    bound = _weights_lower_bound(kwargs, policy_class, observation_space, action_space, n_critics)
    if bound > stored:
        raise UnsafeObjectError(
            f"{where}: describes a network of at least {bound} weights, but policy.pth stores {stored} numbers; "
            "net_arch and friends must fit the stored tensors"
        )


#: policy_kwargs keys that name a class, and the base it must derive from
_CLASS_KEYS = {"features_extractor_class": "BaseFeaturesExtractor", "activation_fn": "Module", "optimizer_class": "Optimizer"}


def check_fit(policy_class: type[BasePolicy], kwargs: dict[str, Any], observation_space: spaces.Space, where: str) -> None:
    """Before anything is built: the classes ``policy_kwargs`` names are what their keys need, and the policy's
    features extractor reads this observation space (a ``Dict`` only through a multi-input policy, frames only through
    a CNN). A mismatch is one line naming the file and the field (SB3 would fail inside the build with a bare
    ``AttributeError``)."""
    from stable_baselines3.common.preprocessing import is_image_space
    from stable_baselines3.common.torch_layers import BaseFeaturesExtractor, CombinedExtractor, NatureCNN

    bases = {"BaseFeaturesExtractor": BaseFeaturesExtractor, "Module": th.nn.Module, "Optimizer": th.optim.Optimizer}
    for key, base_name in _CLASS_KEYS.items():
        value = kwargs.get(key)
        if value is not None and not (isinstance(value, type) and issubclass(value, bases[base_name])):
            shown = getattr(value, "__qualname__", type(value).__name__)
            raise ValueError(f"{where} [data: policy_kwargs]: {key} {shown} is not a {base_name} subclass")
    parameter = inspect.signature(policy_class.__init__).parameters.get("features_extractor_class")
    extractor = kwargs.get("features_extractor_class") or (parameter.default if parameter is not None else None)
    if not isinstance(extractor, type):
        return  # a policy without a features extractor (ARS's linear policy)
    reads_dict = issubclass(extractor, CombinedExtractor)
    if reads_dict != isinstance(observation_space, spaces.Dict):
        field = "policy_kwargs" if "features_extractor_class" in kwargs else "policy_class"
        raise ValueError(
            f"{where} [data: {field}]: {policy_class.__name__} with {extractor.__name__} reads "
            f"{'Dict' if reads_dict else 'flat'} observations; its observation_space is a {type(observation_space).__name__}"
        )
    if issubclass(extractor, NatureCNN) and not is_image_space(observation_space, check_channels=False):
        field = "policy_kwargs" if "features_extractor_class" in kwargs else "policy_class"
        raise ValueError(
            f"{where} [data: {field}]: {policy_class.__name__} with NatureCNN reads image frames; its observation_space "
            "is not an image space (uint8 Box of height x width x channels)"
        )


def _weights_lower_bound(
    kwargs: dict[str, Any], policy_class: type[BasePolicy], obs_space: spaces.Space, act_space: spaces.Space, n_critics: int
) -> int:
    """A lower bound on the number of weights the policy would allocate (consecutive layer products)."""
    extractor_kwargs = kwargs.get("features_extractor_kwargs") or {}
    features_dim = extractor_kwargs.get("features_dim") if isinstance(extractor_kwargs, dict) else None
    extractor = getattr(kwargs.get("features_extractor_class"), "__name__", "")
    cnn = "Cnn" in policy_class.__name__ or extractor == "NatureCNN"
    in_dim = int(features_dim) if isinstance(features_dim, int) else 512 if cnn else _flat_dim(obs_space)
    out_dim = _flat_dim(act_space)
    # a policy with no net_arch parameter (ARS's linear policy) has no hidden layer
    arch = kwargs.get("net_arch", [64] if "net_arch" in inspect.signature(policy_class.__init__).parameters else [])
    lists: list[tuple[str, list[int]]] = []
    if isinstance(arch, list) and all(isinstance(w, int) and not isinstance(w, bool) for w in arch):
        lists.append(("pi", arch))
    elif isinstance(arch, dict):
        lists.extend((str(k), v) for k, v in arch.items() if isinstance(v, list) and all(isinstance(w, int) for w in v))
    bound = in_dim  # at least one weight per input feature
    for key, widths in lists:
        n_out = 1 if key in ("vf", "qf") else out_dim
        layers = [in_dim, *[max(int(w), 0) for w in widths], n_out]
        cost = sum(a * b for a, b in zip(layers, layers[1:]))
        bound = max(bound, cost * (n_critics if key == "qf" else 1))
    n_quantiles = kwargs.get("n_quantiles")
    if isinstance(n_quantiles, int):
        bound = max(bound, n_quantiles * n_critics)
    return bound


# ------------------------------------------------------------------------------------------------ the model
def check_state(expected: dict[str, th.Tensor], state: dict[str, th.Tensor | None], where: str) -> None:
    for name in state:
        if not re.fullmatch(r"[A-Za-z0-9_]+(\.[A-Za-z0-9_]+)*", name) or "__" in name:
            raise UnsafeObjectError(f"{where}: refused parameter name {name!r} (names may not walk attributes)")
    unexpected = sorted(set(state) - set(expected))
    missing = sorted(set(expected) - set(state))
    if unexpected or missing:
        raise ValueError(
            f"{where}: parameter names differ from the policy built from the checkpoint's spaces and policy_kwargs "
            f"(unexpected: {', '.join(unexpected) or 'none'}; missing: {', '.join(missing) or 'none'})"
        )
    for name, target in expected.items():
        value = state[name]
        if value is None or tuple(value.shape) != tuple(target.shape):
            shape = None if value is None else tuple(value.shape)
            raise ValueError(
                f"{where}: {name} has shape {shape}, the policy built from the checkpoint needs {tuple(target.shape)}"
            )
        if value.dtype.is_complex or (value.dtype.is_floating_point != target.dtype.is_floating_point):
            raise ValueError(f"{where}: {name} has dtype {value.dtype}, the policy needs {target.dtype}")


def build_expert_model(path: Path, device: th.device | str = "cpu") -> BaseAlgorithm:
    """The frozen model of an untrusted checkpoint (see the module docstring); errors name the file and entry."""
    with CheckpointArchive(path) as archive:
        data = archive.data()
        where = archive.where("data")
        policy_class, algo_class = _policy_class(archive, data)
        if data.get("env") is not None:
            raise UnsafeObjectError(
                f"{where} field env: refused {str(data['env'])[:80]!r}; SB3 never saves an env in a checkpoint, and "
                "gym.make would import the module it names (the expert's env comes from the caller or the zoo)"
            )
        for key in data:
            if key not in USED_FIELDS:
                scan_field(archive, data, key)
        observation_space = read_space(archive, data, "observation_space")
        action_space = read_space(archive, data, "action_space")
        policy_kwargs = read_policy_kwargs(archive, data)
        gamma = _number(data, "gamma", 0.99, 0.0, 1.0, where)
        use_sde = bool(data.get("use_sde", False)) if isinstance(data.get("use_sde", False), bool) else None
        if use_sde is None:
            raise ValueError(f"{where} field use_sde: {data.get('use_sde')!r}; allowed: true or false")
        state = archive.tensors("policy.pth")
        variables_entry = next((e for e in ("pytorch_variables.pth", "tensors.pth") if archive.has(e)), None)
        variables = archive.tensors(variables_entry) if variables_entry else {}
    policy_where = f"{path} [policy.pth]"
    check_fit(policy_class, policy_kwargs, observation_space, str(path))
    check_policy_kwargs(policy_kwargs, policy_class, observation_space, action_space, state, f"{path} [data: policy_kwargs]")  # type: ignore[arg-type]
    _check_numbers(algo_class, action_space, path)
    if algo_class is TD3:
        n_critics = len({k.split(".")[1] for k in state if k.startswith("critic.qf")})
        algo_class = DDPG if n_critics == 1 else TD3
        policy_kwargs = {**policy_kwargs, "n_critics": n_critics}
    model = algo_class(policy=policy_class, env=None, device=device, _init_setup_model=False)  # type: ignore[call-arg]
    model.observation_space = observation_space
    model.action_space = action_space
    model.n_envs = 1
    model.policy_kwargs = policy_kwargs
    model.gamma = gamma  # type: ignore[attr-defined]
    model.learning_rate = 0.0
    if hasattr(model, "buffer_size"):
        model.buffer_size = 1  # type: ignore[attr-defined]
    if hasattr(model, "n_steps"):
        model.n_steps = 1  # type: ignore[attr-defined]
        model.use_sde = use_sde
    if hasattr(model, "ent_coef") and hasattr(model, "target_entropy"):
        model.ent_coef = _ent_coef(data, where)  # type: ignore[attr-defined]
        model.target_entropy = -float(_flat_dim(action_space))  # type: ignore[attr-defined]
    try:
        model._setup_model()
    except (TypeError, ValueError, AssertionError, RuntimeError, AttributeError, KeyError, IndexError) as exc:
        reason = " ".join(str(exc).split())[:200]
        raise ValueError(f"{where}: the policy its fields describe cannot be built ({type(exc).__name__}: {reason})") from None
    if model.policy.squash_output and isinstance(action_space, spaces.Box) and not action_space.is_bounded("both"):
        raise ValueError(
            f"{path} [data: action_space]: infinite bounds; its policy squashes its actions into the bounds (NaN)"
        )
    expected = model.policy.state_dict()
    if algo_class.__name__ == "ARS":
        state = _legacy_ars_names(state, expected)
    check_state(expected, state, policy_where)
    check_finite(state, policy_where)
    with th.no_grad():
        model.policy.load_state_dict({k: v for k, v in state.items() if v is not None}, strict=True)
    load_variables(model, variables, f"{path} [{variables_entry}]")
    return model


def _legacy_ars_names(state: dict[str, th.Tensor | None], expected: dict[str, th.Tensor]) -> dict[str, th.Tensor | None]:
    """sb3-contrib before 2.0 built ARS's linear policy as a bare ``nn.Linear`` (``action_net.weight``); it is now the
    first layer of an ``nn.Sequential`` (``action_net.0.weight``). Rename only names that exist in the new layout."""
    renamed = {}
    for name, value in state.items():
        new = name.replace("action_net.", "action_net.0.", 1)
        renamed[new if name not in expected and new in expected and new not in state else name] = value
    return renamed


#: algorithms whose policy squashes its actions into the Box bounds (infinite bounds give NaN actions)
_SQUASHING = ("SAC", "TD3", "DDPG", "TQC")
#: the action spaces each algorithm can have
_ACTION_SPACES = {"SAC": spaces.Box, "TD3": spaces.Box, "DDPG": spaces.Box, "TQC": spaces.Box, "DQN": spaces.Discrete,
                  "QRDQN": spaces.Discrete}  # fmt: skip
#: bound on |log_ent_coef|: exp(20) is 4.9e8, and exp(100) overflows float32
MAX_LOG_ENT_COEF = 20.0


def _check_numbers(algo_class: type[BaseAlgorithm], action_space: spaces.Space, path: Path) -> None:
    """Refuse an action space the algorithm cannot have, and infinite bounds where its policy squashes its actions."""
    name = algo_class.__name__
    wanted = _ACTION_SPACES.get(name)
    if wanted is not None and not isinstance(action_space, wanted):
        raise ValueError(
            f"{path} [data: action_space]: a {type(action_space).__name__} space; {name} acts in a {wanted.__name__} space"
        )
    if name in _SQUASHING and isinstance(action_space, spaces.Box) and not action_space.is_bounded("both"):
        raise ValueError(
            f"{path} [data: action_space]: infinite bounds; {name}'s policy squashes its actions into the bounds (NaN)"
        )


def check_finite(state: dict[str, th.Tensor | None], where: str) -> None:
    """Refuse non-finite weights; only after the shapes are checked (a zero-stride view may claim billions of
    elements)."""
    for key, tensor in state.items():
        if tensor is not None and tensor.dtype.is_floating_point and not bool(th.isfinite(tensor).all()):
            raise ValueError(f"{where}: {key} holds non-finite values")


def load_variables(model: BaseAlgorithm, variables: dict[str, th.Tensor | None], where: str) -> None:
    allowed = list(model._get_torch_save_params()[1])
    if hasattr(model, "ent_coef"):  # SAC / TQC save both names, one of them None
        allowed = sorted({*allowed, "log_ent_coef", "ent_coef_tensor"})
    for name, value in variables.items():
        if name not in allowed:
            raise UnsafeObjectError(
                f"{where}: refused variable {name!r}; allowed for {type(model).__name__}: {', '.join(allowed) or 'none'}"
            )
        if value is None:
            continue
        target = recursive_getattr(model, name) if "." in name else getattr(model, name, None)  # names allowed above
        if not isinstance(target, th.Tensor):
            raise ValueError(f"{where}: holds {name}, but the model built from the checkpoint's ent_coef has none")
        if tuple(value.shape) != tuple(target.shape) or not value.dtype.is_floating_point:
            raise ValueError(
                f"{where}: {name} has shape {tuple(value.shape)} ({value.dtype}), the model needs {tuple(target.shape)}"
            )
        if not bool(th.isfinite(value).all()):
            raise ValueError(f"{where}: {name} is not finite")
        if name.rsplit(".", 1)[-1] == "log_ent_coef" and float(value.detach().abs().max()) > MAX_LOG_ENT_COEF:
            raise ValueError(
                f"{where}: log_ent_coef {float(value.detach().max()):.3g}; allowed: at most {MAX_LOG_ENT_COEF} in size "
                "(its exponential, the entropy coefficient, must stay finite)"
            )
        with th.no_grad():
            target.copy_(value)


def trusted_load(path: Path, algo_class: type[BaseAlgorithm], device: th.device | str) -> BaseAlgorithm:
    """SB3's own load (runs code from the file): only with explicit trust. Old gym spaces are mapped."""
    import base64

    with CheckpointArchive(path) as archive:
        data = archive.data()
    custom: dict[str, Any] = {
        "learning_rate": 0.0,
        "lr_schedule": ConstantSchedule(0.0),
        "clip_range": ConstantSchedule(0.0),
        "exploration_schedule": ConstantSchedule(0.0),
    }
    for key in ("observation_space", "action_space"):
        custom[key] = trusting_loads(base64.b64decode(data[key][":serialized:"]))
    kwargs: dict[str, Any] = {"buffer_size": 1} if "buffer_size" in data else {}
    return algo_class.load(path, device=device, custom_objects=custom, **kwargs)


def algo_of(path: Path) -> type[BaseAlgorithm]:
    """The algorithm a checkpoint's policy class belongs to (for the trusted path)."""
    with CheckpointArchive(path) as archive:
        data = archive.data()
        _, algo_class = _policy_class(archive, data)
        if algo_class is TD3:
            state = archive.tensors("policy.pth")
            algo_class = DDPG if len({k.split(".")[1] for k in state if k.startswith("critic.qf")}) == 1 else TD3
    return algo_class


# ------------------------------------------------------------------------------------------------ companions
@dataclass(frozen=True)
class Normalization:
    """Frozen ``VecNormalize`` statistics of an expert: what its networks saw during training."""

    obs_rms: RunningMeanStd | None
    clip_obs: float
    ret_rms: RunningMeanStd | None
    clip_reward: float
    epsilon: float


def load_normalization(
    path: Path, observation_space: spaces.Space, trust_remote_code: bool = False, norm_reward: bool | None = None
) -> Normalization:
    """The checked statistics of a zoo ``vecnormalize.pkl`` (allow-list unpickler unless trusted).

    :param norm_reward: whether the rewards were normalised in training, where the caller knows it better than the
        file (an expert's ``config.yml``); None: the file's own ``norm_reward`` flag"""
    try:
        return _load_normalization(path, observation_space, trust_remote_code, norm_reward)
    except (ValueError, UnsafeObjectError):
        raise
    except Exception as exc:  # numpy and the unpickler's builders raise TypeError & co. on damaged state
        raise ValueError(f"{path}: unreadable VecNormalize statistics ({type(exc).__name__}: {str(exc)[:200]})") from None


def _load_normalization(
    path: Path, observation_space: spaces.Space, trust_remote_code: bool, norm_reward: bool | None
) -> Normalization:
    raw = read_regular(path, MAX_TEXT * 16, "VecNormalize statistics")
    if trust_remote_code:
        loaded: Any = trusting_loads(raw)
        state = getattr(loaded, "__dict__", loaded)
    else:
        loaded = restricted_loads(raw, str(path), vecnormalize_recipes())
        if not isinstance(loaded, VecNormalizeState):
            raise ValueError(f"{path}: holds a {type(loaded).__name__}, not VecNormalize statistics")
        state = loaded.state
    if isinstance(state, tuple) and len(state) == 2 and isinstance(state[0], dict):
        state = state[0]
    if not isinstance(state, dict):
        raise ValueError(f"{path}: the VecNormalize state is a {type(state).__name__}, not a mapping")

    def positive(key: str, default: float, low: float, high: float) -> float:
        value = state.get(key, default)
        if isinstance(value, bool) or not isinstance(value, (int, float, np.number)) or not (low <= float(value) <= high):
            raise ValueError(f"{path}: {key}={value!r}; allowed: a number in [{low:g}, {high:g}]")
        return float(value)

    def statistics(flag: str, key: str, shape: tuple[int, ...], used: bool | None = None) -> RunningMeanStd | None:
        value = state.get(key)
        if not (state.get(flag, True) if used is None else used) or value is None:
            return None
        if not isinstance(value, RunningMeanStd):
            raise ValueError(f"{path}: {key} is a {type(value).__name__}, not RunningMeanStd statistics")
        for part in ("mean", "var"):
            array = getattr(value, part, None)
            array = np.asarray(array) if isinstance(array, (np.ndarray, np.number, float, int)) else None
            if array is None or array.dtype.kind not in "fiu":
                raise ValueError(f"{path}: {key}.{part} is not a numeric array")
            if array.shape != shape:
                raise ValueError(f"{path}: {key}.{part} has shape {array.shape}, the expert's observations need {shape}")
            if not np.all(np.isfinite(array)):
                raise ValueError(f"{path}: {key}.{part} holds non-finite values")
            if part == "var" and np.any(array < 0):
                raise ValueError(f"{path}: {key}.var holds negative values (a variance is >= 0)")
            setattr(value, part, array.astype(np.float64))
        count = value.count
        if isinstance(count, bool) or not isinstance(count, (int, float, np.number)) or not (0 < float(count) < np.inf):
            raise ValueError(f"{path}: {key}.count={count!r}; allowed: a positive finite number")
        return value

    obs_shape = tuple(observation_space.shape or ())
    return Normalization(
        obs_rms=statistics("norm_obs", "obs_rms", obs_shape),
        # a clip of at most 1e6 and an epsilon of at least 1e-12 keep every normalised observation finite
        clip_obs=positive("clip_obs", 10.0, 1e-6, 1e6),
        ret_rms=statistics("norm_reward", "ret_rms", (), norm_reward),
        clip_reward=positive("clip_reward", 10.0, 1e-6, 1e6),
        epsilon=positive("epsilon", 1e-8, 1e-12, 1.0),
    )


def read_config(path: Path | None) -> dict[str, Any]:
    """A zoo ``config.yml`` (safe YAML, bounded), as a mapping."""
    if path is None:
        return {}
    config = safe_yaml_load(read_regular(path, MAX_TEXT, "a zoo config.yml"), str(path))
    if config is None:
        return {}
    if not isinstance(config, dict):
        raise ValueError(f"{path}: a YAML {type(config).__name__}, not a zoo config.yml (expected a mapping)")
    return config
