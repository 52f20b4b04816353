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

from tests.test_learner_loading import rewrite, serialized

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
    # a named pipe as config.yml: the zoo skips it (not a regular file) and replays without the saved normalisation
    # (wrong observations, silently); open() on it would block for ever. sb3ext refuses it before opening it
    "config_yml_pipe": lambda f: ((f / "config.yml").unlink(), os.mkfifo(f / "config.yml")),
    # the learner's own zip, a pickle payload in one of its fields (what AggreVaTeD.load reads for enjoy and -i)
    "zip_field_pickle": lambda f: rewrite(
        f.parent / "Pendulum-v1.zip", lambda d: d.__setitem__("_last_obs", serialized(_Payload()))
    ),
}
#: what the zoo itself does with each (the guard)
ZOO_READERS = {
    "config_yml_object": "import yaml; yaml.load(open({folder!r} + '/config.yml'), Loader=yaml.UnsafeLoader)",
    "args_yml_object": "import yaml; yaml.load(open({folder!r} + '/args.yml'), Loader=yaml.UnsafeLoader)",
    "normalize_eval": "import yaml; eval(yaml.safe_load(open({folder!r} + '/config.yml'))['normalize'])",
    "vecnormalize_pickle": "import pickle; pickle.load(open({folder!r} + '/vecnormalize.pkl', 'rb'))",
    "env_wrapper_import": "import importlib; importlib.import_module('evil_wrapper')",
    "config_yml_pipe": "open({folder!r} + '/config.yml').read()",
    "zip_field_pickle": "from stable_baselines3 import PPO; PPO.load({folder!r} + '/../Pendulum-v1.zip')",
}


def hostile_copy(run_folder: Path, tmp_path: Path, case: str) -> Path:
    shutil.copytree(run_folder, tmp_path / "logs")
    (tmp_path / "evil_wrapper.py").write_text(PAYLOAD + "\nWrap = None\n")
    folder = tmp_path / "logs" / "aggrevated" / "Pendulum-v1_1" / "Pendulum-v1"
    if case != "control":
        CASES[case](folder)
    return folder


#: the default suite runs these; -m slow the others too (each is a fresh enjoy process)
QUICK = ("config_yml_object", "normalize_eval", "config_yml_pipe", "control")


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
    reader = [sys.executable, "-c", ZOO_READERS[case].format(folder=str(folder))]
    if case.endswith("_pipe"):  # no payload: the zoo's own open() never returns
        with pytest.raises(subprocess.TimeoutExpired):
            subprocess.run(reader, cwd=tmp_path, capture_output=True, timeout=5)
        return
    subprocess.run(reader, cwd=tmp_path, capture_output=True)
    assert (tmp_path / MARKER).exists(), f"{case}: the fixture's payload does not run under the zoo's reader"


@pytest.mark.parametrize("case", ["zip_field_pickle", pytest.param("vecnormalize_pickle", marks=pytest.mark.slow), "control"])
def test_train_i_runs_no_code_from_the_checkpoint_it_continues(run_folder: Path, tmp_path: Path, case: str) -> None:
    """``rl_zoo3.train -i`` on an sb3ext algorithm, in a fresh working directory: a payload in the learner's zip or
    in the ``vecnormalize.pkl`` beside it is refused in one line naming the file; a genuine checkpoint trains on."""
    folder = hostile_copy(run_folder, tmp_path, case)
    done = zoo(["rl_zoo3.train", "--algo", "aggrevated", "--env", "Pendulum-v1", "-n", "32", "--seed", "1",
                "--eval-freq", "-1", "-f", "continued", "-i", str(folder.parent / "Pendulum-v1.zip"), "--hyperparams",
                "expert:'shipped:sac/Pendulum-v1_1'", "n_steps:16",
                "normalize:\"{'norm_obs': True, 'norm_reward': False}\""], tmp_path)  # fmt: skip
    assert not (tmp_path / MARKER).exists(), f"{case}: the payload ran"
    if case == "control":
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        assert list((tmp_path / "continued" / "aggrevated").glob("Pendulum-v1_*/Pendulum-v1.zip"))
        return
    last = done.stderr.strip().splitlines()[-1]
    assert done.returncode != 0 and last.startswith("sb3ext.common.serialization.UnsafeObjectError: "), last
    assert ("Pendulum-v1.zip" if case == "zip_field_pickle" else "vecnormalize.pkl") in last, last


