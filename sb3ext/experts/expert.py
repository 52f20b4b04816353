"""Pretrained experts for imitation learning: loading and querying.

An expert is an SB3 / sb3-contrib checkpoint, given as

* a zoo folder: ``<Env>.zip`` + ``<Env>/config.yml`` (+ ``<Env>/vecnormalize.pkl``), as written by
  ``rl_zoo3.train`` and stored in ``rl-trained-agents``; or the Hub layout with ``config.yml`` and
  ``vec_normalize.pkl`` beside the zip;
* a bare ``.zip`` (its zoo files are picked up when they lie beside it).

Loading runs no code from the files and does not use SB3's ``load``: :mod:`sb3ext.experts.building` reads
only the fields an expert needs (restricted unpickler, checked values), builds the model itself and loads
only the built policy's own parameter names and shapes; :mod:`sb3ext.experts.checkpoint` caps every read.
``config.yml`` is read with a bounded safe YAML loader, ``vecnormalize.pkl`` with the restricted unpickler
and checked against the expert's observation space. Old ``gym``-era checkpoints load too
(docs/experts.md has the threat table).

The :class:`Expert` answers, for observations as the *environment* emits them (its own frozen
observation normalisation is applied inside):

* :meth:`Expert.predict` the deterministic action, in env units;
* :meth:`Expert.q_values` Q*(s, a) for actions in env units (continuous experts: SAC, TD3, DDPG,
  TQC), scaled to [-1, 1] before the critic, min over twin critics, TQC quantiles averaged;
* :meth:`Expert.q_all` Q*(s, .) for every action of a DQN / QR-DQN expert;
* :meth:`Expert.value` V*(s) of an actor-critic (PPO / A2C) expert;
* :meth:`Expert.log_prob` log pi*(a|s) of an actor-critic expert, or, for a policy-only expert (ARS, a
  :class:`CallableExpert`), of a unit Gaussian (``Box``) or an indicator (``Discrete``) centred on its action.
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.policies import ActorCriticPolicy

from sb3ext.common.serialization import LiteralTooComplex, UnsafeObjectError, safe_literal_eval
from sb3ext.experts.adapters import ContactLayout, observation_adapter
from sb3ext.experts.building import (
    Normalization,
    algo_of,
    build_expert_model,
    load_normalization,
    read_config,
    trusted_load,
)
from sb3ext.experts.checkpoint import is_within
from sb3ext.experts.exercise import exercise_policy, policy_error_reason
from sb3ext.experts.recorded import RecordedLevel, read_record
from sb3ext.experts.references import (
    ExpertReference,
    check_sha256,
    download,
    hub_model_filename,
    parse_reference,
    trust_from_environment,
)

#: Kinds of expert, by what they can answer.
Q_CONTINUOUS = "q_continuous"  # SAC, TD3, DDPG, TQC: Q*(s, a)
Q_DISCRETE = "q_discrete"  # DQN, QR-DQN: Q*(s, .)
VALUE_ONLY = "value_only"  # PPO, A2C, TRPO: V*(s) and a stochastic policy
POLICY_ONLY = "policy_only"  # ARS, a user's controller (CallableExpert): actions only

#: Modules whose classes a zoo ``config.yml`` may name as ``env_wrapper``.
_ALLOWED_WRAPPER_MODULES = (
    "sb3_contrib.common.wrappers.",
    "rl_zoo3.wrappers.",
    "gymnasium.wrappers.",
    "stable_baselines3.common.atari_wrappers.",
)


@dataclass
class ExpertFiles:
    """Where the pieces of a zoo checkpoint are."""

    model: Path
    config: Path | None = None
    vecnormalize: Path | None = None
    #: its own recorded evaluations: the zoo's ``evaluations.npz`` or a Hub model card (:mod:`sb3ext.experts.recorded`)
    record: Path | None = None


def find_expert_files(reference: str | os.PathLike[str], env_id: str | None = None) -> ExpertFiles:
    """Resolve a local expert reference (zoo folder or zip) to its files.

    :param reference: a zoo folder (``<algo>/<Env>_1``) or a ``.zip`` checkpoint
    :param env_id: the environment id, used to pick ``<env_id>.zip`` in a folder with several zips
    """
    try:
        path = Path(reference).expanduser()
        exists = path.exists()
    except (RuntimeError, OSError) as exc:  # ~unknownuser; a name longer than the file system allows
        raise ValueError(f"Expert path {str(reference)[:200]!r} cannot be used ({type(exc).__name__}: {exc})") from None
    if not exists:
        raise ValueError(f"Expert path {str(reference)!r} does not exist (expected a zoo folder or a .zip checkpoint)")
    if path.is_dir():
        zips = sorted(path.glob("*.zip"))
        preferred = [z for z in zips if env_id and z.stem in {env_id, f"{path.parent.name}-{env_id}"}]
        if len(preferred) == 1:
            model = preferred[0]
        elif len(zips) == 1:
            model = zips[0]
        elif not zips:
            raise ValueError(f"Expert folder {str(path)!r} holds no .zip checkpoint")
        else:
            names = ", ".join(z.name for z in zips)
            raise ValueError(f"Expert folder {str(path)!r} holds several checkpoints ({names}); pass the .zip to use")
    elif path.suffix == ".zip":
        model = path
    else:
        raise ValueError(f"Expert path {str(path)!r} is neither a folder nor a .zip checkpoint")
    folder, stem = model.parent, model.stem

    def first(*candidates: Path) -> Path | None:  # whatever is there: a pipe or a folder is refused when read
        return next((c for c in candidates if os.path.lexists(c)), None)

    files = ExpertFiles(
        model=model,
        config=first(folder / stem / "config.yml", folder / "config.yml"),
        vecnormalize=first(folder / stem / "vecnormalize.pkl", folder / "vec_normalize.pkl", folder / "vecnormalize.pkl"),
        record=first(folder / "evaluations.npz"),
    )
    if path.is_dir():
        check_inside(files, path)
    else:  # a zip named directly: its own location is the user's choice, its companions must lie beside it
        check_inside(ExpertFiles(folder, files.config, files.vecnormalize, files.record), folder)
    return files


def check_inside(files: ExpertFiles, root: Path) -> None:
    """Refuse, before reading it, any expert file that resolves (through symlinks) outside ``root``."""
    for name in ("model", "config", "vecnormalize", "record"):
        file = getattr(files, name)
        if file is not None and not is_within(file, root):
            raise UnsafeObjectError(
                f"{file}: refused to read it; it resolves to {os.path.realpath(file)}, outside the expert's folder "
                f"{os.path.realpath(root)} (symlinks may only point inside it, or inside the Hugging Face cache)"
            )


def describe_space(space: spaces.Space) -> str:
    """A short description of a space for error messages: a Box's shape and bounds (one number if uniform)."""
    if isinstance(space, spaces.Box):

        def bound(values: np.ndarray) -> str:
            unique = np.unique(values)
            if unique.size == 1:
                return str(unique[0])
            if unique.size <= 4:  # e.g. -inf everywhere but a time feature's 0
                return "{" + ", ".join(str(v) for v in unique) + "}"
            flat = values.ravel().tolist()
            return str(flat[:8])[:-1] + (", ...]" if len(flat) > 8 else "]")

        return f"Box(shape={space.shape}, low={bound(space.low)}, high={bound(space.high)})"
    return repr(space)


