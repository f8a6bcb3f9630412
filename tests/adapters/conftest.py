"""The adapter tests' fixtures: none of them can open a real network connection; local SSE servers."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.adapters.helpers import block_network
from tests.adapters.sse import Serve, servers


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    block_network(monkeypatch)


@pytest.fixture
def serve() -> Iterator[Serve]:
    """``serve(*scripts, chunked=True)`` -> a running SSEServer on 127.0.0.1; stopped after the test."""
    yield from servers()
