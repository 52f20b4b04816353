"""python -m benchmarks.diagnose promise: an expert's V*(s0) beside the discounted return of its own episodes."""

from __future__ import annotations

import re

import pytest

from benchmarks.diagnose import main
from tests.conftest import shared_expert


def test_the_experts_own_shortfall_is_computed_from_its_promises_and_returns(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["promise", str(shared_expert("sac/Pendulum-v1_1")), "Pendulum-v1", "--episodes", "2"]) == 0
    out = capsys.readouterr().out
    pairs = [(float(v), float(g)) for v, g in re.findall(r"V\*\(s0\) (-?[\d.]+), discounted return (-?[\d.]+)", out)]
    assert len(pairs) == 2
    expected = sum(v - g for v, g in pairs) / sum(abs(v) for v, _ in pairs)
    shortfall = float(re.search(r"shortfall from V\*\(s0\) is ([+-][\d.]+) over 2 episodes", out).group(1))
    assert abs(shortfall - expected) < 0.01, (shortfall, expected, out)
    assert all(g < 0 for _, g in pairs)  # Pendulum's rewards are costs: a discounted return below 0


def test_a_policy_only_expert_is_refused_by_name(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["promise", str(shared_expert("ars/Pendulum-v1_1")), "Pendulum-v1"])
    assert "is policy-only: it has no V* to compare" in capsys.readouterr().err
