"""How a candidate's calls were answered, counted again from the logs: served from the recording, live, not run.

A rerun counts them as it answers (``tools.CandidateTools``); a report read back from the store counts them
from the logs, by the same rules. Per sample and sub-agent (whose children share one pool), as many calls
with a recorded call's tool name and arguments were served as the recording had, each its observation as
logged; of the others, one whose observation is ``tools.not_recorded``'s did not run, any other ran live.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, NamedTuple

from .._log.records import StoredRun
from .._tools.agents import child_run_id, subagent_calls
from .._tools.output import FINAL_RESULT
from ..errors import RunNotFound
from ..events import MessageAppended, RunResumed, RunStarted, ToolFinished
from .agents import AgentRecording, recorded_agents
from .recording import RecordedCall, call_key, recorded_calls
from .tools import ToolCounts, not_run

if TYPE_CHECKING:
    from ..store import RunStore


class Handed(NamedTuple):
    """A call a rerun's tools answered: its key (``recording.call_key``, None for arguments that are not JSON)."""

    key: str | None
    name: str
    observation: str


def answered(store: RunStore, baseline: StoredRun, candidates: Sequence[StoredRun]) -> list[ToolCounts]:
    """How each of ``candidates`` (samples of ``baseline``) had its tree's calls answered."""
    agents = recorded_agents(store, [baseline])
    recorded = recorded_calls(baseline.facts)
    counts = []
    for candidate in candidates:
        found = ToolCounts()
        _count(store, [candidate], recorded, agents, found)
        counts.append(found)
    return counts


def _count(store: RunStore, runs: Sequence[StoredRun], recorded: Sequence[RecordedCall],
           agents: Mapping[str, AgentRecording], counts: ToolCounts) -> None:
    """Add to ``counts`` the calls of ``runs`` (one pool: ``recorded``), then those of their children, by sub-agent."""
    handed: list[Handed] = []
    children: dict[str, list[StoredRun]] = {}
    for run in runs:
        handed += _handed(run)
        for call_id, name in subagent_calls(run.facts).items():
            try:
                children.setdefault(name, []).append(store.get_run(child_run_id(run.run_id, call_id)))
            except RunNotFound:  # pruned: its calls cannot be counted
                continue
    left = Counter(call.key for call in recorded)
    served = Counter({key: min(n, left[key]) for key, n in Counter(h.key for h in handed if h.key).items()})
    observations = Counter((call.key, call.observation) for call in recorded)
    for call in handed:  # a served call got a recorded observation, logged as it was
        if call.key is not None and served[call.key] and observations[(call.key, call.observation)]:
            served[call.key] -= 1
            observations[(call.key, call.observation)] -= 1
            counts.served += 1
        elif not_run(call.name, call.observation):
            counts.not_run += 1
        else:
            counts.live += 1
    for name, below in children.items():
        agent = agents.get(name)
        if agent is not None:
            _count(store, below, agent.baseline.calls, agent.agents, counts)


def _handed(run: StoredRun) -> list[Handed]:
    """The calls of ``run`` its tools answered: not refused first (``refused``), a sub-agent's, or its typed result."""
    asked: dict[str, str | None] = {}
    children = subagent_calls(run.facts)
    typed = any(isinstance(fact, RunStarted | RunResumed) and fact.output_schema is not None for fact in run.facts)
    found = []
    for fact in run.facts:
        if isinstance(fact, MessageAppended) and fact.message["role"] == "assistant":
            asked.update((call["id"], call_key(call["name"], call["args"])) for call in fact.message["tool_calls"])
        elif (isinstance(fact, ToolFinished) and fact.refused is None and fact.call_id not in children
              and not (typed and fact.name == FINAL_RESULT)):  # the loop takes the result: no tool answers it
            found.append(Handed(asked.get(fact.call_id), fact.name, fact.observation))
    return found