def _metrics_zip(path: Path, entries: dict[str, bytes]) -> Path:
    import zipfile

    with zipfile.ZipFile(path, "w") as archive:
        for name, content in entries.items():
            archive.writestr(name, content)
    return path


#: entries a metrics archive must not hold: the model's files, and paths outside the top level
FOREIGN_ENTRIES = ["Pendulum-v1.zip", "Pendulum-v1/config.yml", "Pendulum-v1/vecnormalize.pkl", "../escape.csv", "sub/0.csv"]


def test_load_from_hub_refuses_a_metrics_archive_that_writes_beside_the_model(tmp_path: Path) -> None:
    """``rl_zoo3.load_from_hub`` extracts ``train_eval_metrics.zip`` into the run folder after copying the model's
    files there: with sb3ext installed, an archive holding anything but metrics is refused in one line before the
    folder is made. The zoo's own download step is the one wrapped (what its module imported)."""
    from tests.test_hub import populate_cache

    genuine = {"evaluations.npz": b"npz", "0.monitor.csv": b"#\n"}
    cache = tmp_path / "hf-cache"
    populate_cache(cache, "sb3ext-test/good", {"train_eval_metrics.zip": _metrics_zip(tmp_path / "good.zip", genuine)})
    for i, entry in enumerate(FOREIGN_ENTRIES):
        bad = _metrics_zip(tmp_path / f"bad{i}.zip", {**genuine, entry: b"payload"})
        populate_cache(cache, f"sb3ext-test/bad{i}", {"train_eval_metrics.zip": bad})
    script = (
        "import sb3ext.zoo, rl_zoo3.load_from_hub as z\n"
        "print(z.load_from_hub('sb3ext-test/good', 'train_eval_metrics.zip'))\n"
        f"for i in range({len(FOREIGN_ENTRIES)}):\n"
        "    try:\n"
        "        z.load_from_hub(f'sb3ext-test/bad{i}', 'train_eval_metrics.zip')\n"
        "        print('LOADED', i)\n"
        "    except Exception as exc:\n"
        "        print('REFUSED', type(exc).__name__, str(exc).count(chr(10)), exc)\n"
    )
    # huggingface_sb3's own download gate asks for TRUST_REMOTE_CODE before it hands out a zip; sb3ext never reads it
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(cache), "TRUST_REMOTE_CODE": "True"}
    result = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    lines = result.stdout.strip().splitlines()
    assert result.returncode == 0 and lines[0].endswith("train_eval_metrics.zip"), result.stderr[-2000:]
    assert len(lines) == 1 + len(FOREIGN_ENTRIES)
    for entry, line in zip(FOREIGN_ENTRIES, lines[1:]):
        assert line.startswith("REFUSED UnsafeObjectError 0 ") and f"refused entry {entry!r}" in line, line


def _stock_run(tmp_path: Path, hostile: bool) -> Path:
    """A zoo run folder of a stock SAC (the shared Pendulum expert: the zoo's own layout), its zip's ``_last_obs``
    replaced by a pickle payload when ``hostile``."""
    import base64
    import json
    import zipfile

    from tests.conftest import shared_expert

    run = tmp_path / "logs" / "sac" / "Pendulum-v1_1"
    shutil.copytree(shared_expert("sac/Pendulum-v1_1"), run)
    if hostile:
        model = run / "Pendulum-v1.zip"
        with zipfile.ZipFile(model) as archive:
            entries = {name: archive.read(name) for name in archive.namelist()}
        payload = {":type:": "<class 'numpy.ndarray'>", ":serialized:": base64.b64encode(pickle.dumps(_Payload())).decode()}
        # first in the file: SB3 unpickles the fields in order, and this gym-era zip's old spaces would stop it first
        data = {"_last_obs": payload, **{k: v for k, v in json.loads(entries["data"]).items() if k != "_last_obs"}}
        entries["data"] = json.dumps(data).encode()
        with zipfile.ZipFile(model, "w") as archive:
            for name, raw in entries.items():
                archive.writestr(name, raw)
    return run


