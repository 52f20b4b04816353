"""Optuna tuning through the unmodified zoo: samplers, --trial-id, pruning, export, and several workers on one
study in SQLite and in a real PostgreSQL server (one worker SIGKILLed mid-trial, its trial failed by the
heartbeat and retried)."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import gymnasium as gym
import optuna
import pytest
import sqlalchemy
import yaml
from optuna.storages import RetryHeartbeatStaleTrialCallback
from optuna.trial import TrialState

from sb3ext import AggreVaTeD, tune, tuning
from sb3ext.demo import EMBEDDED_EXPERT
from scripts import pg_server
from tests.conftest import missing

# ---------------------------------------------------------------------------------------------------------------
# samplers and converters


def sampled_trials(n: int) -> list[tuple[optuna.trial.FrozenTrial, dict]]:
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0), direction="maximize")
    results = []
    for _ in range(n):
        trial = study.ask()
        kwargs = tuning.sample_aggrevated_params(trial, 1, 4, {})
        study.tell(trial, 0.0)
        results.append((study.trials[-1], kwargs))
    return results


def test_converter_rebuilds_exactly_what_the_sampler_returned() -> None:
    for frozen, kwargs in sampled_trials(20):
        assert tuning.convert_aggrevated_params(dict(frozen.params)) == kwargs
        assert frozen.user_attrs["beta_decay"] == kwargs["beta_decay"]


def test_every_sampled_configuration_builds_and_trains() -> None:
    env = gym.make("Pendulum-v1")
    seen = set()
    for _, kwargs in sampled_trials(12):
        model = AggreVaTeD("MlpPolicy", env, expert=str(EMBEDDED_EXPERT), seed=0, **kwargs)
        assert model.beta_decay == pytest.approx(kwargs["beta_decay"]) and 0 < model.beta_decay < 1
        assert model.n_steps == kwargs["n_steps"] and model.batch_size == kwargs["batch_size"]
        assert model.policy.net_arch == kwargs["policy_kwargs"]["net_arch"]
        seen.add(kwargs["n_action_samples"])
    model.learn(2 * model.n_steps)  # the last one trains
    assert model.num_timesteps == 2 * model.n_steps
    assert len(seen) > 1  # the search space is actually searched


def test_zoo_registry_holds_our_sampler_and_converter() -> None:
    from rl_zoo3.hyperparams_opt import HYPERPARAMS_CONVERTER, HYPERPARAMS_SAMPLER

    from sb3ext.zoo import ALGORITHMS

    for algo in ALGORITHMS:
        assert HYPERPARAMS_SAMPLER[algo] is tuning.SAMPLERS[algo]
        assert HYPERPARAMS_CONVERTER[algo] is tuning.CONVERTERS[algo]


class AlwaysPrune(optuna.pruners.BasePruner):
    def prune(self, study, trial) -> bool:
        return True


def test_pruning_stops_learn() -> None:
    from rl_zoo3.callbacks import TrialEvalCallback
    from stable_baselines3.common.env_util import make_vec_env

    study = optuna.create_study(pruner=AlwaysPrune(), direction="maximize")
    trial = study.ask()
    model = AggreVaTeD("MlpPolicy", make_vec_env("Pendulum-v1", n_envs=2), expert=str(EMBEDDED_EXPERT), n_steps=16, seed=0)
    callback = TrialEvalCallback(make_vec_env("Pendulum-v1", n_envs=1), trial, n_eval_episodes=1, eval_freq=32)
    model.learn(10_000, callback=callback)
    assert callback.is_pruned
    assert model.num_timesteps == 64  # stopped at the first evaluation (32 calls x 2 envs), not at 10,000


# ---------------------------------------------------------------------------------------------------------------
# storage settings and export


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({"SB3EXT_OPTUNA_HEARTBEAT": "soon"}, "SB3EXT_OPTUNA_HEARTBEAT='soon' must be a number"),
        ({"SB3EXT_OPTUNA_HEARTBEAT": "-1"}, "must be >= 0"),
        ({"SB3EXT_OPTUNA_RETRIES": "1.5"}, "SB3EXT_OPTUNA_RETRIES='1.5' must be an integer"),
        ({"SB3EXT_OPTUNA_HEARTBEAT": "10", "SB3EXT_OPTUNA_GRACE": "5"}, "must be longer than SB3EXT_OPTUNA_HEARTBEAT=10"),
        ({"SB3EXT_OPTUNA_HEARTBAET": "10"}, "unknown environment variable(s) ['SB3EXT_OPTUNA_HEARTBAET']"),
    ],
)
def test_heartbeat_settings_errors_name_the_variable(environ: dict, message: str) -> None:
    with pytest.raises(ValueError) as info:
        tuning.heartbeat_settings(environ)
    assert message in str(info.value)


def test_heartbeat_settings_defaults() -> None:
    assert tuning.heartbeat_settings({}) == (60, 180, 3)
    assert tuning.heartbeat_settings({"SB3EXT_OPTUNA_HEARTBEAT": "0"}) == (None, None, 3)
    assert tuning.heartbeat_settings({"SB3EXT_OPTUNA_HEARTBEAT": "1", "SB3EXT_OPTUNA_GRACE": "2.5"}) == (1, 3, 3)


def test_storage_kinds(tmp_path: Path) -> None:
    journal = tuning.make_storage(str(tmp_path / "sub" / "study.log"))
    assert isinstance(journal, optuna.storages.JournalStorage)
    rdb = tuning.make_storage(f"sqlite:///{tmp_path / 'study.db'}")
    assert rdb.get_heartbeat_interval() == 60
    with pytest.raises(ValueError, match="neither a database URL"):
        tuning.make_storage(str(tmp_path / "study.db"))
    with pytest.raises(ImportError, match="pip install 'sb3ext\\[postgres\\]'"):
        tuning.make_storage("postgresql+nodriver://user@localhost/db")


def test_zoo_literal_round_trips_through_eval() -> None:
    from torch import nn

    value = {"net_arch": {"pi": [64, 64], "vf": [32]}, "activation_fn": nn.ReLU, "ortho_init": False, "log_std_init": -1.0}
    assert eval(tuning.zoo_literal(value, "policy_kwargs"), {"nn": nn}) == value
    with pytest.raises(ValueError, match="cannot write action_noise="):
        tuning.zoo_yaml_value("action_noise", object())


# ---------------------------------------------------------------------------------------------------------------
# the zoo CLI with a shared study


def tune_cli(*args: str, cwd: Path) -> str:
    """`python -m sb3ext.tune ARGS` in this process (its own process start is covered by the CLI error test)."""
    out = io.StringIO()
    with contextlib.chdir(cwd), contextlib.redirect_stdout(out):
        assert tune.main(list(args)) == 0, f"sb3ext.tune {' '.join(args)} failed:\n{out.getvalue()}"
    return out.getvalue()


def zoo(*args: str, cwd: Path, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [sys.executable, *args], cwd=cwd, env={**os.environ, **(env or {})}, capture_output=True, text=True, timeout=timeout
    )
    assert result.returncode == 0, f"{' '.join(args)} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


# a grace of 10 heartbeats (10 s): far more than a live worker's heartbeat thread is ever late on a loaded 2-core
# machine; the test waits out the grace after the kill instead of betting that it has passed
HEARTBEAT_GRACE_S = 10
HEARTBEAT = {"SB3EXT_OPTUNA_HEARTBEAT": "1", "SB3EXT_OPTUNA_GRACE": str(HEARTBEAT_GRACE_S), "PYTHONUNBUFFERED": "1"}


def optimize_command(storage: str, n_trials: int, *extra: str) -> list[str]:
    return [
        "-m", "rl_zoo3.train", "--algo", "aggrevated", "--env", "Pendulum-v1", "-optimize", "--storage", storage,
        "--study-name", "study", "--n-trials", str(n_trials), "-n", "2048", "--n-evaluations", "2", "--eval-episodes", "1",
        "--no-optim-plots", "--num-threads", "1", "-f", "logs", "--hyperparams", f"expert:'{EMBEDDED_EXPERT}'", *extra,
    ]  # fmt: skip


N_PARAMS = len(sampled_trials(1)[0][0].params)


def training(study: optuna.Study, storage: str) -> list[optuna.trial.FrozenTrial]:
    """RUNNING trials past sampling (all parameters stored) whose heartbeat is recorded: their worker is training.

    Optuna only fails a stale trial that has a heartbeat row; a worker killed before its heartbeat thread first
    wrote one leaves a trial that stays RUNNING, so the kill waits for the row.
    """
    running = [
        trial for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)) if len(trial.params) == N_PARAMS
    ]
    if not running:
        return []
    engine = sqlalchemy.create_engine(storage)
    try:
        with engine.connect() as connection:
            beating = {row[0] for row in connection.execute(sqlalchemy.text("SELECT trial_id FROM trial_heartbeats"))}
    finally:
        engine.dispose()
    return [trial for trial in running if trial._trial_id in beating]


def two_workers_one_killed(storage: str, tmp_path: Path) -> optuna.Study:
    """Worker A and B on one pre-created study; A is SIGKILLed while both are in a trial; B completes; C runs one trial."""
    tune_cli("create", "--storage", storage, "--study-name", "study", cwd=tmp_path)
    study = optuna.load_study(storage=storage, study_name="study")
    env = {**os.environ, **HEARTBEAT}
    logs = [open(tmp_path / f"worker_{name}.log", "w") for name in "ab"]
    worker_a = subprocess.Popen([sys.executable, *optimize_command(storage, 50)], cwd=tmp_path, env=env, stdout=logs[0], stderr=subprocess.STDOUT)  # fmt: skip
    worker_b = subprocess.Popen([sys.executable, *optimize_command(storage, 2)], cwd=tmp_path, env=env, stdout=logs[1], stderr=subprocess.STDOUT)  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while len(training(study, storage)) < 2:  # each worker runs one trial at a time: two = both mid-trial
            assert worker_a.poll() is None and worker_b.poll() is None, (tmp_path / "worker_b.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "the two workers never ran trials at the same time"
            time.sleep(0.05)
        worker_a.send_signal(signal.SIGKILL)
        killed = time.monotonic()
        worker_a.wait(timeout=30)
        assert worker_b.wait(timeout=600) == 0, (tmp_path / "worker_b.log").read_text()[-3000:]
        # B fails and retries A's trial only if it starts a trial after the grace period; on a slow machine its last
        # trial may have begun before. A worker started after the grace always does (the retry is queued first).
        time.sleep(max(0.0, killed + HEARTBEAT_GRACE_S + 1 - time.monotonic()))
        zoo(*optimize_command(storage, 1), cwd=tmp_path, env=HEARTBEAT)
    finally:
        for worker in (worker_a, worker_b):
            if worker.poll() is None:
                worker.kill()
        for log in logs:
            log.close()
    return study


def check_killed_trial_failed_and_retried(study: optuna.Study, storage: str, tmp_path: Path) -> None:
    status = tune_cli("status", "--storage", storage, "--study-name", "study", cwd=tmp_path)
    trials = study.get_trials()
    states = [trial.state for trial in trials]
    assert TrialState.RUNNING not in states, status
    failed = [trial for trial in trials if trial.state == TrialState.FAIL]
    assert len(failed) == 1, status  # the killed worker's trial, failed by the heartbeat
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        retries = [
            trial for trial in trials if RetryHeartbeatStaleTrialCallback.retried_trial_number(trial) == failed[0].number
        ]
    assert len(retries) == 1 and retries[0].params == failed[0].params, status
    assert retries[0].state in (TrialState.COMPLETE, TrialState.PRUNED), status  # B or C ran the retry
    assert sum(state in (TrialState.COMPLETE, TrialState.PRUNED) for state in states) >= 3, status  # B's 2 and C's 1
    assert f"COMPLETE {states.count(TrialState.COMPLETE)}" in status


def check_export_round_trip(storage: str, tmp_path: Path) -> None:
    """The exported YAML and --trial-id train with exactly the converter's kwargs for the best trial."""
    study = optuna.load_study(storage=storage, study_name="study")
    best = study.best_trial
    expected = tuning.convert_aggrevated_params(dict(best.params))
    tune_cli(
        "export", "--storage", storage, "--study-name", "study", "--algo", "aggrevated",
        "--env", "Pendulum-v1", "--hyperparams", f"expert:'{EMBEDDED_EXPERT}'", "-o", "best.yml", cwd=tmp_path,
    )  # fmt: skip
    exported = yaml.safe_load((tmp_path / "best.yml").read_text())["Pendulum-v1"]
    assert exported["expert"] == str(EMBEDDED_EXPERT) and exported["n_envs"] == 4  # untuned defaults kept
    runs = {
        "conf": ["-conf", "best.yml", "-f", "from_yaml"],
        "trial_id": ["--storage", storage, "--study-name", "study", "--trial-id", str(best.number), "-f", "from_trial",
                     "--hyperparams", f"expert:'{EMBEDDED_EXPERT}'"],
    }  # fmt: skip
    for name, extra in runs.items():
        zoo("-m", "rl_zoo3.train", "--algo", "aggrevated", "--env", "Pendulum-v1", "-n", "64", "--num-threads", "1", *extra, cwd=tmp_path)  # fmt: skip
        folder = "from_yaml" if name == "conf" else "from_trial"
        model = AggreVaTeD.load(tmp_path / folder / "aggrevated" / "Pendulum-v1_1" / "Pendulum-v1.zip")
        assert model.lr_schedule(1.0) == pytest.approx(expected["learning_rate"]), name
        for key in ("n_steps", "batch_size", "n_epochs", "beta_init", "beta_decay", "n_action_samples",
                    "aggregation_window", "target_kl"):  # fmt: skip
            assert getattr(model, key) == pytest.approx(expected[key]), (name, key)
        assert model.clip_range(1.0) == pytest.approx(expected["clip_range"])
        assert model.policy.net_arch == expected["policy_kwargs"]["net_arch"], name


