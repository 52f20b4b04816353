"""Diagnostics of an expert and of what a learner sees, each answering one question, on the harness's seeded episodes:

    python -m benchmarks.diagnose fragile <expert> <env>   # is my expert fragile? copies with perturbed weights
    python -m benchmarks.diagnose promise <expert> <env>   # does its critic keep its promise? V*(s0) vs its returns
    python -m benchmarks.diagnose view <env> <out.png>     # what does the learner see? its observation, drawn
    python -m benchmarks.diagnose terms <checkpoint> <env> --algo ppo  # where does a learner's return come from?

* ``fragile``: each copy multiplies every weight of the expert's policy by ``1 + scale * z`` (``z`` standard normal,
  seeded per copy), so it errs as a clone does: systematically, state by state. For each copy, the mean absolute gap
  between its deterministic actions and the expert's on the states it visits, and its mean return (``--episodes``
  from seed ``--seed``); for each scale, how many copies reach the harness's threshold (90% of the way from a random
  policy to the expert). Near all copies at a small gap: an expert whose return is smooth in its actions; about half:
  one on a knife edge, which only a learner past it can hold. With ``--learner`` (a zoo checkpoint or final model,
  its VecNormalize statistics where the zoo saves them), the same for the learner.
* ``promise``: V*(s0) (V* of a value-only expert, Q*(s0, its action) of a Q one) beside the discounted return of the
  expert's own deterministic episodes from the same seeded first states, in its gamma and reward scale, and the
  shortfall ``mean(V* - return) / mean|V*|`` (``train/return_shortfall``): near 0, its critic's promises are what
  its own play gets; the reinforcement term (``rl_coef``) weans the imitation off as a learner's returns reach them.
* ``view``: the observation of the zoo's env for an ``aggrevated`` YAML entry, as training builds it (its
  ``env_wrapper`` through rl_zoo3's ``create_test_env``, then its ``frame_stack``), beside the rendered frame.
* ``terms``: a saved learner (a harness checkpoint or the zoo's final model, with its VecNormalize statistics and its
  run's ``env_wrapper`` and ``frame_stack``) on the harness's seeded episodes, with its deterministic actions (as the
  harness evaluates it) and with its sampled ones (as it trains): each episode's return and the sums of the env's
  reward terms (``info["reward_*"]``, e.g. MuJoCo's forward reward and control cost). ``--root-angle i``: also the
  share of its steps with the body upside down (``cos(qpos[i]) < 0``, a planar walker's root angle, 2 on
  HalfCheetah), and the episodes split into those mostly upside down and the rest.

The findings they made are on the history pages (docs/algos/aggrevated_history.md) and, for ``terms``, in the
ppo_paper suite's HalfCheetah notes.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import gymnasium as gym
import matplotlib
import numpy as np
import torch as th
import yaml
from stable_baselines3.common.vec_env import VecFrameStack

import sb3ext.envs  # noqa: F401  (registers the sb3ext/ envs)
from benchmarks.games import scored_env
from sb3ext.algos.aggrevated.rollin import PromisedReturns, promised_values
from sb3ext.callbacks.evaluation import StackedFrames, episode_returns
from sb3ext.common.resources import hyperparams_path
from sb3ext.experts import POLICY_ONLY, Expert, load_expert

matplotlib.use("Agg")
import matplotlib.pyplot as plt


class GapRecorder:
    """Acts as ``copy`` (an expert's copy or a saved learner: anything with SB3's ``predict`` on raw observations)
    and records the mean absolute gap of its actions to ``reference``'s on the same observations."""

    def __init__(self, copy: Any, reference: Expert):
        self.copy, self.reference = copy, reference
        self.gaps: list[float] = []

    def predict(self, obs: np.ndarray, deterministic: bool = True) -> tuple[np.ndarray, Any]:
        action, state = self.copy.predict(obs, deterministic=deterministic)
        expert_action, _ = self.reference.predict(obs, deterministic=deterministic)
        self.gaps.append(float(np.abs(np.asarray(action, float) - np.asarray(expert_action, float)).mean()))
        return action, state


def perturb(expert: Expert, original: dict[str, th.Tensor], scale: float, seed: int) -> None:
    """Every floating weight of ``expert``'s policy set to its ``original`` value times ``1 + scale * z``."""
    generator = th.Generator().manual_seed(seed)
    with th.no_grad():
        for name, param in expert.policy.state_dict().items():
            if param.dtype.is_floating_point:
                noise = th.randn(param.shape, generator=generator, dtype=param.dtype)
                param.copy_(original[name] * (1 + scale * noise))


