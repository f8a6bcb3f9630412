"""Limits: ``limits=Limits(...)`` or the limit keywords on every entry point, never both; one list of names."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

import pytest

from runner import Limits, ModelReply, ScriptedModel, arun_agent, follow_up, fork, replay, resume, run_agent
from runner._log.limits import limit_names
from runner._replay.fixture import fixture_from_run
from runner.store import RunStore
from tests.loop.helpers import call, reply, weather_registry

TWO_STEPS: list[ModelReply | str] = [reply("", call("c1", "get_weather", city="Paris")), "It is 21C."]
BOTH = r"^max_steps given both as a keyword and in limits=, which sets every limit: give it once \("


def started_limits(store: RunStore, run_id: str) -> dict[str, Any]:
    """The limits the run's ``run_started`` fact recorded."""
    return next(e.data["limits"] for e in store.get_run(run_id).events if e.kind == "run_started")


def test_limit_names_are_the_fields_of_limits_in_order() -> None:
    assert limit_names() == tuple(f.name for f in dataclasses.fields(Limits))
    assert limit_names() == ("max_steps", "token_budget", "max_tool_calls", "timeout_s", "max_context_chars",
                             "max_output_chars", "max_result_chars", "max_identical_calls", "max_cost_usd",
                             "max_parallel_tools", "max_output_retries")


def test_limits_from_a_recording_ignore_unknown_names_and_default_missing_ones() -> None:
    assert Limits.from_dict({"max_steps": 3, "max_wishes": 1}) == Limits(max_steps=3)


def test_run_agent_takes_limits_whole_and_records_them(store: RunStore) -> None:
    limits = Limits(max_steps=1, token_budget=900, max_tool_calls=5, max_identical_calls=3)
    result = run_agent("Weather?", ScriptedModel(TWO_STEPS), weather_registry(), store=store, limits=limits)
    assert (result.status, result.error) == ("step_limit", "made 1 model calls (max_steps=1)")
    assert started_limits(store, result.run_id) == limits.to_dict()


def test_without_limits_a_run_gets_the_defaults_and_the_keywords_given(store: RunStore) -> None:
    result = run_agent("Weather?", ScriptedModel(TWO_STEPS), weather_registry(), store=store, max_tool_calls=4)
    assert result.status == "done"
    assert started_limits(store, result.run_id) == dataclasses.replace(Limits(), max_tool_calls=4).to_dict()
    assert started_limits(store, result.run_id)["max_steps"] == 8


@pytest.mark.parametrize("keyword", [{"max_steps": 2}, {"timeout_s": 5.0}, {"max_steps": None}])
def test_a_limit_given_both_ways_is_a_type_error_before_anything_is_recorded(store: RunStore,
                                                                          keyword: dict[str, Any]) -> None:
    name = next(iter(keyword))
    with pytest.raises(TypeError, match=BOTH.replace("max_steps", name)):
        run_agent("t", ScriptedModel(["x"]), weather_registry(), store=store, limits=Limits(), **keyword)
    with pytest.raises(TypeError, match=BOTH.replace("max_steps", name)):
        asyncio.run(arun_agent("t", ScriptedModel(["x"]), weather_registry(), store=store, limits=Limits(),
                               **keyword))
    assert store.list_runs() == []


def test_two_limits_given_both_ways_are_named_together() -> None:
    with pytest.raises(TypeError, match=r"^max_steps, max_tool_calls given both .* give them once"):
        run_agent("t", ScriptedModel(["x"]), weather_registry(), "s", 3, limits=Limits(), max_tool_calls=1)


def test_limits_must_be_a_limits() -> None:
    with pytest.raises(TypeError, match=r"^limits must be a Limits, got dict$"):
        run_agent("t", ScriptedModel(["x"]), weather_registry(), limits={"max_steps": 1})  # type: ignore[arg-type]


def test_arun_agent_takes_limits(store: RunStore) -> None:
    limits = Limits(max_steps=1)
    result = asyncio.run(arun_agent("Weather?", ScriptedModel(TWO_STEPS), weather_registry(), store=store,
                                    limits=limits))
    assert result.status == "step_limit"
    assert started_limits(store, result.run_id) == limits.to_dict()


