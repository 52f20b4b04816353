"""Optuna tuning of sb3ext algorithms inside an unmodified rl-zoo3.

* Samplers and converters (``SAMPLERS``/``CONVERTERS``), registered in ``rl_zoo3.hyperparams_opt`` by
  :mod:`sb3ext.zoo`: a sampler asks the trial for the raw parameters and returns constructor kwargs
  through the converter, so ``--trial-id N`` (which runs only the converter on the stored parameters)
  rebuilds exactly the kwargs trial N trained with.
* Storage: a database URL given to ``-optimize --storage`` (SQLite, PostgreSQL, ...) is opened with a
  heartbeat, so a trial whose worker died (SIGKILL, power loss) is marked failed after a grace period
  and re-queued with the same parameters (:func:`make_storage`; configured by the environment variables
  in :data:`HEARTBEAT_VARIABLES`). Journal files (``--storage study.log``) have no heartbeat in Optuna.
* :func:`create_study`, :func:`study_status` and :func:`export_trial` back ``python -m sb3ext.tune``.
"""

from __future__ import annotations

import contextlib
import importlib
import math
import os
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import optuna
import yaml
from optuna.exceptions import ExperimentalWarning
from optuna.storages import BaseStorage, JournalStorage, RDBStorage, RetryHeartbeatStaleTrialCallback
from optuna.storages.journal import JournalFileBackend
from optuna.trial import FrozenTrial, TrialState

#: environment variable -> (meaning, default); read by :func:`heartbeat_settings`
HEARTBEAT_VARIABLES = {
    "SB3EXT_OPTUNA_HEARTBEAT": ("seconds between a running trial's heartbeats; 0 disables the heartbeat", 60.0),
    "SB3EXT_OPTUNA_GRACE": ("seconds without a heartbeat after which a running trial is failed", None),
    "SB3EXT_OPTUNA_RETRIES": ("times a failed (stale) trial is re-queued with the same parameters", 3),
}

#: network sizes of the sb3ext samplers (separate policy and value networks of these sizes)
NET_ARCHS = {"tiny": [64], "small": [64, 64], "medium": [256, 256]}


# --------------------------------------------------------------------------------------------------------------------
# samplers and converters


def convert_aggrevated_params(params: dict[str, Any]) -> dict[str, Any]:
    """Raw trial parameters of :func:`sample_aggrevated_params` -> ``AggreVaTeD`` constructor kwargs."""
    kwargs = dict(params)
    for name in ("n_steps", "batch_size"):
        kwargs[name] = 2 ** kwargs.pop(f"{name}_pow")
    # a half-life in iterations is a more even search space than the decay factor itself
    kwargs["beta_decay"] = 0.5 ** (1.0 / kwargs.pop("beta_half_life"))
    net_arch = NET_ARCHS[kwargs.pop("net_arch")]
    kwargs["policy_kwargs"] = {"net_arch": {"pi": net_arch, "vf": net_arch}}
    return kwargs


def sample_aggrevated_params(
    trial: optuna.Trial, n_actions: int, n_envs: int, additional_args: dict[str, Any]
) -> dict[str, Any]:
    """Search space of :class:`~sb3ext.algos.aggrevated.AggreVaTeD` (see ``docs/tuning.md``)."""
    params = {
        "learning_rate": trial.suggest_float("learning_rate", 1e-4, 1e-2, log=True),
        "n_steps_pow": trial.suggest_int("n_steps_pow", 3, 7),  # 8 .. 128 steps per env and iteration
        "batch_size_pow": trial.suggest_int("batch_size_pow", 5, 9),  # 32 .. 512 states
        "n_epochs": trial.suggest_categorical("n_epochs", [5, 10, 20]),
        "clip_range": trial.suggest_categorical("clip_range", [0.1, 0.2, 0.3]),
        "target_kl": trial.suggest_categorical("target_kl", [0.01, 0.02, 0.05]),
        "beta_init": trial.suggest_float("beta_init", 0.0, 1.0),
        "beta_half_life": trial.suggest_float("beta_half_life", 1.0, 100.0, log=True),  # iterations
        "n_action_samples": trial.suggest_categorical("n_action_samples", [4, 8, 16, 32]),
        "aggregation_window": trial.suggest_categorical("aggregation_window", [1, 4, 8, 16, 32]),
        "net_arch": trial.suggest_categorical("net_arch", list(NET_ARCHS)),
    }
    kwargs = convert_aggrevated_params(params)
    # shown by the zoo's report beside the raw parameters
    for name in ("n_steps", "batch_size", "beta_decay"):
        trial.set_user_attr(name, kwargs[name])
    return kwargs


