"""The console's pages on a store of 100,000 runs (or 1,000,000): p50/p95 per page, next to the store's own reads.

Builds the store (``ui_store``: real runs through ``run_agent``, multiplied in bulk SQL), or reuses
one it built before (``--db``). Then, for the runs page (``GET /``; filtered; and a search that matches
nothing), the approvals inbox (``GET /approvals``) and the page of the 200-step run (``GET /runs/{id}``), times
``--requests`` warm requests through
``runner.ui.create_app(store)`` in this process (Starlette's TestClient) and through a real
``runner ui`` process (uvicorn on 127.0.0.1, httpx), each in turn with a call of the store methods
that read the same data: ``list_runs`` + ``count_runs(at_most=)`` for a list, ``get_run`` for a run,
``inbox`` for the inbox, ``stats.gather`` for ``/stats`` and for ``runner stats --json`` (run in this
process: no interpreter start). It prints the store's size per run too. The goal (issues 22 and 31): each
page within 150 ms at the 95th percentile, at 1,000,000 runs too; the stats within 300 ms (issue 35).
Read the ratios (machines are noisy).
``--profile DIR`` writes a pyinstrument profile of each page (``pip install pyinstrument``).

    .venv/bin/python bench/ui.py [--runs 100000|1000000] [--requests 100] [--db URL | --pg] [--profile DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, NamedTuple
from unittest import mock

import httpx
from click.testing import CliRunner
from starlette.applications import Starlette
from starlette.testclient import TestClient
from ui_store import LONG_STEPS, Built, build, built_before, scratch_pg, store_bytes

from runner._log.statuses import Status
from runner._view import console
from runner._view import stats as view_stats
from runner.cli import cli
from runner.store import RunFilter, RunStore, open_store
from runner.ui import create_app
from runner.ui import pages as ui_pages

GOAL_MS = 150.0
STATS_GOAL_MS = 300.0  # /stats and `runner stats` (issue 35)
PAGE_SIZE = 50  # the console's default ?limit=
WARM_UP = 5
CLIENT_TIMEOUT_S = 120.0  # a search reading 1,000,000 runs took 5 s: past httpx's default timeout
HOST = "http://127.0.0.1"  # the console refuses any other Host header when it has no token


class Page(NamedTuple):
    """A page to time: its name, its path, the store calls that read its data, what it must show, its goal."""

    name: str
    path: str
    query: Callable[[], object]
    marker: str  # counted in the HTML: the rows of a list, the tool calls of a run
    expected: int
    goal_ms: float = GOAL_MS


class Times(NamedTuple):
    """Percentiles of one series of timings, in milliseconds."""

    p50: float
    p95: float


class Row(NamedTuple):
    """One line of the table: a page, how it was served, its times, and the store's for the same data."""

    name: str
    via: str
    page: Times
    query: Times
    goal_ms: float


def percentiles(seconds: list[float]) -> Times:
    cuts = statistics.quantiles(seconds, n=20, method="inclusive")
    return Times(statistics.median(seconds) * 1e3, cuts[18] * 1e3)


def timed(page: Callable[[], object], query: Callable[[], object], count: int) -> tuple[Times, Times]:
    """The page and its query, ``WARM_UP`` times each, then ``count`` times each on the clock, in turns.

    In turns, so both see the same machine: on a shared one the load drifts, and the ratio would with it.
    """
    for _ in range(WARM_UP):
        page()
        query()
    seconds: tuple[list[float], list[float]] = ([], [])
    for _ in range(count):
        for fn, into in ((page, seconds[0]), (query, seconds[1])):
            started = time.perf_counter()
            fn()
            into.append(time.perf_counter() - started)
    return percentiles(seconds[0]), percentiles(seconds[1])


def listing(store: RunStore, **filters: Any) -> Callable[[], object]:
    """The store's reads for a list page: a page of runs, and whether there are more (bounded count)."""

    def read() -> object:
        found = store.list_runs(**filters, limit=PAGE_SIZE)
        if len(found) == PAGE_SIZE:  # as the page does: counting only tells whether there is an older page
            return found, store.count_runs(**filters, at_most=PAGE_SIZE + 1)
        return found

    return read


