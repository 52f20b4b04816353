"""An expert's own recorded level, and the check that it still holds it here.

Zoo experts carry their own evaluations: a zoo run folder keeps ``evaluations.npz`` (the episodes of each periodic
evaluation during training; the saved model is the last one), a Hub repo's model card states the mean and standard
deviation its upload measured (``value: 'X +/- Y'``). An expert that acts here well below that level is seeing
something else than it was trained on: another env version, observation layout or dynamics.
:func:`check_recorded_level` compares the expert-driven episodes that were run anyway (the reference episodes of
the evaluation callback, the demo and the benchmark harness) with that record, and warns once.
"""

from __future__ import annotations

import math
import re
import warnings
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from sb3ext.common.files import read_regular

#: evaluations.npz and model cards are small; anything larger is not read
MAX_RECORD_BYTES = 16 << 20
#: the share of its recorded level an expert must lose before it is called crippled
FAR = 0.2
#: (expert source, env id) pairs already warned about
_WARNED: set[tuple[str, str]] = set()
_CARD_VALUE = re.compile(r"^\s*value:\s*['\"]?\s*(-?[\d.]+(?:e[-+]?\d+)?)\s*\+/-\s*([\d.]+(?:e[-+]?\d+)?)", re.MULTILINE)


@dataclass(frozen=True)
class RecordedLevel:
    """What an expert scored where it was trained.

    :param mean: mean episode return
    :param std: standard deviation of its episode returns
    :param episodes: how many episodes (0 where the source does not say: a model card)
    :param source: where the figure comes from (for messages)
    """

    mean: float
    std: float
    episodes: int
    source: str


def read_evaluations(path: Path) -> RecordedLevel | None:
    """The last evaluation of a zoo ``evaluations.npz`` (read without pickles; None where it holds none)."""
    import io

    data = read_regular(path, MAX_RECORD_BYTES, "an evaluations.npz")
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            results = np.asarray(npz["results"], dtype=np.float64) if "results" in npz.files else None
    except (ValueError, OSError, zipfile.BadZipFile) as exc:
        raise ValueError(f"{path}: not a readable evaluations.npz ({type(exc).__name__}: {exc})") from None
    if results is None or results.ndim < 2 or results.shape[0] == 0:
        return None
    last = results[-1].reshape(-1)
    if last.size == 0 or not np.all(np.isfinite(last)):
        return None
    return RecordedLevel(float(last.mean()), float(last.std()), int(last.size), f"{path} (its last evaluation)")


def read_model_card(path: Path) -> RecordedLevel | None:
    """The ``value: 'X +/- Y'`` of a Hub model card's metrics (None where it states none)."""
    text = read_regular(path, MAX_RECORD_BYTES, "a model card").decode("utf-8", errors="replace")
    match = _CARD_VALUE.search(text)
    if match is None:
        return None
    mean, std = float(match.group(1)), float(match.group(2))
    if not (math.isfinite(mean) and math.isfinite(std)):
        return None
    return RecordedLevel(mean, std, 0, f"{path} (its model card)")


def read_record(path: Path | None) -> RecordedLevel | None:
    """The recorded level in ``path`` (an ``evaluations.npz`` or a model card), None without one."""
    if path is None:
        return None
    return read_evaluations(path) if path.suffix == ".npz" else read_model_card(path)


def beyond_noise(recorded: RecordedLevel, mean: float, std: float, episodes: int) -> bool:
    """Whether a mean return here differs from the recorded one by more than the recorded episodes' spread and by more
    than three standard errors of the difference (two noisy means; a model card's figure counts as one episode)."""
    gap = abs(recorded.mean - mean)
    se_recorded = recorded.std / math.sqrt(max(recorded.episodes, 1))
    se_here = std / math.sqrt(max(episodes, 1))
    return gap > max(recorded.std, 1e-3 * max(1.0, abs(recorded.mean))) and gap > 3 * math.hypot(se_recorded, se_here)


def far_below(recorded: RecordedLevel, returns: Any) -> bool:
    """Whether episode ``returns`` here lie below the recorded level beyond the noise (:func:`beyond_noise`) and by
    more than :data:`FAR` of its size: a crippled expert, not a small drift between env versions."""
    here = np.asarray(returns, dtype=np.float64).reshape(-1)
    if here.size == 0:
        return False
    mean = float(here.mean())
    gap = recorded.mean - mean
    return gap > FAR * abs(recorded.mean) and beyond_noise(recorded, mean, float(here.std()), here.size)


def check_recorded_level(expert: Any, returns: Any, env_id: str) -> str | None:
    """Warn (once per expert and env) when an expert's episodes here are far below its own recorded level.

    :param expert: the :class:`~sb3ext.experts.Expert` that drove the episodes
    :param returns: their returns
    :param env_id: the env they ran in
    :return: the warning's text, or None when the level holds or nothing is recorded
    """
    recorded: RecordedLevel | None = getattr(expert, "recorded", None)
    if recorded is None or not far_below(recorded, returns):
        return None
    here = np.asarray(returns, dtype=np.float64).reshape(-1)
    trained_on = getattr(expert, "env_id", None)
    causes = [
        f"the env version (trained on {trained_on}, acting on {env_id})"
        if trained_on and trained_on != env_id
        else "the env version",
        "the observation layout (a number the expert read differently in training; docs/experts.md)",
        "the dynamics (a physics engine or model change between versions)",
    ]
    message = (
        f"Expert {expert.source} scores {here.mean():.1f} ± {here.std():.1f} over {here.size} episodes on {env_id}, far "
        f"below its recorded {recorded.mean:.1f} ± {recorded.std:.1f} ({recorded.source}); likely causes: " + "; ".join(causes)
    )
    key = (str(expert.source), env_id)
    if key not in _WARNED:
        _WARNED.add(key)
        warnings.warn(message, UserWarning, stacklevel=2)
    return message
