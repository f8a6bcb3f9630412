"""Fixtures of the console's browser tests: one Chromium per session, a fresh context and page per test, and
``runner ui`` processes that are stopped (SIGINT, exit 0 checked) after the test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from tests.ui.helpers import CHROMIUM_ARGS, SCRUBBED, Console, Watch, chromium_path, start_console, watching

PAGE_TIMEOUT_MS = 15_000


@pytest.fixture(autouse=True)
def local_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs recorded in the test's process reach only the fake model server, whatever the environment says."""
    for name in SCRUBBED:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """The system Chromium under Playwright (never a browser Playwright downloads), for one test module.

    Not for the session: Playwright's sync API keeps an event loop running in this thread while
    it is open, and ``asyncio.run`` in any later test would fail.
    """
    path = chromium_path()
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    """A page in a context of its own (no cookies or storage shared between tests)."""
    context = browser.new_context()
    context.set_default_timeout(PAGE_TIMEOUT_MS)
    yield context.new_page()
    context.close()


@pytest.fixture
def ran_file(tmp_path: Path) -> Path:
    """The file the console's tools append a line to for each call they run."""
    return tmp_path / "ran.txt"


@pytest.fixture
def console(tmp_path: Path, ran_file: Path) -> Iterator[Callable[..., Console]]:
    """Start ``runner ui --db DB OPTIONS`` as ``console(DB, *OPTIONS)``; each one still running is stopped after."""
    started: list[Console] = []

    def start(db: str, *options: str) -> Console:
        started.append(start_console(db, *options, ran=ran_file, logs=tmp_path))
        return started[-1]

    yield start
    for one in started:
        if one.process.returncode is None:
            one.stop()


@pytest.fixture
def watch(page: Page) -> Watch:
    """The page's requests and CSP complaints (``helpers.watching``)."""
    return watching(page)
