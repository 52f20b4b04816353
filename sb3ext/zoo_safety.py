"""Replay security for the zoo's scripts: what ``enjoy``, ``record_video``, ``-i`` and the Hub scripts read from a run
folder or a checkpoint, read without running code from it (:mod:`sb3ext.zoo` puts these in place).

* the run's ``config.yml`` and saved hyperparameters: safe YAML, wrapper names from known packages only;
* ``vecnormalize.pkl`` and the model zip: read from checked fields and tensors (``SB3EXT_TRUST_REMOTE_CODE=1``
  opts back into the zoo's own pickles, for files you made);
* ``-i`` of a stock algorithm (:func:`continue_safely`); a Hub download's metrics archive
  (:func:`check_metrics_archive`).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from types import ModuleType
from typing import Any

from sb3ext.common.files import open_regular
from sb3ext.common.serialization import UnsafeObjectError


def continue_safely(algo_class: type, path: str, hyperparams: dict[str, Any], env: Any, manager: Any) -> Any:
    """``-i`` for a stock SB3 / sb3-contrib algorithm without running code from the checkpoint: the model is built
    from its checked fields and tensors (:func:`sb3ext.experts.learner.load_learner`), as the zoo's own
    ``_load_pretrained_agent`` would load it (the YAML's settings over the file's; not its policy or policy_kwargs).
    A ``replay_buffer.pkl`` beside it is a plain pickle: it is left unread, and the run says so."""
    from sb3ext.experts.learner import load_learner

    print("Loading pretrained agent (sb3ext: from its checked fields and tensors; no code from the file runs)")
    for key in ("policy", "policy_kwargs"):
        hyperparams.pop(key, None)
    model = load_learner(
        algo_class, path, env=env, device=manager.device, seed=manager.seed, tensorboard_log=manager.tensorboard_log,
        verbose=manager.verbose, **hyperparams,
    )  # fmt: skip
    replay_buffer = os.path.join(os.path.dirname(path), "replay_buffer.pkl")
    if os.path.exists(replay_buffer):
        print(
            f"sb3ext: {replay_buffer} not loaded: a replay buffer is a plain pickle, which runs code from the file; the "
            "run continues with an empty buffer (set SB3EXT_TRUST_REMOTE_CODE=1 to load it, for a file you made)"
        )
    return model


#: the archive of training and evaluation metrics that ``rl_zoo3.load_from_hub`` extracts into the new run folder
METRICS_ARCHIVE = "train_eval_metrics.zip"
#: what ``rl_zoo3.push_to_hub`` puts in it: the run's ``evaluations.npz`` and monitor ``*.csv`` files, top level only
_METRICS_NAME = re.compile(r"^(evaluations\.npz|[A-Za-z0-9_.-]+\.csv)$")
#: bounds on the archive's declared (uncompressed) sizes: zipfile extracts no more than an entry declares
MAX_METRICS_ENTRY, MAX_METRICS_TOTAL, MAX_METRICS_ENTRIES = 256 << 20, 1 << 30, 4096


def check_metrics_archive(path: str | os.PathLike[str]) -> None:
    """Refuse, in one line, a metrics archive that would write anything but metrics into the run folder (the model's
    zip, ``config.yml`` or ``vecnormalize.pkl`` the zoo has just copied there), or more than the size bounds."""
    import zipfile

    where = f"{path} ({METRICS_ARCHIVE})"
    try:
        with open_regular(path, "a metrics archive") as handle, zipfile.ZipFile(handle) as archive:
            infos = archive.infolist()
    except zipfile.BadZipFile as exc:
        raise ValueError(f"{where}: not a zip archive ({exc})") from None
    if len(infos) > MAX_METRICS_ENTRIES:
        raise ValueError(f"{where}: {len(infos)} entries; allowed: at most {MAX_METRICS_ENTRIES}")
    for info in infos:
        if not _METRICS_NAME.match(info.filename):
            raise UnsafeObjectError(
                f"{where}: refused entry {info.filename[:120]!r}; it would be extracted into the run folder beside the "
                "model's files; allowed: evaluations.npz and *.csv monitor files at the top level"
            )
        if info.file_size > MAX_METRICS_ENTRY:
            raise ValueError(f"{where}: entry {info.filename!r} declares {info.file_size} bytes; allowed: {MAX_METRICS_ENTRY}")
    if sum(info.file_size for info in infos) > MAX_METRICS_TOTAL:
        raise ValueError(f"{where}: entries declare more than {MAX_METRICS_TOTAL} bytes in all")


#: the packages whose wrappers a run folder's config.yml may name for the zoo to import (enjoy, record_video)
WRAPPER_PACKAGES = ("gymnasium.", "stable_baselines3.", "sb3_contrib.", "rl_zoo3.", "sb3ext.")
#: the zoo's scripts that read a run folder: their ``yaml`` is replaced by :class:`SafeZooYaml`
REPLAY_MODULES = ("rl_zoo3.utils", "rl_zoo3.enjoy", "rl_zoo3.record_video")


class SafeZooYaml:
    """Stands for PyYAML in the zoo's replay code: ``load`` reads with sb3ext's bounded safe loader (the zoo's own
    ``OrderedDict`` tag, nothing else), whatever ``Loader`` the zoo names (it names ``UnsafeLoader``, which builds any
    Python object a file asks for). Everything else is PyYAML's."""

    def __init__(self, real: ModuleType):
        self._real = real

    def load(self, stream: Any, Loader: Any = None) -> Any:
        from sb3ext.common.serialization import safe_yaml_load

        text = stream.read() if hasattr(stream, "read") else stream
        return safe_yaml_load(text, str(getattr(stream, "name", "<the zoo's YAML>")))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


