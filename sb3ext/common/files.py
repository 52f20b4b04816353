"""Opening untrusted files (L0): regular files only, and reads capped by the bytes actually read.

A named pipe blocks a reader forever and a character device such as ``/dev/zero`` never ends, yet both report a
size of 0; a directory raises a bare ``IsADirectoryError``. Every file sb3ext reads from an expert or a learner's
checkpoint (the model zip, ``config.yml``, ``vecnormalize.pkl``) goes through :func:`open_regular`, which refuses
anything but a regular file with one line, before any open or read.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

from sb3ext.common.serialization import UnsafeObjectError

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a named pipe"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _refuse_unless_regular(path: Path, mode: int, what: str) -> None:
    if not stat.S_ISREG(mode):
        kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
        raise UnsafeObjectError(f"{path}: {kind}; {what} must be a regular file")


def open_regular(path: str | os.PathLike[str], what: str) -> BinaryIO:
    """``path`` opened for binary reading if it is a regular file (symbolic links followed); pipes, devices,
    sockets and directories are refused before it is opened. Opened without blocking and checked again after the
    open, so a file swapped for a pipe in between is refused too.

    :param what: what the file is, for the message (``"a checkpoint"``)
    """
    path = Path(path)
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        raise ValueError(f"{path}: cannot be read ({exc.strerror})") from None
    _refuse_unless_regular(path, mode, what)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        raise ValueError(f"{path}: cannot be read ({exc.strerror})") from None
    try:
        _refuse_unless_regular(path, os.fstat(fd).st_mode, what)
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb")


def read_regular(path: str | os.PathLike[str], limit: int, what: str) -> bytes:
    """The bytes of a regular file, refusing one that holds more than ``limit`` (counted as read, not as declared)."""
    with open_regular(path, what) as handle:
        try:
            data = handle.read(limit + 1)
        except OSError as exc:
            raise ValueError(f"{path}: cannot be read ({exc.strerror})") from None
    if len(data) > limit:
        raise UnsafeObjectError(f"{path}: more than {limit} bytes; at most {limit} are read from {what}")
    return data
