"""KLPPO (ppo_kl), RPO (rpo) and TanhPPO (ppo_tanh): equivalence to stock PPO at neutral settings, the squashed
log-probability against SB3's, the KL rule, bounds, every setting taking effect, save/load, determinism, YAML."""

from __future__ import annotations

import copy
import inspect
from pathlib import Path

import gymnasium as gym
import numpy as np
import optuna
import pytest
import torch as th
import yaml
from gymnasium import spaces
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.distributions import DiagGaussianDistribution, SquashedDiagGaussianDistribution
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.envs import IdentityEnvMultiBinary, IdentityEnvMultiDiscrete

from sb3ext import tuning
from sb3ext.algos.ppo_kl import KLPPO, adapt_kl_coef
from sb3ext.algos.ppo_kl.distributions import distribution_params, kl_from_params
from sb3ext.algos.ppo_tanh import TanhPPO
from sb3ext.algos.ppo_tanh.distributions import TanhDiagGaussianDistribution
from sb3ext.algos.rpo import RPO
from sb3ext.callbacks import episode_returns
from sb3ext.common.resources import hyperparams_path
from tests.test_aggrevated import ZOO_KEYS

SMALL = dict(n_steps=32, batch_size=32, n_epochs=2, policy_kwargs=dict(net_arch=[16]))
VARIANTS = {"ppo_kl": KLPPO, "rpo": RPO, "ppo_tanh": TanhPPO}


def params_after(algo_class: type, env_id: str, steps: int = 128, **kwargs) -> list[th.Tensor]:
    """Build, train and return the parameters; built and trained in one go (torch's global RNG is shared)."""
    model = algo_class("MlpPolicy", make_vec_env(env_id, n_envs=2, seed=1), seed=3, **SMALL, **kwargs)
    model.learn(steps)
    return [p.detach().clone() for p in model.policy.parameters()]


def max_difference(a: list[th.Tensor], b: list[th.Tensor]) -> float:
    return max((x - y).abs().max().item() for x, y in zip(a, b, strict=True))


# ---------------------------------------------------------------------------------------------------- neutral = PPO


@pytest.mark.parametrize("env_id", ["Pendulum-v1", "CartPole-v1"])
def test_klppo_without_kl_term_is_stock_ppo(env_id: str) -> None:
    ppo = params_after(PPO, env_id)
    assert max_difference(ppo, params_after(KLPPO, env_id, kl_coef=0.0, clip_range=0.2)) == 0.0
    assert max_difference(ppo, params_after(KLPPO, env_id, kl_coef=1.0, clip_range=0.2)) > 1e-6  # the term acts


def test_rpo_with_zero_alpha_is_stock_ppo() -> None:
    ppo = params_after(PPO, "Pendulum-v1")
    assert max_difference(ppo, params_after(RPO, "Pendulum-v1", rpo_alpha=0.0)) == 0.0
    assert max_difference(ppo, params_after(RPO, "Pendulum-v1", rpo_alpha=0.5)) > 1e-6


# ---------------------------------------------------------------------------------------------------- distributions


def test_squashed_log_prob_matches_sb3() -> None:
    th.manual_seed(0)
    mean, log_std = th.randn(256, 3) * 0.5, th.randn(256, 3) * 0.3 - 0.5
    # |u| <= 1: SB3's log(1 - a^2 + 1e-6) is within 3e-6 per dimension of the exact value there
    u = (mean + log_std.exp() * th.randn(256, 3)).clamp(-1.0, 1.0)
    ours = TanhDiagGaussianDistribution(3, log_std_min=-20, log_std_max=2).proba_distribution(th.cat([mean, log_std], 1))
    sb3 = SquashedDiagGaussianDistribution(3).proba_distribution(mean, log_std)
    assert th.allclose(ours.log_prob(u), sb3.log_prob(th.tanh(u), gaussian_actions=u), atol=1e-5, rtol=0)


def test_squashed_log_prob_is_exact_for_saturated_actions() -> None:
    u = th.tensor([[8.0, -12.0], [0.3, 25.0]], dtype=th.float64)
    mean, log_std = th.zeros(2, 2, dtype=th.float64), th.zeros(2, 2, dtype=th.float64)
    ours = TanhDiagGaussianDistribution(2).proba_distribution(th.cat([mean, log_std], 1)).log_prob(u)
    exact = th.distributions.Normal(mean, 1.0).log_prob(u).sum(1) - th.log(1 / th.cosh(u) ** 2).sum(1)  # sech^2 = 1 - tanh^2
    assert th.allclose(ours, exact, rtol=1e-10)
    assert th.isfinite(ours).all()