def check_wrapper_names(hyperparams: dict[str, Any], source: str) -> None:
    """Refuse wrapper or callback names outside :data:`WRAPPER_PACKAGES`: the zoo imports the module each names."""
    for key in ("env_wrapper", "vec_env_wrapper", "callback"):
        value = hyperparams.get(key)
        entries = value if isinstance(value, list) else [] if value is None else [value]
        for entry in entries:
            names = list(entry) if isinstance(entry, dict) else [entry]
            for name in names:
                if not isinstance(name, str) or not name.startswith(WRAPPER_PACKAGES):
                    raise UnsafeObjectError(
                        f"{source}: {key} {str(name)[:80]!r} refused; the zoo would import it. Allowed: classes of "
                        f"{', '.join(p.rstrip('.') for p in WRAPPER_PACKAGES)} (edit the file if you trust it)"
                    )


def safe_saved_hyperparams(
    stats_path: str, norm_reward: bool = False, test_mode: bool = False
) -> tuple[dict[str, Any], str | None]:
    """``rl_zoo3.utils.get_saved_hyperparams`` without running code from the run folder: ``config.yml`` through
    sb3ext's safe reader (a regular file, bounded), ``normalize`` as a literal (the zoo ``eval``s it), wrapper names
    checked."""
    from sb3ext.common.serialization import safe_literal_eval
    from sb3ext.experts.building import read_config

    if not os.path.isdir(stats_path):
        return {}, None
    config_file = os.path.join(stats_path, "config.yml")
    if os.path.lexists(config_file):
        hyperparams = dict(read_config(Path(config_file)))
        hyperparams["normalize"] = hyperparams.get("normalize", False)
    else:
        hyperparams = {"normalize": os.path.isfile(os.path.join(stats_path, "obs_rms.pkl"))}
    check_wrapper_names(hyperparams, config_file)
    normalize = hyperparams["normalize"]
    if normalize:
        if isinstance(normalize, str):
            kwargs = safe_literal_eval(normalize, f"{config_file} normalize")
            if not isinstance(kwargs, dict):
                raise ValueError(
                    f"{config_file}: normalize {normalize[:80]!r}; allowed: a mapping such as {{'norm_obs': True}}"
                )
            if test_mode:
                kwargs["norm_reward"] = norm_reward
        elif isinstance(normalize, dict):
            kwargs = normalize
        else:
            kwargs = {"norm_obs": normalize, "norm_reward": norm_reward}
        hyperparams["normalize_kwargs"] = kwargs
    return hyperparams, stats_path


