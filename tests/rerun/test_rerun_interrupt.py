"""A rerun stopped part-way (Ctrl-C, or the ``cancel`` event): every candidate still running is closed
``cancelled``, none starts after, and the report covers the cases that finished."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from typing import NamedTuple

import pytest

from runner import open_store, rerun
from runner._rerun import Case
from runner._rerun.stored import stored_report
from runner.store import RunStore
from tests.cli.helpers import installed_runner
from tests.helpers import default_sigint
from tests.rerun.helpers import AFTER, DRIFT, LOOP, WEATHER, TaskServer, fake_model, recorded, recorded_at

WAIT_S = 30.0  # a bound, not an expectation


def until(done: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT_S
    while not done():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


class Stopped(NamedTuple):
    """What a stopped rerun reported: its id, whether it says it was interrupted, the cases covered and left."""

    rerun_id: str
    interrupted: bool
    cases: list[str]
    left: list[str]


def check_stopped_after_the_first_case(store: RunStore, ids: dict[str, str], stopped: Stopped) -> None:
    """The first case is reported; the second's candidate was cancelled mid-call; the third never started."""
    assert stopped.interrupted is True
    assert stopped.cases == [ids[WEATHER]]
    assert stopped.left == [ids[DRIFT], ids[LOOP]]
    candidates = {run.parent_run_id: run for run in store.list_runs(label={"rerun": stopped.rerun_id})}
    assert set(candidates) == {ids[WEATHER], ids[DRIFT]}
    assert candidates[ids[WEATHER]].status == "done"
    assert (candidates[ids[DRIFT]].status, candidates[ids[DRIFT]].error) == (
        "cancelled", "cancelled by the caller while waiting on the model")


@pytest.mark.parametrize("how", ["ctrl_c", "cancel"])
def test_a_stop_closes_the_running_candidate_cancelled_and_reports_what_finished(store_url: str, how: str) -> None:
    cancel = threading.Event()
    with recorded(store_url, (WEATHER, DRIFT, LOOP)) as (store, ids), \
            TaskServer(AFTER, hold=frozenset({DRIFT})) as server, fake_model(server) as model:

        def first_case_done(case: Case, done: int, total: int) -> None:
            until(lambda: bool(server.asked(DRIFT)))  # the second candidate waits on the model
            if how == "ctrl_c":
                raise KeyboardInterrupt
            cancel.set()

        report = rerun(store, list(ids.values()), model, concurrency=1, progress=first_case_done, cancel=cancel)
        stopped = Stopped(report.rerun_id, report.interrupted, [c.baseline.run_id for c in report.cases],
                          list(report.left))
        check_stopped_after_the_first_case(store, ids, stopped)
        assert report.to_json()["summary"]["left"] == [ids[DRIFT], ids[LOOP]]
        assert server.asked(LOOP) == []
        found = stored_report(store, report.rerun_id)  # as the console reads it back
        assert found is not None
        assert (found.cases, found.interrupted, found.samples) == (report.cases, True, 1)
        assert found.left == (ids[DRIFT],)  # the store holds no candidate of the case that never started


@pytest.mark.process
def test_ctrl_c_on_the_command_prints_the_report_of_what_finished_and_exits_130(store_url: str) -> None:
    ids = recorded_at(store_url, (WEATHER, DRIFT, LOOP))
    with TaskServer(AFTER, hold=frozenset({DRIFT})) as server:
        command = [installed_runner(), "rerun", *ids.values(), "--concurrency", "1", "--json", "--model",
                   "openai:fake", "--base-url", server.url, "--api-key", "k", "--db", store_url]
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                   preexec_fn=default_sigint)
        try:
            until(lambda: bool(server.asked(DRIFT)))
            os.kill(process.pid, signal.SIGINT)
            out, err = process.communicate(timeout=WAIT_S)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    assert process.returncode == 130, err
    report = json.loads(out)
    stopped = Stopped(report["rerun_id"], report["summary"]["interrupted"],
                      [case["baseline_run_id"] for case in report["cases"]], report["summary"]["left"])
    with open_store(store_url) as store:
        check_stopped_after_the_first_case(store, ids, stopped)
    assert server.asked(LOOP) == []
