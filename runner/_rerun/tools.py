"""Tools in a rerun: the baseline's recorded specs, and who answers each call the new model makes.

A call with the same tool name and arguments (as JSON values) as one the baseline made, not used yet in
this sample, gets the baseline's recorded observation; no tool runs. Any other call runs live on a live tool
with no side effects and no approval, and else never: the model reads that it is not in the recording. So
a rerun never repeats a side effect, nor makes a new one. A sub-agent's call runs its child on the candidate's
model, whose calls are answered so from the baseline's children's recordings (``agents``).
"""

from __future__ import annotations

import functools
import threading
from collections import defaultdict, deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from .._loop.actions import Action, CallTool, Outcome, RunTools
from .._loop.children import ChildCall, ChildEnded
from .._loop.core import AgentCore
from .._loop.drive import Perform, drive, ended
from .._loop.flight import ThreadFlight, with_call
from .._loop.sync import SyncDriver
from .._loop.waits import Waits
from .._run import children
from .._tools.args import tool_args
from .._tools.registry import ToolRegistry
from .._tools.schema_words import CHECKED_FORMATS
from ..messages import AnyModel, ToolSpec, ToolTraits
from .agents import AgentRecording
from .recording import Baseline, call_key


class RecordedTools(ToolRegistry):
    """The baseline's tools as it recorded them: each spec shown to the new model as it was, with its traits.

    The arguments of a call are checked against the recorded schema, as the baseline's own were.
    Their functions never run: the rerun's driver answers every call that passes the check. A sub-agent
    the baseline's tree ran (``agents``) is one here too, on ``model`` (the candidate's), its tools
    ``AgentTools``; ``live`` are the rerun's live tools, among which its own are found.
    """

    def __init__(self, specs: Sequence[ToolSpec], traits: Mapping[str, ToolTraits],
                 agents: Mapping[str, AgentRecording] | None = None, model: AnyModel | None = None,
                 live: ToolRegistry | None = None) -> None:
        super().__init__()
        self.recorded = list(specs)
        for spec in specs:
            name = spec["name"]
            found = traits.get(name)
            agent = (agents or {}).get(name)
            try:
                if agent is not None and model is not None:
                    self.add_agent(name, model=model, registry=AgentTools(agent, model, live_below(live, name)),
                                   system=agent.baseline.system, description=spec["description"],
                                   limits=agent.baseline.limits, output_type=agent.output)
                    continue
                self.register(name, spec["description"], checkable(spec["parameters"]), never_runs,
                              side_effects=bool(found and found["side_effects"]),
                              needs_approval=bool(found and found["needs_approval"]),
                              idempotency_key=found["idempotency_key"] if found else None,
                              exclusive=bool(found and found.get("exclusive", False)))
            except ValueError as exc:
                raise ValueError(f"the recorded spec of tool {name!r} cannot be checked: {exc}") from None

    def specs(self) -> list[ToolSpec]:
        return list(self.recorded)


class AgentTools(RecordedTools):
    """A sub-agent's tools in a rerun: those its children recorded, and what answers their calls.

    ``recording`` holds the calls to serve; ``live`` the sub-agent's own live tools (None: none given).
    """

    def __init__(self, recording: AgentRecording, model: AnyModel, live: ToolRegistry | None) -> None:
        super().__init__(recording.baseline.specs, recording.baseline.traits, recording.agents, model, live)
        self.recording, self.live = recording, live


def live_below(live: ToolRegistry | None, name: str) -> ToolRegistry | None:
    """The live tools of sub-agent ``name``: its registry, when ``live`` has a sub-agent of that name."""
    tool = live.get(name) if live is not None else None
    return tool.agent.registry if tool is not None and tool.agent is not None else None


def never_runs(**kwargs: Any) -> Any:
    """A recorded tool's function: the rerun's driver answers its calls, so this never runs."""
    raise RuntimeError("a rerun never runs a recorded tool's function")


def checkable(schema: Any) -> Any:
    """``schema`` without the ``format`` words this runner does not check (those Pydantic checked for the baseline)."""
    if isinstance(schema, Mapping):
        return {key: checkable(value) for key, value in schema.items()
                if not (key == "format" and isinstance(value, str) and value not in CHECKED_FORMATS)}
    if isinstance(schema, list):
        return [checkable(item) for item in schema]
    return schema


@dataclass(slots=True)
class ToolCounts:
    """How a candidate's calls were answered: ``served`` from the recording, run ``live``, or ``not_run``.

    They count the calls of the candidate's whole tree; a sub-agent's call itself (it runs a child) is none.
    """

    served: int = 0
    live: int = 0
    not_run: int = 0


class Sample:
    """One candidate's answerers, shared across its tree: the counts, a lock, and one ``CandidateTools`` per sub-agent.

    A sub-agent's children (it may be called more than once, or at once) take from one pool of recorded
    observations per sample, under the lock.
    """

    def __init__(self) -> None:
        self.counts = ToolCounts()
        self.lock = threading.Lock()
        self.agents: dict[AgentTools, CandidateTools] = {}

    def tools_for(self, registry: AgentTools) -> CandidateTools:
        with self.lock:
            found = self.agents.get(registry)
            if found is None:
                found = self.agents[registry] = CandidateTools(registry.recording.baseline, registry.live, self)
            return found

    def child_call(self, core: AgentCore, action: CallTool, waits: Waits) -> CallTool:
        """``action``, a sub-agent's call, as a call whose function runs its child with this sample's answerers.

        The driver runs it as any call (here or on a worker thread, within ``waits``); the run's own
        ``Children`` would drive the child with its tools' functions, which in a rerun never run.
        """
        child, tree = action.child, core.children
        assert child is not None
        registry = child.agent.registry
        assert isinstance(registry, AgentTools)
        assert isinstance(tree, children.TreeChildren)
        run = functools.partial(run_child, tree, child, waits, self.tools_for(registry))
        return replace(action, tool=replace(action.tool, fn=run), child=None)


