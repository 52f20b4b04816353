"""Optuna samplers and converters of sb3ext's algorithms, in the zoo's format.

A sampler asks the trial for the raw parameters and returns constructor kwargs through the converter,
so ``--trial-id N`` (which runs only the converter on the stored parameters) rebuilds exactly the kwargs
trial N trained with. :mod:`sb3ext.zoo` registers :data:`SAMPLERS` and :data:`CONVERTERS` in
``rl_zoo3.hyperparams_opt``; the PPO variants reuse the zoo's own PPO space from there.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import optuna

#: network sizes of the sb3ext samplers (separate policy and value networks of these sizes)
NET_ARCHS = {"tiny": [64], "small": [64, 64], "medium": [256, 256]}


def convert_aggrevated_params(params: dict[str, Any]) -> dict[str, Any]:
    """Raw trial parameters of :func:`sample_aggrevated_params` -> ``AggreVaTeD`` constructor kwargs."""
    kwargs = dict(params)
    for name in ("n_steps", "batch_size"):
        kwargs[name] = 2 ** kwargs.pop(f"{name}_pow")
    # a half-life in iterations is a more even search space than the decay factor itself
    kwargs["beta_decay"] = 0.5 ** (1.0 / kwargs.pop("beta_half_life"))
    net_arch = NET_ARCHS[kwargs.pop("net_arch")]
    kwargs["policy_kwargs"] = {"net_arch": {"pi": net_arch, "vf": net_arch}}
    return kwargs


def sample_aggrevated_params(
    trial: optuna.Trial, n_actions: int, n_envs: int, additional_args: dict[str, Any]
) -> dict[str, Any]:
    """Search space of :class:`~sb3ext.algos.aggrevated.AggreVaTeD` (see ``docs/tuning.md``)."""
    params = {
        "learning_rate": trial.suggest_float("learning_rate", 1e-4, 1e-2, log=True),
        "n_steps_pow": trial.suggest_int("n_steps_pow", 3, 7),  # 8 .. 128 steps per env and iteration
        "batch_size_pow": trial.suggest_int("batch_size_pow", 5, 9),  # 32 .. 512 states
        "n_epochs": trial.suggest_categorical("n_epochs", [5, 10, 20]),
        "clip_range": trial.suggest_categorical("clip_range", [0.1, 0.2, 0.3]),
        "target_kl": trial.suggest_categorical("target_kl", [0.01, 0.02, 0.05]),
        "beta_init": trial.suggest_float("beta_init", 0.0, 1.0),
        "beta_half_life": trial.suggest_float("beta_half_life", 1.0, 100.0, log=True),  # iterations
        "n_action_samples": trial.suggest_categorical("n_action_samples", [4, 8, 16, 32]),
        "aggregation_window": trial.suggest_categorical("aggregation_window", [1, 4, 8, 16, 32]),
        "net_arch": trial.suggest_categorical("net_arch", list(NET_ARCHS)),
    }
    kwargs = convert_aggrevated_params(params)
    # shown by the zoo's report beside the raw parameters
    for name in ("n_steps", "batch_size", "beta_decay"):
        trial.set_user_attr(name, kwargs[name])
    return kwargs


# The PPO variants search the zoo's PPO space (rl_zoo3.hyperparams_opt.sample_ppo_params: n_steps, batch size,
# gamma, GAE lambda, learning rate, entropy coefficient, clip range, epochs, gradient clipping, network size and
# activation) plus their own parameters; each converter rebuilds the kwargs from the raw trial parameters.


def _zoo_ppo_space(trial: optuna.Trial, n_actions: int, n_envs: int, additional_args: dict[str, Any]) -> None:
    from rl_zoo3.hyperparams_opt import sample_ppo_params

    sample_ppo_params(trial, n_actions, n_envs, additional_args)  # suggests the zoo's PPO parameters


def _zoo_ppo_kwargs(params: dict[str, Any]) -> dict[str, Any]:
    from rl_zoo3.hyperparams_opt import convert_onpolicy_params

    return convert_onpolicy_params(params)


def convert_ppo_kl_params(params: dict[str, Any]) -> dict[str, Any]:
    raw = dict(params)
    clipping = raw.pop("clipping")
    kwargs = _zoo_ppo_kwargs(raw)
    if not clipping:
        kwargs["clip_range"] = None  # the paper's section 4: KL penalty only
    return kwargs


def sample_ppo_kl_params(trial: optuna.Trial, n_actions: int, n_envs: int, additional_args: dict[str, Any]) -> dict[str, Any]:
    """The zoo's PPO space + initial KL coefficient, KL target, and whether the surrogate is also clipped."""
    _zoo_ppo_space(trial, n_actions, n_envs, additional_args)
    trial.suggest_float("kl_coef", 0.1, 10.0, log=True)
    trial.suggest_float("kl_target", 0.003, 0.05, log=True)
    trial.suggest_categorical("clipping", [False, True])
    return convert_ppo_kl_params(trial.params)


def convert_rpo_params(params: dict[str, Any]) -> dict[str, Any]:
    return _zoo_ppo_kwargs(dict(params))  # rpo_alpha passes through


def sample_rpo_params(trial: optuna.Trial, n_actions: int, n_envs: int, additional_args: dict[str, Any]) -> dict[str, Any]:
    """The zoo's PPO space + the perturbation half-width alpha."""
    _zoo_ppo_space(trial, n_actions, n_envs, additional_args)
    trial.suggest_float("rpo_alpha", 0.0, 1.0)
    return convert_rpo_params(trial.params)


def convert_ppo_tanh_params(params: dict[str, Any]) -> dict[str, Any]:
    raw = dict(params)
    log_std_init = raw.pop("log_std_init")
    kwargs = _zoo_ppo_kwargs(raw)
    kwargs["policy_kwargs"]["log_std_init"] = log_std_init
    return kwargs


def sample_ppo_tanh_params(
    trial: optuna.Trial, n_actions: int, n_envs: int, additional_args: dict[str, Any]
) -> dict[str, Any]:
    """The zoo's PPO space (learning rate = the actor's) + critic learning rate and epochs, initial log-std."""
    _zoo_ppo_space(trial, n_actions, n_envs, additional_args)
    trial.suggest_float("critic_learning_rate", 1e-5, 3e-3, log=True)
    trial.suggest_categorical("critic_n_epochs", [5, 10, 20])
    trial.suggest_float("log_std_init", -2.0, 0.0)
    return convert_ppo_tanh_params(trial.params)


#: zoo algorithm key -> sampler(trial, n_actions, n_envs, additional_args) -> constructor kwargs
SAMPLERS: dict[str, Callable[..., dict[str, Any]]] = {
    "aggrevated": sample_aggrevated_params,
    "ppo_kl": sample_ppo_kl_params,
    "rpo": sample_rpo_params,
    "ppo_tanh": sample_ppo_tanh_params,
}
#: zoo algorithm key -> converter(raw trial parameters) -> constructor kwargs (used by ``--trial-id``)
CONVERTERS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "aggrevated": convert_aggrevated_params,
    "ppo_kl": convert_ppo_kl_params,
    "rpo": convert_rpo_params,
    "ppo_tanh": convert_ppo_tanh_params,
}
