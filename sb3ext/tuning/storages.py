"""Optuna storages for several zoo workers: a database ``--storage`` of ``-optimize`` with a heartbeat.

A trial whose worker died (SIGKILL, power loss) is marked failed after a grace period and re-queued with
the same parameters (:func:`make_storage`; configured by the environment variables in
:data:`HEARTBEAT_VARIABLES`). Journal files (``--storage study.log``) have no heartbeat in Optuna.
"""

from __future__ import annotations

import contextlib
import importlib
import math
import os
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import optuna
from optuna.exceptions import ExperimentalWarning
from optuna.storages import BaseStorage, JournalStorage, RDBStorage, RetryHeartbeatStaleTrialCallback
from optuna.storages.journal import JournalFileBackend
from optuna.trial import TrialState

#: environment variable -> (meaning, default); read by :func:`heartbeat_settings`
HEARTBEAT_VARIABLES = {
    "SB3EXT_OPTUNA_HEARTBEAT": ("seconds between a running trial's heartbeats; 0 disables the heartbeat", 60.0),
    "SB3EXT_OPTUNA_GRACE": ("seconds without a heartbeat after which a running trial is failed", None),
    "SB3EXT_OPTUNA_RETRIES": ("times a failed (stale) trial is re-queued with the same parameters", 3),
}


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
