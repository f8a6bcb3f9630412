"""The plain loop's shortcuts give exactly what the general paths give.

Each shortcut (a flat schema's prepared check, flat args' JSON check, an idle tracer)
is checked against the path it stands in for, so it can never drift from it.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import NoOpTracerProvider

from runner import ModelReply, ScriptedModel, ToolCall, ToolRegistry
from runner._log.limits import Limits
from runner._log.state import RunState
from runner._loop.actions import Action, CallModel, CallTool, Commit
from runner._loop.core import AgentCore
from runner._loop.replies import MAX_ARGS_DEPTH, json_problem
from runner._loop.sync import drive_until
from runner._run.opening import new_run_opening
from runner._run.wiring import RunWiring, build_recorder
from runner._tools.schema import args_checker, check_args
from runner.events import RunStarted
from runner.tracing import TracingRecorder

FLAT_SCHEMAS: list[dict[str, Any]] = [
    {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
    {"type": "object", "properties": {"a": {"type": "string", "description": "d"}, "b": {"type": "number"},
                                      "c": {"type": "boolean"}, "d": {"type": "null"}, "e": {"type": "array"}},
     "required": ["a", "c"], "additionalProperties": False, "title": "t"},
    {"properties": {"x": {"type": "integer"}}},
    {"type": "object"},
]
# Schemas the prepared check must leave to the walk (and still agree with it).
OTHER_SCHEMAS: list[dict[str, Any]] = [
    {"type": "object", "properties": {"o": {"type": "object", "properties": {"k": {"type": "integer"}}}}},
    {"type": "object", "properties": {"u": {"type": "string", "enum": ["a", "b"]}}},
    {"type": "object", "properties": {"m": {"type": ["string", "null"]}}},
    {"type": "object", "properties": {"s": {"type": "string", "maxLength": 2}}},
]
json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=5)),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=3), inner, max_size=3)),
    max_leaves=8)
any_args = st.one_of(
    st.dictionaries(st.sampled_from(["n", "a", "b", "c", "d", "e", "x", "o", "u", "m", "s", "zz"]), json_values,
                    max_size=5),
    json_values,
    st.dictionaries(st.integers(), st.integers(), max_size=2),
)


@pytest.mark.parametrize("schema", FLAT_SCHEMAS + OTHER_SCHEMAS)
@given(args=any_args)
def test_a_prepared_check_says_what_the_walk_says(schema: dict[str, Any], args: Any) -> None:
    for formats in (True, False):
        assert args_checker(schema, formats=formats)(args) == check_args(args, schema, formats=formats)


@given(args=st.one_of(json_values, st.dictionaries(st.one_of(st.text(max_size=3), st.integers()), json_values)))
def test_flat_args_pass_the_json_check_only_when_the_walk_passes_them(args: Any) -> None:
    # Inside a list (one level deeper) the dict is walked, never taken by the shortcut.
    assert json_problem(args) == json_problem([args], MAX_ARGS_DEPTH + 1)


def _opened(provider: Any, record_content: bool = False) -> TracingRecorder:
    tracing = TracingRecorder(provider, record_content=record_content, run_id="r1")
    tracing.record(RunStarted(run_id="r1", task="t", system="s", limits={}, tool_specs=[], model="m"))
    return tracing


def test_a_tracer_is_idle_only_when_nothing_records_the_run_and_no_content_is_kept() -> None:
    assert not TracingRecorder(NoOpTracerProvider(), run_id="r1").idle  # its root is not open yet
    assert _opened(NoOpTracerProvider()).idle
    assert _opened(None).idle  # the global provider, a no-op here
    assert _opened(NoOpTracerProvider(), record_content=True).idle  # content goes on spans: none are made
    provider = TracerProvider()
    try:
        assert not _opened(provider).idle
    finally:
        provider.shutdown()


def _actions(recorder_for: Any) -> list[str]:
    reg = ToolRegistry()
    reg.register("echo", "Echo.", {"type": "object", "properties": {"n": {"type": "integer"}}},
                 lambda n: {"n": n}, side_effects=True)
    model = ScriptedModel([ModelReply("", [ToolCall("c1", "echo", {"n": 1})]), "done"])
    state = RunState(run_id="r1")
    seen: list[str] = []

    def note(action: Action) -> bool:
        seen.append({Commit: "commit", CallModel: "model", CallTool: "tool"}[type(action)])
        return False

    core = AgentCore(model, reg, run_id="r1", limits=Limits(), recorder=recorder_for(state), state=state,
                     opening=new_run_opening("r1", "t", "s", Limits(), reg, model))
    result = drive_until(core, note)
    assert result is not None
    assert result.status == "done"
    return seen


def test_an_idle_recorder_is_asked_to_commit_only_when_the_run_ends() -> None:
    def plain(state: RunState) -> Any:
        return build_recorder(RunWiring(), state)[0]

    def with_content(state: RunState) -> Any:
        return build_recorder(RunWiring(record_content=True), state)[0]

    provider = TracerProvider()

    def recorded(state: RunState) -> Any:
        return build_recorder(RunWiring(tracer_provider=provider), state)[0]

    assert _actions(plain) == ["model", "tool", "model", "commit"]
    assert _actions(with_content) == ["model", "tool", "model", "commit"]  # no SDK records it: no span to fill
    try:  # an SDK records it: its facts go to the span builder at each commit
        assert _actions(recorded) == ["commit", "model", "commit", "tool", "commit", "commit", "model", "commit"]
    finally:
        provider.shutdown()