def safe_vecnormalize_class() -> type:
    from stable_baselines3.common.vec_env import VecNormalize

    from sb3ext.experts.building import load_normalization

    class SafeVecNormalize(VecNormalize):
        """Stands for ``VecNormalize`` in a zoo module: ``load`` reads the statistics with sb3ext's allow-list
        unpickler (the zoo's replay and ``-i`` read ``vecnormalize.pkl`` with plain pickle); constructing one gives
        SB3's own class, so that what the zoo saves loads without sb3ext."""

        def __new__(cls, *args: Any, **kwargs: Any) -> VecNormalize:  # type: ignore[misc]
            return VecNormalize(*args, **kwargs)

        @staticmethod
        def load(load_path: str, venv: Any) -> VecNormalize:  # type: ignore[override]
            stats = load_normalization(Path(load_path), venv.observation_space)
            env = VecNormalize(
                venv, training=False, norm_obs=stats.obs_rms is not None, norm_reward=stats.ret_rms is not None,
                clip_obs=stats.clip_obs, clip_reward=stats.clip_reward, epsilon=stats.epsilon,
            )  # fmt: skip
            if stats.obs_rms is not None:
                env.obs_rms = stats.obs_rms  # type: ignore[assignment]
            if stats.ret_rms is not None:
                env.ret_rms = stats.ret_rms
            return env

    return SafeVecNormalize


class SafeReplayLoad:
    """Stands in for a stock algorithm class (PPO, SAC, DQN, ...) in the zoo's replay scripts: ``load`` builds the
    model from the checkpoint's checked fields for acting (the expert loader, :mod:`sb3ext.experts.building`),
    running no code from the file; with ``SB3EXT_TRUST_REMOTE_CODE`` set, SB3's own ``load``. Anything else is the
    class's own."""

    def __init__(self, algo_class: Any):
        self.algo_class = algo_class

    def load(self, path: Any, env: Any = None, device: Any = "auto", custom_objects: Any = None, **kwargs: Any) -> Any:
        from stable_baselines3.common.utils import check_for_correct_spaces

        from sb3ext.experts.building import build_expert_model
        from sb3ext.experts.exercise import exercise_policy
        from sb3ext.experts.references import trust_from_environment

        if trust_from_environment():
            return self.algo_class.load(path, env=env, device=device, custom_objects=custom_objects, **kwargs)
        model = build_expert_model(Path(path), "cpu" if device == "auto" else device)
        exercise_policy(model.policy, str(path))
        if not isinstance(model, self.algo_class) and not issubclass(self.algo_class, type(model)):
            raise ValueError(f"{path}: a {type(model).__name__} checkpoint; --algo asked for {self.algo_class.__name__}")
        if env is not None:
            check_for_correct_spaces(env, model.observation_space, model.action_space)
        return model

    def __getattr__(self, name: str) -> Any:
        return getattr(self.algo_class, name)


def _safe_algos(algos: dict[str, Any]) -> dict[str, Any]:
    """The zoo's ``ALGOS`` for a replay script: sb3ext's algorithms as they are (their ``load`` is safe), every other
    class behind :class:`SafeReplayLoad`."""
    from sb3ext.algos.loading import SafeLoad

    return {
        key: cls if not isinstance(cls, type) or issubclass(cls, SafeLoad) else SafeReplayLoad(cls)
        for key, cls in algos.items()
    }


def secure_replay(module: ModuleType) -> None:
    """Replace what the zoo's replay code reads a run folder with: ``yaml`` (``UnsafeLoader``), the saved
    hyperparameters (``eval`` of ``normalize``, wrapper imports), ``VecNormalize.load`` (pickle). Idempotent."""
    if isinstance(getattr(module, "yaml", None), ModuleType):
        module.yaml = SafeZooYaml(module.yaml)  # type: ignore[attr-defined]
    if hasattr(module, "get_saved_hyperparams"):
        module.get_saved_hyperparams = safe_saved_hyperparams  # type: ignore[attr-defined]
    vec_normalize = getattr(module, "VecNormalize", None)
    if isinstance(vec_normalize, type) and vec_normalize.__name__ == "VecNormalize":
        module.VecNormalize = safe_vecnormalize_class()  # type: ignore[attr-defined]
    if module.__name__ != "rl_zoo3.utils" and isinstance(getattr(module, "ALGOS", None), dict):
        module.ALGOS = _safe_algos(module.ALGOS)  # type: ignore[attr-defined]  # this script's name only
