"""A reply's tool calls: the verdict on each, running them one at a time, and logging what each gave.

``ToolCalls`` is the core's tool-call part, over the core's one state; running several at once
is ``together``'s. Each check a call goes through (finished before, refused, in doubt, a repeat,
the tool budget, an approval) is made here once, in ``verdict``, for both ways of running a
reply's calls. It owns the calls being started and those in flight.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Generator, Set
from typing import TYPE_CHECKING, NamedTuple

from .._log.statuses import Status
from .._text import describe_exception
from .._tools.args import tool_args
from .._tools.doubt import may_run_again
from .._tools.output import FINAL_RESULT
from .._tools.registry import Tool, failure_observation, result_observation, timeout_observation
from ..events import ApprovalDecided, ApprovalRequested, MessageAppended, ToolFinished, ToolStarted
from ..messages import ToolCall, tool_message
from . import ending, observations, output
from .actions import COMMIT, Action, CallTool, Checkpoint, EndRun, Outcome, RunTools, Stop
from .children import ChildCall, ChildEnded, halt_of
from .results import AgentResult
from .tokens import cut_observation

if TYPE_CHECKING:
    from .core import AgentCore

Approver = Callable[[ToolCall], "bool | str | None"]


class Refusal(NamedTuple):
    """A call that is not run: the observation the model reads, and why (``ToolFinished.refused``).

    ``refused`` None: a ``final_result`` call taken as the run's typed result, answered with no tool to run.
    """

    observation: str
    refused: str | None


# What ``verdict`` says of a call: run it with this tool, refuse it, stop the run, or wait for a decision.
WAIT = "wait"
CallVerdict = Tool | Refusal | Stop | str


class ToolCalls:
    """The tool-call part of a core: the checks on a call, running it, and logging what it gave."""

    def __init__(self, core: AgentCore) -> None:
        self.core = core
        self.state, self.registry, self.limits, self.run_id = core.state, core.registry, core.limits, core.run_id
        self.emit, self.approve, self.checkpoints = core.emit, core.approve, core.checkpoints
        self.output = core.output if core.output is not None and core.output.mode == "tool" else None
        self.max_parallel_tools = core.limits.max_parallel_tools  # read once: the loop asks at every reply
        # The calls whose ``tool_started`` are being committed: their tools have not been handed over yet.
        self.starting: tuple[int, tuple[ToolCall, ...]] | None = None
        self.flying: dict[str, tuple[int, ToolCall]] = {}  # the calls run together in flight, by id, with their step

    def handle(self, step: int, call: ToolCall) -> Generator[Action, Outcome, Stop | None]:
        """Answer one call of the reply: run it, refuse it, or say the run stops or waits."""
        s = self.state
        finished = s.finished_calls.get(call.id)
        if finished is not None:  # answered before the process stopped: never run again
            self.emit(MessageAppended(step=step, index=len(s.messages),
                                      message=tool_message(call, finished.observation)))
            return None
        if self.checkpoints:
            stop = yield from self.core.stop_at(Checkpoint(call))
            if stop:
                return stop
        found = self.verdict(call, s.repeats_if(s.key_of(call)), s.tool_calls_run, True)
        if isinstance(found, Tool):
            return (yield from self._run_tool(step, call, found))
        if isinstance(found, Refusal):
            self.observe(step, call, found.observation, found.refused)
            return None
        if isinstance(found, Stop):
            return found
        return self.await_approval(step)

    def verdict(self, call: ToolCall, repeats: int, calls_run: int, ask: bool) -> CallVerdict:
        """What becomes of ``call`` (not finished before): its tool to run, a refusal, a stop, or ``WAIT``.

        ``repeats`` is how many identical calls in a row it would make, ``calls_run`` how many
        tool calls ran before it. ``ask``: put a call needing approval to the ``approve`` callback.
        """
        s = self.state
        if self.output is not None and call.name == FINAL_RESULT:  # the typed result: judged, never run
            return output.judge(self.output, call)
        tool = self.registry.get(call.name)
        refused = self.registry.check(call.name, call.args)
        if refused is not None:
            return Refusal(refused, "unknown_tool" if tool is None else "invalid_args")
        assert tool is not None
        in_doubt = s.in_doubt(call.id)
        if in_doubt and not may_run_again(s.started_traits.get(call.id), tool):
            return Refusal(observations.IN_DOUBT, "in_doubt")
        allowed = self.limits.max_identical_calls
        if not in_doubt and repeats > allowed:
            return Refusal(observations.repeated(call.name, allowed), "repeat")
        lim = self.limits.max_tool_calls
        if lim is not None and calls_run >= lim:
            return Stop(Status.TOOL_BUDGET, f"call {call.id} ({call.name}) would be tool call "
                                            f"{calls_run + 1} (max_tool_calls={lim}); not run")
        if not in_doubt and (tool.needs_approval or call.id in s.decisions):
            verdict = s.decisions.get(call.id)
            if tool.needs_approval and verdict is None:
                verdict = self.approve(call) if self.approve is not None and ask else None
                if verdict is None:
                    return WAIT
                # The callback's decision is logged as any other, so it outlives this process.
                self.emit(ApprovalDecided(step=s.reply_step, call_id=call.id, approved=verdict is True,
                                          reason=verdict if isinstance(verdict, str) else None,
                                          decided_by=self.core.decided_by))
            if verdict is not True:  # a denial given holds, even where the registry no longer asks for one
                return Refusal(observations.denied(call.name, verdict), "denied")
        return tool

    def _run_tool(self, step: int, call: ToolCall, tool: Tool) -> Generator[Action, Outcome, Stop | None]:
        started = self.state.started_calls.get(call.id)
        listening = self.core.listening
        if listening:  # from here until its start is committed, an abort logs the call not run
            self.starting = (step, (call,))  # (a recorder may raise on the start after the store took it)
        self.emit(ToolStarted(step=step, call_id=call.id, name=call.name, args=call.args,
                              attempt=1 if started is None else started.attempt + 1))
        if listening:
            yield COMMIT  # should this commit fail, the run is aborted with the tool never run (``abort``)
            self.starting = None
        outcome = yield self.call_tool(step, call, tool)
        if outcome.stop:
            self.cut_short(step, call, outcome)
            reason = outcome.reason or observations.stop_reason(outcome.stop, self.limits, f"tool {call.name}")
            return Stop(outcome.stop, reason)
        halt = halt_of(outcome.value)
        if halt is not None:  # the child waits (an approval, the tree's budget): the call stays open
            return halt
        observation = self.settle(step, call, tool, outcome)
        self.emit(MessageAppended(step=step, index=len(self.state.messages), message=tool_message(call, observation)))
        if tool.side_effects and listening:  # its outcome is known now: never leave it in doubt
            yield COMMIT
        return None

    def call_tool(self, step: int, call: ToolCall, tool: Tool) -> CallTool:
        """The action that runs ``call`` with ``tool``: a sub-agent's carries its child, with the budget left."""
        args = tool_args(tool, call.args, self.run_id, call.id)
        agent = tool.agent
        if agent is None:
            return CallTool(tool, call, args)
        s, limits = self.state, self.limits
        cost_left = None if limits.max_cost_usd is None else max(limits.max_cost_usd - s.tree_cost_usd, 0.0)
        child = ChildCall(agent, call, str(call.args.get("task", "")), self.run_id, step, s.segment,
                          max(limits.token_budget - s.tree_spent, 0), cost_left)
        return CallTool(tool, call, args, child)

    def announce(self, step: int, call: ToolCall) -> None:
        """Log that ``call`` is about to run (its attempt counts the starts the log holds)."""
        started = self.state.started_calls.get(call.id)
        self.emit(ToolStarted(step=step, call_id=call.id, name=call.name, args=call.args,
                              attempt=1 if started is None else started.attempt + 1))

    def settle(self, step: int, call: ToolCall, tool: Tool, outcome: Outcome) -> str:
        """Log the observation of a call that returned, timed out or raised; the observation as logged.

        It is not in the conversation yet: the caller appends it, in the reply's order.
        """
        if outcome.observation is not None:  # logged as it was given: a recorded one was cut already
            return self.finished(step, call, outcome.observation, None, outcome.elapsed_s, cut=False)
        if isinstance(outcome.value, ChildEnded):  # a sub-agent's call: its child's answer, and what the tree spent
            ended = outcome.value
            return self.finished(step, call, ended.observation, None, outcome.elapsed_s, child=ended)
        if outcome.timed_out:
            observation = timeout_observation(call.name, tool.timeout_s or 0.0)
        elif outcome.error is not None:
            observation = failure_observation(call.name, outcome.error)
        else:
            observation = result_observation(call.name, outcome.value)
        return self.finished(step, call, observation, None, outcome.elapsed_s)

    def cut_short(self, step: int, call: ToolCall, outcome: Outcome) -> None:
        """Log a call the driver gave up waiting on (a deadline, a cancel): its outcome is unknown.

        A sub-agent's call is left open instead: its child stops on the same deadline or cancel and
        logs how, and a resume goes on in it.
        """
        assert outcome.stop is not None
        tool = self.registry.get(call.name)
        if tool is not None and tool.agent is not None:
            return
        self.emit(ToolFinished(step=step, call_id=call.id, name=call.name,
                               observation=observations.abandoned(call.name, outcome.stop), ok=False,
                               duration_s=outcome.elapsed_s))

    def observe(self, step: int, call: ToolCall, observation: str, refused: str | None,
                duration_s: float = 0.0, cut: bool = True) -> None:
        """Log a call's observation and append it as the call's tool message."""
        observation = self.finished(step, call, observation, refused, duration_s, cut)
        self.emit(MessageAppended(step=step, index=len(self.state.messages), message=tool_message(call, observation)))

    def finished(self, step: int, call: ToolCall, observation: str, refused: str | None,
                 duration_s: float = 0.0, cut: bool = True, child: ChildEnded | None = None) -> str:
        """Log a call's ``tool_finished``; the observation as logged (cut to ``max_result_chars`` if ``cut``).

        ``child``: a sub-agent's call's child run, whose tree's tokens and cost the fact carries.
        """
        ok = not observation.startswith("ERROR:")  # judged on the whole text: a cut may shorten "ERROR:"
        if cut:
            observation = cut_observation(observation, self.limits.max_result_chars)
        if child is None:
            self.emit(ToolFinished(step=step, call_id=call.id, name=call.name, observation=observation,
                                   ok=ok, duration_s=duration_s, ran=refused is None, refused=refused))
        else:
            self.emit(ToolFinished(step=step, call_id=call.id, name=call.name, observation=observation, ok=ok,
                                   duration_s=duration_s, child_run_id=child.run_id, child_tokens=child.tokens,
                                   child_cost_usd=child.cost_usd))
        if self.output is not None and refused is not None:
            output.rejected(self.core, step, call, refused, observation)
        return observation

    def abort(self, exc: BaseException) -> None:
        """Log the calls whose starts were being committed as not run: ``exc`` is closing the run.

        Such a call's tool was never called, for instance when the commit failed or on Ctrl-C.
        A resume must not show it as in doubt, or a side effect's call would be refused.
        """
        starting, self.starting = self.starting, None
        if starting is not None and not self.core.closed and self.core.result is None:
            step, calls = starting
            with contextlib.suppress(Exception):  # a failing recorder: the close below still goes on
                reason = f"the run was aborted by {describe_exception(exc)} before the call was made"
                for call in calls:
                    self.finished(step, call, observations.not_run(reason), "not_run")
                self.answer_due(step)

    def end(self, end: EndRun) -> Generator[Action, Outcome, AgentResult]:
        """Close the run at its driver's word, in place of performing ``end.instead_of``.

        Replay ends a run this way where it diverges from its recording. Each call handed
        over for running is logged as not run first (its start is already logged), and a
        call still in flight as cut short; then the run closes as the loop's own stops do.
        """
        s, instead_of = self.state, end.instead_of
        handed: tuple[ToolCall, ...] = (instead_of.call,) if isinstance(instead_of, CallTool) else ()
        if isinstance(instead_of, RunTools):
            handed = tuple(action.call for action in instead_of.start)
        for call in handed:
            self.flying.pop(call.id, None)
            self.finished(s.started_calls[call.id].step, call, observations.not_run(end.reason), "not_run")
        flying, self.flying = self.flying, {}
        for step, call in flying.values():
            self.cut_short(step, call, Outcome(stop=end.status))
        if handed:
            self.answer_due(s.started_calls[handed[0].id].step, frozenset(flying))
        return (yield from ending.finish(self.core, end.status, end.reason, exception=end.exception))

    def answer_due(self, step: int, cut: Set[str] = frozenset()) -> None:
        """Append the observations now due, in the reply's order: up to the first call still unanswered.

        A call in ``cut`` was given up on: its observation enters the conversation on a resume.
        """
        s = self.state
        calls = s.reply.tool_calls if s.reply is not None else []
        while s.next_call < len(calls):
            call = calls[s.next_call]
            finished = s.finished_calls.get(call.id)
            if finished is None or call.id in cut:
                return
            self.emit(MessageAppended(step=step, index=len(s.messages),
                                      message=tool_message(call, finished.observation)))

    def await_approval(self, step: int) -> Stop:
        """Log every remaining call that waits for a decision, so all can be decided at once."""
        s = self.state
        waiting = [c for c in s.remaining_calls if (t := self.registry.get(c.name)) is not None
                   and t.needs_approval and c.id not in s.decisions and not s.in_doubt(c.id)
                   and c.id not in s.finished_calls]
        for call in waiting:
            if call.id not in s.pending_approvals:
                self.emit(ApprovalRequested(step=step, call_id=call.id, name=call.name, args=call.args))
        first = waiting[0]
        more = f" (and {len(waiting) - 1} more)" if len(waiting) > 1 else ""
        return Stop(Status.AWAITING_APPROVAL, f"call {first.id} ({first.name}) needs approval{more}")
