"""runner: a durable, traced agent runner. The public API, re-exported.

The loop's and replay's names import eagerly; the event log and tracing names load on
first use, so ``import runner`` does not pay for SQLAlchemy, Alembic and the
OpenTelemetry SDK until a store or a trace is actually needed.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._log.limits import Limits
from ._log.records import RunSummary, StoredEvent, StoredRun
from ._log.state import RunState, fold
from ._log.statuses import STATUSES, Liveness, Status
from ._loop.core import DEFAULT_SYSTEM
from ._loop.plan import run_plan
from ._loop.results import AgentResult
from ._replay.fixture import Fixture, load_fixture
from ._replay.replayer import ReplayReport, replay
from ._replay.scripted import ReplayModel, ScriptedModel
from ._run.agent import arun_agent, run_agent
from ._run.build import RunOptions
from ._run.resume import afollow_up, afork, aresume, follow_up, fork, resume
from ._run.streaming import (
    RunEnded,
    StreamEvent,
    TextDelta,
    astream_agent,
    astream_follow_up,
    astream_fork,
    astream_resume,
    stream_agent,
    stream_follow_up,
    stream_fork,
    stream_resume,
)
from ._tools.registry import Tool, ToolRegistry
from ._tools.schema import validate_args
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
from .messages import AsyncModel, Message, Model, ModelReply, ToolCall, ToolSpec, Usage
from .recorder import FanoutRecorder, NullRecorder, Recorder

if TYPE_CHECKING:
    from ._rerun import RerunReport, rerun
    from .pool import submit
    from .progress import ProgressRecorder
    from .store import RunStore, open_store
    from .tracing import TracingRecorder, TracingSetupError, configure_tracing, export_run, rebuild_spans

_LAZY = {
    "RunStore": "store", "open_store": "store",
    "TracingRecorder": "tracing", "TracingSetupError": "tracing", "configure_tracing": "tracing",
    "export_run": "tracing", "rebuild_spans": "tracing",
    "submit": "pool",
    "ProgressRecorder": "progress",
    "RerunReport": "_rerun", "rerun": "_rerun",
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
    "Liveness",
    "Message",
    "Model",
    "ModelReply",
    "NullRecorder",
    "ProgressRecorder",
    "Recorder",
    "ReplayDivergence",
    "ReplayModel",
    "ReplayReport",
    "RerunReport",
    "RunEnded",
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
    "Status",
    "StopRun",
    "StoreError",
    "StoredEvent",
    "StoredRun",
    "StreamEvent",
    "TextDelta",
    "Tool",
    "ToolCall",
    "ToolRegistry",
    "ToolSpec",
    "TracingRecorder",
    "TracingSetupError",
    "Usage",
    "afollow_up",
    "afork",
    "aresume",
    "arun_agent",
    "astream_agent",
    "astream_follow_up",
    "astream_fork",
    "astream_resume",
    "configure_tracing",
    "export_run",
    "fold",
    "follow_up",
    "fork",
    "load_fixture",
    "open_store",
    "rebuild_spans",
    "replay",
    "rerun",
    "resume",
    "run_agent",
    "run_plan",
    "stream_agent",
    "stream_follow_up",
    "stream_fork",
    "stream_resume",
    "submit",
    "validate_args",
]
