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

from .._log import statuses as st
from .._loop.build import RunOptions, core_for, limits_from, opening
from .._loop.core import AgentCore
from .._loop.limits import Limits
from .._loop.results import Action, AgentResult, CallTool, checked_run_id, model_identity
from .._loop.sync import drive_until
from .._tools.registry import ToolRegistry
from ..errors import ReplayDivergence, StopRun
from ..events import RunResumed, RunStarted
from ..messages import Message, ModelReply, ToolCall, ToolSpec
from .divergence import compare_calls, compare_messages, compare_specs, shown, unrecorded_run
from .fixture import CRASHED, INTERRUPTIBLE, Fixture, fixture_from_run, load_fixture
from .scripted import ScriptedModel

if TYPE_CHECKING:
    from ..store import RunStore
    from ..store.records import StoredRun

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
    tools = guarded(registry, model) if strict else registry
    core = _first_core(fixture, model, tools, task, system, max_steps, token_budget, options)
    ends = [*fixture.resumes, _final_end(fixture)]
    divergence: ReplayDivergence | None = None
    for part, end in enumerate(ends):
        if part > 0:
            core = _resumed_core(core, model, tools, ends[part - 1], options)
        core.external_stop = _watch(model, _recorded_stop(fixture, end, model))
        result = drive_until(core, _crash_halt(end, model))
        if result is not None and isinstance(result.exception, ReplayDivergence):
            divergence = result.exception
            break
        if part < len(ends) - 1:
            divergence = _part_divergence(part, end, result, model)
            if divergence is not None:
                break
    final = result if result is not None else core.result
    assert final is not None
    if divergence is None and strict:
        divergence = model.blocked or _final_divergence(fixture, model, core, final)
    outcome = fixture.outcome
    return ReplayReport(final, divergence, outcome["status"], outcome["answer"], model.differences)


def _first_core(fixture: Fixture, model: ReplayModel, tools: ToolRegistry, task: str | None, system: str | None,
                max_steps: int | None, token_budget: int | None, options: RunOptions) -> AgentCore:
    """The core of the recording's first part: its task, system prompt and limits unless given,
    and the history it started from (a fork's or follow-up's)."""
    limits = fixture.limits
    lim = limits_from(max_steps if max_steps is not None else int(limits["max_steps"]),
                      token_budget if token_budget is not None else int(limits["token_budget"]), options)
    run_id = checked_run_id(options.get("run_id"))
    task = task if task is not None else fixture.task
    system = system if system is not None else fixture.system
    history = fixture.history
    if "history" not in fixture.data:
        history = [{"role": "system", "content": system}, {"role": "user", "content": task}]
    model_name, provider = model_identity(model)
    started = RunStarted(run_id=run_id, task=task, system=system, limits=lim.to_dict(), tool_specs=tools.specs(),
                         model=model_name, provider=provider, agent_name=options.get("agent_name"),
                         labels=dict(options.get("labels") or {}), forked_at_step=fixture.data.get("forked_at_step"))
    return core_for(model, tools, run_id, lim, opening(started, history), None, options)


def _resumed_core(before: AgentCore, model: ReplayModel, tools: ToolRegistry, boundary: dict[str, Any],
                  options: RunOptions) -> AgentCore:
    """The recording's next part: the same loop resumed with the limits and decisions it was resumed with."""
    state = before.state
    model_name, provider = model_identity(model)
    # Keys a later version may add are ignored, as everywhere in a fixture.
    known = {name: value for name, value in boundary["limits"].items() if name in Limits.__dataclass_fields__}
    resumed = RunResumed(run_id=before.run_id, step=state.steps, owner="replay", reason=str(boundary["reason"]),
                         limits=known, decisions=dict(boundary["decisions"]), model=model_name, provider=provider)
    return core_for(model, tools, before.run_id, Limits(**known), [resumed], state, options)


def _final_end(fixture: Fixture) -> dict[str, Any]:
    outcome = fixture.outcome
    return {"status": outcome["status"], "error": outcome["error"], "after_replies": len(fixture.replies),
            "stopped_before_call": outcome.get("stopped_before_call")}


def _part_divergence(part: int, end: dict[str, Any], result: AgentResult | None,
                     model: ReplayModel) -> ReplayDivergence | None:
    """Whether the replay's part ``part`` ended where and as the recording's did (before a resume)."""
    status = CRASHED if result is None else result.status
    want = st.CANCELLED if end["status"] == CRASHED and result is not None else end["status"]
    steps = result.steps if result is not None else 0
    if status != want and not (status == CRASHED and end["status"] == CRASHED):
        return ReplayDivergence(steps, None, "resumes",
                                f"part {part + 1} of the replay ended with {status}, the recording's with "
                                f"{end['status']} (where it was resumed)")
    if model.calls != end["after_replies"]:
        return ReplayDivergence(steps, None, "resumes",
                                f"part {part + 1} of the replay ended after {model.calls} model replies, the "
                                f"recording's after {end['after_replies']} (where it was resumed)")
    return None


def _crash_halt(end: dict[str, Any], model: ReplayModel) -> Callable[[Action], bool] | None:
    """Where a recorded crash left calls in doubt: give up as the tool is handed over, as the process died."""
    in_doubt = set(end.get("in_doubt") or ())
    if end["status"] != CRASHED or not in_doubt:
        return None
    replies = end["after_replies"]

    def halt(action: Action) -> bool:
        return isinstance(action, CallTool) and action.call.id in in_doubt and model.calls == replies

    return halt


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
                     side_effects=tool.side_effects, needs_approval=tool.needs_approval,
                     idempotency_key=tool.idempotency_key)
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


def _recorded_stop(fixture: Fixture, end: dict[str, Any], model: ReplayModel) -> Stop | None:
    """Stop the replay where a deadline, cancel or crash stopped the recording (or a part of it)."""
    status, replies = end["status"], end["after_replies"]
    if status not in (*INTERRUPTIBLE, CRASHED) or end.get("in_doubt"):
        return None
    if replies and "stop" in fixture.replies[replies - 1]:
        return None  # the recorded stop block replays it
    call_id = end.get("stopped_before_call")
    if status == CRASHED:
        status, reason = st.CANCELLED, "the recorded process stopped here"
    else:
        reason = end.get("error") or status

    def stop(core: AgentCore, call: ToolCall | None) -> tuple[str, str] | None:
        if model.calls != replies:
            return None
        if call_id is not None:
            return (status, reason) if call is not None and call.id == call_id else None
        return (status, reason) if call is None else None

    return stop


def scripted_from_fixture(path: str | Path, strict: bool = True) -> ReplayModel:
    return ReplayModel(load_fixture(path), strict=strict)


def scripted_from_run(store: RunStore, run_id: str, strict: bool = True) -> ReplayModel:
    return ReplayModel(fixture_from_run(store.find_run(run_id)), strict=strict)
