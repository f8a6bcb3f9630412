"""Shared by the tracing tests: a weather run's tools and replies, spans as comparable trees,
the expected attributes of each span, the runs every rebuild is checked on, an OTLP receiver."""

from __future__ import annotations

import gzip
import json
import time
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.sdk.trace import ReadableSpan

from runner import ModelReply, ScriptedModel, ToolCall, ToolRegistry, Usage
from tests.helpers import Answer, LocalServer

RUN_ID = "0123456789abcdef0123456789abcdef"
WEATHER = {"Paris": 21}


def registry() -> ToolRegistry:
    reg = ToolRegistry()

    def get_weather(city: str) -> dict[str, int]:
        return {"celsius": WEATHER[city]}

    def slow(seconds: float) -> str:
        time.sleep(seconds)
        return "slept"

    reg.register("get_weather", "Temperature in a city.",
                 {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}, get_weather)
    reg.register("slow", "Sleeps.", {"type": "object", "properties": {"seconds": {"type": "number"}}}, slow,
                 timeout_s=0.05)
    return reg


def weather(call_id: str, city: str) -> ModelReply:
    return ModelReply("", [ToolCall(call_id, "get_weather", {"city": city})])


def tree(spans: Sequence[ReadableSpan]) -> list[Any]:
    """Spans as nested ``[name, status, attrs, children]``; ids and times left out.

    ``gen_ai.conversation.id``, ``runner.run_id`` and ``session.id`` are checked apart (they are ids).
    """
    by_parent: dict[int | None, list[ReadableSpan]] = {}
    for span in sorted(spans, key=lambda s: (s.start_time or 0, s.end_time or 0)):
        parent = span.parent.span_id if span.parent is not None else None
        by_parent.setdefault(parent, []).append(span)

    def node(span: ReadableSpan) -> list[Any]:
        attrs = {k: (list(v) if isinstance(v, tuple) else v) for k, v in (span.attributes or {}).items()
                 if k not in ("gen_ai.conversation.id", "runner.run_id", "session.id")}
        status = span.status.status_code.name
        if span.status.description:
            status += f": {span.status.description}"
        assert span.context is not None
        return [span.name, status, attrs, [node(c) for c in by_parent.get(span.context.span_id, [])]]

    return [node(root) for root in by_parent.get(None, [])]


def ids_of(spans: Sequence[ReadableSpan]) -> set[tuple[Any, ...]]:
    """What must agree between a live trace and a rebuilt one."""
    out = set()
    for s in spans:
        assert s.context is not None
        out.add((s.name, format(s.context.trace_id, "032x"), format(s.context.span_id, "016x"),
                 format(s.parent.span_id, "016x") if s.parent else None))
    return out


RUN = {"openinference.span.kind": "AGENT", "gen_ai.operation.name": "invoke_agent", "runner.step": 0,
       "gen_ai.request.model": "scripted",
       "gen_ai.provider.name": "scripted"}


def step(step: int) -> dict[str, Any]:
    return {"openinference.span.kind": "CHAIN", "runner.step": step}


def chat_model(name: str, provider: str | None = None) -> dict[str, Any]:
    """What a chat span says of its model, under the GenAI and the OpenInference names."""
    attrs: dict[str, Any] = {"gen_ai.request.model": name, "llm.model_name": name,
                             "llm.invocation_parameters": json.dumps({"model": name})}
    if provider:
        attrs.update({"gen_ai.provider.name": provider, "llm.provider": provider})
    return attrs


def chat(step: int, inp: int, out: int, finish: str, estimated: bool = True) -> dict[str, Any]:
    """A chat span's attributes: a provider's usage is usage, the runner's estimate only an estimate."""
    attrs: dict[str, Any] = {
        "openinference.span.kind": "LLM", "gen_ai.operation.name": "chat", "runner.step": step,
        **chat_model("scripted", "scripted"), "gen_ai.response.finish_reasons": [finish],
        "runner.usage.estimated": estimated}
    if estimated:
        attrs.update({"runner.usage.estimated_input_tokens": inp, "runner.usage.estimated_output_tokens": out})
    else:
        attrs.update({"gen_ai.usage.input_tokens": inp, "gen_ai.usage.output_tokens": out,
                      "llm.token_count.prompt": inp, "llm.token_count.completion": out,
                      "llm.token_count.total": inp + out})
    return attrs


def described(name: str) -> dict[str, Any]:
    """What a tool span says of its tool (``registry()``'s; a tool not in it, its name alone)."""
    found = {spec["name"]: spec for spec in registry().specs()}.get(name)
    if found is None:
        return {"tool.name": name}
    return {"tool.name": name, "tool.description": found["description"],
            "tool.json_schema": json.dumps({"type": "function", "function": dict(found)}),
            "tool.parameters": json.dumps(found["parameters"])}


