"""The run page's waterfall, computed without a browser: ``_view.waterfall`` over runs recorded in a real store.

Calls run together overlap and sit inside their step; steps follow one another; a resume draws a marker; an idle
stretch of hours (the log's times moved, as a person deciding three hours later would leave them) is drawn narrow
and labelled; a sub-agent's call is its child's bar; each outcome colours its bar; each bar names its entry.
"""

from __future__ import annotations

import itertools
import re
import threading
import time
from dataclasses import replace
from datetime import timedelta

import pytest

from runner import ModelReply, ScriptedModel, ToolRegistry, Usage, resume, run_agent
from runner._log.records import StoredRun
from runner._log.statuses import Liveness, Status
from runner._view.axis import GAP_PCT, IDLE_MIN_MS, Axis, clock, nice
from runner._view.timeline import timeline
from runner._view.tree import nest
from runner._view.waterfall import Bar, BarKind, Outcome, Waterfall, waterfall
from runner.store import RunStore
from tests.loop.helpers import call, reply
from tests.trees import run_tree
from tests.ui.money import PARAMS, money

NAP_S = 0.1  # how long each ``nap`` call takes: long enough to tell overlap from one after the other


def nap(ref: str) -> str:
    time.sleep(NAP_S)
    return f"slept {ref}"


def hang(ref: str) -> str:
    time.sleep(1)
    return "late"


def tools() -> ToolRegistry:
    registry = money([])
    registry.register("nap", "Sleep a little.", PARAMS, nap)
    registry.register("crash", "Fail.", PARAMS, lambda ref: 1 / 0)
    registry.register("hang", "Take too long.", PARAMS, hang, timeout_s=0.05)
    return registry


def of(store: RunStore, run_id: str) -> Waterfall:
    found = waterfall(store.get_run(run_id))
    assert found is not None
    return found


def kinds(found: Waterfall, kind: BarKind) -> list[Bar]:
    return [bar for bar in found.bars if bar.kind == kind]


def overlap(a: Bar, b: Bar) -> bool:
    return a.start_ms < b.end_ms and b.start_ms < a.end_ms


def naps(count: int, first: int = 1) -> ModelReply:
    return reply("", *[call(f"n{i}", "nap", ref=str(i)) for i in range(first, first + count)])


def test_calls_run_together_overlap_inside_their_step_and_steps_follow_one_another(store: RunStore) -> None:
    result = run_agent("Nap twice, then once", ScriptedModel([naps(2), naps(1, 3), "Rested."]), tools(), store=store)
    found = of(store, result.run_id)
    assert [(bar.kind, bar.depth) for bar in found.bars] == [
        ("step", 0), ("model", 1), ("tool", 1), ("tool", 1), ("step", 0), ("model", 1), ("tool", 1), ("step", 0),
        ("model", 1)]
    first, second = kinds(found, BarKind.TOOL)[:2]
    assert overlap(first, second)
    assert first.duration_ms >= NAP_S * 1000
    assert second.duration_ms >= NAP_S * 1000
    assert first.left < second.left + second.width
    assert second.left < first.left + first.width
    steps = kinds(found, BarKind.STEP)
    assert steps[0].start_ms <= first.start_ms
    assert max(first.end_ms, second.end_ms) <= steps[0].end_ms
    for one, then in itertools.pairwise(steps):
        assert one.end_ms <= then.start_ms
        assert one.left + one.width <= then.left + 0.002  # positions are given to 0.001%
    model = kinds(found, BarKind.MODEL)[0]
    assert model.end_ms <= first.start_ms
    assert model.tokens is not None
    assert model.tokens > 0
    assert steps[0].tokens == model.tokens
    assert all(bar.outcome == Outcome.OK for bar in found.bars)
    assert found.total_ms == pytest.approx(steps[-1].end_ms, abs=5)
    assert (found.gaps, found.markers) == ([], [])  # nothing idle, nothing resumed


def test_calls_run_one_by_one_do_not_overlap(store: RunStore) -> None:
    result = run_agent("Nap twice", ScriptedModel([naps(2), "Rested."]), tools(), store=store, max_parallel_tools=1)
    first, second = kinds(of(store, result.run_id), BarKind.TOOL)
    assert first.end_ms <= second.start_ms


