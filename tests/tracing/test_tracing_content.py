"""With ``record_content`` off, no argument, result or message text reaches a span.

Error texts quote what the model sent (a schema error names the argument, a
failing tool's exception repeats a value, a refusal quotes the reply, a model's
exception can quote its output), so with content off a failed span is described
by its error class only. The scan covers every span name, attribute and status
description, live and rebuilt from the store, on each backend.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from runner import ModelReply, RunStore, ScriptedModel, ToolCall, ToolRegistry, run_agent
from runner.tracing import rebuild_spans

SECRET = "hunter2"


def login_registry() -> ToolRegistry:
    reg = ToolRegistry()

    def login(user: str) -> str:
        raise KeyError(user)  # the exception repeats the argument value

    reg.register("login", "Log in.", {"type": "object", "properties": {"user": {"type": "string"}},
                                      "required": ["user"]}, login)
    return reg


def tool_errors_then_refusal() -> ScriptedModel:
    return ScriptedModel([
        ModelReply("", [
            ToolCall("c1", "login", '{"password": "hunter2"'),  # a model's unparsed arguments: a string
            ToolCall("c2", "login", {"user": "bob", "totp_hunter2": "1"}),
            ToolCall("c3", "login", {"user": "hunter2"}),
        ]),
        ModelReply("I will not repeat hunter2.", stop_reason="refusal"),
    ])


def raising_model(messages: Any, specs: Any) -> ModelReply:
    raise ValueError("could not parse the model output: {'password': 'hunter2'}")


def texts(spans: Sequence[ReadableSpan]) -> list[str]:
    """Every piece of text a span carries to a backend."""
    out = []
    for s in spans:
        out.append(s.name)
        out.append(s.status.description or "")
        for event in s.events:
            out.append(event.name)
        for attributes in [s.attributes, *(event.attributes for event in s.events)]:
            for key, value in (attributes or {}).items():
                out.append(key)
                out.extend(map(repr, value) if isinstance(value, tuple) else [repr(value)])
    return out


def errors(spans: Sequence[ReadableSpan]) -> list[tuple[str, str, Any]]:
    return sorted((s.name, s.status.description or "", (s.attributes or {}).get("error.type"))
                  for s in spans if s.status.status_code.name == "ERROR")


SCENARIOS: dict[str, tuple[Callable[[], Any], list[tuple[str, str, Any]]]] = {
    "tool_errors_then_refusal": (tool_errors_then_refusal, [  # the refusal's chat span is fine: a reply came
        ("execute_tool login", "KeyError", "KeyError"),
        ("execute_tool login", "invalid_arguments", "invalid_arguments"),
        ("execute_tool login", "invalid_arguments", "invalid_arguments"),
        ("invoke_agent", "invalid_reply", "invalid_reply"),
    ]),
    "model_error": (lambda: raising_model, [
        ("chat raising_model", "ValueError", "ValueError"),
        ("invoke_agent", "model_error", "model_error"),
    ]),
}


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_no_argument_or_message_text_on_spans_when_content_is_off(
        store: RunStore, live: tuple[TracerProvider, InMemorySpanExporter], scenario: str) -> None:
    provider, exporter = live
    make_model, expected = SCENARIOS[scenario]
    result = run_agent("Log in as bob", make_model(), login_registry(), store=store, tracer_provider=provider)
    assert result.status in ("invalid_reply", "model_error")
    assert SECRET in str(result.messages) + str(result.error)  # the secret did go through the run
    live_spans = exporter.get_finished_spans()
    rebuilt = rebuild_spans(store.get_run(result.run_id))
    for spans in (live_spans, rebuilt):
        assert [t for t in texts(spans) if SECRET in t] == []
        assert errors(spans) == expected


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_error_texts_are_on_spans_when_content_is_on(
        store: RunStore, live: tuple[TracerProvider, InMemorySpanExporter], scenario: str) -> None:
    provider, exporter = live
    make_model, expected = SCENARIOS[scenario]
    result = run_agent("Log in as bob", make_model(), login_registry(), store=store, tracer_provider=provider,
                       record_content=True)
    live_spans = exporter.get_finished_spans()
    rebuilt = rebuild_spans(store.get_run(result.run_id), record_content=True)
    for spans in (live_spans, rebuilt):
        assert [SECRET in description for _, description, _ in errors(spans)] == [True] * len(expected)
        root = next(s for s in spans if s.parent is None)
        assert SECRET in str((root.attributes or {})["runner.stop_reason"])
