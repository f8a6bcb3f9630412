"""Replay: run the current loop and tools against a recording, and say where they differ.

The replaying model plays back the recorded replies in order. In strict mode it
also compares, at every call, what the loop shows it (the tool specs, and the
message list) with what the recorded model was shown at that point, and each
reply's calls with the calls the recording handled, and raises
``ReplayDivergence`` at the first difference: that is how a regression test pins
a trace. Only the model is replayed; tools really run, so a changed tool shows up
as a changed result. Strict replay never runs a call the recording did not make:
the reply is checked before any of its calls runs, and each tool is guarded in
case the loop goes further than the recording did (a larger budget, an approval).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Unpack

from .core import AgentCore, AgentResult
from .divergence import compare_calls, compare_messages, compare_specs, shown, unrecorded_run
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

class ReplayModel(ScriptedModel):
    """A scripted model built from a recording; strict by default.

    Lenient mode (``strict=False``) plays back without stopping at differences but
    still collects them in ``differences`` (and runs whatever calls the replies make).
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
        # A call the loop was about to run although the recording never did (strict replay's tool guard).
        self.blocked: ReplayDivergence | None = None
        self.handling: ToolCall | None = None

    def __call__(self, messages: Sequence[Message], tool_specs: Sequence[ToolSpec]) -> ModelReply:
        self.calls += 1
        self._shown.append((messages, len(messages)))
        if self.blocked is not None:
            raise self.blocked
        step, blocks = self.calls, self.fixture.replies
        if step > len(blocks):
            raise ReplayDivergence(
                step, None, "replies",
                f"at step {step} the loop asked the model again, but the recording ended after "
                f"{len(blocks)} model calls")
        if step == 1:  # the specs are fixed for a run: compared once, before the messages
            self._differs(compare_specs(step, self.fixture.tool_specs, tool_specs))
        self._differs(compare_messages(step, self.fixture.messages_before(step), messages))
        block = blocks[step - 1]
        if "stop" in block:
            raise StopRun(block["stop"]["status"], block["stop"]["reason"])
        self._differs(compare_calls(step, block, last=step == len(blocks)))
        return self.replies[step - 1]

    def _differs(self, difference: ReplayDivergence | None) -> None:
        if difference is not None:
            self.differences.append(difference)
            if self.strict:
                raise difference

    def check_recorded(self) -> None:
        """Raise unless the call being handled is one the recording handled in this reply."""
        call = self.handling
        if call is None or self.calls == 0 or self.calls > len(self.fixture.replies):
            return
        block = self.fixture.replies[self.calls - 1]
        if any((o["call_id"], o["name"]) == (call.id, call.name) for o in block.get("observations", [])):
            return
        difference = unrecorded_run(self.calls, str(call.name), call.id)
        self.blocked = self.blocked or difference
        self.differences.append(difference)
        raise difference


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
            return f"replay answered {shown(self.result.answer)}, the recording {shown(self.recorded_answer)}"
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
    core = build_core(task if task is not None else fixture.task, model,
                      guarded(registry, model) if strict else registry,
                      system if system is not None else fixture.system,
                      max_steps if max_steps is not None else int(limits["max_steps"]),
                      token_budget if token_budget is not None else int(limits["token_budget"]), **options)
    core.external_stop = _watch(model, _recorded_stop(fixture))
    result = drive(core)
    divergence = result.exception if isinstance(result.exception, ReplayDivergence) else None
    if divergence is None and strict:
        divergence = model.blocked or _final_divergence(fixture, model, core, result)
    outcome = fixture.outcome
    return ReplayReport(result, divergence, outcome["status"], outcome["answer"], model.differences)


def _final_divergence(fixture: Fixture, model: ReplayModel, core: AgentCore, result: AgentResult
                      ) -> ReplayDivergence | None:
    if model.calls == 0:  # the loop stopped before showing the model anything: still compare the tools
        specs = compare_specs(1, fixture.tool_specs, core.specs)
        if specs is not None:
            return specs
    left = len(fixture.replies) - model.calls
    if left > 0:
        return ReplayDivergence(result.steps, None, "replies",
                                f"the replay stopped with {result.status} after step {result.steps}, "
                                f"but the recording has {left} more model repl{'y' if left == 1 else 'ies'}")
    return compare_messages(result.steps, fixture.messages(), result.messages)


Stop = Callable[[AgentCore, ToolCall | None], tuple[str, str] | None]


def guarded(registry: ToolRegistry, model: ReplayModel) -> ToolRegistry:
    """The same tools (same specs, same options), each refusing to run a call the recording did not make."""
    out = ToolRegistry()
    for spec in registry.specs():
        tool = registry.get(spec["name"])
        assert tool is not None
        out.register(tool.name, tool.description, tool.parameters, _guard(model, tool.fn), timeout_s=tool.timeout_s,
                     side_effects=tool.side_effects, needs_approval=tool.needs_approval)
    return out


def _guard(model: ReplayModel, fn: Callable[..., Any]) -> Callable[..., Any]:
    def run(**args: Any) -> Any:
        model.check_recorded()
        return fn(**args)

    return run


def _watch(model: ReplayModel, recorded_stop: Stop | None) -> Stop:
    """Tell the model which call the loop handles next (for the guard), then apply the recorded stop."""
    def hook(core: AgentCore, call: ToolCall | None) -> tuple[str, str] | None:
        model.handling = call
        return recorded_stop(core, call) if recorded_stop is not None else None

    return hook


def _recorded_stop(fixture: Fixture) -> Stop | None:
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