def _bounds(values: np.ndarray) -> np.ndarray:
    # old gym spaces used +-float32 max where gymnasium uses +-inf
    values = np.asarray(values, dtype=np.float64)
    return np.where(np.abs(values) >= np.finfo(np.float32).max, np.copysign(np.inf, values), values)


def spaces_match(a: spaces.Space, b: spaces.Space, within: bool = False) -> bool:
    """Same kind, shape and bounds (+-float32 max counts as infinite, as in old gym spaces).

    :param within: for Box spaces, accept ``b`` whose bounds lie inside ``a``'s (an expert trained on
        an unbounded observation space can observe a bounded one: LunarLander-v2 -> v3).
    """
    if isinstance(a, spaces.Box) and isinstance(b, spaces.Box):
        a_low, a_high, b_low, b_high = _bounds(a.low), _bounds(a.high), _bounds(b.low), _bounds(b.high)
        if a.shape != b.shape:
            return False
        if within:
            return bool(np.all(a_low <= b_low + 1e-6) and np.all(b_high <= a_high + 1e-6))
        return np.allclose(a_low, b_low, equal_nan=True) and np.allclose(a_high, b_high, equal_nan=True)
    if isinstance(a, spaces.Discrete) and isinstance(b, spaces.Discrete):
        return int(a.n) == int(b.n) and int(a.start) == int(b.start)
    return a == b


#: (expert source, env id) pairs already told that the expert was trained on another version of the env
_WARNED_OTHER_ENV: set[tuple[str, str]] = set()

_ENV_ID = re.compile(r"^(?:[\w.-]+/)?[\w.:-]+-v\d+$")


def _id_key(env_id: str) -> str:
    return env_id.replace("/", "-").replace(":", "-")


def trained_env_id(model_file: Path, hub_repo: str | None = None) -> str | None:
    """The env id a zoo checkpoint was trained on, from its naming: ``<algo>-<EnvId>`` on the Hub, ``<EnvId>.zip``
    in a zoo folder (``<algo>/<EnvId>_<n>/<EnvId>.zip``); None when the name is not an env id."""
    if hub_repo is not None:
        name = hub_repo.split("@")[0].split("/")[-1]
        candidate = name.split("-", 1)[1] if "-" in name else name
    else:
        candidate = model_file.stem
    return candidate if _ENV_ID.match(candidate) else None


