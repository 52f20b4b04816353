"""What the learner sees: the observation of the zoo's env for an ``aggrevated`` YAML entry, as training builds it
(its ``env_wrapper`` through rl_zoo3's ``create_test_env``, then its ``frame_stack`` as SB3's ``VecFrameStack``, as
the zoo's ``ExperimentManager`` stacks them), beside the rendered frame.

    python scripts/learner_view.py BreakoutNoFrameskip-v4 docs/benchmarks/atari_observation.png
    python scripts/learner_view.py sb3ext/BallPlatePixels-v1 docs/benchmarks/pixels_observation_plate_v1.png

The env plays a few seeded random steps first. Image observations are drawn one stacked frame per panel (uint8, as
the buffers keep them); a ``Dict`` observation's vector parts are written under the picture.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib
import numpy as np
import yaml
from rl_zoo3.utils import create_test_env
from stable_baselines3.common.vec_env import VecFrameStack

import sb3ext.envs  # noqa: F401  (registers the sb3ext/ envs)
from sb3ext.common.resources import hyperparams_path

matplotlib.use("Agg")
import matplotlib.pyplot as plt

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("env_id")
    parser.add_argument("out", type=Path)
    parser.add_argument("--steps", type=int, default=30, help="seeded random steps before the picture")
    args = parser.parse_args()
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


if __name__ == "__main__":
    main()
