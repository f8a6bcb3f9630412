"""``RerunReport`` has the shape ``ReplayReport`` has: ``ok``, ``summary()``, ``to_json()``, ``assert_ok()``."""

from __future__ import annotations

import pytest

from runner._rerun.diff import Call, RunFigures
from runner._rerun.report import RerunReport, make_case
from runner._rerun.tools import ToolCounts


def run(run_id: str, answer: str = "It is 21 C.", status: str = "done", tokens: int = 100,
        cost_usd: float | None = 0.01, cost_known_usd: float = 0.01) -> RunFigures:
    return RunFigures(run_id, status, answer, None, (Call("get_weather", {"city": "Paris"}),), 2, tokens, cost_usd,
                      cost_known_usd, 1.0)


def report(*candidates: RunFigures) -> RerunReport:
    case = make_case("Weather?", run("base"), candidates, [ToolCounts(1, 0, 0)] * len(candidates))
    return RerunReport("rr1", "gpt-x", "openai", len(candidates), (case,))


def test_the_summary_is_one_line_of_verdicts_tokens_and_cost() -> None:
    found = report(run("c1", answer="It is 22 C.", tokens=120, cost_usd=None, cost_known_usd=0.02))
    assert found.summary() == ("1 case(s): 0 unchanged, 1 changed, 0 regressed (0 unstable); tokens 100 → 120 per "
                               "sample; cost $0.0100 → ≥$0.0200 for 1 candidate(s)")
    assert found.ok is True
    assert found.assert_ok() is found
    assert found.to_json()["summary"]["changed"] == 1


def test_a_regressed_case_fails_assert_ok_naming_its_baseline() -> None:
    found = report(run("c1", status="max_steps", answer=""))
    assert found.ok is False
    with pytest.raises(AssertionError, match=r"^1 case\(s\): 0 unchanged, 0 changed, 1 regressed .*; regressed: base$"):
        found.assert_ok()
