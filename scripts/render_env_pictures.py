"""Render every registered ``sb3ext/`` environment headless (TinyRenderer) into ``docs/envs/<Id>.png``.

    python scripts/render_env_pictures.py

Each picture shows the ``rgb_array`` frame after a few seeded random steps, and, for pixel-observation
variants, the 84x84 grayscale observation the agent sees.
"""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import matplotlib
import numpy as np

import sb3ext.envs

matplotlib.use("Agg")
import matplotlib.pyplot as plt

OUT = Path(__file__).resolve().parent.parent / "docs" / "envs"


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for env_id in sb3ext.envs.ENV_IDS:
        env = gym.make(env_id, render_mode="rgb_array")
        env.action_space.seed(0)
        obs, _ = env.reset(seed=0)
        for _ in range(6):
            obs, *_ = env.step(env.action_space.sample())
        frame = env.render()
        pixels = isinstance(obs, np.ndarray) and obs.dtype == np.uint8
        fig, axes = plt.subplots(1, 2 if pixels else 1, figsize=(8 if pixels else 5, 3), squeeze=False)
        axes[0, 0].imshow(frame)
        axes[0, 0].set_title(f"{env_id} (render)", fontsize=9)
        if pixels:
            axes[0, 1].imshow(obs[..., 0], cmap="gray", vmin=0, vmax=255)
            axes[0, 1].set_title("observation: 84x84 grayscale", fontsize=9)
        for ax in axes.flat:
            ax.axis("off")
        fig.tight_layout()
        path = OUT / f"{env_id.split('/')[-1]}.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        env.close()
        print(path)


if __name__ == "__main__":
    main()