def pages(store: RunStore, built: Built) -> list[Page]:
    """The pages issues 22 and 31 time: the runs (plain, filtered, searched), the inbox and the 200-step run."""
    rows = '<tr data-run-id="'
    done = store.count_runs(status=Status.DONE, text="weather", at_most=PAGE_SIZE)
    calls = len(console.inbox(store))  # each run of the bench awaiting approval waits on one call
    return [
        Page("runs", "/", listing(store), rows, PAGE_SIZE),
        Page("runs, done + search", f"/?status={Status.DONE}&search=weather",
             listing(store, status=Status.DONE, text="weather"), rows, done),
        Page("runs, search, no match", "/?search=zanzibar", listing(store, text="zanzibar"), rows, 0),
        Page("approvals inbox", "/approvals", lambda: console.inbox(store), 'class="pending card"', calls),
        Page("200-step run", f"/runs/{built.long_run}", lambda: store.get_run(built.long_run), '<li class="entry tool',
             LONG_STEPS),
        Page("stats", "/stats", lambda: view_stats.gather(store), "<svg data-chart=", 4, STATS_GOAL_MS),
        Page("stats, last 7 days", "/stats?since=7d", lambda: view_stats.gather(store, week()), "<svg data-chart=", 4,
             STATS_GOAL_MS),
        Page("runner stats --json", "cli:stats --json", lambda: view_stats.gather(store), '"runs": ', 1,
             STATS_GOAL_MS),
    ]


def week() -> RunFilter:
    return RunFilter(since=datetime.now(UTC) - timedelta(days=7))


def check(page: Page, status: int, html: str) -> None:
    """The page answered 200 and shows what it should (a bench of an error page would be fast and wrong)."""
    if status != 200:
        raise SystemExit(f"GET {page.path}: {status} {html[:200]}")
    shown = html.count(page.marker)
    if shown != page.expected:
        raise SystemExit(f"GET {page.path}: {shown} x {page.marker!r}, expected {page.expected}")


def fetcher(client: httpx.Client | TestClient, page: Page, url: str) -> Callable[[], object]:
    """A request of ``page``; a ``cli:`` page is that ``runner`` command run in this process on the store at ``url``."""
    if page.path.startswith("cli:"):
        args = [*page.path.removeprefix("cli:").split(), "--db", url]

        def command() -> object:
            result = CliRunner().invoke(cli, args, catch_exceptions=False)
            check(page, (result.exit_code and 500) or 200, result.stdout)
            return result
        return command
    first = client.get(page.path)
    check(page, first.status_code, first.text)
    return lambda: client.get(page.path)


@contextmanager
def served(url: str) -> Iterator[str]:
    """A real ``runner ui`` process on the store at ``url`` (uvicorn, a free port); its base URL."""
    runner = str(Path(sys.executable).parent / "runner")
    child = subprocess.Popen([runner, "ui", "--db", url, "--port", "0"], stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        found = re.fullmatch(r"runner ui: serving (http://\S+)\n", line)
        if found is None:
            raise SystemExit(f"runner ui printed {line!r}, exit {child.poll()}")
        yield found.group(1)
    finally:
        child.send_signal(signal.SIGINT)
        child.wait(timeout=30)


def profile(app: Starlette, page: Page, count: int, out: Path) -> Path:
    """``count`` requests of ``page`` under pyinstrument, as text in ``out``.

    The profiler sees one thread, so the page's store work runs inline here rather than in
    Starlette's thread pool, and the requests go through httpx's ASGI transport on this thread.
    """
    profiler = importlib.import_module("pyinstrument").Profiler(interval=0.0005, async_mode="enabled")

    async def inline(fn: Callable[..., object], *args: object, **kwargs: object) -> object:
        return fn(*args, **kwargs)

    async def hit() -> None:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=HOST) as client:
            for _ in range(count):
                await client.get(page.path)

    with mock.patch.object(ui_pages, "run_in_threadpool", inline):
        asyncio.run(hit())  # warm
        profiler.start()
        asyncio.run(hit())
        profiler.stop()
    path = out / (re.sub(r"\W+", "-", page.name).strip("-") + ".txt")
    path.write_text(profiler.output_text(unicode=True, show_all=False))
    return path


@contextmanager
def bench_store(args: argparse.Namespace) -> Iterator[tuple[RunStore, str]]:
    """The store to measure and its URL: ``--db`` (kept), a scratch PostgreSQL schema (dropped), or a temp file."""
    if args.pg:
        store, drop = scratch_pg(os.environ["RUNNER_TEST_PG_URL"])
        try:
            yield store, store.url.render_as_string(hide_password=False)
        finally:
            drop()
        return
    with tempfile.TemporaryDirectory() as tmp:
        url = args.db or f"sqlite:///{Path(tmp) / 'ui-bench.db'}"
        with open_store(url) as store:
            yield store, store.url.render_as_string(hide_password=False)


