"""Wrong numbers do not load silently (issue 46): each fixture is a real zoo expert with one number changed; the loader
refuses it with one line naming the file and what is allowed. A control loads the untouched expert."""

from __future__ import annotations

import base64
import io
import json
import pickle
import shutil
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch as th
from gymnasium import spaces

from sb3ext.common.serialization import UnsafeObjectError
from sb3ext.experts import load_expert
from tests.conftest import ROOT, shared_expert
from tests.fuzz_experts import write_zip, zip_entries

SHIPPED = ROOT / "sb3ext" / "experts"


def copy(tmp_path: Path, relative: str) -> Path:
    """A shared zoo expert's folder, or (``shipped:``) one of sb3ext's own, saved by the current SB3."""
    source = SHIPPED / relative[len("shipped:") :] if relative.startswith("shipped:") else shared_expert(relative)
    target = tmp_path / relative.replace("shipped:", "")
    shutil.copytree(source, target)
    return target


def change_tensors(entry: str, change):  # type: ignore[no-untyped-def]
    def apply(path: Path) -> None:
        content = zip_entries(path)
        state = th.load(io.BytesIO(content[entry]), weights_only=True)
        change(state)
        buffer = io.BytesIO()
        th.save(state, buffer)
        content[entry] = buffer.getvalue()
        write_zip(path, content)

    return apply


def change_space(key: str, space: spaces.Space):  # type: ignore[no-untyped-def]
    def apply(path: Path) -> None:
        content = zip_entries(path)
        data = json.loads(content["data"])
        data[key] = {
            ":type:": "<class 'gymnasium.spaces.Space'>",
            ":serialized:": base64.b64encode(pickle.dumps(space)).decode(),
        }
        content["data"] = json.dumps(data).encode()
        write_zip(path, content)

    return apply


def change_inner_record(suffix: str, change):  # type: ignore[no-untyped-def]
    """policy.pth with the bytes of its record ending in ``suffix`` changed (the torch zip rewritten, stored)."""

    def apply(path: Path) -> None:
        content = zip_entries(path)
        inner = entries_of(content["policy.pth"])
        name = next(n for n in inner if n.endswith(suffix))
        inner[name] = change(inner[name])
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
            for n, raw in inner.items():
                archive.writestr(n, raw)
        content["policy.pth"] = buffer.getvalue()
        write_zip(path, content)

    return apply


big_endian = change_inner_record("/byteorder", lambda raw: b"big")


def entries_of(raw: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(raw)) as archive:
        return {n: archive.read(n) for n in archive.namelist()}


def first_weight(state: dict) -> str:  # type: ignore[type-arg]
    return next(k for k, v in state.items() if v.dtype.is_floating_point and v.numel() > 1)


ZIP_CASES = {
    "nan_weight": (change_tensors("policy.pth", lambda s: s[first_weight(s)].fill_(float("nan"))), "non-finite values"),
    "big_endian_record": (big_endian, "record byteorder says 'big'"),
    "infinite_bounds": (change_space("action_space", spaces.Box(-np.inf, np.inf, (1,), np.float32)), "infinite bounds"),
    "sac_discrete": (change_space("action_space", spaces.Discrete(3)), "SAC acts in a Box space"),
    "multidiscrete_overflow": (change_space("action_space", spaces.MultiDiscrete([2**40])), "at most 2**31"),
    "log_ent_coef_100": (
        change_tensors("pytorch_variables.pth", lambda s: s.__setitem__("log_ent_coef", th.full((1,), 100.0))),
        "log_ent_coef 100",
    ),
}


@pytest.mark.parametrize("case", sorted(ZIP_CASES))
def test_wrong_numbers_in_the_checkpoint_are_refused(tmp_path: Path, case: str) -> None:
    folder = copy(tmp_path, "shipped:sac/Pendulum-v1_1")
    change, words = ZIP_CASES[case]
    change(folder / "Pendulum-v1.zip")
    with pytest.raises((ValueError, UnsafeObjectError)) as info:
        load_expert(folder)
    message = str(info.value)
    assert words in message and "Pendulum-v1.zip" in message and "\n" not in message, message


@pytest.mark.parametrize(
    "attribute, value, words",
    [("epsilon", 1e-300, "epsilon=1e-300"), ("clip_obs", 1e300, "clip_obs=1e+300"), ("clip_reward", -1.0, "clip_reward")],
)
def test_statistics_that_would_make_observations_infinite_are_refused(
    tmp_path: Path, attribute: str, value: float, words: str
) -> None:
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    folder = copy(tmp_path, "ppo/BipedalWalker-v3_1")
    normalizer = VecNormalize(make_vec_env("BipedalWalker-v3", n_envs=1))  # SB3's own file, with one number changed
    setattr(normalizer, attribute, value)
    normalizer.obs_rms.var[:] = 0.0  # with a tiny epsilon, a zero variance would divide by almost nothing
    normalizer.save(str(folder / "BipedalWalker-v3" / "vecnormalize.pkl"))
    with pytest.raises(ValueError, match="allowed: a number in") as info:
        load_expert(folder)
    assert words in str(info.value) and "vecnormalize.pkl" in str(info.value)


def test_control_the_untouched_experts_load(tmp_path: Path) -> None:
    expert = load_expert(copy(tmp_path, "shipped:sac/Pendulum-v1_1"))
    assert np.all(np.isfinite(expert.predict(np.zeros((2, 3), dtype=np.float32))[0]))
    assert load_expert(copy(tmp_path, "ppo/BipedalWalker-v3_1")).normalization is not None


def padded_pickle(pairs: int):  # type: ignore[no-untyped-def]
    """policy.pth whose pickle does ``pairs`` times NONE, POP after its PROTO opcode: long."""
    return change_inner_record("/data.pkl", lambda raw: raw[:2] + b"N0" * pairs + raw[2:])


@pytest.mark.parametrize("pairs, words", [(40_000, "bytes for"), (15_000, "operations for")])
def test_a_long_pickle_in_a_tensor_file_is_refused_before_torch_reads_it(tmp_path: Path, pairs: int, words: str) -> None:
    """torch's weights-only unpickler spends seconds on tens of kB of crafted pickle: the size and the number of
    operations must fit the storages the file holds, checked before torch reads it."""
    import time

    folder = copy(tmp_path, "shipped:sac/Pendulum-v1_1")
    padded_pickle(pairs)(folder / "Pendulum-v1.zip")
    start = time.process_time()
    with pytest.raises(UnsafeObjectError, match=words):
        load_expert(folder)
    assert time.process_time() - start < 5.0


def test_control_a_short_padding_reaches_torch_whose_refusal_carries_no_unsafe_advice(tmp_path: Path) -> None:
    """Under the caps the pickle reaches torch, which refuses POP; its advice to load with weights_only=False (which
    runs code from the file) is not passed on."""
    folder = copy(tmp_path, "shipped:sac/Pendulum-v1_1")
    padded_pickle(10)(folder / "Pendulum-v1.zip")
    with pytest.raises(ValueError, match="refused by torch's weights-only unpickler: Unsupported operand") as info:
        load_expert(folder)
    assert "weights_only` set to `False" not in str(info.value) and "trust" not in str(info.value)