def fitting_layouts(expert: Expert, limit: int = 3) -> list[str]:
    """The registered versions of the expert's env family whose observations (after the expert's own wrappers) fit
    the expert, as is or with one boolean observation setting flipped: ``"Ant-v4 with {'use_contact_forces': True}"``.
    For the error of an expert trained on another version (the zoo's ``-v3`` MuJoCo experts); builds each candidate."""
    import inspect

    import gymnasium as gym
    from gymnasium.envs.registration import load_env_creator

    if expert.env_id is None:
        return []
    family = re.sub(r"-v\d+$", "", expert.env_id)
    found: list[str] = []
    for env_id in sorted(k for k in gym.registry if re.fullmatch(re.escape(family) + r"-v\d+", k)):
        entry_point = gym.registry[env_id].entry_point
        try:
            creator = load_env_creator(entry_point) if isinstance(entry_point, str) else entry_point
            parameters = inspect.signature(creator).parameters if creator is not None else {}
        except (ImportError, AttributeError, TypeError, ValueError):  # mujoco-py -v3 envs, and the like
            continue
        flips = [{name: not p.default} for name, p in parameters.items()
                 if isinstance(p.default, bool) and ("observation" in name or "contact" in name)]  # fmt: skip
        for kwargs in [{}, *flips]:
            try:
                env = expert.make_env(env_id, **kwargs)
            except Exception:  # a candidate that cannot be built does not fit
                continue
            fits = expert.fits(env.observation_space) and spaces_match(expert.action_space, env.action_space)
            env.close()
            if fits:
                found.append(env_id + (f" with {kwargs}" if kwargs else ""))
    return found[:limit]


