"""Hostile checkpoints (tests/hostile.py): no payload runs, no class changes, memory and time stay bounded,
and each refusal is one line of the expected kind naming the file. Guards show the payloads are real."""

from __future__ import annotations

import json
import os
import pickle
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from tests import hostile
from tests.conftest import ROOT, SHARED_EXPERTS, shared_expert

#: CPU seconds one hostile load may use (a clean load takes about 1 s): CPU time, not wall-clock time, so that a
#: loaded machine does not fail the test, while an unpickling or decompression bomb that spins still does
MAX_CPU_SECONDS = 30.0
MAX_EXTRA_MB = 1024


def need_base_experts() -> None:
    """The shared experts the fixtures are made from (skips, or fails under SB3EXT_STRICT, without ../shared)."""
    shared_expert(hostile.PENDULUM), shared_expert(hostile.WALKER)


@pytest.fixture(scope="module")
def hostile_root(tmp_path_factory) -> Path:
    need_base_experts()
    return tmp_path_factory.mktemp("hostile")


@pytest.fixture(scope="module")
def fixtures(hostile_root: Path) -> dict[str, hostile.Hostile]:
    return {spec.name: spec for spec in hostile.build_all(hostile_root, lambda rel: SHARED_EXPERTS / rel)}


def run_worker(marker: Path, folders: list[str], *flags: str) -> list[dict]:
    """One fresh process loads every folder in turn; one JSON report per load (tests/hostile_worker.py)."""
    env = {
        k: v for k, v in os.environ.items() if k not in ("TRUST_REMOTE_CODE", "SB3EXT_TRUST_REMOTE_CODE")
    }  # the default load
    result = subprocess.run(
        [sys.executable, "-m", "tests.hostile_worker", *flags, str(marker), *folders],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**env, "PYTHONWARNINGS": "ignore"},
    )
    lines = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert len(lines) == len(folders), f"the worker died ({result.returncode}):\n{result.stderr[-3000:]}"
    return lines


def by_fixture(fixtures: dict[str, hostile.Hostile], lines: list[dict]) -> dict[str, dict]:
    """The reports after the first (a clean expert's), by fixture name, with the memory growth over the clean load."""
    clean = lines[0]
    assert clean["error"] is None, clean
    reports = {spec.name: report for spec, report in zip(fixtures.values(), lines[1:], strict=True)}
    for report in reports.values():
        report["extra_mb"] = report["max_rss_mb"] - clean["max_rss_mb"]
    return reports


@pytest.fixture(scope="module")
def reports(fixtures, hostile_root: Path) -> dict[str, dict]:
    """One fresh process loads a clean expert, then every fixture; one JSON report per load."""
    marker = hostile.marker_path(hostile_root)
    assert not list(hostile_root.glob("MARKER*")), "a payload ran before the loads began"
    folders = [str(SHARED_EXPERTS / hostile.PENDULUM)] + [str(spec.folder) for spec in fixtures.values()]
    return by_fixture(fixtures, run_worker(marker, folders))


def problems(spec: hostile.Hostile, report: dict) -> list[str]:
    """What is wrong with one load's report: empty when the load was safe and failed (or loaded) as expected."""
    name, found = spec.name, []
    if report["marker"]:
        found.append(f"{name}: the payload ran")
    if report["changed"]:
        found.append(f"{name}: changed {report['changed']} for the whole process")
    if report["cpu_seconds"] >= MAX_CPU_SECONDS:
        found.append(f"{name}: took {report['cpu_seconds']:.1f} CPU seconds")
    if report["extra_mb"] >= MAX_EXTRA_MB:
        found.append(f"{name}: peak memory grew by {report['extra_mb']:.0f} MB")
    if report["error"] != spec.error:
        found.append(f"{name}: {report['error']}: {report['message']}")
    elif spec.error is not None:
        message = report["message"]
        if "\n" in message:
            found.append(f"{name}: not one line: {message!r}")
        if str(spec.folder) not in message and spec.folder.name not in message:
            found.append(f"{name}: the file is not named: {message}")
        if not re.search(spec.match, message):
            found.append(f"{name}: {message}")
    return found


