"""A throw-away PostgreSQL server from Debian's packages, for the tests and the tuning script.

``python scripts/pg_server.py install`` installs Debian's ``postgresql`` package if it is missing (as root, with
apt-get; ``.ci/run`` calls it before the tests). :func:`postgres_binaries` only finds ``initdb``/``pg_ctl``: it
never installs. :func:`running_server` starts a private cluster on a free local port with trust authentication
and stops it afterwards. Nothing touches the system's own clusters.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path


class PostgresUnavailable(RuntimeError):
    """PostgreSQL is not installed and cannot be installed here (the reason is the message)."""


def _find_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def _apt_install() -> None:
    if os.geteuid() != 0:
        raise PostgresUnavailable("PostgreSQL is not installed and this user is not root (apt-get install postgresql)")
    if shutil.which("apt-get") is None:
        raise PostgresUnavailable("PostgreSQL is not installed and there is no apt-get to install it")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "-q", "--no-install-recommends", "postgresql"]
    result = subprocess.run(install, env=env, capture_output=True, text=True, timeout=900)
    if result.returncode != 0:  # stale package lists on a fresh machine
        subprocess.run(["apt-get", "update", "-q"], env=env, capture_output=True, text=True, timeout=900)
        result = subprocess.run(install, env=env, capture_output=True, text=True, timeout=900)
    if result.returncode != 0:
        raise PostgresUnavailable(f"apt-get install postgresql failed: {result.stderr.strip()[-500:]}")


def postgres_binaries() -> Path:
    """Folder holding ``initdb`` and ``pg_ctl`` (``python scripts/pg_server.py install`` installs them)."""
    folder = _find_bin()
    if folder is None:
        raise PostgresUnavailable("PostgreSQL is not installed (python scripts/pg_server.py install, as root)")
    if not (folder / "pg_ctl").exists():
        raise PostgresUnavailable(f"initdb found in {folder}, but no pg_ctl beside it")
    return folder


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def running_server() -> Iterator[str]:
    """Start a private PostgreSQL cluster; yields its SQLAlchemy URL (psycopg2 driver)."""
    folder = postgres_binaries()
    data = Path(tempfile.mkdtemp(prefix="sb3ext-pg-"))
    prefix: list[str] = []
    if os.geteuid() == 0:  # the server refuses to run as root: run it as the package's `postgres` user
        shutil.chown(data, user="postgres", group="postgres")
        prefix = ["runuser", "-u", "postgres", "--"]
    port = _free_port()

    def run(*command: str) -> None:
        result = subprocess.run([*prefix, *command], capture_output=True, text=True, timeout=120)
        if result.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed:\n{result.stdout}\n{result.stderr}")

    cluster = data / "cluster"
    run(str(folder / "initdb"), "-D", str(cluster), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
    options = f"-p {port} -k {data} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=50"
    run(str(folder / "pg_ctl"), "-D", str(cluster), "-l", str(data / "server.log"), "-o", options, "-w", "start")
    try:
        yield f"postgresql+psycopg2://postgres@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run([*prefix, str(folder / "pg_ctl"), "-D", str(cluster), "-m", "immediate", "stop"], capture_output=True)
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    import sys

    if sys.argv[1:] != ["install"]:
        raise SystemExit("usage: python scripts/pg_server.py install")
    if _find_bin() is None:
        _apt_install()
    print(f"PostgreSQL binaries: {postgres_binaries()}")