def test_entropy_estimate_is_unbiased() -> None:
    th.manual_seed(0)
    dist = TanhDiagGaussianDistribution(1).proba_distribution(th.tensor([[0.3, -0.2]]).expand(200_000, 2))
    estimate = dist.entropy().mean().item()
    samples = dist.sample()
    monte_carlo = -dist.log_prob(samples).mean().item()  # H = -E[log pi(a)], from independent samples
    assert abs(estimate - monte_carlo) < 0.01


@pytest.mark.parametrize(
    "env", [gym.make("Pendulum-v1"), gym.make("CartPole-v1"), IdentityEnvMultiDiscrete(3), IdentityEnvMultiBinary(3)]
)
def test_analytic_kl_of_every_supported_distribution(env: gym.Env) -> None:
    import copy

    th.manual_seed(0)
    model = PPO("MlpPolicy", env, seed=0, **SMALL)
    env.observation_space.seed(0)  # the states are part of the test: fixed, not drawn anew on every run
    obs = th.as_tensor(np.stack([env.observation_space.sample() for _ in range(4)]), dtype=th.float32)
    old_policy = copy.deepcopy(model.policy)
    old = distribution_params(old_policy.get_distribution(obs))
    assert th.allclose(kl_from_params(old, model.policy.get_distribution(obs)), th.zeros(4), atol=1e-6)
    with th.no_grad():
        for parameter in model.policy.action_net.parameters():
            parameter.add_(0.5 * th.randn_like(parameter))
    analytic = kl_from_params(old, model.policy.get_distribution(obs)).detach()
    # Monte Carlo: KL(old || new) = E_{a ~ old}[log old(a) - log new(a)], 20,000 samples per state
    many = obs.repeat_interleave(20_000, dim=0)
    with th.no_grad():
        old_dist = old_policy.get_distribution(many)
        actions = old_dist.sample()
        gap = old_dist.log_prob(actions) - model.policy.get_distribution(many).log_prob(actions)
    monte_carlo = gap.reshape(4, -1).mean(dim=1)
    assert (analytic > 0).all() and analytic.mean() > 1e-3  # the perturbation moved every state's distribution
    assert th.allclose(analytic, monte_carlo, rtol=0.1, atol=0.01), (analytic, monte_carlo)


def test_kl_refuses_unsupported_distributions() -> None:
    dist = SquashedDiagGaussianDistribution(2).proba_distribution(th.zeros(1, 2), th.zeros(1, 2))
    with pytest.raises(ValueError, match="analytic KL is not available for SquashedDiagGaussianDistribution"):
        distribution_params(dist)


# ---------------------------------------------------------------------------------------------------- ppo_kl


def test_kl_adaptation_rule() -> None:
    assert adapt_kl_coef(1.0, kl=0.001, kl_target=0.01) == 0.5  # < d_targ / 1.5: halve
    assert adapt_kl_coef(1.0, kl=0.02, kl_target=0.01) == 2.0  # > 1.5 d_targ: double
    assert adapt_kl_coef(1.0, kl=0.01, kl_target=0.01) == 1.0
    assert adapt_kl_coef(1.0, kl=0.007, kl_target=0.01) == 1.0  # inside [d_targ / 1.5, 1.5 d_targ]
    assert adapt_kl_coef(1.0, kl=0.02, kl_target=0.01, tolerance=3.0, factor=4.0) == 1.0
    assert adapt_kl_coef(1.0, kl=0.05, kl_target=0.01, tolerance=3.0, factor=4.0) == 4.0


@pytest.mark.parametrize(("learning_rate", "expected"), [(1e-6, 0.5), (3e-2, 2.0)])
def test_klppo_adapts_beta_from_the_measured_kl(learning_rate: float, expected: float) -> None:
    model = KLPPO("MlpPolicy", "Pendulum-v1", learning_rate=learning_rate, kl_coef=1.0, kl_target=0.01, seed=0, **SMALL)
    model.learn(32)
    kl = model.logger.name_to_value["train/kl"]
    assert (kl < 0.01 / 1.5) if expected < 1 else (kl > 0.015)
    assert model.beta == expected and model.current_beta == expected and model.kl_coef == 1.0  # kl_coef: the start
    assert model.logger.name_to_value["train/kl_coef"] == 1.0  # the coefficient used in that update