# The PPO variants search the zoo's PPO space (rl_zoo3.hyperparams_opt.sample_ppo_params: n_steps, batch size,
# gamma, GAE lambda, learning rate, entropy coefficient, clip range, epochs, gradient clipping, network size and
# activation) plus their own parameters; each converter rebuilds the kwargs from the raw trial parameters.


def _zoo_ppo_space(trial: optuna.Trial, n_actions: int, n_envs: int, additional_args: dict[str, Any]) -> None:
    from rl_zoo3.hyperparams_opt import sample_ppo_params

    sample_ppo_params(trial, n_actions, n_envs, additional_args)  # suggests the zoo's PPO parameters


def _zoo_ppo_kwargs(params: dict[str, Any]) -> dict[str, Any]:
    from rl_zoo3.hyperparams_opt import convert_onpolicy_params

    return convert_onpolicy_params(params)


def convert_ppo_kl_params(params: dict[str, Any]) -> dict[str, Any]:
    raw = dict(params)
    clipping = raw.pop("clipping")
    kwargs = _zoo_ppo_kwargs(raw)
    if not clipping:
        kwargs["clip_range"] = None  # the paper's section 4: KL penalty only
    return kwargs


def sample_ppo_kl_params(trial: optuna.Trial, n_actions: int, n_envs: int, additional_args: dict[str, Any]) -> dict[str, Any]:
    """The zoo's PPO space + initial KL coefficient, KL target, and whether the surrogate is also clipped."""
    _zoo_ppo_space(trial, n_actions, n_envs, additional_args)
    trial.suggest_float("kl_coef", 0.1, 10.0, log=True)
    trial.suggest_float("kl_target", 0.003, 0.05, log=True)
    trial.suggest_categorical("clipping", [False, True])
    return convert_ppo_kl_params(trial.params)


def convert_rpo_params(params: dict[str, Any]) -> dict[str, Any]:
    return _zoo_ppo_kwargs(dict(params))  # rpo_alpha passes through


def sample_rpo_params(trial: optuna.Trial, n_actions: int, n_envs: int, additional_args: dict[str, Any]) -> dict[str, Any]:
    """The zoo's PPO space + the perturbation half-width alpha."""
    _zoo_ppo_space(trial, n_actions, n_envs, additional_args)
    trial.suggest_float("rpo_alpha", 0.0, 1.0)
    return convert_rpo_params(trial.params)


def convert_ppo_tanh_params(params: dict[str, Any]) -> dict[str, Any]:
    raw = dict(params)
    log_std_init = raw.pop("log_std_init")
    kwargs = _zoo_ppo_kwargs(raw)
    kwargs["policy_kwargs"]["log_std_init"] = log_std_init
    return kwargs


def sample_ppo_tanh_params(
    trial: optuna.Trial, n_actions: int, n_envs: int, additional_args: dict[str, Any]
) -> dict[str, Any]:
    """The zoo's PPO space (learning rate = the actor's) + critic learning rate and epochs, initial log-std."""
    _zoo_ppo_space(trial, n_actions, n_envs, additional_args)
    trial.suggest_float("critic_learning_rate", 1e-5, 3e-3, log=True)
    trial.suggest_categorical("critic_n_epochs", [5, 10, 20])
    trial.suggest_float("log_std_init", -2.0, 0.0)
    return convert_ppo_tanh_params(trial.params)


#: zoo algorithm key -> sampler(trial, n_actions, n_envs, additional_args) -> constructor kwargs
SAMPLERS: dict[str, Callable[..., dict[str, Any]]] = {
    "aggrevated": sample_aggrevated_params,
    "ppo_kl": sample_ppo_kl_params,
    "rpo": sample_rpo_params,
    "ppo_tanh": sample_ppo_tanh_params,
}
#: zoo algorithm key -> converter(raw trial parameters) -> constructor kwargs (used by ``--trial-id``)
CONVERTERS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "aggrevated": convert_aggrevated_params,
    "ppo_kl": convert_ppo_kl_params,
    "rpo": convert_rpo_params,
    "ppo_tanh": convert_ppo_tanh_params,
}


# --------------------------------------------------------------------------------------------------------------------
# storage


def _number(name: str, text: str, integer: bool) -> float:
    try:
        value = int(text) if integer else float(text)
    except ValueError:
        kind = "an integer" if integer else "a number"
        raise ValueError(f"{name}={text!r} must be {kind} >= 0 ({HEARTBEAT_VARIABLES[name][0]})") from None
    if value < 0 or not math.isfinite(value):
        raise ValueError(f"{name}={text!r} must be >= 0 ({HEARTBEAT_VARIABLES[name][0]})")
    return value


