"""A worker pool for tests: real ``runner worker`` subprocesses on a real broker and PostgreSQL.

Each pool has its own PostgreSQL schema (store and side-effect ledger) and its own
broker queue, deleted afterwards.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from sqlalchemy import Engine, create_engine, text

from runner import RunStore, open_store
from tests.pool.agents import LEDGER_SQL

ROOT = Path(__file__).resolve().parents[2]
RUNNER = str(Path(sys.executable).parent / "runner")


class Pool:
    def __init__(self, db: str, broker: str, logs: Path, nap_s: float = 0.2) -> None:
        self.db, self.broker, self.logs = db, broker, logs
        self.queue = f"runner-test-{uuid.uuid4().hex}"
        self.store: RunStore = open_store(db)
        self.ledger: Engine = create_engine(db)
        with self.ledger.begin() as conn:
            for sql in LEDGER_SQL:
                conn.execute(text(sql))
        self.env = dict(os.environ, POOL_LEDGER_URL=db, POOL_NAP_S=str(nap_s), RUNNER_BROKER_URL=broker,
                        PYTHONPATH=str(ROOT))
        self.workers: list[subprocess.Popen[bytes]] = []
        self._files: list[IO[bytes]] = []

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([RUNNER, *args], cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=60)

    def start_worker(self, concurrency: int = 4, *more: str,
                     agents: str = "tests.pool.agents:agents") -> subprocess.Popen[bytes]:
        log = (self.logs / f"worker-{len(self.workers)}.log").open("wb")
        self._files.append(log)
        worker = subprocess.Popen([RUNNER, "worker", "--db", self.db, "--queue", self.queue, "--agents",
                                   agents, "--concurrency", str(concurrency), *more],
                                  cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT)
        self.workers.append(worker)
        return worker

    def wait(self, done: Callable[[], bool], timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while not done():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout_s} s waiting for {what}; logs in {self.logs}")
            time.sleep(0.1)

    def wait_for_runs(self, found: Callable[[], set[str]], timeout_s: float, what: str) -> set[str]:
        """Poll ``found`` until it names some runs, and return them (as they were at that poll)."""
        seen: set[str] = set()

        def some() -> bool:
            seen.update(found())
            return bool(seen)

        self.wait(some, timeout_s, what)
        return seen

    def drives_a_run(self, worker: subprocess.Popen[bytes]) -> Callable[[], bool]:
        """A condition for ``wait``: ``worker`` drives at least one run now."""
        return lambda: self.driving(worker) > 0

    def driving(self, worker: subprocess.Popen[bytes]) -> int:
        """How many runs ``worker`` drives now."""
        return len(self.driven(worker))

    def driven(self, worker: subprocess.Popen[bytes], min_steps: int = 0, max_steps: int | None = None) -> set[str]:
        """The ids of the runs ``worker`` drives now, with ``min_steps``..``max_steps`` steps committed.

        A run claimed but not yet started shows as driven with 0 steps: a kill then leaves
        nothing to resume (the next worker starts it afresh), so a test that means to kill a
        run mid-flight asks for at least one step.
        """
        return {run.run_id for run in self.store.list_runs(status="running", limit=10_000)
                if run.owner is not None and f":{worker.pid}@" in run.owner and run.steps >= min_steps
                and (max_steps is None or run.steps <= max_steps)}

    def statuses(self) -> dict[str, str]:
        return {run.run_id: run.status for run in self.store.list_runs(limit=10_000)}

    def waiting(self) -> int:
        """How many messages wait in this pool's queue (a Redis queue emptied is gone: 0)."""
        from kombu.connection import Connection

        with Connection(self.broker) as conn:  # type: ignore[no-untyped-call]
            try:
                return int(conn.channel().queue_declare(self.queue, passive=True).message_count)
            except conn.channel_errors:
                if self.broker.startswith("redis"):
                    return 0
                raise

    def rows(self, sql: str) -> list[Any]:
        with self.ledger.connect() as conn:
            return list(conn.execute(text(sql)).all())

    def close(self) -> None:
        for worker in self.workers:  # the test is over: nothing of theirs is worth a warm shutdown
            if worker.poll() is None:
                worker.send_signal(signal.SIGKILL)
            worker.wait()
        for log in self._files:
            log.close()
        self.store.close()
        self.ledger.dispose()
        from kombu.connection import Connection

        with Connection(self.broker) as conn:  # type: ignore[no-untyped-call]
            channel = conn.channel()
            channel.queue_delete(self.queue)
            channel.exchange_delete(self.queue)
        if self.broker.startswith("redis"):  # kombu's Redis transport keeps its bindings as keys of their own
            import redis

            client = redis.Redis.from_url(self.broker)
            try:
                for key in client.scan_iter(match=f"*{self.queue}*"):
                    client.delete(key)
            finally:
                client.close()
