"""Shared fixtures: the real zoo experts in ../shared/experts and small toy experts."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from tests.fresh_venv import FreshVenv

# Every subprocess a test starts (the zoo CLI, fresh venvs, tuning workers) inherits this: one torch/OpenMP thread
# each, as the tests' own processes have (`_single_thread`). With pytest-xdist's workers beside them, more threads than
# cores slowed the zoo-CLI tests up to 6 times (a 32 s test took 192 s on 2 cores).
for _threads in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_threads, "1")

ROOT = Path(__file__).resolve().parent.parent
SHARED_EXPERTS = Path(os.environ.get("SB3EXT_SHARED_EXPERTS", ROOT.parent / "shared" / "experts"))
#: ``SB3EXT_STRICT=1`` (set by .ci/run): what a test needs (the shared experts, PostgreSQL) must be there; a test
#: that would skip for want of it fails instead
STRICT = os.environ.get("SB3EXT_STRICT", "") == "1"


def missing(reason: str) -> None:
    """Skip the test for want of ``reason``, or fail it under ``SB3EXT_STRICT=1``."""
    if STRICT:
        pytest.fail(f"{reason} (SB3EXT_STRICT=1: required)", pytrace=False)
    pytest.skip(reason)


def needs(module: str) -> None:
    """Skip (or, under ``SB3EXT_STRICT=1``, fail) when ``module`` cannot be imported (an optional extra)."""
    import importlib.util

    if importlib.util.find_spec(module) is None:
        missing(f"{module} is not installed (pip install 'sb3ext[{module}]')")


def shared_expert(relative: str) -> Path:
    """Path of a real zoo expert in ../shared/experts (skips the test with a clear reason if absent)."""
    path = SHARED_EXPERTS / relative
    if not path.exists():
        missing(f"real zoo expert {relative} not found under {SHARED_EXPERTS} (set SB3EXT_SHARED_EXPERTS)")
    return path


def pytest_sessionstart(session) -> None:
    if STRICT and not SHARED_EXPERTS.is_dir():
        raise pytest.UsageError(f"SB3EXT_STRICT=1 and no shared experts at {SHARED_EXPERTS}: the suite needs ../shared")


@pytest.fixture(autouse=True)
def _single_thread() -> None:
    import torch as th

    th.set_num_threads(1)


def pytest_collection_modifyitems(config, items) -> None:
    """``SB3EXT_TEST_ORDER=reverse`` or ``random[:SEED]`` reorders the suite, to check that no test leans on another."""
    order = os.environ.get("SB3EXT_TEST_ORDER", "")
    if order == "reverse":
        items.reverse()
    elif order.startswith("random"):
        import random

        random.Random(int(order.partition(":")[2] or 0)).shuffle(items)
    elif order:
        raise pytest.UsageError(f"SB3EXT_TEST_ORDER={order!r}; allowed: reverse, random, random:<seed>")


# fresh venvs with sb3ext alone, for the zoo CLI tests (tests/fresh_venv.py): one per test module
@pytest.fixture(scope="module")
def wheel_venv(tmp_path_factory) -> FreshVenv:
    from tests.fresh_venv import make_fresh_venv

    return make_fresh_venv(tmp_path_factory.mktemp("fresh-wheel"), "wheel")


@pytest.fixture(scope="module")
def editable_venv(tmp_path_factory) -> FreshVenv:
    from tests.fresh_venv import make_fresh_venv

    return make_fresh_venv(tmp_path_factory.mktemp("fresh-editable"), "editable")


@pytest.fixture(params=["wheel", "editable"])
def fresh_venv(request) -> FreshVenv:
    """Both install modes: ``pip install .`` and ``pip install -e .``."""
    return request.getfixturevalue(f"{request.param}_venv")
