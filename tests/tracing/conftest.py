"""The tracing tests' fixture: a real OTLP/HTTP receiver that the standard environment names as the endpoint."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.tracing.helpers import Receiver


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Iterator[Receiver]:
    rec = Receiver()
    rec.thread.start()
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rec.url)
    monkeypatch.setenv("OTEL_SERVICE_NAME", "otlp-test")
    yield rec
    rec.server.shutdown()
    rec.server.server_close()
