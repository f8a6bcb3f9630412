"""runner: a durable, traced agent runner. The public API, re-exported."""

from .core import DEFAULT_SYSTEM, AgentResult
from .errors import AgentStopped, RunnerError, ScriptError, ScriptExhausted, StoreError
from .limits import STATUSES, Limits
from .loop import run_agent
from .messages import Message, Model, ModelReply, ToolCall, ToolSpec, Usage
from .plan import run_plan
from .recorder import FanoutRecorder, ModelCallInfo, NullRecorder, Recorder, RunInfo, ToolCallInfo
from .schema import validate_args
from .scripted import ScriptedModel
from .tools import Tool, ToolRegistry

__all__ = [
    "AgentResult",
    "AgentStopped",
    "DEFAULT_SYSTEM",
    "FanoutRecorder",
    "Limits",
    "Message",
    "Model",
    "ModelCallInfo",
    "ModelReply",
    "NullRecorder",
    "Recorder",
    "RunInfo",
    "RunnerError",
    "STATUSES",
    "ScriptError",
    "ScriptExhausted",
    "ScriptedModel",
    "StoreError",
    "Tool",
    "ToolCall",
    "ToolCallInfo",
    "ToolRegistry",
    "ToolSpec",
    "Usage",
    "run_agent",
    "run_plan",
    "validate_args",
]
