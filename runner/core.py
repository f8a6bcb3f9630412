"""The loop's decisions, written once for every driver.

``AgentCore.run`` is a generator: it decides what happens next and *yields* an
action (call the model, call a tool); a driver performs it and sends back an
``Outcome``. The sync driver (``run_agent``) waits on worker threads, an async
driver awaits coroutines, and neither holds a single budget or validation rule.
"""

from __future__ import annotations

import contextlib
import json
import re
import time
import uuid
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, field
from typing import Any

from . import limits as st
from .errors import AgentStopped, StopRun
from .limits import Limits, TokenMeter, cut_observation, reply_tokens
from .messages import Message, Model, ModelReply, ToolCall, ToolSpec, assistant_message, tool_message
from .recorder import ModelCallInfo, Recorder, RunInfo, ToolCallInfo
from .replies import loggable, reply_problem, unfinished_reply
from .text import describe_exception
from .tools import Tool, ToolRegistry, failure_observation, result_observation, timeout_observation

# Caller-given run ids land in terminals, file names and trace ids: no spaces, no control characters.
_RUN_ID = re.compile(r"[\x21-\x7e]{1,64}")

DEFAULT_SYSTEM = "You are a helpful assistant. Use the tools when they help, then give a final answer."

Approver = Callable[[ToolCall], "bool | None"]


@dataclass(frozen=True, slots=True)
class AgentResult:
    """How a run ended. ``answer`` is the final text for ``done``, else None.

    ``exception`` keeps the object a model raised (``model_error``), so callers
    such as replay can tell their own errors apart from a broken model.
    """

    status: str
    answer: str | None
    steps: int
    tokens: int
    messages: list[Message]
    run_id: str
    error: str | None = None
    tool_calls: int = 0
    exception: BaseException | None = field(default=None, compare=False, repr=False)

    @property
    def ok(self) -> bool:
        return self.status == st.DONE

    def raise_for_status(self) -> AgentResult:
        """Return self for a finished run, else raise ``AgentStopped``."""
        if self.status != st.DONE:
            raise AgentStopped(self.status, self.error or self.status, self.run_id)
        return self


@dataclass(frozen=True, slots=True)
class CallModel:
    model: Model
    messages: list[Message]
    specs: list[ToolSpec]


@dataclass(frozen=True, slots=True)
class CallTool:
    """Run ``tool`` on ``args``: a copy of the call's, so a tool that edits its arguments
    cannot rewrite the assistant message already appended (and logged)."""

    tool: Tool
    call: ToolCall
    args: dict[str, Any]


