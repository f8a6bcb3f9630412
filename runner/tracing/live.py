"""Trace a run while it runs: its facts go to the span builder on the pump's thread, not the step's.

At the run's start the recorder asks the provider's tracer (its public attributes) for a sampling
decision and the trace; span ids come from its id generator when the store asks for them. The
spans are made by ``builder.SpanBuilder`` from the facts the store committed (with no store, as
they happen) and handed to the tracer's span processors. The run's end waits for them on its own
thread, after its close committed (``settle``): never inside a commit, which other runs' rows may share.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.trace import Link, NonRecordingSpan, SpanContext, TraceFlags, TracerProvider, TraceState

from .._log.ids import derived_span_id, derived_trace_id
from ..events import (
    Event,
    ModelCallStarted,
    RunFinished,
    RunResumed,
    RunStarted,
    StepFinished,
    span_key,
)
from . import attrs, pump
from .builder import Made, SpanBuilder

if TYPE_CHECKING:
    import asyncio

    from .._log.records import StoredRun

_OPENS_ROOT = (RunStarted, RunResumed)
_SAMPLED = TraceFlags(TraceFlags.SAMPLED)
_HOLD = 8  # commits held back at most before their spans are built (a step's end hands them over sooner)

# A committed fact as the store hands it over: its time (the store's: text on SQLite), its span id, the fact.
Committed = tuple[datetime | str | int, str, Event]


@dataclass(frozen=True, slots=True)
class TraceLink:
    """Say where a continued run's spans attach.

    With ``joins``, a resumed run's new root goes under its first root (``span_id``) in the same trace.
    Otherwise, for a fork or a follow-up, the new trace links to the parent run's root.
    ``before`` is the stored run a resume continues: what its dead part left unsent is sent first.
    """

    trace_id: str
    span_id: str
    joins: bool
    before: StoredRun | None = None


def _wake(loop: asyncio.AbstractEventLoop, done: asyncio.Future[None]) -> None:
    """On the pump's thread: tell an event loop that what it waits for is done (unless it stopped waiting)."""
    with contextlib.suppress(RuntimeError):  # the loop is closed
        loop.call_soon_threadsafe(_done, done)


