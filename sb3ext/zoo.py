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
"""

from __future__ import annotations

import functools
import importlib
import inspect
import os
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from sb3ext.common.files import open_regular
from sb3ext.common.resources import hyperparams_path
from sb3ext.common.serialization import UnsafeObjectError

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


def continue_safely(algo_class: type, path: str, hyperparams: dict[str, Any], env: Any, manager: Any) -> Any:
    """``-i`` for a stock SB3 / sb3-contrib algorithm without running code from the checkpoint: the model is built
    from its checked fields and tensors (:func:`sb3ext.experts.learner.load_learner`), as the zoo's own
    ``_load_pretrained_agent`` would load it (the YAML's settings over the file's; not its policy or policy_kwargs).
    A ``replay_buffer.pkl`` beside it is a plain pickle: it is left unread, and the run says so."""
    from sb3ext.experts.learner import load_learner

    print("Loading pretrained agent (sb3ext: from its checked fields and tensors; no code from the file runs)")
    for key in ("policy", "policy_kwargs"):
        hyperparams.pop(key, None)
    model = load_learner(
        algo_class, path, env=env, device=manager.device, seed=manager.seed, tensorboard_log=manager.tensorboard_log,
        verbose=manager.verbose, **hyperparams,
    )  # fmt: skip
    replay_buffer = os.path.join(os.path.dirname(path), "replay_buffer.pkl")
    if os.path.exists(replay_buffer):
        print(
            f"sb3ext: {replay_buffer} not loaded: a replay buffer is a plain pickle, which runs code from the file; the "
            "run continues with an empty buffer (set SB3EXT_TRUST_REMOTE_CODE=1 to load it, for a file you made)"
        )
    return model


#: the archive of training and evaluation metrics that ``rl_zoo3.load_from_hub`` extracts into the new run folder
METRICS_ARCHIVE = "train_eval_metrics.zip"
#: what ``rl_zoo3.push_to_hub`` puts in it: the run's ``evaluations.npz`` and monitor ``*.csv`` files, top level only
_METRICS_NAME = re.compile(r"^(evaluations\.npz|[A-Za-z0-9_.-]+\.csv)$")
#: bounds on the archive's declared (uncompressed) sizes: zipfile extracts no more than an entry declares
MAX_METRICS_ENTRY, MAX_METRICS_TOTAL, MAX_METRICS_ENTRIES = 256 << 20, 1 << 30, 4096


def check_metrics_archive(path: str | os.PathLike[str]) -> None:
    """Refuse, in one line, a metrics archive that would write anything but metrics into the run folder (the model's
    zip, ``config.yml`` or ``vecnormalize.pkl`` the zoo has just copied there), or more than the size bounds."""
    import zipfile

    where = f"{path} ({METRICS_ARCHIVE})"
    try:
        with open_regular(path, "a metrics archive") as handle, zipfile.ZipFile(handle) as archive:
            infos = archive.infolist()
    except zipfile.BadZipFile as exc:
        raise ValueError(f"{where}: not a zip archive ({exc})") from None
    if len(infos) > MAX_METRICS_ENTRIES:
        raise ValueError(f"{where}: {len(infos)} entries; allowed: at most {MAX_METRICS_ENTRIES}")
    for info in infos:
        if not _METRICS_NAME.match(info.filename):
            raise UnsafeObjectError(
                f"{where}: refused entry {info.filename[:120]!r}; it would be extracted into the run folder beside the "
                "model's files; allowed: evaluations.npz and *.csv monitor files at the top level"
            )
        if info.file_size > MAX_METRICS_ENTRY:
            raise ValueError(f"{where}: entry {info.filename!r} declares {info.file_size} bytes; allowed: {MAX_METRICS_ENTRY}")
    if sum(info.file_size for info in infos) > MAX_METRICS_TOTAL:
        raise ValueError(f"{where}: entries declare more than {MAX_METRICS_TOTAL} bytes in all")


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


# ------------------------------------------------------------------------------------------------ safe replay
#: the packages whose wrappers a run folder's config.yml may name for the zoo to import (enjoy, record_video)
WRAPPER_PACKAGES = ("gymnasium.", "stable_baselines3.", "sb3_contrib.", "rl_zoo3.", "sb3ext.")
#: the zoo's scripts that read a run folder: their ``yaml`` is replaced by :class:`SafeZooYaml`
REPLAY_MODULES = ("rl_zoo3.utils", "rl_zoo3.enjoy", "rl_zoo3.record_video")


class SafeZooYaml:
    """Stands for PyYAML in the zoo's replay code: ``load`` reads with sb3ext's bounded safe loader (the zoo's own
    ``OrderedDict`` tag, nothing else), whatever ``Loader`` the zoo names (it names ``UnsafeLoader``, which builds any
    Python object a file asks for). Everything else is PyYAML's."""

    def __init__(self, real: ModuleType):
        self._real = real

    def load(self, stream: Any, Loader: Any = None) -> Any:
        from sb3ext.common.serialization import safe_yaml_load

        text = stream.read() if hasattr(stream, "read") else stream
        return safe_yaml_load(text, str(getattr(stream, "name", "<the zoo's YAML>")))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


