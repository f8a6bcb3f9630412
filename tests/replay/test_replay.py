"""Replay: a stored run becomes a regression test, and any drift is named precisely."""

from __future__ import annotations

import errno
import json
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from runner import ModelReply, ScriptedModel, ToolCall, ToolRegistry, Usage, resume, run_agent
from runner._replay.fixture import fixture_from_run, load_fixture
from runner._replay.replayer import replay
from runner._replay.scripted import ReplayModel
from runner.errors import FixtureError, ReplayDivergence
from runner.store import RunStore
from tests.loop.helpers import call, reply, weather_registry


def _weather_script() -> list[ModelReply | str]:
    return [reply("Let me check.", call("c1", "get_weather", city="Paris")),
            reply("", call("c2", "c_to_f", celsius=21)),
            "It is 69.8 F in Paris."]


def _recorded(store: RunStore, tmp_path: Path, **kwargs: Any) -> tuple[str, Path]:
    result = run_agent("Weather in Paris in F?", ScriptedModel(_weather_script()), weather_registry(), store=store,
                       **kwargs)
    path = tmp_path / "fixtures" / "weather.json"
    fixture_from_run(store.get_run(result.run_id)).write(path)
    return result.run_id, path


def _registry_with(weather: dict[str, int]) -> ToolRegistry:
    registry = ToolRegistry()
    registry.register("get_weather", "Current temperature in a city.",
                      {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
                      lambda city: {"celsius": weather[city]})
    registry.register("c_to_f", "Celsius to Fahrenheit.",
                      {"type": "object", "properties": {"celsius": {"type": "number"}}, "required": ["celsius"]},
                      lambda celsius: celsius * 9 / 5 + 32)
    return registry


def test_record_export_replay_passes_without_a_database(store: RunStore, tmp_path: Path) -> None:
    _, path = _recorded(store, tmp_path)
    store.close()
    report = replay(path, weather_registry())
    assert report.ok is True
    assert report.divergence is None
    assert (report.result.status, report.result.answer) == ("done", "It is 69.8 F in Paris.")
    assert report.same_status
    assert report.same_answer
    assert report.explain() == "replay matched the recording (done, 3 steps)"
    assert report.assert_ok() is report


def test_changed_tool_output_diverges_naming_step_call_and_both_values(store: RunStore, tmp_path: Path) -> None:
    _, path = _recorded(store, tmp_path)
    report = replay(path, _registry_with({"Paris": 31}))
    assert report.ok is False
    divergence = report.divergence
    assert isinstance(divergence, ReplayDivergence)
    assert divergence.sentence == (
        "at step 2 the result of call c1 (get_weather) differs: recorded '{\"celsius\": 21}', "
        "got '{\"celsius\": 31}'")
    assert (divergence.step, divergence.index, divergence.field) == (2, 3, "content")
    assert divergence.diff.splitlines() == ["--- recorded", "+++ replayed", "@@ -1,3 +1,3 @@", " {",
                                           '- "celsius": 21', '+ "celsius": 31', " }"]
    assert report.result.status == "model_error"
    with pytest.raises(AssertionError, match="at step 2 the result of call c1"):
        report.assert_ok()


def test_removed_tool_diverges_at_step_1_naming_the_removed_tool(store: RunStore, tmp_path: Path) -> None:
    _, path = _recorded(store, tmp_path)
    registry = ToolRegistry()
    registry.register("c_to_f", "Celsius to Fahrenheit.",
                      {"type": "object", "properties": {"celsius": {"type": "number"}}, "required": ["celsius"]},
                      lambda celsius: 0)
    report = replay(path, registry)
    assert report.divergence is not None
    assert report.divergence.sentence == (
        "at step 1 the tools shown to the model differ from the recording: tool 'get_weather' was removed")
    lenient = replay(path, registry, strict=False)
    assert lenient.differences[1].sentence == (
        "at step 2 the result of call c1 (get_weather) differs: recorded '{\"celsius\": 21}', "
        "got \"ERROR: unknown tool 'get_weather'. Available tools: ['c_to_f']\"")


def test_lenient_replay_plays_through_and_collects_every_difference(store: RunStore, tmp_path: Path) -> None:
    _, path = _recorded(store, tmp_path)
    report = replay(path, _registry_with({"Paris": 31}), strict=False)
    assert report.divergence is None
    assert report.result.status == "done"
    assert [d.step for d in report.differences] == [2, 3]
    assert report.differences[1].sentence.startswith("at step 3 the result of call c1 (get_weather) differs")


@pytest.mark.parametrize(("limits", "status"), [
    ({"max_steps": 2}, "step_limit"),
    ({"token_budget": 500}, "token_budget"),
    ({"max_tool_calls": 1}, "tool_budget"),
])
def test_a_run_stopped_by_a_limit_replays_to_the_same_status(
        store: RunStore, tmp_path: Path, limits: dict[str, Any], status: str) -> None:
    run_id, path = _recorded(store, tmp_path, **limits)
    assert store.get_run(run_id).status == status
    report = replay(path, weather_registry())
    assert report.result.status == status
    assert report.result.error == store.get_run(run_id).error
    assert report.ok is True


def test_a_run_stopped_by_the_deadline_while_the_model_hung_replays_to_deadline(
        store: RunStore, tmp_path: Path) -> None:
    release = threading.Event()
    script = ScriptedModel(_weather_script()[:1])

    def model(messages: Any, specs: Any) -> ModelReply:
        if script.remaining:
            return script(messages, specs)
        release.wait(10)
        return ModelReply("late")

    result = run_agent("t", model, weather_registry(), store=store, timeout_s=0.3)
    release.set()
    assert result.status == "deadline"
    report = replay(fixture_from_run(store.get_run(result.run_id)), weather_registry())
    assert (report.result.status, report.result.error) == ("deadline", result.error)
    assert report.result.steps == result.steps
    assert report.ok is True


def test_a_run_stopped_by_the_deadline_while_a_tool_hung_replays_to_deadline(
        store: RunStore, tmp_path: Path) -> None:
    release = threading.Event()
    registry = weather_registry()
    registry.register("hang", "d", {"type": "object"}, lambda: release.wait(10))
    model = ScriptedModel([reply("", call("c1", "get_weather", city="Paris"), call("c2", "hang"))])
    result = run_agent("t", model, registry, store=store, timeout_s=0.3)
    release.set()
    assert result.status == "deadline"
    ran: list[str] = []
    replay_registry = weather_registry()
    replay_registry.register("hang", "d", {"type": "object"}, lambda: ran.append("hang"))
    report = replay(fixture_from_run(store.get_run(result.run_id)), replay_registry)
    assert (report.result.status, report.result.error) == ("deadline", result.error)
    assert ran == []
    assert report.ok is True


def test_a_model_error_replays_to_the_same_error(store: RunStore) -> None:
    script = ScriptedModel(_weather_script()[:1])

    def model(messages: Any, specs: Any) -> ModelReply:
        if script.remaining:
            return script(messages, specs)
        raise ConnectionError("api down")

    result = run_agent("t", model, weather_registry(), store=store)
    report = replay(result.run_id, weather_registry(), source_store=store)
    assert (report.result.status, report.result.error) == ("model_error", "ConnectionError: api down")
    assert report.ok is True


def test_asking_past_the_end_of_the_recording_is_a_divergence(store: RunStore, tmp_path: Path) -> None:
    _, path = _recorded(store, tmp_path, max_steps=2)
    report = replay(path, weather_registry(), max_steps=5)
    assert report.divergence is not None
    assert report.divergence.sentence == (
        "at step 3 the loop asked the model again, but the recording ended after 2 model calls")


def test_replies_left_over_is_a_divergence(store: RunStore, tmp_path: Path) -> None:
    _, path = _recorded(store, tmp_path)
    report = replay(path, weather_registry(), max_steps=1)
    assert report.divergence is not None
    assert report.divergence.sentence == (
        "the replay stopped with step_limit after step 1, but the recording has 2 more model replies")
    assert report.ok is False


def test_a_changed_task_is_named(store: RunStore, tmp_path: Path) -> None:
    _, path = _recorded(store, tmp_path)
    report = replay(path, weather_registry(), task="Weather in Oslo?")
    assert report.divergence is not None
    assert report.divergence.sentence == (
        "at step 1 the task differs: recorded 'Weather in Paris in F?', got 'Weather in Oslo?'")


def test_a_fixture_written_twice_from_the_same_run_is_byte_identical(store: RunStore, tmp_path: Path) -> None:
    run_id, first = _recorded(store, tmp_path)
    second = store.export_fixture(run_id[:8], tmp_path / "again.json")
    assert second == tmp_path / "again.json"
    assert first.read_bytes() == second.read_bytes()
    data = json.loads(first.read_text())
    assert (data["format"], data["version"]) == ("durable-agent-runner/fixture", 1)
    assert [r["step"] for r in data["replies"]] == [1, 2, 3]


def test_usage_is_recorded_and_played_back(store: RunStore, tmp_path: Path) -> None:
    model = ScriptedModel([ModelReply("", [call("c1", "get_weather", city="Paris")], Usage(90, 5)),
                           ModelReply("21", [], Usage(120, 2))])
    result = run_agent("t", model, weather_registry(), store=store)
    replayed = ScriptedModel.from_run(store, result.run_id[:10])
    assert isinstance(replayed, ReplayModel)
    assert [r.usage for r in replayed.replies] == [Usage(90, 5), Usage(120, 2)]
    again = run_agent("t", replayed, weather_registry())
    assert again.tokens == result.tokens == 217
    replayed.assert_complete()


def test_from_fixture_gives_a_strict_scripted_model(store: RunStore, tmp_path: Path) -> None:
    _, path = _recorded(store, tmp_path)
    model = ScriptedModel.from_fixture(path)
    result = run_agent("Weather in Paris in F?", model, _registry_with({"Paris": 30}))
    assert result.status == "model_error"
    assert isinstance(result.exception, ReplayDivergence)


def test_load_fixture_errors_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(FixtureError, match=r"^no fixture file '.*nope\.json'$"):
        load_fixture(tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(FixtureError, match=r"^fixture '.*bad\.json' is not readable JSON: "):
        load_fixture(bad)
    foreign = tmp_path / "foreign.json"
    foreign.write_text('{"a": 1}')
    with pytest.raises(FixtureError, match=r"is not a runner fixture"):
        load_fixture(foreign)
    newer = tmp_path / "newer.json"
    newer.write_text('{"format": "durable-agent-runner/fixture", "version": 99}')
    with pytest.raises(FixtureError, match=r"has version 99; this runner reads version 1$"):
        load_fixture(newer)


def test_a_run_stopped_on_a_duplicate_call_id_replays_cleanly(store: RunStore, tmp_path: Path) -> None:
    model = ScriptedModel([reply("", call("c1", "get_weather", city="Paris")),
                           reply("", call("c1", "c_to_f", celsius=21))])
    result = run_agent("t", model, weather_registry(), store=store)
    assert (result.status, len(result.messages)) == ("invalid_reply", 4)
    fixture = fixture_from_run(store.get_run(result.run_id))
    assert fixture.replies[1]["rejected"] == "duplicate call id 'c1'"
    assert fixture.messages() == result.messages
    report = replay(fixture, weather_registry())
    assert (report.ok, report.result.status, report.result.error) == (True, "invalid_reply", "duplicate call id 'c1'")


@pytest.mark.parametrize("bad", [
    pytest.param(ModelReply("", [ToolCall("", "get_weather", {"city": "Paris"})]), id="empty-call-id"),
    pytest.param(ModelReply("hi", [], Usage(-1, 2)), id="negative-usage"),
    pytest.param(ModelReply("hi", [], Usage(True, 2)), id="bool-usage"),
])
def test_a_refused_reply_a_fixture_cannot_hold_as_it_is_exports_as_its_stop_and_replays_to_it(
        store: RunStore, tmp_path: Path, bad: ModelReply) -> None:
    result = run_agent("t", ScriptedModel([bad]), weather_registry(), store=store)
    assert result.status == "invalid_reply"
    path = tmp_path / "bad.json"
    fixture_from_run(store.get_run(result.run_id)).write(path)
    fixture = load_fixture(path)
    assert fixture.replies == [{"step": 1, "stop": {"status": "invalid_reply", "reason": result.error}}]
    report = replay(fixture, weather_registry())
    assert (report.ok, report.result.status, report.result.error) == (True, "invalid_reply", result.error)


def test_a_limit_unknown_to_this_version_in_a_resumes_limits_is_ignored(store: RunStore, tmp_path: Path) -> None:
    stopped = run_agent("t", ScriptedModel([reply("", call("c1", "get_weather", city="Paris"))]), weather_registry(),
                        store=store, max_tool_calls=0)
    resume(store, stopped.run_id, ScriptedModel(["warm"]), weather_registry(), max_tool_calls=1)
    data = fixture_from_run(store.get_run(stopped.run_id)).data
    data["resumes"][0]["limits"]["max_wishes"] = 2.5  # written by a later version, say
    path = tmp_path / "later.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    report = replay(load_fixture(path), weather_registry())
    assert (report.ok, report.result.status, report.result.answer) == (True, "done", "warm")


def test_an_unfinished_run_cannot_become_a_fixture(store: RunStore) -> None:
    from tests.loop.helpers import record_unfinished_run

    record_unfinished_run(store, "f" * 32)
    with pytest.raises(FixtureError, match=r"^run f{32} has not finished \(status running, "):
        fixture_from_run(store.get_run("f" * 32))


def _logged(ran: list[str], name: str, result: Callable[..., Any]) -> Callable[..., Any]:
    """A tool function that notes in ``ran`` that it ran, then returns ``result(**args)``."""
    def fn(**args: Any) -> Any:
        ran.append(name)
        return result(**args)

    return fn


def _any_city_registry() -> ToolRegistry:
    registry = ToolRegistry()
    registry.register("get_weather", "Current temperature in a city.",
                      {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
                      lambda city: {"celsius": 20})
    return registry


def test_a_run_with_a_lone_surrogate_exports_a_utf8_fixture_that_replays(store: RunStore, tmp_path: Path) -> None:
    model = ScriptedModel([reply("", call("c1", "get_weather", city="Par\ud800is")), "20 C"])
    result = run_agent("t", model, _any_city_registry(), store=store)
    assert result.status == "done"
    keep = tmp_path / "keep.json"
    keep.write_text("good\n")
    assert store.export_fixture(result.run_id, keep) == keep
    text = keep.read_bytes().decode("utf-8")
    assert '"Par\\ud800is"' in text
    fixture = load_fixture(keep)
    assert fixture.replies[0]["tool_calls"][0]["args"] == {"city": "Par\ud800is"}
    assert replay(keep, _any_city_registry()).ok is True
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_a_failed_fixture_write_keeps_the_old_file_and_leaves_no_temp_file(
        store: RunStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run_id, _ = _recorded(store, tmp_path)
    folder = tmp_path / "out"
    folder.mkdir()
    keep = folder / "keep.json"
    keep.write_text("good\n")

    def full_disk(src: Any, dst: Any) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "replace", full_disk)
    with pytest.raises(OSError, match="No space left on device"):
        store.export_fixture(run_id, keep)
    assert keep.read_text() == "good\n"
    assert [p.name for p in folder.iterdir()] == ["keep.json"]


def _weather_tools(ran: list[str], *, description: str = "Current temperature in a city.",
                   city: dict[str, Any] | None = None, extra: bool = False, drop_c_to_f: bool = False,
                   c_to_f_first: bool = False) -> ToolRegistry:
    """The recorded weather tools with one thing changed, recording in ``ran`` which functions ran."""
    registry = ToolRegistry()

    def add_c_to_f() -> None:
        registry.register("c_to_f", "Celsius to Fahrenheit.",
                          {"type": "object", "properties": {"celsius": {"type": "number"}}, "required": ["celsius"]},
                          _logged(ran, "c_to_f", lambda celsius: celsius * 9 / 5 + 32))

    if c_to_f_first:
        add_c_to_f()
    registry.register("get_weather", description,
                      {"type": "object", "properties": {"city": city or {"type": "string"}}, "required": ["city"]},
                      _logged(ran, "get_weather", lambda city: {"celsius": 21}))
    if not drop_c_to_f and not c_to_f_first:
        add_c_to_f()
    if extra:
        registry.register("send_email", "Send an email.", {"type": "object", "properties": {"to": {"type": "string"}}},
                          _logged(ran, "send_email", lambda to: "sent"), side_effects=True)
    return registry


@pytest.mark.parametrize(("change", "what"), [
    ({"description": "Temperature now."},
     "the description of tool 'get_weather' changed: recorded 'Current temperature in a city.', "
     "got 'Temperature now.'"),
    ({"city": {"type": "string", "enum": ["Paris", "Oslo"]}},
     "the parameters of tool 'get_weather' changed at properties.city.enum: recorded nothing, "
     "got '[\"Paris\", \"Oslo\"]'"),
    ({"extra": True}, "tool 'send_email' was added"),
    ({"drop_c_to_f": True}, "tool 'c_to_f' was removed"),
    ({"c_to_f_first": True},
     "the tools are in a different order: recorded ['get_weather', 'c_to_f'], got ['c_to_f', 'get_weather']"),
])
def test_changed_tool_specs_diverge_at_step_1_naming_the_tool_and_the_change(
        store: RunStore, tmp_path: Path, change: dict[str, Any], what: str) -> None:
    _, path = _recorded(store, tmp_path)
    ran: list[str] = []
    report = replay(path, _weather_tools(ran, **change))
    assert report.ok is False
    assert report.divergence is not None
    assert report.divergence.sentence == f"at step 1 the tools shown to the model differ from the recording: {what}"
    assert (report.divergence.step, report.divergence.index, report.divergence.field) == (1, None, "tool_specs")
    assert (report.result.status, report.result.steps) == ("model_error", 1)
    assert ran == []
    lenient = replay(path, _weather_tools(ran, **change), strict=False)
    assert lenient.differences[0].sentence == report.divergence.sentence


def test_several_tool_spec_changes_are_one_sentence(store: RunStore, tmp_path: Path) -> None:
    _, path = _recorded(store, tmp_path)
    report = replay(path, _weather_tools([], description="Now.", drop_c_to_f=True, extra=True))
    assert report.divergence is not None
    assert report.divergence.sentence == (
        "at step 1 the tools shown to the model differ from the recording: the description of tool 'get_weather' "
        "changed: recorded 'Current temperature in a city.', got 'Now.'; tool 'c_to_f' was removed; "
        "tool 'send_email' was added")


def test_unchanged_tool_specs_replay_ok(store: RunStore, tmp_path: Path) -> None:
    _, path = _recorded(store, tmp_path)
    ran: list[str] = []
    assert replay(path, _weather_tools(ran)).ok is True
    assert ran == ["get_weather", "c_to_f"]


def _record_with(store: RunStore, tmp_path: Path, registry: ToolRegistry, script: list[ModelReply | str],
                 **kwargs: Any) -> Path:
    result = run_agent("Weather in Paris in F?", ScriptedModel(script), registry, store=store, **kwargs)
    path = tmp_path / "recorded.json"
    store.export_fixture(result.run_id, path)
    return path


def _edit(path: Path, edit: Any) -> None:
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))


@pytest.mark.parametrize(("edit", "sentence"), [
    (lambda d: d["replies"][0]["tool_calls"].__setitem__(0, {"id": "c1", "name": "send_email", "args": {"to": "x"}}),
     "at step 1 the reply calls send_email (c1), but the recording handled get_weather (c1) there; nothing was run"),
    (lambda d: d["replies"][0]["tool_calls"].append({"id": "c9", "name": "send_email", "args": {"to": "x"}}),
     "at step 1 the reply calls send_email (c9), but the recording has no result for that call; nothing was run"),
    (lambda d: d["replies"][1]["tool_calls"].insert(0, {"id": "c9", "name": "send_email", "args": {"to": "x"}}),
     "at step 2 the reply calls send_email (c9), but the recording handled c_to_f (c2) there; nothing was run"),
])
def test_an_edited_reply_calling_a_tool_the_recording_never_called_runs_nothing(
        store: RunStore, tmp_path: Path, edit: Any, sentence: str) -> None:
    path = _record_with(store, tmp_path, _weather_tools([], extra=True), _weather_script())
    _edit(path, edit)
    ran: list[str] = []
    report = replay(path, _weather_tools(ran, extra=True))
    assert report.divergence is not None
    assert report.divergence.sentence == sentence
    assert report.divergence.field == "tool_calls"
    assert report.result.status == "model_error"
    assert "send_email" not in ran
    assert ran == (["get_weather"] if sentence.startswith("at step 2") else [])


def test_a_larger_tool_budget_never_runs_the_call_the_recording_stopped_before(
        store: RunStore, tmp_path: Path) -> None:
    path = _record_with(store, tmp_path, _weather_tools([]), _weather_script(), max_tool_calls=1)
    assert load_fixture(path).outcome["status"] == "tool_budget"
    ran: list[str] = []
    report = replay(path, _weather_tools(ran), max_tool_calls=5)
    assert ran == ["get_weather"]
    assert report.divergence is not None
    assert report.divergence.sentence == (
        "at step 2 the loop was about to run c_to_f (c2), a call the recording did not make; it was not run")
    assert report.ok is False
    ran.clear()
    assert replay(path, _weather_tools(ran)).ok is True
    assert ran == ["get_weather"]


def test_an_approval_given_at_replay_never_runs_the_call_the_recording_left_waiting(
        store: RunStore, tmp_path: Path) -> None:
    def tools(ran: list[str]) -> ToolRegistry:
        registry = _weather_tools(ran)
        registry.register("send_email", "Send an email.", {"type": "object", "properties": {"to": {"type": "string"}}},
                          _logged(ran, "send_email", lambda to: "sent"), side_effects=True,
                          needs_approval=True)
        return registry

    path = _record_with(store, tmp_path, tools([]), [reply("", call("c1", "send_email", to="boss"))])
    assert load_fixture(path).outcome["status"] == "awaiting_approval"
    ran: list[str] = []
    report = replay(path, tools(ran), approve=lambda c: True)  # replay never asks: the recording waited here
    assert ran == []
    assert (report.result.status, report.result.error) == ("awaiting_approval", "call c1 (send_email) needs approval")
    assert (report.ok, report.divergence, report.differences) == (True, None, [])