def _done(done: asyncio.Future[None]) -> None:
    if not done.done():  # the run stopped waiting (it was cancelled, or its wait timed out)
        done.set_result(None)


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
        self.parent_span_id: str | None = None  # the span the run's root went under (a child's: its call's)
        self.linked_span: str | None = None  # a fork's or follow-up's link to its parent run's root
        self.fed_by_store = False  # the store hands over the facts it commits (``committed``)
        self._link = link
        self._segment = segment
        self._opened = False
        self._live = False
        self._run_id = run_id
        self._ids: dict[str, str] = {}
        self._new_id: Any = None  # the tracer's ``generate_span_id``
        self._on_end: Any = None  # the tracer's span processor's ``on_end``
        self._resource: Any = None
        self._trace: int = 0
        self._state: TraceState | None = None
        self._contexts: dict[str, SpanContext] = {}  # the parents' span contexts, made once (``rebuild.readable``)
        self._batch: list[Committed] = []  # facts as they happen, when no store hands them over
        self._held: list[Sequence[Committed]] = []  # commits not handed over yet (``committed``)
        self._readable: Any = None  # ``rebuild.readable``, once the SDK records the run
        self._unsettled = False  # the run's close went to the pump: its end waits for it (``settle``)
        self._builder = SpanBuilder(run_id, record_content=record_content, model=model, provider=provider,
                                    agent_name=agent_name)
        self._builder.task, self._builder.tool_specs = task, list(tool_specs)
        self._builder.described = attrs.tools_described(tool_specs)
        self._started = started
        self._shown = shown

    @property
    def idle(self) -> bool:
        """Say whether this recorder will ignore every later fact of the run.

        That is so once the run's root is not recorded: the loop then stops handing facts over.
        """
        return self._opened and not self._live

    def span_id_for(self, key: str) -> str | None:
        """The span of ``key`` in this run, as 16 hex digits: drawn from the tracer when it records the run."""
        return self._id(key)

    def _id(self, key: str) -> str:
        found = self._ids.get(key)
        if found is None:
            found = self._ids[key] = self._drawn(key) if self._live else derived_span_id(self._run_id, key)
        return found

    def _drawn(self, key: str) -> str:
        """A span id from the tracer's id generator; the derived one when it fails (the run's log must go on)."""
        try:
            drawn = self._new_id()
        except Exception as error:
            self._broken(error)
            drawn = 0
        if drawn.__class__ is int and 0 < drawn < 1 << 64:  # what a span id is (the SDK's generators give one)
            return format(drawn, "016x")
        return derived_span_id(self._run_id, key)

    def _broken(self, error: Exception) -> None:
        logging.getLogger("runner").error("run %s: the tracer provider failed (%s: %s); the run goes on",
                                          self._run_id, type(error).__name__, error)

    # -- facts ---------------------------------------------------------------

    def record(self, event: Event) -> None:
        kind = type(event)
        if kind is RunStarted or kind is RunResumed:
            assert isinstance(event, (RunStarted, RunResumed))
            self._open(event)
        if not self._live or self.fed_by_store or kind is ModelCallStarted:
            return
        key = span_key(event, self._segment)
        if isinstance(event, RunStarted):  # as the store would log it
            event = replace(event, parent_span_id=self.parent_span_id, linked_span=self.linked_span)
        self._batch.append((time.time_ns(), self._id(key), event))
        if kind is StepFinished:
            self._hand_over()
        elif kind is RunFinished:
            self._hand_over()
            self._unsettled = True

    def sync(self) -> None:
        if self._batch:
            self._hand_over()
        self.settle()

    def sync_later(self) -> list[asyncio.Future[None]]:
        """``sync`` for an event loop: the run's spans are waited for without blocking it."""
        if self._batch:
            self._hand_over()
        return [self.settle_after(None)] if self._unsettled else []

    def committed(self, facts: Sequence[Committed]) -> None:
        """Facts the store has just committed, in log order: their spans are built on the pump's thread."""
        if not self._live or not facts:
            return
        self._held.append(facts)
        last = type(facts[-1][2])
        if last is StepFinished or last is RunFinished or len(self._held) > _HOLD:  # a step's at once: one wake-up
            held, self._held = self._held, []
            pump.pump().put(partial(self._build_all, held))
            if last is RunFinished:
                self._unsettled = True  # waited for by the run (``settle``): this may be another run's commit

    def settle(self) -> None:
        """Once the run's close is handed over (its commit done), wait for its spans: on the run's own thread."""
        if self._unsettled:
            self._unsettled = False
            self._wait()

    def settle_after(self, commit: asyncio.Future[None] | None) -> asyncio.Future[None]:
        """``settle`` for an event loop: done once ``commit`` is, then the run's spans (the loop never blocks)."""
        import asyncio  # only async runs come here: a plain run does not load it

        return asyncio.ensure_future(self._asettle(commit))

    async def _asettle(self, commit: asyncio.Future[None] | None) -> None:
        import asyncio

        if commit is not None:
            await commit
        if not self._unsettled:
            return
        self._unsettled = False
        spans = pump.pump()
        if spans.stuck:  # a wait gave up on it already: do not wait the whole time again
            self._late()
            return
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        mark = spans.mark(partial(_wake, loop, done))
        try:
            await asyncio.wait_for(done, pump.WAIT_S)
        except TimeoutError:
            spans.gave_up(mark)
            self._late()

    def _hand_over(self) -> None:
        batch, self._batch = self._batch, []
        pump.pump().put(partial(self._build, batch))

    def _wait(self) -> None:
        if not pump.pump().wait():
            self._late()

    def _late(self) -> None:
        logging.getLogger("runner").warning("run %s: its spans were not all handed over within %s s",
                                            self._run_id, pump.WAIT_S)

    # -- the root ------------------------------------------------------------

    def _open(self, event: RunStarted | RunResumed) -> None:
        """Decide whether the run (or this part of it) is recorded, and its trace and root ids."""
        self._opened = True
        self._run_id = event.run_id or self._run_id
        resumed = isinstance(event, RunResumed)
        if resumed:
            self._segment += 1
        try:
            self._decide(event, resumed)
        except Exception as error:  # a broken sampler or id generator: the run goes on, not recorded
            self._broken(error)
            self._live, self.service_name = False, None
            self._ids.clear()
            link = self._link
            self.trace_id = link.trace_id if link is not None and link.joins else derived_trace_id(self._run_id)

    def _decide(self, event: RunStarted | RunResumed, resumed: bool) -> None:
        provider = self.tracer_provider if self.tracer_provider is not None else trace.get_tracer_provider()
        tracer = provider.get_tracer(attrs.SCOPE)
        processor = getattr(tracer, "span_processor", None)  # the SDK's tracer: public attributes
        sampler, ids = getattr(tracer, "sampler", None), getattr(tracer, "id_generator", None)
        resource = getattr(tracer, "resource", None)
        link = self._link
        parent: SpanContext | None = None
        if link is not None and link.joins:
            parent = SpanContext(int(link.trace_id, 16), int(link.span_id, 16), True, _SAMPLED)
        elif (current := trace.get_current_span().get_span_context()).is_valid:
            parent = current
        key = span_key(event, self._segment)
        self._live = False
        if link is not None and link.joins and not resumed:  # a child run: logged, so its rebuilt root has it too
            self.parent_span_id = link.span_id
        if link is not None and not link.joins:
            self.linked_span = f"{link.trace_id}:{link.span_id}"
        if processor is not None and sampler is not None and ids is not None and resource is not None:
            trace_int = parent.trace_id if parent is not None else ids.generate_trace_id()
            context = trace.set_span_in_context(NonRecordingSpan(parent)) if parent is not None else None
            links = None
            if link is not None and not link.joins:
                links = [Link(SpanContext(int(link.trace_id, 16), int(link.span_id, 16), True, _SAMPLED))]
            decision = sampler.should_sample(context, trace_int, attrs.run_name(self._builder.agent), attrs.KIND_RUN,
                                             attrs.run_ids(self._run_id, None), links)
            self._live = decision.decision.is_sampled()
            if self._live:
                from .rebuild import readable  # the SDK is loaded: a provider of its records the run

                self._readable = readable
                self._trace, self._state = trace_int, decision.trace_state
                self._new_id, self._on_end, self._resource = ids.generate_span_id, processor.on_end, resource
                self.trace_id = format(trace_int, "032x")
                name = self._resource.attributes.get(attrs.SERVICE_NAME)
                self.service_name = name if isinstance(name, str) and name else None
                self._ids[key] = format(ids.generate_span_id(), "016x")
                if parent is not None and not resumed:
                    self.parent_span_id = format(parent.span_id, "016x")
                first = self._seed(event, link)
                if first is not None:
                    pump.pump().put(first)
                return
        self.service_name = None
        self.trace_id = link.trace_id if link is not None and link.joins else derived_trace_id(self._run_id)

    def _seed(self, event: RunStarted | RunResumed, link: TraceLink | None) -> pump.Work | None:
        """What the builder must know before this part's facts: the run so far (a resume's), and the link."""
        builder = self._builder
        if isinstance(event, RunStarted):
            return None
        if link is not None and link.before is not None:
            return partial(self._replay, link.before)
        if self._started is not None:  # no stored run given: its start and messages are enough to go on
            builder.started(self._started, 0, link.span_id if link is not None else self._ids.get("run", ""))
            builder.spans.clear()
            builder.part(self._segment - 1)
            for message in self._shown or ():
                builder.saw(message)
        return None

    # -- on the pump's thread --------------------------------------------------

    def _replay(self, run: StoredRun) -> None:
        """Feed the builder the stored run; send again the spans of each part whose process died in it.

        A dead process may not have sent its part's spans (a batch waiting to go out, the root, the call
        in flight), nor a resume killed before it sent them: every part with no ``run_finished`` goes.
        Its open spans go once cut where its log stops (the next ``run_resumed``, this part's first fact).
        """
        builder = self._builder
        builder.replay(run)
        dead = [made for made in builder.done if made.segment not in builder.ended]
        builder.done.clear()
        self._ship(dead)

    def _build_all(self, held: list[Sequence[Committed]]) -> None:
        for facts in held:
            self._build(facts)

    def _build(self, facts: Sequence[Committed]) -> None:
        builder = self._builder
        feed = builder.feed
        for at, span_id, fact in facts:
            feed(fact, at, span_id)
        done, builder.done = builder.done, []
        self._ship(done)

    def _ship(self, done: list[Made]) -> None:
        if not done:
            return
        on_end, contexts, readable = self._on_end, self._contexts, self._readable
        failed: BaseException | None = None
        for made in done:  # one by one: a processor failing on one span must not cost the others
            try:
                on_end(readable(made, self._trace, self._resource, self._state, contexts))
            except BaseException as error:  # sys.exit too: on the span thread, it must cost only this span
                failed = failed or error
        if failed is not None:
            logging.getLogger("runner").error("run %s: a span processor failed: %s: %s", self._run_id,
                                              type(failed).__name__, failed, exc_info=failed)
