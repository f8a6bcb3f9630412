"""The diff's rules (changed, unstable, regressed, thresholds, the tool-call diff) and which recorded calls a
rerun serves, on plain values and facts."""

from __future__ import annotations

import pytest

from runner._rerun.diff import Call, RunFigures, calls_diff, compare
from runner._rerun.recording import call_key, recorded_calls
from runner.events import Event, MessageAppended, ToolFinished


def run(status: str = "done", answer: str | None = "It is 21 C.", calls: tuple[Call, ...] = (), steps: int = 2,
        tokens: int = 100, run_id: str = "r") -> RunFigures:
    return RunFigures(run_id, status, answer, None, calls, steps, tokens, None, 0.0, 1.0)


PARIS = Call("get_weather", {"city": "Paris"})
OSLO = Call("get_weather", {"city": "Oslo"})


def test_a_change_every_sample_agrees_on_is_changed_not_unstable() -> None:
    verdict = compare(run(), [run(answer="It is 22 C."), run(answer="It is 22 C.")])
    assert verdict == (("answer",), (), False)


def test_a_field_the_samples_disagree_on_is_unstable_too() -> None:
    verdict = compare(run(), [run(answer="It is 22 C."), run(), run(answer="Warm.")])
    assert verdict == (("answer",), ("answer",), False)


def test_answers_differing_only_in_whitespace_are_the_same() -> None:
    assert compare(run(), [run(answer="  It is\n21   C. ")]).changed == ()


def test_tokens_change_past_a_fifth_of_the_baselines_and_steps_at_any_difference() -> None:
    assert compare(run(), [run(tokens=120), run(tokens=80)]).changed == ()
    assert compare(run(), [run(tokens=121)]).changed == ("tokens",)
    assert compare(run(), [run(tokens=81), run(tokens=119)]) == ((), ("tokens",), False)
    assert compare(run(), [run(steps=3)]).changed == ("steps",)


@pytest.mark.parametrize(("baseline", "samples", "regressed"), [
    ("done", ["step_limit"], True),
    ("done", ["step_limit", "done", "model_error"], True),
    ("done", ["step_limit", "done"], False),
    ("done", ["done", "done", "step_limit"], False),
    ("step_limit", ["step_limit"], False),
    ("model_error", ["done"], False),
])
def test_a_case_regressed_when_its_baseline_was_done_and_most_samples_are_not(
        baseline: str, samples: list[str], regressed: bool) -> None:
    verdict = compare(run(baseline), [run(status) for status in samples])
    assert verdict.regressed is regressed
    assert ("status" in verdict.changed) is (set(samples) != {baseline})


def test_the_tool_call_diff_shows_added_removed_reordered_and_changed_arguments() -> None:
    assert calls_diff((PARIS, OSLO), (PARIS, OSLO)) == []
    assert calls_diff((PARIS,), (PARIS, OSLO)) == ['  get_weather {"city": "Paris"}', '+ get_weather {"city": "Oslo"}']
    assert calls_diff((PARIS, OSLO), (OSLO, PARIS)) == ['+ get_weather {"city": "Oslo"}',
                                                        '  get_weather {"city": "Paris"}',
                                                        '- get_weather {"city": "Oslo"}']
    assert calls_diff((Call("c_to_f", {"celsius": 21}),), (Call("c_to_f", {"celsius": 21.0}),)) == []
    assert calls_diff((Call("c_to_f", {"celsius": 21}),), (Call("c_to_f", {"celsius": 21.5}),)) == [
        '- c_to_f {"celsius": 21}', '+ c_to_f {"celsius": 21.5}']
    assert compare(run(calls=(PARIS,)), [run(calls=(OSLO,))]).changed == ("tool_calls",)


def test_calls_are_the_same_when_their_arguments_are_the_same_json_values() -> None:
    assert call_key("f", {"a": 1, "b": [1.0, {"c": 2}]}) == call_key("f", {"b": [1, {"c": 2.0}], "a": 1.0})
    assert call_key("f", {"a": 1}) != call_key("f", {"a": True})
    assert call_key("f", {"a": 1}) != call_key("g", {"a": 1})
    assert call_key("f", {"a": "1"}) != call_key("f", {"a": 1})
    assert call_key("f", {"a": float("nan")}) is None


def test_a_rerun_serves_results_errors_and_denials_but_no_refusal_and_no_abandoned_call() -> None:
    def asked(*calls: tuple[str, str, object]) -> MessageAppended:
        return MessageAppended(step=1, index=2, message={"role": "assistant", "content": "", "tool_calls": [
            {"id": i, "name": n, "args": a} for i, n, a in calls]})

    def finished(call_id: str, name: str, observation: str, refused: str | None = None) -> ToolFinished:
        return ToolFinished(step=1, call_id=call_id, name=name, observation=observation,
                            ok=not observation.startswith("ERROR:"), ran=refused is None, refused=refused)

    facts: list[Event] = [
        asked(("c1", "get_weather", {"city": "Paris"}), ("c2", "get_weather", {"city": 3}), ("c3", "pay", {"to": "a"}),
              ("c4", "slow", {}), ("c5", "get_weather", {"city": "Lima"}), ("c6", "get_weather", {"city": "Paris"})),
        finished("c1", "get_weather", '{"celsius": 21}'),
        finished("c2", "get_weather", "ERROR: 3 is not of type 'string'", "invalid_args"),
        finished("c3", "pay", "ERROR: the call to pay was denied by the approver: no; do not retry it", "denied"),
        finished("c4", "slow", "ERROR: slow was abandoned while it ran (deadline); its outcome is unknown"),
        finished("c5", "get_weather", "ERROR: get_weather failed: KeyError: 'Lima'"),
        finished("c6", "get_weather", '{"celsius": 22}'),
    ]
    served = [(call.name, call.observation) for call in recorded_calls(facts)]
    assert served == [("get_weather", '{"celsius": 21}'),
                      ("pay", "ERROR: the call to pay was denied by the approver: no; do not retry it"),
                      ("get_weather", "ERROR: get_weather failed: KeyError: 'Lima'"),
                      ("get_weather", '{"celsius": 22}')]
