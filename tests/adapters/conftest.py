"""The adapter tests' fixture: none of them can open a real network connection."""

from __future__ import annotations

import pytest

from tests.adapters.helpers import block_network


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    block_network(monkeypatch)
