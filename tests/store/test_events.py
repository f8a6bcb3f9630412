"""The event codec: every fact round-trips through ``events.data``, old rows still decode,
and a row that is not one of our facts is one ``StoreError`` line."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from runner import Status, StoreError
from runner.events import (
    ApprovalRequested,
    Event,
    MessageAppended,
    ModelCalled,
    ModelCallStarted,
    RunFinished,
    RunResumed,
    RunStarted,
    StepFinished,
    StepStarted,
    ToolFinished,
    ToolStarted,
    decode,
    encode,
    span_key,
)
from runner.messages import ModelReply, ToolCall, Usage

EVERY_KIND: list[Event] = [
    RunStarted(task="t", system="s", limits={"max_steps": 3},
               tool_specs=[{"name": "x", "description": "d", "parameters": {}}], model="m",
               provider="p", agent_name="a", labels={"k": "v"}, parent_run_id="parent", origin="fork",
               forked_at_step=2, service_name="svc"),
    RunStarted(task="t", system="s", limits={}, tool_specs=[], model="m", parent_run_id="parent", origin="subagent",
               parent_call_id="c9", parent_span_id="00f067aa0ba902b7"),
    MessageAppended(step=1, index=2, message={"role": "assistant", "content": "", "tool_calls": []}),
    StepStarted(step=1),
    ModelCalled(step=1, prompt_tokens=10, reply_tokens=3, latency_s=0.5,
                reply=ModelReply("hi", [ToolCall("c1", "add", {"a": 1})], Usage(7, 2), "stop"),
                error=None, error_type=None),
    ModelCalled(step=2, prompt_tokens=10, error="ValueError: boom", error_type="ValueError"),
    ToolStarted(step=1, call_id="c1", name="add", args={"a": 1}, attempt=2),
    ToolFinished(step=1, call_id="c1", name="add", observation="2", ok=True, duration_s=0.1, ran=True,
                 refused=None),
    ToolFinished(step=1, call_id="c2", name="add", observation="ERROR: x", ok=False, ran=False,
                 refused="invalid_args"),
    ApprovalRequested(step=1, call_id="c3", name="pay", args={"amount": 5}),
    StepFinished(step=1),
    RunFinished(step=1, status=Status.DONE, answer="a", steps=1, tokens=12, tool_calls=1, error=None),
    RunResumed(step=1, owner="h:1:2:b", reason="awaiting_approval", limits={"max_steps": 9},
               decisions={"c3": True, "c4": "no"}),
]


@pytest.mark.parametrize("event", EVERY_KIND, ids=lambda e: type(e).__name__)
def test_every_fact_round_trips_through_the_codec(event: Event) -> None:
    kind, data = encode(event)
    assert decode(kind, data, step=event.step) == event


def test_the_encoded_shape_is_the_logs_original_one() -> None:
    kind, data = encode(ToolStarted(step=4, call_id="c1", name="add", args={"a": 1}))
    assert (kind, data) == ("tool_started", {"call_id": "c1", "name": "add", "args": {"a": 1}})
    kind, data = encode(ModelCalled(step=2, prompt_tokens=5, reply_tokens=1, latency_s=0.25,
                                    reply=ModelReply("ok", [], Usage(3, 1))))
    assert kind == "model_call"
    assert data == {"step": 2, "prompt_tokens": 5, "reply_tokens": 1, "latency_s": 0.25,
                    "reply": {"content": "ok", "tool_calls": [],
                              "usage": {"input_tokens": 3, "output_tokens": 1}, "stop_reason": None},
                    "usage": {"input_tokens": 3, "output_tokens": 1}, "error": None, "error_type": None}


def test_a_row_written_before_the_new_fields_existed_decodes_with_their_defaults() -> None:
    old: dict[str, Any] = {"call_id": "c1", "name": "add", "observation": "2", "ok": True, "duration_s": 0.0,
                           "ran": True}
    assert decode("tool_finished", old, step=3) == ToolFinished(step=3, call_id="c1", name="add",
                                                                observation="2", ok=True)


# Records of tool traits a resume must not trust: the first four crashed the fold or the in-doubt rules.
FORGED_TRAITS: list[object] = [{"pay": {}}, {"pay": "x"}, ["pay"], "x",
                               {"pay": {"side_effects": "no", "needs_approval": False, "idempotency_key": None}},
                               {"pay": {"side_effects": True, "needs_approval": False, "idempotency_key": None,
                                        "idempotent": "yes"}}]


@pytest.mark.parametrize(("kind", "data", "message"), [
    ("tool_sung", {}, "unknown event kind 'tool_sung'"),
    ("tool_started", [1, 2], "tool_started event data is list, not an object"),
    ("tool_started", {"name": "x", "args": {}}, "tool_started event is malformed"),
    ("model_call", {"step": 1, "prompt_tokens": 1, "reply": {"tool_calls": []}}, "model_call event is malformed"),
    *[(kind, {**fields, "tool_traits": traits}, f"{kind} event is malformed")
      for kind, fields in (("run_started", {"task": "t", "system": "s", "limits": {}, "tool_specs": [], "model": "m"}),
                           ("run_resumed", {"owner": "o", "reason": "running", "limits": {}}))
      for traits in FORGED_TRAITS],
    *[("run_started", {"task": "t", "system": "s", "limits": {}, "tool_specs": [], "model": "m",
                       "parent_span_id": forged}, "run_started event is malformed: parent_span_id must be 16")
      for forged in ("00F067AA0BA902B7", "00f067aa0ba902", 7, "00f067aa0ba902b7\n")],
])
def test_a_row_that_is_not_one_of_our_facts_is_one_store_error_line(kind: str, data: Any, message: str) -> None:
    with pytest.raises(StoreError) as caught:
        decode(kind, data)
    assert str(caught.value).startswith(message)
    assert "\n" not in str(caught.value)


def test_the_transient_model_call_start_is_never_stored() -> None:
    with pytest.raises(ValueError, match="ModelCallStarted is not stored"):
        encode(ModelCallStarted(step=1, prompt_tokens=3))


def test_span_keys_name_the_run_step_chat_or_tool_and_a_resumed_segment() -> None:
    assistant = MessageAppended(step=2, index=3, message={"role": "assistant", "content": "", "tool_calls": []})
    tool = MessageAppended(step=2, index=4, message={"role": "tool", "tool_call_id": "c9", "name": "x",
                                                     "content": "1"})
    user = MessageAppended(step=0, index=1, message={"role": "user", "content": "hi"})
    assert [span_key(e) for e in (assistant, tool, user, StepStarted(step=2),
                                  ModelCallStarted(step=2, prompt_tokens=1),
                                  ToolStarted(step=2, call_id="c9", name="x", args={}))] == \
        ["chat:2", "tool:c9", "run", "step:2", "chat:2", "tool:c9"]
    assert span_key(StepStarted(step=2), segment=1) == "step:2@1"
    assert span_key(RunResumed(owner="o", reason="r", limits={}), segment=1) == "run@1"


def test_a_damaged_row_in_a_stored_run_names_the_run_and_the_event(store: Any) -> None:
    from sqlalchemy import insert

    from runner import ScriptedModel, ToolRegistry, run_agent
    from runner.store.tables import events

    result = run_agent("t", ScriptedModel(["hi"]), ToolRegistry(), store=store)
    last = len(store.get_run(result.run_id).events)
    with store.engine.begin() as conn:  # a row some other program appended
        conn.execute(insert(events).values(run_id=result.run_id, seq=last + 1, at=datetime.now(UTC), step=0,
                                           kind="tool_started", data='{"name": "x"}', span_id=None))
    with pytest.raises(StoreError) as caught:
        store.get_run(result.run_id)
    assert str(caught.value) == (f"run {result.run_id} event {last + 1}: tool_started event is malformed: "
                                 "ToolStarted.__init__() missing 2 required keyword-only arguments: 'call_id' and "
                                 "'args'")
