"""``run_agent`` and ``arun_agent``: build a new run's core from the options, and drive it.

The sync driver runs the model and tools on the caller's thread, or on worker threads when a
deadline or a cancel may stop the run; the async one awaits them, many runs per event loop.
"""

from __future__ import annotations

from typing import Unpack

from .._loop.aio import arun_core
from .._loop.core import DEFAULT_SYSTEM
from .._loop.results import AgentResult
from .._loop.sync import run_core
from .._tools.registry import ToolRegistry
from ..messages import AsyncModel, Model
from .build import NOT_GIVEN, NotGiven, RunOptions, build_core


def run_agent(
    task: str,
    model: Model,
    registry: ToolRegistry,
    system: str = DEFAULT_SYSTEM,
    max_steps: int | NotGiven = NOT_GIVEN,
    token_budget: int | NotGiven = NOT_GIVEN,
    **options: Unpack[RunOptions],
) -> AgentResult:
    """Run ``task`` with ``model`` and the tools in ``registry`` until it is done or hits a limit.

    It never raises for anything the model or a tool does: the result says how the run ended.
    ``result.raise_for_status()`` turns a stop into an error.

    Args:
        task: what the user asks.
        model: the model, a callable from the messages and tool specs to a reply.
        registry: the tools the model may call.
        system: the system prompt.
        max_steps, token_budget: limits; any field of ``Limits`` is a keyword too (``timeout_s=60``;
            ``max_parallel_tools=1`` runs a reply's calls one by one), and the others keep ``Limits``'
            defaults. ``limits=Limits(...)`` sets them all; a limit given both ways is a ``TypeError``.
        **options: see ``RunOptions``: ``cancel`` (a ``threading.Event``), ``approve`` for tools
            registered with ``needs_approval``, ``store`` to commit every fact to an event log,
            ``tracer_provider`` for spans (content only with ``record_content``), ``labels``,
            ``agent_name``, ``run_id``, ``recorder``.
    """
    return run_core(build_core(task, model, registry, system, max_steps, token_budget, **options))


async def arun_agent(
    task: str,
    model: Model | AsyncModel,
    registry: ToolRegistry,
    system: str = DEFAULT_SYSTEM,
    max_steps: int | NotGiven = NOT_GIVEN,
    token_budget: int | NotGiven = NOT_GIVEN,
    **options: Unpack[RunOptions],
) -> AgentResult:
    """Run an agent like ``run_agent``, with a model and tools that may be coroutine functions.

    A plain model runs on a worker thread; an awaitable reply is awaited.
    ``cancel`` may be an ``asyncio.Event`` or a ``threading.Event``.
    Commits never block the event loop: they go to the store's writer thread and the run awaits them.
    So many coroutines write to a store as many threads would.

    Args:
        task, model, registry, system: as for ``run_agent``.
        max_steps, token_budget: limits as for ``run_agent``; ``limits=Limits(...)`` sets them all,
            and a limit given both ways is a ``TypeError``.
        **options: the ``RunOptions`` of ``run_agent``.
    """
    return await arun_core(build_core(task, model, registry, system, max_steps, token_budget, **options))
