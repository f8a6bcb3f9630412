"""Tools in a rerun: the baseline's recorded specs, and who answers each call the new model makes.

A call with the same tool name and the same arguments (as JSON values) as a call the baseline made, not
used yet in this sample, gets the baseline's recorded observation, and no tool runs. Any other call:
with live tools given, a tool with no side effects and no approval runs live; any other tool never runs,
and the model reads an ``ERROR:`` observation that the call is not in the recording. So a rerun never
repeats a side effect, and never makes a new one.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from .._loop.actions import Action, CallTool, Outcome, RunTools
from .._loop.core import AgentCore
from .._loop.drive import Perform
from .._loop.flight import ThreadFlight, with_call
from .._loop.sync import SyncDriver
from .._tools.args import tool_args
from .._tools.registry import ToolRegistry
from .._tools.schema_words import CHECKED_FORMATS
from ..messages import ToolSpec, ToolTraits
from .recording import Baseline, call_key


class RecordedTools(ToolRegistry):
    """The baseline's tools as it recorded them: each spec shown to the new model as it was, with its traits.

    The arguments of a call are checked against the recorded schema, as the baseline's own were.
    Their functions never run: the rerun's driver answers every call that passes the check.
    """

    def __init__(self, specs: Sequence[ToolSpec], traits: Mapping[str, ToolTraits]) -> None:
        super().__init__()
        self.recorded = list(specs)
        for spec in specs:
            name = spec["name"]
            found = traits.get(name)
            try:
                self.register(name, spec["description"], checkable(spec["parameters"]), never_runs,
                              side_effects=bool(found and found["side_effects"]),
                              needs_approval=bool(found and found["needs_approval"]),
                              idempotency_key=found["idempotency_key"] if found else None,
                              exclusive=bool(found and found.get("exclusive", False)))
            except ValueError as exc:
                raise ValueError(f"the recorded spec of tool {name!r} cannot be checked: {exc}") from None

    def specs(self) -> list[ToolSpec]:
        return list(self.recorded)


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
    """How a candidate's calls were answered: ``served`` from the recording, run ``live``, or ``not_run``."""

    served: int = 0
    live: int = 0
    not_run: int = 0


class CandidateTools:
    """Who answers one candidate's calls: the baseline's recording (each observation once), the live tools, or no one.

    A fresh one per candidate, so each sample may use every recorded observation once.
    """

    def __init__(self, baseline: Baseline, live: ToolRegistry | None) -> None:
        self.baseline, self.live, self.counts = baseline, live, ToolCounts()
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
        found = self.hand_over(core, action)
        return found if isinstance(found, Outcome) else driver.perform(found)

    def hand_over(self, core: AgentCore, action: CallTool) -> Outcome | CallTool:
        """The outcome of ``action`` when it is served or refused, else the live call to run in its place."""
        call = action.call
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
            return Outcome(observation=refused)
        self.counts.live += 1
        return replace(action, tool=tool, args=tool_args(tool, call.args, core.run_id, call.id))

    def together(self, core: AgentCore, action: RunTools, flight: ThreadFlight) -> Outcome:
        """``RunTools``: each call served, refused, or started live on ``flight``; the next to end."""
        for one in action.start:
            found = self.hand_over(core, one)
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
        recorded = self.baseline.traits_of(name)
        if tool.side_effects or recorded["side_effects"]:
            return f"{name} has side effects, and a rerun never runs one"
        if tool.needs_approval or recorded["needs_approval"]:
            return f"{name} needs approval, and a rerun never runs such a tool"
        return None


def not_recorded(name: str, baseline_run_id: str, why: str) -> str:
    """The observation of a call a rerun did not run: not in the recording, and ``why`` it did not run live."""
    return (f"ERROR: not run: this call to {name} (with these arguments) is not in the recording of run "
            f"{baseline_run_id} that this rerun serves, and {why}")