def test_klppo_goes_on_with_its_adapted_beta_after_a_load_with_the_entry_keywords(tmp_path: Path) -> None:
    """The zoo's ``-i`` loads with the entry's hyperparameters (``kl_coef`` among them): the adapted beta is state and
    survives it; a model saved before beta was its own attribute goes on from its saved ``kl_coef``."""
    model = KLPPO("MlpPolicy", "Pendulum-v1", learning_rate=3e-2, kl_coef=1.0, kl_target=0.01, seed=0, **SMALL)
    model.learn(32)
    assert model.beta == 2.0  # doubled (the test above)
    model.save(tmp_path / "model.zip")
    loaded = KLPPO.load(tmp_path / "model.zip", env=model.get_env(), kl_coef=1.0, kl_target=0.01)
    assert loaded.beta == model.beta and loaded.current_beta == model.beta and loaded.kl_coef == 1.0
    loaded.learn(32, reset_num_timesteps=False)
    assert loaded.logger.name_to_value["train/kl_coef"] == model.beta  # its next update used the adapted beta
    model.kl_coef, model.beta = model.beta, None  # the older layout: the adapted beta in kl_coef
    model.save(tmp_path / "old.zip")
    assert KLPPO.load(tmp_path / "old.zip").current_beta == model.kl_coef


@pytest.mark.parametrize("learning_rate", [1e-6, 3e-2])
def test_klppo_fixed_beta_stays_fixed(learning_rate: float) -> None:
    """kl_target=None: the paper's fixed KL penalty; the KL is still measured and logged, beta never moves."""
    model = KLPPO("MlpPolicy", "Pendulum-v1", learning_rate=learning_rate, kl_coef=3.0, kl_target=None, seed=0, **SMALL)
    model.learn(64)
    assert model.logger.name_to_value["train/kl"] > 0
    assert model.current_beta == 3.0 and model.logger.name_to_value["train/kl_coef"] == 3.0


def test_klppo_clipping_is_optional() -> None:
    unclipped = KLPPO("MlpPolicy", "Pendulum-v1", seed=0, **SMALL)
    assert unclipped.clip_range is None
    unclipped.learn(32)
    assert "train/clip_range" not in unclipped.logger.name_to_value
    clipped = KLPPO("MlpPolicy", "Pendulum-v1", seed=0, clip_range=0.1, **SMALL)
    clipped.learn(32)
    assert clipped.logger.name_to_value["train/clip_range"] == 0.1


# ---------------------------------------------------------------------------------------------------- rpo


def test_rpo_perturbs_only_the_update_distribution() -> None:
    model = RPO("MlpPolicy", "Pendulum-v1", rpo_alpha=0.5, seed=0, **SMALL)
    obs = th.zeros(64, 3)
    actions = th.zeros(64, 1)
    _, log_prob_a, _ = model.policy.evaluate_actions(obs, actions)
    _, log_prob_b, _ = model.policy.evaluate_actions(obs, actions)
    assert not th.allclose(log_prob_a, log_prob_b)  # fresh noise per call
    mean = model.policy.get_distribution(obs).distribution.mean
    assert th.allclose(mean, model.policy.get_distribution(obs).distribution.mean)  # acting: unperturbed
    model.policy.rpo_alpha = 0.0
    _, exact_a, _ = model.policy.evaluate_actions(obs, actions)
    _, exact_b, _ = model.policy.evaluate_actions(obs, actions)
    assert th.equal(exact_a, exact_b)
    # with alpha, log N(0; mu + z, sigma) for z ~ U(-alpha, alpha) lies within the alpha-band around the exact value
    std = model.policy.get_distribution(obs).distribution.stddev
    band = (0.5 * (mean.abs() + 0.5) / std**2 * 0.5).sum(1)
    assert ((log_prob_a - exact_a).abs() <= band + 1e-6).all()


# ---------------------------------------------------------------------------------------------------- ppo_tanh


