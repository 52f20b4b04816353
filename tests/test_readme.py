"""The README's code blocks, each run as written: the quick start's from an empty folder, the two commands from the
checkout (they are the checkout's). Trainings are shortened by their step count only."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

README = ROOT / "README.md"
#: how the tests shorten a block's trainings: (as written, as run)
SHORTER = [(" -n 4000 ", " -n 512 "), ("model.learn(4000)", "model.learn(512)"), (" -n 1000", " -n 50")]


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README.read_text(), flags=re.DOTALL)


def shortened(code: str) -> str:
    for written, run in SHORTER:
        code = code.replace(written, run)
    return code


def run(command: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HF_HUB_OFFLINE": "1",
           "OMP_NUM_THREADS": "1", "PYTHONPATH": ""}  # fmt: skip
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=600, env=env)


def test_the_readme_is_short_and_its_tables_cells_are_short() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) <= 160
    cells = [cell.strip() for line in lines if line.startswith("|") for cell in line.strip("|").split("|")]
    assert cells and max(len(cell) for cell in cells) <= 100
    assert len(blocks("bash")) == 2 and len(blocks("python")) == 1  # the two commands, the quick start's two


def test_the_two_commands_are_what_ci_runs_and_the_demo_runs(tmp_path: Path) -> None:
    demo, test = blocks("bash")[0].strip().splitlines()
    assert test.split("#")[0].strip() in (ROOT / ".ci" / "run").read_text()  # CI runs it: not run again here
    out = tmp_path / "demo_output"
    command = demo.split("#")[0].split() + ["--timesteps", "512", "--eval-episodes", "1", "--out", str(out)]
    done = run(command, ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (out / "aggrevated_Pendulum-v1.csv").is_file() and "gap closed" in done.stdout


@pytest.mark.parametrize("language", ["bash", "python"])
def test_the_quick_start_runs_as_written_from_an_empty_folder(language: str, tmp_path: Path) -> None:
    code = shortened(blocks(language)[-1])
    done = run(["bash", "-e", "-c", code] if language == "bash" else [sys.executable, "-c", code], tmp_path)
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-3000:])
    if language == "bash":  # trained through the zoo, then replayed
        assert (tmp_path / "logs" / "aggrevated" / "Pendulum-v1_1" / "Pendulum-v1.zip").is_file()
        assert "Loading logs/aggrevated/Pendulum-v1_1/Pendulum-v1.zip" in done.stdout
    else:
        assert (tmp_path / "aggrevated_pendulum.zip").is_file()


REFERENCE = ROOT / "docs" / "algos" / "aggrevated.md"


@pytest.mark.parametrize("index", [0, 1])
def test_the_references_python_examples_run_from_an_empty_folder(index: int, tmp_path: Path) -> None:
    text = REFERENCE.read_text()
    assert len(text.splitlines()) <= 300
    code = re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)[index]
    code = code.replace(".learn(4000)", ".learn(512)").replace(".learn(2_000)", ".learn(256)")
    done = run([sys.executable, "-c", code], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