Action = CallModel | CallTool


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a driver reports back. ``stop`` is set when it gave up waiting."""

    value: Any = None
    error: BaseException | None = None
    elapsed_s: float = 0.0
    timed_out: bool = False
    stop: str | None = None


def new_run_id() -> str:
    return uuid.uuid4().hex


def model_identity(model: object) -> tuple[str, str | None]:
    name = getattr(model, "model_name", None) or getattr(model, "__name__", None) or type(model).__name__
    provider = getattr(model, "provider_name", None)
    return str(name), (str(provider) if provider else None)


class AgentCore:
    """One run's state and every rule about what comes next."""

    def __init__(
        self,
        task: str,
        model: Model,
        registry: ToolRegistry,
        *,
        system: str,
        limits: Limits,
        recorder: Recorder,
        cancel: Any = None,
        approve: Approver | None = None,
        run_id: str | None = None,
        agent_name: str | None = None,
        labels: Mapping[str, str] | None = None,
        meter: type[TokenMeter] = TokenMeter,
    ) -> None:
        self.task, self.model, self.registry, self.system = task, model, registry, system
        self.limits, self.recorder, self.cancel, self.approve = limits, recorder, cancel, approve
        if run_id is not None and not _RUN_ID.fullmatch(run_id):
            raise ValueError(f"run_id must be 1-64 printable ASCII characters without spaces, got {run_id!r}")
        self.run_id = run_id or new_run_id()
        self.specs = registry.specs()
        self.deadline = (time.monotonic() + limits.timeout_s) if limits.timeout_s else None
        self.messages: list[Message] = []
        self.meter = meter(self.specs)
        self.steps = self.spent = self.tool_calls_run = 0
        self.seen_ids: set[str] = set()
        self.last_call_key: str | None = None
        self.repeats = 0
        self.open_step = False
        self.result: AgentResult | None = None  # set once the run's outcome is decided
        self.closed = False  # set once every recorder has been told that outcome
        # Replay's hook to reproduce a recorded stop (deadline, cancel) at the same point.
        self.external_stop: Callable[[AgentCore, ToolCall | None], tuple[str, str] | None] | None = None
        model_name, provider = model_identity(model)
        self.info = RunInfo(self.run_id, task, system, limits, self.specs, model_name, provider,
                            agent_name, dict(labels or {}))

    @property
    def needs_waiting(self) -> bool:
        """Whether calls must run on a worker so the driver can stop waiting."""
        return self.deadline is not None or self.cancel is not None

    def stop_requested(self) -> str | None:
        if self.cancel is not None and self.cancel.is_set():
            return st.CANCELLED
        if self.deadline is not None and time.monotonic() >= self.deadline:
            return st.DEADLINE
        return None

    def _stop_before(self, call: ToolCall | None) -> tuple[str, str] | None:
        """A stop due before the next model call (``call`` None) or before ``call``."""
        if self.external_stop is not None:
            stop = self.external_stop(self, call)
            if stop:
                return stop
        status = self.stop_requested()
        return (status, _stop_reason(status, self.limits)) if status else None

    def run(self) -> Generator[Action, Outcome, AgentResult]:
        self.recorder.run_started(self.info)
        self._append({"role": "system", "content": self.system})
        self._append({"role": "user", "content": self.task})
        while True:
            stop = self._check_before_model_call()
            if stop:
                return self._finish(*stop)
            self.steps += 1
            step = self.steps
            self.open_step = True
            self.recorder.step_started(step)
            prompt_tokens = self.meter.prompt_tokens()
            self.recorder.model_call_started(step, prompt_tokens)
            outcome = yield CallModel(self.model, self.messages, self.specs)
            reply, stop = self._take_reply(step, prompt_tokens, outcome)
            if stop:
                return self._finish(*stop, exception=outcome.error)
            assert reply is not None
            if not reply.tool_calls:
                return self._finish(st.DONE, None, answer=reply.content)
            for call in reply.tool_calls:
                stop = yield from self._handle_call(step, call)
                if stop:
                    return self._finish(*stop)
            self._end_step()

    def _end_step(self) -> None:
        self.recorder.step_finished(self.steps)
        self.open_step = False

    def _check_before_model_call(self) -> tuple[str, str] | None:
        stop = self._stop_before(None)
        if stop:
            return stop
        lim = self.limits
        if self.steps >= lim.max_steps:
            return st.STEP_LIMIT, f"made {self.steps} model calls (max_steps={lim.max_steps})"
        if lim.max_context_chars is not None and self.meter.context_chars > lim.max_context_chars:
            return st.CONTEXT_BUDGET, (f"context holds {self.meter.context_chars} characters "
                                       f"(max_context_chars={lim.max_context_chars})")
        prompt = self.meter.prompt_tokens()
        if self.spent + prompt > lim.token_budget:
            return st.TOKEN_BUDGET, (f"next prompt of ~{prompt} tokens would bring the run to "
                                     f"{self.spent + prompt} (token_budget={lim.token_budget})")
        return None

    def _take_reply(
        self, step: int, prompt_tokens: int, outcome: Outcome
    ) -> tuple[ModelReply | None, tuple[str, str] | None]:
        """Validate and append a reply; return the stop it causes, if any."""
        reply = outcome.value
        if outcome.stop:
            self._model_call_finished(step, prompt_tokens, None, 0, outcome, error=outcome.stop)
            return None, (outcome.stop, _stop_reason(outcome.stop, self.limits, "the model"))
        if isinstance(outcome.error, StopRun) and outcome.error.status in st.STATUSES \
                and outcome.error.status != st.DONE:
            stop = outcome.error
            self._model_call_finished(step, prompt_tokens, None, 0, outcome, error=stop.reason,
                                      error_type=stop.status)
            return None, (stop.status, stop.reason)
        if outcome.error is not None:
            error = describe_exception(outcome.error)
            self._model_call_finished(step, prompt_tokens, None, 0, outcome, error=error,
                                      error_type=type(outcome.error).__name__)
            return None, (st.MODEL_ERROR, error)
        problem = reply_problem(reply, self.seen_ids)
        if problem:
            shown = reply if loggable(reply) else None
            self._model_call_finished(step, prompt_tokens, shown, 0, outcome, error=problem,
                                      error_type=st.INVALID_REPLY)
            return None, (st.INVALID_REPLY, problem)
        self.seen_ids.update(call.id for call in reply.tool_calls)
        message = assistant_message(reply)
        produced = reply_tokens(message)
        if reply.usage is not None:
            self.spent += reply.usage.input_tokens + reply.usage.output_tokens
        else:
            self.spent += prompt_tokens + produced
        self._append(message, step)
        self._model_call_finished(step, prompt_tokens, reply, produced, outcome)
        cut = unfinished_reply(reply)
        if cut:
            return reply, (st.INVALID_REPLY, cut)
        limit = self.limits.max_output_chars
        if limit is not None:
            size = len(reply.content) + sum(len(json.dumps(c.args)) for c in reply.tool_calls)
            if size > limit:
                return reply, (st.OUTPUT_BUDGET,
                               f"reply of {size} characters (max_output_chars={limit}); its calls were not run")
        return reply, None

    def _handle_call(self, step: int, call: ToolCall) -> Generator[Action, Outcome, tuple[str, str] | None]:
        stop = self._stop_before(call)
        if stop:
            return stop
        observation = self.registry.check(call.name, call.args)
        if observation is not None:  # a refused call breaks a run of identical calls
            self.last_call_key, self.repeats = None, 0
        observation = observation or self._repeat_observation(call)
        tool = self.registry.get(call.name)
        if observation is None and tool is not None:
            lim = self.limits.max_tool_calls
            if lim is not None and self.tool_calls_run >= lim:
                return st.TOOL_BUDGET, (f"call {call.id} ({call.name}) would be tool call "
                                        f"{self.tool_calls_run + 1} (max_tool_calls={lim}); not run")
            if tool.needs_approval:
                verdict = self.approve(call) if self.approve is not None else None
                if verdict is None:
                    return st.AWAITING_APPROVAL, f"call {call.id} ({call.name}) needs approval"
                if not verdict:
                    observation = f"ERROR: the call to {call.name} was denied by the approver; do not retry it"
        ran = observation is None and tool is not None
        duration = 0.0
        if ran:
            assert tool is not None
            self.recorder.tool_started(step, call)
            self.tool_calls_run += 1
            # A copy through JSON: the tool gets exactly what the log holds (checked as JSON data).
            outcome = yield CallTool(tool, call, json.loads(json.dumps(call.args)))
            duration = outcome.elapsed_s
            if outcome.stop:
                self.recorder.tool_finished(ToolCallInfo(step, call, f"ERROR: {outcome.stop}", False,
                                                         duration, True))
                return outcome.stop, _stop_reason(outcome.stop, self.limits, f"tool {call.name}")
            if outcome.timed_out:
                observation = timeout_observation(call.name, tool.timeout_s or 0.0)
            elif outcome.error is not None:
                observation = failure_observation(call.name, outcome.error)
            else:
                observation = result_observation(call.name, outcome.value)
        assert observation is not None
        observation = cut_observation(observation, self.limits.max_result_chars)
        ok = not observation.startswith("ERROR:")
        self.recorder.tool_finished(ToolCallInfo(step, call, observation, ok, duration, ran))
        self._append(tool_message(call, observation), step)
        return None

    def _repeat_observation(self, call: ToolCall) -> str | None:
        key = call.name + "\x00" + json.dumps(call.args, sort_keys=True)
        self.repeats = self.repeats + 1 if key == self.last_call_key else 1
        self.last_call_key = key
        allowed = self.limits.max_identical_calls
        if self.repeats <= allowed:
            return None
        return (f"ERROR: {call.name} was already called {allowed} times in a row with these same "
                "arguments and was not run again. Change course: use different arguments or "
                "another tool, or give your final answer.")

    def _append(self, message: Message, step: int = 0) -> None:
        self.messages.append(message)
        self.meter.add(message)
        self.recorder.message_appended(len(self.messages) - 1, message, step)

    def _model_call_finished(self, step: int, prompt_tokens: int, reply: ModelReply | None,
                             produced: int, outcome: Outcome, error: str | None = None,
                             error_type: str | None = None) -> None:
        self.recorder.model_call_finished(ModelCallInfo(
            step, prompt_tokens, reply, produced, outcome.elapsed_s, error, error_type or error))

    def abort(self, exc: BaseException) -> None:
        """Close a run that an exception is leaving (Ctrl-C, a raising callback or recorder).

        A run still going is logged as ``cancelled`` with the exception as its reason; a
        run whose own close raised (a recorder failed) gets that close tried once more, so
        the store still shows how it ended. Spans are ended, and the caller's exception
        goes on: a failure while closing is not allowed to hide it.
        """
        if self.closed:
            return
        result = self.result
        if result is None:
            result = self._result(st.CANCELLED, f"aborted by {describe_exception(exc)}", exception=exc)
        with contextlib.suppress(Exception):
            self._close(result)

    def _finish(self, status: str, error: str | None, answer: str | None = None,
                exception: BaseException | None = None) -> AgentResult:
        result = self._result(status, error, answer, exception)
        self._close(result)
        return result

    def _result(self, status: str, error: str | None, answer: str | None = None,
                exception: BaseException | None = None) -> AgentResult:
        self.result = AgentResult(status, answer, self.steps, self.spent, self.messages, self.run_id,
                                  error, self.tool_calls_run, exception)
        return self.result

    def _close(self, result: AgentResult) -> None:
        """End the open step and the run. ``run_finished`` is told even when ``step_finished`` raised."""
        failure: Exception | None = None
        if self.open_step:
            self.open_step = False
            try:
                self.recorder.step_finished(self.steps)
            except Exception as exc:
                failure = exc
        self.recorder.run_finished(result)
        self.closed = True
        if failure is not None:
            raise failure


def _stop_reason(status: str, limits: Limits, waiting_on: str | None = None) -> str:
    suffix = f" while waiting on {waiting_on}" if waiting_on else ""
    if status == st.DEADLINE:
        return f"run deadline of {limits.timeout_s:g} s passed{suffix}"
    return f"cancelled by the caller{suffix}"
