"""``TracingRecorder``: one span per run, step, model call and tool call, as they happen.

Spans are opened with explicit parent contexts and never attached to the
current context: the sync loop may run tools on worker threads and an async
driver runs many runs on one thread, so "the current span" would be wrong there.
The root span alone takes the caller's current span as its parent, so a run
started inside a request handler joins the request's trace.

The recorder is also the store's span source: ``trace_id`` and ``span_id()``
name the span of the most recent fact, and the store (called right after the
tracer for each fact) logs them. When nothing records the run (no SDK
configured, or the sampler dropped it) no further spans are made and the ids
are derived from the run id, so the log still carries stable ids. It also
offers ``service_name``, the ``service.name`` of the provider that records the
run, which the store logs so that spans rebuilt later go out under it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Tracer, TracerProvider

from ..ids import derived_span_id, derived_trace_id
from ..recorder import ModelCallInfo, RunInfo, ToolCallInfo, describe_reply
from . import attrs as a

if TYPE_CHECKING:
    from ..core import AgentResult
    from ..messages import Message, ToolCall


def _hex(span: Span) -> str:
    return format(span.get_span_context().span_id, "016x")


def _service_name(provider: TracerProvider) -> str | None:
    """The ``service.name`` of an SDK provider's resource (the API has no resources: None)."""
    resource = getattr(provider, "resource", None)
    name = getattr(resource, "attributes", {}).get(a.SERVICE_NAME)
    return name if isinstance(name, str) and name else None


