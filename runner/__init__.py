"""runner: a durable, traced agent runner. The public API, re-exported.

The loop's and replay's names import eagerly; the event log and tracing names load on
first use, so ``import runner`` does not pay for SQLAlchemy, Alembic and the
OpenTelemetry SDK until a store or a trace is actually needed.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .aloop import arun_agent
from .core import DEFAULT_SYSTEM
from .errors import (
    AgentStopped,
    CannotResume,
    FixtureError,
    ReplayDivergence,
    RunInUse,
    RunnerError,
    RunNotFound,
    ScriptError,
    ScriptExhausted,
    StopRun,
    StoreError,
)
from .events import Event
from .fixture import Fixture, load_fixture
from .limits import STATUSES, Limits
from .loop import run_agent
from .messages import AsyncModel, Message, Model, ModelReply, ToolCall, ToolSpec, Usage
from .options import RunOptions
from .plan import run_plan
from .recorder import FanoutRecorder, NullRecorder, Recorder
from .replay import ReplayModel, ReplayReport, replay
from .results import AgentResult
from .resume import follow_up, fork, resume
from .schema import validate_args
from .scripted import ScriptedModel
from .state import RunState, fold
from .tools import Tool, ToolRegistry

if TYPE_CHECKING:
    from .pool import submit
    from .progress import ProgressRecorder
    from .store import RunStore, RunSummary, StoredEvent, StoredRun, open_store
    from .tracing import TracingRecorder, TracingSetupError, configure_tracing, export_run, rebuild_spans

_LAZY = {
    "RunStore": "store", "RunSummary": "store", "StoredEvent": "store", "StoredRun": "store",
    "open_store": "store",
    "TracingRecorder": "tracing", "TracingSetupError": "tracing", "configure_tracing": "tracing",
    "export_run": "tracing", "rebuild_spans": "tracing",
    "submit": "pool",
    "ProgressRecorder": "progress",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'runner' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


__all__ = [
    "AgentResult",
    "AgentStopped",
    "AsyncModel",
    "CannotResume",
    "DEFAULT_SYSTEM",
    "Event",
    "FanoutRecorder",
    "Fixture",
    "FixtureError",
    "Limits",
    "Message",
    "Model",
    "ModelReply",
    "NullRecorder",
    "ProgressRecorder",
    "Recorder",
    "ReplayDivergence",
    "ReplayModel",
    "ReplayReport",
    "RunInUse",
    "RunNotFound",
    "RunOptions",
    "RunState",
    "RunStore",
    "RunSummary",
    "RunnerError",
    "STATUSES",
    "ScriptError",
    "ScriptExhausted",
    "ScriptedModel",
    "StopRun",
    "StoreError",
    "StoredEvent",
    "StoredRun",
    "Tool",
    "ToolCall",
    "ToolRegistry",
    "ToolSpec",
    "TracingRecorder",
    "TracingSetupError",
    "Usage",
    "arun_agent",
    "configure_tracing",
    "export_run",
    "fold",
    "follow_up",
    "fork",
    "load_fixture",
    "open_store",
    "rebuild_spans",
    "replay",
    "resume",
    "run_agent",
    "run_plan",
    "submit",
    "validate_args",
]