def test_each_bar_names_its_entry_in_the_timeline_the_page_shows(store: RunStore) -> None:
    result = run_agent("Nap", ScriptedModel([naps(2), "Rested."]), tools(), store=store)
    run = store.get_run(result.run_id)
    shown = timeline(run)
    found = waterfall(run, shown)
    assert found is not None
    for bar in found.bars:
        entry = shown.entries[int(bar.anchor.removeprefix("entry-")) - 1]
        assert str(entry.kind) == str(bar.kind)
        assert getattr(entry, "call_id", None) == bar.call_id


PRICES = {"scripted": {"input_mtok": 1.0, "output_mtok": 2.0}}


def test_a_bars_tooltip_says_its_name_duration_outcome_tokens_and_cost(store: RunStore) -> None:
    replies = [ModelReply("", [call("n1", "nap", ref="1")], Usage(1000, 500)),
               ModelReply("Rested.", [], Usage(2000, 10))]
    result = run_agent("Nap", ScriptedModel(replies), tools(), store=store, prices=PRICES)
    step, model, tool, _, last = of(store, result.run_id).bars
    assert model.tokens == 1500
    assert model.cost_usd == pytest.approx(0.002)
    assert re.fullmatch(r"model call · [0-9.]+(µs|ms) · ok · 1,500 tokens · \$0\.0020", model.title), model.title
    assert re.fullmatch(r"nap \(n1\) · [0-9.]+m?s · ok", tool.title), tool.title  # a tool spends no tokens
    assert step.tokens == 1500  # its model calls'
    assert step.cost_usd == pytest.approx(0.002)
    assert last.tokens == 2010
    assert last.cost_usd == pytest.approx(0.00202)


def test_a_log_whose_clock_went_back_still_draws_every_bar_on_the_axis(store: RunStore) -> None:
    run_id = awaiting(store)
    resume(store, run_id, ScriptedModel([naps(1, 2), "Sent."]), tools(), decisions={"t1": True})
    found = waterfall(later(store.get_run(run_id), "run_resumed", -timedelta(minutes=5)))  # resumed on a slow clock
    assert found is not None
    assert len(found.bars) == len(of(store, run_id).bars)
    for bar in found.bars:
        assert bar.duration_ms >= 0
        assert 0 <= bar.left <= bar.left + bar.width <= 100.002


def awaiting(store: RunStore) -> str:
    """A run whose ``transfer`` t1 waits for approval (after a ``nap``)."""
    model = ScriptedModel([naps(1), reply("", call("t1", "transfer", ref="bob"))])
    result = run_agent("Nap, then send 5 to bob", model, tools(), store=store)
    assert result.status == Status.AWAITING_APPROVAL
    return result.run_id


def test_a_call_awaiting_approval_has_its_bar_and_a_resume_draws_a_marker(store: RunStore) -> None:
    run_id = awaiting(store)
    before = of(store, run_id)
    (waiting,) = [bar for bar in before.bars if bar.outcome == Outcome.AWAITING]
    assert (waiting.kind, waiting.call_id, waiting.label) == (BarKind.TOOL, "t1", "transfer")
    assert before.markers == []

    resume(store, run_id, ScriptedModel(["Sent."]), tools(), decisions={"t1": True}, decided_by="alice")
    run = store.get_run(run_id)
    after = of(store, run_id)
    assert Outcome.AWAITING not in [bar.outcome for bar in after.bars]  # decided: the call ran
    (marker,) = after.markers
    resumed = next(e for e in run.events if e.kind == "run_resumed")
    assert marker.at_ms == pytest.approx((resumed.at - run.events[0].at).total_seconds() * 1000, abs=0.001)
    assert marker.label == "resumed by alice after awaiting_approval"
    transfer = next(bar for bar in after.bars if bar.call_id == "t1")
    assert (transfer.kind, transfer.outcome) == (BarKind.TOOL, Outcome.OK)
    assert transfer.start_ms >= marker.at_ms
    assert transfer.left >= marker.left
    continued = next(bar for bar in after.bars if bar.label.endswith("(continued)"))
    assert continued.start_ms >= marker.at_ms


