"""What a real collector (Arize Phoenix) shows of a run, checked at a real OTLP/HTTP receiver.

- A resumed run: its trace's top span is not an ERROR for a stop that was resumed and says
  it stopped; the resumed part's root is named for why, and carries the final answer; the
  spans rebuilt from the log are the ones that went out live.
- Chat spans carry OpenInference's own message attributes (``llm.input_messages``...),
  within the SDK's attribute limit, only with content on.
- Labels, the agent and the conversation (``session.id``, the parent run) reach the root spans.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from runner import Model, ModelReply, RunStore, ScriptedModel, follow_up, fork, resume, run_agent
from runner.tracing import configure_tracing, export_run, otlp_exporter
from tests.loop.helpers import call, reply, weather_registry
from tests.tracing.helpers import Receiver

UNSET, ERROR = 0, 2  # OTLP status codes
Span = dict[str, Any]


@pytest.fixture
def collector(receiver: Receiver) -> Receiver:
    """The ``receiver`` of tests/tracing/conftest.py, which the environment makes the OTLP endpoint."""
    return receiver


@pytest.fixture
def provider(collector: Receiver) -> Iterator[Any]:
    made = configure_tracing()
    yield made
    made.shutdown()


def delivered(collector: Receiver, provider: Any) -> list[Span]:
    assert provider.force_flush()
    spans = collector.spans()
    collector.requests.clear()
    return spans


def resent(collector: Receiver, store: RunStore, run_id: str, content: bool) -> list[Span]:
    exporter = otlp_exporter()
    try:
        export_run(store.get_run(run_id), exporter, record_content=content)
    finally:
        exporter.shutdown()
    spans = collector.spans()
    collector.requests.clear()
    return spans


def key(s: Span) -> tuple[Any, ...]:
    return (s["trace_id"], s["span_id"], s["parent"], s["name"], s["kind"], s["status"],
            sorted(s["attrs"].items(), key=lambda kv: kv[0]))


def broken(messages: Any, specs: Any) -> ModelReply:
    raise ConnectionError("api down")


FIRST_PARTS: dict[str, tuple[Callable[[], Model], int, int]] = {  # the model, max_steps, the live root's status
    "step_limit": (lambda: ScriptedModel([reply("", call("c1", "get_weather", city="Paris"))]), 1, UNSET),
    "model_error": (lambda: broken, 8, ERROR),
}


@pytest.mark.parametrize("content", [False, True], ids=["plain", "content"])
@pytest.mark.parametrize("stop", list(FIRST_PARTS))
def test_a_resumed_runs_trace_does_not_read_as_its_first_stop(
        collector: Receiver, provider: Any, store: RunStore, stop: str, content: bool) -> None:
    make_model, max_steps, live_status = FIRST_PARTS[stop]
    stopped = run_agent("Weather?", make_model(), weather_registry(), store=store, tracer_provider=provider,
                        record_content=content, max_steps=max_steps)
    done = resume(store, stopped.run_id, ScriptedModel([reply("", call("c2", "get_weather", city="Oslo")), "cold"]),
                  weather_registry(), max_steps=5, tracer_provider=provider, record_content=content)
    assert (stopped.status, done.status, done.answer) == (stop, "done", "cold")
    spans = delivered(collector, provider)
    rebuilt = resent(collector, store, stopped.run_id, content)
    answer = {"output.value": "cold", "output.mime_type": "text/plain"} if content else {}

    def roots(found: list[Span]) -> tuple[Span, Span]:
        (top,) = [s for s in found if s["parent"] is None]
        (part,) = [s for s in found if s["parent"] == top["span_id"] and s["name"].startswith("invoke_agent")]
        return top, part

    top, part = roots(spans)
    # the first part's root ended before the resume: a stop the caller set is no ERROR, and it says it stopped
    assert (top["status"], top["attrs"]["runner.status"]) == (live_status, stop)
    stopped_output = "stopped: step_limit (a resume continues the run)" if stop == "step_limit" else None
    assert top["attrs"].get("output.value") == stopped_output
    assert ("error.type" in top["attrs"]) == (live_status == ERROR)
    # the resumed part is named for why it resumed, and ends with the run's answer
    assert part["name"] == f"invoke_agent (resumed: {stop})"
    assert (part["status"], part["attrs"]["runner.status"], part["attrs"]["runner.resumed_from"]) == (
        UNSET, "done", stop)
    assert {k: v for k, v in part["attrs"].items() if k.startswith("output.")} == answer
    # rebuilt from the log: the very spans that went out live
    assert sorted(map(key, rebuilt)) == sorted(map(key, spans))
    assert sorted((s["span_id"], s["start"], s["end"]) for s in rebuilt) == sorted(
        (s["span_id"], s["start"], s["end"]) for s in spans)


def _weather_run(store: RunStore, provider: Any, content: bool) -> str:
    model = ScriptedModel([reply("Let me look.", call("c1", "get_weather", city="Paris")), "21C"])
    result = run_agent("Weather in Paris?", model, weather_registry(), system="Be brief.", store=store,
                       tracer_provider=provider, record_content=content)
    assert result.status == "done"
    return result.run_id


OI_MESSAGE_KEYS = ("llm.input_messages.", "llm.output_messages.", "input.", "output.", "llm.tools.")


@pytest.mark.parametrize("content", [False, True], ids=["plain", "content"])
def test_chat_spans_carry_openinference_messages_only_with_content_on(
        collector: Receiver, provider: Any, store: RunStore, content: bool) -> None:
    run_id = _weather_run(store, provider, content)
    spans = delivered(collector, provider)
    rebuilt = resent(collector, store, run_id, content)
    assert sorted(map(key, rebuilt)) == sorted(map(key, spans))
    chats = sorted((s for s in spans if s["name"] == "chat scripted"), key=lambda s: s["attrs"]["runner.step"])
    oi = [{k: v for k, v in s["attrs"].items() if k.startswith(OI_MESSAGE_KEYS) and not k.startswith("llm.tools.")}
          for s in chats]
    if not content:
        assert oi == [{}, {}]
        assert not [k for s in spans for k in s["attrs"] if k.startswith(OI_MESSAGE_KEYS)]
        return
    system = {"llm.input_messages.0.message.role": "system", "llm.input_messages.0.message.content": "Be brief.",
              "llm.input_messages.1.message.role": "user",
              "llm.input_messages.1.message.content": "Weather in Paris?"}
    params = {"input.mime_type": "application/json", "output.mime_type": "application/json"}
    asked = {"message.role": "assistant", "message.content": "Let me look.",
             "message.tool_calls.0.tool_call.id": "c1",
             "message.tool_calls.0.tool_call.function.name": "get_weather",
             "message.tool_calls.0.tool_call.function.arguments": '{"city": "Paris"}'}
    for s, attrs in zip(chats, oi, strict=True):
        assert attrs.pop("input.value") == s["attrs"]["gen_ai.input.messages"]
        assert attrs.pop("output.value") == s["attrs"]["gen_ai.output.messages"]
    assert oi[0] == {**system, **params, **{f"llm.output_messages.0.{k}": v for k, v in asked.items()}}
    assert oi[1] == {
        **system, **params, **{f"llm.input_messages.2.{k}": v for k, v in asked.items()},
        "llm.input_messages.3.message.role": "tool", "llm.input_messages.3.message.content": '{"celsius": 21}',
        "llm.input_messages.3.message.tool_call_id": "c1", "llm.input_messages.3.message.name": "get_weather",
        "llm.output_messages.0.message.role": "assistant", "llm.output_messages.0.message.content": "21C"}
    assert [json.loads(s["attrs"]["llm.tools.0.tool.json_schema"])["function"]["name"] for s in chats] == [
        "get_weather"] * 2


def test_a_long_conversation_keeps_every_chat_span_within_the_sdks_attribute_limit(
        collector: Receiver, provider: Any, store: RunStore, caplog: pytest.LogCaptureFixture) -> None:
    steps = 30  # 2 + 30 * 2 messages: about 200 message attributes by the last call
    script: list[ModelReply | str] = [reply("", call(f"c{i}", "get_weather", city="Paris")) for i in range(steps)]
    result = run_agent("Weather?", ScriptedModel([*script, "21C"]), weather_registry(), store=store,
                       tracer_provider=provider, record_content=True, max_steps=steps + 1,
                       max_identical_calls=steps + 1, token_budget=10**9)
    assert result.status == "done"
    spans = delivered(collector, provider)
    assert "Attributes dict is full" not in caplog.text
    assert sorted(map(key, resent(collector, store, result.run_id, True))) == sorted(map(key, spans))
    chats = sorted((s for s in spans if s["name"] == "chat scripted"), key=lambda s: s["attrs"]["runner.step"])
    assert len(chats) == steps + 1
    assert all(s["attrs"]["openinference.span.kind"] == "LLM" and len(s["attrs"]) <= 128 for s in chats)
    last = chats[-1]["attrs"]
    sent = json.loads(last["input.value"])
    kept = len(sent) - last["runner.input_messages.omitted"]
    assert 0 < kept < len(sent) == 2 + 2 * steps
    assert f"llm.input_messages.{kept - 1}.message.tool_call_id" in last  # the latest message is kept
    assert last[f"llm.input_messages.{kept - 1}.message.tool_call_id"] == f"c{steps - 1}"
    assert f"llm.input_messages.{kept}.message.role" not in last
    assert "runner.input_messages.omitted" not in chats[0]["attrs"]


def test_labels_agent_and_the_conversation_reach_the_root_spans(
        collector: Receiver, provider: Any, store: RunStore) -> None:
    first = run_agent("Weather in Paris?", ScriptedModel(["21C"]), weather_registry(), store=store,
                      tracer_provider=provider, agent_name="forecaster", labels={"team": "search", "env": "prod"})
    second = follow_up(store, first.run_id, "And Oslo?", ScriptedModel(["-3C"]), weather_registry(),
                       tracer_provider=provider)
    third = fork(store, second.run_id, at_step=1, model=ScriptedModel(["cold"]), registry=weather_registry(),
                 tracer_provider=provider, labels={"try": "2"})
    spans = delivered(collector, provider)
    by_trace: dict[str, list[Span]] = {}
    for s in spans:
        by_trace.setdefault(s["trace_id"], []).append(s)
    runs = [first.run_id, second.run_id, third.run_id]
    traces = {store.get_run(run_id).trace_id: run_id for run_id in runs}
    assert set(by_trace) == set(traces)
    run_keys = ("session.id", "runner.parent_run_id", "agent.name", "gen_ai.agent.name")
    expected = {
        first.run_id: {"session.id": first.run_id, "agent.name": "forecaster", "gen_ai.agent.name": "forecaster"},
        second.run_id: {"session.id": first.run_id, "runner.parent_run_id": first.run_id,
                        "agent.name": "forecaster", "gen_ai.agent.name": "forecaster"},
        third.run_id: {"session.id": first.run_id, "runner.parent_run_id": second.run_id,
                       "agent.name": "forecaster", "gen_ai.agent.name": "forecaster"},
    }
    labelled = {first.run_id: {"env": "prod", "team": "search"}, second.run_id: {"env": "prod", "team": "search"},
                third.run_id: {"try": "2"}}
    for trace_id, run_id in traces.items():
        found = by_trace[trace_id]
        (root,) = [s for s in found if s["parent"] is None]
        assert {k: v for k, v in root["attrs"].items() if k in run_keys} == expected[run_id]
        assert {s["attrs"]["gen_ai.conversation.id"] for s in found} == {first.run_id}
        assert {s["attrs"]["runner.run_id"] for s in found} == {run_id}
        assert not [k for s in found if s is not root for k in s["attrs"] if k in run_keys]  # the run span only
        # the labels, and the run's id, on every span of the run (Phoenix filters spans by metadata)
        assert {s["attrs"]["metadata"] for s in found} == {
            json.dumps({**dict(sorted(labelled[run_id].items())), "runner.run_id": run_id})}
        assert {tuple(s["attrs"]["tag.tags"]) for s in found} == {
            tuple(f"{k}={v}" for k, v in sorted(labelled[run_id].items()))}
        assert sorted(map(key, resent(collector, store, run_id, False))) == sorted(map(key, found))


def test_a_conversation_logged_before_sessions_were_is_followed_up_its_parents(
        store: RunStore, live: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    first = run_agent("Weather in Paris?", ScriptedModel(["21C"]), weather_registry(), store=store)
    with monkeypatch.context() as older:  # a follow-up as logged before it named its session
        older.setattr("runner._run.resume.session_of", lambda *args: None)
        second = follow_up(store, first.run_id, "And Oslo?", ScriptedModel(["-3C"]), weather_registry())
    assert "session_id" not in store.get_run(second.run_id).events[0].data
    provider, exporter = live
    third = follow_up(store, second.run_id, "And Rome?", ScriptedModel(["warm"]), weather_registry(),
                      tracer_provider=provider)
    assert store.get_run(third.run_id).events[0].data["session_id"] == first.run_id
    (root,) = [s for s in exporter.get_finished_spans() if s.parent is None]
    assert (root.attributes or {})["session.id"] == first.run_id
