"""Record a run as spans while it runs: one per run, step, model call and tool call.

Spans get an explicit parent, never the current context: tools may run on worker threads.
Only the root span takes the caller's current span as its parent.
The recorder is also the store's span source: the store asks it for span ids when it
commits, after every recorder has seen the facts it commits.
With nothing recording the run, no spans are made and the ids are derived from the run id.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Link, NonRecordingSpan, Span, SpanContext, SpanKind, TraceFlags, Tracer, TracerProvider

from .._log.ids import child_run_id, derived_span_id, derived_trace_id
from ..events import (
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
    span_key,
)
from ..messages import reply_data
from . import attrs, content

_OPENS_ROOT = (RunStarted, RunResumed)


@dataclass(frozen=True, slots=True)
class TraceLink:
    """Say where a continued run's spans attach.

    With ``joins``, a resumed run's new root goes under its first root (``span_id``) in the same trace.
    Otherwise, for a fork or a follow-up, the new trace links to the parent run's root.
    """

    trace_id: str
    span_id: str
    joins: bool


def _hex(span: Span) -> str:
    return format(span.get_span_context().span_id, "016x")


def _service_name(provider: TracerProvider) -> str | None:
    """The ``service.name`` of an SDK provider's resource (the API has no resources: None)."""
    resource = getattr(provider, "resource", None)
    name = getattr(resource, "attributes", {}).get(attrs.SERVICE_NAME)
    return name if isinstance(name, str) and name else None


