"""Slow learning tests with the real zoo experts: ``pytest -m slow``.

Each compares the learner after a small budget with the same learner before training, on the same
evaluation episodes, and asserts a margin that a broken implementation cannot meet: zoo-tuned PPO
needs ~20-25k steps on Pendulum-v1 and 10-20k on CartPole-v1 to get there, a random policy scores
about -1200 and 22 respectively. Each learning test has its guard: the same run with the estimator's
advantages negated (``negate``) must fail the bound by a wide margin.
"""

from __future__ import annotations

import numpy as np
import pytest
from rl_zoo3.utils import linear_schedule
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy

from sb3ext.algos.aggrevated import AggreVaTeD
from tests.conftest import needs, shared_expert
from tests.test_learning_kinds import ZOO_KEYS, default_hyperparams, negate_advantages

pytestmark = pytest.mark.slow


def train_and_evaluate(env_id: str, expert: str, steps: int, seed: int) -> tuple[float, float]:
    hyperparams = {k: v for k, v in default_hyperparams(env_id).items() if k not in ZOO_KEYS}
    env = make_vec_env(env_id, n_envs=4, seed=seed)
    model = AggreVaTeD("MlpPolicy", env, expert=shared_expert(expert), seed=seed, **hyperparams)
    eval_env = make_vec_env(env_id, n_envs=1, seed=1000 + seed)
    before, _ = evaluate_policy(model, eval_env, n_eval_episodes=10, deterministic=True)
    model.learn(steps)
    eval_env = make_vec_env(env_id, n_envs=1, seed=1000 + seed)
    after, _ = evaluate_policy(model, eval_env, n_eval_episodes=10, deterministic=True)
    return float(before), float(after)


@pytest.mark.parametrize("seed", [0, 1])
def test_pendulum_reaches_expert_level_in_4k_steps(seed: int) -> None:
    before, after = train_and_evaluate("Pendulum-v1", "sac/Pendulum-v1_1", 4000, seed)
    assert before < -900, f"an untrained learner should fail (got {before:.0f})"
    assert after > -350, f"after 4k steps the learner should be near the expert (~-150), got {after:.0f} (before {before:.0f})"


NEGATE = pytest.mark.parametrize("negate", [False, True], ids=["learns", "guard_negated"])