class SkewedBoxEnv(gym.Env):
    """Asymmetric, offset action bounds; reward for the first action coordinate near its upper bound."""

    observation_space = spaces.Box(-1, 1, (2,), np.float32)
    action_space = spaces.Box(np.array([0.0, -3.0], np.float32), np.array([1.0, 5.0], np.float32))

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self.observation_space.sample(), {}

    def step(self, action):
        assert self.action_space.contains(np.asarray(action, np.float32)), action
        self.t += 1
        return self.observation_space.sample(), float(action[0]), False, self.t >= 20, {}


def test_tanh_actions_always_inside_the_bounds_and_buffer_holds_pre_tanh_samples() -> None:
    model = TanhPPO("MlpPolicy", SkewedBoxEnv(), seed=0, policy_kwargs=dict(net_arch=[16], log_std_init=1.0), **{
        k: v for k, v in SMALL.items() if k != "policy_kwargs"
    })  # fmt: skip
    with th.no_grad():
        model.policy.action_net.bias[:2].fill_(6.0)  # means far beyond the bounds after tanh saturation
    checked = []

    class CheckBuffer(BaseCallback):
        def _on_step(self) -> bool:
            return True

        def _on_rollout_end(self) -> None:  # before the update: the policy is the one that acted
            buffer = self.model.rollout_buffer
            u = buffer.actions.reshape(-1, 2)
            assert np.abs(u).max() > 1.0  # pre-tanh samples, not actions
            obs = th.as_tensor(buffer.observations.reshape(-1, 2))
            with th.no_grad():
                recomputed = self.model.policy.get_distribution(obs).log_prob(th.as_tensor(u))
            assert th.allclose(recomputed, th.as_tensor(buffer.log_probs.reshape(-1)), atol=1e-4)
            checked.append(True)

    model.learn(64, callback=CheckBuffer())  # the env asserts every action is inside its bounds
    assert len(checked) == 2
    for deterministic in (True, False):
        actions, _ = model.predict(np.zeros((50, 2), np.float32) + 0.9, deterministic=deterministic)
        assert model.action_space.contains(actions[0]) and (actions >= model.action_space.low).all()
        assert (actions <= model.action_space.high).all()


def test_tanh_actor_and_critic_are_separate() -> None:
    model = TanhPPO(
        "MlpPolicy", "Pendulum-v1", learning_rate=1e-3, critic_learning_rate=5e-3, critic_n_epochs=5, seed=0, **SMALL
    )
    actor, critic = model.policy.actor_parameters(), model.policy.critic_parameters()
    assert not {id(p) for p in actor} & {id(p) for p in critic}
    assert len(actor) + len(critic) == len(list(model.policy.parameters()))
    assert {id(p) for g in model.policy.optimizer.param_groups for p in g["params"]} == {id(p) for p in actor}
    steps = {"actor": 0, "critic": 0}
    for name, optimizer in (("actor", model.policy.optimizer), ("critic", model.policy.critic_optimizer)):
        optimizer.register_step_post_hook(lambda *_, name=name: steps.__setitem__(name, steps[name] + 1))
    model.learn(32)  # one update: 32 states, batch 32 -> one minibatch per epoch
    assert steps == {"actor": 2, "critic": 5}
    assert model.policy.optimizer.param_groups[0]["lr"] == 1e-3
    assert model.policy.critic_optimizer.param_groups[0]["lr"] == 5e-3
    assert model.logger.name_to_value["train/actor_epochs"] == 2


def test_tanh_log_std_is_clamped() -> None:
    model = TanhPPO("MlpPolicy", "Pendulum-v1", seed=0, policy_kwargs=dict(log_std_init=-0.7, log_std_min=-1.0, log_std_max=-0.5), **{
        k: v for k, v in SMALL.items() if k != "policy_kwargs"
    })  # fmt: skip
    with th.no_grad():
        model.policy.action_net.bias[1:].fill_(5.0)
    std = model.policy.get_distribution(th.zeros(4, 3)).std
    assert th.allclose(std, th.full_like(std, np.exp(-0.5)))


def test_tanh_target_kl_stops_only_the_actor() -> None:
    model = TanhPPO("MlpPolicy", "Pendulum-v1", learning_rate=0.05, target_kl=1e-6, seed=0, **SMALL)
    model.learn(32)
    assert model.logger.name_to_value["train/actor_epochs"] < 2
    assert model._n_updates == 2  # the critic's epochs all ran


# ---------------------------------------------------------------------------------------------------- common


