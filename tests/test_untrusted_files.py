"""Only regular files are read from an expert's folder: a named pipe, a device or a directory in place of the
model zip, ``config.yml`` or ``vecnormalize.pkl`` is refused with one line before any open or read (a pipe would
block the reader forever, ``/dev/zero`` never ends; both report a size of 0)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sb3ext.common.files import open_regular, read_regular
from sb3ext.common.serialization import UnsafeObjectError
from tests.conftest import ROOT, shared_expert

needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes need a POSIX system")


@needs_fifo
def test_open_regular_names_what_it_refuses(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "folder").mkdir()
    (tmp_path / "big").write_bytes(b"x" * 101)
    for path, kind in ((tmp_path / "pipe", "a named pipe"), (tmp_path / "folder", "a directory")):
        with pytest.raises(UnsafeObjectError, match=f"{path}: {kind}; a checkpoint must be a regular file"):
            open_regular(path, "a checkpoint")
    if Path("/dev/zero").exists():
        with pytest.raises(UnsafeObjectError, match="a character device"):
            read_regular("/dev/zero", 100, "a zoo config.yml")
    with pytest.raises(UnsafeObjectError, match="more than 100 bytes"):  # counted as read
        read_regular(tmp_path / "big", 100, "a zoo config.yml")
    assert read_regular(tmp_path / "big", 101, "a zoo config.yml") == b"x" * 101
    with pytest.raises(ValueError, match="cannot be read"):
        open_regular(tmp_path / "missing", "a checkpoint")


LOAD = """
import sys
sys.path.insert(0, {root!r})
from sb3ext.common.serialization import UnsafeObjectError
from sb3ext.experts import load_expert
for folder in {folders!r}:
    try:
        load_expert(folder, env_id="BipedalWalker-v3")
        print("LOADED")
    except (ValueError, UnsafeObjectError) as exc:  # the two kinds of refusal
        print("REFUSED " + type(exc).__name__ + ": " + str(exc))
"""

SWAPS = [
    ("BipedalWalker-v3/config.yml", "a named pipe"),
    ("BipedalWalker-v3/vecnormalize.pkl", "a named pipe"),
    ("BipedalWalker-v3.zip", "a named pipe"),
    ("BipedalWalker-v3/vecnormalize.pkl", "a directory"),
    (None, "the untouched folder (control)"),
]


@needs_fifo
def test_an_expert_folder_with_a_pipe_or_directory_is_refused_at_once(tmp_path: Path) -> None:
    folders = []
    for index, (swapped, kind) in enumerate(SWAPS):
        folder = tmp_path / str(index) / "BipedalWalker-v3_1"
        shutil.copytree(shared_expert("ppo/BipedalWalker-v3_1"), folder)
        if swapped is not None:
            (folder / swapped).unlink()
            os.mkfifo(folder / swapped) if kind == "a named pipe" else (folder / swapped).mkdir()
        folders.append(str(folder))
    code = LOAD.format(root=str(ROOT), folders=folders)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)  # a hang fails here
    lines = done.stdout.splitlines()
    assert len(lines) == len(SWAPS), done.stdout + done.stderr
    for (swapped, kind), folder, line in zip(SWAPS, folders, lines):
        if swapped is None:
            assert line == "LOADED", line
        else:
            assert line == f"REFUSED UnsafeObjectError: {Path(folder) / swapped}: {kind}; " + line.split("; ", 1)[-1], line
            assert "must be a regular file" in line
