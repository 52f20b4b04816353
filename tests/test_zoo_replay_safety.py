"""With sb3ext installed, ``rl_zoo3.enjoy`` on an sb3ext algorithm runs no code from the run folder (issue 46).

A genuine run folder, made by the zoo's own ``train``, gets one hostile change per case; ``enjoy`` runs in a fresh
working directory (where a planted module would be importable). It must refuse with one line naming the file, and
the payload's marker must not exist. The guard shows each payload runs under the zoo's own readers (PyYAML's
``UnsafeLoader``, ``eval``, pickle, ``importlib``), so a refusal is not an accident of a broken fixture.
"""

from __future__ import annotations

import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

MARKER = "MARKER"
PAYLOAD = f"open({MARKER!r}, 'w').write('pwned')"


class _Payload:
    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (exec, (PAYLOAD,))


def zoo(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k not in ("TRUST_REMOTE_CODE", "SB3EXT_TRUST_REMOTE_CODE")}
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, cwd=cwd, timeout=300, env=environ)


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("zoo-run")
    done = zoo(["rl_zoo3.train", "--algo", "aggrevated", "--env", "Pendulum-v1", "-n", "64", "--seed", "0",
                "--eval-freq", "-1", "-f", "logs", "--hyperparams", "expert:'shipped:sac/Pendulum-v1_1'", "n_steps:16",
                "normalize:\"{'norm_obs': True, 'norm_reward': False}\""], work)  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return work / "logs"


def edit_config(folder: Path, change) -> None:  # type: ignore[no-untyped-def]
    path = folder / "config.yml"
    config = dict(yaml.load(path.read_text(), Loader=yaml.UnsafeLoader))  # our own genuine file
    change(config)
    path.write_text(yaml.safe_dump(config))


CASES = {
    "config_yml_object": lambda f: (f / "config.yml").write_text(f"!!python/object/apply:builtins.exec [{PAYLOAD!r}]\n"),
    "args_yml_object": lambda f: (f / "args.yml").write_text(f"!!python/object/apply:builtins.exec [{PAYLOAD!r}]\n"),
    "normalize_eval": lambda f: edit_config(f, lambda c: c.__setitem__("normalize", f"exec({PAYLOAD!r}) or {{}}")),
    "vecnormalize_pickle": lambda f: (f / "vecnormalize.pkl").write_bytes(pickle.dumps(_Payload())),
    "env_wrapper_import": lambda f: edit_config(f, lambda c: c.__setitem__("env_wrapper", "evil_wrapper.Wrap")),
}
#: what the zoo itself does with each (the guard)
ZOO_READERS = {
    "config_yml_object": "import yaml; yaml.load(open({folder!r} + '/config.yml'), Loader=yaml.UnsafeLoader)",
    "args_yml_object": "import yaml; yaml.load(open({folder!r} + '/args.yml'), Loader=yaml.UnsafeLoader)",
    "normalize_eval": "import yaml; eval(yaml.safe_load(open({folder!r} + '/config.yml'))['normalize'])",
    "vecnormalize_pickle": "import pickle; pickle.load(open({folder!r} + '/vecnormalize.pkl', 'rb'))",
    "env_wrapper_import": "import importlib; importlib.import_module('evil_wrapper')",
}


def hostile_copy(run_folder: Path, tmp_path: Path, case: str) -> Path:
    shutil.copytree(run_folder, tmp_path / "logs")
    (tmp_path / "evil_wrapper.py").write_text(PAYLOAD + "\nWrap = None\n")
    folder = tmp_path / "logs" / "aggrevated" / "Pendulum-v1_1" / "Pendulum-v1"
    if case != "control":
        CASES[case](folder)
    return folder


#: the default suite runs these; -m slow the others too (each is a fresh enjoy process)
QUICK = ("config_yml_object", "normalize_eval", "control")


@pytest.mark.parametrize("case", [c if c in QUICK else pytest.param(c, marks=pytest.mark.slow) for c in [*CASES, "control"]])
def test_enjoy_runs_no_code_from_the_run_folder(run_folder: Path, tmp_path: Path, case: str) -> None:
    hostile_copy(run_folder, tmp_path, case)
    done = zoo(["rl_zoo3.enjoy", "--algo", "aggrevated", "--env", "Pendulum-v1", "-f", "logs", "--exp-id", "1",
                "-n", "20", "--no-render"], tmp_path)  # fmt: skip
    assert not (tmp_path / MARKER).exists(), f"{case}: the payload ran"
    if case == "control":
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        return
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(("sb3ext.common.serialization.UnsafeObjectError: ", "ValueError: ")), last
    assert "Pendulum-v1" in last and "Traceback" not in last, last


@pytest.mark.parametrize("case", list(CASES))
def test_guard_each_payload_runs_under_the_zoos_own_readers(run_folder: Path, tmp_path: Path, case: str) -> None:
    folder = hostile_copy(run_folder, tmp_path, case)
    subprocess.run([sys.executable, "-c", ZOO_READERS[case].format(folder=str(folder))], cwd=tmp_path, capture_output=True)
    assert (tmp_path / MARKER).exists(), f"{case}: the fixture's payload does not run under the zoo's reader"
