"""Perform the loop's actions from a recording: the replay driver, beside the sync and async ones.

The ``ReplayModel`` answers ``CallModel`` with the recorded reply, once what the loop shows matches.
``CallTool`` runs the tool for real; a side effect gets its recorded observation, a sub-agent's call its
child's recording replayed (``subagents``). The approver's answers are the recording's (``recorded_approver``),
and a ``Checkpoint`` stops where the recorded part stopped. A divergence is returned, never raised: the
driver ends the run there with an ``EndRun``, through the one drive loop.
"""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING, NamedTuple

from .._log.statuses import Status
from .._loop import observations
from .._loop.actions import Action, CallModel, CallTool, Checkpoint, EndRun, Outcome, RunTools
from .._loop.calls import Approver
from .._loop.core import AgentCore
from .._loop.drive import drive
from .._loop.flight import with_call
from .._loop.results import AgentResult
from .._loop.sync import SyncDriver
from .._text import describe_exception
from .._tools.args import idempotency_key
from ..errors import ReplayDivergence
from ..messages import Message, ModelReply, ToolCall, ToolSpec
from .fixture import CRASHED, INTERRUPTIBLE
from .parts import PartEnd
from .scripted import RecordedStop, ReplayModel

if TYPE_CHECKING:
    from .subagents import ReplayChildren

# Why a crashed part is stopped without a call in doubt: the recorded process stopped there.
CRASH_REASON = "the recorded process stopped here"
# Why a side effect the recording has no result for is not run (a lenient replay goes on past such a call).
NOT_SERVED = ("replay serves the recorded result of a tool with side effects, and the recording has none for "
              "this call")


class PartResult(NamedTuple):
    """Say how a replayed part ended, and which divergence ended it, if one did.

    ``result`` is None where the part gave up because the recorded process died.
    """

    result: AgentResult | None
    divergence: ReplayDivergence | None


class DueStop(NamedTuple):
    """Hold a recorded stop with an outside cause, to reproduce at a checkpoint.

    It comes once the part's replies are played: before ``call_id``, or before the next model call when None.
    """

    status: Status
    reason: str
    call_id: str | None


