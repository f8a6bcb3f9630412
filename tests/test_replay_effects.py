"""Replay and the world outside: side effects served from the recording, recorded approvals,
the recording's idempotency keys, and a fork's steps named as its log numbers them."""

from __future__ import annotations

from typing import Any

from runner import ScriptedModel, ToolRegistry, fork, run_agent
from runner._replay.fixture import fixture_from_run
from runner._replay.replayer import replay
from runner.events import ModelCalled, StepStarted, decode_all
from runner.store import RunStore

from .loop_helpers import call, reply

REF = {"type": "object", "properties": {"ref": {"type": "string"}}, "required": ["ref"]}


class Counts:
    """How many times each tool function really ran."""

    def __init__(self) -> None:
        self.ran: dict[str, int] = {}

    def note(self, name: str) -> int:
        self.ran[name] = self.ran.get(name, 0) + 1
        return self.ran[name]


def _keyed_tools(side_effects: bool) -> ToolRegistry:
    registry = ToolRegistry()

    def charge(ref: str, key: str) -> str:
        return f"charged {ref} under {key}"

    registry.register("charge", "Charge (deduplicated by key).", REF, charge, side_effects=side_effects,
                      idempotency_key="key")
    return registry


def test_a_tool_that_returns_its_idempotency_key_replays_clean(store: RunStore) -> None:
    side_effects = False
    model = ScriptedModel([reply("", call("c1", "charge", ref="x")), "charged"])
    result = run_agent("Charge x.", model, _keyed_tools(side_effects), store=store)
    assert result.messages[3]["content"] == f'"charged x under {result.run_id}:c1"'
    report = replay(result.run_id, _keyed_tools(side_effects), source_store=store)
    assert report.ok, report.explain()
    assert report.result.run_id != result.run_id


def _lookups(counts: Counts, value: int = 42, description: str = "Look up (reads).") -> ToolRegistry:
    registry = ToolRegistry()

    def lookup(ref: str) -> dict[str, Any]:
        counts.note("lookup")
        return {"ref": ref, "value": value}

    registry.register("lookup", description, REF, lookup)
    return registry


def _forked_at_3(store: RunStore) -> str:
    parent = run_agent("Look up a, b, c.", ScriptedModel([reply("", call(f"c{n}", "lookup", ref=ref))
                                                          for n, ref in enumerate("abc", 1)] + ["found"]),
                       _lookups(Counts()), store=store)
    forked = fork(store, parent.run_id, at_step=3, model=ScriptedModel([reply("", call("f3", "lookup", ref="z")),
                                                                          "found z"]),
                  registry=_lookups(Counts()))
    assert (forked.status, forked.steps) == ("done", 4)
    return forked.run_id


def _logged_steps(store: RunStore, run_id: str) -> tuple[list[int], list[int]]:
    """The step numbers of a run's steps and of its model calls, as its log holds them."""
    facts = decode_all(store.get_run(run_id).events, run_id)
    return ([f.step for f in facts if isinstance(f, StepStarted)],
            [f.step for f in facts if isinstance(f, ModelCalled)])


def test_a_forks_replay_names_a_changed_result_at_the_step_its_log_numbers(store: RunStore) -> None:
    run_id = _forked_at_3(store)
    steps, model_calls = _logged_steps(store, run_id)
    assert steps == model_calls == [3, 4]
    assert fixture_from_run(store.get_run(run_id)).data["forked_at_step"] == 3
    report = replay(run_id, _lookups(Counts(), value=7), source_store=store)
    assert report.divergence is not None
    # the fork's first new step (3) ran the changed tool; its model call at step 4 was shown the new result
    assert report.divergence.sentence.startswith(f"at step {model_calls[1]} the result of call f3 (lookup) differs")
    assert report.divergence.step == model_calls[1] == 4


def test_a_forks_replay_names_changed_tool_specs_at_its_first_step(store: RunStore) -> None:
    run_id = _forked_at_3(store)
    steps, _ = _logged_steps(store, run_id)
    report = replay(run_id, _lookups(Counts(), description="Reads."), source_store=store)
    assert report.divergence is not None
    assert report.divergence.sentence.startswith(f"at step {steps[0]} the tools shown to the model differ")
    assert (report.divergence.step, report.result.steps) == (steps[0], 3)
    lenient = replay(run_id, _lookups(Counts(), value=7), source_store=store, strict=False)
    assert [d.step for d in lenient.differences] == [4]

