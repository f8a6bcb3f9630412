"""The facts a run opens with: ``run_started`` for a new or linked run, ``run_resumed`` for a run taken up again.

Built here once, for ``run_agent``, resume, fork, follow-up, replay and the pool, so each records a
run's model, tools and their traits the same way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

from .._log.limits import Limits
from .._log.records import StoredRun
from .._tools.output import OutputSpec
from .._tools.registry import ToolRegistry
from ..events import Event, MessageAppended, RunResumed, RunStarted
from ..messages import AnyModel, McpRef, Message
from .identity import model_identity, new_run_id


class Lineage(NamedTuple):
    """A new run's link to the run it came from, and the messages it opens with (None: system and task)."""

    parent_run_id: str
    origin: str
    messages: Sequence[Message] | None = None


def new_start(run_id: str, task: str, system: str, limits: Limits, registry: ToolRegistry, model: AnyModel, *,
              agent_name: str | None = None, labels: Mapping[str, str] | None = None, tools_ref: str | None = None,
              mcp_servers: Sequence[McpRef] | None = None, parent_run_id: str | None = None,
              origin: str | None = None, forked_at_step: int | None = None,
              session_id: str | None = None, by: str | None = None, output: OutputSpec | None = None,
              parent_call_id: str | None = None) -> RunStarted:
    """The ``run_started`` of a run: its task, limits, model, tools and their traits, and what names it."""
    model_name, provider = model_identity(model)
    return RunStarted(run_id=run_id, task=task, system=system, limits=limits.to_dict(), tool_specs=registry.specs(),
                      model=model_name, provider=provider, agent_name=agent_name, labels=dict(labels or {}),
                      parent_run_id=parent_run_id, origin=origin, forked_at_step=forked_at_step, tools_ref=tools_ref,
                      session_id=session_id, tool_traits=registry.traits() or None,
                      mcp_servers=list(mcp_servers) if mcp_servers else None, by=by,
                      output_schema=output.declared() if output is not None else None, parent_call_id=parent_call_id)


def linked_start(parent: StoredRun, registry: ToolRegistry, model: AnyModel, limits: Limits, origin: str, *,
                 session_id: str, agent_name: str | None = None, labels: Mapping[str, str] | None = None,
                 tools_ref: str | None = None, mcp_servers: Sequence[McpRef] | None = None,
                 task: str | None = None, forked_at_step: int | None = None, by: str | None = None,
                 output: OutputSpec | None = None) -> RunStarted:
    """The ``run_started`` of a fork or follow-up of ``parent``: a new id, and the parent's task, system, agent, labels.

    The task, agent and labels given replace the parent's.
    """
    return new_start(new_run_id(), task if task is not None else parent.task, parent.system, limits, registry, model,
                     agent_name=agent_name or parent.agent_name,
                     labels=labels if labels is not None else parent.labels, tools_ref=tools_ref,
                     mcp_servers=mcp_servers, parent_run_id=parent.run_id, origin=origin,
                     forked_at_step=forked_at_step, session_id=session_id, by=by, output=output)


def resumed(run_id: str, step: int, owner: str, reason: str, limits: Limits, decisions: Mapping[str, bool | str],
            registry: ToolRegistry, model: AnyModel, by: str | None = None,
            output: OutputSpec | None = None) -> RunResumed:
    """The ``run_resumed`` of a run taken up by ``by`` in process ``owner``: its limits, decisions, model and tools."""
    model_name, provider = model_identity(model)
    return RunResumed(run_id=run_id, step=step, owner=owner, reason=reason, limits=limits.to_dict(),
                      decisions=dict(decisions), model=model_name, provider=provider,
                      tool_traits=registry.traits() or None, by=by,
                      output_schema=output.declared() if output is not None else None)


def new_run_opening(run_id: str, task: str, system: str, limits: Limits, registry: ToolRegistry, model: AnyModel,
                    agent_name: str | None = None, labels: Mapping[str, str] | None = None,
                    tools_ref: str | None = None, mcp_servers: Sequence[McpRef] | None = None, *,
                    link: Lineage | None = None, by: str | None = None,
                    output: OutputSpec | None = None, parent_call_id: str | None = None) -> list[Event]:
    """The facts a new run opens with: ``run_started``, the system prompt and the task (or ``link``'s messages).

    ``parent_call_id``: a sub-agent's child run names the parent's call it serves (``link`` names the parent).
    """
    started = new_start(run_id, task, system, limits, registry, model, agent_name=agent_name, labels=labels,
                        tools_ref=tools_ref, mcp_servers=mcp_servers,
                        parent_run_id=link.parent_run_id if link is not None else None,
                        origin=link.origin if link is not None else None, by=by, output=output,
                        parent_call_id=parent_call_id)
    messages: Sequence[Message] = [{"role": "system", "content": system}, {"role": "user", "content": task}]
    if link is not None and link.messages is not None:
        messages = link.messages
    return opening(started, messages)


def opening(started: RunStarted, messages: Sequence[Message]) -> list[Event]:
    """The first facts of a new run: ``run_started``, then each message it begins with."""
    return [started, *(MessageAppended(index=i, message=m) for i, m in enumerate(messages))]