def heartbeat_settings(environ: dict[str, str] | None = None) -> tuple[int | None, int | None, int]:
    """(heartbeat interval, grace period, retries) from the environment; interval None = no heartbeat."""
    environ = dict(os.environ if environ is None else environ)
    unknown = sorted(key for key in environ if key.startswith("SB3EXT_OPTUNA_") and key not in HEARTBEAT_VARIABLES)
    if unknown:
        raise ValueError(f"unknown environment variable(s) {unknown}; known: {sorted(HEARTBEAT_VARIABLES)}")
    interval = _number("SB3EXT_OPTUNA_HEARTBEAT", environ.get("SB3EXT_OPTUNA_HEARTBEAT", "60"), integer=False)
    retries = int(_number("SB3EXT_OPTUNA_RETRIES", environ.get("SB3EXT_OPTUNA_RETRIES", "3"), integer=True))
    if interval == 0:
        return None, None, retries
    default_grace = 3 * interval
    grace = _number("SB3EXT_OPTUNA_GRACE", environ.get("SB3EXT_OPTUNA_GRACE", str(default_grace)), integer=False)
    if grace <= interval:
        raise ValueError(
            f"SB3EXT_OPTUNA_GRACE={grace:g} must be longer than SB3EXT_OPTUNA_HEARTBEAT={interval:g}, "
            "or every live trial would be failed"
        )
    # Optuna stores whole seconds
    return max(1, math.ceil(interval)), max(2, math.ceil(grace)), retries


def make_storage(storage: str | BaseStorage | None, heartbeat: bool = True) -> BaseStorage | str | None:
    """The Optuna storage for a zoo ``--storage`` value.

    ``None`` stays in memory; a path ending in ``.log`` is a journal file (no heartbeat in Optuna); any
    other string is a database URL opened as an ``RDBStorage`` with the heartbeat of
    :func:`heartbeat_settings` and a ``RetryHeartbeatStaleTrialCallback`` (unless ``heartbeat`` is false).
    """
    if storage is None or isinstance(storage, BaseStorage):
        return storage
    if storage.endswith(".log"):
        Path(storage).parent.mkdir(parents=True, exist_ok=True)
        return JournalStorage(JournalFileBackend(storage))
    if "://" not in storage:
        raise ValueError(
            f"--storage {storage!r} is neither a database URL (sqlite:///study.db, "
            "postgresql+psycopg2://user@host:5432/db) nor a journal file ending in .log"
        )
    interval, grace, retries = heartbeat_settings() if heartbeat else (None, None, 0)
    if storage.startswith("postgresql"):
        _require_driver(storage)
    if interval is None:
        return RDBStorage(storage)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExperimentalWarning)  # Optuna's heartbeat has been "experimental" since 2.9
        return RDBStorage(
            storage,
            heartbeat_interval=interval,
            grace_period=grace,
            heartbeat_stale_trial_callback=RetryHeartbeatStaleTrialCallback(max_retry=retries),
        )


def _require_driver(url: str) -> None:
    driver = url.split("://", 1)[0].partition("+")[2] or "psycopg2"
    module = {"psycopg2": "psycopg2", "psycopg": "psycopg", "pg8000": "pg8000", "asyncpg": "asyncpg"}.get(driver, driver)
    try:
        importlib.import_module(module)
    except ImportError:
        raise ImportError(
            f"the storage {url.split('@')[-1]!r} needs the PostgreSQL driver {module!r}: pip install 'sb3ext[postgres]'"
        ) from None


@contextlib.contextmanager
def zoo_storage_with_heartbeat() -> Iterator[None]:
    """While active, ``optuna.create_study(storage=<URL>)`` opens the URL through :func:`make_storage`.

    The zoo's ``hyperparameters_optimization`` passes ``--storage`` to ``optuna.create_study`` as a plain
    string (Optuna then has no heartbeat); :mod:`sb3ext.zoo` runs it inside this context.
    """
    original = optuna.create_study

    def create_study(*args: Any, storage: Any = None, **kwargs: Any) -> optuna.Study:
        return original(*args, storage=make_storage(storage), **kwargs)

    optuna.create_study = create_study  # type: ignore[assignment]
    try:
        yield
    finally:
        optuna.create_study = original


def create_study(storage: str, study_name: str) -> optuna.Study:
    """Create (or load) a maximising study, so that several zoo workers can start on it at once."""
    return optuna.create_study(storage=make_storage(storage), study_name=study_name, direction="maximize", load_if_exists=True)


def load_study(storage: str, study_name: str) -> optuna.Study:
    opened = make_storage(storage)
    assert opened is not None
    try:
        return optuna.load_study(storage=opened, study_name=study_name)
    except KeyError:
        names = [summary.study_name for summary in optuna.get_all_study_summaries(opened)]
        raise ValueError(f"no study named {study_name!r} in {storage!r}; studies there: {names}") from None