def check_wrapper_names(hyperparams: dict[str, Any], source: str) -> None:
    """Refuse wrapper or callback names outside :data:`WRAPPER_PACKAGES`: the zoo imports the module each names."""
    for key in ("env_wrapper", "vec_env_wrapper", "callback"):
        value = hyperparams.get(key)
        entries = value if isinstance(value, list) else [] if value is None else [value]
        for entry in entries:
            names = list(entry) if isinstance(entry, dict) else [entry]
            for name in names:
                if not isinstance(name, str) or not name.startswith(WRAPPER_PACKAGES):
                    raise UnsafeObjectError(
                        f"{source}: {key} {str(name)[:80]!r} refused; the zoo would import it. Allowed: classes of "
                        f"{', '.join(p.rstrip('.') for p in WRAPPER_PACKAGES)} (edit the file if you trust it)"
                    )


def safe_saved_hyperparams(
    stats_path: str, norm_reward: bool = False, test_mode: bool = False
) -> tuple[dict[str, Any], str | None]:
    """``rl_zoo3.utils.get_saved_hyperparams`` without running code from the run folder: ``config.yml`` through
    sb3ext's safe reader (a regular file, bounded), ``normalize`` as a literal (the zoo ``eval``s it), wrapper names
    checked."""
    from sb3ext.common.serialization import safe_literal_eval
    from sb3ext.experts.building import read_config

    if not os.path.isdir(stats_path):
        return {}, None
    config_file = os.path.join(stats_path, "config.yml")
    if os.path.lexists(config_file):
        hyperparams = dict(read_config(Path(config_file)))
        hyperparams["normalize"] = hyperparams.get("normalize", False)
    else:
        hyperparams = {"normalize": os.path.isfile(os.path.join(stats_path, "obs_rms.pkl"))}
    check_wrapper_names(hyperparams, config_file)
    normalize = hyperparams["normalize"]
    if normalize:
        if isinstance(normalize, str):
            kwargs = safe_literal_eval(normalize, f"{config_file} normalize")
            if not isinstance(kwargs, dict):
                raise ValueError(
                    f"{config_file}: normalize {normalize[:80]!r}; allowed: a mapping such as {{'norm_obs': True}}"
                )
            if test_mode:
                kwargs["norm_reward"] = norm_reward
        elif isinstance(normalize, dict):
            kwargs = normalize
        else:
            kwargs = {"norm_obs": normalize, "norm_reward": norm_reward}
        hyperparams["normalize_kwargs"] = kwargs
    return hyperparams, stats_path


