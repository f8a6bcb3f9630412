"""The worker pool end to end: real broker (RUNNER_TEST_BROKER_URL), real PostgreSQL,
real ``runner worker`` processes, real SIGKILL. (The full 200-run version is bench/workers.py.)"""

from __future__ import annotations

import functools
import os
import random
import signal
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from runner.events import ApprovalDecided, ModelCalled, RunResumed, ToolStarted, decode_all
from tests.conftest import SESSION_PREFIX, drop_pg_schema, pg_schema_url
from tests.pool.helpers import Pool

BROKER = os.environ.get("RUNNER_TEST_BROKER_URL")
NOWHERE = "amqp://guest:guest@127.0.0.1:1//"

pytestmark = [pytest.mark.process,
              pytest.mark.skipif(not BROKER, reason="RUNNER_TEST_BROKER_URL is not set (a RabbitMQ or Redis URL)")]


@pytest.fixture
def pool(pg_admin: Engine, tmp_path: Path) -> Iterator[Pool]:
    assert BROKER is not None
    schema = f"{SESSION_PREFIX}_{uuid.uuid4().hex[:8]}"
    opened = Pool(pg_schema_url(pg_admin, schema), BROKER, tmp_path)
    try:
        yield opened
    finally:
        opened.close()
        drop_pg_schema(pg_admin, schema)


def submit(pool: Pool, task: str, agent: str = "tipper", broker: str | None = None) -> str:
    done = pool.cli("submit", task, "--agent", agent, "--db", pool.db, "--queue", pool.queue,
                    "--broker", broker or pool.broker)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_killed_workers_lose_no_run_and_repeat_no_side_effect_blindly(pool: Pool) -> None:
    from runner.pool.submission import submit_run

    run_ids = [submit_run(pool.store, f"job {i}", agent="tipper", broker=pool.broker, queue=pool.queue)[0]
               for i in range(32)]
    for _ in range(3):
        pool.start_worker(4)
    rng = random.Random()
    mid_flight: set[str] = set()
    for victim in (0, 1):  # two workers die at random moments while they drive runs
        time.sleep(rng.uniform(0.0, 0.6))
        # Killed right after the store shows it driving a run that has taken one or two of its four
        # steps (at least two naps of 0.2 s still to go), so the kill hits a started run in flight.
        # (A run only claimed has nothing to resume: killed then, it is started afresh.)
        worker = pool.workers[victim]
        hit = pool.wait_for_runs(functools.partial(pool.driven, worker, min_steps=1, max_steps=2), 30,
                                 f"worker {victim} to drive a started run")
        worker.send_signal(signal.SIGKILL)
        mid_flight |= hit
        worker.wait()
        pool.start_worker(4)
    pool.wait(lambda: all(s == "done" for s in pool.statuses().values()), 90, "every run to end done")

    resumed_runs = set[str]()
    for run_id in run_ids:
        run = pool.store.get_run(run_id)
        assert (run.status, run.steps) == ("done", 4)
        facts = decode_all(run.events, run_id)
        resumes = [f for f in facts if isinstance(f, RunResumed)]
        if resumes:
            resumed_runs.add(run_id)
        assert len(resumes) <= 2
        assert all(r.reason == "its process is gone (dead)" for r in resumes)
        assert len({r.owner for r in resumes}) == len(resumes)  # a new owner each time
        # One driver at a time: within each part, steps only go forward and no call starts twice.
        segment, steps, started = 0, [0], set[str]()
        for fact in facts:
            if isinstance(fact, RunResumed):
                segment, steps, started = segment + 1, [0], set()
            elif isinstance(fact, ModelCalled):
                assert fact.step > steps[-1], (run_id, segment, fact.step)
                steps.append(fact.step)
            elif isinstance(fact, ToolStarted):
                assert fact.call_id not in started, (run_id, segment, fact.call_id)
                started.add(fact.call_id)
        # A charge ran again only as an in-doubt re-run (attempt 2, same key).
        reruns = {f.call_id for f in facts if isinstance(f, ToolStarted) and f.attempt == 2}
        assert reruns <= {"charge-2", "nap-1", "nap-2", "nap-3"}
    assert mid_flight
    assert mid_flight <= resumed_runs  # every run the kills hit in flight was resumed

    charges = Counter(key for (key,) in pool.rows("SELECT key FROM charges"))
    assert len(charges) == len(run_ids)  # every run charged, each under its own key
    assert max(charges.values()) <= 2
    twice = {key for key, n in charges.items() if n == 2}
    for run_id in run_ids:
        facts = decode_all(pool.store.get_run(run_id).events, run_id)
        attempts = [f.attempt for f in facts if isinstance(f, ToolStarted) and f.call_id == "charge-2"]
        key_twice = any(key.startswith(run_id) or run_id in key for key in twice)
        assert attempts in ([1], [1, 2])
        assert not key_twice or attempts == [1, 2]
    notices = Counter(tag for (tag,) in pool.rows("SELECT tag FROM notices"))
    assert max(notices.values()) == 1  # without a key: at most once, never re-run


