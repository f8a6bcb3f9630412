"""``stream_agent`` and its kin: a run as the events a caller watches, while it runs.

The run is the ordinary one, built as ``run_agent`` builds it with streaming on, driven on a thread
of its own (``astream_agent``: a task); its facts and its reply's pieces of text become the events
yielded (``StreamRecorder``), and its result ends them (``RunEnded``). Leaving the iterator early
sets the run's cancel: it stops cleanly, ``cancelled``, before the iterator closes.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Unpack, cast

from .. import events
from .._loop.aio import arun_core
from .._loop.core import AgentCore
from .._loop.results import AgentResult
from .._loop.stream import Listen
from .._loop.sync import run_core
from .._tools.registry import ToolRegistry
from ..messages import DEFAULT_SYSTEM, AsyncModel, Model, ToolCall
from ..recorder import FanoutRecorder
from .build import NOT_GIVEN, ContinueOptions, NotGiven, RunOptions, build_core

if TYPE_CHECKING:
    from .._log.decisions import Decision
    from ..store import RunStore


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of the reply of step ``step``, as the model wrote it."""

    step: int
    text: str


@dataclass(frozen=True, slots=True)
class ToolStarted:
    """Call ``call`` of step ``step`` is about to run (its start is logged)."""

    step: int
    call: ToolCall


@dataclass(frozen=True, slots=True)
class ToolFinished:
    """Call ``call_id`` got its observation ``content`` (``ok``: not an ``ERROR:``), refused calls too."""

    step: int
    call_id: str
    name: str
    content: str
    ok: bool


@dataclass(frozen=True, slots=True)
class StepFinished:
    """Step ``step`` is over: its reply and the calls it asked for."""

    step: int


@dataclass(frozen=True, slots=True)
class RunEnded:
    """The run is over: its ``result``, always the last event."""

    result: AgentResult


StreamEvent = TextDelta | ToolStarted | ToolFinished | StepFinished | RunEnded


class StreamRecorder:
    """Turn a run's facts and its reply's pieces into ``StreamEvent``s handed to ``put``."""

    def __init__(self, put: Callable[[StreamEvent], None]) -> None:
        self.put = put

    def record(self, event: events.Event) -> None:
        match event:
            case events.ToolStarted(step=step, call_id=call_id, name=name, args=args):
                self.put(ToolStarted(step, ToolCall(call_id, name, args)))
            case events.ToolFinished(step=step, call_id=call_id, name=name, observation=observation, ok=ok):
                self.put(ToolFinished(step, call_id, name, observation, ok))
            case events.StepFinished(step=step):
                self.put(StepFinished(step))
            case _:
                pass

    def sync(self) -> None:
        pass

    def piece(self, step: int, text: str) -> None:
        self.put(TextDelta(step, text))


class _Stop:
    """The cancel a streamed run gets beside the caller's: set when the iterator is left early.

    Leaving lets a tool call under way finish (none is left in doubt); the caller's own cancel cuts as it would.
    """

    def __init__(self, caller: Any) -> None:
        self.caller, self.left = caller, threading.Event()
        self.lets_tools_finish = caller is None or bool(getattr(caller, "lets_tools_finish", False))

    def is_set(self) -> bool:
        return self.left.is_set() or (self.caller is not None and bool(self.caller.is_set()))




def _wired(options: Mapping[str, Any], put: Callable[[StreamEvent], None]) -> tuple[dict[str, Any], StreamRecorder,
                                                                                    _Stop]:
    """``options`` with the stream's recorder and cancel beside the caller's own."""
    recorder, stop = StreamRecorder(put), _Stop(options.get("cancel"))
    given = options.get("recorder")
    wired = {**options, "recorder": recorder if given is None else FanoutRecorder([given, recorder]), "cancel": stop}
    return wired, recorder, stop


def _streamed(build: Callable[[dict[str, Any], Listen], AgentCore], options: Mapping[str, Any]
              ) -> Iterator[StreamEvent]:
    """Build the core now (bad options raise here), then drive it on a thread while its events are yielded."""
    ready: queue.SimpleQueue[StreamEvent | BaseException] = queue.SimpleQueue()
    wired, recorder, stop = _wired(options, ready.put)
    core = build(wired, recorder.piece)

    def drive() -> None:
        try:
            ready.put(RunEnded(run_core(core)))
        except BaseException as exc:  # handed to the caller's thread, never lost on this one
            ready.put(exc)

    thread = threading.Thread(target=drive, name=f"runner-stream-{core.run_id[:8]}", daemon=True)
    thread.start()
    return _events(ready, stop, thread)


def _events(ready: queue.SimpleQueue[StreamEvent | BaseException], stop: _Stop,
            thread: threading.Thread) -> Iterator[StreamEvent]:
    try:
        while True:
            event = ready.get()
            if isinstance(event, BaseException):
                raise event
            yield event
            if isinstance(event, RunEnded):
                return
    finally:
        if thread.is_alive():  # left early: the run stops, cancelled, and is logged so before we go
            stop.left.set()
            thread.join()


async def _astreamed(build: Callable[[dict[str, Any], Listen], AgentCore], options: Mapping[str, Any]
                     ) -> AsyncIterator[StreamEvent]:
    ready: asyncio.Queue[StreamEvent | BaseException] = asyncio.Queue()
    wired, recorder, stop = _wired(options, ready.put_nowait)
    core = build(wired, recorder.piece)

    async def drive() -> None:
        try:
            ready.put_nowait(RunEnded(await arun_core(core)))
        except BaseException as exc:
            ready.put_nowait(exc)

    task = asyncio.ensure_future(drive())
    try:
        while True:
            event = await ready.get()
            if isinstance(event, BaseException):
                raise event
            yield event
            if isinstance(event, RunEnded):
                return
    finally:
        if not task.done():
            stop.left.set()
            await asyncio.shield(task)