class TracingRecorder:
    """Records a run as spans on ``tracer_provider`` (None: the global provider).

    ``record_content`` adds messages, tool arguments and results to the spans
    under the convention's names, and error texts (which quote them) to failed
    spans; off by default because they are sensitive.
    """

    def __init__(self, tracer_provider: TracerProvider | None, *, record_content: bool = False) -> None:
        self.tracer_provider = tracer_provider
        self.record_content = record_content
        self.trace_id = ""
        self.service_name: str | None = None
        self._current: str | None = None
        self._live = False
        self._run_id = ""
        self._info: RunInfo | None = None
        self._ids: dict[str, str] = {}
        self._root: Span | None = None
        self._step: Span | None = None
        self._chat: Span | None = None
        self._tools: dict[str, Span] = {}
        self._tracer: Tracer | None = None
        self._shown: list[dict[str, Any]] = []
        self._shown_count = 0

    def span_id(self) -> str | None:
        """The span the most recent fact belongs to, as 16 hex digits."""
        return self._current

    def _derived(self, key: str) -> str:
        found = self._ids.get(key)
        if found is None:
            found = self._ids[key] = derived_span_id(self._run_id, key)
        return found

    def _remember(self, key: str, span: Span) -> str:
        found = self._ids[key] = _hex(span)
        return found

    def _child(self, parent: Span | None, name: str, attributes: a.Attrs, kind: SpanKind) -> Span:
        """A span under ``parent`` (the root when none is open), never under the current context."""
        parent = parent if parent is not None else self._root
        assert self._tracer is not None
        assert parent is not None
        return self._tracer.start_span(name, trace.set_span_in_context(parent), kind, attributes)

    # -- facts ---------------------------------------------------------------

    def run_started(self, run: RunInfo) -> None:
        self._info, self._run_id = run, run.run_id
        self._ids, self._tools, self._shown, self._shown_count = {}, {}, [], 0
        self._step = self._chat = None
        provider = self.tracer_provider if self.tracer_provider is not None else trace.get_tracer_provider()
        self._tracer = provider.get_tracer(a.SCOPE)
        root = self._tracer.start_span(
            a.run_name(run.agent_name), None, a.KIND_RUN,
            a.run_start(run.run_id, run.model_name, run.provider_name, run.agent_name))
        self._live = root.is_recording()
        if self._live:
            self._root = root
            self.trace_id = format(root.get_span_context().trace_id, "032x")
            self.service_name = _service_name(provider)
            self._current = self._remember("run", root)
        else:
            root.end()
            self._root = None
            self.trace_id = derived_trace_id(run.run_id)
            self.service_name = None
            self._current = self._derived("run")

    def message_appended(self, index: int, message: Message, step: int) -> None:
        if message["role"] == "assistant":
            self._current = self._ids.get(f"chat:{step}") or self._derived(f"chat:{step}")
        elif message["role"] == "tool":
            key = f"tool:{message['tool_call_id']}"
            self._current = self._ids.get(key) or self._derived(key)
        else:
            self._current = self._ids.get("run") or self._derived("run")
        if self.record_content:
            self._shown.append(dict(message))

    def step_started(self, step: int) -> None:
        key = f"step:{step}"
        if not self._live:
            self._current = self._derived(key)
            return
        self._step = self._child(self._root, a.step_name(step), a.step_start(self._run_id, step), a.KIND_STEP)
        self._current = self._remember(key, self._step)

    def model_call_started(self, step: int, prompt_tokens: int) -> None:
        key = f"chat:{step}"
        if not self._live:
            self._current = self._derived(key)
            return
        info = self._info
        assert info is not None
        self._shown_count = len(self._shown)
        self._chat = self._child(self._step, a.chat_name(info.model_name),
                                 a.chat_start(self._run_id, step, info.model_name, info.provider_name), a.KIND_CHAT)
        self._current = self._remember(key, self._chat)

    def model_call_finished(self, info: ModelCallInfo) -> None:
        key = f"chat:{info.step}"
        if not self._live or self._chat is None:
            self._current = self._ids.get(key) or self._derived(key)
            return
        span, self._chat = self._chat, None
        self._current = self._ids[key]
        reply = info.reply
        described: dict[str, Any] | None = None
        usage = None
        if reply is not None:
            described = (describe_reply(reply) if self.record_content
                         else {"stop_reason": reply.stop_reason, "tool_calls": reply.tool_calls})
            if reply.usage is not None:
                usage = (reply.usage.input_tokens, reply.usage.output_tokens)
        attributes, status = a.chat_end(info.prompt_tokens, info.reply_tokens, usage, described,
                                        info.error, info.error_type, content=self.record_content)
        if self.record_content:
            attributes.update(a.chat_content(self._shown[:self._shown_count], described))
        span.set_attributes(attributes)
        span.set_status(status)
        span.end()

    def tool_started(self, step: int, call: ToolCall) -> None:
        key = f"tool:{call.id}"
        if not self._live:
            self._current = self._derived(key)
            return
        span = self._child(self._step, a.tool_name(call.name), a.tool_start(self._run_id, step, call.name, call.id),
                           a.KIND_TOOL)
        self._tools[call.id] = span
        self._current = self._remember(key, span)

    def tool_finished(self, info: ToolCallInfo) -> None:
        call = info.call
        key = f"tool:{call.id}"
        if not self._live:
            self._current = self._derived(key)
            return
        span = self._tools.pop(call.id, None)
        if span is None:  # refused before running: a span of zero length marks the attempt
            span = self._child(self._step, a.tool_name(call.name),
                               a.tool_start(self._run_id, info.step, call.name, call.id), a.KIND_TOOL)
            self._remember(key, span)
        self._current = self._ids[key]
        attributes, status = a.tool_end(call.name, info.observation, info.ok, info.ran,
                                       content=self.record_content)
        if self.record_content:
            attributes.update(a.tool_content(call.args, info.observation))
        span.set_attributes(attributes)
        span.set_status(status)
        span.end()

    def step_finished(self, step: int) -> None:
        key = f"step:{step}"
        if not self._live:
            self._current = self._derived(key)
            return
        self._current = self._ids.get(key) or self._derived(key)
        if self._step is not None:
            self._step.end()
            self._step = None

    def run_finished(self, result: AgentResult) -> None:
        if not self._live:
            self._current = self._derived("run")
            return
        self._current = self._ids["run"]
        for span in self._tools.values():
            span.end()
        self._tools.clear()
        for open_span in (self._chat, self._step):
            if open_span is not None:
                open_span.end()
        self._chat = self._step = None
        root, self._root = self._root, None
        if root is not None:
            attributes, status = a.run_end(result.status, result.error, content=self.record_content)
            root.set_attributes(attributes)
            root.set_status(status)
            root.end()
