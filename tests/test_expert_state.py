"""An expert that observes the env's state while the learner observes frames (``sb3ext.common.expert_state``)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from gymnasium import spaces
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.torch_layers import FlattenExtractor
from stable_baselines3.common.vec_env import DummyVecEnv, VecFrameStack

import sb3ext.envs  # noqa: F401  (registers the sb3ext/ ids)
from sb3ext.algos.aggrevated import AggreVaTeD
from sb3ext.common.expert_state import STATE_KEY, ExpertState, StateTracker
from tests.toy_experts import GaussianPolicyExpert, QuadraticExpert

#: a flatten extractor: the toy frames (8x8) are too small for NatureCNN
FLAT = {"features_extractor_class": FlattenExtractor}


@pytest.mark.parametrize(
    "pixels, state",
    [("sb3ext/CartPolePixels-v1", "sb3ext/CartPole-v0"), ("sb3ext/BallPlatePixels-v0", "sb3ext/BallPlateContinuous-v0")],
)
def test_pixel_envs_give_the_state_envs_observation_in_info(pixels: str, state: str) -> None:
    pixel_env, state_env = gym.make(pixels), gym.make(state)
    assert pixel_env.get_wrapper_attr("state_space") == state_env.observation_space
    frame, info = pixel_env.reset(seed=3)
    obs, state_info = state_env.reset(seed=3)
    assert frame.dtype == np.uint8 and STATE_KEY not in state_info  # state envs are unchanged
    np.testing.assert_array_equal(info[STATE_KEY], obs)
    for _ in range(5):
        action = 1 if isinstance(state_env.action_space, spaces.Discrete) else np.zeros(2, np.float32)
        *_, info = pixel_env.step(action)
        obs, *_ = state_env.step(action)
        np.testing.assert_array_equal(info[STATE_KEY], obs)


class _Counter(gym.Env):
    """Observes a constant image; its state is [episode, t]; episodes last 3 steps."""

    observation_space = spaces.Box(0, 255, (8, 8, 1), np.uint8)
    action_space = spaces.Box(-1.0, 1.0, (1,), np.float32)
    state_space = spaces.Box(-np.inf, np.inf, (2,), np.float32)

    def __init__(self) -> None:
        self.episode, self.t = -1, 0

    def _state(self) -> np.ndarray:
        return np.array([self.episode, self.t], np.float32)

    def reset(self, *, seed=None, options=None):  # type: ignore[no-untyped-def]
        super().reset(seed=seed)
        self.episode, self.t = self.episode + 1, 0
        return np.zeros((8, 8, 1), np.uint8), {STATE_KEY: self._state()}

    def step(self, action):  # type: ignore[no-untyped-def]
        self.t += 1
        return np.zeros((8, 8, 1), np.uint8), 1.0, self.t == 3, False, {STATE_KEY: self._state()}


def test_state_tracker_follows_episode_ends_through_vec_wrappers() -> None:
    env = VecFrameStack(DummyVecEnv([_Counter, _Counter]), 2)  # a wrapper keeps its own (empty) reset_infos
    env.reset()
    tracker = StateTracker(env)
    np.testing.assert_array_equal(tracker.current(), [[0, 0], [0, 0]])
    for t in range(1, 4):
        _, _, dones, infos = env.step(np.zeros((2, 1), np.float32))
        next_states = tracker.step(dones, infos)
        np.testing.assert_array_equal(next_states, [[0, t], [0, t]])  # the last state of the episode at t = 3
    assert dones.all()
    np.testing.assert_array_equal(tracker.current(), [[1, 0], [1, 0]])  # after the end: the reset state
    env.reset()
    tracker.reset()  # a new reset (AggreVaTeD's _setup_learn): read again from the reset infos
    np.testing.assert_array_equal(tracker.current(), [[2, 0], [2, 0]])


class _RecordingQuadratic(QuadraticExpert):
    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        self.seen: list[np.ndarray] = []

    def act(self, expert_obs: np.ndarray) -> np.ndarray:
        self.seen.append(np.array(expert_obs))
        return super().act(expert_obs)


def test_a_state_expert_drives_a_frame_stacked_pixel_learner() -> None:
    env = VecFrameStack(make_vec_env(_Counter, n_envs=2), 4)
    expert = _RecordingQuadratic(_Counter.state_space, _Counter.action_space, target=np.array([0.5]))
    model = AggreVaTeD("CnnPolicy", env, expert=expert, n_steps=4, batch_size=8, n_epochs=1, beta_init=1.0,
                       n_action_samples=2, policy_kwargs=FLAT, seed=0)  # fmt: skip
    model.learn(8)
    # beta 1: the expert acted at every step and saw each env's [episode, t], never the frames; at each episode's
    # first state it was asked once more, for V*(s0) (train/return_shortfall)
    seen = np.stack(expert.seen[:6])  # (queries, envs, 2); then the scoring of all states
    np.testing.assert_array_equal(seen[:, 0], [[0, 0], [0, 0], [0, 1], [0, 2], [1, 0], [1, 0]])
    np.testing.assert_array_equal(seen[:, 1], seen[:, 0])
    learner_obs, aggregated = model._aggregation.get()  # type: ignore[union-attr]
    assert learner_obs.dtype == np.uint8 and learner_obs.shape[1:] == model.observation_space.shape == (
        4,
        8,
        8,
    )  # uint8, stacked, channel-first
    np.testing.assert_array_equal(aggregated[:2], [[0, 0], [0, 0]])


def test_value_only_state_expert_scores_the_states_of_the_roll_in() -> None:
    """A value-only expert that reads info["state"] is scored at the states the roll-in visited, in order, across an
    episode's end (the env's reset state follows its last one)."""
    expert = GaussianPolicyExpert(_Counter.state_space, _Counter.action_space, target=np.array([0.0]))
    model = AggreVaTeD("CnnPolicy", make_vec_env(_Counter, n_envs=1), expert=expert, n_steps=4, batch_size=4,
                       n_epochs=1, policy_kwargs=FLAT, seed=0)  # fmt: skip
    model.learn(4)
    _, expert_obs = model._aggregation.get()  # type: ignore[union-attr]
    np.testing.assert_array_equal(expert_obs, [[0, 0], [0, 1], [0, 2], [1, 0]])


def test_an_expert_that_fits_neither_the_observation_nor_the_state_is_refused_naming_both() -> None:
    expert = QuadraticExpert(spaces.Box(-1, 1, (5,), np.float32), _Counter.action_space, target=np.array([0.5]))
    with pytest.raises(
        ValueError,
        match=r"observes Box\(shape=\(5,\).*learner's observation space Box\(shape=\(1, 8, 8\).*state.*space Box\(shape=\(2,\)",
    ):
        AggreVaTeD("CnnPolicy", make_vec_env(_Counter, n_envs=1), expert=expert, policy_kwargs=FLAT)
    with pytest.raises(ValueError, match=r"expert observation space Box\(shape=\(5,\).*environment observation space"):
        AggreVaTeD("MlpPolicy", make_vec_env("Pendulum-v1", n_envs=1), expert=expert)


def test_expert_state_wrapper_gives_any_env_the_convention() -> None:
    env = ExpertState(gym.make("Pendulum-v1"), spaces.Box(-np.inf, np.inf, (2,), np.float32), lambda e: e.state)
    _, info = env.reset(seed=0)
    np.testing.assert_allclose(info[STATE_KEY], env.unwrapped.state)
    *_, info = env.step(np.zeros(1, np.float32))
    np.testing.assert_allclose(info[STATE_KEY], env.unwrapped.state)
    assert DummyVecEnv([lambda: env]).get_attr("state_space")[0].shape == (2,)
    broken = ExpertState(gym.make("Pendulum-v1"), spaces.Box(-1, 1, (3,), np.float32), lambda e: e.state)
    with pytest.raises(ValueError, match=r"shape \(2,\), state_space has shape \(3,\)"):
        broken.reset(seed=0)


def test_the_shipped_cartpole_state_expert_balances_the_pixel_cartpole_from_info_state() -> None:
    from sb3ext.experts import load_expert

    expert = load_expert("shipped:ppo/sb3ext-CartPole-v0_1")
    env = gym.make("sb3ext/CartPolePixels-v1")
    assert expert.observation_space == env.get_wrapper_attr("state_space")
    _, info = env.reset(seed=50_000)
    steps, done = 0, False
    while not done:
        _, _, terminated, truncated, info = env.step(int(expert.act(info[STATE_KEY][None])[0]))
        steps, done = steps + 1, terminated or truncated
    # 500 (the time limit) here; a random policy falls within ~20 steps. The margin is for other machines' floats.
    assert steps >= 400, steps


def test_the_value_loss_does_not_train_a_shared_cnn_during_imitation() -> None:
    """The value head's loss on the env's returns would swamp the imitation signal in a shared features extractor
    (measured on BallPlatePixels: no learning in 20k steps); it trains the value head on detached features."""
    from sb3ext.algos.aggrevated.policies import distribution_and_values

    env = VecFrameStack(make_vec_env("sb3ext/CartPolePixels-v1", n_envs=1), 4)
    model = AggreVaTeD("CnnPolicy", env, expert="shipped:ppo/sb3ext-CartPole-v0_1", n_steps=4, batch_size=4, seed=0)
    policy = model.policy
    assert policy.share_features_extractor
    obs = th.as_tensor(np.stack([model.observation_space.sample() for _ in range(3)]))
    distribution, values = distribution_and_values(policy, obs[:2], obs[2:])
    values.sum().backward()
    assert all(p.grad is None for p in policy.features_extractor.parameters())
    assert policy.value_net.weight.grad is not None and policy.value_net.weight.grad.abs().sum() > 0
    policy.zero_grad()
    distribution.log_prob(th.tensor([0, 1])).sum().backward()
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in policy.features_extractor.parameters())
    # the same numbers as SB3's evaluate_actions
    sb3_values, _, _ = policy.evaluate_actions(obs[2:], th.tensor([0]))
    th.testing.assert_close(values.detach(), sb3_values.flatten().detach())


def test_a_cnn_learner_runs_channels_last_on_cpu_with_the_same_outputs(tmp_path) -> None:
    """Channels-last convolutions are a layout change only: the outputs match SB3's own policy with the same
    weights, training runs, and a saved learner reloads channels-last and predicts the same actions."""
    from stable_baselines3.common.policies import ActorCriticCnnPolicy

    env = VecFrameStack(make_vec_env("sb3ext/CartPolePixels-v1", n_envs=2, seed=0), 4)
    model = AggreVaTeD("CnnPolicy", env, expert="shipped:ppo/sb3ext-CartPole-v0_1", n_steps=8, batch_size=8, seed=0)
    convolutions = [m for m in model.policy.features_extractor.modules() if isinstance(m, th.nn.Conv2d)]
    assert convolutions and all(c.weight.is_contiguous(memory_format=th.channels_last) for c in convolutions)
    reference = ActorCriticCnnPolicy(model.observation_space, model.action_space, lambda _: 0.0)
    reference.load_state_dict(model.policy.state_dict())
    assert not reference.features_extractor.cnn[0].weight.is_contiguous(memory_format=th.channels_last)
    obs = th.as_tensor(np.stack([model.observation_space.sample() for _ in range(5)]))
    with th.no_grad():
        ours, reference_logits = model.policy.get_distribution(obs), reference.get_distribution(obs)
        th.testing.assert_close(ours.distribution.logits, reference_logits.distribution.logits, atol=1e-5, rtol=1e-5)
    model.learn(2 * 8 * 2)  # two iterations: the update runs on channels-last weights and inputs
    assert all(c.weight.is_contiguous(memory_format=th.channels_last) for c in convolutions)
    frames = obs.numpy()
    actions, _ = model.predict(frames, deterministic=True)
    model.save(tmp_path / "learner.zip")
    loaded = AggreVaTeD.load(tmp_path / "learner.zip")
    conv = next(m for m in loaded.policy.features_extractor.modules() if isinstance(m, th.nn.Conv2d))
    assert conv.weight.is_contiguous(memory_format=th.channels_last)
    np.testing.assert_array_equal(loaded.predict(frames, deterministic=True)[0], actions)


def test_evaluation_stacks_frames_as_vec_frame_stack_and_feeds_a_state_expert_the_state() -> None:
    from sb3ext.callbacks import episode_returns
    from sb3ext.callbacks.evaluation import StackedFrames
    from sb3ext.experts import load_expert

    vec = VecFrameStack(make_vec_env("sb3ext/CartPolePixels-v1", n_envs=1), 4)
    single = StackedFrames(gym.make("sb3ext/CartPolePixels-v1"), 4)
    assert single.observation_space == vec.observation_space
    vec.seed(7)
    stacked_vec = vec.reset()
    stacked, _ = single.reset(seed=7)
    for action in [0, 1, 1, 0, 1, 1]:
        np.testing.assert_array_equal(stacked, stacked_vec[0])
        stacked_vec, _, _, _ = vec.step(np.array([action]))
        stacked, *_ = single.step(action)
    assert stacked[..., 0].any() and not np.array_equal(stacked[..., 0], stacked[..., 3])  # older frames, shifted

    expert = load_expert("shipped:ppo/sb3ext-CartPole-v0_1")
    returns, _ = episode_returns("sb3ext/CartPolePixels-v1", expert, 2, seed=50_000, observe_state=True)
    assert returns.min() >= 400, returns  # 500 here; random ~20


def test_evaluation_stacks_a_dict_observation_as_vec_frame_stack() -> None:
    """sb3ext/BallPlatePixels-v1's Dict (camera frames and joint readings): every key stacked as VecFrameStack does."""
    from sb3ext.callbacks.evaluation import StackedFrames

    vec = VecFrameStack(make_vec_env("sb3ext/BallPlatePixels-v1", n_envs=1), 4)
    single = StackedFrames(gym.make("sb3ext/BallPlatePixels-v1"), 4)
    assert single.observation_space == vec.observation_space
    assert single.observation_space["joints"].shape == (16,) and single.observation_space["camera"].shape == (84, 84, 4)
    vec.seed(7)
    stacked_vec = vec.reset()
    stacked, _ = single.reset(seed=7)
    for action in ([1.0, 0.0], [0.0, -1.0], [1.0, 1.0], [-1.0, 0.5]):
        for key in ("camera", "joints"):
            np.testing.assert_array_equal(stacked[key], stacked_vec[key][0])
        stacked_vec, _, _, _ = vec.step(np.array([action], dtype=np.float32))
        stacked, *_ = single.step(np.array(action, dtype=np.float32))
    assert stacked["joints"][:4].any() and not np.array_equal(stacked["joints"][:4], stacked["joints"][-4:])


