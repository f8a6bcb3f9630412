"""Replay: run the current loop and tools against a recording, and say where they differ.

The replaying model plays back the recorded replies in order. In strict mode it
also compares, at every call, the message list the loop shows it with the list
the recorded model was shown at that point, and raises ``ReplayDivergence`` at
the first difference: that is how a regression test pins a trace. Only the model
is replayed; tools really run, so a changed tool shows up as a changed result.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Unpack

from .core import AgentCore, AgentResult
from .errors import ReplayDivergence, StopRun
from .fixture import INTERRUPTIBLE, Fixture, fixture_from_run, load_fixture
from .loop import drive
from .messages import Message, ModelReply, ToolCall, ToolSpec
from .options import RunOptions, build_core
from .scripted import ScriptedModel
from .tools import ToolRegistry

if TYPE_CHECKING:
    from .store import RunStore
    from .store.records import StoredRun

SHOWN_CHARS = 120


class ReplayModel(ScriptedModel):
    """A scripted model built from a recording; strict by default.

    Lenient mode (``strict=False``) plays back without stopping at differences but
    still collects them in ``differences``.
    """

    def __init__(self, fixture: Fixture, strict: bool = True) -> None:
        super().__init__([])
        self.fixture = fixture
        self.strict = strict
        self.replies = [fixture.reply(i) if "stop" not in block else ModelReply()
                        for i, block in enumerate(fixture.replies)]
        self.model_name = str(fixture.data.get("model") or "replay")
        self.provider_name = str(fixture.data.get("provider") or "replay")
        self.differences: list[ReplayDivergence] = []

    def __call__(self, messages: Sequence[Message], tool_specs: Sequence[ToolSpec]) -> ModelReply:
        self.calls += 1
        self._shown.append((messages, len(messages)))
        blocks = self.fixture.replies
        if self.calls > len(blocks):
            raise ReplayDivergence(
                self.calls, None, "replies",
                f"at step {self.calls} the loop asked the model again, but the recording ended after "
                f"{len(blocks)} model calls")
        difference = compare_messages(self.calls, self.fixture.messages_before(self.calls), messages)
        if difference is not None:
            self.differences.append(difference)
            if self.strict:
                raise difference
        block = blocks[self.calls - 1]
        if "stop" in block:
            raise StopRun(block["stop"]["status"], block["stop"]["reason"])
        return self.replies[self.calls - 1]


def compare_messages(step: int, recorded: Sequence[Message], got: Sequence[Message]) -> ReplayDivergence | None:
    """The first difference between two message lists, as a readable divergence."""
    for index, (want, have) in enumerate(zip(recorded, got, strict=False)):
        if want != have:
            return _message_divergence(step, index, want, have)
    if len(recorded) != len(got):
        index = min(len(recorded), len(got))
        if len(got) > len(recorded):
            extra = got[index]
            return ReplayDivergence(step, index, "messages",
                                    f"at step {step} the loop showed an extra message {index} "
                                    f"({_describe(extra)}) that the recording does not have",
                                    None, extra)
        missing = recorded[index]
        return ReplayDivergence(step, index, "messages",
                                f"at step {step} message {index} ({_describe(missing)}) is missing from "
                                "the replay", missing, None)
    return None


def _message_divergence(step: int, index: int, want: Message, have: Message) -> ReplayDivergence:
    field_name = next((k for k in ("role", "tool_call_id", "name", "content", "tool_calls")
                       if want.get(k) != have.get(k)), "message")
    recorded, got = want.get(field_name), have.get(field_name)
    if want["role"] == "tool" and field_name == "content":
        what = f"the result of call {want['tool_call_id']} ({want['name']})"
    elif index == 0 and field_name == "content":
        what = "the system prompt"
    elif index == 1 and field_name == "content":
        what = "the task"
    else:
        what = f"message {index} ({_describe(want)}) field {field_name!r}"
    sentence = f"at step {step} {what} differs: recorded {_shown(recorded)}, got {_shown(got)}"
    return ReplayDivergence(step, index, field_name, sentence, recorded, got, _diff(recorded, got))


def _describe(message: Message) -> str:
    if message["role"] == "tool":
        return f"result of call {message['tool_call_id']} ({message['name']})"
    if message["role"] == "assistant" and message["tool_calls"]:
        return "assistant calling " + ", ".join(c["name"] for c in message["tool_calls"])
    return f"{message['role']} message"


def _shown(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return repr(text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "...")


def _diff(recorded: Any, got: Any) -> str:
    def lines(value: Any) -> list[str]:
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                return value.splitlines() or [""]
        return json.dumps(value, indent=1, sort_keys=True).splitlines()

    out = list(difflib.unified_diff(lines(recorded), lines(got), "recorded", "replayed", n=1, lineterm=""))
    return "\n".join(out[:20] + (["..."] if len(out) > 20 else []))


@dataclass(frozen=True, slots=True)
class ReplayReport:
    """How a replay went. ``ok`` means it matched the recording, whatever that recorded."""

    result: AgentResult
    divergence: ReplayDivergence | None
    recorded_status: str
    recorded_answer: str | None
    differences: list[ReplayDivergence] = field(default_factory=list)

    @property
    def same_status(self) -> bool:
        return self.result.status == self.recorded_status

    @property
    def same_answer(self) -> bool:
        return self.result.answer == self.recorded_answer

    @property
    def ok(self) -> bool:
        return self.divergence is None and self.same_status and self.same_answer

    def explain(self) -> str:
        if self.divergence is not None:
            return str(self.divergence)
        if not self.same_status:
            return (f"replay ended with {self.result.status} ({self.result.error}), "
                    f"the recording with {self.recorded_status}")
        if not self.same_answer:
            return f"replay answered {_shown(self.result.answer)}, the recording {_shown(self.recorded_answer)}"
        steps = self.result.steps
        return f"replay matched the recording ({self.result.status}, {steps} step{'s' * (steps != 1)})"

    def assert_ok(self) -> ReplayReport:
        """Return self when the replay matched, else raise ``AssertionError`` with the divergence."""
        if not self.ok:
            raise AssertionError(self.explain())
        return self


def as_fixture(source: str | Path | Fixture | StoredRun, store: RunStore | None = None) -> Fixture:
    if isinstance(source, Fixture):
        return source
    if isinstance(source, (str, Path)):
        if store is not None:
            return fixture_from_run(store.find_run(str(source)))
        return load_fixture(source)
    return fixture_from_run(source)


def replay(
    source: str | Path | Fixture | StoredRun,
    registry: ToolRegistry,
    *,
    source_store: RunStore | None = None,
    strict: bool = True,
    task: str | None = None,
    system: str | None = None,
    max_steps: int | None = None,
    token_budget: int | None = None,
    **options: Unpack[RunOptions],
) -> ReplayReport:
    """Replay a fixture path, a ``Fixture``, a stored run, or a run id in ``source_store``.

    Reuses the recorded task, system prompt and limits unless given here; other
    ``run_agent`` options (``store`` to record the replay itself, ``tracer_provider``...)
    pass through.
    """
    fixture = as_fixture(source, source_store)
    limits = fixture.limits
    for name in ("max_tool_calls", "timeout_s", "max_context_chars", "max_output_chars", "max_result_chars",
                 "max_identical_calls"):
        if name in limits and name not in options:
            options[name] = limits[name]
    model = ReplayModel(fixture, strict=strict)
    core = build_core(task if task is not None else fixture.task, model, registry,
                      system if system is not None else fixture.system,
                      max_steps if max_steps is not None else int(limits["max_steps"]),
                      token_budget if token_budget is not None else int(limits["token_budget"]), **options)
    core.external_stop = _recorded_stop(fixture)
    result = drive(core)
    divergence = result.exception if isinstance(result.exception, ReplayDivergence) else None
    if divergence is None and strict:
        divergence = _final_divergence(fixture, model, result)
    outcome = fixture.outcome
    return ReplayReport(result, divergence, outcome["status"], outcome["answer"], model.differences)


def _final_divergence(fixture: Fixture, model: ReplayModel, result: AgentResult) -> ReplayDivergence | None:
    left = len(fixture.replies) - model.calls
    if left > 0:
        return ReplayDivergence(result.steps, None, "replies",
                                f"the replay stopped with {result.status} after step {result.steps}, "
                                f"but the recording has {left} more model repl{'y' if left == 1 else 'ies'}")
    return compare_messages(result.steps, fixture.messages(), result.messages)


def _recorded_stop(fixture: Fixture) -> Any:
    """Stop the replay where a deadline or cancel stopped the recording, with its reason."""
    outcome = fixture.outcome
    if outcome["status"] not in INTERRUPTIBLE or (fixture.replies and "stop" in fixture.replies[-1]):
        return None
    status, reason, call_id = outcome["status"], outcome["error"] or outcome["status"], \
        outcome.get("stopped_before_call")
    calls = len(fixture.replies)

    def stop(core: AgentCore, call: ToolCall | None) -> tuple[str, str] | None:
        if call_id is not None:
            return (status, reason) if call is not None and call.id == call_id else None
        return (status, reason) if call is None and core.steps == calls else None

    return stop


def scripted_from_fixture(path: str | Path, strict: bool = True) -> ReplayModel:
    return ReplayModel(load_fixture(path), strict=strict)


def scripted_from_run(store: RunStore, run_id: str, strict: bool = True) -> ReplayModel:
    return ReplayModel(fixture_from_run(store.find_run(run_id)), strict=strict)
