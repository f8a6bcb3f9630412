"""Replay a run's sub-agent calls: each is answered by replaying its child's recording, a replay within the replay.

The child is replayed against the sub-agent as defined now (``tool.agent``: its registry, system prompt
and typed result) with its recorded replies, limits and decisions, side effects served as anywhere, and
ends the call as the live child would (``ChildEnded``). It is played a part at a time: up to where it
halted its parent (an approval, the tree's budget, a cancel), then on as the parent's replay goes on.
A difference inside a child is named with its path: ``in sub-agent research (call p1), at step 2 ...``.
"""

from __future__ import annotations

import dataclasses
import json
import time
from typing import Any

from .._log.limits import Limits
from .._log.statuses import Status
from .._loop import observations
from .._loop.actions import CallTool, Outcome, Stop
from .._loop.children import ChildCall, ChildEnded
from .._loop.core import AgentCore
from .._loop.results import AgentResult
from .._loop.waits import Waits
from .._run.build import core_for
from .._run.children import TreeChildren, child_limits, ended
from .._run.opening import Lineage, new_run_opening
from .._run.wiring import RunWiring
from .._tools.agents import SUBAGENT, child_run_id
from ..errors import ReplayDivergence
from .divergence import shown
from .driver import recorded_approver
from .fixture import Fixture
from .playback import Playback
from .scripted import ReplayModel

# Why a sub-agent's call is not run when the fixture has no recording of its child (an older fixture).
NO_CHILD = ("the fixture holds no recording of the child run this sub-agent call ran (exported without its "
            "store, or by an older runner): export the run again")
MISSING_CHILD = "children"  # the ``field`` of the divergence that says so


class ReplayChildren:
    """The sub-agent calls of one replayed run: ``fixture`` is its recording, ``model`` its replaying model.

    ``wiring`` is the run's replay wiring, which its children's replays share (store, tracer, cancel).
    """

    def __init__(self, fixture: Fixture, model: ReplayModel, wiring: RunWiring, live_side_effects: bool) -> None:
        self.fixture, self.model, self.wiring, self.live_side_effects = fixture, model, wiring, live_side_effects
        self.played: dict[str, ChildPlayback] = {}

    def answer(self, core: AgentCore, action: CallTool, waits: Waits) -> Outcome | ReplayDivergence:
        """The outcome of a sub-agent's call (its child's end), or how the child's replay differs from its recording."""
        child = action.child
        assert child is not None
        started = time.monotonic()
        played = self.played.get(child.call.id)
        if played is None:
            recorded = self.fixture.child(child.call.id)
            if recorded is None:
                return self._missing(child)
            played = self.played[child.call.id] = ChildPlayback(recorded, child, core, self.wiring,
                                                               self.model.strict, self.live_side_effects)
        # The recording has no observation for the call: the tree stopped with it open (the child halted it).
        found = played.go_on(child, waits, left_open=self.model.observation(child.call) is None)
        noted = [within(child, difference) for difference in played.differences()]
        self.model.differences.extend(noted)
        if isinstance(found, ReplayDivergence):
            found = within(child, found)
            if not any(found.sentence == difference.sentence for difference in noted):
                self.model.differences.append(found)
            return found
        return Outcome(value=found, elapsed_s=time.monotonic() - started)

    def _missing(self, child: ChildCall) -> Outcome | ReplayDivergence:
        """A call whose child the fixture does not hold: a divergence (noted, and not run, in a lenient replay).

        A call the recording did not make at all is named as such (``unrecorded``).
        """
        name, call_id = child.agent.name, child.call.id
        unrecorded = self.model.unrecorded(child.call) if self.model.strict else None
        if unrecorded is not None:
            return unrecorded
        difference = ReplayDivergence(child.step, None, MISSING_CHILD,
                                      f"at step {child.step} the recording has no run of sub-agent {name} for call "
                                      f"{call_id}: {NO_CHILD}; nothing was run", None,
                                      {"id": call_id, "name": name})
        self.model.differences.append(difference)
        if self.model.strict:
            return difference
        return Outcome(observation=observations.not_run(NO_CHILD))


