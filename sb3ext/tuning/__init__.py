"""Optuna tuning of sb3ext algorithms (L4): samplers and converters, storages with a heartbeat, export.

Uses rl_zoo3's sampler helpers (the PPO space) but never the plug-in: :mod:`sb3ext.zoo` registers these
samplers in the zoo, and :mod:`sb3ext.tune` (the command line) connects the two.
"""

from sb3ext.tuning.export import export_trial, pick_trial, write_zoo_yaml, zoo_literal, zoo_yaml_value
from sb3ext.tuning.samplers import (
    CONVERTERS,
    NET_ARCHS,
    SAMPLERS,
    convert_aggrevated_params,
    convert_ppo_kl_params,
    convert_ppo_tanh_params,
    convert_rpo_params,
    sample_aggrevated_params,
    sample_ppo_kl_params,
    sample_ppo_tanh_params,
    sample_rpo_params,
)
from sb3ext.tuning.storages import (
    HEARTBEAT_VARIABLES,
    create_study,
    heartbeat_settings,
    load_study,
    make_storage,
    study_status,
    zoo_storage_with_heartbeat,
)

__all__ = [
    "CONVERTERS",
    "HEARTBEAT_VARIABLES",
    "NET_ARCHS",
    "SAMPLERS",
    "convert_aggrevated_params",
    "convert_ppo_kl_params",
    "convert_ppo_tanh_params",
    "convert_rpo_params",
    "create_study",
    "export_trial",
    "heartbeat_settings",
    "load_study",
    "make_storage",
    "pick_trial",
    "sample_aggrevated_params",
    "sample_ppo_kl_params",
    "sample_ppo_tanh_params",
    "sample_rpo_params",
    "study_status",
    "write_zoo_yaml",
    "zoo_literal",
    "zoo_storage_with_heartbeat",
    "zoo_yaml_value",
]
