"""The typed result in the loop: judging ``final_result`` calls and plain-text replies, and taking the output.

A valid ``final_result`` call is answered without running anything (no ``tool_started``) and, once
the reply's other calls have run, ends the run ``done`` with its value. An invalid one, or a reply in
plain text, is an ``ERROR:`` the model reads and an ``output_rejected`` fact; past ``max_output_retries``
such failures the run ends ``invalid_output``. Functions over the core, so the loop's module reads as the loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

from .._log.statuses import Status
from .._text import plural
from .._tools.output import ACCEPTED, FINAL_RESULT, OutputSpec, Taken, plain_text_error
from ..events import MessageAppended, OutputRejected, StepFinished
from ..messages import ModelReply, ToolCall
from .actions import Stop

if TYPE_CHECKING:
    from .calls import Refusal
    from .core import AgentCore

class Given(NamedTuple):
    """The run's typed result: the value (an instance of T), its JSON, and that JSON as text (the answer)."""

    value: Any
    data: Any
    answer: str


def judge(spec: OutputSpec, call: ToolCall) -> Refusal:
    """What becomes of a ``final_result`` call: accepted, or refused with what is wrong (it never runs)."""
    from .calls import Refusal

    taken = spec.take(call.args)
    if taken.problem is not None:
        return Refusal(taken.problem, "invalid_args")
    return Refusal(ACCEPTED, None)


def rejected(core: AgentCore, step: int, call: ToolCall, refused: str | None, observation: str) -> None:
    """Log a ``final_result`` call refused for its arguments as a failed attempt at the result."""
    if refused == "invalid_args" and call.name == FINAL_RESULT and core.output is not None:
        core.emit(OutputRejected(step=step, call_id=call.id, error=observation))


def from_text(core: AgentCore, step: int, reply: ModelReply) -> Given | Stop | None:
    """A reply with no tool call: the result in ``native`` mode, else a failed attempt the model is told of."""
    spec = core.output
    assert spec is not None
    if spec.mode == "native":
        taken = spec.take_text(reply.content)
        if taken.problem is None:
            return _given(taken)
        error = taken.problem
    else:
        error = plain_text_error(spec)
    s = core.state
    core.emit(MessageAppended(step=step, index=len(s.messages), message={"role": "user", "content": error}))
    core.emit(OutputRejected(step=step, error=error))
    stop = over_limit(core)
    if stop is None:
        core.emit(StepFinished(step=step))
    return stop


def from_calls(core: AgentCore, reply: ModelReply | None) -> Given | Stop | None:
    """Once a reply's calls are answered: its accepted ``final_result``, or the stop too many failures make."""
    spec, s = core.output, core.state
    assert spec is not None
    for call in reply.tool_calls if reply is not None else ():
        finished = s.finished_calls.get(call.id)
        if call.name == FINAL_RESULT and finished is not None and finished.ok and finished.refused is None:
            return _given(spec.take(call.args))
    return over_limit(core)


def over_limit(core: AgentCore) -> Stop | None:
    """``invalid_output`` once the failed attempts are more than ``max_output_retries``."""
    failures, allowed = core.state.output_failures, core.limits.max_output_retries
    if failures <= allowed:
        return None
    return Stop(Status.INVALID_OUTPUT, f"{plural(failures, 'failed attempt')} at the typed result "
                                       f"(max_output_retries={allowed})")


def _given(taken: Taken) -> Given:
    from .. import _jsontext

    return Given(taken.value, taken.data, _jsontext.strict(taken.data))