def later(run: StoredRun, kind: str, by: timedelta) -> StoredRun:
    """``run`` as its log would read had everything from its first ``kind`` event on happened ``by`` later."""
    start = next(e.seq for e in run.events if e.kind == kind)
    return replace(run, events=[replace(e, at=e.at + by) if e.seq >= start else e for e in run.events])


def test_hours_of_waiting_for_a_decision_are_drawn_narrow_and_labelled(store: RunStore) -> None:
    run_id = awaiting(store)
    resume(store, run_id, ScriptedModel([naps(1, 2), "Sent."]), tools(), decisions={"t1": True})
    run = store.get_run(run_id)
    to_scale = waterfall(run)
    assert to_scale is not None
    assert to_scale.gaps == []

    hours = timedelta(hours=3, minutes=12)
    found = waterfall(later(run, "approval_decided", hours))
    assert found is not None
    (gap,) = found.gaps
    assert gap.label == "idle 3h12m"
    assert gap.duration_ms == pytest.approx(hours.total_seconds() * 1000, rel=0.001)
    assert gap.width == GAP_PCT
    first, second = [bar for bar in found.bars if bar.label == "nap"]
    assert first.end_ms <= gap.start_ms
    assert second.start_ms >= gap.end_ms
    assert second.start_ms > hours.total_seconds() * 1000  # its real time from the run's start
    # Both naps keep to one scale: each takes about as much of the axis as it took time.
    assert second.width == pytest.approx(first.width * second.duration_ms / first.duration_ms, rel=0.05)
    assert first.width > 5
    assert second.width > 5
    assert all(bar.left >= 0 and bar.left + bar.width <= 100.002 for bar in found.bars)
    assert found.markers[0].left >= gap.left + gap.width - 0.002
    assert any(tick.label == "3h12m" for tick in found.ticks)  # the first tick after the gap says where it is


def test_a_sub_agents_call_is_its_child_bar_linked_to_the_child_run(store: RunStore) -> None:
    tree = run_tree(store)
    parent, child = store.get_run(tree.parent), store.get_run(tree.child)
    for shown in (None, nest(store, parent, timeline(parent))):
        found = waterfall(parent, shown)
        assert found is not None
        (bar,) = kinds(found, BarKind.SUBAGENT)
        assert (bar.label, bar.call_id, bar.child_run_id, bar.outcome) == ("research", "p1", tree.child, Outcome.OK)
        assert bar.tokens == child.tokens
        started = next(e for e in parent.events if e.kind == "tool_started")
        finished = next(e for e in parent.events if e.kind == "tool_finished")
        origin = parent.events[0].at
        assert bar.start_ms == pytest.approx((started.at - origin).total_seconds() * 1000, abs=0.001)
        assert bar.end_ms == pytest.approx((finished.at - origin).total_seconds() * 1000, abs=0.002)
        assert kinds(found, BarKind.TOOL) == []


def test_a_sub_agents_call_its_run_stopped_on_waits_on_its_child(store: RunStore) -> None:
    tree = run_tree(store, approval=True)
    (bar,) = kinds(of(store, tree.parent), BarKind.SUBAGENT)
    assert (bar.outcome, bar.child_run_id) == (Outcome.WAITING, tree.child)


def test_a_failed_a_cut_short_and_a_refused_call_and_a_failed_model_call(store: RunStore) -> None:
    calls = reply("", call("c1", "crash", ref="x"), call("h1", "hang", ref="x"), call("u1", "nowhere", ref="x"))
    result = run_agent("Try", ScriptedModel([calls, "Done."]), tools(), store=store)
    outcomes = {bar.call_id: bar.outcome for bar in of(store, result.run_id).bars if bar.call_id}
    assert outcomes == {"c1": Outcome.FAILED, "h1": Outcome.CUT_SHORT, "u1": Outcome.REFUSED}

    def broken(messages: object, specs: object) -> ModelReply:
        raise RuntimeError("the provider is down")

    failed = run_agent("Try", broken, tools(), store=store)
    assert [bar.outcome for bar in kinds(of(store, failed.run_id), BarKind.MODEL)] == [Outcome.FAILED]