@pytest.mark.parametrize("seed", [0, 1])
@NEGATE
def test_cartpole_reaches_expert_level_in_5k_steps(seed: int, negate: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    if negate:
        negate_advantages(monkeypatch)
    before, after = train_and_evaluate("CartPole-v1", "dqn/CartPole-v1_1", 5120, seed)
    # an untrained deterministic policy can balance for a while by luck of initialisation: the bound is near the
    # expert (500), far above what luck gives on 10 seeded episodes
    if negate:
        assert after < 200, f"negated advantages balanced for {after:.0f} steps (before {before:.0f})"
    else:
        assert after >= 450, f"after 5k steps the learner should balance (expert 500), got {after:.0f} (before {before:.0f})"


@NEGATE
def test_acrobot_reaches_expert_level_in_3k_steps(negate: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    if negate:
        negate_advantages(monkeypatch)
    before, after = train_and_evaluate("Acrobot-v1", "dqn/Acrobot-v1_1", 3072, 0)
    if negate:
        assert after < -300, f"negated advantages reached {after:.0f} (before {before:.0f})"
    else:
        assert after > -110 and after - before > 100, f"before {before:.0f}, after {after:.0f} (expert ~-75, random -500)"


@pytest.mark.parametrize("seed", [0, 1])
@NEGATE
def test_plate_learns_from_the_shipped_sac_expert_in_8k_steps(
    seed: int, negate: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """sb3ext's own env and expert (no ../shared needed); stock PPO needs ~80k steps for the same."""
    if negate:
        negate_advantages(monkeypatch)
    env_id = "sb3ext/BallPlateContinuous-v0"
    hyperparams = {k: v for k, v in default_hyperparams(env_id).items() if k not in ZOO_KEYS}
    model = AggreVaTeD(
        "MlpPolicy", make_vec_env(env_id, n_envs=4, seed=seed), expert="shipped:sac/sb3ext-BallPlateContinuous-v0_1",
        seed=seed, **hyperparams,
    )  # fmt: skip
    _, before = evaluate_policy(model, make_vec_env(env_id, n_envs=1, seed=1000), 10, return_episode_rewards=True)
    model.learn(8192)
    _, after = evaluate_policy(model, make_vec_env(env_id, n_envs=1, seed=1000), 10, return_episode_rewards=True)
    # episode lengths: the ball stays on the plate for up to 500 steps (random policy ~75, the expert 500)
    assert np.mean(before) < 250, f"an untrained learner should drop the ball early (got {np.mean(before):.0f} steps)"
    if negate:
        assert np.mean(after) < 200, f"negated advantages kept the ball on for {np.mean(after):.0f} steps"
    else:
        assert np.mean(after) >= 400, f"after 8k steps the ball should stay on (expert 500), got {np.mean(after):.0f} steps"


def test_learned_policy_differs_from_a_broken_gradient_sign(monkeypatch: pytest.MonkeyPatch) -> None:
    """Guard: with the advantage sign flipped the same budget must fail (the tests above can fail)."""
    negate_advantages(monkeypatch)
    _, after = train_and_evaluate("Pendulum-v1", "sac/Pendulum-v1_1", 4000, 0)
    assert after < -600, f"a sign-flipped estimator should not learn, got {after:.0f}"
    assert np.isfinite(after)


def mujoco_return(
    env_id: str, expert: str, steps: int, seed: int, episodes: int = 3, module: str | None = "mujoco"
) -> tuple[float, float]:
    """AggreVaTeD with the YAML defaults (VecNormalize on observations, as the zoo's `normalize`): mean return of
    ``episodes`` seeded deterministic episodes before and after ``steps`` env steps."""
    from stable_baselines3.common.vec_env import VecNormalize

    from sb3ext.callbacks import episode_returns

    if module is not None:
        needs(module)
    entry = default_hyperparams(env_id)
    hyperparams = {k: v for k, v in entry.items() if k not in ZOO_KEYS}
    hyperparams["policy_kwargs"] = eval(hyperparams["policy_kwargs"], {"dict": dict})  # the zoo's "dict(...)" string
    if str(hyperparams["learning_rate"]).startswith("lin_"):  # the zoo's linear decay, as its ExperimentManager reads it
        hyperparams["learning_rate"] = linear_schedule(float(hyperparams["learning_rate"][len("lin_") :]))
    env = VecNormalize(make_vec_env(env_id, n_envs=entry["n_envs"], seed=seed), norm_reward=False)
    model = AggreVaTeD("MlpPolicy", env, expert=shared_expert(expert), seed=seed, **hyperparams)

    class Normalized:
        def predict(self, obs, deterministic=True):
            return model.predict(env.normalize_obs(obs), deterministic=True)

    before = float(np.mean(episode_returns(env_id, Normalized(), episodes, seed=1000)[0]))
    model.learn(steps)
    env.training = False
    return before, float(np.mean(episode_returns(env_id, Normalized(), episodes, seed=1000)[0]))


@NEGATE
def test_halfcheetah_runs_from_the_zoo_sac_expert_in_12k_steps(negate: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """The zoo's v3 SAC HalfCheetah expert on HalfCheetah-v5 (expert ~9,400, random ~-280): after 12k env steps the
    learner runs forward (8,144 measured here with the YAML's expert_cap and bound_coef 10, 8,190 with the cap alone,
    5,875 before it; with the leave-one-out advantages negated: -357 with the cap, -326 before)."""
    if negate:
        negate_advantages(monkeypatch)
    before, after = mujoco_return("HalfCheetah-v5", "sac/HalfCheetah-v3_1", 12_288, 0)
    assert before < 500, f"an untrained learner should not run (got {before:.0f})"
    # the bound: half of the 8,144 measured, far above the negated run (-357 measured) and random (~-280)
    if negate:
        assert after < 1000, f"negated advantages ran forward: {after:.0f} (before {before:.0f})"
    else:
        assert after > 4000, f"after 12k steps the learner should run forward, got {after:.0f} (before {before:.0f})"


@pytest.mark.parametrize("fallback", [True, False], ids=["yaml", "guard_no_fallback"])
def test_flat_tqc_critic_with_the_yaml_defaults_never_falls_below_random_and_ends_at_the_expert(fallback: bool) -> None:
    """The shipped TQC MountainCarContinuous expert (the zoo's tqc.yml: gamma 0.9999, a critic nearly flat across
    actions) with the YAML defaults. Without ``low_signal_fallback`` the learner exploits its critic and collapses
    below a random policy (-42 after 10k steps, measured); with it (the YAML's) the low-signal warning fires and
    the learner clones the expert from then on. Measured on 3 seeds: every evaluation after 2k above -18, final 95.1-95.5 (expert 94.6,
    random -33.4 on these episodes); the 5% tolerance of the last assertion is for other machines' floats. The guard
    (``fallback=False``) shows the test sees a fallback that does not act: the learner then ends far from the expert."""
    import warnings

    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.vec_env import VecNormalize

    from sb3ext.callbacks import episode_returns
    from sb3ext.experts import load_expert

    env_id, seed = "MountainCarContinuous-v0", 0
    expert = load_expert("shipped:tqc/MountainCarContinuous-v0_1")
    expert_return = float(np.mean(episode_returns(env_id, expert, 10, seed=50_000)[0]))
    random_return = float(np.mean(episode_returns(env_id, None, 10, seed=50_000)[0]))
    entry = default_hyperparams(env_id)
    hyperparams = {k: v for k, v in entry.items() if k not in ZOO_KEYS}
    env = VecNormalize(make_vec_env(env_id, n_envs=entry["n_envs"], seed=seed), norm_reward=False)
    assert hyperparams["low_signal_fallback"] is True  # the YAML default of this task
    hyperparams["low_signal_fallback"] = fallback
    model = AggreVaTeD("MlpPolicy", env, expert=expert, seed=seed, **hyperparams)

    class Normalized:
        def predict(self, obs, deterministic=True):
            return model.predict(env.normalize_obs(obs), deterministic=True)

    class Evaluate(BaseCallback):
        def __init__(self) -> None:
            super().__init__()
            self.returns: list[tuple[int, float]] = []

        def _on_step(self) -> bool:
            if self.num_timesteps % 2000 == 0:
                mean = float(np.mean(episode_returns(env_id, Normalized(), 10, seed=50_000)[0]))
                self.returns.append((self.num_timesteps, mean))
            return True

    evaluate = Evaluate()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.learn(12_000, callback=evaluate)
    assert any("barely separates" in str(w.message) for w in caught), "the low-signal warning should fire"
    final = evaluate.returns[-1][1]
    if not fallback:
        assert final < expert_return - 0.5 * (expert_return - random_return), (evaluate.returns, expert_return)
        return
    assert model.low_signal_iteration is not None
    assert all(value > random_return for _, value in evaluate.returns), (evaluate.returns, random_return)
    assert final >= expert_return - 0.05 * (expert_return - random_return), (final, expert_return)


def test_a_normal_sac_pendulum_expert_stays_silent_over_the_yaml_run_though_its_critic_flattens() -> None:
    """The zoo's SAC Pendulum expert (the YAML's default, shared here), the YAML's full run (10k env steps, 157
    iterations). Once the learner balances the pendulum, its mean action sits at the critic's maximum and
    train/critic_snr falls below 1: on 10 of 10 seeds measured here, from iteration 44-57 on. The roll-in episodes
    that begin after that get more than V*(s0) promises (train/return_shortfall -0.14 to -0.24), so the warning stays
    silent (before this check it fired on every seed). Four seeds; none may warn, and the ratio must fall below 1 on
    at least one (the check is exercised)."""
    import warnings

    env_id = "Pendulum-v1"
    entry = default_hyperparams(env_id)
    hyperparams = {k: v for k, v in entry.items() if k not in ZOO_KEYS}
    assert not hyperparams.get("low_signal_fallback", False)  # the warning alone decides here
    lowest, shortfalls = [], []
    for seed in range(4):
        env = make_vec_env(env_id, n_envs=entry["n_envs"], seed=seed)
        model = AggreVaTeD("MlpPolicy", env, expert=shared_expert("sac/Pendulum-v1_1"), seed=seed, **hyperparams)
        ratios: list[float] = []
        train = model.train

        def train_and_record(model: AggreVaTeD = model, train=train, ratios: list[float] = ratios) -> None:
            train()
            ratios.append(float(model.logger.name_to_value["train/critic_snr"]))

        model.train = train_and_record  # type: ignore[method-assign]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model.learn(int(entry["n_timesteps"]))
        assert not [w for w in caught if "barely separates" in str(w.message)], (seed, min(ratios))
        lowest.append(min(ratios))
        shortfalls.append(model._promised.shortfall())
        assert shortfalls[-1] is not None and shortfalls[-1] < 0.1, (seed, shortfalls)  # at the expert's level
    assert min(lowest) < 1.0, f"the ratio never fell below 1 ({lowest}): the gate was not exercised"


@pytest.mark.parametrize(
    "env_id",
    [
        # v1 (the env; 16 re-scored roll-ins): 275, 407, 474 at 12k, 14k, 16k through the zoo, seed 0
        "sb3ext/CartPolePixels-v1",
        # v2 (anti-aliased frames; 4 roll-ins): 483 and 371 at 16k through the zoo, seeds 0 and 1
        "sb3ext/CartPolePixels-v2",
    ],
)
@NEGATE
def test_pixel_cartpole_learns_from_the_shipped_state_expert_in_16k_steps(
    env_id: str, negate: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Frames for the learner (CnnPolicy, 4 stacked), ``info["state"]`` for the shipped PPO state expert, the YAML
    defaults. The pixel learner oscillates from one evaluation to the next, so the test takes the best of three
    evaluations at 12k, 14k and 16k env steps (5 episodes each). Random scores 12, always one push ~8, the expert
    500 (the measurements beside the ids used 10 episodes). A learner that did not learn stays far below the
    threshold; the margin is for other machines' floats."""
    from stable_baselines3.common.vec_env import VecFrameStack

    from sb3ext.callbacks import episode_returns

    if negate:
        negate_advantages(monkeypatch)
    seed = 0
    entry = default_hyperparams(env_id)
    hyperparams = {k: v for k, v in entry.items() if k not in ZOO_KEYS | {"frame_stack"}}
    env = VecFrameStack(make_vec_env(env_id, n_envs=entry["n_envs"], seed=seed), entry["frame_stack"])
    model = AggreVaTeD(entry["policy"], env, expert=entry["expert"], seed=seed, device="cpu", **hyperparams)
    evaluations = []
    for steps in (12_288, 2_048, 2_048):
        model.learn(steps, reset_num_timesteps=False)
        returns, _ = episode_returns(env_id, model, 5, seed=50_000, frame_stack=entry["frame_stack"])
        evaluations.append(float(np.mean(returns)))
    print(env_id, evaluations)
    if negate:
        assert max(evaluations) < 100, f"negated advantages balanced: {evaluations}"
    else:
        assert max(evaluations) >= 250, f"the pixel learner should balance for most of an episode by 16k steps: {evaluations}"


@NEGATE
def test_bipedal_walker_learns_from_the_value_only_ppo_expert_in_60k_steps(
    negate: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The zoo's value-only PPO BipedalWalker expert (a policy and V*, no Q*; 199 on 30 episodes, random -101) with
    the YAML entry: at 60k env steps the median of three seeds was at 90% of the way to the expert
    (docs/benchmarks/beyond_expert.md). BipedalWalker's episodes are chaotic: the bound is on the mean of 10 seeded
    episodes and far below the expert, far above what a learner that does not walk gets (below 0)."""
    if negate:
        negate_advantages(monkeypatch)
    before, after = mujoco_return("BipedalWalker-v3", "ppo/BipedalWalker-v3_1", 61_440, 0, episodes=10, module=None)
    assert before < 0, f"an untrained learner should not walk (got {before:.0f})"
    if negate:
        assert after < 0, f"negated advantages walked: {after:.0f}"
    else:
        assert after > 100, f"after 60k env steps the learner should walk (expert 199), got {after:.0f}"
