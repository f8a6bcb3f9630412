"""Shared store fixtures: a real SQLite file always, PostgreSQL when RUNNER_TEST_PG_URL is set.

Each PostgreSQL test gets its own schema, named after this session's random
prefix and selected through ``search_path``; the schemas are dropped after the
test and any left over are dropped at the end of the session.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest
from hypothesis import settings
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.engine import make_url

from runner.store import RunStore, open_store
from tests.tracing.helpers import Receiver

# No per-example deadline: it is a wall-clock assertion, which fails on a loaded machine, not on slow code.
settings.register_profile("runner", deadline=None)
settings.load_profile("runner")

PG_URL = os.environ.get("RUNNER_TEST_PG_URL")
SESSION_PREFIX = f"runner_test_{uuid.uuid4().hex[:10]}"

BACKENDS = [pytest.param("sqlite", id="sqlite")]
if PG_URL:
    BACKENDS.append(pytest.param("postgresql", id="postgresql", marks=pytest.mark.postgres))


PG_LEFT_OUT = pytest.StashKey[int]()


@pytest.hookimpl(trylast=True)  # after -k and -m have deselected theirs
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Without RUNNER_TEST_PG_URL, count the PostgreSQL variants ``store_url`` did not generate."""
    if not PG_URL:
        config.stash[PG_LEFT_OUT] = sum(1 for item in items if _backend(item) == "sqlite")


def _backend(item: pytest.Item) -> object:
    callspec = getattr(item, "callspec", None)
    return callspec.params.get("store_url") if callspec is not None else None


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    """Say in one line how many PostgreSQL variants were left out (they are never collected, so not skipped)."""
    left_out = config.stash.get(PG_LEFT_OUT, 0)
    if left_out:
        terminalreporter.write_line(f"SKIPPED [{left_out}] PostgreSQL variants not collected: "
                                    "RUNNER_TEST_PG_URL is not set")


@pytest.fixture(scope="session")
def pg_admin() -> Iterator[Engine]:
    """An engine on RUNNER_TEST_PG_URL's default schema, for creating and dropping test schemas."""
    if not PG_URL:
        pytest.skip("RUNNER_TEST_PG_URL is not set")
    engine = create_engine(PG_URL, isolation_level="AUTOCOMMIT")
    yield engine
    with engine.connect() as conn:
        leftovers = conn.execute(text("SELECT nspname FROM pg_namespace WHERE nspname LIKE :p"),
                                 {"p": SESSION_PREFIX + "%"}).scalars().all()
        for schema in leftovers:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
    engine.dispose()


def pg_schema_url(admin: Engine, schema: str) -> str:
    """Create ``schema`` and return RUNNER_TEST_PG_URL with its search_path set to it."""
    assert PG_URL is not None
    with admin.connect() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    url = make_url(PG_URL).update_query_dict({"options": f"-csearch_path={schema}"})
    return url.render_as_string(hide_password=False)


def drop_pg_schema(admin: Engine, schema: str) -> None:
    with admin.connect() as conn:
        conn.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path: os.PathLike[str]) -> Iterator[str]:
    """A URL for an empty store: a SQLite file, or a fresh PostgreSQL schema."""
    if request.param == "sqlite":
        yield f"sqlite:///{os.path.join(tmp_path, 'runs.db')}"
        return
    admin: Engine = request.getfixturevalue("pg_admin")
    schema = f"{SESSION_PREFIX}_{uuid.uuid4().hex[:8]}"
    url = pg_schema_url(admin, schema)
    yield url
    drop_pg_schema(admin, schema)


@pytest.fixture
def store(store_url: str) -> Iterator[RunStore]:
    """An open, migrated store on each backend; closed after the test."""
    opened = open_store(store_url)
    yield opened
    opened.close()


@pytest.fixture
def live() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    """An injected tracer provider (never the global one) and the exporter holding its finished spans."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Iterator[Receiver]:
    """A real OTLP/HTTP receiver that the standard environment names as the endpoint (for child processes too)."""
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
