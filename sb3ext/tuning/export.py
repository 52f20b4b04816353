"""Export of a trial as a zoo hyperparameter file (``python -m sb3ext.tune export``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import optuna
import yaml
from optuna.trial import FrozenTrial, TrialState

from sb3ext.common.serialization import safe_yaml_load


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
    env_id: str,
    converter: Callable[[dict[str, Any]], dict[str, Any]],
    config: Path,
    trial_number: int | None = None,
    overrides: dict[str, Any] | None = None,
) -> tuple[dict[str, Any], FrozenTrial]:
    """Zoo YAML content ``{env_id: hyperparameters}``: the default entry with the trial's kwargs on top.

    ``python -m rl_zoo3.train --algo <algo> --env <env_id> -conf <file>`` then trains with exactly the
    constructor kwargs ``--trial-id`` would rebuild, plus the settings the trial did not tune.

    :param converter: the algorithm's converter (raw trial parameters -> constructor kwargs), as registered
        in ``rl_zoo3.hyperparams_opt.HYPERPARAMS_CONVERTER``
    :param config: the zoo YAML file whose entry for ``env_id`` (or ``default``) the trial's values go on top of
    """
    trial = pick_trial(study, trial_number)
    entries = safe_yaml_load(config.read_text(), str(config))
    if env_id in entries:
        base = dict(entries[env_id])
    elif "default" in entries:
        base = dict(entries["default"])
    else:
        raise ValueError(f"{config} has no entry for {env_id!r} (nor 'default'); entries: {sorted(entries)}")
    kwargs = converter(dict(trial.params))
    for key, value in {**kwargs, **(overrides or {})}.items():
        base[key] = zoo_yaml_value(key, value)
    return {env_id: base}, trial


def write_zoo_yaml(path: Path, content: dict[str, Any], header: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    comment = "".join(f"# {line}\n" for line in header.splitlines())
    path.write_text(comment + yaml.safe_dump(content, sort_keys=False, default_flow_style=False))