@pytest.mark.parametrize("algo", list(VARIANTS))
def test_save_load_and_determinism(algo: str, tmp_path) -> None:
    algo_class = VARIANTS[algo]
    runs = []
    for _ in range(2):
        model = algo_class("MlpPolicy", make_vec_env("Pendulum-v1", n_envs=2, seed=1), seed=5, **SMALL)
        model.learn(64)
        runs.append((model, model.rollout_buffer.actions.copy(), model.rollout_buffer.rewards.copy()))
    (first, actions_a, rewards_a), (_, actions_b, rewards_b) = runs
    assert np.array_equal(actions_a, actions_b) and np.array_equal(rewards_a, rewards_b)
    obs = np.stack([first.observation_space.sample() for _ in range(5)])
    first.save(tmp_path / "model.zip")
    loaded = algo_class.load(tmp_path / "model.zip")
    assert np.array_equal(first.predict(obs, deterministic=True)[0], loaded.predict(obs, deterministic=True)[0])
    for name in ("kl_coef", "kl_target", "rpo_alpha", "critic_n_epochs"):
        if hasattr(first, name):
            assert getattr(loaded, name) == getattr(first, name)
    if algo == "rpo":
        assert loaded.policy.rpo_alpha == first.rpo_alpha
    if algo == "ppo_tanh":
        saved = first.policy.critic_optimizer.state_dict()["state"]
        restored = loaded.policy.critic_optimizer.state_dict()["state"]
        assert all(th.equal(saved[k]["exp_avg"], restored[k]["exp_avg"]) for k in saved)


@pytest.mark.parametrize(
    ("algo_class", "env_id", "kwargs", "message"),
    [
        (RPO, "CartPole-v1", {}, "RPO: invalid action_space=Discrete(2)"),
        (RPO, "Pendulum-v1", {"rpo_alpha": -1}, "invalid rpo_alpha=-1"),
        (TanhPPO, "CartPole-v1", {}, "TanhPPO: invalid action_space=Discrete(2)"),
        (TanhPPO, "Pendulum-v1", {"critic_n_epochs": 0}, "invalid critic_n_epochs=0"),
        (KLPPO, "Pendulum-v1", {"kl_target": 0}, "invalid kl_target=0"),
        (KLPPO, "Pendulum-v1", {"kl_factor": 1.0}, "invalid kl_factor=1.0"),
    ],
)
def test_bad_settings_name_the_value(algo_class: type, env_id: str, kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        algo_class("MlpPolicy", env_id, **kwargs)


@pytest.mark.parametrize("algo_class", list(VARIANTS.values()))
def test_unknown_hyperparameter_suggests_the_right_one(algo_class: type) -> None:
    with pytest.raises(TypeError, match=r"unknown hyperparameter\(s\) 'n_step' \(did you mean 'n_steps'\?\)"):
        algo_class("MlpPolicy", "Pendulum-v1", n_step=8)


@pytest.mark.parametrize("algo", list(VARIANTS))
def test_yaml_keys_are_constructor_arguments(algo: str) -> None:
    entries = yaml.safe_load(hyperparams_path(algo).read_text())
    allowed = set(inspect.signature(VARIANTS[algo].__init__).parameters) - {"self", "unknown_kwargs"}
    assert {"Pendulum-v1", "LunarLanderContinuous-v3", "BipedalWalker-v3", "sb3ext/CartPoleContinuous-v0"} <= set(entries)
    for env_id, entry in entries.items():
        unknown = set(entry) - allowed - ZOO_KEYS
        assert not unknown, f"{env_id}: {unknown} are not {algo} arguments"


@pytest.mark.parametrize("algo", list(VARIANTS))
def test_sampler_and_converter_agree_and_build(algo: str) -> None:
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=1), direction="maximize")
    for _ in range(4):
        trial = study.ask()
        kwargs = tuning.SAMPLERS[algo](trial, 1, 2, {})
        assert tuning.CONVERTERS[algo](dict(trial.params)) == kwargs
        kwargs.update(n_steps=16, batch_size=16)
        VARIANTS[algo]("MlpPolicy", make_vec_env("Pendulum-v1", n_envs=2), **kwargs).learn(32)
        study.tell(trial, 0.0)


def test_gaussian_distribution_params_layout() -> None:
    dist = DiagGaussianDistribution(2).proba_distribution(th.tensor([[1.0, 2.0]]), th.tensor([0.5, -0.5]))
    assert th.allclose(distribution_params(dist), th.tensor([[1.0, 2.0, 0.5, -0.5]]))