def _safe_vecnormalize_class() -> type:
    from stable_baselines3.common.vec_env import VecNormalize

    from sb3ext.experts.building import load_normalization

    class SafeVecNormalize(VecNormalize):
        """Stands for ``VecNormalize`` in a zoo module: ``load`` reads the statistics with sb3ext's allow-list
        unpickler (the zoo's replay and ``-i`` read ``vecnormalize.pkl`` with plain pickle); constructing one gives
        SB3's own class, so that what the zoo saves loads without sb3ext."""

        def __new__(cls, *args: Any, **kwargs: Any) -> VecNormalize:  # type: ignore[misc]
            return VecNormalize(*args, **kwargs)

        @staticmethod
        def load(load_path: str, venv: Any) -> VecNormalize:  # type: ignore[override]
            stats = load_normalization(Path(load_path), venv.observation_space)
            env = VecNormalize(
                venv, training=False, norm_obs=stats.obs_rms is not None, norm_reward=stats.ret_rms is not None,
                clip_obs=stats.clip_obs, clip_reward=stats.clip_reward, epsilon=stats.epsilon,
            )  # fmt: skip
            if stats.obs_rms is not None:
                env.obs_rms = stats.obs_rms  # type: ignore[assignment]
            if stats.ret_rms is not None:
                env.ret_rms = stats.ret_rms
            return env

    return SafeVecNormalize


class SafeReplayLoad:
    """Stands in for a stock algorithm class (PPO, SAC, DQN, ...) in the zoo's replay scripts: ``load`` builds the
    model from the checkpoint's checked fields for acting (the expert loader, :mod:`sb3ext.experts.building`),
    running no code from the file; with ``SB3EXT_TRUST_REMOTE_CODE`` set, SB3's own ``load``. Anything else is the
    class's own."""

    def __init__(self, algo_class: Any):
        self.algo_class = algo_class

    def load(self, path: Any, env: Any = None, device: Any = "auto", custom_objects: Any = None, **kwargs: Any) -> Any:
        from stable_baselines3.common.utils import check_for_correct_spaces

        from sb3ext.experts.building import build_expert_model
        from sb3ext.experts.exercise import exercise_policy
        from sb3ext.experts.references import trust_from_environment

        if trust_from_environment():
            return self.algo_class.load(path, env=env, device=device, custom_objects=custom_objects, **kwargs)
        model = build_expert_model(Path(path), "cpu" if device == "auto" else device)
        exercise_policy(model.policy, str(path))
        if not isinstance(model, self.algo_class) and not issubclass(self.algo_class, type(model)):
            raise ValueError(f"{path}: a {type(model).__name__} checkpoint; --algo asked for {self.algo_class.__name__}")
        if env is not None:
            check_for_correct_spaces(env, model.observation_space, model.action_space)
        return model

    def __getattr__(self, name: str) -> Any:
        return getattr(self.algo_class, name)


def _safe_algos(algos: dict[str, Any]) -> dict[str, Any]:
    """The zoo's ``ALGOS`` for a replay script: sb3ext's algorithms as they are (their ``load`` is safe), every other
    class behind :class:`SafeReplayLoad`."""
    from sb3ext.algos.loading import SafeLoad

    return {
        key: cls if not isinstance(cls, type) or issubclass(cls, SafeLoad) else SafeReplayLoad(cls)
        for key, cls in algos.items()
    }


def secure_replay(module: ModuleType) -> None:
    """Replace what the zoo's replay code reads a run folder with: ``yaml`` (``UnsafeLoader``), the saved
    hyperparameters (``eval`` of ``normalize``, wrapper imports), ``VecNormalize.load`` (pickle). Idempotent."""
    if isinstance(getattr(module, "yaml", None), ModuleType):
        module.yaml = SafeZooYaml(module.yaml)  # type: ignore[attr-defined]
    if hasattr(module, "get_saved_hyperparams"):
        module.get_saved_hyperparams = safe_saved_hyperparams  # type: ignore[attr-defined]
    vec_normalize = getattr(module, "VecNormalize", None)
    if isinstance(vec_normalize, type) and vec_normalize.__name__ == "VecNormalize":
        module.VecNormalize = _safe_vecnormalize_class()  # type: ignore[attr-defined]
    if module.__name__ != "rl_zoo3.utils" and isinstance(getattr(module, "ALGOS", None), dict):
        module.ALGOS = _safe_algos(module.ALGOS)  # type: ignore[attr-defined]  # this script's name only


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
        setattr(module, "VecNormalize", _safe_vecnormalize_class())  # noqa: B010 - -i reads the run's vecnormalize.pkl; its YAML is the user's
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
