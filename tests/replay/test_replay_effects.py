"""Replay and the world outside: side effects served from the recording, recorded approvals,
the recording's idempotency keys, and a fork's steps named as its log numbers them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from runner import ScriptedModel, ToolCall, ToolRegistry, fork, run_agent
from runner._replay.fixture import fixture_from_run, load_fixture
from runner._replay.replayer import replay
from runner.events import ModelCalled, StepStarted, decode_all
from runner.store import RunStore
from tests.loop.helpers import call, reply

REF = {"type": "object", "properties": {"ref": {"type": "string"}}, "required": ["ref"]}


class Counts:
    """How many times each tool function really ran."""

    def __init__(self) -> None:
        self.ran: dict[str, int] = {}

    def note(self, name: str) -> int:
        self.ran[name] = self.ran.get(name, 0) + 1
        return self.ran[name]


def _tools(counts: Counts, *, approvals: bool = False) -> ToolRegistry:
    """``pay`` (side effects: its result counts its runs), ``lookup`` (reads); with ``approvals``,
    ``transfer`` (side effects) and ``peek`` (reads) both need approval."""
    registry = ToolRegistry()

    def pay(ref: str) -> str:
        return f"payment {counts.note('pay')} for {ref}"

    def lookup(ref: str) -> dict[str, Any]:
        counts.note("lookup")
        return {"ref": ref, "value": 42}

    def transfer(ref: str) -> str:
        return f"transfer {counts.note('transfer')} of {ref}"

    def peek(ref: str) -> str:
        counts.note("peek")
        return f"peeked at {ref}"

    registry.register("pay", "Pay (writes).", REF, pay, side_effects=True)
    registry.register("lookup", "Look up (reads).", REF, lookup)
    if approvals:
        registry.register("transfer", "Transfer (writes).", REF, transfer, side_effects=True, needs_approval=True)
        registry.register("peek", "Peek (reads).", REF, peek, needs_approval=True)
    return registry


def _paid_run(store: RunStore, counts: Counts) -> str:
    model = ScriptedModel([reply("", call("c1", "pay", ref="p1"), call("c2", "lookup", ref="l1")), "paid"])
    result = run_agent("Pay p1.", model, _tools(counts), store=store)
    assert (result.status, counts.ran) == ("done", {"pay": 1, "lookup": 1})
    return result.run_id


def test_replay_serves_a_side_effect_from_the_recording_and_runs_only_the_others(store: RunStore) -> None:
    recorded = Counts()
    run_id = _paid_run(store, recorded)
    counts = Counts()
    report = replay(run_id, _tools(counts), source_store=store)
    assert counts.ran == {"lookup": 1}
    assert report.ok, report.explain()
    assert report.differences == []
    assert report.result.tool_calls == 2
    assert report.result.messages[3]["content"] == '"payment 1 for p1"'


def test_live_side_effects_runs_them_for_real(store: RunStore) -> None:
    run_id = _paid_run(store, Counts())
    counts = Counts()
    report = replay(run_id, _tools(counts), source_store=store, live_side_effects=True)
    assert counts.ran == {"pay": 1, "lookup": 1}
    assert report.ok, report.explain()
    second = replay(run_id, _tools(counts), source_store=store, live_side_effects=True)
    assert counts.ran == {"pay": 2, "lookup": 2}
    assert second.divergence is not None  # the live payment's result names its second run
    assert second.divergence.sentence == (
        "at step 2 the result of call c1 (pay) differs: recorded '\"payment 1 for p1\"', got '\"payment 2 for p1\"'")


def test_a_served_observation_is_the_recorded_text_even_when_the_recording_cut_it(store: RunStore) -> None:
    counts = Counts()

    def tools() -> ToolRegistry:
        registry = ToolRegistry()
        registry.register("pay", "Pay (writes).", REF, lambda ref: f"payment {counts.note('pay')} " + "x" * 100,
                          side_effects=True)
        return registry

    model = ScriptedModel([reply("", call("c1", "pay", ref="p1")), "paid"])
    result = run_agent("Pay p1.", model, tools(), store=store, max_result_chars=40)
    assert result.messages[3]["content"] == '"payment 1 ' + "x" * 29 + '... [cut: 72 more characters]'
    report = replay(result.run_id, tools(), source_store=store)
    assert counts.ran == {"pay": 1}
    assert report.ok, report.explain()
    assert report.result.messages[3]["content"] == result.messages[3]["content"]


def test_lenient_replay_never_runs_a_side_effect_the_recording_did_not_make(store: RunStore, tmp_path: Path) -> None:
    run_id = _paid_run(store, Counts())
    path = store.export_fixture(run_id, tmp_path / "paid.json")
    data = json.loads(path.read_text(encoding="utf-8"))
    data["replies"][0]["tool_calls"].append({"id": "c9", "name": "pay", "args": {"ref": "p9"}})
    path.write_text(json.dumps(data), encoding="utf-8")
    counts = Counts()
    report = replay(load_fixture(path), _tools(counts), strict=False)
    assert counts.ran == {"lookup": 1}
    assert [d.sentence for d in report.differences][:2] == [
        "at step 1 the reply calls pay (c9), but the recording has no result for that call; nothing was run",
        "at step 1 the loop was about to run pay (c9), a call the recording did not make; it was not run"]
    served = [m["content"] for m in report.result.messages if m.get("tool_call_id") == "c9"]
    assert served == ["ERROR: not run: replay serves the recorded result of a tool with side effects, "
                      "and the recording has none for this call"]


def _approvals_run(store: RunStore, counts: Counts) -> str:
    verdicts: dict[str, bool | str] = {"t1": True, "t2": "over the limit", "k1": True, "k2": False}
    model = ScriptedModel([reply("", call("t1", "transfer", ref="a"), call("t2", "transfer", ref="b"),
                                 call("k1", "peek", ref="c"), call("k2", "peek", ref="d")), "moved"])
    result = run_agent("Move money.", model, _tools(counts, approvals=True), store=store,
                       approve=lambda c: verdicts[c.id])
    assert (result.status, counts.ran) == ("done", {"transfer": 1, "peek": 1})
    return result.run_id


def _never_asked(call: ToolCall) -> bool:
    pytest.fail(f"replay asked the approver about {call.id}")


def test_replay_plays_back_the_recorded_approvals_without_asking(store: RunStore) -> None:
    run_id = _approvals_run(store, Counts())
    counts = Counts()
    report = replay(run_id, _tools(counts, approvals=True), source_store=store, approve=_never_asked)
    assert report.ok, report.explain()
    assert counts.ran == {"peek": 1}  # the approved read ran; the approved transfer was served; denials never run
    observations = {m["tool_call_id"]: m["content"] for m in report.result.messages if m["role"] == "tool"}
    assert observations == {
        "t1": '"transfer 1 of a"',
        "t2": "ERROR: the call to transfer was denied by the approver: over the limit; do not retry it",
        "k1": '"peeked at c"',
        "k2": "ERROR: the call to peek was denied by the approver; do not retry it"}
    assert replay(run_id, _tools(Counts(), approvals=True), source_store=store).ok  # no approver given at all


def test_a_recording_left_awaiting_approval_replays_to_it_without_asking(store: RunStore) -> None:
    counts = Counts()
    model = ScriptedModel([reply("", call("k1", "peek", ref="c"))])
    result = run_agent("Peek.", model, _tools(counts, approvals=True), store=store)
    assert result.status == "awaiting_approval"
    report = replay(result.run_id, _tools(counts, approvals=True), source_store=store, approve=_never_asked)
    assert (report.ok, report.result.status, report.result.error) == (True, "awaiting_approval", result.error)
    assert counts.ran == {}


def _keyed_tools(side_effects: bool) -> ToolRegistry:
    registry = ToolRegistry()

    def charge(ref: str, key: str) -> str:
        return f"charged {ref} under {key}"

    registry.register("charge", "Charge (deduplicated by key).", REF, charge, side_effects=side_effects,
                      idempotency_key="key")
    return registry


@pytest.mark.parametrize("side_effects", [False, True], ids=["reads", "writes-live"])
def test_a_tool_that_returns_its_idempotency_key_replays_clean(store: RunStore, side_effects: bool) -> None:
    model = ScriptedModel([reply("", call("c1", "charge", ref="x")), "charged"])
    result = run_agent("Charge x.", model, _keyed_tools(side_effects), store=store)
    assert result.messages[3]["content"] == f'"charged x under {result.run_id}:c1"'
    if side_effects:
        report = replay(result.run_id, _keyed_tools(side_effects), source_store=store, live_side_effects=True)
    else:
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