def test_klppo_saved_before_the_restructure_still_loads(tmp_path) -> None:
    """Models saved by 0.1.0-dev name the buffer class sb3ext.common.buffers.DistributionRolloutBuffer."""
    import base64
    import json
    import zipfile

    model = KLPPO("MlpPolicy", "Pendulum-v1", n_steps=64, batch_size=64, seed=0)
    model.save(tmp_path / "new.zip")
    with zipfile.ZipFile(tmp_path / "new.zip") as archive:
        entries = {name: archive.read(name) for name in archive.namelist()}
    data = json.loads(entries["data"])
    old_reference = b"\x80\x04csb3ext.common.buffers\nDistributionRolloutBuffer\n."
    data["rollout_buffer_class"][":serialized:"] = base64.b64encode(old_reference).decode()
    entries["data"] = json.dumps(data).encode()
    with zipfile.ZipFile(tmp_path / "old.zip", "w") as archive:
        for name, content in entries.items():
            archive.writestr(name, content)
    loaded = KLPPO.load(tmp_path / "old.zip", env=make_vec_env("Pendulum-v1", n_envs=1))
    obs = np.zeros((1, 3), dtype=np.float32)
    np.testing.assert_array_equal(loaded.predict(obs, deterministic=True)[0], model.predict(obs, deterministic=True)[0])
    loaded.learn(64)  # the buffer works


# ---------------------------------------------------------------------------------------------------- updates by hand
# One rollout, then the variant's update, replayed here from the formulas (Gaussian densities, the analytic KL, the
# tanh correction, advantage normalisation, the surrogate, gradient clipping, plain SGD), and compared parameter by
# parameter. One minibatch per epoch (batch_size = the rollout), so the minibatch order does not matter.

HAND = dict(n_steps=64, batch_size=128, policy_kwargs=dict(net_arch=[16], optimizer_class=th.optim.SGD))
LOG_2PI = float(np.log(2 * np.pi))


def first_rollout(model) -> tuple[dict, object]:
    """Learn one rollout and its update; returns the rollout (as the update saw it) and the policy before it."""
    seen: dict = {}

    class Capture(BaseCallback):
        def _on_step(self) -> bool:
            return True

        def _on_rollout_end(self) -> None:  # advantages are computed, the update has not run
            buffer = self.model.rollout_buffer
            flat = {name: th.as_tensor(getattr(buffer, name)).reshape(128, -1).clone() for name in
                    ("observations", "actions", "advantages", "returns", "log_probs")}  # fmt: skip
            seen.update(flat, policy=copy.deepcopy(self.model.policy))

    model.learn(128, callback=Capture())
    return seen, seen.pop("policy")


def normalized(advantages: th.Tensor) -> th.Tensor:
    return (advantages - advantages.mean()) / (advantages.std() + 1e-8)


def sgd_step(parameters: list[th.Tensor], loss: th.Tensor, lr: float, max_norm: float) -> None:
    grads = th.autograd.grad(loss, parameters)
    norm = th.sqrt(sum((g**2).sum() for g in grads))
    scale = min(1.0, max_norm / (float(norm) + 1e-6))
    with th.no_grad():
        for parameter, grad in zip(parameters, grads, strict=True):
            parameter -= lr * scale * grad


def gaussian_log_prob(actions: th.Tensor, mean: th.Tensor, log_std: th.Tensor) -> th.Tensor:
    return (-((actions - mean) ** 2) / (2 * th.exp(2 * log_std)) - log_std - 0.5 * LOG_2PI).sum(-1)