def fragile(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    """Is my expert fragile? Perturbed copies of its policy, their action gap and their returns."""
    from rl_zoo3 import ALGOS  # sb3ext's plug-in registers its algorithms in it

    from benchmarks.runs import load_saved_learner

    if args.copies < 1 or args.episodes < 1:
        parser.error("--copies and --episodes must be at least 1")
    if args.learner is not None and not args.learner.is_file():
        parser.error(f"--learner {args.learner}: no such file")
    if args.algo not in ALGOS:
        parser.error(f"--algo {args.algo!r}: not one of the zoo's algorithms ({', '.join(sorted(ALGOS))})")
    reference = load_expert(args.expert, env_id=args.env)
    copy = load_expert(args.expert, env_id=args.env)
    original = {name: value.clone() for name, value in copy.policy.state_dict().items()}

    def make(env_id: str) -> Any:
        return scored_env(env_id, reference.wrap_env)

    expert_mean = float(np.mean(episode_returns(args.env, reference, args.episodes, args.seed, make)[0]))
    random_mean = float(np.mean(episode_returns(args.env, None, args.episodes, args.seed, make)[0]))
    threshold = random_mean + 0.9 * (expert_mean - random_mean)
    print(f"{args.expert} on {args.env}: expert {expert_mean:.1f}, random {random_mean:.1f}, threshold {threshold:.1f} "
          f"({args.episodes} episodes from seed {args.seed})")  # fmt: skip
    if args.learner is not None:
        recorder = GapRecorder(load_saved_learner(args.learner, args.algo, args.env, make), reference)
        mean = float(np.mean(episode_returns(args.env, recorder, args.episodes, args.seed, make)[0]))
        print(f"learner {args.learner}: action gap {np.mean(recorder.gaps):.4f}, return {mean:.1f}")
    print("scale | copy | action gap | return")
    for scale in args.scales:
        means, gaps = [], []
        for index in range(args.copies):
            perturb(copy, original, scale, seed=index)
            recorder = GapRecorder(copy, reference)
            means.append(float(np.mean(episode_returns(args.env, recorder, args.episodes, args.seed, make)[0])))
            gaps.append(float(np.mean(recorder.gaps)))
            print(f"{scale:g} | {index} | {gaps[-1]:.4f} | {means[-1]:.1f}", flush=True)
        held = sum(mean >= threshold for mean in means)
        print(f"scale {scale:g}: action gap {min(gaps):.4f} to {max(gaps):.4f} (median {np.median(gaps):.4f}); return "
              f"{min(means):.1f} to {max(means):.1f}; {held} of {args.copies} copies at or above the threshold")  # fmt: skip


def run_episode(expert: Expert, env: gym.Env, seed: int, tracker: PromisedReturns) -> tuple[float, int]:
    """One seeded deterministic episode of the expert, tracked as the roll-in tracks its episodes (V*(s0) and the
    discounted return in the expert's reward scale, appended to ``tracker.finished``); the env's return and length."""
    obs, _ = env.reset(seed=seed)
    tracker.start(np.array([True]), promised_values(expert, expert.normalize_obs(obs[None])).reshape(-1))
    total, steps, done = 0.0, 0, False
    while not done:
        obs, reward, terminated, truncated, _ = env.step(expert.act(expert.normalize_obs(obs[None]))[0])
        done = terminated or truncated
        tracker.step(expert.normalize_reward(np.array([reward], dtype=np.float64)), np.array([done]))
        total += float(reward)
        steps += 1
    return total, steps


def promise(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    """Does its critic keep its promise? V*(s0) beside the discounted return of the expert's own episodes."""
    expert = load_expert(args.expert)
    if expert.kind == POLICY_ONLY:
        parser.error(f"{args.expert} is policy-only: it has no V* to compare")
    env = expert.make_env(args.env)
    tracker = PromisedReturns(1, expert.gamma, episodes=args.episodes)
    for episode in range(args.episodes):
        total, steps = run_episode(expert, env, args.seed + episode, tracker)
        _, promised, discounted = tracker.finished[-1]
        print(f"seed {args.seed + episode}: V*(s0) {promised:.2f}, discounted return {discounted:.2f} "
              f"(return {total:.0f} in {steps} steps)")  # fmt: skip
    shortfall = tracker.shortfall()
    print(f"gamma {expert.gamma}: the expert's own shortfall from V*(s0) is {shortfall:+.2f} over {args.episodes} episodes")


def learner_config(checkpoint: Path) -> dict[str, Any]:
    """The zoo's ``config.yml`` of the run that saved ``checkpoint``: a harness checkpoint's
    (``<run>/checkpoints/rl_model_<N>_steps.zip``, the zoo's log under ``<run>/logs``) or the zoo's final model's
    (``<env>.zip`` beside ``<env>/config.yml``); empty where there is none."""
    from sb3ext.common.serialization import safe_yaml_load

    found = [*checkpoint.parent.parent.glob("logs/*/*/*/config.yml"), checkpoint.with_suffix("") / "config.yml"]
    config = next((path for path in found if path.is_file()), None)
    return {} if config is None else dict(safe_yaml_load(config.read_text(), str(config)))


def play(learner: Any, env: gym.Env, seed: int, deterministic: bool, root_angle: int | None) -> dict[str, float]:
    """One seeded episode of ``learner``: its return, length, the sums of ``info["reward_*"]`` and, with
    ``root_angle``, the share of steps with ``cos(qpos[root_angle]) < 0``."""
    obs, _ = env.reset(seed=seed)
    row: dict[str, float] = {"return": 0.0, "length": 0}
    upside_down, done = 0, False
    while not done:
        action, _ = learner.predict(obs[None], deterministic=deterministic)
        obs, reward, terminated, truncated, info = env.step(action[0])
        done = terminated or truncated
        row["return"] += float(reward)
        row["length"] += 1
        for key, value in info.items():
            if key.startswith("reward_") and isinstance(value, (int, float, np.number)):
                row[key] = row.get(key, 0.0) + float(value)
        if root_angle is not None:
            upside_down += float(np.cos(env.unwrapped.data.qpos[root_angle])) < 0  # type: ignore[attr-defined]
    if root_angle is not None:
        row["upside_down"] = upside_down / row["length"]
    return row


def terms(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    """Where does a learner's return come from? Each seeded episode's reward terms, deterministic and sampled."""
    from rl_zoo3 import ALGOS  # sb3ext's plug-in registers its algorithms in it
    from rl_zoo3.utils import get_wrapper_class

    from benchmarks.runs import load_saved_learner

    if not args.checkpoint.is_file():
        parser.error(f"{args.checkpoint}: no such file")
    if args.algo not in ALGOS:
        parser.error(f"--algo {args.algo!r}: not one of the zoo's algorithms ({', '.join(sorted(ALGOS))})")
    if args.episodes < 1:
        parser.error("--episodes must be at least 1")
    config = learner_config(args.checkpoint)
    wrapper, frame_stack = get_wrapper_class(config), int(config.get("frame_stack", 0) or 0)

    def make(env_id: str) -> gym.Env:
        return scored_env(env_id, lambda env: wrapper(env) if wrapper is not None else env)

    learner = load_saved_learner(args.checkpoint, args.algo, args.env, make)
    env = StackedFrames(make(args.env), frame_stack) if frame_stack else make(args.env)
    if args.root_angle is not None and not hasattr(env.unwrapped, "data"):
        parser.error(f"--root-angle: {args.env} is not a MuJoCo env (it has no data.qpos)")
    for deterministic in (True, False):
        mode = "deterministic" if deterministic else "sampled"
        learner.model.set_random_seed(args.seed)  # the sampled actions' draws
        rows = [play(learner, env, args.seed + i, deterministic, args.root_angle) for i in range(args.episodes)]
        for i, row in enumerate(rows):
            print(f"{mode} seed {args.seed + i}: " + ", ".join(f"{k} {v:.2f}" if k == "upside_down" else f"{k} {v:.0f}"
                                                        for k, v in row.items()))  # fmt: skip
        keys = [k for k in rows[0] if k != "length"]
        means = ", ".join(f"{k} {np.mean([r[k] for r in rows]):.2f}" for k in keys)
        print(f"{mode}: {args.episodes} episodes, mean {means}")
        if args.root_angle is not None:
            for name, group in (("upside down", [r for r in rows if r["upside_down"] >= 0.5]),
                                ("upright", [r for r in rows if r["upside_down"] < 0.5])):  # fmt: skip
                line = f"{mode}: {len(group)} of {args.episodes} episodes {name} on most steps"
                if group:
                    line += ": mean " + ", ".join(
                        f"{k} {np.mean([r[k] for r in group]):.0f}" for k in keys if k != "upside_down"
                    )
                print(line)


#: the entry keys that shape the observation (the rest are the algorithm's)
VIEW_KEYS = ("env_wrapper", "frame_stack")


def entry_for(env_id: str) -> dict:
    """The ``aggrevated`` entry the zoo uses for ``env_id`` (an ALE game without its own entry takes ``atari``)."""
    entries = yaml.safe_load(hyperparams_path("aggrevated").read_text())
    if env_id in entries:
        return entries[env_id]
    if "NoFrameskip" in env_id or env_id.startswith("ALE/"):
        return entries["atari"]
    raise SystemExit(f"no aggrevated entry for {env_id!r}; entries: {sorted(entries)}")


def frames_of(image: np.ndarray) -> list[np.ndarray]:
    """The stacked frames of one image observation (channels last; RGB frames kept whole)."""
    channels = image.shape[-1]
    if channels % 3 == 0 and channels > 1 and channels != 4:
        return [image[..., i : i + 3] for i in range(0, channels, 3)]
    return [image[..., i] for i in range(channels)]


def view(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    """What does the learner see? Its observation for the env's aggrevated entry, drawn beside the rendered frame."""
    from rl_zoo3.utils import create_test_env

    if "NoFrameskip" in args.env_id or args.env_id.startswith("ALE/"):
        import ale_py  # noqa: F401  (importing it registers the ALE games; the atari extra)
    hyperparams = {key: value for key, value in entry_for(args.env_id).items() if key in VIEW_KEYS}
    n_stack = hyperparams.pop("frame_stack", 0)
    env = create_test_env(args.env_id, n_envs=1, seed=0, should_render=False, hyperparams=hyperparams,
                          env_kwargs={"render_mode": "rgb_array"})  # fmt: skip
    if n_stack:
        env = VecFrameStack(env, n_stack)
    env.action_space.seed(0)
    obs = env.reset()
    for _ in range(args.steps):
        obs, *_ = env.step(np.array([env.action_space.sample()]))
    frame = env.render()
    parts = obs if isinstance(obs, dict) else {"observation": obs}
    images = {key: value[0] for key, value in parts.items() if value.dtype == np.uint8 and value.ndim == 4}
    vectors = {key: value[0] for key, value in parts.items() if key not in images}
    panels = [(f"{key}: frame {i + 1} of {len(frames_of(image))}", f) for key, image in images.items()
              for i, f in enumerate(frames_of(image))]  # fmt: skip
    if frame is not None:
        panels.insert(0, ("rendered (not seen by the learner)", frame))
    fig, axes = plt.subplots(1, len(panels), figsize=(2.4 * len(panels), 2.9), squeeze=False)
    for ax, (title, picture) in zip(axes[0], panels):
        ax.imshow(picture, cmap=None if picture.ndim == 3 else "gray", vmin=0, vmax=255)
        ax.set_title(title, fontsize=7)
        ax.axis("off")
    shapes = ", ".join(f"{key} {value.shape[1:]} {value.dtype}" for key, value in parts.items())
    text = f"{args.env_id}, the learner's observation: {shapes}"
    for key, value in vectors.items():
        text += f"\n{key}: " + " ".join(f"{v:.2f}" for v in np.ravel(value))
    fig.text(0.01, 0.01, text, fontsize=7, family="monospace", va="bottom")
    fig.tight_layout(rect=(0, 0.06 + 0.04 * len(vectors), 1, 1))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=110)
    print(args.out, shapes)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.diagnose", description=__doc__.split("\n\n")[0])
    questions = parser.add_subparsers(dest="question", required=True)
    sub = questions.add_parser("fragile", help="is my expert fragile? copies with perturbed weights")
    sub.add_argument("expert", help="a zoo folder or .zip")
    sub.add_argument("env")
    sub.add_argument("--scales", type=float, nargs="+", default=[0.02, 0.1, 0.25])
    sub.add_argument("--copies", type=int, default=12, help="copies per scale")
    sub.add_argument("--episodes", type=int, default=30)
    sub.add_argument("--seed", type=int, default=50_000)
    sub.add_argument("--learner", type=Path, default=None, help="a saved learner's .zip, to measure alike")
    sub.add_argument("--algo", default="aggrevated", help="the saved learner's algorithm (the zoo's name)")
    sub = questions.add_parser("promise", help="does its critic keep its promise? V*(s0) against its own returns")
    sub.add_argument("expert", help="a zoo run folder or .zip")
    sub.add_argument("env", help="the env id (with the version the expert fits)")
    sub.add_argument("--episodes", type=int, default=4)
    sub.add_argument("--seed", type=int, default=1000, help="the first episode's seed")
    sub = questions.add_parser("view", help="what does the learner see? its observation, drawn")
    sub.add_argument("env_id")
    sub.add_argument("out", type=Path)
    sub.add_argument("--steps", type=int, default=30, help="seeded random steps before the picture")
    sub = questions.add_parser("terms", help="where does a learner's return come from? its episodes' reward terms")
    sub.add_argument("checkpoint", type=Path, help="a harness checkpoint rl_model_<N>_steps.zip or the zoo's <env>.zip")
    sub.add_argument("env")
    sub.add_argument("--algo", required=True, help="the saved learner's algorithm (the zoo's name)")
    sub.add_argument("--episodes", type=int, default=30)
    sub.add_argument("--seed", type=int, default=50_000, help="the first episode's seed (the harness's)")
    sub.add_argument("--root-angle", type=int, default=None, help="qpos index of a planar body's root angle")
    args = parser.parse_args(argv)
    {"fragile": fragile, "promise": promise, "view": view, "terms": terms}[args.question](args, parser)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