class Expert:
    """A frozen pretrained agent that an imitation learner can query.

    Build it with :func:`load_expert`. All methods take observations as the environment emits
    them (batched, first axis = batch); the expert's own observation normalisation is applied inside.

    :param model: the loaded SB3 / sb3-contrib model
    :param source: where it was loaded from (for messages)
    :param config: the zoo hyperparameters it was trained with (``config.yml``), if known
    :param normalization: frozen statistics of its ``VecNormalize``, if it was trained with one
    :param env_id: the id of the env it was trained on (from the zoo's file or Hub naming), if known
    :param recorded: its own recorded level where it was trained (:mod:`sb3ext.experts.recorded`), if known
    """

    env_id: str | None = None
    #: rebuilds the observations it was trained on from the current env's (None: it reads them as they are)
    adapter: ContactLayout | None = None
    #: its own recorded level where it was trained (None: unknown)
    recorded: RecordedLevel | None = None

    def __init__(
        self,
        model: BaseAlgorithm,
        source: str = "<memory>",
        config: dict[str, Any] | None = None,
        normalization: Normalization | None = None,
        env_id: str | None = None,
        recorded: RecordedLevel | None = None,
    ):
        self.model = model
        self.env_id = env_id
        self.recorded = recorded
        # Any: its critic / q_net / quantile_net depend on the algorithm (checked in ``kind``)
        self.policy: Any = model.policy
        self.policy.set_training_mode(False)
        for param in self.policy.parameters():
            param.requires_grad_(False)
        self.source = source
        self.config = dict(config or {})
        self.normalization = normalization
        self.algo_name = type(model).__name__.lower()
        self.observation_space = model.observation_space
        self.action_space = model.action_space
        self.device = model.device
        if hasattr(self.policy, "q_net") or hasattr(self.policy, "quantile_net"):
            self.kind = Q_DISCRETE
        elif hasattr(self.policy, "critic") and getattr(self.policy, "critic", None) is not None:
            self.kind = Q_CONTINUOUS
        elif isinstance(self.policy, ActorCriticPolicy):
            self.kind = VALUE_ONLY
        else:  # ARS: a deterministic policy, no critic
            self.kind = POLICY_ONLY
        self.adapter = observation_adapter(env_id, self.observation_space, getattr(normalization, "obs_rms", None))

    # ------------------------------------------------------------------ description
    @property
    def env_wrapper(self) -> Any:
        """The ``env_wrapper`` entry of the expert's ``config.yml`` (the learner's env must use it too)."""
        return self.config.get("env_wrapper")

    @property
    def frame_stack(self) -> int | None:
        """The ``frame_stack`` of the expert's ``config.yml``: it observes that many stacked frames (the learner's env
        must stack them the same way, see :func:`check_learner_wrapping`)."""
        value = self.config.get("frame_stack")
        if value is None or value is False:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 64:
            raise ValueError(f"Expert {self.source}: config.yml frame_stack={value!r}; allowed: an integer in [1, 64]")
        return value

    @property
    def obs_dtype(self) -> Any:
        """The dtype of the observations the expert's networks read: ``uint8`` frames stay ``uint8`` (its CNN scales
        them), everything else is ``float32``."""
        space = self.observation_space
        normalized = self.normalization is not None and self.normalization.obs_rms is not None
        return np.uint8 if isinstance(space, spaces.Box) and space.dtype == np.uint8 and not normalized else np.float32

    @property
    def ent_coef(self) -> float | None:
        """Entropy coefficient of a SAC-style expert (its critic is a soft Q), else None."""
        log_ent_coef = getattr(self.model, "log_ent_coef", None)
        if log_ent_coef is not None:
            return float(th.exp(log_ent_coef.detach()).item())
        ent_coef = getattr(self.model, "ent_coef_tensor", None)
        return float(ent_coef.item()) if ent_coef is not None else None

    def wrapper_classes(self) -> list[tuple[type, dict[str, Any]]]:
        """The expert's ``env_wrapper`` classes and kwargs, imported only from an allow-list of wrapper modules."""
        import importlib

        value = self.env_wrapper
        entries = value if isinstance(value, list) else [] if value is None else [value]
        wrappers: list[tuple[type, dict[str, Any]]] = []
        for entry in entries:
            name, kwargs = next(iter(entry.items())) if isinstance(entry, dict) else (entry, None)
            if not isinstance(name, str) or not name.startswith(_ALLOWED_WRAPPER_MODULES):
                raise UnsafeObjectError(
                    f"{self.source}: refused env_wrapper {name!r} from its config.yml "
                    f"(allowed modules: {', '.join(m.rstrip('.') for m in _ALLOWED_WRAPPER_MODULES)})"
                )
            module_name, class_name = name.rsplit(".", 1)
            wrappers.append((getattr(importlib.import_module(module_name), class_name), dict(kwargs or {})))
        return wrappers

    def make_env(self, env_id: str, **env_kwargs: Any) -> Any:
        """``gym.make(env_id)`` wrapped in the expert's own ``env_wrapper`` s (e.g. TimeFeatureWrapper)."""
        import gymnasium as gym

        try:
            env = gym.make(env_id, **env_kwargs)
        except gym.error.NameNotFound:
            import_env_packages()
            env = gym.make(env_id, **env_kwargs)
        return self.wrap_env(env)

    def wrap_env(self, env: Any) -> Any:
        """``env`` in the expert's own ``env_wrapper`` s, innermost first."""
        for wrapper, kwargs in self.wrapper_classes():
            env = wrapper(env, **kwargs)
        return env

    def __repr__(self) -> str:
        return f"Expert({self.algo_name}, {self.kind}, source={self.source!r})"

    def view_space(self, observation_space: spaces.Space) -> spaces.Space:
        """The observation space the expert sees of an env's (its :attr:`adapter` applied)."""
        return observation_space if self.adapter is None else self.adapter.space(observation_space)

    def fits(self, observation_space: spaces.Space) -> bool:
        """Whether the expert can read this env's observations (through its :attr:`adapter`)."""
        return spaces_match(self.observation_space, self.view_space(observation_space), within=True)

    def check_spaces(self, observation_space: spaces.Space, action_space: spaces.Space, env_id: str | None = None) -> None:
        """Raise ``ValueError`` naming both spaces if the expert cannot act in this environment.

        :param env_id: the environment's id: when it is not the one the expert was trained on (a zoo ``-v3``
            MuJoCo expert on a ``-v5`` env) and the spaces match, say so once (a ``UserWarning``)
        """
        # the zoo writes "/" and ":" of an env id as "-" in file and Hub names (sb3ext/X-v0 -> sb3ext-X-v0.zip)
        other_version = bool(env_id and self.env_id and _id_key(env_id) != _id_key(self.env_id))
        for what, mine, theirs in (
            ("observation", self.observation_space, self.view_space(observation_space)),
            ("action", self.action_space, action_space),
        ):
            if not spaces_match(mine, theirs, within=what == "observation"):
                hint = ""
                if what == "observation" and self.env_wrapper:
                    hint = f"; the expert was trained with env_wrapper {self.env_wrapper!r}: add it to the hyperparameters"
                if other_version:
                    hint += f"; it was trained on {self.env_id}, not {env_id}"
                    fitting = fitting_layouts(self) if what == "observation" else []
                    if fitting:
                        how = (
                            " (env kwargs: --env-kwargs, or env_kwargs in the YAML entry)" if " with " in str(fitting) else ""
                        )
                        hint += f"; its observations fit {' or '.join(fitting)}{how}"
                raise ValueError(
                    f"Expert {self.source} does not fit this environment: expert {what} space {describe_space(mine)}, "
                    f"environment {what} space {describe_space(theirs)}{hint}"
                )
        if other_version and env_id and (self.source, env_id) not in _WARNED_OTHER_ENV:
            _WARNED_OTHER_ENV.add((self.source, env_id))
            if self.adapter is not None:
                warnings.warn(
                    f"Expert {self.source} was trained on {self.env_id} and now acts on {env_id}; it sees "
                    f"{self.adapter.describe()}",
                    UserWarning,
                    stacklevel=2,
                )
                return
            warnings.warn(
                f"Expert {self.source} was trained on {self.env_id} and now acts on {env_id}. Its observation space "
                f"{describe_space(self.observation_space)} and action space {describe_space(self.action_space)} match "
                "this env's (checked), so its policy and critic read the same layout; only dynamics or reward details "
                f"that differ between the two versions can change its return (e.g. mujoco-py -v3 vs mujoco -v4/-v5 envs).",
                UserWarning,
                stacklevel=2,
            )

    # ------------------------------------------------------------------ queries
    def normalize_obs(self, obs: np.ndarray) -> np.ndarray:
        """The expert's view of env observations: its :attr:`adapter` (if any), then its frozen observation
        normalisation (identity if it had none; frames stay ``uint8``)."""
        if self.adapter is not None:
            obs = self.adapter(obs)
        norm = self.normalization
        if norm is None or norm.obs_rms is None:
            return np.asarray(obs, dtype=self.obs_dtype)
        obs = np.asarray(obs, dtype=np.float32)
        return np.clip(
            (obs - norm.obs_rms.mean) / np.sqrt(norm.obs_rms.var + norm.epsilon), -norm.clip_obs, norm.clip_obs
        ).astype(np.float32)

    def normalize_reward(self, reward: np.ndarray) -> np.ndarray:
        """Rewards on the scale the expert's value function was trained on (VecNormalize ``norm_reward``)."""
        reward = np.asarray(reward, dtype=np.float32)
        norm = self.normalization
        if norm is None or norm.ret_rms is None:
            return reward
        scaled = reward / np.sqrt(norm.ret_rms.var + norm.epsilon)
        return np.clip(scaled, -norm.clip_reward, norm.clip_reward).astype(np.float32)

    @property
    def gamma(self) -> float:
        """Discount factor the expert was trained with (its V* and Q* are discounted with it)."""
        return float(getattr(self.model, "gamma", 0.99))

    def obs_tensor(self, obs: np.ndarray) -> th.Tensor:
        """Environment observations -> the tensor the expert's networks expect."""
        return th.as_tensor(self.normalize_obs(obs), device=self.device)

    def predict(
        self,
        observation: np.ndarray | dict[str, np.ndarray],
        state: tuple[np.ndarray, ...] | None = None,
        episode_start: np.ndarray | None = None,
        deterministic: bool = True,
    ) -> tuple[np.ndarray, tuple[np.ndarray, ...] | None]:
        """Deterministic expert actions (env units) for environment observations.

        Same signature as SB3's ``predict`` (so ``evaluate_policy`` accepts an expert); the expert
        always acts deterministically.
        """
        if isinstance(observation, dict):
            raise TypeError("sb3ext experts do not support Dict observations")
        return self.act(self.normalize_obs(observation)), None

    def act(self, expert_obs: np.ndarray) -> np.ndarray:
        """Deterministic expert actions (env units) for a batch of observations already normalised for the expert.

        The same computation as SB3's ``policy.predict(obs, deterministic=True)``, without its per-call checks.
        """
        if len(self.observation_space.shape or ()) != 1:  # images etc.: let SB3 handle preprocessing and layout
            actions, _ = self.policy.predict(expert_obs, deterministic=True)
            return actions
        with th.no_grad():
            obs_shape = tuple(self.observation_space.shape or ())
            obs = th.as_tensor(np.asarray(expert_obs, dtype=np.float32), device=self.device).reshape(-1, *obs_shape)
            actor = getattr(self.policy, "actor", None)
            if actor is not None and hasattr(actor, "get_action_dist_params"):
                # SAC / TQC: the deterministic action is tanh(mean), the mode of their squashed (or gSDE) Gaussian;
                # SB3's predict builds the whole distribution first (costly for gSDE experts), with the same result
                mean_actions, _, _ = actor.get_action_dist_params(obs)
                actions = th.tanh(mean_actions).cpu().numpy()
            else:
                try:
                    actions = self.policy._predict(obs, deterministic=True).cpu().numpy()
                except ValueError as exc:  # torch's refusal of a distribution (NaN means on this observation)
                    raise ValueError(f"{self.source}: its policy cannot act here ({policy_error_reason(exc)})") from None
        actions = actions.reshape((-1, *(self.action_space.shape or ())))
        if isinstance(self.action_space, spaces.Box):
            if self.policy.squash_output:
                actions = self.policy.unscale_action(actions)
            else:
                actions = np.clip(actions, self.action_space.low, self.action_space.high)
        return actions

    @th.no_grad()
    def q_values(self, obs: th.Tensor, actions: th.Tensor) -> th.Tensor:
        """Q*(s, a) of a continuous-action expert.

        :param obs: expert-ready observations (see :meth:`obs_tensor`), shape (B, *obs_shape)
        :param actions: actions in env units, shape (B, act_dim) or (K, B, act_dim) (K samples per state)
        :return: shape (B,) or (K, B); min over twin critics, TQC quantiles and critics averaged
        """
        return self.combine_critics(self.q_critics(obs, actions))

    @th.no_grad()
    def q_critics(self, obs: th.Tensor, actions: th.Tensor) -> th.Tensor:
        """Each critic's Q(s, a) (TQC: its quantiles averaged), shape (n_critics, B) or (n_critics, K, B)."""
        q = self._critic(obs, actions)
        stacked = q.mean(dim=2) if isinstance(q, th.Tensor) else th.cat(q, dim=1)  # (N, n_critics)
        return stacked.T.reshape(stacked.shape[1], *actions.shape[:-1])

    def combine_critics(self, q_critics: th.Tensor) -> th.Tensor:
        """Q* from :meth:`q_critics`, as the expert's own algorithm combines them: the mean for TQC (its quantiles
        are all averaged), the minimum for twin critics (SAC, TD3); a single critic (DDPG) as it is."""
        if hasattr(self.policy.critic, "n_quantiles"):  # TQC's quantile critics
            return q_critics.mean(dim=0)
        return q_critics.min(dim=0).values

    @th.no_grad()
    def q_spread(self, obs: th.Tensor, actions: th.Tensor) -> th.Tensor:
        """|Q1 - Q2| (max - min over critics) on the given actions: how much the critics disagree."""
        return self.critic_spread(self.q_critics(obs, actions))

    @staticmethod
    def critic_spread(q_critics: th.Tensor) -> th.Tensor:
        """Max - min over the critics (first axis) of :meth:`q_critics`' output."""
        return q_critics.max(dim=0).values - q_critics.min(dim=0).values

    def _critic(self, obs: th.Tensor, actions: th.Tensor) -> Any:
        """The critic's raw output for env-unit actions of shape (B, act_dim) or (K, B, act_dim)."""
        if self.kind != Q_CONTINUOUS:
            raise TypeError(f"Expert {self.source} ({self.algo_name}) has no Q*(s, a) for continuous actions")
        assert isinstance(self.action_space, spaces.Box)
        flat_actions = actions.reshape(-1, actions.shape[-1])
        if actions.dim() == 3:  # K samples per state: repeat the states
            obs = obs.unsqueeze(0).expand(actions.shape[0], *obs.shape).reshape(-1, *obs.shape[1:])
        low = th.as_tensor(self.action_space.low, device=self.device)
        high = th.as_tensor(self.action_space.high, device=self.device)
        scaled = 2.0 * ((flat_actions.clamp(low, high) - low) / (high - low)) - 1.0  # SB3's scale_action, in torch
        return self.policy.critic(obs, scaled)

    @th.no_grad()
    def q_all(self, obs: th.Tensor) -> th.Tensor:
        """Q*(s, .) of a discrete-action expert, shape (B, n_actions); QR-DQN quantiles averaged."""
        if self.kind != Q_DISCRETE:
            raise TypeError(f"Expert {self.source} ({self.algo_name}) has no Q*(s, .) over discrete actions")
        if hasattr(self.policy, "quantile_net"):
            return self.policy.quantile_net(obs).mean(dim=1)
        return self.policy.q_net(obs)

    @th.no_grad()
    def log_prob(self, obs: th.Tensor, actions: th.Tensor) -> th.Tensor:
        """log pi*(a|s) of an actor-critic expert's own (stochastic) policy.

        :param obs: expert-ready observations, shape (B, *obs_shape)
        :param actions: Box: env-unit actions (clipped to the bounds, as the env clips them), shape (B, act_dim)
            or (K, B, act_dim); Discrete: indices, shape (B,) or (K, B)
        :return: shape (B,) or (K, B)

        A policy-only expert has no distribution: it is taken as a unit Gaussian centred on its action, in half
        action ranges (``Box``; raw units along an unbounded dimension), or as ``0`` for its action and ``-1`` for
        every other (``Discrete``). Only differences between actions at a state matter to AggreVaTeD, up to one
        positive scale (its batch normalisation removes it): the score is a cloning signal, not a cost-to-go.
        """
        if self.kind == POLICY_ONLY:
            return self._centred_log_prob(obs, actions)
        if self.kind != VALUE_ONLY:
            raise TypeError(f"Expert {self.source} ({self.algo_name}) has no stochastic actor-critic policy")
        distribution = self.policy.get_distribution(obs).distribution
        if isinstance(self.action_space, spaces.Box):
            low = th.as_tensor(self.action_space.low, device=actions.device)
            high = th.as_tensor(self.action_space.high, device=actions.device)
            return distribution.log_prob(actions.clamp(low, high)).sum(dim=-1)  # type: ignore[no-any-return]
        return distribution.log_prob(actions.long())  # type: ignore[no-any-return]

    def _centred_log_prob(self, obs: th.Tensor, actions: th.Tensor) -> th.Tensor:
        expert_actions = th.as_tensor(self.act(obs.cpu().numpy()), device=actions.device)
        if isinstance(self.action_space, spaces.Discrete):
            return -(actions.long() != expert_actions.long()).float()
        assert isinstance(self.action_space, spaces.Box)
        low = th.as_tensor(self.action_space.low, device=actions.device, dtype=th.float32)
        high = th.as_tensor(self.action_space.high, device=actions.device, dtype=th.float32)
        half_range = th.where(th.isfinite(high - low), (high - low) / 2, th.ones_like(low))
        distance = (actions.clamp(low, high) - expert_actions.float()) / half_range
        return -0.5 * distance.pow(2).sum(dim=-1)

    @th.no_grad()
    def value(self, obs: th.Tensor) -> th.Tensor:
        """V*(s) of an actor-critic expert, shape (B,)."""
        if self.kind != VALUE_ONLY:
            raise TypeError(f"Expert {self.source} ({self.algo_name}) has no state-value head")
        return self.policy.predict_values(obs).flatten()