def test_a_message_that_is_not_a_task_is_rejected_and_the_worker_goes_on(pool: Pool) -> None:
    from kombu.connection import Connection
    from kombu.messaging import Producer

    worker = pool.start_worker(2)
    log = pool.logs / "worker-0.log"
    pool.wait(lambda: " ready." in log.read_text(encoding="utf-8", errors="replace"), 60, "the worker to be ready")
    with Connection(pool.broker) as conn:  # type: ignore[no-untyped-call]
        producer = Producer(conn.channel())  # type: ignore[no-untyped-call]
        for body in (b'"just a string"', b'[1, 2]', b'{"no": "args"}'):  # the first two stopped the worker
            producer.publish(  # type: ignore[no-untyped-call]
                body, content_type="application/json", content_encoding="utf-8", routing_key=pool.queue,
                headers={"task": "runner.run", "id": str(uuid.uuid4())}, exchange="")
    run_id = submit(pool, "job after the poison")
    pool.wait(lambda: pool.statuses() == {run_id: "done"}, 60, "the real run to end done")
    assert worker.poll() is None  # still serving
    assert pool.waiting() == 0  # nothing left to die on
    refused = [line.rsplit(": ", 1)[-1] for line in log.read_text(encoding="utf-8", errors="replace").splitlines()
               if "Received invalid task message: a runner.run message whose body is not [args, kwargs, embed]"
               in line]
    assert refused == ["str", "list", "dict"]


def test_a_run_submitted_while_the_broker_is_down_runs_once_it_is_back(pool: Pool) -> None:
    done = pool.cli("submit", "job late", "--agent", "tipper", "--db", pool.db, "--queue", pool.queue,
                    "--broker", NOWHERE)
    assert done.returncode == 0, done.stderr
    run_id = done.stdout.strip()
    assert done.stderr.startswith("note: the broker did not take the run (OperationalError: ")
    assert pool.statuses() == {run_id: "queued"}
    listed = pool.cli("runs", "--db", pool.db, "--status", "queued")
    assert run_id[:8] in listed.stdout
    pool.start_worker(2, "--sweep-interval", "0.5", "--requeue-after", "0")
    pool.wait(lambda: pool.statuses() == {run_id: "done"}, 30, "the swept run to end done")
    kinds = [event.kind for event in pool.store.get_run(run_id).events]
    assert (kinds[:2], kinds.count("run_started")) == (["run_queued", "run_started"], 1)