class ChildPlayback:
    """The replay of one sub-agent call's child run: its recording, played against the sub-agent as defined now.

    ``parent`` is the replayed parent's core; the child's replay is stored as its child run would be.
    """

    def __init__(self, fixture: Fixture, child: ChildCall, parent: AgentCore, wiring: RunWiring, strict: bool,
                 live_side_effects: bool) -> None:
        agent = child.agent
        model = ReplayModel(fixture, strict=strict)
        wiring = dataclasses.replace(wiring, costs=model.recorded_cost, approve=recorded_approver(model))
        run_id = child_run_id(child.parent_run_id, child.call.id)
        limits = Limits.from_dict(fixture.limits)
        first = new_run_opening(run_id, child.task, agent.system, limits, agent.registry, model, agent.name,
                                link=Lineage(child.parent_run_id, SUBAGENT), output=agent.output,
                                parent_call_id=child.call.id)
        link = parent.children.link(child) if isinstance(parent.children, TreeChildren) else None
        core = core_for(model, agent.registry, run_id, limits, first, None, wiring, link, output_spec=agent.output)
        below = ReplayChildren(fixture, model, wiring, live_side_effects) if agent.registry.agents() else None
        self.fixture, self.model = fixture, model
        self.playback = Playback(fixture, model, agent.registry, wiring, core, live_side_effects, below)
        self.passed = 0  # how many of the model's differences were passed up to the parent
        self.end: ChildEnded | None = None  # its end, once its recording is played out

    def differences(self) -> list[ReplayDivergence]:
        """The differences noted since last asked (a lenient replay goes on past them)."""
        found = self.model.differences[self.passed:]
        self.passed = len(self.model.differences)
        return found

    def go_on(self, child: ChildCall, waits: Waits, left_open: bool) -> ChildEnded | ReplayDivergence:
        """Play the child up to where it ends or halts its parent: what the parent takes, or the divergence.

        Parts that ended as their process died are played through: the parent's replay gave up before the
        call then, and performs it again in its next part. A part the child was resumed after halted its
        parent, and so did its last when the parent's recording left the call open (``left_open``).
        """
        if self.end is not None:  # played out: served again, as the live path serves a finished child
            return self.end
        playback = self.playback
        _, bound = child_limits(child.agent, child, waits, playback.core.state if playback.part else None)
        while not playback.finished:
            playback.play()
            if playback.result is not None:
                break
        result = playback.result
        if playback.divergence is not None or result is None:
            return playback.divergence or ReplayDivergence(0, None, "resumes", "the child's recording ends where "
                                                                               "its process died")
        if playback.last_part:
            found = self._ending(playback, result)
            if found is not None:
                return found
        end = ended(child, playback.core, result, bound, waits)
        if end.halt is None and result.status != Status.DONE and (left_open or not playback.last_part):
            end = end._replace(halt=Stop(result.status, result.error or result.status))
        if playback.last_part:
            self.end = end
        return end

    def _ending(self, playback: Playback, result: AgentResult) -> ReplayDivergence | None:
        """How the child's whole replay differs from its recording at the end (strict: the divergence)."""
        found = playback.final_divergence(result) if self.model.strict else None
        found = found or ending_divergence(self.fixture, result)
        if found is None or self.model.strict:
            return found
        self.model.differences.append(found)  # lenient: noted, and the parent goes on with what the child gave
        return None


def ending_divergence(fixture: Fixture, result: AgentResult) -> ReplayDivergence | None:
    """Whether ``result`` ended with the recording's status and answer (a typed answer compared as a value)."""
    outcome = fixture.outcome
    if result.status != outcome["status"]:
        return ReplayDivergence(result.steps, None, "status",
                                f"the replay ended with {result.status} ({result.error}), the recording with "
                                f"{outcome['status']}", outcome["status"], str(result.status))
    recorded, got = outcome["answer"], result.answer
    if recorded == got or (fixture.output_schema is not None and json_value(recorded) == json_value(got)):
        return None
    return ReplayDivergence(result.steps, None, "answer", f"the replay answered {shown(got)}, the recording "
                                                          f"{shown(recorded)}", recorded, got)


def json_value(text: str | None) -> Any:
    """A typed answer's JSON value (the text itself when it is not JSON)."""
    try:
        return json.loads(text) if text is not None else None
    except ValueError:
        return text


def within(child: ChildCall, difference: ReplayDivergence) -> ReplayDivergence:
    """``difference``, found in ``child``'s replay, as its parent reports it: prefixed with the sub-agent and call."""
    return ReplayDivergence(difference.step, difference.index, difference.field,
                            f"in sub-agent {child.agent.name} (call {child.call.id}), {difference.sentence}",
                            difference.recorded, difference.got, difference.diff)