def prepared(store: RunStore, runs: int) -> Built:
    """The store this bench built before, else a newly built one (only into an empty store)."""
    found = built_before(store)
    if found is not None:
        print(f"reusing the {found.runs:,} runs at {store.url.render_as_string()}")
        return found
    there = store.count_runs(at_most=1)
    if there:
        raise SystemExit(f"{store.url.render_as_string()} holds runs this bench did not make; give an empty store")
    started = time.perf_counter()
    made = build(store, runs)
    print(f"built {made.runs:,} runs in {time.perf_counter() - started:.1f} s ({store.engine.dialect.name})")
    return made


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--requests", type=int, default=100, help="timed requests per page (after 5 to warm up)")
    parser.add_argument("--db", help="the store to build, or to reuse when this bench built it (URL or path)")
    parser.add_argument("--pg", action="store_true", help="build in a scratch schema of $RUNNER_TEST_PG_URL")
    parser.add_argument("--no-server", action="store_true", help="skip the real `runner ui` process")
    parser.add_argument("--profile", type=Path, metavar="DIR", help="also profile each page (pyinstrument) into DIR")
    args = parser.parse_args()
    n = args.requests
    rows: list[Row] = []
    load = os.getloadavg()[0]
    with bench_store(args) as (store, url):
        built = prepared(store, args.runs)
        measured = pages(store, built)
        app = create_app(store)
        with TestClient(app, base_url=HOST) as client:
            rows += [Row(page.name, "in-process", *timed(fetcher(client, page, url), page.query, n), page.goal_ms)
                     for page in measured]
        if args.profile:
            args.profile.mkdir(parents=True, exist_ok=True)
            for page in measured:
                print(f"profile of GET {page.path}: {profile(app, page, n, args.profile)}")
        if not args.no_server:
            with served(url) as base, httpx.Client(base_url=base, timeout=CLIENT_TIMEOUT_S) as http:
                rows += [Row(page.name, "runner ui", *timed(fetcher(http, page, url), page.query, n), page.goal_ms)
                         for page in measured if not page.path.startswith("cli:")]
        size = store_bytes(store)
    report(store.engine.dialect.name, built, measured, rows, n)
    print(f"store: {size / 1e6:,.1f} MB, {size / built.runs / 1e3:.2f} KB per run")
    print(f"machine: {os.cpu_count()} cores, load average (1 min) {load:.1f} before timing, "
          f"{os.getloadavg()[0]:.1f} after: above the cores, other work shares the CPU (read p50s and ratios)")


def report(backend: str, built: Built, measured: list[Page], rows: list[Row], n: int) -> None:
    """The table, then the goal: which pages miss it, and whether the store's own reads miss it too."""
    print(f"\n{built.runs:,} runs on {backend}; {n} warm requests per page; times in ms; "
          f"query = the store's own reads for the same data")
    print(f"{'page':<24} {'via':<11} {'p50':>7} {'p95':>7} {'query p50':>10} {'query p95':>10} {'page/query':>11}"
          f"  p95 <= goal")
    for row in rows:
        print(f"{row.name:<24} {row.via:<11} {row.page.p50:>7.1f} {row.page.p95:>7.1f} {row.query.p50:>10.1f} "
              f"{row.query.p95:>10.1f} {row.page.p50 / row.query.p50:>10.1f}x  "
              f"{'ok' if row.page.p95 <= row.goal_ms else 'MISSED'} ({row.goal_ms:.0f})")
    for page in measured:
        command = page.path.removeprefix("cli:")
        shown = f"runner {command} (in this process)" if command != page.path else f"GET {page.path}"
        print(f"  {page.name}: {shown}")
    missed = [row for row in rows if row.page.p95 > row.goal_ms]
    if not missed:
        print(f"goal: every page p95 <= its goal ({GOAL_MS:.0f} ms; stats {STATS_GOAL_MS:.0f} ms) -> ok")
    for row in missed:
        why = ("its query alone misses too: the store's reads, not the page" if row.query.p95 > row.goal_ms
               else "its query alone is within it: the page's own work")
        print(f"goal: {row.name} via {row.via}: p95 {row.page.p95:.1f} ms > {row.goal_ms:.0f} ms -> MISSED ({why})")


if __name__ == "__main__":
    main()
