"""sb3ext's algorithms load their own checkpoints without running code from the file (issue 46, the learner side).

Each hostile checkpoint is a genuine save with one field changed. Each load runs in a fresh interpreter: it must end
with the one-line refusal and no marker (the payload never ran). The guard shows each payload does run under SB3's
own load (``trust_remote_code=True``), so a refusal is not an accident of a broken fixture.
"""

from __future__ import annotations

import base64
import io
import json
import pickle
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch as th
from stable_baselines3.common.env_util import make_vec_env

from sb3ext import KLPPO, RPO, AggreVaTeD, TanhPPO
from tests.conftest import ROOT

ALGOS = {"AggreVaTeD": AggreVaTeD, "KLPPO": KLPPO, "RPO": RPO, "TanhPPO": TanhPPO}
SMALL = {"n_steps": 16, "batch_size": 16, "n_epochs": 2}


class _Payload:
    """Unpickling this writes the marker."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (exec, (f"open({str(self.marker)!r}, 'w').write('pwned')",))


def saved(tmp_path: Path, name: str) -> Path:
    kwargs: dict[str, Any] = {"expert": "shipped:sac/Pendulum-v1_1"} if name == "AggreVaTeD" else {}
    model = ALGOS[name]("MlpPolicy", make_vec_env("Pendulum-v1", n_envs=2, seed=0), seed=0, **SMALL, **kwargs)
    model.learn(64)
    path = tmp_path / f"{name}.zip"
    model.save(path)
    return path


def rewrite(path: Path, data_change=None, entry: str | None = None, content: bytes | None = None) -> None:  # type: ignore[no-untyped-def]
    with zipfile.ZipFile(path) as archive:
        entries = {n: archive.read(n) for n in archive.namelist()}
    if data_change is not None:
        data = json.loads(entries["data"])
        data_change(data)
        entries["data"] = json.dumps(data).encode()
    if entry is not None:
        entries[entry] = content  # type: ignore[assignment]
    with zipfile.ZipFile(path, "w") as archive:
        for name, raw in entries.items():
            archive.writestr(name, raw)


def serialized(obj: Any) -> dict[str, str]:
    return {":type:": "<class 'object'>", ":serialized:": base64.b64encode(pickle.dumps(obj)).decode()}


def nan_weights(path: Path) -> None:
    with zipfile.ZipFile(path) as archive:
        state = th.load(io.BytesIO(archive.read("policy.pth")), weights_only=True)
    name = next(k for k, v in state.items() if v.dtype.is_floating_point)
    state[name] = state[name].clone().fill_(float("nan"))
    buffer = io.BytesIO()
    th.save(state, buffer)
    rewrite(path, entry="policy.pth", content=buffer.getvalue())


def env_module(tmp_path: Path, marker: Path) -> str:
    """A module that writes the marker when imported, on the path of the loading process (as a planted package)."""
    (tmp_path / "evil_env.py").write_text(f"open({str(marker)!r}, 'w').write('pwned')\n")
    return "evil_env:Whatever-v0"


#: name -> (how the checkpoint is made hostile, the refusal's key words)
CASES = {
    "env_field_imports_a_module": (
        lambda p, m, t: rewrite(p, lambda d: d.__setitem__("env", env_module(t, m))),
        "field env: refused",
    ),
    "pickle_in_a_field": (
        lambda p, m, t: rewrite(p, lambda d: d.__setitem__("_last_obs", serialized(_Payload(m)))),
        "builtins.exec",
    ),
    "pickle_as_schedule": (
        lambda p, m, t: rewrite(p, lambda d: d.__setitem__("lr_schedule", serialized(_Payload(m)))),
        "builtins.exec",
    ),
    "expert_in_the_data": (
        lambda p, m, t: rewrite(p, lambda d: d.__setitem__("expert", {"path": str(t), "trust_remote_code": True})),
        "field expert: refused",
    ),
    "huge_n_steps": (lambda p, m, t: rewrite(p, lambda d: d.__setitem__("n_steps", 2**40)), "field n_steps"),
    "huge_buffer": (lambda p, m, t: rewrite(p, lambda d: d.update(n_steps=1 << 24, n_envs=1 << 12)), "values; at most"),
    "policy_class_elsewhere": (
        lambda p, m, t: rewrite(p, lambda d: d.__setitem__("policy_class", serialized(subprocess.Popen))),
        "refused subprocess.Popen",
    ),
    "nan_weights": (lambda p, m, t: nan_weights(p), "holds non-finite values"),
    "overlong_string": (lambda p, m, t: rewrite(p, lambda d: d.__setitem__("gamma", "x" * 300)), "field gamma"),
    "text_for_a_number": (lambda p, m, t: rewrite(p, lambda d: d.__setitem__("gae_lambda", "0.9")), "field gae_lambda"),
}

LOAD = """
import sys
sys.path.insert(0, {root!r}); sys.path.insert(0, {plant!r})
from sb3ext.common.serialization import UnsafeObjectError
from sb3ext import {name}
for path in {paths!r}:
    try:
        {name}.load(path, trust_remote_code={trusted})
        print("LOADED " + path)
    except (ValueError, UnsafeObjectError) as exc:
        print("REFUSED " + type(exc).__name__ + ": " + " ".join(str(exc).split("\\n")))
    except Exception as exc:
        print("OTHER " + type(exc).__name__ + ": " + str(exc))
