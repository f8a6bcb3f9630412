"""A pool run stopped on a limit, sent back to its pool with larger limits (issue 37, item 4).

``runner resume RUN --max-cost-usd N`` logs a ``run_requeued`` fact with the limits given and
publishes the run to its queue; a worker takes a stopped run only when such a fact follows its
stop, and resumes it under those limits. ``runner show`` prints that command. The first tests
run the task body (``take``) in this process; the last goes through a real ``runner worker``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from runner import ModelReply, RunStore, Usage
from runner.errors import CannotResume
from runner.events import RunFinished, RunRequeued, RunResumed
from runner.pool.queued import record_queued
from runner.pool.take import take
from tests.cli.helpers import invoke, one_error_line
from tests.pool import agents
from tests.pool.helpers import ROOT, RUNNER

BROKER = os.environ.get("RUNNER_TEST_BROKER_URL")
NOWHERE = "amqp://guest:guest@127.0.0.1:1//"  # nothing listens on port 1: publishing fails at once
PRICES = {"metered": {"input_mtok": 100.0, "output_mtok": 1000.0}}  # 1,000 in + 100 out: $0.2 a call


def metered(messages: list[dict[str, Any]], specs: list[dict[str, Any]]) -> ModelReply:
    """The pool agents' plan model (three steps of tool calls, then an answer), at $0.2 a call."""
    return dataclasses.replace(agents.plan_model(messages, specs), usage=Usage(1000, 100))


def make_metered() -> tuple[Any, Any, dict[str, Any]]:
    return metered, agents.registry(), {"max_steps": 10, "token_budget": 100_000, "prices": PRICES}


AGENTS = {"metered": make_metered}


