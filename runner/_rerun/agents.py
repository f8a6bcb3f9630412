"""What a rerun knows of a baseline's sub-agents: the child runs of their calls, read from the store, by name.

A baseline with sub-agents is rerun as a tree: the candidate's sub-agent calls run child runs on the
candidate model, with the tools, system prompt, limits and typed result the baseline's children
recorded, and their calls served from those children's recordings. A sub-agent called more than once
pools its children's recorded calls, as one baseline's calls are pooled; deeper sub-agents nest.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .._log.records import StoredRun
from .._log.statuses import UNSETTLED
from .._tools.agents import child_run_id, subagent_calls
from .._tools.output import OutputSpec, output_from_log
from ..errors import RunNotFound
from ..events import RunStarted
from .recording import Baseline, careful_traits, read_baseline

if TYPE_CHECKING:
    from ..store import RunStore


@dataclass(frozen=True, slots=True)
class AgentRecording:
    """One sub-agent as the baseline's tree ran it.

    ``baseline`` is its first child run's (task, system prompt, tool specs, limits), holding the
    recorded calls of all its child runs and their most careful traits; ``output`` the typed result
    they ended with; ``agents`` its own sub-agents, by name.
    """

    name: str
    baseline: Baseline
    output: OutputSpec | None
    agents: dict[str, AgentRecording] = field(default_factory=dict)


def recorded_agents(store: RunStore, runs: Sequence[StoredRun]) -> dict[str, AgentRecording]:
    """The sub-agents ``runs`` called, by name, each from the child runs of those calls that have ended.

    A call whose child the store does not hold (never started, pruned) or that has not ended is left out.
    """
    children: dict[str, list[StoredRun]] = {}
    for run in runs:
        for call_id, name in subagent_calls(run.facts).items():
            try:
                child = store.get_run(child_run_id(run.run_id, call_id))
            except RunNotFound:
                continue
            if child.status not in UNSETTLED:
                children.setdefault(name, []).append(child)
    return {name: agent_recording(store, name, found) for name, found in children.items()}


def agent_recording(store: RunStore, name: str, children: Sequence[StoredRun]) -> AgentRecording:
    """Sub-agent ``name`` from its child runs (at least one): the first's start, every one's calls."""
    first = read_baseline(children[0])
    calls = [call for child in children for call in read_baseline(child).calls]
    traits = careful_traits([fact for child in children for fact in child.facts])
    declared = next((fact.output_schema for fact in children[0].facts if isinstance(fact, RunStarted)), None)
    return AgentRecording(name, dataclasses.replace(first, calls=calls, traits=traits),
                          output_from_log(declared) if declared is not None else None,
                          recorded_agents(store, children))


def every_agent(agents: Mapping[str, AgentRecording]) -> list[AgentRecording]:
    """Each sub-agent of the tree, deeper ones too."""
    return [found for agent in agents.values() for found in (agent, *every_agent(agent.agents))]
