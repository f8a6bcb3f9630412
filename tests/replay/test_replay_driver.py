"""Replay is a driver: a divergence or a recorded stop is its outcome, never a model error or an exception."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

import runner
from runner import ModelReply, ScriptedModel, ToolRegistry, run_agent
from runner._log.limits import Limits
from runner._log.state import RunState
from runner._loop.actions import Action, CallModel, CallTool, Checkpoint, Commit
from runner._loop.core import AgentCore
from runner._loop.sync import drive_until
from runner._replay.replayer import replay
from runner._run.opening import new_run_opening
from runner.errors import RunnerError, ScriptError, StopRun
from runner.events import Event, ModelCalled, RunFinished, StepStarted, ToolFinished, decode_all
from runner.recorder import NullRecorder
from runner.store import RunStore
from tests.loop.helpers import call, reply, weather_registry


class Facts:
    """A recorder that keeps every fact it is told."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def record(self, event: Event) -> None:
        self.events.append(event)

    def sync(self) -> None:
        pass


def _script() -> list[ModelReply | str]:
    return [reply("Let me check.", call("c1", "get_weather", city="Paris")),
            reply("", call("c2", "c_to_f", celsius=21)),
            "It is 69.8 F in Paris."]


def _tools(ran: list[str], celsius: int = 21) -> ToolRegistry:
    registry = ToolRegistry()

    def get_weather(city: str) -> dict[str, int]:
        ran.append("get_weather")
        return {"celsius": celsius}

    def c_to_f(celsius: float) -> float:
        ran.append("c_to_f")
        return celsius * 9 / 5 + 32

    registry.register("get_weather", "Current temperature in a city.",
                      {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
                      get_weather)
    registry.register("c_to_f", "Celsius to Fahrenheit.",
                      {"type": "object", "properties": {"celsius": {"type": "number"}}, "required": ["celsius"]},
                      c_to_f)
    return registry


def _recorded(store: RunStore, tmp_path: Path, **limits: Any) -> Path:
    result = run_agent("Weather in Paris in F?", ScriptedModel(_script()), _tools([]), store=store, **limits)
    return store.export_fixture(result.run_id, tmp_path / "weather.json")


def _model_errors(facts: list[Event]) -> list[ModelCalled]:
    return [fact for fact in facts if isinstance(fact, ModelCalled) and fact.error is not None]


def test_a_divergence_ends_the_replayed_run_without_a_model_error_fact(store: RunStore, tmp_path: Path) -> None:
    path = _recorded(store, tmp_path)
    report = replay(path, _tools([], celsius=31), store=store)
    assert report.divergence is not None
    assert report.divergence.sentence.startswith("at step 2 the result of call c1 (get_weather) differs")
    assert report.result.exception is report.divergence
    replayed = store.get_run(report.result.run_id)
    facts = decode_all(replayed.events, replayed.run_id)
    assert _model_errors(facts) == []
    assert [type(fact).__name__ for fact in facts[-3:]] == ["StepStarted", "StepFinished", "RunFinished"]
    finished = facts[-1]
    assert isinstance(finished, RunFinished)
    assert (finished.status, finished.error) == ("model_error", report.result.error)
    assert replayed.status == "model_error"


def test_a_call_the_recording_never_made_is_logged_not_run_and_ends_the_replay_there(
        store: RunStore, tmp_path: Path) -> None:
    path = _recorded(store, tmp_path, max_tool_calls=1)
    ran: list[str] = []
    facts = Facts()
    report = replay(path, _tools(ran), max_tool_calls=5, recorder=facts)
    assert ran == ["get_weather"]
    assert report.divergence is not None
    assert report.divergence.sentence == (
        "at step 2 the loop was about to run c_to_f (c2), a call the recording did not make; it was not run")
    assert _model_errors(facts.events) == []
    not_run = [fact for fact in facts.events if isinstance(fact, ToolFinished) and fact.call_id == "c2"]
    assert [(fact.ran, fact.refused) for fact in not_run] == [(False, "not_run")]
    assert not [fact for fact in facts.events if isinstance(fact, StepStarted) and fact.step > 2]
    assert (report.result.status, report.result.steps) == ("model_error", 2)


@contextmanager
def runner_errors_raised() -> Iterator[list[BaseException]]:
    """Every ``RunnerError`` raised (on any thread) while the block runs: what user code could catch."""
    raised: list[BaseException] = []

    def trace(frame: FrameType, event: str, arg: Any) -> Callable[..., Any] | None:
        if event == "exception" and isinstance(arg[1], RunnerError):
            raised.append(arg[1])
        return trace

    sys.settrace(trace)
    threading.settrace(trace)
    try:
        yield raised
    finally:
        sys.settrace(None)
        threading.settrace(None)


def test_no_runner_error_is_raised_while_replaying_a_divergence_or_a_recorded_stop(
        store: RunStore, tmp_path: Path) -> None:
    path = _recorded(store, tmp_path)

    def api_down(messages: Any, specs: Any) -> ModelReply:
        raise ConnectionError("api down")

    errored = run_agent("t", api_down, _tools([]), store=store)
    with runner_errors_raised() as raised:
        diverged = replay(path, _tools([], celsius=31))
        stopped = replay(errored.run_id, _tools([]), source_store=store)
        unrecorded = replay(_recorded(store, tmp_path, max_tool_calls=1), _tools([]), max_tool_calls=5)
    assert raised == []
    assert diverged.divergence is not None
    assert (stopped.ok, stopped.result.status) == (True, "model_error")
    assert stopped.result.error == "ConnectionError: api down"
    assert unrecorded.divergence is not None


def test_a_replaying_model_given_to_run_agent_stops_at_a_recorded_stop_with_a_script_error(store: RunStore) -> None:
    script = ScriptedModel(_script()[:1])

    def model(messages: Any, specs: Any) -> ModelReply:
        if script.remaining:
            return script(messages, specs)
        raise ConnectionError("api down")

    recorded = run_agent("t", model, _tools([]), store=store)
    replayed = ScriptedModel.from_run(store, recorded.run_id)
    result = run_agent("t", replayed, _tools([]))
    assert result.status == "model_error"
    assert isinstance(result.exception, ScriptError)
    assert result.error == ("ScriptError: the recording has no reply for model call 2: it stopped there with "
                            "model_error (ConnectionError: api down)")


def test_a_model_raising_the_deprecated_stop_run_ends_with_model_error_like_any_exception() -> None:
    assert runner.StopRun is StopRun
    assert "Deprecated" in (StopRun.__doc__ or "")

    def model(messages: Any, specs: Any) -> ModelReply:
        raise StopRun("deadline", "out of time")

    result = run_agent("t", model, weather_registry())
    assert (result.status, result.error) == ("model_error", "StopRun: out of time")


def _actions(cancel: threading.Event | None) -> list[str]:
    registry = _tools([])
    model = ScriptedModel(_script())
    state = RunState(run_id="r1")
    seen: list[str] = []

    def note(action: Action) -> bool:
        match action:
            case Checkpoint(call=None):
                seen.append("checkpoint")
            case Checkpoint(call=found) if found is not None:
                seen.append(f"checkpoint {found.id}")
            case CallModel():
                seen.append("model")
            case CallTool(call=found):
                seen.append(f"tool {found.id}")
            case Commit():
                pass  # as many as the recorder needs: not what this counts
        return False

    core = AgentCore(model, registry, run_id="r1", limits=Limits(), recorder=NullRecorder(), state=state,
                     opening=new_run_opening("r1", "t", "s", Limits(), registry, model), cancel=cancel)
    result = drive_until(core, note)
    assert result is not None
    assert result.status == "done"
    return seen


def test_the_loop_asks_its_driver_at_checkpoints_only_when_something_can_stop_the_run() -> None:
    assert "checkpoint" not in " ".join(_actions(None))
    assert _actions(threading.Event()) == [
        "checkpoint", "model", "checkpoint c1", "tool c1", "checkpoint", "model", "checkpoint c2", "tool c2",
        "checkpoint", "model"]