@pytest.fixture(autouse=True)
def quick(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POOL_NAP_S", "0.01")
    monkeypatch.delenv("POOL_LEDGER_URL", raising=False)


def over_budget(store: RunStore) -> str:
    """A pool run that a worker stopped ``cost_limit`` after 3 calls ($0.6 of $0.5)."""
    run_id = record_queued(store, "job", "metered", max_cost_usd=0.5)
    assert take(store, run_id, AGENTS) == "cost_limit"
    return run_id


def test_a_worker_drops_a_limit_stopped_run_unless_it_was_sent_back_since(store: RunStore) -> None:
    run_id = over_budget(store)
    assert take(store, run_id, AGENTS) == "dropped"  # a stale delivery: nothing asked for more
    store.requeue(store.get_run(run_id), {"max_cost_usd": 2.0}, "alice")
    assert take(store, run_id, AGENTS) == "done"
    run = store.get_run(run_id)
    (requeued,) = [f for f in run.facts if isinstance(f, RunRequeued)]
    assert (requeued.limits, requeued.requeued_by, requeued.step) == ({"max_cost_usd": 2.0}, "alice", 3)
    (resumed,) = [f for f in run.facts if isinstance(f, RunResumed)]
    assert (resumed.reason, resumed.limits["max_cost_usd"], resumed.limits["max_steps"]) == ("cost_limit", 2.0, 10)
    assert run.answer == "finished job"
    assert take(store, run_id, AGENTS) == "dropped"  # a second delivery of the same send-back


def test_a_run_that_stopped_again_after_its_send_back_is_dropped(store: RunStore) -> None:
    run_id = over_budget(store)
    store.requeue(store.get_run(run_id), {"max_cost_usd": 0.7}, "alice")  # room for one more call only
    assert take(store, run_id, AGENTS) == "cost_limit"
    assert take(store, run_id, AGENTS) == "dropped"
    kinds = [e.kind for e in store.get_run(run_id).events]
    assert (kinds[-1], kinds.count("run_requeued"), kinds.count("run_resumed")) == ("run_finished", 1, 1)


def test_requeue_refuses_a_run_that_cannot_go_back_and_logs_nothing(store: RunStore) -> None:
    queued = record_queued(store, "job", "metered")
    with pytest.raises(CannotResume, match=rf"^run {queued} has not stopped on a limit or an error \(queued\); "
                                           r"only such a run goes back to its pool$"):
        store.requeue(store.get_run(queued), {}, "alice")
    run_id = over_budget(store)
    with pytest.raises(ValueError, match=r"^max_cost_usd must be positive or None, got -1$"):
        store.requeue(store.get_run(run_id), {"max_cost_usd": -1}, "alice")
    with pytest.raises(TypeError, match=r"^unknown limit\(s\): budget "):
        store.requeue(store.get_run(run_id), {"budget": 3}, "alice")
    assert [e.kind for e in store.get_run(run_id).events].count("run_requeued") == 0


def test_resume_with_a_larger_budget_logs_it_even_when_the_broker_is_down(store: RunStore, store_url: str) -> None:
    run_id = over_budget(store)
    short = store.short_ids([run_id])[run_id]
    result = invoke("resume", short, "--max-cost-usd", "100", "--max-steps", "12", "--by", "alice",
                    "--broker", NOWHERE, "--db", store_url)
    assert result.exit_code == 3, result.output
    assert one_error_line(result).startswith(
        f"Error: run {short}: the new limits are logged, but the broker did not take the run (")
    assert one_error_line(result).endswith(f"); runner resume {short} publishes it again")
    (requeued,) = [f for f in store.get_run(run_id).facts if isinstance(f, RunRequeued)]
    assert requeued.limits == {"max_cost_usd": 100.0, "max_steps": 12}
    assert take(store, run_id, AGENTS) == "done"  # as a worker does once the run is published again


def test_show_prints_the_command_that_sends_a_limit_stopped_pool_run_back(store: RunStore, store_url: str) -> None:
    run_id = over_budget(store)
    short = store.short_ids([run_id])[run_id]
    shown = invoke("show", short, "--db", store_url)
    assert shown.exit_code == 0, shown.output
    command = f"runner resume {short} --max-cost-usd 1.1 --db {shlex.quote(store_url)}"  # $0.6 used, and $0.5 more
    assert f"  {command}   # sends it back to its pool with a larger budget" in shown.stdout.splitlines()


def test_resume_refuses_a_cancelled_pool_run_in_one_line(store: RunStore, store_url: str) -> None:
    run_id = record_queued(store, "job", "metered")
    store.cancel_queued(run_id, "cancelled before a worker started it")
    short = store.short_ids([run_id])[run_id]
    result = invoke("resume", short, "--max-steps", "3", "--broker", NOWHERE, "--db", store_url)
    assert result.exit_code == 3, result.output
    assert one_error_line(result) == (f"Error: run {short} is a pool run that ended cancelled; only a run stopped "
                                      "on a limit or an error goes back to its pool (--here --tools MODULE:ATTR "
                                      "resumes it in this process)")
    assert [e.kind for e in store.get_run(run_id).events] == ["run_queued", "run_finished"]


@pytest.fixture
def queue_name() -> Iterator[str]:
    """A queue of the test's own on RUNNER_TEST_BROKER_URL, deleted afterwards."""
    assert BROKER is not None
    name = f"runner-test-{uuid.uuid4().hex}"
    yield name
    from kombu.connection import Connection

    with Connection(BROKER) as conn:  # type: ignore[no-untyped-call]
        channel = conn.channel()
        channel.queue_delete(name)
        channel.exchange_delete(name)


def wait(done: Callable[[], bool], what: str, logs: Path) -> None:
    deadline = time.monotonic() + 60  # a bound, not a measurement
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}; worker log: {logs.read_text()[-2000:]}")
        time.sleep(0.1)