def klppo_by_hand(rollout: dict, policy, kl_sign: float, n_epochs: int, lr: float, beta: float, vf_coef: float) -> tuple:
    """KLPPO's update (the paper's section 4, unclipped): loss = -E[r A] + beta KL(old || new) + vf_coef (V - R)^2."""
    obs, actions, returns = rollout["observations"], rollout["actions"], rollout["returns"].flatten()
    old_log_prob, advantages = rollout["log_probs"].flatten(), normalized(rollout["advantages"].flatten())
    with th.no_grad():
        old_mean, old_log_std = policy.action_net(policy.mlp_extractor.forward_actor(obs)), policy.log_std.clone()

    def kl(mean: th.Tensor, log_std: th.Tensor) -> th.Tensor:  # KL(N(old) || N(new)), summed over dimensions
        return (
            log_std - old_log_std + (th.exp(2 * old_log_std) + (old_mean - mean) ** 2) / (2 * th.exp(2 * log_std)) - 0.5
        ).sum(-1)

    parameters = list(policy.parameters())
    kls = []
    for _ in range(n_epochs):
        mean = policy.action_net(policy.mlp_extractor.forward_actor(obs))
        values = policy.value_net(policy.mlp_extractor.forward_critic(obs)).flatten()
        ratio = th.exp(gaussian_log_prob(actions, mean, policy.log_std) - old_log_prob)
        divergence = kl(mean, policy.log_std).mean()
        kls.append(float(divergence.detach()))
        loss = -(advantages * ratio).mean() + kl_sign * beta * divergence + vf_coef * ((values - returns) ** 2).mean()
        sgd_step(parameters, loss, lr, 0.5)
    with th.no_grad():
        final_kl = float(kl(policy.action_net(policy.mlp_extractor.forward_actor(obs)), policy.log_std).mean())
    return policy, kls, final_kl


@pytest.mark.parametrize(("learning_rate", "beta_after"), [(0.1, 0.5), (0.3, 2.0)])
def test_klppo_update_with_its_shipped_settings_matches_the_hand_computed_loss(
    learning_rate: float, beta_after: float
) -> None:
    """KLPPO as shipped (no clipping, beta 1, d_targ 0.01, the paper's rule), on rewards of order 1 so that the
    gradient clipping leaves the policy room to move: the parameters after one update equal the hand-computed ones,
    a penalty of the wrong sign or none gives other parameters (the check sees the sign), and beta then follows
    the rule on the measured d (halved at the smaller step, doubled at the larger)."""
    entry = yaml.safe_load(hyperparams_path("ppo_kl").read_text())["Pendulum-v1"]
    settings = {k: entry[k] for k in ("gamma", "gae_lambda", "kl_coef", "kl_target", "ent_coef")}
    n_epochs = 6
    model = KLPPO("MlpPolicy", make_vec_env(SkewedBoxEnv, n_envs=2, seed=1), seed=3, learning_rate=learning_rate,
                  n_epochs=n_epochs, **settings, **HAND)  # fmt: skip
    assert model.clip_range is None and model.kl_coef == 1.0 and model.kl_target == 0.01  # the shipped rule
    rollout, before = first_rollout(model)
    by_hand = {sign: klppo_by_hand(rollout, copy.deepcopy(before), sign, n_epochs, learning_rate, 1.0, model.vf_coef)
               for sign in (1.0, -1.0, 0.0)}  # fmt: skip
    expected, kls, final_kl = by_hand[1.0]
    trained = list(model.policy.parameters())
    assert max_difference(trained, list(expected.parameters())) < 1e-5
    for sign in (-1.0, 0.0):  # the penalty's sign and presence show in the parameters
        assert max_difference(trained, list(by_hand[sign][0].parameters())) > 1e-3, sign
    assert kls[0] == 0.0 and min(kls[1:]) > 1e-5  # the penalty acts from the second epoch on
    # the beta rule on d = E[KL(old || new)] over the rollout with the updated policy
    assert model.logger.name_to_value["train/kl"] == pytest.approx(final_kl, rel=1e-4)
    assert (final_kl < 0.01 / 1.5) if beta_after < 1 else (final_kl > 0.01 * 1.5)
    assert model.beta == beta_after