def test_resume_takes_limits_in_place_of_the_recorded_ones(store: RunStore) -> None:
    stopped = run_agent("Weather?", ScriptedModel(TWO_STEPS), weather_registry(), store=store, max_steps=1,
                        max_tool_calls=7)
    limits = Limits(max_steps=2)
    result = resume(store, stopped.run_id, ScriptedModel(TWO_STEPS[1:]), weather_registry(), limits=limits)
    assert (result.status, result.answer) == ("done", "It is 21C.")
    resumed = [e.data["limits"] for e in store.get_run(stopped.run_id).events if e.kind == "run_resumed"]
    assert resumed == [limits.to_dict()]  # max_tool_calls is None again: limits= sets every limit


def test_resume_keeps_the_recorded_limits_a_keyword_does_not_replace(store: RunStore) -> None:
    stopped = run_agent("Weather?", ScriptedModel(TWO_STEPS), weather_registry(), store=store, max_steps=1,
                        max_tool_calls=7)
    resume(store, stopped.run_id, ScriptedModel(TWO_STEPS[1:]), weather_registry(), max_steps=2)
    resumed = [e.data["limits"] for e in store.get_run(stopped.run_id).events if e.kind == "run_resumed"]
    assert resumed == [Limits(max_steps=2, max_tool_calls=7).to_dict()]


def test_resume_fork_and_follow_up_refuse_a_limit_given_both_ways(store: RunStore) -> None:
    done = run_agent("Weather?", ScriptedModel(TWO_STEPS), weather_registry(), store=store)
    stopped = run_agent("Weather?", ScriptedModel(TWO_STEPS), weather_registry(), store=store, max_steps=1)
    with pytest.raises(TypeError, match=BOTH):
        resume(store, stopped.run_id, ScriptedModel(["x"]), weather_registry(), limits=Limits(), max_steps=2)
    with pytest.raises(TypeError, match=BOTH):
        fork(store, done.run_id, at_step=2, model=ScriptedModel(["x"]), registry=weather_registry(),
             limits=Limits(), max_steps=2)
    with pytest.raises(TypeError, match=BOTH):
        follow_up(store, done.run_id, "And Oslo?", ScriptedModel(["x"]), weather_registry(), limits=Limits(),
                  max_steps=2)
    assert len(store.list_runs()) == 2
    assert [e.kind for e in store.get_run(stopped.run_id).events].count("run_resumed") == 0


def test_fork_and_follow_up_take_limits(store: RunStore) -> None:
    parent = run_agent("Weather?", ScriptedModel(TWO_STEPS), weather_registry(), store=store, max_tool_calls=7)
    limits = Limits(max_steps=4, token_budget=3000)
    forked = fork(store, parent.run_id, at_step=2, model=ScriptedModel(["Forked."]), registry=weather_registry(),
                  limits=limits)
    assert (forked.status, forked.answer) == ("done", "Forked.")
    assert started_limits(store, forked.run_id) == limits.to_dict()
    followed = follow_up(store, parent.run_id, "And Oslo?", ScriptedModel(["Cold."]), weather_registry(),
                         limits=limits)
    assert (followed.status, followed.answer) == ("done", "Cold.")
    assert started_limits(store, followed.run_id) == limits.to_dict()


def test_replay_takes_limits_in_place_of_the_recorded_ones(store: RunStore, tmp_path: Path) -> None:
    recorded = run_agent("Weather?", ScriptedModel(TWO_STEPS), weather_registry(), store=store, max_tool_calls=7)
    path = tmp_path / "run.json"
    fixture_from_run(store.get_run(recorded.run_id)).write(path)
    assert replay(path, weather_registry()).ok
    whole = replay(path, weather_registry(), limits=Limits(max_steps=1), store=store)
    assert (whole.ok, whole.result.status) == (False, "step_limit")
    assert started_limits(store, whole.result.run_id) == Limits(max_steps=1).to_dict()
    shorthand = replay(path, weather_registry(), max_steps=1, store=store)
    assert started_limits(store, shorthand.result.run_id) == Limits(max_steps=1, max_tool_calls=7).to_dict()
    with pytest.raises(TypeError, match=BOTH):
        replay(path, weather_registry(), limits=Limits(), max_steps=1)


def test_every_limit_but_the_two_parameters_is_a_run_option() -> None:
    from runner import RunOptions

    options = {name for name in RunOptions.__annotations__ if name in limit_names()}
    assert options == set(limit_names()) - {"max_steps", "token_budget"}  # run_agent's own parameters
    assert "limits" in RunOptions.__annotations__
