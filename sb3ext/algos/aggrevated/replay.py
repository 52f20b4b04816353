"""The stage's replay buffer on disk as plain arrays: written and read without pickle.

SB3's ``save_replay_buffer`` pickles the buffer object, and its ``load_replay_buffer`` unpickles whatever the file
holds. Here the file is an ``.npz`` (whatever its name: the zoo asks for ``replay_buffer.pkl``) of the filled part
of each array, its position and whether it wrapped. Reading checks each entry's header (name, shape, dtype) against
the buffer it goes into before reading it, and never unpickles (``allow_pickle=False``).
"""

from __future__ import annotations

import os
import zipfile
from typing import Any

import numpy as np
from stable_baselines3.common.buffers import DictReplayBuffer, ReplayBuffer

from sb3ext.common.files import open_regular
from sb3ext.common.serialization import UnsafeObjectError


def _arrays(buffer: ReplayBuffer) -> dict[str, np.ndarray]:
    """The buffer's arrays by entry name (a ``Dict`` observation's parts as ``observations.<key>``)."""
    arrays: dict[str, np.ndarray] = {}
    for field in ("observations", "next_observations"):
        value: Any = getattr(buffer, field, None)
        if isinstance(value, dict):
            arrays.update({f"{field}.{key}": part for key, part in value.items()})
        elif value is not None and not (field == "next_observations" and buffer.optimize_memory_usage):
            arrays[field] = value
    for field in ("actions", "rewards", "dones", "timeouts"):
        arrays[field] = getattr(buffer, field)
    return arrays


def save_replay(buffer: ReplayBuffer, path: str | os.PathLike[str]) -> None:
    """Write the filled part of ``buffer`` to ``path`` (all of it once it has wrapped)."""
    filled = buffer.buffer_size if buffer.full else buffer.pos
    entries = {name: array[:filled] for name, array in _arrays(buffer).items()}
    with open(path, "wb") as handle:
        np.savez(handle, **{"pos": np.int64(buffer.pos), "full": np.bool_(buffer.full), **entries})  # type: ignore[arg-type]


def load_replay(buffer: ReplayBuffer, path: str | os.PathLike[str], truncate_last_traj: bool = True) -> None:
    """Fill ``buffer`` from a file written by :func:`save_replay`; the file must fit it (entries, shapes, dtypes).

    :param truncate_last_traj: accepted for SB3's signature; as SB3's plain replay buffers, these keep each stored
        transition's own next observation, so there is no trajectory to cut
    """
    if not isinstance(buffer, (ReplayBuffer, DictReplayBuffer)):
        raise TypeError(f"load_replay fills SB3's ReplayBuffer and DictReplayBuffer, not a {type(buffer).__name__}")
    targets = _arrays(buffer)
    with open_regular(path, "a replay buffer") as handle, zipfile.ZipFile(handle) as archive:
        names = {info.filename[: -len(".npy")]: info for info in archive.infolist() if info.filename.endswith(".npy")}
        expected = {*targets, "pos", "full"}
        if set(names) != expected or len(archive.infolist()) != len(expected):
            raise UnsafeObjectError(
                f"{path}: entries {sorted(info.filename for info in archive.infolist())[:12]}; a replay of this model "
                f"holds exactly {sorted(f'{n}.npy' for n in expected)}"
            )
        pos = int(_read(archive, names["pos"], (), np.dtype(np.int64), path))
        full = bool(_read(archive, names["full"], (), np.dtype(np.bool_), path))
        if not 0 <= pos < buffer.buffer_size:
            raise ValueError(f"{path}: pos {pos}; allowed: an integer in [0, {buffer.buffer_size - 1}]")
        filled = buffer.buffer_size if full else pos
        for name, target in targets.items():
            target[:filled] = _read(archive, names[name], (filled, *target.shape[1:]), target.dtype, path)
    buffer.pos, buffer.full = pos, full


def _read(archive: zipfile.ZipFile, info: zipfile.ZipInfo, shape: tuple[int, ...], dtype: np.dtype, path: Any) -> np.ndarray:
    """One entry, its header checked before its data is read."""
    with archive.open(info) as entry:
        version = np.lib.format.read_magic(entry)
        header = (np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0)(entry)
        found_shape, fortran, found_dtype = header
        if tuple(found_shape) != tuple(shape) or found_dtype != dtype or fortran:
            raise ValueError(
                f"{path} [{info.filename}]: shape {tuple(found_shape)} of {found_dtype}; this model's replay needs "
                f"{tuple(shape)} of {dtype}"
            )
        data = entry.read(int(np.prod(shape, dtype=np.int64)) * dtype.itemsize)
    array = np.frombuffer(data, dtype=dtype)
    if array.size != int(np.prod(shape, dtype=np.int64)):
        raise ValueError(f"{path} [{info.filename}]: ends early")
    return array.reshape(shape)