class ReplayDriver:
    """Drives one part of a replay: ``core`` until it ends as the recording's part did (``end``).

    ``children`` answers the run's sub-agent calls by replaying their children's recordings.
    """

    def __init__(self, core: AgentCore, model: ReplayModel, end: PartEnd, live_side_effects: bool = False,
                 children: ReplayChildren | None = None) -> None:
        self.core, self.model, self.end, self.live_side_effects = core, model, end, live_side_effects
        self.children = children
        self.due = due_stop(model, end)
        self.sync = SyncDriver(core)  # the replay's own deadline and cancel event, and its calls in flight
        self.flight = self.sync.flight
        self.diverged: ReplayDivergence | None = None

    def drive(self) -> PartResult:
        """Perform the core's actions until it returns, diverges, or gives up where the recorded process died.

        The core must have been built with ``checkpoints`` on and ``recorded_approver``'s approver.
        """
        try:
            return PartResult(drive(self.core, self.performed), self.diverged)
        finally:
            self.sync.ended()  # a call given up on that returns later is logged as the replay's own

    def performed(self, action: Action) -> Outcome | EndRun | None:
        """``perform`` for ``drive``: a divergence ends the run there, in place of ``action``."""
        done = self.perform(action)
        if not isinstance(done, ReplayDivergence):
            return done
        self.diverged = done
        # The recorded model has no reply for what the loop showed: a model error, with no reply.
        return EndRun(Status.MODEL_ERROR, describe_exception(done), done, instead_of=action)

    def perform(self, action: Action) -> Outcome | ReplayDivergence | None:
        """The outcome of ``action``, the divergence it shows, or None to give up as the recorded process died."""
        match action:
            case CallModel(messages=messages, specs=specs):
                return self._answer(messages, specs)
            case Checkpoint(call=call):
                return self._checkpoint(call)
            case CallTool(tool=tool, call=call):
                if self._died_in(call):
                    return None  # the recorded process died with this call handed over
                if self._cut_in_recording(call):
                    return self._cut_short()
                if self._replays_child(action):  # it checks the call was recorded: it may have been left open
                    assert self.children is not None
                    return self.children.answer(self.core, action, self.sync.waits)
                unrecorded = self.model.unrecorded(call) if self.model.strict else None
                if unrecorded is not None:
                    return unrecorded
                if tool.side_effects and not self.live_side_effects:
                    return self._served(call)
                return self.sync.perform(self._keyed(action))
            case RunTools(start=start):
                return self._together(start)
            case _:
                return self.sync.perform(action)

    def _together(self, start: tuple[CallTool, ...]) -> Outcome | ReplayDivergence | None:
        """``RunTools`` as the recording had it: a call the recorded process died in never ends.

        A call the recording did not make diverges before any of ``start`` runs, and so does a
        sub-agent's child (their replays come first, one after another). Once only such
        never-ending calls are left, the replay gives up there, as the process died.
        """
        children = [action for action in start if self._replays_child(action)]
        replayed = {action.call.id for action in children}
        if self.model.strict:
            for action in start:
                skip = self._died_in(action.call) or action.call.id in replayed
                unrecorded = None if skip else self.model.unrecorded(action.call)
                if unrecorded is not None:
                    return unrecorded
        for action in children:
            assert self.children is not None
            found = self.children.answer(self.core, action, self.sync.waits)
            if isinstance(found, ReplayDivergence):
                return found
            self.flight.answer(with_call(found, action.call.id))
        for action in start:
            if self._died_in(action.call) or action.call.id in replayed:
                continue
            if self._cut_in_recording(action.call):
                self.flight.answer(with_call(self._cut_short(), action.call.id))
            elif action.tool.side_effects and not self.live_side_effects:
                self.flight.answer(with_call(self._served(action.call), action.call.id))
            else:
                self.flight.start(self._keyed(action))
        return self.flight.next() if self.flight.busy else None

    def _replays_child(self, action: CallTool) -> bool:
        """Whether ``action`` is a sub-agent's call that its child's recording answers, replayed."""
        return self.children is not None and action.child is not None and not self._died_in(action.call) \
            and not self._cut_in_recording(action.call)

    def _cut_in_recording(self, call: ToolCall) -> bool:
        """Whether the recorded deadline or cancel cut ``call`` short while it ran (its observation says so).

        Such a call is started and cut short again, rather than stopped before: a resume of the
        recording read that observation, never the tool's result.
        """
        end = self.end
        return (end.status in INTERRUPTIBLE and self.model.calls == end.after_replies
                and self.model.observation(call) == observations.abandoned(call.name, end.status))

    def _cut_short(self) -> Outcome:
        """The recorded stop, as the outcome of a call it cut short."""
        return Outcome(stop=Status(self.end.status), reason=self.end.error or self.end.status)

    def _died_in(self, call: ToolCall) -> bool:
        """Whether the recorded process died with ``call`` running, at this point of the recording."""
        end = self.end
        return end.crashed and call.id in end.in_doubt and self.model.calls == end.after_replies

    def _served(self, call: ToolCall) -> Outcome:
        """A side effect's recorded observation, in place of running it again."""
        recorded = self.model.observation(call)
        if recorded is None:  # a lenient replay past the recording: noted, and still not run
            self.model.unrecorded(call)
            return Outcome(observation=observations.not_run(NOT_SERVED))
        return Outcome(observation=recorded)

    def _keyed(self, action: CallTool) -> CallTool:
        """``action`` with the recording's idempotency key: the key of the recorded run's call, not the replay's."""
        name, run_id = action.tool.idempotency_key, self.model.fixture.run_id
        if name is None or run_id is None:
            return action
        return dataclasses.replace(action, args={**action.args, name: idempotency_key(run_id, action.call.id)})

    def _answer(self, messages: list[Message], specs: list[ToolSpec]) -> Outcome | ReplayDivergence:
        started = time.monotonic()
        answer = self.model.answer(messages, specs, self.core.steps)
        elapsed = time.monotonic() - started
        match answer:
            case ModelReply():
                return Outcome(value=answer, elapsed_s=elapsed)
            case RecordedStop(status, reason):
                return Outcome(stop=status, reason=reason, elapsed_s=elapsed)
            case ReplayDivergence():
                return answer

    def _checkpoint(self, call: ToolCall | None) -> Outcome:
        due = self.due
        if due is not None and self.model.calls == self.end.after_replies \
                and due.call_id == (call.id if call is not None else None) \
                and (call is None or not self._cut_in_recording(call)):  # else the stop comes as the call runs
            return Outcome(stop=due.status, reason=due.reason)
        return self.sync.at_checkpoint()  # the replay's own deadline and cancel event


def recorded_approver(model: ReplayModel) -> Approver:
    """The approver of a replay: its answer on each call as the recording shows it, so nobody is asked again.

    That is its denial, True for a call it ran, or None to wait for a decision.
    None also covers a call decided by a later resume (whose decisions the loop gets then).
    """
    decided_on_resume = frozenset(call_id for found in model.fixture.resumes for call_id in found["decisions"])

    def recorded_decision(call: ToolCall) -> bool | str | None:
        recorded = model.observation(call)
        if recorded is None or call.id in decided_on_resume:
            return None
        verdict = observations.denial_verdict(call.name, recorded)
        return True if verdict is None else verdict

    return recorded_decision


def due_stop(model: ReplayModel, end: PartEnd) -> DueStop | None:
    """Where a deadline, cancel or crash stopped the recording's part outside a model call, if it did."""
    if end.status not in (*INTERRUPTIBLE, CRASHED) or end.in_doubt:
        return None
    replies = end.after_replies
    if replies and "stop" in model.fixture.replies[replies - 1]:
        return None  # the recorded stop block replays it
    if end.crashed:
        return DueStop(Status.CANCELLED, CRASH_REASON, end.stopped_before_call)
    return DueStop(Status(end.status), end.error or end.status, end.stopped_before_call)