class TracingRecorder:
    """Record a run as spans on ``tracer_provider``, or on the global provider when it is None.

    ``record_content`` puts messages, tool arguments, results and error texts on the spans.
    It is off by default because that content is sensitive.
    ``run_id`` names the run; ``link`` ties a resumed, forked or followed-up run to its trace.
    ``started`` gives a resumed run's ``run_started`` facts, which its new spans repeat.
    The other keywords are the older way to give some of those facts.
    """

    def __init__(self, tracer_provider: TracerProvider | None, *, record_content: bool = False, run_id: str = "",
                 link: TraceLink | None = None, segment: int = 0, model: str = "", provider: str | None = None,
                 agent_name: str | None = None, shown: list[dict[str, Any]] | None = None,
                 task: str | None = None, tool_specs: Sequence[Mapping[str, Any]] = (),
                 started: RunStarted | None = None) -> None:
        self.tracer_provider = tracer_provider
        self.record_content = record_content
        self.trace_id = ""
        self.service_name: str | None = None
        self.parent_span_id: str | None = None  # the span a started run's root joined (a child's: its call's)
        self._link = link
        self._segment = segment
        self._live = False
        self._run_id = run_id
        self._model, self._provider, self._agent = model, provider, agent_name
        self._ids: dict[str, str] = {}
        self._root: Span | None = None
        self._step: Span | None = None
        self._step_context: Any = None  # the open step span as a parent context, made once per step
        self._chat: Span | None = None
        self._tools: dict[str, Span] = {}
        self._tracer: Tracer | None = None
        self._shown: list[dict[str, Any]] = list(shown or [])
        self._shown_count = 0
        self._task = task
        self._tool_specs: list[Mapping[str, Any]] = list(tool_specs)
        self._subagents: frozenset[str] = frozenset()  # the tools whose calls run a child run
        self._labels: Mapping[str, str] = {}
        self._parent: str | None = None
        self._session: str | None = None
        self._common: attrs.Attrs = {}  # the ids every span of the run carries (``attrs.run_ids``)
        self._offered: attrs.Attrs = {}  # what every chat span repeats when content is on (``content.offered``)
        self._described = attrs.tools_described(self._tool_specs)  # each tool's span attributes, by name
        if started is not None:
            self._take(started)

    @property
    def idle(self) -> bool:
        """Say whether this recorder will ignore every later fact of the run.

        That is so when the root span is not recorded and no content is kept.
        The loop then stops handing facts over.
        """
        return self._tracer is not None and not self._live and not self.record_content

    def span_id_for(self, key: str) -> str | None:
        """The span of ``key`` in this run, as 16 hex digits."""
        return self._ids.get(key) or self._derived(key)

    def _derived(self, key: str) -> str:
        found = self._ids.get(key)
        if found is None:
            found = self._ids[key] = derived_span_id(self._run_id, key)
        return found

    def _key(self, event: Event) -> str:
        return span_key(event, self._segment)

    def _remember(self, key: str, span: Span) -> None:
        self._ids[key] = _hex(span)

    def _child(self, parent: Span | None, name: str, attributes: attrs.Attrs, kind: SpanKind) -> Span:
        """A span under ``parent`` (the root when none is open), never under the current context."""
        assert self._tracer is not None
        if parent is not None and parent is self._step and self._step_context is not None:
            return self._tracer.start_span(name, self._step_context, kind, attributes)
        parent = parent if parent is not None else self._root
        assert parent is not None
        return self._tracer.start_span(name, trace.set_span_in_context(parent), kind, attributes)

    # -- facts ---------------------------------------------------------------

    def record(self, event: Event) -> None:
        if not self._live and not self.record_content and type(event) not in _OPENS_ROOT:
            return  # nothing records this run's spans: no span, no id, no key
        if isinstance(event, (RunStarted, RunResumed)):
            self._open_root(event)
            return
        if isinstance(event, MessageAppended):
            if self.record_content:
                self._shown.append(dict(event.message))
            return
        if not self._live:
            return
        if isinstance(event, StepStarted):
            self._step = self._child(self._root, attrs.step_name(event.step),
                                     attrs.step_start(self._common, event.step), attrs.KIND_STEP)
            self._step_context = trace.set_span_in_context(self._step)  # its chat and tool spans' parent
            self._remember(self._key(event), self._step)
        elif isinstance(event, ModelCallStarted):
            self._shown_count = len(self._shown)
            self._chat = self._child(self._step, attrs.chat_name(self._model),
                                     attrs.chat_start(self._common, event.step, self._model, self._provider),
                                     attrs.KIND_CHAT)
            self._remember(self._key(event), self._chat)
        elif isinstance(event, ModelCalled):
            self._model_called(event)
        elif isinstance(event, ToolStarted):
            values = attrs.tool_start(self._common, event.step, event.name, event.call_id, self._described)
            if event.name in self._subagents:
                values.update(attrs.transfer(event.name, child_run_id(self._run_id, event.call_id)))
            span = self._child(self._step, attrs.tool_name(event.name), values, attrs.KIND_TOOL)
            self._tools[event.call_id] = span
            self._remember(self._key(event), span)
        elif isinstance(event, ToolFinished):
            self._tool_finished(event)
        elif isinstance(event, StepFinished):
            if self._step is not None:
                self._step.end()
                self._step = self._step_context = None
        elif isinstance(event, RunFinished):
            self._run_finished(event)

    def sync(self) -> None:
        pass

    def _take(self, started: RunStarted) -> None:
        """The facts of the run's ``run_started`` that its spans repeat."""
        self._model, self._provider, self._agent = started.model, started.provider, started.agent_name
        self._task, self._tool_specs = started.task, list(started.tool_specs)
        self._described = attrs.tools_described(self._tool_specs)
        self._labels, self._parent, self._session = started.labels, started.parent_run_id, started.session_id
        self._subagents = attrs.subagents(started.tool_traits)

    def _open_root(self, event: RunStarted | RunResumed) -> None:
        self._ids, self._tools, self._step, self._chat, self._step_context = {}, {}, None, None, None
        self._run_id = event.run_id or self._run_id
        if isinstance(event, RunStarted):
            self._take(event)
        else:
            self._segment += 1
            if event.model is not None:
                self._model, self._provider = event.model, event.provider
            if event.tool_traits is not None:
                self._subagents = attrs.subagents(event.tool_traits)
        provider = self.tracer_provider if self.tracer_provider is not None else trace.get_tracer_provider()
        self._tracer = provider.get_tracer(attrs.SCOPE)
        parent, links = None, None
        link = self._link
        if link is not None:
            context = SpanContext(int(link.trace_id, 16), int(link.span_id, 16), True, TraceFlags(TraceFlags.SAMPLED))
            if link.joins:
                parent = trace.set_span_in_context(NonRecordingSpan(context))
                if isinstance(event, RunStarted):  # a child run: logged, so its rebuilt root has this parent too
                    self.parent_span_id = link.span_id
            else:
                links = [Link(context)]
        self._common = attrs.run_ids(self._run_id, self._session, self._labels)
        attributes = attrs.run_start(self._common, self._model, self._provider, self._agent)
        attributes.update(attrs.run_context(self._common, self._parent))
        if isinstance(event, RunResumed):
            attributes[attrs.RESUMED_FROM] = event.reason
        if self.record_content:
            attributes.update(attrs.run_input(self._task))
            self._offered = content.offered(self._tool_specs)
        root = self._tracer.start_span(attrs.run_name(self._agent), parent, attrs.KIND_RUN, attributes, links)
        self._live = root.is_recording()
        key = self._key(event)
        if self._live:
            self._root = root
            self.trace_id = format(root.get_span_context().trace_id, "032x")
            self.service_name = _service_name(provider)
            self._remember(key, root)
        else:
            root.end()
            self._root = None
            self.service_name = None
            self.trace_id = link.trace_id if link is not None and link.joins else derived_trace_id(self._run_id)

    def _model_called(self, event: ModelCalled) -> None:
        if self._chat is None:
            return
        span, self._chat = self._chat, None
        reply = event.reply
        described: dict[str, Any] | None = None
        usage = None
        if reply is not None:
            described = (reply_data(reply) if self.record_content
                         else {"stop_reason": reply.stop_reason, "tool_calls": reply.tool_calls})
            if reply.usage is not None:
                usage = (reply.usage.input_tokens, reply.usage.output_tokens)
        attributes, status = attrs.chat_end(event.prompt_tokens, event.reply_tokens, usage, described,
                                            event.error, event.error_type, content=self.record_content)
        if event.cost_usd is not None:
            attributes.update(attrs.chat_cost(event.cost_usd, event.prompt_cost_usd, event.completion_cost_usd))
        attributes.update(attrs.chat_streamed(event.first_chunk_s))
        if self.record_content:
            attributes.update(content.chat_content(self._shown[:self._shown_count], described, self._offered))
        span.set_attributes(attributes)
        if status is not attrs.UNSET:  # a span's status is unset until set: one lock and check fewer
            span.set_status(status)
        span.end()

    def _tool_finished(self, event: ToolFinished) -> None:
        span = self._tools.pop(event.call_id, None)
        if span is None:  # refused before running: a span of zero length marks the attempt
            values = attrs.tool_start(self._common, event.step, event.name, event.call_id, self._described)
            if event.name in self._subagents:
                values.update(attrs.transfer(event.name, None))
            span = self._child(self._step, attrs.tool_name(event.name), values, attrs.KIND_TOOL)
            self._remember(self._key(event), span)
        attributes, status = attrs.tool_end(event.name, event.observation, event.ok, event.ran,
                                            content=self.record_content)
        if self.record_content:
            attributes.update(attrs.tool_content(self._args(event.call_id), event.observation))
        span.set_attributes(attributes)
        if status is not attrs.UNSET:  # a span's status is unset until set: one lock and check fewer
            span.set_status(status)
        span.end()

    def _args(self, call_id: str) -> Any:
        for message in reversed(self._shown):
            for call in message.get("tool_calls") or ():
                if call.get("id") == call_id:
                    return call.get("args")
        return None

    def _run_finished(self, event: RunFinished) -> None:
        for span in self._tools.values():
            span.end()
        self._tools.clear()
        for open_span in (self._chat, self._step):
            if open_span is not None:
                open_span.end()
        self._chat = self._step = self._step_context = None
        root, self._root = self._root, None
        if root is not None:
            attributes, status = attrs.run_end(event.status, event.error, content=self.record_content)
            if self.record_content:
                attributes.update(attrs.run_output(event.answer, event.output is not None))
            root.set_attributes(attributes)
            root.set_status(status)
            root.end()
