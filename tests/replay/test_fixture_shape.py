"""A hand-edited fixture of the wrong shape fails with one ``FixtureError`` naming the field, never deep in replay."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs

from runner import ScriptedModel, run_agent
from runner._replay.fixture import Fixture, fixture_from_run, load_fixture
from runner._replay.replayer import ReplayReport, replay
from runner.errors import FixtureError
from runner.store import open_store
from tests.cli.helpers import invoke, one_error_line
from tests.loop.helpers import call, reply, weather_registry

Data = dict[str, Any]


@pytest.fixture(scope="module")
def valid(tmp_path_factory: pytest.TempPathFactory) -> Data:
    """A recorded fixture with a tool call, usage, a final answer and every limit."""
    folder = tmp_path_factory.mktemp("shape")
    with open_store(f"sqlite:///{folder / 'runs.db'}") as store:
        model = ScriptedModel([reply("Checking.", call("c1", "get_weather", city="Paris")), "21 C"])
        result = run_agent("Weather in Paris?", model, weather_registry(), store=store, max_tool_calls=3)
        return fixture_from_run(store.get_run(result.run_id)).data


def _del(*path: str | int) -> Callable[[Data], None]:
    def edit(data: Data) -> None:
        target: Any = data
        for key in path[:-1]:
            target = target[key]
        del target[path[-1]]

    return edit


def _set(value: Any, *path: str | int) -> Callable[[Data], None]:
    def edit(data: Data) -> None:
        target: Any = data
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return edit


BAD_FIXTURES = [
    (_del("replies", 0, "content"), "field 'replies[0].content' is missing"),
    (_set("oops", "replies"), "field 'replies' must be an array, got string"),
    (_set(None, "outcome"), "field 'outcome' must be an object, got null"),
    (_set("8", "limits"), "field 'limits' must be an object, got string"),
    (_set("8", "limits", "max_steps"), "field 'limits.max_steps' must be a non-negative integer, got string"),
    (_set(True, "limits", "token_budget"), "field 'limits.token_budget' must be a non-negative integer, got boolean"),
    (_set(-1, "limits", "max_tool_calls"), "field 'limits.max_tool_calls' must be a non-negative integer, got -1"),
    (_set(0, "limits", "timeout_s"), "field 'limits.timeout_s' must be a positive number, got 0"),
    (_set(0, "limits", "max_identical_calls"), "field 'limits.max_identical_calls' must be at least 1, got 0"),
    (_set(None, "task"), "field 'task' must be a string, got null"),
    (_del("system"), "field 'system' is missing"),
    (_set({}, "tool_specs"), "field 'tool_specs' must be an array, got object"),
    (_set([], "tool_specs", 0, "parameters"), "field 'tool_specs[0].parameters' must be an object, got array"),
    (_del("tool_specs", 1, "description"), "field 'tool_specs[1].description' is missing"),
    (_set("c1", "replies", 0, "tool_calls"), "field 'replies[0].tool_calls' must be an array, got string"),
    (_set(7, "replies", 0, "tool_calls", 0, "id"), "field 'replies[0].tool_calls[0].id' must be a string, got integer"),
    (_set("", "replies", 0, "tool_calls", 0, "id"), "field 'replies[0].tool_calls[0].id' must not be empty"),
    (_del("replies", 0, "tool_calls", 0, "name"), "field 'replies[0].tool_calls[0].name' is missing"),
    (_del("replies", 0, "observations"), "field 'replies[0].observations' is missing"),
    (_set(None, "replies", 0, "observations", 0, "content"),
     "field 'replies[0].observations[0].content' must be a string, got null"),
    (_set({"input_tokens": 1}, "replies", 1, "usage"), "field 'replies[1].usage.output_tokens' is missing"),
    (_set(3, "replies", 1, "stop_reason"), "field 'replies[1].stop_reason' must be a string, got integer"),
    (_set([], "replies", 1), "field 'replies[1]' must be an object, got array"),
    (_set({"stop": {"status": "done", "reason": "x"}}, "replies", 1),
     "field 'replies[1].stop.status' must be one of step_limit, token_budget, cost_limit, tool_budget, deadline, "
     "context_budget, output_budget, cancelled, invalid_reply, invalid_output, model_error, awaiting_approval; "
     "got 'done'"),
    (_set({"stop": None}, "replies", 1), "field 'replies[1].stop' must be an object, got null"),
    (_set("finished", "outcome", "status"), "field 'outcome.status' must be one of done, step_limit, token_budget, "
     "cost_limit, tool_budget, deadline, context_budget, output_budget, cancelled, invalid_reply, invalid_output, "
     "model_error, "
     "awaiting_approval; got 'finished'"),
    (_del("outcome", "answer"), "field 'outcome.answer' is missing"),
    (_set(1, "outcome", "error"), "field 'outcome.error' must be a string, got integer"),
    (_set(5, "outcome", "stopped_before_call"), "field 'outcome.stopped_before_call' must be a string, got integer"),
    (_set(2, "model"), "field 'model' must be a string, got integer"),
]


@pytest.mark.parametrize(("edit", "problem"), BAD_FIXTURES)
def test_a_malformed_fixture_field_is_one_fixture_error_naming_it(
        valid: Data, tmp_path: Path, edit: Callable[[Data], None], problem: str) -> None:
    data = copy.deepcopy(valid)
    edit(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(FixtureError) as raised:
        load_fixture(path)
    assert str(raised.value) == f"fixture {str(path)!r}: {problem}"
    with pytest.raises(FixtureError) as raised:
        Fixture(data)
    assert str(raised.value) == f"fixture {problem}"


def test_the_cli_prints_a_malformed_fixture_field_as_one_line(valid: Data, tmp_path: Path) -> None:
    data = copy.deepcopy(valid)
    del data["replies"][0]["content"]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    result = invoke("replay", str(path), "--tools", "tests.loop.helpers:weather_registry")
    assert result.exit_code == 3
    assert one_error_line(result) == f"Error: fixture {str(path)!r}: field 'replies[0].content' is missing"


def test_json_that_is_too_deep_or_has_a_too_long_integer_is_a_fixture_error(tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(FixtureError, match=r"is not readable JSON: nested too deeply$"):
        load_fixture(deep)
    long = tmp_path / "long.json"
    long.write_text('{"n": ' + "9" * 5000 + "}")
    with pytest.raises(FixtureError, match=r"is not readable JSON: "):
        load_fixture(long)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value inside ``value`` (dict keys and list indexes)."""
    found = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, inner in value.items():
            found += _paths(inner, (*prefix, key))
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            found += _paths(inner, (*prefix, index))
    return found


JSON_VALUES = hs.recursive(
    hs.none() | hs.booleans() | hs.integers(-3, 10**6) | hs.floats(allow_nan=False, allow_infinity=False)
    | hs.text(max_size=5),
    lambda inner: hs.lists(inner, max_size=3) | hs.dictionaries(hs.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(picks=hs.lists(hs.tuples(hs.integers(0, 10**6), hs.booleans(), JSON_VALUES), min_size=1, max_size=3))
def test_any_mutation_of_a_fixture_loads_and_replays_or_is_a_fixture_error(
        valid: Data, tmp_path: Path, picks: list[tuple[int, bool, Any]]) -> None:
    data = copy.deepcopy(valid)
    for pick, delete, value in picks:
        paths = _paths(data)
        if not paths:
            break
        *parents, last = paths[pick % len(paths)]
        target: Any = data
        for key in parents:
            target = target[key]
        if delete:
            del target[last]
        else:
            target[last] = value
    path = tmp_path / "mutated.json"
    path.write_text(json.dumps(data))
    try:
        report = replay(path, weather_registry())
    except FixtureError:
        return
    assert isinstance(report, ReplayReport)