NAMES = [
    "env_module",
    "net_arch_huge",
    "net_arch_wide",
    "n_critics_huge",
    "policy_kwargs_unknown",
    "gamma_not_a_number",
    "buffer_sizes_huge",
    "build_on_space_class",
    "build_on_schedule_class",
    "build_on_rms_class",
    "rms_unknown_attribute",
    "reduce_box_huge",
    "reduce_rms_huge",
    "vectorized_noise",
    "persistent_id",
    "nested_pickle",
    "memo_bomb",
    "variable_walks_attributes",
    "parameter_walks_attributes",
    "zero_stride_variable",
    "zero_stride_parameter",
    "shape_mismatch",
    "zip_bomb",
    "truncated",
    "encrypted",
    "duplicate_entry",
    "path_traversal",
    "missing_policy",
    "missing_optimizers",
    "data_not_object",
    "data_deep",
    "data_not_utf8",
    "bad_base64",
    "yaml_alias_bomb",
    "literal_deep",
    "ordered_dict_malformed",
    "config_not_utf8",
    "vn_shape",
    "vn_negative_var",
    "vn_nan_var",
    "vn_object_dtype",
    "vn_state_not_dict",
    "config_symlink_outside",
]


def test_every_fixture_is_listed(fixtures) -> None:
    assert sorted(NAMES) == sorted(fixtures)


@pytest.mark.parametrize("name", NAMES)
def test_hostile_checkpoint_through_load_expert(name: str, fixtures, reports) -> None:
    assert not problems(fixtures[name], reports[name])


def test_control_a_loader_that_runs_the_payload_then_refuses_is_caught(tmp_path: Path) -> None:
    """The control for the test above: a loader that imports the env module a checkpoint names (as SB3's load does)
    and then refuses the file exactly as the real loader does. Its report must fail the checks, on the payload only."""
    need_base_experts()
    built = {s.name: s for s in hostile.build_all(tmp_path, lambda rel: SHARED_EXPERTS / rel, only={"env_module"})}
    marker = hostile.marker_path(tmp_path)
    folders = [str(SHARED_EXPERTS / hostile.PENDULUM), str(built["env_module"].folder)]
    report = by_fixture(built, run_worker(marker, folders, "--broken-loader"))["env_module"]
    assert problems(built["env_module"], report) == ["env_module: the payload ran"], report
    assert (tmp_path / "MARKER.env_module").exists() and not marker.exists()  # the evidence kept, under its name


# ---------------------------------------------------------------------------------------------------- guards
def _run(code: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT), "PYTHONWARNINGS": "ignore"},
    )


def test_guard_stored_env_imports_a_module_under_sb3_load(fixtures, hostile_root: Path) -> None:
    """SB3's own load hands the stored env to gym.make, which imports the module beside the checkpoint."""
    spec = fixtures["env_module"]
    marker = hostile.marker_path(hostile_root)
    assert not marker.exists(), "a payload ran before this guard: the marker is evidence, not this guard's to delete"
    code = (
        "import gymnasium as gym; from stable_baselines3 import SAC; from stable_baselines3.common.utils import ConstantSchedule\n"
        "s = ConstantSchedule(0.0); env = gym.make('Pendulum-v1')\n"
        "custom = dict(observation_space=env.observation_space, action_space=env.action_space, lr_schedule=s, learning_rate=0.0)\n"
        "try:\n    SAC.load('Pendulum-v1.zip', custom_objects=custom, buffer_size=1)\nexcept Exception as e:\n    print(type(e).__name__, e)\n"
    )
    _run(code, spec.folder)
    assert marker.exists(), "the stored env did not run under SB3's load"
    marker.unlink()  # this guard's own marker: the loads and CLI runs after it must not see it


@pytest.mark.parametrize(
    "payload,check",
    [
        (
            ("stable_baselines3.common.utils", "ConstantSchedule", "__call__", "numpy", "float32"),
            "from stable_baselines3.common.utils import ConstantSchedule as C; assert C(0.1)(1.0) == 1.0 and type(C(0.1)(1.0)).__name__ == 'float32'",
        ),
        (
            ("stable_baselines3.common.running_mean_std", "RunningMeanStd", "update", "collections", "deque"),
            "from stable_baselines3.common.running_mean_std import RunningMeanStd as R; import collections; assert R.update is collections.deque",
        ),
    ],
)
def test_guard_build_on_a_class_changes_it_under_plain_pickle(payload, check: str, tmp_path: Path) -> None:
    raw = hostile.build_on_class(*payload)
    (tmp_path / "p.pkl").write_bytes(raw)
    result = _run(f"import pickle; pickle.loads(open('p.pkl', 'rb').read()); {check}; print('changed')", tmp_path)
    assert "changed" in result.stdout, result.stderr[-2000:]