def run_child(tree: children.TreeChildren, child: ChildCall, waits: Waits, tools: CandidateTools,
              **args: Any) -> ChildEnded:
    """Start or find ``child``'s run as a live parent would, and drive it with ``tools`` answering its calls."""
    plan = tree.plan(child, waits)
    if plan.served is not None:
        return plan.served
    assert plan.core is not None
    result = ended(drive(plan.core, tools.perform_for(plan.core)))
    return children.ended(child, plan.core, result, plan.bound, waits)


class CandidateTools:
    """Who answers one candidate's calls: the baseline's recording (each observation once), the live tools, or no one.

    A fresh one per candidate (and one per sub-agent in its ``sample``), so each sample may use every
    recorded observation once.
    """

    def __init__(self, baseline: Baseline, live: ToolRegistry | None, sample: Sample | None = None) -> None:
        self.baseline, self.live = baseline, live
        self.sample = sample if sample is not None else Sample()
        self.counts = self.sample.counts
        self.left: dict[str, deque[str]] = defaultdict(deque)
        for recorded in baseline.calls:
            self.left[recorded.key].append(recorded.observation)

    def perform_for(self, core: AgentCore) -> Perform:
        """``perform`` for ``drive``: as ``run_agent``'s driver does, but for tool calls, which these tools answer."""
        driver = SyncDriver(core)

        def perform(action: Action) -> Outcome:
            match action:
                case CallTool():
                    return self.answer(core, action, driver)
                case RunTools():
                    return self.together(core, action, driver.flight)
                case _:
                    return driver.perform(action)

        return perform

    def answer(self, core: AgentCore, action: CallTool, driver: SyncDriver) -> Outcome:
        """The outcome of ``action``: served from the recording, run live, or refused with an ``ERROR:``."""
        found = self.hand_over(core, action, driver.waits)
        return found if isinstance(found, Outcome) else driver.perform(found)

    def hand_over(self, core: AgentCore, action: CallTool, waits: Waits) -> Outcome | CallTool:
        """The outcome of ``action`` when it is served or refused, else the live call to run in its place.

        A sub-agent's call always runs: its child, on the candidate's model (``Sample.child_call``).
        """
        if action.child is not None:
            return self.sample.child_call(core, action, waits)
        call = action.call
        with self.sample.lock:
            left = self.left.get(call_key(call.name, call.args) or "")
            if left:
                self.counts.served += 1
                return Outcome(observation=left.popleft())
            why = self.why_not_live(call.name)
            if why is not None:
                self.counts.not_run += 1
                return Outcome(observation=not_recorded(call.name, self.baseline.run_id, why))
            assert self.live is not None
            tool = self.live.get(call.name)
            assert tool is not None
            refused = self.live.check(call.name, call.args)
            if refused is not None:  # the live tool's schema is stricter than the recorded one
                self.counts.not_run += 1
                why = f"the live {call.name} refuses these arguments: {refused.removeprefix('ERROR: ')}"
                return Outcome(observation=not_recorded(call.name, self.baseline.run_id, why))
            self.counts.live += 1
        return replace(action, tool=tool, args=tool_args(tool, call.args, core.run_id, call.id))

    def together(self, core: AgentCore, action: RunTools, flight: ThreadFlight) -> Outcome:
        """``RunTools``: each call served, refused, or started live on ``flight``; the next to end."""
        for one in action.start:
            found = self.hand_over(core, one, flight.waits)
            if isinstance(found, Outcome):
                flight.answer(with_call(found, one.call.id))
            else:
                flight.start(found)
        return flight.next()

    def why_not_live(self, name: str) -> str | None:
        """Why a call of ``name`` the recording does not hold may not run live; None when it may."""
        if self.live is None:
            return "this rerun has no live tools"
        tool = self.live.get(name)
        if tool is None:
            return f"{name} is not among this rerun's live tools"
        if tool.agent is not None:
            return f"{name} is a sub-agent none of whose runs the baseline holds, so its tools are not recorded"
        recorded = self.baseline.traits_of(name)
        if tool.side_effects or recorded["side_effects"]:
            return f"{name} has side effects, and a rerun never runs one"
        if tool.needs_approval or recorded["needs_approval"]:
            return f"{name} needs approval, and a rerun never runs such a tool"
        return None


def not_recorded(name: str, baseline_run_id: str, why: str) -> str:
    """The observation of a call a rerun did not run: not in the recording, and ``why`` it did not run live."""
    return f"{_not_run(name)}{baseline_run_id} that this rerun serves, and {why}"


def _not_run(name: str) -> str:
    return f"ERROR: not run: this call to {name} (with these arguments) is not in the recording of run "


def not_run(name: str, observation: str) -> bool:
    """Whether ``observation`` is the one a rerun gives a call of ``name`` it did not run (``not_recorded``)."""
    return observation.startswith(_not_run(name))
