"""The seeded fuzz campaign over expert loading (``tests/fuzz_experts.py``): mutants of the shipped and shared zoo
experts at every layer, each loaded in a worker process under a memory cap and a per-case time limit. No unclear
error, no wrong (non-finite) load, no crash, hang or memory blow-up. The default suite runs a quick slice; ``-m slow``
runs 1,000 mutants on each of two seeds."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import SHARED_EXPERTS, missing
from tests.fuzz_experts import FAILURES, LAYERS, run


def campaign(tmp_path: Path, cases: int, seed: int) -> dict:
    if not SHARED_EXPERTS.is_dir():
        missing(f"the shared zoo experts are not at {SHARED_EXPERTS}")
    report = run(cases, seed, tmp_path, SHARED_EXPERTS)
    counts = report["counts"]
    assert {k: counts.get(k, 0) for k in FAILURES} == dict.fromkeys(FAILURES, 0), report["examples"]
    assert counts.get("refused", 0) + counts.get("loaded", 0) == cases
    for layer in LAYERS:  # every layer was tried, and refused something
        assert sum(v for k, v in counts.items() if k.startswith(f"layer:{layer}:")) > 0, layer
    return report


def test_fuzz_quick_slice(tmp_path: Path) -> None:
    report = campaign(tmp_path, 120, seed=7)
    assert report["counts"]["refused"] > 20 and report["counts"]["loaded"] > 20


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_fuzz_thousand_mutants(tmp_path: Path, seed: int) -> None:
    campaign(tmp_path, 1000, seed)
