"""The keyword options ``run_agent`` and ``arun_agent`` share, and the core they build.

Both drivers take exactly these options, so a limit added here reaches sync and
async runs alike, and neither driver can forget one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

from .core import AgentCore, Approver
from .limits import Limits
from .messages import Model
from .recorder import Recorder
from .tools import ToolRegistry
from .wiring import build_recorder

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

    from .store import RunStore


class RunOptions(TypedDict, total=False):
    """Everything beyond task, model, registry, system, max_steps and token_budget.

    ``cancel`` is any object with ``is_set()`` (a ``threading.Event``, or an
    ``asyncio.Event`` for async runs).
    """

    max_tool_calls: int | None
    timeout_s: float | None
    max_context_chars: int | None
    max_output_chars: int | None
    max_result_chars: int | None
    max_identical_calls: int
    cancel: Any
    approve: Approver | None
    recorder: Recorder | None
    run_id: str | None
    agent_name: str | None
    labels: Mapping[str, str] | None
    store: RunStore | None
    tracer_provider: TracerProvider | None
    record_content: bool


def build_core(
    task: str, model: Model, registry: ToolRegistry, system: str, max_steps: int, token_budget: int,
    **options: Unpack[RunOptions],
) -> AgentCore:
    unknown = set(options) - set(RunOptions.__annotations__)
    if unknown:
        raise TypeError(f"unknown run option(s): {', '.join(sorted(unknown))}")
    limits = Limits(
        max_steps, token_budget, options.get("max_tool_calls"), options.get("timeout_s"),
        options.get("max_context_chars"), options.get("max_output_chars"), options.get("max_result_chars"),
        options.get("max_identical_calls", 2),
    )
    recorder = build_recorder(store=options.get("store"), tracer_provider=options.get("tracer_provider"),
                              record_content=options.get("record_content", False), extra=options.get("recorder"))
    return AgentCore(task, model, registry, system=system, limits=limits, recorder=recorder,
                     cancel=options.get("cancel"), approve=options.get("approve"), run_id=options.get("run_id"),
                     agent_name=options.get("agent_name"), labels=options.get("labels"))
