"""How runs link up and how a stopped one goes on: a run's parent and children, and the resume command.

A fork, a follow-up or a rerun's candidate names its parent (``runs.parent_run_id``, read through its
index for a run's children) and says how it came about in its ``run_started`` fact.
A run awaiting approval, or one whose process died, is continued with ``runner resume``.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from .._log.records import StoredRun
from .._log.state import fold
from .._log.statuses import Status
from .._text import clean
from ..errors import RunNotFound
from ..events import ApprovalRequested, RunQueued, RunResumed, RunStarted
from ..messages import McpRef
from ..store import RunStore

RERUN = "rerun"  # the origin of a rerun's candidate (runner._rerun), linked to its baseline
TOOLS_PLACEHOLDER = "MODULE:ATTR"  # for a run whose log does not say where its tools live
# What a logged ``tools_ref`` must look like to be printed in a command: the log may come
# from anywhere, and a user copies these commands into a shell.
TOOLS_REF = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True, slots=True)
class Link:
    """A run linked to the one shown: its id, status and how it came about."""

    run_id: str
    status: str
    origin: str | None
    forked_at_step: int | None


def origin_text(origin: str | None, forked_at_step: int | None) -> str:
    """``fork at step 2``, ``follow-up``, ``rerun candidate``, or '' for a run that is none of them."""
    if origin == "fork":
        return f"fork at step {forked_at_step}" if forked_at_step else "fork"
    if origin == "follow_up":
        return "follow-up"
    if origin == RERUN:
        return "rerun candidate"
    return clean(origin) if origin else ""


def parent_text(parent_run_id: str, origin: str | None, forked_at_step: int | None) -> str:
    """The line that links a run to its parent: ``parent run ID (fork at step 2)``, or a rerun's baseline."""
    if origin == RERUN:
        return f"rerun candidate of baseline run {clean(parent_run_id)}"
    how = origin_text(origin, forked_at_step)
    return f"parent run {clean(parent_run_id)}" + (f" ({how})" if how else "")


def children(store: RunStore, run_id: str) -> list[Link]:
    """The runs forked from or following up ``run_id``, oldest first, with their origin."""
    found = store.children(run_id)
    if not found:
        return []
    starts = store.run_starts([run.run_id for run in found])
    links = []
    for run in found:
        started = starts.get(run.run_id)
        origin, at = (started.origin, started.forked_at_step) if started is not None else (None, None)
        links.append(Link(run.run_id, run.status, origin, at))
    return links


def pending_approvals(run: StoredRun) -> dict[str, ApprovalRequested]:
    """The calls a run awaiting approval waits on (none decided yet), by call id, in the order they were asked."""
    if run.status != Status.AWAITING_APPROVAL:
        return {}
    return fold(run.facts, run.run_id).pending_approvals


def resume_command(short: str, tools: str | None, approve: Sequence[str] = (), db_hint: str = "",
                   mcp: Sequence[McpRef] = ()) -> str:
    """``runner resume SHORT --tools TOOLS [--mcp ...] [--approve ID]...``, quoted for a shell (None: no --tools)."""
    approvals = "".join(f" --approve {shlex.quote(call_id)}" for call_id in approve)
    return f"runner resume {shlex.quote(short)}{tools_args(tools, mcp)}{approvals}{db_hint}"


def tools_args(tools: str | None, mcp: Sequence[McpRef] = ()) -> str:
    """`` --tools TOOLS --mcp 'COMMAND ARGS' --mcp-url URL``: tools as options of a command (a leading space)."""
    words = [f" --tools {tools}"] if tools else []
    words += [f" --{'mcp' if ref['transport'] == 'stdio' else 'mcp-url'} {shlex.quote(ref['target'])}" for ref in mcp]
    return "".join(words)


def recorded_tools(run: StoredRun) -> str | None:
    """The ``module:attr`` the run's tools were loaded from, as logged at its start, or a placeholder.

    ``runner run``, ``demo``, ``fork`` and follow-ups log it; the placeholder is for the reader to fill in.
    None for a run whose tools all came from MCP servers (``recorded_mcp``).
    """
    for fact in run.facts:
        if isinstance(fact, RunStarted):
            ref = fact.tools_ref
            if ref is None and fact.mcp_servers:
                return None
            return ref if isinstance(ref, str) and TOOLS_REF.fullmatch(ref) else TOOLS_PLACEHOLDER
    return TOOLS_PLACEHOLDER


def recorded_mcp(run: StoredRun) -> list[McpRef]:
    """The MCP servers the run's tools came from (``--mcp``, ``--mcp-url``), as logged at its start."""
    started = next((fact for fact in run.facts if isinstance(fact, RunStarted)), None)
    return list(started.mcp_servers or []) if started is not None else []



def pooled(run: StoredRun) -> bool:
    """Whether ``run`` was submitted to a worker pool (``runner submit``): its log opens with ``run_queued``."""
    return any(isinstance(fact, RunQueued) for fact in run.facts)


def parent_of(store: RunStore, run: StoredRun) -> StoredRun | None:
    """The run ``run`` was forked from or follows up, with its log; None when it has none, or it is gone."""
    if run.parent_run_id is None:
        return None
    try:
        return store.get_run(run.parent_run_id)
    except RunNotFound:
        return None


class ModelName(NamedTuple):
    """A model as the log records it: its name and its provider (None when the log says none)."""

    name: str
    provider: str | None


def last_model(run: StoredRun) -> ModelName:
    """The model ``run`` last ran with: the one it started with, or the latest resume's."""
    found = ModelName(run.model, run.provider)
    for fact in run.facts:
        if isinstance(fact, RunResumed) and fact.model:
            found = ModelName(fact.model, fact.provider)
    return found