@pytest.mark.slow  # the PostgreSQL twin below runs the same scenario in the default suite (CI installs PostgreSQL)
def test_sqlite_two_workers_one_killed_heartbeat_retry_and_export(tmp_path: Path) -> None:
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    study = two_workers_one_killed(storage, tmp_path)
    check_killed_trial_failed_and_retried(study, storage, tmp_path)
    check_export_round_trip(storage, tmp_path)


@pytest.fixture(scope="module")
def postgres_url():
    try:
        with pg_server.running_server() as url:
            yield url
    except pg_server.PostgresUnavailable as exc:
        missing(f"PostgreSQL test skipped: {exc}")


def test_postgres_two_workers_one_killed_heartbeat_retry_and_export(postgres_url: str, tmp_path: Path) -> None:
    study = two_workers_one_killed(postgres_url, tmp_path)
    check_killed_trial_failed_and_retried(study, postgres_url, tmp_path)
    check_export_round_trip(postgres_url, tmp_path)


def test_journal_file_storage_single_worker(tmp_path: Path) -> None:
    zoo(*optimize_command("study.log", 2), cwd=tmp_path)
    study = optuna.load_study(storage=tuning.make_storage(str(tmp_path / "study.log")), study_name="study")
    assert [trial.state for trial in study.trials] == [TrialState.COMPLETE] * 2


def test_cli_errors_are_one_clear_line(tmp_path: Path) -> None:
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    tune_cli("create", "--storage", storage, "--study-name", "study", cwd=tmp_path)
    cases = {
        ("status", "--study-name", "nope"): "error: no study named 'nope'",
        ("export", "--study-name", "study", "--algo", "aggrevated", "--env", "Pendulum-v1", "-o", "x.yml"): "has no completed trial",
        ("export", "--study-name", "study", "--algo", "nope", "--env", "Pendulum-v1", "--trial", "0", "-o", "x.yml"): "no trial 0",
    }  # fmt: skip
    for args, message in cases.items():
        result = subprocess.run(
            [sys.executable, "-m", "sb3ext.tune", args[0], "--storage", storage, *args[1:]],
            cwd=tmp_path,
            capture_output=True,
            text=True,
        )
        assert result.returncode == 2 and message in result.stderr.strip().splitlines()[-1], result.stderr
