"""Run the current loop and tools against a recording, and say where they differ.

Only the model is replayed; tools really run, so a changed tool shows up as a changed result.
Strict mode compares what the loop shows the model with what the recorded model was shown,
and each reply's calls with those the recording handled; it ends at the first difference.
Strict replay never runs a call the recording did not make.
The driver plays one part of a recording; this module plays the parts in turn and reports.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Unpack

from .._log.records import StoredRun
from .._loop.core import AgentCore
from .._loop.results import AgentResult
from .._run.build import RunOptions, core_for, output_of, run_limits, wiring_of
from .._run.identity import checked_run_id
from .._run.opening import new_start, opening
from .._run.wiring import RunWiring
from .._tools.registry import ToolRegistry
from ..errors import ReplayDivergence
from .divergence import shown
from .driver import recorded_approver
from .fixture import Fixture, fixture_from_run, load_fixture
from .playback import Playback
from .scripted import ReplayModel
from .subagents import ReplayChildren, json_value

if TYPE_CHECKING:
    from ..store import RunStore


@dataclass(frozen=True, slots=True)
class ReplayReport:
    """How a replay went. ``ok`` means it matched the recording, whatever that recorded."""

    result: AgentResult
    divergence: ReplayDivergence | None
    recorded_status: str
    recorded_answer: str | None
    differences: list[ReplayDivergence] = field(default_factory=list)
    typed: bool = False  # the recording ended with a typed result: its answer is JSON, compared as a value

    @property
    def same_status(self) -> bool:
        return self.result.status == self.recorded_status

    @property
    def same_answer(self) -> bool:
        if self.result.answer == self.recorded_answer:
            return True
        return self.typed and json_value(self.result.answer) == json_value(self.recorded_answer)

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

    def summary(self) -> str:
        """One line on how the replay went: ``explain()``, named as ``RerunReport.summary()`` is."""
        return self.explain()

    def to_json(self) -> dict[str, Any]:
        """The report as ``runner replay --json`` prints it (with ``live_side_effects``, which the CLI adds)."""
        result, divergence = self.result, self.divergence
        return {
            "ok": self.ok, "explanation": self.explain(),
            "divergence": None if divergence is None else {
                "step": divergence.step, "index": divergence.index, "field": divergence.field,
                "sentence": divergence.sentence},
            "status": result.status, "recorded_status": self.recorded_status,
            "answer": result.answer, "recorded_answer": self.recorded_answer,
            "steps": result.steps, "tokens": result.tokens, "tool_calls": result.tool_calls,
        }

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
            return fixture_from_run(store.find_run(str(source)), store)
        return load_fixture(source)
    return fixture_from_run(source, store)


REPLAY_DECIDER = "replay"  # who a replay's decisions are logged as taken by (the recording's approver's answers)


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
    live_side_effects: bool = False,
    **options: Unpack[RunOptions],
) -> ReplayReport:
    """Replay a fixture path, a ``Fixture``, a stored run, or a run id in ``source_store``.

    The recorded task, system prompt and limits are reused unless given here.
    ``approve`` is never asked: the recorded decisions are replayed.

    Args:
        source: the recording.
        registry: the tools to run now.
        source_store: the store to find a run id in.
        strict: stop at the first difference; False plays on and collects differences.
        task, system: replace the recorded ones.
        max_steps, token_budget: each limit given replaces the recorded one;
            ``limits=Limits(...)`` replaces them all, and a limit given both ways is a ``TypeError``.
        live_side_effects: run tools with side effects instead of using their recorded observation.
        **options: other ``run_agent`` options, such as ``store`` or ``tracer_provider``, pass through.
    """
    fixture = as_fixture(source, source_store)
    model = ReplayModel(fixture, strict=strict)
    # The recording says where the run stops (a cancel request included), whatever its limits, and what
    # the approver answered: the replay's decisions are logged as the recording's, by ``replay``.
    wiring = replace(wiring_of(options, options.get("store")), costs=model.recorded_cost,
                     approve=recorded_approver(model), checkpoints=True, watches_cancels=False,
                     decided_by=REPLAY_DECIDER)
    core = _first_core(fixture, model, registry, task, system, max_steps, token_budget, options, wiring)
    children = ReplayChildren(fixture, model, wiring, live_side_effects) if registry.agents() else None
    playback = Playback(fixture, model, registry, wiring, core, live_side_effects, children)
    final = playback.play_all()
    divergence = playback.divergence
    if divergence is None and strict:
        divergence = playback.final_divergence(final)
    outcome = fixture.outcome
    return ReplayReport(final, divergence, outcome["status"], outcome["answer"], model.differences,
                        typed=fixture.output_schema is not None)


def _first_core(fixture: Fixture, model: ReplayModel, tools: ToolRegistry, task: str | None, system: str | None,
                max_steps: int | None, token_budget: int | None, options: RunOptions, wiring: RunWiring) -> AgentCore:
    """Build the core of the recording's first part.

    It takes the recorded task, system prompt and limits unless given,
    and the history a fork or a follow-up started from.
    """
    given = {"max_steps": max_steps, "token_budget": token_budget}
    lim = run_limits(fixture.limits, options, {name: value for name, value in given.items() if value is not None})
    run_id = checked_run_id(options.get("run_id"))
    task = task if task is not None else fixture.task
    system = system if system is not None else fixture.system
    history = fixture.history
    if "history" not in fixture.data:
        history = [{"role": "system", "content": system}, {"role": "user", "content": task}]
    spec = output_of(options, tools, fixture.output_schema)  # the recorded schema, unless output_type= is given
    started = new_start(run_id, task, system, lim, tools, model, agent_name=options.get("agent_name"),
                        labels=options.get("labels"), forked_at_step=fixture.data.get("forked_at_step"),
                        output=spec)
    return core_for(model, tools, run_id, lim, opening(started, history), None, wiring, output_spec=spec)