def tool(step: int, name: str, call_id: str, ran: bool = True, error: str | None = None) -> dict[str, Any]:
    attrs: dict[str, Any] = {"openinference.span.kind": "TOOL", "gen_ai.operation.name": "execute_tool",
                             "runner.step": step, "gen_ai.tool.name": name,
                             "gen_ai.tool.call.id": call_id, "gen_ai.tool.type": "function", "runner.tool.ran": ran,
                             **described(name)}
    if error:
        attrs["error.type"] = error
    return attrs


def broken(messages: Any, specs: Any) -> ModelReply:
    raise ConnectionError("api down")


def slow_registry() -> ToolRegistry:
    reg = ToolRegistry()
    reg.register("slow", "Sleeps.", {"type": "object", "properties": {"seconds": {"type": "number"}}},
                 lambda seconds: time.sleep(seconds))
    return reg


SCENARIOS: dict[str, dict[str, Any]] = {
    "happy": {"model": lambda: ScriptedModel([weather("c1", "Paris"), ModelReply("21C", usage=Usage(90, 3))])},
    "tool_error": {"model": lambda: ScriptedModel([weather("c1", "Atlantis"), "sorry"])},
    "unknown_tool": {"model": lambda: ScriptedModel([
        ModelReply("", [ToolCall("u1", "get_forecast", {"day": 1}), ToolCall("b1", "get_weather", {})]), "ok"])},
    "step_limit": {"model": lambda: ScriptedModel([weather("c1", "Paris"), weather("c2", "Paris")]),
                   "max_steps": 2},
    "model_error": {"model": lambda: broken},
    "invalid_reply": {"model": lambda: ScriptedModel([ModelReply("", [ToolCall("x", "get_weather", {"city": "P"}),
                                                                      ToolCall("x", "get_weather", {})])])},
    "deadline": {"model": lambda: ScriptedModel([ModelReply("", [ToolCall("s1", "slow", {"seconds": 0.3})])]),
                 "reg": slow_registry, "timeout_s": 0.05},
}


class Receiver(LocalServer):
    """An OTLP/HTTP receiver: collects the ``ExportTraceServiceRequest`` bodies POSTed to it, and their paths."""

    def __init__(self) -> None:
        self.requests: list[ExportTraceServiceRequest] = []
        self.paths: list[str] = []
        super().__init__(self.answer)
        self.url = self.address

    def answer(self, request: BaseHTTPRequestHandler, body: bytes) -> Answer:
        if request.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        export = ExportTraceServiceRequest()
        export.ParseFromString(body)
        self.requests.append(export)
        self.paths.append(request.path)
        return Answer(200, "application/x-protobuf", ExportTraceServiceResponse().SerializeToString())

    def spans(self) -> list[dict[str, Any]]:
        out = []
        for request in self.requests:
            for rs in request.resource_spans:
                resource = {kv.key: value(kv.value) for kv in rs.resource.attributes}
                for ss in rs.scope_spans:
                    for s in ss.spans:
                        out.append({
                            "trace_id": s.trace_id.hex(), "span_id": s.span_id.hex(),
                            "parent": s.parent_span_id.hex() or None, "name": s.name, "kind": s.kind,
                            "status": s.status.code, "scope": ss.scope.name,
                            "start": s.start_time_unix_nano, "end": s.end_time_unix_nano,
                            "service": resource.get("service.name"),
                            "project": resource.get("openinference.project.name"),
                            "attrs": {kv.key: value(kv.value) for kv in s.attributes}})
        return out


def value(v: AnyValue) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [value(x) for x in v.array_value.values]
    return getattr(v, kind) if kind else None


def planner(mailer_replies: list[ModelReply | str], mailed: list[str] | None = None) -> ToolRegistry:
    """A planner's tools: the sub-agent ``mailer``, whose ``send_mail`` needs approval."""
    sent = mailed if mailed is not None else []

    def send_mail(to: str) -> str:
        sent.append(to)
        return f"sent to {to}"

    mail = ToolRegistry()
    mail.register("send_mail", "Send the report.", {"type": "object", "properties": {"to": {"type": "string"}},
                                                    "required": ["to"]}, send_mail, needs_approval=True)
    tools = ToolRegistry()
    tools.add_agent("mailer", model=ScriptedModel(mailer_replies), registry=mail, description="Sends mail.")
    return tools


def mail_bob(call_id: str = "m1") -> ModelReply:
    return ModelReply("", [ToolCall(call_id, "send_mail", {"to": "bob"})])


def delegate(call_id: str = "p1", args: Any = None) -> ModelReply:
    return ModelReply("", [ToolCall(call_id, "mailer", {"task": "Mail Bob." } if args is None else args)])