"""


def load_in_subprocess(name: str, paths: list[Path], plant: Path, trusted: bool = False) -> list[str]:
    """One fresh interpreter loads each file in turn; one output line per file."""
    code = LOAD.format(root=str(ROOT), plant=str(plant), name=name, paths=[str(p) for p in paths], trusted=trusted)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=plant)
    lines = [line for line in done.stdout.splitlines() if line.startswith(("LOADED", "REFUSED", "OTHER"))]
    assert len(lines) == len(paths), done.stdout + done.stderr
    return lines


@pytest.mark.parametrize("name", sorted(ALGOS))
def test_hostile_learner_checkpoints_are_refused_in_one_line_and_run_nothing(tmp_path: Path, name: str) -> None:
    original = saved(tmp_path, name)
    paths, markers = [], []
    for case in sorted(CASES):
        folder = tmp_path / case
        folder.mkdir()
        path, marker = folder / original.name, folder / "marker"
        shutil.copy(original, path)
        CASES[case][0](path, marker, tmp_path)  # a planted module goes where the loading process imports from
        paths.append(path)
        markers.append(marker)
    lines = load_in_subprocess(name, paths, tmp_path)
    for case, path, marker, line in zip(sorted(CASES), paths, markers, lines):
        assert line.startswith("REFUSED") and str(path) in line and CASES[case][1] in line, (case, line)
        assert not marker.exists(), case


def test_guard_the_payloads_run_under_sb3s_own_load(tmp_path: Path) -> None:
    original = saved(tmp_path, "RPO")
    cases = ["env_field_imports_a_module", "pickle_in_a_field", "pickle_as_schedule"]
    paths, markers = [], []
    for case in cases:
        (tmp_path / case).mkdir()
        path, marker = tmp_path / case / original.name, tmp_path / case / "marker"
        shutil.copy(original, path)
        CASES[case][0](path, marker, tmp_path)
        paths.append(path)
        markers.append(marker)
    load_in_subprocess("RPO", paths, tmp_path, trusted=True)
    assert [m.exists() for m in markers] == [True] * len(cases), "SB3's load should have run each payload: a broken fixture"


@pytest.mark.parametrize("name", sorted(ALGOS))
def test_genuine_checkpoints_load_as_sb3_loads_them_and_train_on(tmp_path: Path, name: str) -> None:
    path = saved(tmp_path, name)
    safe, trusted = ALGOS[name].load(path), ALGOS[name].load(path, trust_remote_code=True)
    obs = np.random.default_rng(0).normal(size=(8, 3)).astype(np.float32)
    assert np.array_equal(safe.predict(obs, deterministic=True)[0], trusted.predict(obs, deterministic=True)[0])
    for key in ("n_steps", "gamma", "num_timesteps", "batch_size"):
        assert getattr(safe, key) == getattr(trusted, key)
    assert safe.lr_schedule(0.3) == pytest.approx(trusted.lr_schedule(0.3))
    for opt in ("optimizer", "critic_optimizer"):
        if hasattr(trusted.policy, opt):
            a, b = getattr(safe.policy, opt).state_dict()["state"], getattr(trusted.policy, opt).state_dict()["state"]
            assert all(th.equal(a[k]["exp_avg"], b[k]["exp_avg"]) for k in b)
    kwargs: dict[str, Any] = {"expert": "shipped:sac/Pendulum-v1_1"} if name == "AggreVaTeD" else {}
    model = ALGOS[name].load(path, env=make_vec_env("Pendulum-v1", n_envs=3, seed=1), **kwargs)
    assert model.n_envs == 3
    model.learn(96)
    assert model.num_timesteps > 0


def test_a_stream_is_refused_unless_trusted(tmp_path: Path) -> None:
    path = saved(tmp_path, "RPO")
    with open(path, "rb") as handle, pytest.raises(TypeError, match="reads checkpoints from a path"):
        RPO.load(handle)  # type: ignore[arg-type]
    with open(path, "rb") as handle:
        assert RPO.load(handle, trust_remote_code=True).n_steps == 16


def test_fields_the_class_allows_at_infinity_load_and_others_do_not(tmp_path: Path) -> None:
    """The Walker2d entry saves ``expert_bc_margin: -inf`` (pull on every state): its own checkpoints must load. A NaN
    there, or an infinity in a field without that meaning, is refused in one line."""
    model = AggreVaTeD("MlpPolicy", make_vec_env("Pendulum-v1", n_envs=2, seed=0), expert="shipped:sac/Pendulum-v1_1",
                       expert_bc_margin=float("-inf"), seed=0, **SMALL)  # fmt: skip
    path = tmp_path / "margin.zip"
    model.save(path)
    assert AggreVaTeD.load(path).expert_bc_margin == float("-inf")
    nan = tmp_path / "nan.zip"
    shutil.copy(path, nan)
    rewrite(nan, lambda data: data.update(expert_bc_margin=float("nan")))
    with pytest.raises(ValueError, match=r"field expert_bc_margin: nan; allowed: a non-NaN number"):
        AggreVaTeD.load(nan)
    infinite_gamma = tmp_path / "gamma.zip"
    shutil.copy(path, infinite_gamma)
    rewrite(infinite_gamma, lambda data: data.update(gamma=float("inf")))
    with pytest.raises(ValueError, match=r"field gamma: inf; allowed: a finite number"):
        AggreVaTeD.load(infinite_gamma)


def test_a_ppo_variant_without_gradient_clipping_loads(tmp_path: Path) -> None:
    """``max_grad_norm: .inf`` (the PPO paper's set-up, benchmarks/ppo_paper.yml) means no clipping in every SB3
    algorithm: a variant saved with it loads; a NaN there is refused."""
    model = KLPPO("MlpPolicy", make_vec_env("Pendulum-v1", n_envs=1, seed=0), n_steps=16, batch_size=16,
                  max_grad_norm=float("inf"), kl_target=None, seed=0)  # fmt: skip
    path = tmp_path / "unclipped.zip"
    model.save(path)
    assert KLPPO.load(path).max_grad_norm == float("inf")
    rewrite(path, lambda data: data.update(max_grad_norm=float("nan")))
    with pytest.raises(ValueError, match=r"field max_grad_norm: nan; allowed: a non-NaN number"):
        KLPPO.load(path)


def test_dict_observation_spaces_load_flat_and_bounded() -> None:
    """A MultiInputPolicy learner's Dict space loads through the restricted unpickler; nesting, a non-text key or
    more than 64 keys is refused in one line."""
    from gymnasium import spaces

    from sb3ext.common.serialization import restricted_loads

    genuine = spaces.Dict({"camera": spaces.Box(0, 255, (4, 84, 84), np.uint8), "joints": spaces.Box(-1, 1, (16,))})
    assert restricted_loads(pickle.dumps(genuine), "x") == genuine
    nested = spaces.Dict({"inner": spaces.Dict({"a": spaces.Discrete(2)})})
    too_many = spaces.Dict({f"k{i}": spaces.Discrete(2) for i in range(65)})
    for space, message in ((nested, "entry 'inner': Dict; allowed"), (too_many, "allowed: 1 to 64 named spaces")):
        with pytest.raises(ValueError, match=message) as refused:
            restricted_loads(pickle.dumps(space), "x")
        assert "\n" not in str(refused.value)


def test_a_huge_stats_window_is_refused_in_one_line(tmp_path: Path) -> None:
    """Found by the fuzz campaign (seed 5): ``_stats_window_size = 1e308`` raised OverflowError from deque()."""
    path = saved(tmp_path, "KLPPO")
    for value in (1e308, 10**30, 0, "100"):
        rewrite(path, lambda data, v=value: data.update(_stats_window_size=v))
        with pytest.raises(ValueError, match=r"field _stats_window_size: .*; allowed: "):
            KLPPO.load(path)


def test_a_checkpoint_cut_short_while_written_says_so(tmp_path: Path) -> None:
    """SB3 writes a checkpoint in place and stores its entries uncompressed; each ``.pth`` entry is itself a zip
    (torch's format). A file cut right after one reads as that inner zip: the refusal says what it most likely is.
    Found by the zoo CLI's SIGKILL test, which resumed from such a file."""
    path = saved(tmp_path, "RPO")
    with zipfile.ZipFile(path) as archive:
        cut_at = archive.getinfo("_stable_baselines3_version").header_offset  # just after the last .pth entry
    cut = tmp_path / "cut.zip"
    cut.write_bytes(path.read_bytes()[:cut_at])
    with pytest.raises(ValueError, match=r"has no 'data' entry .* cut short while being written") as refused:
        RPO.load(cut)
    assert "\n" not in str(refused.value)
    assert RPO.load(path).n_steps == 16  # the whole file loads
