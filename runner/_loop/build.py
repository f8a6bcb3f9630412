"""The keyword options ``run_agent`` and ``arun_agent`` share, and the core they build.

Both drivers take exactly these options, so a limit added here reaches sync and
async runs alike, and neither driver can forget one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

from .._log.state import RunState
from .._tools.registry import ToolRegistry
from ..events import Event, MessageAppended, RunStarted
from ..messages import AnyModel, Message
from ..recorder import Recorder
from .core import AgentCore, Approver
from .limits import Limits
from .results import checked_run_id, model_identity
from .wiring import TraceLink, build_recorder

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

    from ..store import RunStore


class ContinueOptions(TypedDict, total=False):
    """The options of a run that continues a stored one (``resume``, ``fork``, ``follow_up``):
    its store and run id come from the stored run.

    ``cancel`` is any object with ``is_set()`` (a ``threading.Event``, or an
    ``asyncio.Event`` for async runs). ``tools_ref`` says where the registry comes
    from (``"myapp.tools:registry"``): it is logged with the run so that ``runner
    show`` can print a ``runner resume`` command that works as it stands.
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
    agent_name: str | None
    tools_ref: str | None
    labels: Mapping[str, str] | None
    tracer_provider: TracerProvider | None
    record_content: bool


class RunOptions(ContinueOptions, total=False):
    """Everything beyond task, model, registry, system, max_steps and token_budget."""

    run_id: str | None
    store: RunStore | None


def build_core(
    task: str, model: AnyModel, registry: ToolRegistry, system: str, max_steps: int, token_budget: int,
    **options: Unpack[RunOptions],
) -> AgentCore:
    """The core of a new run: it opens with ``run_started`` and the system and user messages."""
    limits = limits_from(max_steps, token_budget, options)
    run_id = checked_run_id(options.get("run_id"))
    first = new_run_opening(run_id, task, system, limits, registry, model, options.get("agent_name"),
                            options.get("labels"), options.get("tools_ref"))
    return core_for(model, registry, run_id, limits, first, None, options)


def new_run_opening(run_id: str, task: str, system: str, limits: Limits, registry: ToolRegistry, model: AnyModel,
                    agent_name: str | None = None, labels: Mapping[str, str] | None = None,
                    tools_ref: str | None = None) -> list[Event]:
    """The facts a new run opens with: ``run_started``, the system prompt and the task."""
    model_name, provider = model_identity(model)
    started = RunStarted(run_id=run_id, task=task, system=system, limits=limits.to_dict(), tool_specs=registry.specs(),
                         model=model_name, provider=provider, agent_name=agent_name, labels=dict(labels or {}),
                         tools_ref=tools_ref)
    return opening(started, [{"role": "system", "content": system}, {"role": "user", "content": task}])


def check_options(options: Mapping[str, Any]) -> None:
    unknown = set(options) - set(RunOptions.__annotations__)
    if unknown:
        raise TypeError(f"unknown run option(s): {', '.join(sorted(unknown))}")
    recorder = options.get("recorder")
    if recorder is not None and not all(callable(getattr(recorder, name, None)) for name in ("record", "sync")):
        raise TypeError(f"recorder must have record(event) and sync() methods, got {type(recorder).__name__}")
    tools_ref = options.get("tools_ref")
    if tools_ref is not None and not isinstance(tools_ref, str):
        raise TypeError(f"tools_ref must be a string like 'myapp.tools:registry', got {type(tools_ref).__name__}")


def limits_from(max_steps: int, token_budget: int, options: Mapping[str, Any]) -> Limits:
    check_options(options)
    return Limits(
        max_steps, token_budget, options.get("max_tool_calls"), options.get("timeout_s"),
        options.get("max_context_chars"), options.get("max_output_chars"), options.get("max_result_chars"),
        options.get("max_identical_calls", 2),
    )


def opening(started: RunStarted, messages: Sequence[Message]) -> list[Event]:
    """The first facts of a new run: ``run_started``, then each message it begins with."""
    return [started, *(MessageAppended(index=i, message=m) for i, m in enumerate(messages))]


def core_for(model: AnyModel, registry: ToolRegistry, run_id: str, limits: Limits, first: Sequence[Event],
             state: RunState | None, options: Mapping[str, Any], link: TraceLink | None = None,
             store: RunStore | None = None) -> AgentCore:
    """A core on the recorders ``options`` ask for, starting from ``state`` with the facts ``first``."""
    state = state if state is not None else RunState(run_id=run_id)
    store = store if store is not None else options.get("store")
    recorder = build_recorder(store=store, tracer_provider=options.get("tracer_provider"),
                              record_content=options.get("record_content", False), extra=options.get("recorder"),
                              state=state, link=link)
    return AgentCore(model, registry, run_id=run_id, limits=limits, recorder=recorder, opening=first, state=state,
                     cancel=options.get("cancel"), approve=options.get("approve"))