def tanh_ppo_by_hand(rollout: dict, policy, sign: float, epochs: tuple[int, int], lrs: tuple[float, float], clip: float):
    """TanhPPO's update: per epoch and minibatch, an actor step on the clipped surrogate, then a critic step."""
    obs, u, returns = rollout["observations"], rollout["actions"], rollout["returns"].flatten()
    old_log_prob, advantages = rollout["log_probs"].flatten(), sign * normalized(rollout["advantages"].flatten())
    actor = [p for m in (policy.mlp_extractor.policy_net, policy.action_net) for p in m.parameters()]
    critic = [p for m in (policy.mlp_extractor.value_net, policy.value_net) for p in m.parameters()]
    for epoch in range(max(epochs)):
        if epoch < epochs[0]:
            mean, log_std = policy.action_net(policy.mlp_extractor.forward_actor(obs)).chunk(2, dim=-1)
            log_std = log_std.clamp(policy.log_std_min, policy.log_std_max)
            # log pi(a) = log N(u; mu, sigma) - sum log(1 - tanh(u)^2), in float64 for the correction
            correction = th.log(1 - th.tanh(u.double()) ** 2).sum(-1).float()
            ratio = th.exp(gaussian_log_prob(u, mean, log_std) - correction - old_log_prob)
            surrogate = th.min(advantages * ratio, advantages * ratio.clamp(1 - clip, 1 + clip))
            sgd_step(actor, -surrogate.mean(), lrs[0], 0.5)
        if epoch < epochs[1]:
            values = policy.value_net(policy.mlp_extractor.forward_critic(obs)).flatten()
            sgd_step(critic, ((values - returns) ** 2).mean(), lrs[1], 0.5)
    return policy


def test_tanh_ppo_update_matches_the_hand_computed_one() -> None:
    """TanhPPO: the actor's clipped surrogate on the tanh-corrected density of the stored pre-tanh samples, the
    critic's MSE with its own optimizer, learning rate and epochs, each clipped on its own parameters. An update
    with the advantages' sign flipped gives other parameters (the check sees the direction)."""
    lrs, epochs, clip = (0.05, 0.02), (3, 5), 0.2
    model = TanhPPO("MlpPolicy", make_vec_env("Pendulum-v1", n_envs=2, seed=1), seed=3, learning_rate=lrs[0],
                    critic_learning_rate=lrs[1], n_epochs=epochs[0], critic_n_epochs=epochs[1], clip_range=clip,
                    **HAND)  # fmt: skip
    rollout, before = first_rollout(model)
    assert rollout["actions"].abs().max() > 0.5  # pre-tanh samples, with a correction that matters
    expected = tanh_ppo_by_hand(rollout, copy.deepcopy(before), 1.0, epochs, lrs, clip)
    flipped = tanh_ppo_by_hand(rollout, copy.deepcopy(before), -1.0, epochs, lrs, clip)
    trained = list(model.policy.parameters())
    assert max_difference(trained, list(expected.parameters())) < 1e-5
    assert max_difference(model.policy.actor_parameters(), flipped.actor_parameters()) > 1e-3
    assert max_difference(model.policy.critic_parameters(), flipped.critic_parameters()) < 1e-5  # the critic ignores it


# ---------------------------------------------------------------------------------------------------- learning (slow)


@pytest.mark.slow
@pytest.mark.parametrize("algo", list(VARIANTS))
@pytest.mark.parametrize("negate", [False, True], ids=["learns", "guard_negated"])
def test_variant_learns_pendulum_with_its_yaml_entry(algo: str, negate: bool) -> None:
    """Each variant with its YAML entry for Pendulum-v1 (100k env steps; docs/benchmarks/ppo_variants.md measured
    final returns of -117 to -214 on three seeds): the mean of 10 seeded deterministic episodes ends above -400
    (random: about -1,280). The guard negates the advantages after GAE (the value targets unchanged): the learner
    must then stay far below."""
    entry = yaml.safe_load(hyperparams_path(algo).read_text())["Pendulum-v1"]
    hyperparams = {k: v for k, v in entry.items() if k not in ZOO_KEYS}
    model = VARIANTS[algo]("MlpPolicy", make_vec_env("Pendulum-v1", n_envs=entry["n_envs"], seed=0), seed=0, **hyperparams)
    if negate:
        buffer = model.rollout_buffer
        compute = buffer.compute_returns_and_advantage

        def negated(*args, **kwargs) -> None:
            compute(*args, **kwargs)
            buffer.advantages *= -1.0

        buffer.compute_returns_and_advantage = negated  # type: ignore[method-assign]
    before = float(np.mean(episode_returns("Pendulum-v1", model, 10, seed=50_000)[0]))
    model.learn(int(entry["n_timesteps"]))
    after = float(np.mean(episode_returns("Pendulum-v1", model, 10, seed=50_000)[0]))
    assert before < -900, f"{algo}: the untrained policy already balances ({before:.0f})"
    if negate:
        assert after < -900, f"{algo}: negated advantages learned ({after:.0f})"
    else:
        assert after > -400, f"{algo}: after {entry['n_timesteps']:.0f} env steps {after:.0f} (before {before:.0f})"