def test_a_model_call_a_deadline_gave_up_on_was_cut_short(store: RunStore) -> None:
    release = threading.Event()

    def slow(messages: object, specs: object) -> ModelReply:
        release.wait(5)
        return ModelReply("late")

    try:
        result = run_agent("Think", slow, tools(), store=store, timeout_s=0.1)
    finally:
        release.set()
    assert result.status == Status.DEADLINE
    found = of(store, result.run_id)
    assert [bar.outcome for bar in kinds(found, BarKind.MODEL)] == [Outcome.CUT_SHORT]


def cut_after(run: StoredRun, kind: str, liveness: Liveness) -> StoredRun:
    """``run``'s log as a process that stopped (or still goes) right after its first ``kind`` event leaves it."""
    end = next(i for i, e in enumerate(run.events) if e.kind == kind) + 1
    return replace(run, events=run.events[:end], facts=run.facts[:end], status=Status.RUNNING, judged=liveness)


def test_a_call_its_process_died_in_is_in_doubt_and_one_still_going_is_running(store: RunStore) -> None:
    result = run_agent("Nap", ScriptedModel([naps(1), "Rested."]), tools(), store=store)
    run = store.get_run(result.run_id)
    dead = waterfall(cut_after(run, "tool_started", Liveness.DEAD))
    assert dead is not None
    assert [(bar.kind, bar.outcome) for bar in dead.bars] == [
        ("step", Outcome.IN_DOUBT), ("model", Outcome.OK), ("tool", Outcome.IN_DOUBT)]

    going = cut_after(run, "tool_started", Liveness.LIVE)
    now = going.events[-1].at + timedelta(seconds=30)
    live = waterfall(going, now=now)
    assert live is not None
    step, _, tool = live.bars
    assert (step.outcome, tool.outcome) == (Outcome.RUNNING, Outcome.RUNNING)
    assert tool.end_ms == pytest.approx((now - run.events[0].at).total_seconds() * 1000, abs=0.001)
    assert live.gaps == []  # a call under way is not idle, however long it takes
    assert tool.width > 90


def test_a_run_with_no_event_has_no_waterfall(store: RunStore) -> None:
    result = run_agent("Rest", ScriptedModel(["Rested."]), tools(), store=store)
    assert waterfall(replace(store.get_run(result.run_id), events=[], facts=())) is None


def test_the_axis_keeps_busy_parts_to_scale_and_draws_idle_stretches_narrow() -> None:
    hour = 3_600_000.0
    axis = Axis(hour + 2000, [(0, 1000), (hour + 1000, hour + 2000)])
    (gap,) = axis.gaps
    assert (gap.start_ms, gap.end_ms, gap.width) == (1000, hour + 1000, GAP_PCT)
    assert gap.left == pytest.approx(47.5)
    assert axis.at(0) == 0
    assert axis.at(hour + 2000) == pytest.approx(100)
    assert axis.at(500) == pytest.approx(23.75)
    assert axis.at(hour + 1500) == pytest.approx(76.25)
    assert [tick.label for tick in axis.ticks()][:2] == ["0", "500 ms"]  # about every 12% of the axis
    assert "1h00m" in [tick.label for tick in axis.ticks()]

    assert Axis(300_000, [(0, 100_000), (103_000, 300_000)]).gaps == []  # 3 s of 5 min: narrower kept to scale
    assert len(Axis(10_000, [(0, 3000), (6000, 10_000)]).gaps) == 1  # 3 s of 10: wider
    assert Axis(IDLE_MIN_MS, [(0, 0), (IDLE_MIN_MS, IDLE_MIN_MS)]).gaps == []  # not longer than IDLE_MIN_MS
    many = Axis(20 * hour, [(i * hour, i * hour + 1000) for i in range(20)] + [(20 * hour, 20 * hour)])
    assert len(many.gaps) == 20
    assert sum(g.width for g in many.gaps) == pytest.approx(40)
    assert Axis(0, []).at(0) == 0
    assert Axis(0, []).ticks()[0].label == "0"
    assert [nice(x) for x in (0.7, 1, 1.2, 3, 7, 130)] == [1, 1, 2, 5, 10, 200]
    assert [clock(x) for x in (0, 0.25, 250, 1500, 185_000)] == ["0", "0.25 ms", "250 ms", "1.5 s", "3m05s"]