class CallableExpert(Expert):
    """A user's own policy as an expert (an MPC, a scripted controller, a policy from another library): actions and
    nothing else, so a policy-only expert (see :meth:`Expert.log_prob`).

    :param policy: maps a batch of observations, as the environment emits them (shape ``(N, *obs_shape)``), to a
        batch of actions in env units (``(N, *action_shape)``; ``Discrete``: ``(N,)`` indices). Called without
        gradients; ``Box`` actions are clipped to the bounds, as the env clips them.
    :param observation_space: what it observes (the learner's env, or the env's state: ``info["state"]``)
    :param action_space: the env's action space
    :param name: how messages and logs name it
    :param gamma: the discount of the roll-in's bookkeeping (it has no value function to be consistent with)
    """

    def __init__(
        self,
        policy: Callable[[np.ndarray], Any],
        observation_space: spaces.Space,
        action_space: spaces.Space,
        name: str | None = None,
        gamma: float = 0.99,
    ):
        if not callable(policy):
            raise TypeError(f"CallableExpert: policy is a {type(policy).__name__}; allowed: a callable on observations")
        if not isinstance(action_space, (spaces.Box, spaces.Discrete)):
            raise ValueError(f"CallableExpert: action space {action_space!r}; allowed: Box or Discrete")
        self.model = None  # type: ignore[assignment]
        self.policy = policy
        self.source = str(name or getattr(policy, "__qualname__", type(policy).__name__))
        self.config = {}
        self.normalization = None
        self.env_id = None
        self.recorded = None
        self.adapter = None
        self.algo_name = "callable"
        self.observation_space = observation_space
        self.action_space = action_space
        self.device = th.device("cpu")
        self.kind = POLICY_ONLY
        self._gamma = float(gamma)

    @property
    def gamma(self) -> float:
        return self._gamma

    def act(self, expert_obs: np.ndarray) -> np.ndarray:
        obs = np.asarray(expert_obs).reshape(-1, *(self.observation_space.shape or ()))
        with th.no_grad():
            actions = np.asarray(self.policy(obs))
        shape = (len(obs), *(self.action_space.shape or ()))
        if actions.size != int(np.prod(shape)):
            raise ValueError(
                f"CallableExpert {self.source}: returned actions of shape {actions.shape} for {len(obs)} observations; "
                f"expected {shape}"
            )
        actions = actions.reshape(shape)
        if isinstance(self.action_space, spaces.Box):
            return np.clip(actions.astype(np.float32), self.action_space.low, self.action_space.high)
        return actions.astype(np.int64)