def stream_agent(task: str, model: Model, registry: ToolRegistry, system: str = DEFAULT_SYSTEM,
                 max_steps: int | NotGiven = NOT_GIVEN, token_budget: int | NotGiven = NOT_GIVEN,
                 **options: Unpack[RunOptions]) -> Iterator[StreamEvent]:
    """Run ``task`` as ``run_agent`` does, yielding its events as they happen: ``TextDelta``s, tools, ``RunEnded``.

    A model with ``stream`` is consumed piece by piece (each piece a ``TextDelta`` at once, logged
    in batches as ``model_delta``); one without streams nothing but the other events. Bad options
    raise here, before anything runs. Leaving the loop early cancels the run (docs/streaming.md).
    """
    return _streamed(lambda wired, listen: build_core(task, model, registry, system, max_steps, token_budget,
                                                      listen=listen, **wired), options)


def astream_agent(task: str, model: Model | AsyncModel, registry: ToolRegistry, system: str = DEFAULT_SYSTEM,
                  max_steps: int | NotGiven = NOT_GIVEN, token_budget: int | NotGiven = NOT_GIVEN,
                  **options: Unpack[RunOptions]) -> AsyncIterator[StreamEvent]:
    """``stream_agent`` as ``arun_agent`` runs: an async iterator; ``astream`` models stream on the event loop."""
    return _astreamed(lambda wired, listen: build_core(task, model, registry, system, max_steps, token_budget,
                                                       listen=listen, **wired), options)


def stream_resume(store: RunStore, run_id: str, model: Model, registry: ToolRegistry, *,
                  decisions: Mapping[str, Decision] | None = None, max_steps: int | None = None,
                  token_budget: int | None = None, **options: Unpack[ContinueOptions]) -> Iterator[StreamEvent]:
    """``resume``, yielding its events as ``stream_agent`` does (the store is read and the run claimed here)."""
    from .resume import resumed_core

    run = store.get_run(run_id)
    return _streamed(lambda wired, listen: resumed_core(store, run, model, registry, decisions=decisions,
                                                        max_steps=max_steps, token_budget=token_budget,
                                                        listen=listen, **wired), options)


def astream_resume(store: RunStore, run_id: str, model: Model | AsyncModel, registry: ToolRegistry, *,
                   decisions: Mapping[str, Decision] | None = None, max_steps: int | None = None,
                   token_budget: int | None = None, **options: Unpack[ContinueOptions]
                   ) -> AsyncIterator[StreamEvent]:
    """``aresume``, yielding its events as ``astream_agent`` does."""
    from .resume import resumed_core

    run = store.get_run(run_id)
    return _astreamed(lambda wired, listen: resumed_core(store, run, model, registry, decisions=decisions,
                                                         max_steps=max_steps, token_budget=token_budget,
                                                         listen=listen, **wired), options)


def stream_fork(store: RunStore, run_id: str, *, at_step: int, model: Model, registry: ToolRegistry,
                observations: Mapping[str, str] | None = None, max_steps: int | None = None,
                token_budget: int | None = None, **options: Unpack[ContinueOptions]) -> Iterator[StreamEvent]:
    """``fork``, yielding the new run's events as ``stream_agent`` does."""
    from .resume import forked_core

    return _streamed(lambda wired, listen: forked_core(store, run_id, at_step, model, registry, observations,
                                                       max_steps, token_budget, _continue(wired), listen), options)


def stream_follow_up(store: RunStore, run_id: str, message: str, model: Model, registry: ToolRegistry, *,
                     max_steps: int | None = None, token_budget: int | None = None,
                     **options: Unpack[ContinueOptions]) -> Iterator[StreamEvent]:
    """``follow_up``, yielding the new run's events as ``stream_agent`` does."""
    from .resume import followed_core

    return _streamed(lambda wired, listen: followed_core(store, run_id, message, model, registry, max_steps,
                                                         token_budget, _continue(wired), listen), options)


def _continue(wired: dict[str, Any]) -> ContinueOptions:
    return cast("ContinueOptions", wired)


def astream_fork(store: RunStore, run_id: str, *, at_step: int, model: Model | AsyncModel, registry: ToolRegistry,
                 observations: Mapping[str, str] | None = None, max_steps: int | None = None,
                 token_budget: int | None = None, **options: Unpack[ContinueOptions]) -> AsyncIterator[StreamEvent]:
    """``afork``, yielding the new run's events as ``astream_agent`` does."""
    from .resume import forked_core

    return _astreamed(lambda wired, listen: forked_core(store, run_id, at_step, model, registry, observations,
                                                        max_steps, token_budget, _continue(wired), listen), options)


def astream_follow_up(store: RunStore, run_id: str, message: str, model: Model | AsyncModel,
                      registry: ToolRegistry, *, max_steps: int | None = None, token_budget: int | None = None,
                      **options: Unpack[ContinueOptions]) -> AsyncIterator[StreamEvent]:
    """``afollow_up``, yielding the new run's events as ``astream_agent`` does."""
    from .resume import followed_core

    return _astreamed(lambda wired, listen: followed_core(store, run_id, message, model, registry, max_steps,
                                                          token_budget, _continue(wired), listen), options)