def test_a_dict_learner_of_frames_and_joints_trains_from_the_state_expert_and_replays(tmp_path) -> None:
    """sb3ext/BallPlatePixels-v1 with MultiInputPolicy: the aggregated states keep each key (frames uint8), the state
    expert reads info["state"], DAgger's memory holds Dict states too, and the saved learner predicts the same."""
    from sb3ext.algos.aggrevated.dagger import MatchedDAgger

    env = VecFrameStack(make_vec_env("sb3ext/BallPlatePixels-v1", n_envs=2, seed=0), 4)
    expert = "shipped:sac/sb3ext-BallPlateContinuous-v0_1"
    model = AggreVaTeD("MultiInputPolicy", env, expert=expert, n_steps=16, batch_size=32, n_epochs=1, seed=0)
    model.learn(64)
    aggregation = model._aggregation
    assert aggregation is not None and len(aggregation) == 64 and model._expert_reads_state
    camera, joints = aggregation.learner_obs.arrays["camera"], aggregation.learner_obs.arrays["joints"]
    assert camera.dtype == np.uint8 and camera.shape[1:] == (4, 84, 84) and joints.shape[1:] == (16,)  # channel-first (SB3)
    assert np.abs(joints[:64]).sum() > 0 and camera[:64].any()
    assert aggregation.expert_obs.shape[1:] == (8,)  # the state, not the frames
    obs = env.reset()
    actions, _ = model.predict(obs, deterministic=True)
    model.save(tmp_path / "learner.zip")
    np.testing.assert_array_equal(AggreVaTeD.load(tmp_path / "learner.zip").predict(obs, deterministic=True)[0], actions)

    dagger = MatchedDAgger("MultiInputPolicy", env, expert=expert, expert_action_memory=100, n_steps=16, batch_size=32,
                           n_epochs=1, seed=0)  # fmt: skip
    dagger.learn(32)
    stored, expert_actions = dagger._bc_memory.stored()
    assert stored["camera"].shape == (32, 4, 84, 84) and expert_actions.shape == (32, 2)