#: Packages that register gymnasium envs on import (the ones the zoo's experts need), tried when an id is unknown.
ENV_PACKAGES = ("pybullet_envs_gymnasium", "ale_py", "sb3ext.envs")


def import_env_packages() -> None:
    """Import the installed env packages (:data:`ENV_PACKAGES`): importing each registers its envs in gymnasium."""
    import importlib

    for name in ENV_PACKAGES:
        try:
            importlib.import_module(name)
        except ImportError:
            continue


def load_expert(
    reference: str | os.PathLike[str] | dict[str, Any] | Expert,
    env_id: str | None = None,
    device: th.device | str = "cpu",
    trust_remote_code: bool | None = None,
) -> Expert:
    """Load an expert, running no code from its files unless trust is given explicitly.

    :param reference: a zoo folder, a ``.zip`` checkpoint, a Hub repo id (``sb3/sac-Pendulum-v1[@revision]``),
        a mapping (``id`` or ``path``, ``revision``, ``sha256``, ``trust_remote_code``), or an :class:`Expert`
        (returned as is). See :mod:`sb3ext.experts.references`.
    :param env_id: environment id, to pick the right zip in a folder with several
    :param device: torch device for the expert's networks
    :param trust_remote_code: True: let SB3 unpickle the checkpoint's objects (this runs code from the files:
        only for checkpoints you trust). None (default): the reference's ``trust_remote_code``, else the
        ``SB3EXT_TRUST_REMOTE_CODE`` environment variable, else False (``TRUST_REMOTE_CODE``, which huggingface_sb3
        asks users to export, is not read).
    """
    if isinstance(reference, Expert):
        return reference
    ref = parse_reference(reference)
    trust = trust_remote_code if trust_remote_code is not None else ref.trust_remote_code or trust_from_environment()
    files = _expert_files(ref, env_id)
    check_sha256(files.model, ref.sha256)
    config = read_config(files.config)
    if trust:
        model = trusted_load(files.model, algo_of(files.model), device)
    else:
        model = build_expert_model(files.model, device)
    normalization = (
        load_normalization(files.vecnormalize, model.observation_space, trust, _reward_flag(config, str(files.config)))
        if files.vecnormalize
        else None
    )
    if normalization is None and _normalize_flag(config, str(files.config)):
        raise ValueError(f"Expert {files.model} was trained with `normalize` but its vecnormalize.pkl is missing")
    source = str(ref) if ref.is_hub else str(files.model)
    trained_on = trained_env_id(files.model, ref.location if ref.is_hub else None)  # type: ignore[arg-type]
    exercise_policy(model.policy, str(files.model), normalization)
    return Expert(model, source, config, normalization, trained_on, _recorded_level(files.record))


