"""rl-zoo3 plug-in: everything sb3ext registers in an unmodified zoo, in one place.

Called by :mod:`sb3ext._hook` right after gymnasium and each zoo module in its target list is imported
(and safe to call by hand, e.g. ``sb3ext.zoo.register()``). Registration is idempotent.

* ``rl_zoo3.utils``: our algorithms in ``ALGOS`` (``--algo`` choices, ``enjoy``, ``-i``).
* ``rl_zoo3.import_envs``: our Gymnasium environments (the zoo checks the registry first).
* ``rl_zoo3.hyperparams_opt``: Optuna samplers/converters for our algorithms, where defined.
* ``rl_zoo3.exp_manager``: the default hyperparameter file of our algorithms, and of stock algorithms on
  our ``sb3ext/...`` environments (``hyperparams/<algo>.yml`` shipped with sb3ext), so no ``-conf`` is
  needed; ``--trial-id 0`` honoured; a database ``--storage`` of ``-optimize`` opened with a heartbeat
  (:func:`sb3ext.tuning.make_storage`).
* ``huggingface_sb3``: repairs of the zoo's Hub scripts on this stack (see :func:`repair_huggingface_sb3`).

What the zoo reads from a run folder or a checkpoint is made safe by :mod:`sb3ext.zoo_safety`; this module puts its
replacements in place.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from sb3ext.common.resources import hyperparams_path
from sb3ext.common.serialization import UnsafeObjectError
from sb3ext.zoo_safety import (
    METRICS_ARCHIVE,
    REPLAY_MODULES,
    check_metrics_archive,
    check_wrapper_names,
    continue_safely,
    safe_vecnormalize_class,
    secure_replay,
)

#: zoo key -> "module:ClassName"; the zoo key is the algorithm's module name (docs/architecture.md).
ALGORITHMS: dict[str, str] = {
    "aggrevated": "sb3ext.algos.aggrevated:AggreVaTeD",
    "ppo_kl": "sb3ext.algos.ppo_kl:KLPPO",
    "rpo": "sb3ext.algos.rpo:RPO",
    "ppo_tanh": "sb3ext.algos.ppo_tanh:TanhPPO",
}
#: baselines for the benchmarks: zoo key -> ("module:ClassName", the algorithm whose YAML they run with); no sampler
BASELINES: dict[str, tuple[str, str]] = {
    "dagger": ("sb3ext.algos.aggrevated:MatchedDAgger", "aggrevated"),
}


def _load_class(target: str) -> type:
    module_name, class_name = target.split(":")
    return getattr(importlib.import_module(module_name), class_name)


def _sb3ext_config(algo: str, env_id: str) -> Path | None:
    """sb3ext's YAML for sb3ext algorithms, and for stock algorithms on sb3ext's own environments."""
    if algo in ALGORITHMS or algo in BASELINES or env_id.startswith("sb3ext/"):
        try:
            return hyperparams_path(BASELINES[algo][1] if algo in BASELINES else algo)
        except ValueError:
            return None
    return None


def register_algorithms(utils_module: ModuleType) -> None:
    algos: dict[str, Any] = utils_module.ALGOS
    for key, target in ALGORITHMS.items():
        algos[key] = _load_class(target)
    for key, (target, _) in BASELINES.items():
        algos[key] = _load_class(target)


def register_envs() -> None:
    importlib.import_module("sb3ext.envs")


def register_samplers(opt_module: ModuleType) -> None:
    from sb3ext.tuning import CONVERTERS, SAMPLERS

    opt_module.HYPERPARAMS_SAMPLER.update(SAMPLERS)
    opt_module.HYPERPARAMS_CONVERTER.update(CONVERTERS)


class TrialId(int):
    """An Optuna trial number that is true even when it is 0 (repairs ``--trial-id 0`` in the zoo)."""

    def __bool__(self) -> bool:
        return True


def check_atari_algorithm(algo: str, env_id: str, exp_module: ModuleType) -> None:
    """Refuse, in one line, an sb3ext algorithm that cannot act in an Atari game's ``Discrete`` actions (the zoo would
    otherwise fail with a bare ``KeyError: 'atari'`` while reading its YAML)."""
    algo_class = exp_module.ALGOS.get(algo)
    if algo_class is not None and getattr(algo_class, "continuous_actions_only", False):
        fitting = sorted(key for key in ALGORITHMS if not getattr(exp_module.ALGOS.get(key), "continuous_actions_only", False))
        raise ValueError(
            f"--algo {algo} ({algo_class.__name__}) acts in continuous (Box) action spaces only; {env_id} is an Atari "
            f"game with Discrete actions; sb3ext algorithms that fit: {', '.join(fitting)}"
        )


def expert_wrapper_to_adopt(algo: str, env_id: str, hyperparams: dict[str, Any]) -> Any:
    """The expert's ``env_wrapper`` (from its config.yml) for a learner of sb3ext's whose hyperparameters name none
    (the zoo's PPO experts of MuJoCo envs were trained with a ``TimeFeatureWrapper``): the learner's env gets it too,
    so that the expert sees what it was trained on. None when the learner names its own, or the expert has none."""
    if (algo not in ALGORITHMS and algo not in BASELINES) or "env_wrapper" in hyperparams or not hyperparams.get("expert"):
        return None
    from sb3ext.experts.expert import expert_config

    try:
        wrapper = expert_config(hyperparams["expert"], env_id).get("env_wrapper")
    except (ValueError, OSError, UnsafeObjectError):  # the model's own load says what is wrong, in its order
        return None
    if wrapper is not None:
        check_wrapper_names({"env_wrapper": wrapper}, f"the expert's config.yml ({hyperparams['expert']})")
        print(f"sb3ext: the expert was trained with env_wrapper {wrapper!r}; the learner's env gets it too")
    return wrapper


def patch_experiment_manager(exp_module: ModuleType) -> None:
    """Make ``ExperimentManager`` default to sb3ext's YAML file for sb3ext algorithms."""
    manager = exp_module.ExperimentManager
    original = manager.__init__
    if getattr(original, "_sb3ext_wrapped", False):
        return
    signature = inspect.signature(original)

    @functools.wraps(original)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        bound = signature.bind(self, *args, **kwargs)
        if not bound.arguments.get("config"):
            default = _sb3ext_config(self.algo, self.env_name.gym_id)
            if default is not None:
                self.config = str(default)
        if self._is_atari:
            check_atari_algorithm(self.algo, self.env_name.gym_id, exp_module)
        if self.trial_id == 0 and not isinstance(self.trial_id, TrialId):
            # the zoo tests `if ... and self.trial_id:`, so `--trial-id 0` was silently ignored
            self.trial_id = TrialId(0)

    __init__._sb3ext_wrapped = True  # type: ignore[attr-defined]
    manager.__init__ = __init__

    read = manager.read_hyperparameters

    @functools.wraps(read)
    def read_hyperparameters(self: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        hyperparams, saved = read(self)
        wrapper = expert_wrapper_to_adopt(self.algo, self.env_name.gym_id, hyperparams)
        if wrapper is not None:
            hyperparams["env_wrapper"] = wrapper
            saved = type(saved)(sorted({**saved, "env_wrapper": wrapper}.items()))  # enjoy replays it from config.yml
        return hyperparams, saved

    manager.read_hyperparameters = read_hyperparameters

    load_pretrained = manager._load_pretrained_agent

    @functools.wraps(load_pretrained)
    def _load_pretrained_agent(self: Any, hyperparams: dict[str, Any], env: Any) -> Any:
        from sb3ext.algos.loading import SafeLoad
        from sb3ext.experts.references import trust_from_environment

        algo_class = exp_module.ALGOS[self.algo]
        if trust_from_environment() or not isinstance(algo_class, type) or issubclass(algo_class, SafeLoad):
            return load_pretrained(self, hyperparams, env)  # SB3's load (trusted), or sb3ext's own safe one
        return continue_safely(algo_class, self.trained_agent, hyperparams, env, self)

    manager._load_pretrained_agent = _load_pretrained_agent

    optimize = manager.hyperparameters_optimization

    @functools.wraps(optimize)
    def hyperparameters_optimization(self: Any) -> None:
        from sb3ext.tuning import zoo_storage_with_heartbeat

        # a database --storage gets a heartbeat: trials of killed workers are failed and re-queued
        with zoo_storage_with_heartbeat():
            optimize(self)

    manager.hyperparameters_optimization = hyperparameters_optimization


def repair_huggingface_sb3(module: ModuleType) -> None:
    """Make ``rl_zoo3.push_to_hub`` and ``rl_zoo3.load_from_hub`` work with sb3-team-hf-integration 3.x.

    * ``push_to_hub`` imports ``generate_metadata``, which was renamed ``_generate_metadata`` and now
      returns a ``ModelCardData``: a ``generate_metadata`` returning the dict the zoo expects is added.
    * ``load_from_hub`` treats a repo without ``vec_normalize.pkl`` as "no normalisation" by catching
      ``requests.HTTPError``, but huggingface_hub raises ``EntryNotFoundError``: the missing-file error is
      re-raised as an exception that is both.
    """
    # the package attribute `push_to_hub` is the function of that name, not the submodule
    push_module = importlib.import_module("huggingface_sb3.push_to_hub")
    if not hasattr(push_module, "generate_metadata") and hasattr(push_module, "_generate_metadata"):
        generate = push_module._generate_metadata

        def generate_metadata(model_name: str, env_id: str, mean_reward: float, std_reward: float) -> dict[str, Any]:
            return generate(model_name, env_id, mean_reward, std_reward).to_dict()

        push_module.generate_metadata = generate_metadata  # type: ignore[attr-defined]

    original = getattr(module, "load_from_hub")  # noqa: B009 - the package attribute (a function)
    if getattr(original, "_sb3ext_wrapped", False):
        return
    import requests
    from huggingface_hub.errors import EntryNotFoundError

    class MissingHubFileError(requests.HTTPError, EntryNotFoundError):
        """A file is not in the Hub repo (or not in the offline cache)."""

    @functools.wraps(original)
    def load_from_hub(repo_id: str, filename: str) -> str:
        try:
            path = original(repo_id, filename)
        except EntryNotFoundError as exc:
            raise MissingHubFileError(str(exc)) from exc
        if filename == METRICS_ARCHIVE:
            check_metrics_archive(path)
        return str(path)

    load_from_hub._sb3ext_wrapped = True  # type: ignore[attr-defined]
    setattr(module, "load_from_hub", load_from_hub)  # noqa: B010


def on_zoo_import(module: ModuleType) -> None:
    name = module.__name__
    if name == "gymnasium":
        register_envs()
    elif name == "rl_zoo3.utils":
        register_algorithms(module)
        register_envs()
        secure_replay(module)
    elif name in ("rl_zoo3.enjoy", "rl_zoo3.record_video"):
        secure_replay(module)
    elif name == "rl_zoo3.import_envs":
        register_envs()
    elif name == "rl_zoo3.hyperparams_opt":
        register_samplers(module)
    elif name == "rl_zoo3.exp_manager":
        patch_experiment_manager(module)
        setattr(module, "VecNormalize", safe_vecnormalize_class())  # noqa: B010 - -i reads the run's vecnormalize.pkl; its YAML is the user's
    elif name == "huggingface_sb3":
        repair_huggingface_sb3(module)
    # python -m rl_zoo3.enjoy runs the script as __main__, after rl_zoo3.utils was imported (runpy imports the package
    # first); it imports rl_zoo3.exp_manager once its own `import yaml` has run: its yaml is replaced then
    main = sys.modules.get("__main__")
    if name != "__main__" and getattr(getattr(main, "__spec__", None), "name", None) in REPLAY_MODULES:
        secure_replay(main)  # type: ignore[arg-type]


def default_config(algo: str, env_id: str) -> Path:
    """The YAML file ``python -m rl_zoo3.train --algo <algo> --env <env_id>`` reads without ``-conf``."""
    path = _sb3ext_config(algo, env_id)
    if path is None:
        import rl_zoo3

        path = Path(rl_zoo3.__file__).parent / "hyperparams" / f"{algo}.yml"
    return path


def converter_for(algo: str) -> Any:
    """The zoo's Optuna converter for ``algo`` (sb3ext's registered too), for ``--trial-id`` and export."""
    from rl_zoo3.hyperparams_opt import HYPERPARAMS_CONVERTER

    register()
    if algo not in HYPERPARAMS_CONVERTER:
        raise ValueError(f"no Optuna converter for algorithm {algo!r}; known: {sorted(HYPERPARAMS_CONVERTER)}")
    return HYPERPARAMS_CONVERTER[algo]


def register() -> None:
    """Register sb3ext in every zoo module (imports rl_zoo3). Idempotent."""
    for name in ("huggingface_sb3", "rl_zoo3.utils", "rl_zoo3.import_envs", "rl_zoo3.hyperparams_opt", "rl_zoo3.exp_manager"):
        on_zoo_import(importlib.import_module(name))