def test_cancel_ends_a_queued_and_a_running_run_cancelled(pool: Pool) -> None:
    queued = submit(pool, "job queued")
    done = pool.cli("cancel", queued, "--db", pool.db)
    assert (done.returncode, done.stdout) == (0, f"run {queued} cancelled\n")
    pool.start_worker(2)
    running = submit(pool, "job forever", agent="sleeper")
    pool.wait(lambda: pool.store.get_run(running).steps >= 2, 30, "the sleeper to take two steps")
    done = pool.cli("cancel", running[:10], "--db", pool.db)
    assert done.returncode == 0, done.stderr
    assert (done.returncode, done.stdout) == (
        0, f"run {running}: cancel requested: it stops before its next model or tool call\n")
    pool.wait(lambda: pool.statuses()[running] == "cancelled", 30, "the running run to end cancelled")
    assert pool.statuses() == {queued: "cancelled", running: "cancelled"}
    assert [e.kind for e in pool.store.get_run(queued).events] == ["run_queued", "run_finished"]  # never started
    refused = pool.cli("cancel", queued, "--db", pool.db)
    assert (refused.returncode, refused.stderr) == (
        3, f"Error: run {queued} has already finished (cancelled); nothing to cancel\n")


def test_a_pool_run_awaiting_approval_is_approved_back_into_its_pool(pool: Pool) -> None:
    worker = pool.start_worker(2, agents="tests.pool.agents:with_approver")
    run_id = submit(pool, "rent", agent="approver")
    pool.wait(lambda: pool.statuses()[run_id] == "awaiting_approval", 60, "the run to await approval")
    assert pool.rows("SELECT tag FROM notices") == []
    done = pool.cli("resume", run_id[:8], "--approve", "transfer-1", "--by", "alice", "--db", pool.db)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"run {run_id[:8]}: transfer-1 approved by alice; sent back to queue {pool.queue}, where a worker resumes it"]
    pool.wait(lambda: pool.statuses()[run_id] == "done", 60, "the approved run to end done")
    assert pool.rows("SELECT tag FROM notices") == [("transfer rent",)]
    run = pool.store.get_run(run_id)
    assert run.answer == 'transfer: "transferred rent"'
    facts = decode_all(run.events, run_id)
    assert [(f.call_id, f.approved, f.decided_by) for f in facts if isinstance(f, ApprovalDecided)] == [
        ("transfer-1", True, "alice")]
    (resumed,) = [f for f in facts if isinstance(f, RunResumed)]
    assert (resumed.reason, resumed.decisions) == ("awaiting_approval", {"transfer-1": True})
    assert f":{worker.pid}@" in resumed.owner  # the worker's process resumed it, not the approver's


def test_a_decided_pool_run_whose_publish_failed_is_published_again_by_the_sweep(pool: Pool) -> None:
    pool.start_worker(2, "--sweep-interval", "0.5", "--requeue-after", "0", agents="tests.pool.agents:with_approver")
    run_id = submit(pool, "rent", agent="approver")
    pool.wait(lambda: pool.statuses()[run_id] == "awaiting_approval", 60, "the run to await approval")
    done = pool.cli("resume", run_id[:8], "--approve", "transfer-1", "--by", "alice", "--db", pool.db,
                    "--broker", NOWHERE)
    assert done.returncode == 3
    assert "the decision is logged, but the broker did not take the run" in done.stderr
    pool.wait(lambda: pool.statuses()[run_id] == "done", 60, "the sweep to send the decided run back")
    assert pool.rows("SELECT tag FROM notices") == [("transfer rent",)]
    assert pool.store.get_run(run_id).answer == 'transfer: "transferred rent"'