def _recorded_level(path: Path | None) -> RecordedLevel | None:
    """The expert's recorded level; a record that cannot be read is told and skipped (the model is loaded anyway)."""
    try:
        return read_record(path)
    except (ValueError, OSError) as exc:
        warnings.warn(
            f"{path}: its recorded evaluations were not read ({exc}); the expert's level is not checked", stacklevel=3
        )
        return None


def _expert_files(ref: ExpertReference, env_id: str | None) -> ExpertFiles:
    if ref.is_hub:
        files = ExpertFiles(
            model=download(ref.location, hub_model_filename(ref.location), ref.revision, required=True),  # type: ignore[arg-type]
            config=download(ref.location, "config.yml", ref.revision, required=False),
            vecnormalize=download(ref.location, "vec_normalize.pkl", ref.revision, required=False),
            record=download(ref.location, "README.md", ref.revision, required=False),
        )
        check_inside(files, hub_repo_cache(ref.location))
        return files
    return find_expert_files(ref.location, env_id)


def expert_config(reference: str | os.PathLike[str] | dict[str, Any] | Expert, env_id: str | None = None) -> dict[str, Any]:
    """The zoo hyperparameters an expert was trained with (its ``config.yml``, read safely; ``{}`` if it has none),
    without building its model."""
    if isinstance(reference, Expert):
        return dict(reference.config)
    return read_config(_expert_files(parse_reference(reference), env_id).config)