@pytest.mark.process
@pytest.mark.skipif(not BROKER, reason="RUNNER_TEST_BROKER_URL is not set (a RabbitMQ or Redis URL)")
def test_a_pool_run_stopped_on_its_budget_goes_back_to_its_worker_with_a_larger_one(
        store: RunStore, store_url: str, queue_name: str, tmp_path: Path) -> None:
    assert BROKER is not None
    env = {k: v for k, v in os.environ.items() if k != "POOL_LEDGER_URL"}
    env.update(RUNNER_BROKER_URL=BROKER, PYTHONPATH=str(ROOT), POOL_NAP_S="0.01")

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([RUNNER, *args, "--db", store_url], cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=60)

    logs = tmp_path / "worker.log"
    with logs.open("wb") as log:
        worker = subprocess.Popen([RUNNER, "worker", "--db", store_url, "--queue", queue_name, "--agents",
                                   "tests.pool.test_pool_budget:AGENTS", "--concurrency", "1"],
                                  cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            submitted = cli("submit", "job", "--agent", "metered", "--queue", queue_name, "--max-cost-usd", "0.5")
            assert submitted.returncode == 0, submitted.stderr
            run_id = submitted.stdout.strip()
            wait(lambda: store.get_run(run_id).status == "cost_limit", "the run to stop on its budget", logs)
            short = store.short_ids([run_id])[run_id]
            assert f"runner resume {short} --max-cost-usd 1" in cli("show", short).stdout

            sent = cli("resume", short, "--max-cost-usd", "100", "--by", "alice", "--json")
            assert sent.returncode == 0, sent.stderr
            assert json.loads(sent.stdout) == {"run_id": run_id, "status": "cost_limit",
                                               "limits": {"max_cost_usd": 100.0}, "requeued_by": "alice",
                                               "queue": queue_name, "published": True}
            wait(lambda: store.get_run(run_id).status == "done", "the worker to finish the run", logs)
        finally:
            worker.kill()
            worker.wait()
    run = store.get_run(run_id)
    assert run.answer == "finished job"
    assert run.cost_usd == pytest.approx(0.8)  # the three calls before, and the answer
    (resumed,) = [f for f in run.facts if isinstance(f, RunResumed)]
    assert (resumed.reason, resumed.limits["max_cost_usd"]) == ("cost_limit", 100.0)
    assert f":{worker.pid}@" in resumed.owner  # the worker resumed it, not the process that sent it back
    assert [type(f).__name__ for f in run.facts if isinstance(f, (RunFinished, RunRequeued, RunResumed))] == [
        "RunFinished", "RunRequeued", "RunResumed", "RunFinished"]


def test_show_and_the_console_draw_the_send_back_with_who_and_the_limits(store: RunStore, store_url: str) -> None:
    from starlette.testclient import TestClient

    from runner.ui import create_app

    run_id = over_budget(store)
    store.requeue(store.get_run(run_id), {"max_cost_usd": 2.0}, "alice")
    shown = invoke("show", run_id[:8], "--db", store_url).output.splitlines()
    at = shown.index("sent back to its queue by alice")
    assert shown[at + 1] == "  limits: max_cost_usd 2.0"
    with TestClient(create_app(store), base_url="http://127.0.0.1") as client:
        page = client.get(f"/runs/{run_id}").text
    assert 'data-kind="requeued"' in page
    assert "sent back to its queue by <b class=\"by\">alice</b>" in page
    assert "limits: max_cost_usd 2.0" in page


@pytest.mark.skipif(not BROKER, reason="RUNNER_TEST_BROKER_URL is not set (a RabbitMQ or Redis URL)")
def test_the_consoles_resume_sends_a_limit_stopped_pool_run_back_with_a_larger_limit(
        store: RunStore, queue_name: str) -> None:
    from kombu.connection import Connection
    from starlette.testclient import TestClient

    from runner.ui import create_app

    assert BROKER is not None
    run_id = record_queued(store, "job", "metered", max_cost_usd=0.5, queue=queue_name)
    assert take(store, run_id, AGENTS) == "cost_limit"  # $0.6 of $0.5
    app = create_app(store, broker=BROKER, decided_by="carol")
    with TestClient(app, base_url="http://127.0.0.1") as client:
        answer = client.post(f"/runs/{run_id}/resume", data={}, headers={"Origin": "http://127.0.0.1"})
    assert answer.status_code == 200
    assert f"sent back to queue {queue_name} with max_cost_usd 1.1" in answer.text
    (requeued,) = [f for f in store.get_run(run_id).facts if isinstance(f, RunRequeued)]
    assert (requeued.limits, requeued.requeued_by) == ({"max_cost_usd": 1.1}, "carol")
    with Connection(BROKER) as conn:  # type: ignore[no-untyped-call]
        message = conn.SimpleQueue(queue_name).get(timeout=10)
        assert message.payload[0] == [run_id]  # what a worker of the pool receives: runner.run(run_id)
        message.ack()
    assert take(store, run_id, AGENTS) == "done"  # the worker's part, under the larger budget
