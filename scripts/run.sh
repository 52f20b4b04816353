#!/usr/bin/env bash
# sb3ext's two set-up commands (see README.md). Each works on a fresh machine and is idempotent:
#
#   bash scripts/run.sh demo   # set up .venv, then AggreVaTeD on Pendulum-v1 from the shipped expert (offline)
#   bash scripts/run.sh test   # set up .venv, then the default test suite (what .ci/run runs)
#
# Extra arguments go to the demo (`python -m sb3ext.demo --help`) or to pytest (two workers by default;
# SB3EXT_TEST_WORKERS=0 runs the tests in one process).
# Set-up: a virtualenv in .venv (Python 3.11: pybullet ships wheels for 3.11 only), the CPU build of
# torch pinned below (a bare `torch` requirement would pull a multi-GB CUDA build), then sb3ext
# in editable mode with its test, MuJoCo and Atari extras. Override the interpreter with PYTHON=/path/to/python3.11.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

TORCH_PIN="2.13.0"
PYTHON="${PYTHON:-$(command -v python3.11 || command -v python3)}"

setup() {
    if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
        echo "sb3ext needs Python 3.11 (found $("$PYTHON" --version 2>&1) at $PYTHON); set PYTHON=/path/to/python3.11" >&2
        exit 1
    fi
    if [ ! -x .venv/bin/python ]; then
        echo "== creating .venv with $PYTHON"
        "$PYTHON" -m venv .venv
    fi
    local stamp=.venv/.sb3ext-setup
    local wanted
    wanted="$(cat setup.cfg setup.py pyproject.toml scripts/run.sh | sha256sum | cut -c1-16)"
    if [ "$(cat "$stamp" 2>/dev/null)" != "$wanted" ]; then
        echo "== installing torch==$TORCH_PIN (CPU) and sb3ext[tests,mujoco,atari]"
        .venv/bin/python -m pip install -q --upgrade "pip>=23"
        .venv/bin/python -m pip install -q "torch==$TORCH_PIN"
        .venv/bin/python -m pip install -q -e ".[tests,mujoco,atari]"
        echo "$wanted" > "$stamp"
    fi
}

command="${1:-}"
shift || true
case "$command" in
    demo)
        setup
        exec .venv/bin/python -m sb3ext.demo "$@"
        ;;
    test)
        setup
        # -p no:cacheprovider: CI runs in a fresh clone; keep the tree clean. Two workers, one test file each at a
        # time (module fixtures are built once); SB3EXT_TEST_WORKERS=0 runs in this process.
        exec .venv/bin/python -m pytest -p no:cacheprovider -n "${SB3EXT_TEST_WORKERS:-2}" --dist loadfile "$@"
        ;;
    setup)
        setup
        ;;
    *)
        echo "usage: bash scripts/run.sh {demo|test|setup} [args...]" >&2
        exit 2
        ;;
esac
