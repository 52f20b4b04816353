"""Safe loading, round 4: what was loaded is exercised once, classes are checked against the spaces before anything is
built, sizes are checked before any allocation, and every refusal is one line naming the file and the field."""

from __future__ import annotations

import io
import shutil
import struct
import zipfile
from pathlib import Path

import pytest
import torch as th
from stable_baselines3 import PPO, SAC
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.policies import MultiInputActorCriticPolicy

from sb3ext.experts import load_expert
from sb3ext.experts.learner import load_learner
from tests.conftest import shared_expert
from tests.test_learner_loading import rewrite, saved, serialized


def edit_weights(path: Path, change) -> None:  # type: ignore[no-untyped-def]
    """Rewrite the zip's ``policy.pth`` with ``change(state)`` applied (the file stays a valid torch.save)."""
    with zipfile.ZipFile(path) as archive:
        state = th.load(io.BytesIO(archive.read("policy.pth")), map_location="cpu", weights_only=True)
    change(state)
    buffer = io.BytesIO()
    th.save(state, buffer)
    rewrite(path, entry="policy.pth", content=buffer.getvalue())


def scale_weights(state: dict) -> None:
    """Every weight matrix filled with 3e38: finite in the file (float32 max is 3.4e38); the activations overflow."""
    for name, value in list(state.items()):
        if value.dtype.is_floating_point and value.dim() == 2:
            state[name] = th.full_like(value, 3e38)


@pytest.fixture
def expert_copy(tmp_path: Path) -> Path:
    folder = tmp_path / "sac" / "Pendulum-v1_1"
    shutil.copytree(shared_expert("sac/Pendulum-v1_1"), folder)
    return folder


def one_line(exc: pytest.ExceptionInfo) -> str:
    message = str(exc.value)
    assert "\n" not in message, message
    return message


def test_an_expert_whose_weights_overflow_when_used_is_refused_naming_the_file(expert_copy: Path) -> None:
    edit_weights(expert_copy / "Pendulum-v1.zip", scale_weights)
    with pytest.raises(ValueError) as exc:
        load_expert(expert_copy)
    assert one_line(exc).startswith(f"{expert_copy / 'Pendulum-v1.zip'}: refused; its policy")
    assert "non-finite" in str(exc.value)


@pytest.mark.parametrize("name", ["RPO", "AggreVaTeD"])
def test_a_learner_whose_weights_overflow_when_used_is_refused_naming_the_file(tmp_path: Path, name: str) -> None:
    from tests.test_learner_loading import ALGOS

    path = saved(tmp_path, name)
    ALGOS[name].load(path)  # the genuine file loads
    edit_weights(path, scale_weights)
    with pytest.raises(ValueError) as exc:
        ALGOS[name].load(path)
    assert one_line(exc).startswith(str(path)) and "non-finite" in str(exc.value)


def test_a_distribution_torch_cannot_build_is_one_line_naming_the_file(tmp_path: Path) -> None:
    """A stored log_std of -1e4 is finite, and its standard deviation is 0: torch's Normal refuses it with a
    multi-line message, which becomes one line."""
    path = saved(tmp_path, "RPO")
    edit_weights(path, lambda state: state.__setitem__("log_std", th.full_like(state["log_std"], -1e4)))
    from sb3ext import RPO

    with pytest.raises(ValueError) as exc:
        RPO.load(path)
    assert one_line(exc) == (
        f"{path}: refused; its policy cannot act on observations of its own space (its Normal distribution's scale "
        "breaks GreaterThan(lower_bound=0.0): non-finite or out-of-range values)"
    )


def test_a_multi_input_policy_on_a_box_is_refused_before_building_naming_the_field(tmp_path: Path) -> None:
    model = PPO("MlpPolicy", make_vec_env("Pendulum-v1", n_envs=1), n_steps=16, batch_size=16, seed=0)
    path = tmp_path / "ppo.zip"
    model.save(path)
    rewrite(path, lambda data: data.__setitem__("policy_class", serialized(MultiInputActorCriticPolicy)))
    with pytest.raises(ValueError) as exc:
        load_learner(PPO, path)
    assert one_line(exc) == (
        f"{path} [data: policy_class]: MultiInputActorCriticPolicy with CombinedExtractor reads Dict observations; "
        "its observation_space is a Box"
    )


