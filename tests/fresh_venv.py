"""Fresh virtual environments holding sb3ext alone (``pip install --no-deps``, wheel or editable), for the tests of
the unmodified rl-zoo3 CLI. Their dependencies come from the test interpreter's site-packages through a path line in
a ``.pth`` file, so a venv takes seconds and needs no network. The fixtures (``wheel_venv``, ``editable_venv``,
``fresh_venv``) are in conftest.py: one venv per test module."""

from __future__ import annotations

import os
import site
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT


class FreshVenv:
    def __init__(self, path: Path, mode: str):
        self.path = path
        self.mode = mode
        self.python = path / "bin" / "python"
        self.site_packages = path / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"

    def run(
        self, *args: str, cwd: Path, timeout: float = 600, check: bool = True, env_vars: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess:
        env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "VIRTUAL_ENV"}}
        env["PYTHONUNBUFFERED"] = "1"
        env.update(env_vars or {})
        result = subprocess.run([str(self.python), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
        if check and result.returncode != 0:
            raise AssertionError(
                f"{' '.join(args)} failed ({result.returncode}):\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
            )
        return result

    def popen(self, *args: str, cwd: Path, stdout) -> subprocess.Popen:
        env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "VIRTUAL_ENV"}}
        env["PYTHONUNBUFFERED"] = "1"
        return subprocess.Popen([str(self.python), *args], cwd=cwd, env=env, stdout=stdout, stderr=subprocess.STDOUT)


def make_fresh_venv(base: Path, mode: str) -> FreshVenv:
    venv = FreshVenv(base / f"venv-{mode}", mode)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv.path)], check=True)
    # Dependencies (and pip/setuptools) from this interpreter's site-packages: a path line, not a site dir,
    # so *its* .pth files (an sb3ext install there included) are not processed.
    deps = [p for p in site.getsitepackages() if Path(p).is_dir()]
    (venv.site_packages / "_sb3ext_test_deps.pth").write_text("\n".join(deps) + "\n")
    target = ["-e", str(ROOT)] if mode == "editable" else [str(ROOT)]
    venv.run("-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index", "-q", *target, cwd=base)
    return venv
