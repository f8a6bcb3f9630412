"""``ReplayReport`` has the shape ``RerunReport`` has: ``ok``, ``summary()``, ``to_json()``, ``assert_ok()``."""

from __future__ import annotations

from pathlib import Path

from runner import ModelReply, ScriptedModel, ToolRegistry, run_agent
from runner._replay.fixture import fixture_from_run
from runner._replay.replayer import replay
from runner.store import RunStore
from tests.loop.helpers import call, reply, weather_registry


def _recorded(store: RunStore, tmp_path: Path) -> Path:
    script: list[ModelReply | str] = [reply("Let me check.", call("c1", "get_weather", city="Paris")),
                                      "It is 21 C in Paris."]
    result = run_agent("Weather in Paris?", ScriptedModel(script), weather_registry(), store=store)
    path = tmp_path / "weather.json"
    fixture_from_run(store.get_run(result.run_id)).write(path)
    return path


def test_a_matching_replay_reports_itself_as_json_and_in_one_line(store: RunStore, tmp_path: Path) -> None:
    report = replay(_recorded(store, tmp_path), weather_registry())
    assert report.summary() == report.explain() == "replay matched the recording (done, 2 steps)"
    assert report.to_json() == {
        "ok": True, "explanation": "replay matched the recording (done, 2 steps)", "divergence": None,
        "status": "done", "recorded_status": "done", "answer": "It is 21 C in Paris.",
        "recorded_answer": "It is 21 C in Paris.", "steps": 2, "tokens": report.result.tokens, "tool_calls": 1}


def test_a_diverging_replay_puts_where_and_what_in_its_json(store: RunStore, tmp_path: Path) -> None:
    registry = ToolRegistry()
    registry.register("get_weather", "Current temperature in a city.",
                      {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
                      lambda city: {"celsius": 31})
    report = replay(_recorded(store, tmp_path), registry)
    found = report.to_json()
    assert report.divergence is not None
    assert (found["ok"], found["status"], found["recorded_status"]) == (False, "model_error", "done")
    assert found["divergence"] == {"step": 1, "index": None, "field": "tool_specs",
                                   "sentence": report.divergence.sentence}  # c_to_f is gone
    assert found["explanation"] == report.summary() == str(report.divergence)