def test_guard_tensor_names_walk_attributes_under_sb3_load(fixtures) -> None:
    """SB3 sets `<name>.data` for every stored variable: a walking name reaches torch.nn.Parameter itself."""
    spec = fixtures["variable_walks_attributes"]
    code = (
        "import gymnasium as gym, torch as th; from stable_baselines3 import SAC; from stable_baselines3.common.utils import ConstantSchedule\n"
        "s = ConstantSchedule(0.0); env = gym.make('Pendulum-v1')\n"
        "custom = dict(observation_space=env.observation_space, action_space=env.action_space, lr_schedule=s, learning_rate=0.0)\n"
        "before = th.nn.Parameter.__dict__.get('data')\n"
        "try:\n    SAC.load('Pendulum-v1.zip', custom_objects=custom, buffer_size=1)\nexcept Exception as e:\n    print(type(e).__name__, e)\n"
        "print('changed' if th.nn.Parameter.__dict__.get('data') is not before else 'same')\n"
    )
    result = _run(code, spec.folder)
    assert "changed" in result.stdout, result.stdout + result.stderr[-2000:]


def test_guard_zero_stride_variable_loads_huge_under_torch(fixtures) -> None:
    import io

    import torch as th

    with zipfile.ZipFile(next(fixtures["zero_stride_variable"].folder.glob("*.zip"))) as archive:
        loaded = th.load(io.BytesIO(archive.read("tensors.pth")), weights_only=True)
    assert loaded["log_ent_coef"].shape == (50000, 50000)  # 10 GB once anything materialises it


def test_guard_zip_bomb_and_alias_bomb_are_real(fixtures) -> None:
    import yaml

    with zipfile.ZipFile(next(fixtures["zip_bomb"].folder.glob("*.zip"))) as archive:
        info = archive.getinfo("policy.pth")
    assert info.file_size >= 1 << 30 and info.compress_size < 8 << 20
    config = yaml.safe_load((fixtures["yaml_alias_bomb"].folder / "Pendulum-v1" / "config.yml").read_text())
    size, node = 1, config["frame_stack"]
    while isinstance(node, list):
        size, node = size * len(node), node[0]
    assert size >= 9**10  # formatting it (as the zoo does) would never finish


def test_guard_reduce_of_an_allowed_class_runs_its_constructor_under_plain_pickle() -> None:
    """REDUCE calls an allowed class with the file's arguments: the fixtures' sizes scaled down 100x here."""
    import gymnasium
    from stable_baselines3.common.noise import NormalActionNoise, VectorizedActionNoise
    from stable_baselines3.common.running_mean_std import RunningMeanStd

    box = pickle.loads(pickle.dumps(hostile.As(gymnasium.spaces.Box, call=True, args=(0.0, 1.0, (400, 400)))))
    assert box.low.shape == (400, 400)  # (40000, 40000) in the fixture: 1.6e9 elements per bound
    rms = pickle.loads(pickle.dumps(hostile.As(RunningMeanStd, call=True, args=(1e-4, (400, 400)))))
    assert rms.mean.shape == (400, 400)
    base = NormalActionNoise(np.zeros(1), np.ones(1))
    noise = pickle.loads(pickle.dumps(hostile.As(VectorizedActionNoise, call=True, args=(base, 1000))))
    assert len(noise.noises) == 1000  # 10**9 deep copies in the fixture: the load never ends


# ---------------------------------------------------------------------------------------------------- zoo CLI
@pytest.mark.parametrize(
    "name",
    [
        n
        for n in NAMES
        if n in {"env_module", "build_on_space_class", "variable_walks_attributes", "zip_bomb", "yaml_alias_bomb"}
    ],
)
def test_hostile_checkpoint_through_the_zoo_cli(name: str, fixtures, hostile_root: Path, tmp_path: Path) -> None:
    spec = fixtures[name]
    assert spec.cli
    marker = hostile.marker_path(hostile_root)
    assert not marker.exists(), "a payload ran before this run"
    from tests.test_zoo_cli import pendulum_args

    args = ["-m", "rl_zoo3.train", *pendulum_args(spec.folder, "-n", "64", "--eval-freq", "-1")]
    result = subprocess.run(
        [sys.executable, *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    assert result.returncode != 0, result.stdout[-2000:]
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f"sb3ext.common.serialization.{spec.error}:") or last.startswith(f"{spec.error}:"), last
    assert re.search(spec.match, last), last
    assert not marker.exists()
    assert not list((tmp_path / "logs").rglob("*.zip"))
