"""The interpreter-start hook: idempotent, lazy, and never breaks the zoo."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT


def run_python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)


def test_install_twice_keeps_one_finder_and_registration_is_idempotent() -> None:
    result = run_python(
        "import sys, sb3ext._hook as h; h.install(); h.install(); "
        "print(sum(type(f).__name__ == 'ZooImportHook' for f in sys.meta_path)); "
        "import sb3ext.zoo as z; from rl_zoo3 import utils; z.register(); z.register(); "
        "from rl_zoo3.exp_manager import ExperimentManager as E; "
        "print(utils.ALGOS['aggrevated'].__name__, E.__init__._sb3ext_wrapped)"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["1", "AggreVaTeD", "True"]


def test_a_failing_registration_warns_and_the_zoo_still_works() -> None:
    result = run_python(
        "import sb3ext.zoo as z\n"
        "def broken(module): raise RuntimeError('boom')\n"
        "z.on_zoo_import = broken\n"
        "import sb3ext._hook\n"
        "from rl_zoo3.utils import ALGOS\n"
        "print('ppo' in ALGOS, 'aggrevated' in ALGOS)\n"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "False"]
    assert "sb3ext could not register itself in rl_zoo3.utils: RuntimeError('boom')" in result.stderr


def test_the_zoo_uses_sb3ext_yaml_only_for_sb3ext_algorithms() -> None:
    result = run_python(
        "import argparse, sb3ext._hook\n"
        "from rl_zoo3.exp_manager import ExperimentManager\n"
        "args = argparse.Namespace()\n"
        "for algo in ('aggrevated', 'ppo'):\n"
        "    m = ExperimentManager(args, algo, 'Pendulum-v1', 'logs', n_timesteps=1)\n"
        "    print(m.config)\n"
        "m = ExperimentManager(args, 'aggrevated', 'Pendulum-v1', 'logs', config='mine.yml')\n"
        "print(m.config)\n"
    )
    assert result.returncode == 0, result.stderr
    ours, zoo, explicit = result.stdout.split()
    assert ours.endswith("hyperparams/aggrevated.yml") and "rl_zoo3" not in ours
    assert zoo.endswith("rl_zoo3/hyperparams/ppo.yml")
    assert explicit == "mine.yml"


def test_trial_id_zero_is_honoured_and_the_console_script_works() -> None:
    result = run_python(
        "import argparse, sb3ext._hook\n"
        "from rl_zoo3.exp_manager import ExperimentManager\n"
        "m = ExperimentManager(argparse.Namespace(), 'ppo', 'Pendulum-v1', 'logs', n_timesteps=1, trial_id=0)\n"
        "print(bool(m.trial_id), m.trial_id == 0, [10, 11][m.trial_id])\n"
        "m = ExperimentManager(argparse.Namespace(), 'ppo', 'Pendulum-v1', 'logs', n_timesteps=1)\n"
        "print(m.trial_id)\n"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "True", "10", "None"]
    cli = subprocess.run(
        [sys.executable, "-m", "rl_zoo3.cli", "train", "--help"], capture_output=True, text=True, cwd=ROOT, timeout=300
    )
    assert cli.returncode == 0, cli.stderr
    assert "aggrevated" in cli.stdout
