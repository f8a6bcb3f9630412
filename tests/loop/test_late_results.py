"""A sync tool call given up on that returns later: its result is logged as ``tool_returned_late``.

The run's deadline cuts the wait and the run ends; the tool's thread goes on. When the function
returns (or raises) while the process lives, the fact is appended after ``run_finished``; a resume
hands the model that result instead of "outcome unknown", and never runs the call again.
"""

from __future__ import annotations

import html
import json
import logging
import re
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from starlette.testclient import TestClient

from runner import ScriptedModel, ToolRegistry, rebuild_spans, replay, resume, run_agent
from runner._run.resume import resume_stored
from runner.events import ToolReturnedLate
from runner.store import RunStore
from runner.ui import create_app
from tests.cli.helpers import invoke
from tests.loop.helpers import call, numbered, reply

CUT = "ERROR: pay was abandoned while it ran (deadline); its outcome is unknown"
LATE = "tool_returned_late"


class Payments:
    """A ``pay(n)`` tool with side effects that waits for ``release``, then pays (or raises)."""

    def __init__(self, fail: bool = False) -> None:
        self.release, self.entered, self.fail = threading.Event(), threading.Event(), fail
        self.paid: list[int] = []

    def pay(self, n: int) -> str:
        self.entered.set()
        self.release.wait(60)
        if self.fail:
            raise RuntimeError(f"card declined for {n}")
        self.paid.append(n)
        return f"paid {n}"

    def registry(self) -> ToolRegistry:
        return numbered(self.pay, name="pay", side_effects=True)


def wait_for(check: Callable[[], Any], what: str, bound_s: float = 30.0) -> Any:
    """Poll ``check`` until it gives something true; fail after a generous ``bound_s``."""
    ends = time.monotonic() + bound_s
    while time.monotonic() < ends:
        found = check()
        if found:
            return found
        time.sleep(0.02)
    pytest.fail(f"{what} not seen within {bound_s:g} s")


def kinds(store: RunStore, run_id: str) -> list[str]:
    return [event.kind for event in store.get_run(run_id).events]


def late_rows(store: RunStore, run_id: str) -> list[dict[str, Any]]:
    return [event.data for event in store.get_run(run_id).events if event.kind == LATE]


def cut_payment(store: RunStore, payments: Payments, **options: Any) -> str:
    """A run whose one ``pay`` call its 0.3 s deadline cuts short; its id. The tool is still waiting."""
    stopped = run_agent("pay 5", ScriptedModel([reply("", call("c1", "pay", n=5))]), payments.registry(),
                        store=store, timeout_s=0.3, **options)
    assert (stopped.status, payments.entered.is_set()) == ("deadline", True)
    return stopped.run_id


def test_a_payment_that_returns_after_the_deadline_is_logged_and_a_resume_gives_the_model_its_result(
        store: RunStore) -> None:
    payments = Payments()
    try:
        run_id = cut_payment(store, payments)
        assert kinds(store, run_id)[-1] == "run_finished"
        assert late_rows(store, run_id) == []
    finally:
        payments.release.set()
    rows = wait_for(lambda: late_rows(store, run_id), "tool_returned_late")
    run = store.get_run(run_id)
    assert kinds(store, run_id)[-2:] == ["run_finished", LATE]
    assert [e.seq for e in run.events] == list(range(1, len(run.events) + 1))  # the next seq, nothing skipped
    assert {k: rows[0][k] for k in ("call_id", "name", "observation", "ok")} == {
        "call_id": "c1", "name": "pay", "observation": '"paid 5"', "ok": True}
    late = run.facts[-1]
    assert isinstance(late, ToolReturnedLate)
    assert late.step == 1
    assert late.duration_s > 0
    assert run.status == "deadline"  # the run's end stands: the fact only says what the call gave
    model = ScriptedModel(["the payment went through"])
    result = resume(store, run_id, model, payments.registry())
    assert result.status == "done"
    assert [m["content"] for m in model.seen[0] if m["role"] == "tool"] == ['"paid 5"']  # not "outcome unknown"
    assert payments.paid == [5]  # paid once: the resume did not run the call again
    assert kinds(store, run_id).count("tool_started") == 1


def test_a_tool_that_raises_after_the_deadline_logs_its_error(store: RunStore) -> None:
    payments = Payments(fail=True)
    try:
        run_id = cut_payment(store, payments)
    finally:
        payments.release.set()
    rows = wait_for(lambda: late_rows(store, run_id), "tool_returned_late")
    assert (rows[0]["ok"], rows[0]["observation"]) == (False, "ERROR: pay failed: RuntimeError: card declined for 5")
    model = ScriptedModel(["it failed"])
    resume(store, run_id, model, payments.registry())
    assert [m["content"] for m in model.seen[0] if m["role"] == "tool"] == [rows[0]["observation"]]


def test_a_call_past_its_own_timeout_that_returns_later_is_logged_after_the_run_ends(store: RunStore) -> None:
    """The model read the timeout and the run went on to its answer; the late result is logged after it."""
    payments = Payments()
    registry = numbered(payments.pay, name="pay", side_effects=True, timeout_s=0.2)
    try:
        done = run_agent("pay 5", ScriptedModel([reply("", call("c1", "pay", n=5)), "it timed out"]), registry,
                         store=store)
        assert late_rows(store, done.run_id) == []
    finally:
        payments.release.set()
    assert [m["content"] for m in done.messages if m["role"] == "tool"] == ["ERROR: pay timed out after 0.2 s"]
    rows = wait_for(lambda: late_rows(store, done.run_id), "tool_returned_late")
    assert (rows[0]["call_id"], rows[0]["observation"]) == ("c1", '"paid 5"')
    assert kinds(store, done.run_id)[-2:] == ["run_finished", LATE]
    assert store.get_run(done.run_id).status == "done"


