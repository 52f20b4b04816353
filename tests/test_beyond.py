"""The stage beyond the expert (``beyond_after``): SAC kickstarted from the imitation learner, inside AggreVaTeD.

Fast tests shrink the stage's warm-up and clone (module constants) so that it begins within seconds; the zoo CLI test
(tests/test_zoo_cli.py) runs it at its real sizes.
"""

from __future__ import annotations

import copy
import io
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch as th
from stable_baselines3.common.callbacks import BaseCallback, CheckpointCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import VecNormalize

from sb3ext.algos.aggrevated import AggreVaTeD, beyond
from sb3ext.algos.aggrevated.beyond import KickstartSAC, anchor_weight, schedule
from sb3ext.common.serialization import UnsafeObjectError

EXPERT = "shipped:sac/Pendulum-v1_1"
SMALL = {"n_steps": 64, "batch_size": 64, "n_epochs": 2}


@pytest.fixture
def small_stage(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(beyond, "WARMUP_STEPS", 400)
    monkeypatch.setattr(beyond, "CLONE_STEPS", 300)
    monkeypatch.setattr(beyond, "BUFFER_SIZE", 4000)
    monkeypatch.setattr(beyond, "BATCH_SIZE", 64)


def pendulum(n_envs: int = 4, seed: int = 0) -> VecNormalize:
    return VecNormalize(make_vec_env("Pendulum-v1", n_envs=n_envs, seed=seed), norm_reward=False)


def staged(env: VecNormalize, steps: int = 2000, **kwargs) -> AggreVaTeD:  # type: ignore[no-untyped-def]
    model = AggreVaTeD("MlpPolicy", env, expert=EXPERT, beyond_after=256, seed=0, **SMALL, **kwargs)
    model.learn(steps)
    return model


def test_anchor_weight_is_the_normalised_shortfall() -> None:
    assert anchor_weight(1.0, recent=-100.0, random_return=-100.0, prior_return=100.0) == 1.0
    assert anchor_weight(1.0, recent=0.0, random_return=-100.0, prior_return=100.0) == 0.5
    assert anchor_weight(2.0, recent=150.0, random_return=-100.0, prior_return=100.0) == 0.0  # past the prior: no pull
    assert anchor_weight(1.0, recent=-300.0, random_return=-100.0, prior_return=100.0) == 1.0  # clipped
    assert anchor_weight(1.0, recent=0.0, random_return=10.0, prior_return=5.0) == 0.0  # a prior no better than random


@pytest.mark.parametrize(("n_envs", "expected"), [(1, (4, 1)), (4, (1, 1)), (8, (1, 2)), (16, (1, 4))])
def test_one_gradient_step_per_four_env_steps_for_any_number_of_envs(n_envs: int, expected: tuple[int, int]) -> None:
    train_freq, gradient_steps = schedule(n_envs)
    assert (train_freq, gradient_steps) == expected
    assert gradient_steps / (train_freq * n_envs) == beyond.UPDATES_PER_ENV_STEP


def test_the_stage_takes_over_after_beyond_after_env_steps(small_stage: None) -> None:
    env = pendulum()
    model = AggreVaTeD("MlpPolicy", env, expert=EXPERT, beyond_after=512, seed=0, **SMALL)
    model.learn(256)
    assert model._stage is None and model.imitation_iterations == 1
    model.learn(1856)  # the imitation's remaining 256 env steps, then the stage's 1600
    stage = model._stage
    assert isinstance(stage, KickstartSAC)
    assert model.imitation_iterations == 2
    assert stage.num_timesteps == model.stage_timesteps == 1600 and model.num_timesteps == 1856
    assert not env.training, "the observation statistics are frozen from the hand-over on"
    # the first episodes were random, the warm-up's the prior's (Pendulum's episodes: 200 steps)
    assert model.stage_random_return is not None and model.stage_prior_return is not None
    assert model.stage_prior_return > model.stage_random_return
    assert stage._n_updates == model.stage_n_updates > 0
    obs = env.reset()
    assert np.array_equal(model.predict(obs, deterministic=True)[0], stage.predict(obs, deterministic=True)[0])


def test_a_model_saved_in_the_stages_warm_up_acts_as_the_imitation_learner(small_stage: None) -> None:
    env = pendulum()
    model = staged(env, steps=256 + 200)  # the hand-over, then 200 of the warm-up's 400 env steps: no update yet
    assert model._stage is not None and model._stage._n_updates == 0
    obs = env.reset()
    imitation = model.policy.predict(obs, deterministic=True)[0]  # the imitation learner's own policy
    assert np.array_equal(model.predict(obs, deterministic=True)[0], imitation)
    model.learn(400, reset_num_timesteps=False)  # past the warm-up: the clone, then the stage acts
    assert model._stage._n_updates > 0
    assert np.array_equal(model.predict(obs, deterministic=True)[0], model._stage.predict(obs, deterministic=True)[0])


def test_the_clone_puts_the_actor_on_the_prior(small_stage: None) -> None:
    model = staged(pendulum(), steps=256 + 404)  # the warm-up, then one call to train: the clone and a step
    stage = model._stage
    assert stage is not None and stage.replay_buffer is not None and stage._n_updates == 1
    obs = stage.replay_buffer.sample(256, env=stage._vec_normalize_env).observations
    target, _ = stage.prior(obs)  # type: ignore[misc]
    with th.no_grad():
        gap = float(((stage.actor(obs, deterministic=True) - target) ** 2).mean())
        fresh = KickstartSAC("MlpPolicy", make_vec_env("Pendulum-v1"), policy_kwargs={"net_arch": [256, 256]}, seed=1)
        untrained = float(((fresh.actor(obs, deterministic=True) - target) ** 2).mean())
    assert gap < untrained / 20, (gap, untrained)


def test_the_pull_follows_the_shortfall_of_the_actors_episodes(small_stage: None) -> None:
    model = staged(pendulum())
    stage = model._stage
    assert stage is not None and stage.random_return is not None and stage.prior_return is not None
    stage._recent.clear()
    stage._recent.extend([stage.random_return] * 3)
    assert stage.lam() == beyond.ANCHOR
    stage._recent.extend([stage.prior_return + 1.0] * 10)
    assert stage.lam() == 0.0
    stage.prior = None  # plain SAC
    assert stage.lam() == 0.0


def test_the_pull_holds_the_actor_near_the_prior_in_sacs_own_updates(
    small_stage: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """300 updates from the same saved networks and seeds, with the pull at full weight and off: the pull's
    gradient (added by the actor optimizer's hook) tells them apart, and it keeps the actor closer to the prior."""
    model = staged(pendulum())
    stage = model._stage
    assert stage is not None and stage.replay_buffer is not None
    saved, log_ent_coef = copy.deepcopy(stage.get_parameters()), stage.log_ent_coef.detach().clone()
    obs = stage.replay_buffer.sample(512, env=stage._vec_normalize_env).observations
    target, _ = stage.prior(obs)  # type: ignore[misc]
    gaps: dict[float, float] = {}
    logged: dict[float, float | None] = {}
    for weight in (beyond.ANCHOR, 0.0):
        stage.set_parameters(saved, exact_match=True)
        with th.no_grad():
            stage.log_ent_coef.copy_(log_ent_coef)
        monkeypatch.setattr(stage, "lam", lambda weight=weight: weight)
        np.random.seed(0)
        th.manual_seed(0)
        stage.logger.name_to_value.clear()
        stage.train(300, batch_size=64)
        with th.no_grad():
            gaps[weight] = float(((stage.actor(obs, deterministic=True) - target) ** 2).mean())
        logged[weight] = stage.logger.name_to_value.get("beyond/prior_gap")
    assert gaps[beyond.ANCHOR] < 0.5 * gaps[0.0], gaps
    # the pull's gap is logged while the pull is on (a squared distance summed over the one action dimension)
    assert logged[0.0] is None and logged[beyond.ANCHOR] is not None and 0.0 < logged[beyond.ANCHOR] < 4.0, logged


def test_save_load_and_resume_with_the_replay(small_stage: None, tmp_path: Path) -> None:
    env = pendulum()
    model = staged(env)
    model.save(tmp_path / "model.zip")
    model.save_replay_buffer(tmp_path / "replay_buffer.pkl")
    with zipfile.ZipFile(tmp_path / "model.zip") as archive:
        assert {"_stage.policy.pth", "_stage.actor.optimizer.pth", "_stage.critic.optimizer.pth"} <= set(archive.namelist())
    obs = env.reset()
    expected = model.predict(obs, deterministic=True)[0]
    alone = AggreVaTeD.load(tmp_path / "model.zip")  # enjoy's load: no env, no expert, no replay
    assert alone._stage is not None and alone._stage.buffer_size == 1
    assert np.array_equal(alone.predict(obs, deterministic=True)[0], expected)

    resumed = AggreVaTeD.load(tmp_path / "model.zip", env=env, expert=EXPERT)
    resumed.load_replay_buffer(tmp_path / "replay_buffer.pkl")
    buffer, original = resumed.replay_buffer, model.replay_buffer
    assert buffer is not None and original is not None and buffer.pos == original.pos
    assert np.array_equal(buffer.observations[: buffer.pos], original.observations[: original.pos])
    assert np.array_equal(buffer.rewards[: buffer.pos], original.rewards[: original.pos])
    assert resumed.stage_random_return == model.stage_random_return
    updates = resumed.stage_n_updates
    resumed.learn(400)  # all in the stage: no new warm-up, no second clone
    assert resumed.stage_timesteps == model.stage_timesteps + 400
    assert resumed.stage_n_updates == updates + 400 // 4
    assert resumed.imitation_iterations == model.imitation_iterations

    bare = AggreVaTeD.load(tmp_path / "model.zip", env=env, expert=EXPERT)  # a checkpoint without its replay
    with pytest.warns(UserWarning, match=r"resumes at \d+ env steps without its replay buffer: the prior refills it"):
        bare.learn(600)
    assert bare.stage_n_updates == model.stage_n_updates + (600 - beyond.WARMUP_STEPS) // 4


def test_a_replay_that_does_not_fit_is_refused(small_stage: None, tmp_path: Path) -> None:
    model = staged(pendulum())
    path = tmp_path / "replay.pkl"
    model.save_replay_buffer(path)
    with zipfile.ZipFile(path) as archive:
        entries = {n: archive.read(n) for n in archive.namelist()}

    def write(name: str, array: np.ndarray | None) -> Path:
        changed = dict(entries)
        if array is None:
            changed.pop(name)
        else:
            raw = io.BytesIO()
            np.save(raw, array, allow_pickle=True)
            changed[name] = raw.getvalue()
        target = tmp_path / f"bad_{len(list(tmp_path.iterdir()))}.pkl"
        with zipfile.ZipFile(target, "w") as archive:
            for n, raw_bytes in changed.items():
                archive.writestr(n, raw_bytes)
        return target

    pos = int(model.replay_buffer.pos)  # type: ignore[union-attr]
    cases = [
        (write("rewards.npy", np.zeros((pos, 3), np.float32)), r"rewards.npy\]: shape \(\d+, 3\) of float32"),
        (write("actions.npy", np.array([object()] * pos, dtype=object)), r"actions.npy\]: shape .* of object"),
        (write("pos.npy", np.int64(10**9)), "pos 1000000000; allowed"),
        (write("dones.npy", None), "a replay of this model holds exactly"),
    ]
    for path, message in cases:
        with pytest.raises((ValueError, UnsafeObjectError), match=message):
            model.load_replay_buffer(path)


def test_stage_entries_that_the_fields_do_not_describe_are_refused(small_stage: None, tmp_path: Path) -> None:
    model = staged(pendulum())
    model.save(tmp_path / "staged.zip")
    imitation = AggreVaTeD("MlpPolicy", pendulum(), expert=EXPERT, seed=0, **SMALL)
    imitation.learn(64)
    imitation.save(tmp_path / "plain.zip")
    with zipfile.ZipFile(tmp_path / "staged.zip") as archive:
        stage_policy = archive.read("_stage.policy.pth")
    with zipfile.ZipFile(tmp_path / "plain.zip", "a") as archive:
        archive.writestr("_stage.policy.pth", stage_policy)
        archive.writestr("env.policy.pth", stage_policy)
    with pytest.raises(UnsafeObjectError, match=r"\[_stage.policy.pth\]: refused; its fields' model saves policy"):
        AggreVaTeD.load(tmp_path / "plain.zip")


def test_callbacks_see_the_model_they_were_given(small_stage: None, tmp_path: Path) -> None:
    seen: list[tuple[int, bool]] = []

    class Watch(BaseCallback):
        def _on_step(self) -> bool:
            seen.append((self.model.num_timesteps, isinstance(self.model, AggreVaTeD)))
            return self.model.num_timesteps < 900  # stops the stage, as a pruned Optuna trial does

    checkpoints = CheckpointCallback(200, str(tmp_path), save_replay_buffer=True)
    model = AggreVaTeD("MlpPolicy", pendulum(), expert=EXPERT, beyond_after=256, seed=0, **SMALL)
    model.learn(4000, callback=[Watch(), checkpoints])
    steps = [s for s, _ in seen]
    assert all(is_model for _, is_model in seen)
    assert steps == list(range(4, 904, 4)), "one call per env step of the VecEnv, on the model's count"
    assert model.stage_timesteps == 900 - 256
    assert (tmp_path / "rl_model_800_steps.zip").is_file()
    assert (tmp_path / "rl_model_replay_buffer_800_steps.pkl").is_file()
    AggreVaTeD.load(tmp_path / "rl_model_800_steps.zip").load_replay_buffer(tmp_path / "rl_model_replay_buffer_800_steps.pkl")


def test_the_reward_floor_reaches_the_critics_replay_and_not_the_logged_returns(small_stage: None, tmp_path: Path) -> None:
    """Pendulum's rewards lie in [-16.3, 0]: floored at -1, every stored reward is -1 or above, while the episodes'
    logged returns (the Monitor's, what evaluations see) keep the env's; a saved model's stage keeps its floor."""
    plain, floored = staged(pendulum()), staged(pendulum(), beyond_reward_floor=-1.0)
    for model in (plain, floored):
        assert model.replay_buffer is not None and model.replay_buffer.size() > 200  # rows of 4 envs
    assert plain.replay_buffer.rewards[: plain.replay_buffer.size()].min() < -5.0  # type: ignore[union-attr]
    assert floored.replay_buffer.rewards[: floored.replay_buffer.size()].min() >= -1.0  # type: ignore[union-attr]
    assert min(info["r"] for info in floored.ep_info_buffer) < -200.0  # type: ignore[union-attr]
    floored.save(tmp_path / "floored.zip")
    loaded = AggreVaTeD.load(tmp_path / "floored.zip")
    assert loaded.beyond_reward_floor == -1.0 and loaded._stage is not None and loaded._stage.reward_floor == -1.0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"beyond_after": -1}, r"beyond_after.*-1.*an integer >= 0 or None"),
        ({"beyond_after": 1.5}, r"beyond_after.*1.5.*an integer >= 0 or None"),
        ({"beyond_reward_floor": "low"}, r"beyond_reward_floor='low'.*a number or None"),
        ({"beyond_reward_floor": float("nan")}, r"beyond_reward_floor=nan.*a number or None"),
    ],
)
def test_bad_stage_settings_are_refused_naming_them(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        AggreVaTeD("MlpPolicy", "Pendulum-v1", expert=EXPERT, **kwargs)


def test_the_stage_needs_box_actions() -> None:
    with pytest.raises(ValueError, match=r"beyond_after=100 needs Box actions .* Discrete\(2\)"):
        AggreVaTeD("MlpPolicy", "CartPole-v1", beyond_after=100)


@pytest.mark.slow
def test_the_stage_passes_the_learner_it_starts_from(monkeypatch: pytest.MonkeyPatch) -> None:
    """A learned result: from a learner that imitated for 512 env steps (far below the expert), the stage at its
    full warm-up and clone swings the pendulum up within 40k env steps. Mean of 10 seeded episodes each; the margin
    is hundreds of reward units (plain cloning of the prior cannot pass it)."""
    monkeypatch.setattr(beyond, "BUFFER_SIZE", 50_000)

    def evaluate(model: AggreVaTeD) -> float:
        env = pendulum(n_envs=1, seed=0)
        env.obs_rms = model.get_vec_normalize_env().obs_rms  # type: ignore[union-attr]
        env.training = False
        returns = []
        for i in range(10):
            env.seed(100 + i)
            obs, done, total = env.reset(), False, 0.0
            while not done:
                obs, _, dones, _ = env.step(model.predict(obs, deterministic=True)[0])
                total, done = total + float(env.get_original_reward()[0]), bool(dones[0])
            returns.append(total)
        return float(np.mean(returns))

    model = AggreVaTeD("MlpPolicy", pendulum(), expert=EXPERT, beyond_after=512, seed=0, n_steps=64, batch_size=256)
    model.learn(512)
    before = evaluate(model)
    model.learn(40_000 - 512)
    after = evaluate(model)
    assert before < -700 and after > -350, (before, after)
