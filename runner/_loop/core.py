"""Decide what a run does next, once for every driver and every way a run starts.

``AgentCore.run`` yields an action; a driver performs it and sends back an ``Outcome``, so the drivers
hold no rule of their own. The core changes its ``RunState`` only by recording facts (resume starts it
from a state folded from the log). It is composed, not inherited: a reply's calls are a ``ToolCalls``
(``calls``, ``together``), the ending is ``ending``'s, over one state, as pydantic-ai splits its run into
nodes. It reads no clock: for a deadline or a cancel it asks its driver with a ``Checkpoint``.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from typing import Any

from .._log.limits import Limits
from .._log.state import RunState
from .._log.statuses import Status
from .._tools.output import OutputSpec
from .._tools.registry import ToolRegistry
from ..events import Event, MessageAppended, ModelCalled, ModelCallStarted, StepFinished, StepStarted
from ..messages import DEFAULT_SYSTEM, NO_COST, AnyModel, Message, ModelReply, Usage, assistant_message
from ..prices import Cost, Costing
from ..recorder import Recorder
from . import ending, observations, output
from .actions import BEFORE_MODEL_CALL, COMMIT, Action, CallModel, Checkpoint, EndRun, Outcome, Stop
from .calls import Approver, ToolCalls
from .children import Children
from .late import LateSink
from .replies import failed_call, output_chars, unfinished_reply
from .results import AgentResult
from .stream import Streaming
from .together import together
from .tokens import TokenMeter, tokens_for_chars
from .waits import Cancel, Watch

__all__ = ["DEFAULT_SYSTEM", "AgentCore"]



class AgentCore:
    """One run's rules. ``opening`` are the facts that start (or restart) it.

    ``watch``: a stored run's cancel requests (``runner cancel``); ``decided_by``: who owns ``approve``;
    ``children``: who runs its sub-agents' calls as child runs; ``streaming``: how a streaming model streams.

    ``checkpoints``: ask the driver at every checkpoint whether the run stops there, whatever
    the limits (replay, whose recording says where); else only where a deadline or a cancel may.
    """

    def __init__(
        self,
        model: AnyModel,
        registry: ToolRegistry,
        *,
        run_id: str,
        limits: Limits,
        recorder: Recorder,
        opening: Sequence[Event],
        state: RunState | None = None,
        cancel: Cancel | None = None,
        watch: Watch | None = None,
        approve: Approver | None = None,
        decided_by: str = "",
        meter: type[TokenMeter] = TokenMeter,
        costs: Costing | None = None,
        checkpoints: bool = False,
        late: LateSink | None = None,
        output_spec: OutputSpec | None = None,
        children: Children | None = None,
        streaming: Streaming | None = None,
    ) -> None:
        self.model, self.registry, self.limits, self.recorder = model, registry, limits, recorder
        self.cancel, self.watch, self.approve, self.opening = cancel, watch, approve, list(opening)
        self.decided_by = decided_by  # who owns ``approve``, logged with each of its decisions
        self.late = late  # where the results of tool calls given up on go, should they come after all
        self.children = children  # who runs its sub-agents' calls as child runs (None: their tools' own function)
        self.streaming = streaming  # how a model that streams is consumed (None: called for its whole reply)
        self.costs: Costing = costs if costs is not None else _no_cost
        self.run_id = run_id
        self.state = state if state is not None else RunState(run_id=run_id)
        self.output = output_spec  # the typed result the run must end with (``output_type=``), or None
        self.output_data: Any = None  # the typed result's JSON, once the run is done with it
        self.specs = registry.specs()
        if output_spec is not None and output_spec.mode == "tool":
            self.specs.append(output_spec.tool_spec())
        self.meter = meter(self.specs)
        self._record: Callable[[Event], None] = recorder.record
        self.listening = True  # False once the recorder is idle: no fact to hand over, nothing to commit
        for message in self.state.messages:
            self.meter.add(message)
        self.result: AgentResult | None = None  # set once the run's outcome is decided
        self.closed = False  # set once every recorder has been told that outcome
        # Whether to ask the driver before each model call and tool call if the run stops there: only
        # where something can stop it (a deadline, a cancel event, the store's cancel requests), or for a
        # driver that decides (replay).
        self.checkpoints = checkpoints or bool(limits.timeout_s) or cancel is not None or watch is not None
        self.calls = ToolCalls(self)

    @property
    def steps(self) -> int:
        return self.state.steps

    @property
    def messages(self) -> list[Message]:
        return self.state.messages

    def run(self) -> Generator[Action, Outcome, AgentResult]:
        """The run, as actions for a driver; an ``EndRun`` thrown in ends it where it is."""
        s = self.state
        for event in self.opening:
            self.emit(event)
        if getattr(self.recorder, "idle", False):  # a tracer with nothing recording the run: no more to tell it
            self._record, self.listening = _ignore, False
        try:
            stop = yield from self._finish_interrupted_reply()
            if stop:
                return (yield from self._end(stop))
            redo = s.open_step  # the model call of this step never came back: ask again, same step
            while True:
                stop = (yield from self.stop_at(BEFORE_MODEL_CALL)) if self.checkpoints else None
                stop = stop or self._limit_before_model_call()
                if stop:
                    return (yield from ending.finish(self, *stop))
                step = s.steps if redo else s.steps + 1
                redo = False
                self.emit(StepStarted(step=step))
                prompt_tokens = self.meter.prompt_tokens()
                if self.listening:  # the one fact only recorders read (the tracer opens the chat span)
                    self.emit(ModelCallStarted(step=step, prompt_tokens=prompt_tokens))
                    yield COMMIT
                outcome = yield CallModel(self.model, s.messages, self.specs, step)
                reply, stop = self._take_reply(step, prompt_tokens, outcome)
                if stop:
                    return (yield from ending.finish(self, *stop, exception=outcome.error))
                assert reply is not None
                if not reply.tool_calls:
                    if self.output is None:
                        return (yield from ending.finish(self, Status.DONE, None, answer=reply.content))
                    given = output.from_text(self, step, reply)
                    if given:
                        return (yield from self._end(given))
                    continue
                stop = yield from self._work_through(step)
                if stop:
                    return (yield from ending.finish(self, *stop))
                if self.output is not None:
                    given = output.from_calls(self, reply)
                    if given:
                        return (yield from self._end(given))
        except EndRun as end:
            return (yield from self.calls.end(end))

    def stop_at(self, checkpoint: Checkpoint) -> Generator[Action, Outcome, Stop | None]:
        """The stop the driver says is due at ``checkpoint``, if any (asked only with ``checkpoints`` on)."""
        outcome = yield checkpoint
        if not outcome.stop:
            return None
        return Stop(outcome.stop, outcome.reason or observations.stop_reason(outcome.stop, self.limits))

    def abort(self, exc: BaseException) -> None:
        """Close a run that an exception is leaving: first the calls being started (``ToolCalls.abort``)."""
        self.calls.abort(exc)
        ending.abort(self, exc)

    def _end(self, end: Stop | output.Given) -> Generator[Action, Outcome, AgentResult]:
        """Close the run on a stop, or ``done`` with its typed result."""
        if isinstance(end, output.Given):
            return (yield from ending.finish(self, Status.DONE, None, answer=end.answer, given=end))
        return (yield from ending.finish(self, *end))

    def _finish_interrupted_reply(self) -> Generator[Action, Outcome, Stop | output.Given | None]:
        """A resumed run first answers the calls its last reply still owes (and takes a typed result it gave)."""
        s = self.state
        # Every call answered but the step never closed (the run was killed right after a
        # side effect's result was committed): the step is closed now, not asked again.
        unclosed = s.open_step and s.reply is not None and bool(s.reply.tool_calls)
        if not s.remaining_calls and not unclosed:
            return None
        self.emit(StepStarted(step=s.reply_step))
        if s.resumed_from in (Status.OUTPUT_BUDGET, Status.INVALID_REPLY):
            for call in s.remaining_calls:  # a cut-off or oversized reply: its calls are never run
                self.calls.observe(s.reply_step, call, observations.not_run(s.resumed_error), "not_run")
            self.emit(StepFinished(step=s.reply_step))
            return None
        reply = s.reply
        stop = yield from self._work_through(s.reply_step)
        if stop or self.output is None:
            return stop
        return output.from_calls(self, reply)

    def _work_through(self, step: int) -> Generator[Action, Outcome, Stop | None]:
        """Answer the reply's remaining calls: together when more than one may run at once, else one by one."""
        s = self.state
        calls = self.calls
        if calls.max_parallel_tools > 1 and s.reply is not None and len(s.reply.tool_calls) - s.next_call > 1:
            return (yield from together(calls, step))
        for call in s.remaining_calls:  # each in turn, the next once the last is logged
            stop = yield from calls.handle(step, call)
            if stop:
                return stop
        self.emit(StepFinished(step=step))
        return None

    def _limit_before_model_call(self) -> Stop | None:
        lim, s = self.limits, self.state
        made = s.steps - 1 if s.open_step else s.steps  # an open step's model call never came back
        if made >= lim.max_steps:
            return Stop(Status.STEP_LIMIT, f"made {made} model calls (max_steps={lim.max_steps})")
        if lim.max_context_chars is not None and self.meter.context_chars > lim.max_context_chars:
            return Stop(Status.CONTEXT_BUDGET, f"context holds {self.meter.context_chars} characters "
                                               f"(max_context_chars={lim.max_context_chars})")
        if lim.max_cost_usd is not None and s.tree_cost_usd >= lim.max_cost_usd:
            return Stop(Status.COST_LIMIT,
                        f"cost ${s.tree_cost_usd:.4f} has reached max_cost_usd=${lim.max_cost_usd:g}")
        prompt = self.meter.prompt_tokens()
        spent = s.spent + s.children_spent  # its sub-agents' child runs count too
        if spent + prompt > lim.token_budget:
            return Stop(Status.TOKEN_BUDGET, f"next prompt of ~{prompt} tokens would bring the run to "
                                             f"{spent + prompt} (token_budget={lim.token_budget})")
        return None

    def _over_cost(self, reply: ModelReply, cost: Cost | None) -> Stop | None:
        """The cost limit: the run's known cost has reached ``max_cost_usd``, or the reply's cost is unknown.

        A budget fails closed: a reply it cannot count (no usage reported, or no price) stops the run
        as one that crossed it does, a final answer too. The reply's calls do not run; a resume runs them.
        """
        limit, spent = self.limits.max_cost_usd, self.state.tree_cost_usd
        if limit is None:
            return None
        if cost is None:
            missing = ("the provider reported no token usage" if reply.usage is None
                       else "there is no price for the model")
            return Stop(Status.COST_LIMIT, f"the reply's cost is unknown ({missing}), so max_cost_usd=${limit:g} "
                                           "cannot be counted; the reply's calls were not run")
        if spent < limit:
            return None
        return Stop(Status.COST_LIMIT, f"cost ${spent:.4f} reached max_cost_usd=${limit:g}; the reply's calls "
                                       "were not run")

    def _take_reply(self, step: int, prompt_tokens: int, outcome: Outcome) -> tuple[ModelReply | None, Stop | None]:
        """Validate and append a reply; return the stop it causes, if any."""
        failed = failed_call(outcome, self.state.seen_ids, self.limits)
        if failed is not None:
            error, error_type, shown, stop = failed
            cost = self.costs(shown.usage if shown is not None else None)
            self.emit(ModelCalled(step=step, prompt_tokens=prompt_tokens, latency_s=outcome.elapsed_s,
                                   reply=shown, error=error, error_type=error_type,
                                   **(cost.facts() if cost else NO_COST)))
            return None, stop
        reply: ModelReply = outcome.value
        message = assistant_message(reply)
        self.emit(MessageAppended(step=step, index=len(self.state.messages), message=message))
        cost = self.costs(reply.usage)
        self.emit(ModelCalled(step=step, prompt_tokens=prompt_tokens,
                               reply_tokens=tokens_for_chars(self.meter.last_chars),  # its JSON, measured once
                               latency_s=outcome.elapsed_s, reply=reply, first_chunk_s=outcome.first_chunk_s,
                               **(cost.facts() if cost else NO_COST)))
        over = self._over_cost(reply, cost)
        if over is not None:
            return reply, over
        cut = unfinished_reply(reply)
        if cut:
            return reply, Stop(Status.INVALID_REPLY, cut)
        limit = self.limits.max_output_chars
        if limit is not None and output_chars(reply) > limit:
            return reply, Stop(Status.OUTPUT_BUDGET, f"reply of {output_chars(reply)} characters "
                                                     f"(max_output_chars={limit}); its calls were not run")
        return reply, None

    def emit(self, event: Event) -> None:
        """Apply ``event`` to the run's state, then tell the recorder (the one way a fact enters the run)."""
        self.state.apply(event)
        if isinstance(event, MessageAppended):
            self.meter.add(event.message)
        self._record(event)


def _no_cost(usage: Usage | None) -> Cost | None:
    return None


def _ignore(event: Event) -> None:
    pass
