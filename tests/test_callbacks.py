"""ExpertGapEvalCallback and the shared evaluation helpers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.logger import configure

from sb3ext.callbacks import ExpertGapEvalCallback, episode_returns, first_crossing, threshold_between
from sb3ext.experts import PENDULUM_EXPERT, load_expert, shipped_expert


def test_first_crossing_and_threshold() -> None:
    steps = np.array([100, 200, 300, 400, 500])
    assert first_crossing(steps, np.array([-5.0, 1.0, 0.0, 2.0, 3.0]), 1.0) == (200, 0.75)
    assert first_crossing(steps, np.zeros(5), 1.0) == (None, 0.0)
    assert threshold_between(-1000.0, -100.0) == pytest.approx(-190.0)


def test_episode_returns_are_seeded_and_the_expert_beats_random() -> None:
    expert = load_expert(shipped_expert(PENDULUM_EXPERT))
    random_a, lengths = episode_returns("Pendulum-v1", None, 3, seed=5)
    random_b, _ = episode_returns("Pendulum-v1", None, 3, seed=5)
    np.testing.assert_array_equal(random_a, random_b)
    assert list(lengths) == [200, 200, 200]
    expert_returns, _ = episode_returns("Pendulum-v1", expert, 5, seed=5, make_env=expert.make_env)
    assert np.median(expert_returns) > np.median(random_a) + 500  # Pendulum: expert ~-150, random ~-1200


class _LeanRight:
    """A CartPole policy that acts on each row alone (exact in any batch), its batch sizes recorded."""

    def __init__(self) -> None:
        self.batches: list[int] = []

    def predict(self, obs: np.ndarray, deterministic: bool = True) -> tuple[np.ndarray, None]:
        self.batches.append(len(obs))
        return (obs[:, 2] > 0).astype(int), None


def test_episodes_side_by_side_keep_each_episodes_seed_and_course() -> None:
    """Seven seeded episodes of unequal lengths, one after the other or up to 3 or 10 at once, give the same returns
    in the same order from a policy exact in any batch; at once, the policy is called about a third as often."""
    one = _LeanRight()
    returns, lengths = episode_returns("CartPole-v1", one, 7, seed=11)
    assert len(set(lengths.tolist())) > 2 and set(one.batches) == {1}, "episodes of unequal lengths, one at a time"
    for side_by_side in (3, 10):
        together = _LeanRight()
        again, again_lengths = episode_returns("CartPole-v1", together, 7, seed=11, side_by_side=side_by_side)
        np.testing.assert_array_equal(again, returns)
        np.testing.assert_array_equal(again_lengths, lengths)
        assert max(together.batches) == min(side_by_side, 7) and len(together.batches) < len(one.batches) / 2
    with pytest.raises(ValueError, match="needs a policy"):
        episode_returns("CartPole-v1", None, 3, side_by_side=2)
    with pytest.raises(ValueError, match="at least 1, got 0"):
        episode_returns("CartPole-v1", one, 3, side_by_side=0)


def test_callback_logs_the_gap_and_the_crossing(tmp_path: Path) -> None:
    model = PPO("MlpPolicy", make_vec_env("Pendulum-v1", n_envs=1, seed=0), n_steps=64, batch_size=64, seed=0)
    model.set_logger(configure(str(tmp_path), ["csv"]))
    # references given: an "expert" at -1e4 makes any learner cross at the first evaluation
    callback = ExpertGapEvalCallback(env_id="Pendulum-v1", expert_return=-1e4, random_return=-2e4, eval_freq=64,
                                     n_eval_episodes=1)  # fmt: skip
    model.learn(128, callback=callback)
    assert callback.threshold_crossed_at == 64
    rows = (tmp_path / "progress.csv").read_text().splitlines()
    header = rows[0].split(",")
    for key in ("eval/gap_closed", "eval/expert_return", "eval/random_return", "eval/threshold_crossed_at"):
        assert key in header
    gap = [
        float(r.split(",")[header.index("eval/gap_closed")]) for r in rows[1:] if r.split(",")[header.index("eval/gap_closed")]
    ]
    assert gap[-1] == pytest.approx((callback.last_mean_reward + 2e4) / 1e4)


def test_callback_measures_its_references_and_checks_arguments() -> None:
    callback = ExpertGapEvalCallback(env_id="Pendulum-v1", expert=f"shipped:{PENDULUM_EXPERT}", reference_episodes=3)
    callback.measure_references()
    assert callback.expert_return is not None and callback.random_return is not None
    assert callback.expert_return > callback.random_return + 500
    with pytest.raises(ValueError, match="needs an expert"):
        ExpertGapEvalCallback(env_id="Pendulum-v1")
    with pytest.raises(ValueError, match="threshold_fraction must be in"):
        ExpertGapEvalCallback(env_id="Pendulum-v1", expert_return=0.0, threshold_fraction=1.5)


def test_callback_from_the_zoo_yaml_key(tmp_path: Path) -> None:
    """The zoo builds callbacks from keyword arguments only (``callback:`` in the YAML or --hyperparams)."""
    spec = (
        "callback:[{'sb3ext.callbacks.ExpertGapEvalCallback': "
        "{'env_id': 'Pendulum-v1', 'expert': 'shipped:sac/Pendulum-v1_1', 'eval_freq': 128, 'n_eval_episodes': 1, "
        "'reference_episodes': 2}}]"
    )
    args = ["-m", "rl_zoo3.train", "--algo", "ppo", "--env", "Pendulum-v1", "-n", "512", "-f", "logs",
            "--eval-freq", "-1", "--hyperparams", "n_envs:1", "n_steps:128", "batch_size:64", spec]  # fmt: skip
    result = subprocess.run([sys.executable, *args], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "gap_closed" in result.stdout and "expert_return" in result.stdout  # stdout groups keys by prefix
