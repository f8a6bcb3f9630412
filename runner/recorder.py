"""The one seam between the loop and the outside world (event log, tracing).

The loop calls a recorder at each fact, in order, on the loop's own thread, and
*before* acting on it: ``model_call_started`` before the model is called,
``tool_started`` before a tool function runs. A durable recorder therefore
commits what it holds at those two points, which is what makes a killed process
leave a log that says exactly how far the run got.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from .limits import Limits
from .messages import Message, ModelReply, ToolCall, ToolSpec

if TYPE_CHECKING:
    from .core import AgentResult


@dataclass(frozen=True, slots=True)
class RunInfo:
    """What is known when a run starts."""

    run_id: str
    task: str
    system: str
    limits: Limits
    tool_specs: Sequence[ToolSpec]
    model_name: str
    provider_name: str | None = None
    agent_name: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    parent_run_id: str | None = None


@dataclass(frozen=True, slots=True)
class ModelCallInfo:
    """One finished model call. ``reply`` is None when the call raised or was abandoned."""

    step: int
    prompt_tokens: int
    reply: ModelReply | None
    reply_tokens: int
    latency_s: float
    error: str | None = None
    error_type: str | None = None


@dataclass(frozen=True, slots=True)
class ToolCallInfo:
    """One call that got an observation. ``ran`` is False for calls refused before running."""

    step: int
    call: ToolCall
    observation: str
    ok: bool
    duration_s: float
    ran: bool


class Recorder(Protocol):
    """Told each fact of a run, in order. ``run_finished`` may come a second time with the
    same result when the first call raised (the loop retries closing the run): a recorder
    that has already closed it ignores the repeat."""

    def run_started(self, run: RunInfo) -> None: ...
    def message_appended(self, index: int, message: Message, step: int) -> None: ...
    def step_started(self, step: int) -> None: ...
    def model_call_started(self, step: int, prompt_tokens: int) -> None: ...
    def model_call_finished(self, info: ModelCallInfo) -> None: ...
    def tool_started(self, step: int, call: ToolCall) -> None: ...
    def tool_finished(self, info: ToolCallInfo) -> None: ...
    def step_finished(self, step: int) -> None: ...
    def run_finished(self, result: AgentResult) -> None: ...


class NullRecorder:
    """Records nothing: ``run_agent`` without a store or tracer takes the same path."""

    def run_started(self, run: RunInfo) -> None:
        pass

    def message_appended(self, index: int, message: Message, step: int) -> None:
        pass

    def step_started(self, step: int) -> None:
        pass

    def model_call_started(self, step: int, prompt_tokens: int) -> None:
        pass

    def model_call_finished(self, info: ModelCallInfo) -> None:
        pass

    def tool_started(self, step: int, call: ToolCall) -> None:
        pass

    def tool_finished(self, info: ToolCallInfo) -> None:
        pass

    def step_finished(self, step: int) -> None:
        pass

    def run_finished(self, result: AgentResult) -> None:
        pass


class FanoutRecorder:
    """Passes every fact to several recorders, in the order given.

    Order matters: tracing goes before the store so the store can log the ids
    of the spans the tracer has just opened. A recorder that raises stops a fact
    there (a ``tool_started`` must not be logged for a tool that will not run),
    except the two that close a run: every recorder hears those, so a broken span
    processor cannot leave the stored run open, and the first error is raised after.
    """

    def __init__(self, recorders: Sequence[Recorder]) -> None:
        self.recorders = list(recorders)

    def run_started(self, run: RunInfo) -> None:
        for r in self.recorders:
            r.run_started(run)

    def message_appended(self, index: int, message: Message, step: int) -> None:
        for r in self.recorders:
            r.message_appended(index, message, step)

    def step_started(self, step: int) -> None:
        for r in self.recorders:
            r.step_started(step)

    def model_call_started(self, step: int, prompt_tokens: int) -> None:
        for r in self.recorders:
            r.model_call_started(step, prompt_tokens)

    def model_call_finished(self, info: ModelCallInfo) -> None:
        for r in self.recorders:
            r.model_call_finished(info)

    def tool_started(self, step: int, call: ToolCall) -> None:
        for r in self.recorders:
            r.tool_started(step, call)

    def tool_finished(self, info: ToolCallInfo) -> None:
        for r in self.recorders:
            r.tool_finished(info)

    def step_finished(self, step: int) -> None:
        self._tell_all(lambda r: r.step_finished(step))

    def run_finished(self, result: AgentResult) -> None:
        self._tell_all(lambda r: r.run_finished(result))

    def _tell_all(self, tell: Callable[[Recorder], object]) -> None:
        failure: BaseException | None = None
        for r in self.recorders:
            try:
                tell(r)
            except BaseException as exc:  # Ctrl-C too: the others still close the run, then it goes on
                failure = failure or exc
        if failure is not None:
            raise failure


def describe_reply(reply: ModelReply) -> dict[str, Any]:
    """A reply as JSON-able data, for logs and spans."""
    return {
        "content": reply.content,
        "tool_calls": [{"id": c.id, "name": c.name, "args": c.args} for c in reply.tool_calls],
        "usage": None if reply.usage is None else {
            "input_tokens": reply.usage.input_tokens, "output_tokens": reply.usage.output_tokens},
        "stop_reason": reply.stop_reason,
    }
