"""``RerunReport`` has the shape ``ReplayReport`` has: ``ok``, ``summary()``, ``to_json()``, ``assert_ok()``."""

from __future__ import annotations

import dataclasses

import pytest

from runner._rerun import html
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
    assert found.summary() == ("1 case: 0 unchanged, 1 changed, 0 regressed (0 unstable); tokens 100 → 120 per "
                               "sample; cost $0.0100 → ≥$0.0200 for 1 candidate")
    assert found.ok is True
    assert found.assert_ok() is found
    assert found.to_json()["summary"]["changed"] == 1


def test_a_regressed_case_fails_assert_ok_naming_its_baseline() -> None:
    found = report(run("c1", status="max_steps", answer=""))
    assert found.ok is False
    with pytest.raises(AssertionError, match=r"^1 case: 0 unchanged, 0 changed, 1 regressed .*; regressed: base$"):
        found.assert_ok()


def test_counts_agree_with_their_nouns_in_the_summary_and_the_html_page() -> None:
    one = dataclasses.replace(report(run("c1")), interrupted=True, left=("base2",))
    two = dataclasses.replace(report(run("c1"), run("c2")), cases=report(run("c1"), run("c2")).cases * 2,
                              interrupted=True, left=("base2", "base3"))
    assert (one.summary()[:8], one.summary()[-16:]) == ("1 case: ", " for 1 candidate")
    assert (two.summary()[:9], two.summary()[-17:]) == ("2 cases: ", " for 4 candidates")
    assert '<p class="dim">1 sample per case;' in html.render(one)
    assert "interrupted: 1 case did not finish" in html.render(one)
    assert '<p class="dim">2 samples per case;' in html.render(two)
    assert "interrupted: 2 cases did not finish" in html.render(two)
