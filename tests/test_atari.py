"""Atari through the unmodified zoo CLI: ppo_kl and aggrevated train a few hundred steps on an ALE game, RPO and
TanhPPO refuse it in one line, a zoo CNN expert (QR-DQN, trained by the zoo itself for a few hundred steps: the
real file layout and config.yml, not a useful player) loads as a frame-stacked Q* expert, and the learner replays
with ``rl_zoo3.enjoy`` with no expert present."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from stable_baselines3.common.atari_wrappers import WarpFrame
from stable_baselines3.common.env_util import make_atari_env, make_vec_env
from stable_baselines3.common.vec_env import VecFrameStack

from sb3ext.algos.aggrevated import AggreVaTeD
from sb3ext.experts import Q_DISCRETE, load_expert
from tests.conftest import needs

GAME = "PongNoFrameskip-v4"
#: a small CNN and few quantiles: the expert is made in seconds; its layout is the zoo's
SMALL_QRDQN = "policy_kwargs:dict(n_quantiles=8, features_extractor_kwargs=dict(features_dim=32))"


def zoo(*args: str, cwd: Path, check: bool = True) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = subprocess.run([sys.executable, "-m", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    if check and result.returncode != 0:
        raise AssertionError(
            f"{' '.join(args)} failed ({result.returncode}):\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
        )
    return result


@pytest.fixture(scope="module")
def atari_expert(tmp_path_factory: pytest.TempPathFactory) -> Path:
    needs("ale_py")
    needs("cv2")
    import ale_py

    gym.register_envs(ale_py)  # for the in-process envs
    folder = tmp_path_factory.mktemp("atari-expert")
    zoo("rl_zoo3.train", "--algo", "qrdqn", "--env", GAME, "-n", "200", "-f", "experts", "--seed", "0", "--eval-freq", "-1",
        "--hyperparams", "buffer_size:1000", "learning_starts:100", SMALL_QRDQN, cwd=folder)  # fmt: skip
    return folder / "experts" / "qrdqn" / f"{GAME}_1"


def test_the_zoo_cnn_expert_loads_as_a_frame_stacked_q_expert(atari_expert: Path) -> None:
    from sb3_contrib import QRDQN

    expert = load_expert(atari_expert)
    assert expert.kind == Q_DISCRETE and expert.frame_stack == 4 and expert.obs_dtype == np.uint8
    assert expert.observation_space.shape == (4, 84, 84)
    frames = np.random.default_rng(0).integers(0, 256, (8, 4, 84, 84), dtype=np.uint8)
    trusted = QRDQN.load(atari_expert / f"{GAME}.zip", custom_objects={"buffer_size": 1}, device="cpu")
    obs = expert.obs_tensor(frames)
    assert obs.dtype == th.uint8  # the CNN scales frames itself: no float copy in the buffers
    th.testing.assert_close(expert.q_all(obs), trusted.policy.quantile_net(th.as_tensor(frames)).mean(dim=1))


def test_frames_stay_uint8_and_a_learner_framed_otherwise_is_refused(atari_expert: Path) -> None:
    env = VecFrameStack(make_atari_env(GAME, n_envs=2, seed=0), n_stack=4)
    model = AggreVaTeD("CnnPolicy", env, expert=atari_expert, n_steps=16, batch_size=32, n_epochs=1, seed=0)
    model.learn(32)
    aggregation = model._aggregation
    assert aggregation is not None and len(aggregation) == 32
    assert aggregation.learner_obs.dtype == np.uint8 and aggregation.expert_obs.dtype == np.uint8

    # the same frame shape without the zoo's AtariWrapper (no frame skip, no max-pooling): the expert would misread
    plain = VecFrameStack(make_vec_env(GAME, n_envs=1, seed=0, wrapper_class=WarpFrame), n_stack=4)
    with pytest.raises(ValueError, match=r"add env_wrapper stable_baselines3\.common\.atari_wrappers\.AtariWrapper to the"):
        AggreVaTeD("CnnPolicy", plain, expert=atari_expert, n_steps=16, batch_size=32)
    unstacked = VecFrameStack(make_atari_env(GAME, n_envs=1, seed=0), n_stack=2)
    with pytest.raises(ValueError, match=r"expert observation space Box\(shape=\(4, 84, 84\)"):
        AggreVaTeD("CnnPolicy", unstacked, expert=atari_expert, n_steps=16, batch_size=32)


def test_aggrevated_trains_through_the_zoo_and_replays_without_its_expert(atari_expert: Path, tmp_path: Path) -> None:
    expert = tmp_path / "expert"
    shutil.copytree(atari_expert, expert)
    zoo("rl_zoo3.train", "--algo", "aggrevated", "--env", GAME, "-n", "128", "-f", "logs", "--seed", "0", "--eval-freq",
        "-1", "--hyperparams", f"expert:'{expert}'", "n_envs:2", "n_steps:64", cwd=tmp_path)  # fmt: skip
    assert (tmp_path / "logs" / "aggrevated" / f"{GAME}_1" / f"{GAME}.zip").is_file()
    shutil.rmtree(expert)  # the replay needs only the learner
    replay = zoo("rl_zoo3.enjoy", "--algo", "aggrevated", "--env", GAME, "-f", "logs", "-n", "60", "--no-render",
                 cwd=tmp_path)  # fmt: skip
    assert "Stacking 4 frames" in replay.stdout
    zoo("rl_zoo3.record_video", "--algo", "aggrevated", "--env", GAME, "-f", "logs", "-n", "30", cwd=tmp_path)
    videos = list((tmp_path / "logs" / "aggrevated" / f"{GAME}_1" / "videos").glob("*.mp4"))
    assert videos and videos[0].stat().st_size > 1000


def test_ppo_kl_trains_on_atari_and_the_continuous_variants_refuse_in_one_line(tmp_path: Path) -> None:
    needs("ale_py")
    needs("cv2")
    zoo("rl_zoo3.train", "--algo", "ppo_kl", "--env", GAME, "-n", "256", "-f", "logs", "--eval-freq", "-1",
        "--hyperparams", "n_envs:2", "n_steps:64", "batch_size:64", cwd=tmp_path)  # fmt: skip
    assert (tmp_path / "logs" / "ppo_kl" / f"{GAME}_1" / f"{GAME}.zip").is_file()
    for algo, name in (("rpo", "RPO"), ("ppo_tanh", "TanhPPO")):
        result = zoo("rl_zoo3.train", "--algo", algo, "--env", GAME, "-n", "64", "-f", "logs", cwd=tmp_path, check=False)
        assert result.returncode != 0
        assert result.stderr.strip().splitlines()[-1] == (
            f"ValueError: --algo {algo} ({name}) acts in continuous (Box) action spaces only; {GAME} is an Atari game "
            "with Discrete actions; sb3ext algorithms that fit: aggrevated, ppo_kl"
        )
        assert not (tmp_path / "logs" / algo).exists()


def test_the_ale_games_of_the_yaml_are_registered() -> None:
    needs("ale_py")
    import ale_py
    import yaml

    from sb3ext.common.resources import hyperparams_path

    gym.register_envs(ale_py)
    for algo in ("aggrevated", "ppo_kl"):
        entries = yaml.safe_load(hyperparams_path(algo).read_text())
        assert entries["atari"]["env_wrapper"] == ["stable_baselines3.common.atari_wrappers.AtariWrapper"]
        assert entries["atari"]["frame_stack"] == 4 and entries["atari"]["policy"] == "CnnPolicy"
        for key, entry in entries.items():
            if key.endswith("NoFrameskip-v4"):
                assert key in gym.registry, key
                assert entry["expert"] == f"sb3/qrdqn-{key}"


def test_the_shipped_breakout_expert_loads_its_half_precision_weights_as_sb3_does() -> None:
    """The atari benchmark's expert ships as float16 weights (scripts/train_embedded_expert.py): the safe loader and
    SB3's own ``load`` both read them into the float32 CNN, and give the same policy and V* on the same frames."""
    needs("ale_py")
    from stable_baselines3 import PPO

    from sb3ext.experts import VALUE_ONLY
    from sb3ext.experts.references import shipped_expert

    folder = shipped_expert("ppo/BreakoutNoFrameskip-v4_1")
    expert = load_expert("shipped:ppo/BreakoutNoFrameskip-v4_1")
    assert expert.kind == VALUE_ONLY and expert.frame_stack == 4 and expert.obs_dtype == np.uint8
    assert all(p.dtype == th.float32 for p in expert.policy.parameters())
    trusted = PPO.load(folder / "BreakoutNoFrameskip-v4.zip", device="cpu")
    frames = np.random.default_rng(0).integers(0, 256, (8, 4, 84, 84), dtype=np.uint8)
    actions = th.arange(4).repeat(2)
    obs = expert.obs_tensor(frames)
    with th.no_grad():
        values, log_prob, _ = trusted.policy.evaluate_actions(th.as_tensor(frames), actions)
        th.testing.assert_close(expert.log_prob(obs, actions), log_prob)
    th.testing.assert_close(expert.value(obs), values.flatten())
