"""SIGKILL with several calls of a reply in flight together: each is in doubt on its own, and resume judges each.

The killed process is ``tests.resume.durable_child`` run with ``--parallel=8``; the resuming
process is this one, so nothing survives between them but the log. Every run ends consistent
and replays clean under strict replay.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from runner import StoredRun, open_store, replay, resume
from runner._loop.observations import IN_DOUBT
from runner.tracing import export_run, otlp_exporter
from tests.resume.durable_child import PlanModel, ran, tools
from tests.resume.helpers import RUN_ID, assert_consistent, child, kill_when
from tests.tracing.helpers import Receiver

TOGETHER = "--parallel=8"


def assert_replays(store_url: str, workdir: Path, parallel: int) -> None:
    with open_store(store_url) as store:
        report = replay(RUN_ID, tools(workdir), source_store=store, max_parallel_tools=parallel)
    assert report.ok, report.explain()


def finished_calls(store_url: str) -> set[str]:
    with open_store(store_url) as store:
        return {e.data["call_id"] for e in store.get_run(RUN_ID).events if e.kind == "tool_finished"}


@pytest.mark.process
def test_three_side_effects_and_a_lookup_killed_in_flight_none_runs_twice_and_the_lookup_runs_again(
        store_url: str, tmp_path: Path) -> None:
    plan = [[["p1", "pay", {"ref": "a"}], ["p2", "pay", {"ref": "b"}], ["l1", "lookup", {"ref": "c"}],
             ["p3", "pay", {"ref": "d"}]]]
    for ref in "abcd":
        (tmp_path / f"hang-{ref}").touch()
    kill_when(child(store_url, tmp_path, plan, "run", RUN_ID, TOGETHER), tmp_path,
              ["pay a", "pay b", "lookup c", "pay d"])  # all four inside their tools at once
    model = PlanModel(plan)
    with open_store(store_url) as store:
        in_doubt = {e.data["call_id"] for e in store.get_run(RUN_ID).events if e.kind == "tool_started"}
        result = resume(store, RUN_ID, model, tools(tmp_path), max_parallel_tools=8)
        run = store.get_run(RUN_ID)
    assert (in_doubt, result.status) == ({"p1", "p2", "l1", "p3"}, "done")
    assert sorted(ran(tmp_path)) == ["lookup c", "lookup c", "pay a", "pay b", "pay d"]  # only the lookup again
    assert [(m["tool_call_id"], m["content"]) for m in model.seen[0] if m["role"] == "tool"] == [
        ("p1", IN_DOUBT), ("p2", IN_DOUBT), ("l1", '{"ref": "c", "value": 42}'), ("p3", IN_DOUBT)]
    assert_consistent(run)
    assert_replays(store_url, tmp_path, 8)
    assert_replays(store_url, tmp_path, 1)


@pytest.mark.process
def test_a_side_effect_that_returned_before_the_kill_is_finished_as_its_log_says_the_others_in_doubt(
        store_url: str, tmp_path: Path) -> None:
    plan = [[["p1", "pay", {"ref": "a"}], ["p2", "pay", {"ref": "b"}], ["p3", "pay", {"ref": "c"}]]]
    (tmp_path / "hang-a").touch()
    (tmp_path / "hang-c").touch()
    proc = child(store_url, tmp_path, plan, "run", RUN_ID, TOGETHER)
    deadline = time.monotonic() + 30
    while "p2" not in (finished_calls(store_url) if ran(tmp_path) else set()):  # p2 returned and was committed
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.02)
    kill_when(proc, tmp_path, ["pay a", "pay b", "pay c"])
    model = PlanModel(plan)
    with open_store(store_url) as store:
        result = resume(store, RUN_ID, model, tools(tmp_path))
        run = store.get_run(RUN_ID)
    assert result.status == "done"
    assert sorted(ran(tmp_path)) == ["pay a", "pay b", "pay c"]  # none of them twice
    assert [(m["tool_call_id"], m["content"]) for m in model.seen[0] if m["role"] == "tool"] == [
        ("p1", IN_DOUBT), ("p2", '"paid b"'), ("p3", IN_DOUBT)]
    assert_consistent(run)
    assert_replays(store_url, tmp_path, 8)


def assert_no_span_lost(receiver: Receiver, run: StoredRun) -> None:
    """What the killed and resumed processes sent live is the run's spans rebuilt from its log, each span whole."""
    live: dict[str, Any] = {}
    for span in receiver.spans():
        assert live.setdefault(span["span_id"], span) == span  # a span sent twice is sent the same
    receiver.requests.clear()
    exporter = otlp_exporter()
    try:
        export_run(run, exporter)
    finally:
        exporter.shutdown()
    rebuilt = {span["span_id"]: span for span in receiver.spans()}
    assert len(rebuilt) > 30 * 5  # a root per part, a step, a chat and four calls a step
    assert sorted(live) == sorted(rebuilt)
    assert all(live[key] == rebuilt[key] for key in rebuilt)


def chaos_plan() -> list[list[list[Any]]]:
    """Thirty steps of three payments and a lookup each, run together."""
    return [[[f"s{i}p{j}", "pay", {"ref": f"p{i}{j}"}] for j in range(3)] + [[f"s{i}l", "lookup", {"ref": f"l{i}"}]]
            for i in range(30)]


@pytest.mark.process
@pytest.mark.timeout(300)  # twenty processes each start the OpenTelemetry SDK and its OTLP exporter
def test_calls_run_together_killed_at_twenty_random_moments_end_done_with_each_side_effect_at_most_once(
        store_url: str, tmp_path: Path, receiver: Receiver) -> None:
    """Each kill comes a random moment after the process ran a tool: inside tools, between their
    commits, in a model call. Each tool stays 30 ms after its line, so calls are in flight together.
    Every process traces live to a real OTLP receiver: no span is lost (each resume sends what died)."""
    rng = random.Random(20261201)
    plan = chaos_plan()
    options = (TOGETHER, "--pause=0.03")
    proc: subprocess.Popen[str] | None = child(store_url, tmp_path, plan, "run", RUN_ID, *options)
    kills = 0
    while kills < 20 and proc is not None:
        lines, deadline = len(ran(tmp_path)), time.monotonic() + 60
        while len(ran(tmp_path)) == lines and proc.poll() is None:  # until this process runs a tool
            assert time.monotonic() < deadline
            time.sleep(0.005)
        time.sleep(rng.uniform(0.0, 0.05))
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            kills += 1
        proc.communicate(timeout=60)
        with open_store(store_url) as store:
            status = store.get_run(RUN_ID).status
        proc = None if status == "done" else child(store_url, tmp_path, plan, "resume", RUN_ID, *options)
    if proc is not None:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    with open_store(store_url) as store:
        run = store.get_run(RUN_ID)
    assert (run.status, kills) == ("done", 20)
    assert_consistent(run)
    pays = [line for line in ran(tmp_path) if line.startswith("pay ")]
    assert len(pays) == len(set(pays))
    assert_no_span_lost(receiver, run)
    answered = {m["tool_call_id"]: m["content"] for m in run.messages if m["role"] == "tool"}
    for step in plan:  # a payment not run again is one its log left in doubt
        for call_id, name, args in step:
            assert answered[call_id] in ((f'"paid {args["ref"]}"', IN_DOUBT) if name == "pay" else
                                         (f'{{"ref": "{args["ref"]}", "value": 42}}',))
    assert IN_DOUBT in answered.values()  # the kills did land inside payments
    assert_replays(store_url, tmp_path, 8)