def test_task_messages_with_bad_headers_are_rejected_and_the_worker_goes_on(pool: Pool) -> None:
    from kombu.connection import Connection
    from kombu.messaging import Producer

    from runner.pool.app import make_app

    body = b'[["no-such-run"], {}, {"callbacks": null, "errbacks": null, "chain": null, "chord": null}]'
    with Connection(pool.broker) as conn:  # type: ignore[no-untyped-call]
        channel = conn.channel()
        make_app(pool.broker, pool.queue).amqp.queues[pool.queue](channel).declare()  # as the worker declares it
        producer = Producer(channel)  # type: ignore[no-untyped-call]
        for headers in ({"task": "runner.run"}, {"task": "runner.run", "id": ["x"]},  # KeyError, TypeError
                        {"task": "runner.run", "id": "t-1", "timelimit": 5}):  # each stopped the worker
            producer.publish(  # type: ignore[no-untyped-call]
                body, content_type="application/json", content_encoding="utf-8", routing_key=pool.queue,
                headers=headers, exchange="")
    worker = pool.start_worker(2)
    run_id = submit(pool, "job after the id-less message")
    pool.wait(lambda: pool.statuses() == {run_id: "done"} or worker.poll() is not None, 60, "the run to end done")
    assert worker.poll() is None, (pool.logs / "worker-0.log").read_text(encoding="utf-8", errors="replace")
    assert pool.statuses() == {run_id: "done"}
    assert pool.waiting() == 0
    log = (pool.logs / "worker-0.log").read_text(encoding="utf-8", errors="replace")
    refused = [line.split("Received invalid task message: a runner.run message ", 1)[-1]
               for line in log.splitlines() if "Received invalid task message" in line]
    assert refused == ["without an id header", "whose id is not a string: list",
                       "whose timelimit header is not [hard, soft] seconds: 5"]
    time.sleep(1)  # a worker that met the message stops only once its running tasks end
    assert worker.poll() is None


# A worker whose message handling fails in a way nobody foresaw: Celery calls that unrecoverable.
BROKEN_WORKER = """
import sys
import runner.pool.app

def broken_strategy(task, app, consumer, **options):
    def on_message(message, body, ack, reject, callbacks, **more):
        raise KeyError("id")
    return on_message

runner.pool.app.checked_strategy = broken_strategy
from runner.cli import main
main(sys.argv[1:])
"""


def test_a_worker_stopped_by_an_unrecoverable_error_exits_non_zero(pool: Pool) -> None:
    worker_stops_with_status_3(pool)


REDIS = os.environ.get("RUNNER_TEST_REDIS_URL")


@pytest.fixture
def redis_pool(pg_admin: Engine, tmp_path: Path) -> Iterator[Pool]:
    if not REDIS:
        pytest.skip("RUNNER_TEST_REDIS_URL is not set (a Redis URL)")
    schema = f"{SESSION_PREFIX}_{uuid.uuid4().hex[:8]}"
    opened = Pool(pg_schema_url(pg_admin, schema), REDIS, tmp_path)
    try:
        yield opened
    finally:
        opened.close()
        drop_pg_schema(pg_admin, schema)


def test_a_redis_worker_stopped_by_an_unrecoverable_error_exits_non_zero(redis_pool: Pool) -> None:
    """kombu's Redis transport takes a handler's KeyError for a lost connection: it reconnected for ever."""
    worker_stops_with_status_3(redis_pool)


def worker_stops_with_status_3(pool: Pool) -> None:
    import subprocess
    import sys

    from tests.pool.helpers import ROOT

    worker = subprocess.Popen([sys.executable, "-c", BROKEN_WORKER, "worker", "--db", pool.db, "--queue", pool.queue,
                               "--agents", "tests.pool.agents:agents", "--concurrency", "2"],
                              cwd=ROOT, env=pool.env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    pool.workers.append(worker)  # killed by the pool's close if still alive
    run_id = submit(pool, "job for a broken worker")
    stderr = worker.communicate(timeout=60)[1].decode(errors="replace")
    assert worker.returncode == 3, stderr
    assert stderr.splitlines()[-1] == ("Error: the worker stopped on an unrecoverable error (exit code 1; "
                                       "the log above says which)")
    assert "Unrecoverable error: KeyError('id')" in stderr
    assert pool.statuses() == {run_id: "queued"}  # its message is back in the queue for a sound worker