def hub_repo_cache(repo_id: str) -> Path:
    """The Hugging Face cache folder of one model repo (its snapshots link into its blobs)."""
    from huggingface_hub import constants

    return Path(constants.HF_HUB_CACHE) / f"models--{repo_id.replace('/', '--')}"


def _normalize_setting(config: dict[str, Any], source: str) -> bool | dict[str, Any] | str:
    """The config's ``normalize``: a bool, the VecNormalize kwargs (a dict), or an unparsed string."""
    flag = config.get("normalize", False)
    if isinstance(flag, str):
        try:
            parsed = safe_literal_eval(flag, f"{source}: normalize")
        except LiteralTooComplex:
            raise
        except (ValueError, SyntaxError, TypeError):
            return flag
        return parsed if isinstance(parsed, dict) else bool(parsed)
    return flag if isinstance(flag, dict) else bool(flag)


def _reward_flag(config: dict[str, Any], source: str = "config.yml") -> bool | None:
    """Whether the expert's rewards were normalised in training, by its config: ``normalize: true`` is VecNormalize's
    default, ``norm_reward=True``. Its ``vecnormalize.pkl`` can say otherwise: some of the zoo's Hub uploads (its A2C
    Ant, Humanoid and Walker2d) were saved with ``norm_reward`` switched off, while their V* is on the normalised
    scale. None where the config does not say (the file's flag decides)."""
    if "normalize" not in config:
        return None
    setting = _normalize_setting(config, source)
    if isinstance(setting, dict):
        return bool(setting.get("norm_reward", True))
    if isinstance(setting, str):
        return None
    return setting or None


def _normalize_flag(config: dict[str, Any], source: str = "config.yml") -> bool:
    setting = _normalize_setting(config, source)
    if isinstance(setting, dict):
        return bool(setting.get("norm_obs", True))
    if isinstance(setting, str):
        return setting.strip().lower() not in {"false", "0", ""}
    return setting