def test_a_late_result_is_cut_to_max_result_chars(store: RunStore) -> None:
    payments = Payments()
    try:
        run_id = cut_payment(store, payments, max_result_chars=4)
    finally:
        payments.release.set()
    rows = wait_for(lambda: late_rows(store, run_id), "tool_returned_late")
    assert rows[0]["observation"] == '"pai... [cut: 4 more characters]'


def test_a_result_that_comes_after_a_resume_is_not_logged(store: RunStore, caplog: pytest.LogCaptureFixture) -> None:
    """The resume told the model the outcome is unknown: a result logged after it would contradict it."""
    payments = Payments()
    caplog.set_level(logging.WARNING, logger="runner")
    try:
        run_id = cut_payment(store, payments)
        model = ScriptedModel(["I will check the payment"])
        resume(store, run_id, model, payments.registry())
        assert [m["content"] for m in model.seen[0] if m["role"] == "tool"] == [CUT]
    finally:
        payments.release.set()
    wait_for(lambda: any("its result is not logged" in r.getMessage() for r in caplog.records), "the warning")
    assert late_rows(store, run_id) == []
    assert kinds(store, run_id)[-1] == "run_finished"
    assert payments.paid == [5]


def test_the_store_logs_a_late_result_once_and_only_where_the_run_still_ends(store: RunStore) -> None:
    payments = Payments()
    try:
        run_id = cut_payment(store, payments)
    finally:
        payments.release.set()
    wait_for(lambda: late_rows(store, run_id), "tool_returned_late")
    fact = store.get_run(run_id).facts[-1]
    assert isinstance(fact, ToolReturnedLate)
    assert not store.log_late(run_id, fact, 0)  # logged already
    assert not store.log_late(run_id, fact, 1)  # a part of the run that does not exist
    assert len(late_rows(store, run_id)) == 1


def test_runner_show_prints_the_late_result_and_its_json_lists_it(store: RunStore, store_url: str) -> None:
    payments = Payments()
    try:
        run_id = cut_payment(store, payments)
    finally:
        payments.release.set()
    wait_for(lambda: late_rows(store, run_id), "tool_returned_late")
    found = json.loads(invoke("show", run_id, "--db", store_url, "--json").stdout)
    late = [e for e in found["events"] if e["kind"] == LATE]
    assert [(e["data"]["call_id"], e["data"]["observation"]) for e in late] == [("c1", '"paid 5"')]
    out = [line.strip() for line in invoke("show", run_id, "--db", store_url).stdout.splitlines()]
    at = out.index(CUT)
    assert out[at + 1].startswith("returned late, after ")
    assert out[at + 2] == '"paid 5"'


def test_the_console_shows_the_call_returned_late_with_its_result(store: RunStore) -> None:
    payments = Payments()
    try:
        run_id = cut_payment(store, payments)
    finally:
        payments.release.set()
    wait_for(lambda: late_rows(store, run_id), "tool_returned_late")
    with TestClient(create_app(store), base_url="http://127.0.0.1") as client:
        page = client.get(f"/runs/{run_id}").text
    entry = re.search(r'<li class="entry tool [^"]*" data-kind="tool" data-call-id="c1" '
                      r'data-outcome="([^"]+)"[^>]*>(.*?)</li>', page, re.S)
    assert entry is not None
    text = html.unescape(re.sub(r"<[^>]+>", " ", entry.group(2)))
    assert entry.group(1) == "returned late"
    assert "returned late, after" in text
    assert CUT in text
    assert '"paid 5"' in text


def test_a_resume_that_read_the_run_before_its_late_result_goes_on_after_it(store: RunStore) -> None:
    """The late fact lands between the resume's read and its claim: the resume folds it in, no seq is taken twice."""
    payments = Payments()
    try:
        run_id = cut_payment(store, payments)
        read = store.get_run(run_id)
        assert store.log_late(run_id, ToolReturnedLate(step=1, call_id="c1", name="pay", observation='"paid 5"',
                                                       ok=True, duration_s=1.0), 0)
        model = ScriptedModel(["the payment went through"])
        result = resume_stored(store, read, model, payments.registry())
    finally:
        payments.release.set()
    assert result.status == "done"
    assert [m["content"] for m in model.seen[0] if m["role"] == "tool"] == ['"paid 5"']
    run = store.get_run(run_id)
    assert [e.seq for e in run.events] == list(range(1, len(run.events) + 1))


def test_a_run_with_a_late_result_replays_and_rebuilds_its_spans(store: RunStore) -> None:
    """Replay cuts the call short again where the recording did, resumed part and all; the late fact is no step."""
    payments = Payments()
    try:
        run_id = cut_payment(store, payments)
    finally:
        payments.release.set()
    wait_for(lambda: late_rows(store, run_id), "tool_returned_late")
    alone = replay(run_id, payments.registry(), source_store=store)  # the run as it stopped, late fact after
    assert alone.ok, alone.explain()
    assert alone.result.status == "deadline"
    resumed = resume(store, run_id, ScriptedModel(["the payment went through"]), payments.registry())
    report = replay(run_id, payments.registry(), source_store=store)
    assert report.ok, report.explain()
    assert (report.result.status, report.result.messages) == ("done", resumed.messages)
    assert payments.paid == [5]  # replay serves a side effect's recorded result
    spans = rebuild_spans(store.get_run(run_id))
    assert any(span.name == "execute_tool pay" for span in spans)