def study_status(study: optuna.Study) -> dict[str, int]:
    """Fail stale trials (dead workers, when the storage has a heartbeat), then count trials per state."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExperimentalWarning)
        optuna.storages.fail_stale_trials(study)
    counts = {state.name: 0 for state in TrialState}
    for trial in study.get_trials(deepcopy=False):
        counts[trial.state.name] += 1
    return counts


# --------------------------------------------------------------------------------------------------------------------
# export of a trial as a zoo hyperparameter file


def zoo_literal(value: Any, key: str) -> str:
    """Python source the zoo's ``eval`` of ``policy_kwargs`` turns back into ``value``."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        items = ", ".join(zoo_literal(item, key) for item in value)
        return f"[{items}]" if isinstance(value, list) else f"({items}{',' if len(value) == 1 else ''})"
    if isinstance(value, dict):
        if all(isinstance(name, str) and name.isidentifier() for name in value):
            return "dict(" + ", ".join(f"{name}={zoo_literal(item, key)}" for name, item in value.items()) + ")"
        return "{" + ", ".join(f"{zoo_literal(name, key)}: {zoo_literal(item, key)}" for name, item in value.items()) + "}"
    if isinstance(value, type) and value.__module__.startswith("torch.nn"):
        return f"nn.{value.__name__}"  # the zoo evaluates policy_kwargs with `nn` (torch.nn) in scope
    raise ValueError(f"cannot write {key}={value!r} to a zoo YAML file (only literals and torch.nn classes)")


def zoo_yaml_value(key: str, value: Any) -> Any:
    """A constructor kwarg as the zoo's YAML files hold it (``policy_kwargs`` as a Python expression string)."""
    if key in ("policy_kwargs", "replay_buffer_kwargs"):
        return value if isinstance(value, str) else zoo_literal(value, key)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)) and all(isinstance(item, (bool, int, float, str)) for item in value):
        return list(value)
    raise ValueError(f"cannot write {key}={value!r} to a zoo YAML file (only literals)")


def converter_for(algo: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    from rl_zoo3.hyperparams_opt import HYPERPARAMS_CONVERTER

    from sb3ext.zoo import register

    register()
    if algo not in HYPERPARAMS_CONVERTER:
        raise ValueError(f"no Optuna converter for algorithm {algo!r}; known: {sorted(HYPERPARAMS_CONVERTER)}")
    return HYPERPARAMS_CONVERTER[algo]


def default_config(algo: str, env_id: str) -> Path:
    """The YAML file ``python -m rl_zoo3.train --algo <algo> --env <env_id>`` reads without ``-conf``."""
    from sb3ext.zoo import _default_config

    path = _default_config(algo, env_id)
    if path is None:
        import rl_zoo3

        path = Path(rl_zoo3.__file__).parent / "hyperparams" / f"{algo}.yml"
    return path


def pick_trial(study: optuna.Study, number: int | None) -> FrozenTrial:
    trials = study.get_trials(deepcopy=False)
    if number is None:
        if not any(trial.state == TrialState.COMPLETE for trial in trials):
            counts = {state.name: sum(t.state == state for t in trials) for state in TrialState}
            raise ValueError(f"study {study.study_name!r} has no completed trial yet (trials per state: {counts})")
        return study.best_trial
    matches = [trial for trial in trials if trial.number == number]
    if not matches:
        raise ValueError(f"study {study.study_name!r} has no trial {number}; trials 0..{len(trials) - 1}")
    return matches[0]


def export_trial(
    study: optuna.Study,
    algo: str,
    env_id: str,
    trial_number: int | None = None,
    config: Path | None = None,
    overrides: dict[str, Any] | None = None,
) -> tuple[dict[str, Any], FrozenTrial]:
    """Zoo YAML content ``{env_id: hyperparameters}``: the default entry with the trial's kwargs on top.

    ``python -m rl_zoo3.train --algo <algo> --env <env_id> -conf <file>`` then trains with exactly the
    constructor kwargs ``--trial-id`` would rebuild, plus the settings the trial did not tune.
    """
    from sb3ext.common.serialization import safe_yaml_load

    trial = pick_trial(study, trial_number)
    config = Path(config) if config is not None else default_config(algo, env_id)
    entries = safe_yaml_load(config.read_text(), str(config))
    if env_id in entries:
        base = dict(entries[env_id])
    elif "default" in entries:
        base = dict(entries["default"])
    else:
        raise ValueError(f"{config} has no entry for {env_id!r} (nor 'default'); entries: {sorted(entries)}")
    kwargs = converter_for(algo)(dict(trial.params))
    for key, value in {**kwargs, **(overrides or {})}.items():
        base[key] = zoo_yaml_value(key, value)
    return {env_id: base}, trial


def write_zoo_yaml(path: Path, content: dict[str, Any], header: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    comment = "".join(f"# {line}\n" for line in header.splitlines())
    path.write_text(comment + yaml.safe_dump(content, sort_keys=False, default_flow_style=False))
