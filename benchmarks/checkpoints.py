"""The harness's checkpoints: SB3's ``CheckpointCallback`` (the model, its VecNormalize statistics and its replay
buffer every ``save_freq`` calls), numbered on the whole run's env steps and logged, so that a run cut off (a session's
end, a crash) goes on from its last checkpoint (with its replay buffer, where it has one) instead of starting again.

Each checkpoint adds a line to ``progress.jsonl`` beside it once its files are written: its env steps, and the
training process's CPU seconds and wall-clock seconds since the run began, over every part of a resumed run. Only
the newest replay buffer is kept (one is the size of the replay, hundreds of MB for a 1M buffer).

The zoo builds this callback in the training process from the run's ``callback`` hyperparameter.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from stable_baselines3.common.callbacks import CheckpointCallback

#: the log of written checkpoints, one JSON line each, in the checkpoints' folder
PROGRESS = "progress.jsonl"
PREFIX = "rl_model"


def replay_name(steps: int) -> str:
    return f"{PREFIX}_replay_buffer_{steps}_steps.pkl"


class ResumableCheckpoint(CheckpointCallback):
    """SB3's checkpoints with the VecNormalize statistics and the replay buffer, numbered from ``offset`` (the env
    steps of the run's earlier parts), logged in :data:`PROGRESS`.

    :param offset: env steps before this part of the run (0 for a new run)
    :param cpu_s: CPU seconds of the run's earlier parts
    :param wall_s: wall-clock seconds of the run's earlier parts
    :param started: when this part began (``time.time()``; default: when the callback is built)
    """

    def __init__(
        self, save_freq: int, save_path: str, offset: int = 0, cpu_s: float = 0.0, wall_s: float = 0.0,
        started: float | None = None, **kwargs: Any,
    ) -> None:  # fmt: skip
        super().__init__(save_freq, save_path, PREFIX, save_replay_buffer=True, save_vecnormalize=True, **kwargs)
        self.offset, self.cpu_s, self.wall_s = int(offset), float(cpu_s), float(wall_s)
        self.started = time.time() if started is None else float(started)

    def _checkpoint_path(self, checkpoint_type: str = "", extension: str = "") -> str:
        """SB3's name, on the whole run's env steps."""
        steps = self.offset + self.num_timesteps
        return os.path.join(self.save_path, f"{self.name_prefix}_{checkpoint_type}{steps}_steps.{extension}")

    def _on_step(self) -> bool:
        saving = self.n_calls % self.save_freq == 0
        result = super()._on_step()
        if saving:
            steps = self.offset + self.num_timesteps
            folder = Path(self.save_path)
            cpu_s, wall_s = self.cpu_s + time.process_time(), self.wall_s + time.time() - self.started
            row = {"steps": steps, "cpu_s": cpu_s, "wall_s": wall_s}
            with open(folder / PROGRESS, "a") as handle:  # logged once its files are written
                handle.write(json.dumps(row) + "\n")
            for old in folder.glob(f"{PREFIX}_replay_buffer_*_steps.pkl"):  # then the older replay goes
                if old.name != replay_name(steps):
                    old.unlink()
        return result


def progress_rows(folder: Path) -> list[dict[str, Any]]:
    """The checkpoints logged in ``folder``'s :data:`PROGRESS`, oldest first (a line cut off mid-write is skipped)."""
    progress = folder / PROGRESS
    rows = []
    for line in progress.read_text().splitlines() if progress.exists() else []:
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows


def resume_point(folder: Path, replay: bool = True) -> dict[str, Any] | None:
    """The newest checkpoint in ``folder`` that a run can go on from (logged in :data:`PROGRESS`, its model on disk,
    and its replay buffer unless ``replay`` is False: an on-policy learner has none), as its progress row with the
    paths ``model``, ``replay`` and ``vecnormalize`` (None where there is none); None if there is none."""
    for row in reversed(progress_rows(folder)):
        steps = int(row["steps"])
        model, buffer = folder / f"{PREFIX}_{steps}_steps.zip", folder / replay_name(steps)
        if model.exists() and (buffer.exists() or not replay):
            norm = folder / f"{PREFIX}_vecnormalize_{steps}_steps.pkl"
            return {
                **row, "model": model, "replay": buffer if buffer.exists() else None,
                "vecnormalize": norm if norm.exists() else None,
            }  # fmt: skip
    return None


def checkpoint_walls(folder: Path) -> dict[int, float]:
    """Each logged checkpoint's wall-clock seconds since its run began (over every part of a resumed run)."""
    return {int(row["steps"]): float(row["wall_s"]) for row in progress_rows(folder)}