@pytest.mark.parametrize("hostile", [False, True])
def test_enjoy_of_a_stock_algorithm_runs_no_code_from_its_zip(tmp_path: Path, hostile: bool) -> None:
    """With sb3ext installed, ``rl_zoo3.enjoy --algo sac`` builds the model from the zip's checked fields (as an
    expert is built): a payload in a field is refused in one line; a genuine run replays."""
    _stock_run(tmp_path, hostile)
    done = zoo(["rl_zoo3.enjoy", "--algo", "sac", "--env", "Pendulum-v1", "-f", "logs", "--exp-id", "1", "-n", "200",
                "--no-render"], tmp_path)  # fmt: skip
    assert not (tmp_path / MARKER).exists(), "the payload ran"
    if not hostile:
        assert done.returncode == 0 and "Mean reward" in done.stdout, done.stderr[-2000:]
        return
    last = done.stderr.strip().splitlines()[-1]
    assert done.returncode != 0 and last.startswith("sb3ext.common.serialization.UnsafeObjectError: "), last
    assert "Pendulum-v1.zip [data: _last_obs]: refused to load builtins.exec" in last


@pytest.fixture(scope="module")
def stock_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A stock zoo SAC run of this SB3 (a few hundred steps), with the replay buffer the zoo saves beside it."""
    work = tmp_path_factory.mktemp("stock-run")
    done = zoo(["rl_zoo3.train", "--algo", "sac", "--env", "Pendulum-v1", "-n", "200", "--seed", "0", "--eval-freq", "-1",
                "-f", "logs", "--save-replay-buffer", "--hyperparams", "learning_starts:100"], work)  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return work / "logs" / "sac" / "Pendulum-v1_1"


@pytest.mark.parametrize("case", ["control", "zip_field_pickle", "replay_buffer_pickle"])
def test_train_i_of_a_stock_algorithm_runs_no_code_from_its_files(stock_run: Path, tmp_path: Path, case: str) -> None:
    """``rl_zoo3.train --algo sac -i``, SB3's own load in the zoo, goes through the safe path by default: a payload in a
    field of the zip is refused in one line naming the file; a genuine run continues, its replay buffer (a pickle)
    left unread and said so, even when it carries a payload."""
    import json
    import zipfile

    run = tmp_path / "run"
    shutil.copytree(stock_run, run)
    if case == "zip_field_pickle":
        rewrite(run / "Pendulum-v1.zip", lambda d: d.__setitem__("_last_obs", serialized(_Payload())))
    if case == "replay_buffer_pickle":
        (run / "replay_buffer.pkl").write_bytes(pickle.dumps(_Payload()))
    done = zoo(["rl_zoo3.train", "--algo", "sac", "--env", "Pendulum-v1", "-n", "300", "--seed", "1", "--eval-freq",
                "-1", "-f", "continued", "-i", str(run / "Pendulum-v1.zip"), "--hyperparams", "learning_starts:100"],
               tmp_path)  # fmt: skip
    assert not (tmp_path / MARKER).exists(), f"{case}: the payload ran"
    if case != "zip_field_pickle":
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        assert "no code from the file runs" in done.stdout and "replay_buffer.pkl not loaded" in done.stdout
        continued = next((tmp_path / "continued" / "sac").glob("Pendulum-v1_*/Pendulum-v1.zip"))
        updates = [json.loads(zipfile.ZipFile(z).read("data"))["_n_updates"] for z in (run / "Pendulum-v1.zip", continued)]
        assert updates[1] == updates[0] + 200  # it went on from the checkpoint's gradient steps (300 - 100 warm-up)
        return
    last = done.stderr.strip().splitlines()[-1]
    assert done.returncode != 0 and last.startswith("sb3ext.common.serialization.UnsafeObjectError: "), last
    assert "Pendulum-v1.zip [data" in last and "_last_obs" in last, last


def test_guard_the_stock_payload_runs_under_sb3s_own_load(tmp_path: Path) -> None:
    run = _stock_run(tmp_path, hostile=True)
    script = f"from stable_baselines3 import SAC; SAC.load({str(run / 'Pendulum-v1.zip')!r}, buffer_size=1)"
    subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, timeout=120)
    assert (tmp_path / MARKER).exists(), "the fixture's payload does not run under SB3's load"