@pytest.mark.parametrize("loader", ["expert", "learner"])
def test_a_features_extractor_that_is_not_one_is_refused_naming_policy_kwargs(expert_copy: Path, loader: str) -> None:
    zip_path = expert_copy / "Pendulum-v1.zip"
    if loader == "learner":
        zip_path = expert_copy.parent / "sac.zip"
        SAC("MlpPolicy", "Pendulum-v1", buffer_size=64, seed=0).save(zip_path)
    rewrite(zip_path, lambda data: data.__setitem__("policy_kwargs", serialized({"features_extractor_class": th.nn.Identity})))
    with pytest.raises(ValueError) as exc:
        load_expert(expert_copy) if loader == "expert" else load_learner(SAC, zip_path)
    assert (
        one_line(exc)
        == f"{zip_path} [data: policy_kwargs]: features_extractor_class Identity is not a BaseFeaturesExtractor subclass"
    )


def test_a_stock_off_policy_learner_loads_as_sb3_does(tmp_path: Path) -> None:
    """The learner loader reads a stock SAC checkpoint (train_freq, replay buffer class, every optimizer, the entropy
    coefficient) to the same parameters and settings as SB3's own load."""
    env = make_vec_env("Pendulum-v1", n_envs=1, seed=0)
    model = SAC("MlpPolicy", env, buffer_size=500, learning_starts=50, train_freq=(2, "step"), seed=0)
    model.learn(120)
    path = tmp_path / "sac.zip"
    model.save(path)
    ours, theirs = load_learner(SAC, path, env=env), SAC.load(path, env=env)
    assert ours.train_freq == theirs.train_freq and ours.replay_buffer_class is theirs.replay_buffer_class
    assert float(ours.log_ent_coef) == float(theirs.log_ent_coef)
    mine, reference = ours.get_parameters(), theirs.get_parameters()
    assert set(mine) == set(reference) == {"policy", "actor.optimizer", "critic.optimizer", "ent_coef_optimizer"}
    for key, value in reference["policy"].items():
        assert th.equal(mine["policy"][key], value), key
    assert mine["critic.optimizer"]["state"][0]["step"] == reference["critic.optimizer"]["state"][0]["step"]


def test_a_legacy_policy_pth_declaring_a_storage_beyond_its_bytes_is_refused_before_allocation(tmp_path: Path) -> None:
    """A 4-byte edit of the element count of a legacy-format (torch < 1.6) ``policy.pth`` asks torch for an 8 GiB
    storage before it reads a byte of it; the count is checked against the file's bytes first."""
    expert_copy = tmp_path / "sac" / "HalfCheetah-v3_1"  # 256-wide layers: element counts stored as 4-byte integers
    shutil.copytree(shared_expert("sac/HalfCheetah-v3_1"), expert_copy)
    zip_path = expert_copy / "HalfCheetah-v3.zip"
    with zipfile.ZipFile(zip_path) as archive:
        state = th.load(io.BytesIO(archive.read("policy.pth")), map_location="cpu", weights_only=True)
    buffer = io.BytesIO()
    th.save(state, buffer, _use_new_zipfile_serialization=False)
    raw = bytearray(buffer.getvalue())
    numel = next(v.numel() for v in state.values() if v.numel() >= 1 << 16)  # stored as a 4-byte BININT
    at = raw.index(b"J" + struct.pack("<i", numel)) + 1
    raw[at : at + 4] = struct.pack("<i", 0x7FFFFFFF)
    rewrite(zip_path, entry="policy.pth", content=bytes(raw))
    with pytest.raises(Exception) as exc:
        load_expert(expert_copy)
    assert one_line(exc).startswith(f"{zip_path} [policy.pth]: declares storages of about 1718")


class _System:
    def __reduce__(self):  # type: ignore[no-untyped-def]
        import os

        return (os.system, ("true",))


@pytest.mark.parametrize("legacy", [False, True])
def test_torchs_refusal_reads_as_ours_naming_the_global_without_its_advice(expert_copy: Path, legacy: bool) -> None:
    buffer = io.BytesIO()
    th.save({"actor.mu.weight": _System()}, buffer, _use_new_zipfile_serialization=not legacy)
    zip_path = expert_copy / "Pendulum-v1.zip"
    rewrite(zip_path, entry="policy.pth", content=buffer.getvalue())
    with pytest.raises(ValueError) as exc:
        load_expert(expert_copy)
    assert one_line(exc) == (
        f"{zip_path} [policy.pth]: unreadable tensors (refused by torch's weights-only unpickler: Trying to load "
        "unsupported GLOBAL posix.system whose module posix is blocked.)"
    )
    assert "weights_only" not in str(exc.value) and "trusted source" not in str(exc.value)
