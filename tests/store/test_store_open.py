"""Opening a store: pragmas, URLs, and one clear StoreError for anything that is not ours."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import sys
import threading
from pathlib import Path

import pytest
from sqlalchemy import create_engine, event, inspect, text
from sqlalchemy.exc import DBAPIError

import runner
from runner import ScriptedModel, StoreError, run_agent
from runner.store import RunStore, open_store
from runner.store.tables import TEXT_INDEX
from tests.loop.helpers import weather_registry


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def siblings(path: Path) -> list[str]:
    return sorted(p.name for p in path.parent.iterdir())


def test_store_error_is_exported_from_runner() -> None:
    assert runner.StoreError is StoreError


def test_sqlite_connections_get_wal_busy_timeout_foreign_keys_and_normal_sync(tmp_path: Path) -> None:
    with open_store(f"sqlite:///{tmp_path / 'runs.db'}") as store, store.engine.connect() as conn:
        values = [conn.exec_driver_sql(f"PRAGMA {name}").scalar()
                  for name in ("journal_mode", "busy_timeout", "foreign_keys", "synchronous")]
    assert values == ["wal", 30000, 1, 1]


@pytest.mark.parametrize("how", ["argument", "url"])
def test_synchronous_full_is_a_documented_setting(tmp_path: Path, how: str) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    store = open_store(url, synchronous="FULL") if how == "argument" else open_store(url + "?synchronous=full")
    with store, store.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 2


def test_bad_synchronous_value_is_a_store_error(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match=r"synchronous must be one of OFF, NORMAL, FULL, EXTRA, got 'SOMETIMES'$"):
        open_store(tmp_path / "runs.db", synchronous="sometimes")


def test_a_path_opens_a_sqlite_file(tmp_path: Path) -> None:
    with open_store(tmp_path / "runs.db") as store:
        assert store.list_runs() == []
    with open_store(str(tmp_path / "runs.db")) as store:
        assert store.list_runs() == []


def test_in_memory_sqlite_works_for_quick_experiments() -> None:
    with open_store("sqlite://") as store:
        result = run_agent("Hi", ScriptedModel(["hello"]), weather_registry(), store=store)
        assert store.get_run(result.run_id).messages == result.messages


def test_writes_take_the_lock_up_front_and_reads_do_not(tmp_path: Path) -> None:
    with open_store(tmp_path / "runs.db") as store:
        sent: list[str] = []

        def trace(dbapi_connection: sqlite3.Connection, _record: object) -> None:
            dbapi_connection.set_trace_callback(
                lambda statement: sent.append(statement) if statement.startswith("BEGIN") else None)

        store.engine.dispose()  # every connection from here on is a traced one
        event.listen(store.engine, "connect", trace)
        run_agent("Hi", ScriptedModel(["hello"]), weather_registry(), store=store)
        store.list_runs()
        event.remove(store.engine, "connect", trace)
    assert sent == ["BEGIN IMMEDIATE", "BEGIN IMMEDIATE", "BEGIN"]


def test_reopening_at_head_needs_no_write_lock(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    open_store(path).close()
    locker = sqlite3.connect(path, isolation_level=None)
    locker.execute("BEGIN IMMEDIATE")  # another process is writing
    try:
        # The lock is held until the end: an open that wanted it would fail when its busy timeout ran out.
        with open_store(path, busy_timeout_s=5) as store:
            assert store.list_runs() == []
    finally:
        locker.execute("ROLLBACK")
        locker.close()


def _writer_mid_transaction_on_a_new_file(path: Path) -> sqlite3.Connection:
    """Another process's connection creating the file: it holds the write lock, the file is not WAL yet."""
    writer = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    writer.execute("BEGIN IMMEDIATE")
    writer.execute("CREATE TABLE scratch (x)")
    return writer


def test_a_new_store_another_writer_is_creating_opens_once_that_writer_is_done(tmp_path: Path) -> None:
    """Switching a new file to WAL needs it to itself; SQLite says "database is locked" at once,
    without its busy handler, while another connection writes. Opening waits, as any write does."""
    path = tmp_path / "runs.db"
    writer = _writer_mid_transaction_on_a_new_file(path)
    done: list[str] = []

    def finish() -> None:
        writer.execute("ROLLBACK")
        done.append("writer finished")

    timer = threading.Timer(0.3, finish)
    timer.start()
    try:
        with open_store(path, busy_timeout_s=10) as store:
            done.append("store opened")
            result = run_agent("t", ScriptedModel(["hi"]), weather_registry(), store=store)
            assert store.get_run(result.run_id).status == "done"
    finally:
        timer.join()
        writer.close()
    assert done == ["writer finished", "store opened"]
    assert sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone() == ("wal",)


def test_a_writer_holding_a_new_file_past_the_busy_timeout_is_one_store_error(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    writer = _writer_mid_transaction_on_a_new_file(path)
    try:
        with pytest.raises(StoreError, match=rf"^cannot migrate store sqlite:///{path}: database is locked$"):
            open_store(path, busy_timeout_s=0.2)
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    with open_store(path) as store:  # nothing was left half-made: the file opens as a new store
        assert store.list_runs() == []


def test_a_foreign_sqlite_file_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
    db.execute("INSERT INTO invoices VALUES (1, 9.5)")
    db.commit()
    db.close()
    before, files = digest(path), siblings(path)
    with pytest.raises(StoreError, match=r"it is not a runner store \(it holds other tables: invoices, "
                                         r"and no alembic_version\)$"):
        open_store(path)
    assert (digest(path), siblings(path)) == (before, files)


def test_a_corrupt_file_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    path.write_bytes(os.urandom(8192))
    before = digest(path)
    with pytest.raises(StoreError, match=r"runs.db is not a SQLite database$"):
        open_store(path)
    assert (digest(path), siblings(path)) == (before, ["runs.db"])


def test_a_file_with_a_sqlite_header_but_garbage_pages_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    path.write_bytes(b"SQLite format 3\x00" + os.urandom(8192))
    before = digest(path)
    with pytest.raises(StoreError, match=r"runs.db is unreadable or corrupt: "):
        open_store(path)
    assert (digest(path), siblings(path)) == (before, ["runs.db"])


def test_a_database_from_a_newer_schema_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    open_store(path).close()
    db = sqlite3.connect(path)
    db.execute("UPDATE alembic_version SET version_num = '9999_future'")
    db.commit()
    db.close()
    before = digest(path)
    with pytest.raises(StoreError, match=r"its schema is at revision 9999_future, unknown to this runner "
                                         r"\(head 0008\); upgrade durable-agent-runner$"):
        open_store(path)
    assert digest(path) == before


def test_a_newer_schema_is_refused_on_every_backend(store: RunStore, store_url: str) -> None:
    with store.engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '9999_future'"))
    store.close()
    with pytest.raises(StoreError, match=r"its schema is at revision 9999_future"):
        open_store(store_url)


@pytest.mark.parametrize(("url", "message"), [
    ("nosuchdb://host/x", r"^cannot open store nosuchdb://host/x: unsupported backend 'nosuchdb'"),
    ("mysql://host/x", r"^cannot open store mysql://host/x: unsupported backend 'mysql'"),
    ("postgresql+nosuchdriver://h/x", r"^cannot open store postgresql\+nosuchdriver://h/x: NoSuchModuleError: "),
    ("://", r"^cannot open store: bad URL '://'"),
    ("", r"^cannot open store: empty URL"),
])
def test_a_bad_url_is_a_store_error(url: str, message: str) -> None:
    with pytest.raises(StoreError, match=message):
        open_store(url)


@pytest.mark.parametrize(("url", "message"), [
    ("sqlite:///x.db?timeout=abc", r"^cannot open store sqlite:///x.db\?timeout=abc: ValueError: could not convert "
                                   r"string to float: 'abc'$"),
    ("sqlite:///%00", r"^cannot open store '\\x00': a file name cannot hold a NUL character$"),
    ("a\x00b.db", r"^cannot open store 'a\\x00b.db': a file name cannot hold a NUL character$"),
    ("postgresql+psycopg://bob:s3cret@[::1:5432/test",
     r"^cannot open store: bad URL 'postgresql\+psycopg://bob:\*\*\*@\[::1:5432/test': invalid literal for "
     r"int\(\) with base 10: ':1:5432'$"),
    ("postgresql+psycopg://bob:s3cret@db:abc/x",
     r"^cannot open store: bad URL 'postgresql\+psycopg://bob:\*\*\*@db:abc/x': invalid literal for int\(\) "
     r"with base 10: 'abc'$"),
])
@pytest.mark.parametrize("read_only", [False, True])
def test_a_url_the_driver_refuses_is_one_store_error_that_never_shows_a_password(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, url: str, message: str, read_only: bool) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StoreError, match=message):  # each was a bare ValueError
        open_store(url, read_only=read_only)
    assert list(tmp_path.iterdir()) == []


def test_a_sqlite_uri_filename_is_refused_and_the_file_it_names_left_untouched(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    app = tmp_path / "app.db"
    with sqlite3.connect(app) as conn:
        conn.execute("CREATE TABLE invoices (id INTEGER)")
    before = digest(app)
    for url in ("sqlite:///file:app.db?uri=true", f"sqlite:///file:{app}?mode=rw&uri=true"):
        with pytest.raises(StoreError, match=r": SQLite URI filenames \(uri=true\) are not supported; give the "
                                             r"file's path, as in sqlite:///path/to/runs.db$"):
            open_store(url)  # its checks read a file named 'file:app.db'; the driver would migrate app.db
    assert (digest(app), siblings(app)) == (before, ["app.db"])


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_is_refused_at_once_instead_of_blocking_for_ever(tmp_path: Path) -> None:
    fifo = tmp_path / "runs.db"
    os.mkfifo(fifo)
    for read_only in (False, True):
        with pytest.raises(StoreError, match=rf"^cannot open store sqlite:///{fifo}: {fifo} is not a regular file$"):
            open_store(f"sqlite:///{fifo}", read_only=read_only)


def test_a_missing_directory_is_a_store_error(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match=r"directory .*nowhere does not exist$"):
        open_store(tmp_path / "nowhere" / "runs.db")
    assert not (tmp_path / "nowhere").exists()


def test_an_unreachable_server_is_one_store_error_line() -> None:
    with pytest.raises(StoreError) as caught:
        open_store("postgresql+psycopg://postgres:secret@127.0.0.1:9/test")
    message = str(caught.value)
    assert message.startswith("cannot open store postgresql+psycopg://postgres:***@127.0.0.1:9/test: ")
    assert "\n" not in message
    assert "secret" not in message


@pytest.mark.parametrize("statement", ["UPDATE events SET kind = 'edited'", "DELETE FROM events"])
def test_events_cannot_be_updated_or_deleted(store: RunStore, statement: str) -> None:
    result = run_agent("Hi", ScriptedModel(["hello"]), weather_registry(), store=store)
    with pytest.raises(DBAPIError, match=r"events are append-only: (UPDATE|DELETE) is not allowed"), \
            store.engine.begin() as conn:
        conn.execute(text(statement))
    assert [e.kind for e in store.get_run(result.run_id).events][-1] == "run_finished"


def test_events_must_belong_to_a_run(store: RunStore) -> None:
    with pytest.raises(DBAPIError), store.engine.begin() as conn:
        conn.execute(text("INSERT INTO events (run_id, seq, at, step, kind, data) "
                          "VALUES ('nope', 1, CURRENT_TIMESTAMP, 0, 'message', '{}')"))


def tables_of(url: str) -> list[str]:
    engine = create_engine(url)
    try:
        return sorted(name for name in inspect(engine).get_table_names() if name not in TEXT_INDEX)
    finally:
        engine.dispose()


def foreign_database(url: str, *statements: str) -> None:
    """Another application's database, built with a plain engine (no runner pragmas)."""
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            for statement in statements:
                conn.execute(text(statement))
    finally:
        engine.dispose()


ALEMBIC_VERSION = "CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL PRIMARY KEY)"


def test_a_foreign_database_with_an_empty_alembic_version_is_refused_untouched(store_url: str) -> None:
    foreign_database(store_url, ALEMBIC_VERSION, "CREATE TABLE invoices (id INTEGER PRIMARY KEY)")
    with pytest.raises(StoreError, match=r"^cannot open store .*: it is not a runner store \(its alembic_version "
                                         r"is empty and it holds other tables: invoices\)$"):
        open_store(store_url)
    assert tables_of(store_url) == ["alembic_version", "invoices"]


def test_a_foreign_alembic_database_is_not_a_runner_store(store_url: str) -> None:
    foreign_database(store_url, ALEMBIC_VERSION, "INSERT INTO alembic_version VALUES ('ae1027a6acf')",
                     "CREATE TABLE invoices (id INTEGER PRIMARY KEY)")
    with pytest.raises(StoreError, match=r"^cannot open store .*: it is not a runner store \(its alembic_version "
                                         r"holds revision 'ae1027a6acf', which is not ours\)$"):
        open_store(store_url)
    assert tables_of(store_url) == ["alembic_version", "invoices"]


def test_other_tables_without_alembic_version_are_refused_on_every_backend(store_url: str) -> None:
    foreign_database(store_url, "CREATE TABLE invoices (id INTEGER PRIMARY KEY)")
    with pytest.raises(StoreError, match=r"^cannot open store .*: it is not a runner store \(it holds other "
                                         r"tables: invoices, and no alembic_version\)$"):
        open_store(store_url)
    assert tables_of(store_url) == ["invoices"]


def test_an_empty_alembic_version_alone_is_initialised(store_url: str) -> None:
    foreign_database(store_url, ALEMBIC_VERSION)  # e.g. our own store after `alembic downgrade base`
    open_store(store_url).close()
    assert tables_of(store_url) == ["alembic_version", "events", "rollup_minutes", "rollups", "run_cancels",
                                    "run_deletions", "run_labels", "run_tools", "runs"]


def test_a_missing_postgres_driver_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(StoreError) as caught:
        open_store("postgresql+psycopg://user@127.0.0.1:9/db")
    assert str(caught.value) == ("cannot open store postgresql+psycopg://user@127.0.0.1:9/db: the PostgreSQL "
                                 "driver is not installed: pip install 'durable-agent-runner[postgres]'")


@pytest.mark.parametrize("verb", ["INSERT OR REPLACE", "REPLACE"])
def test_events_cannot_be_replaced_on_sqlite(tmp_path: Path, verb: str) -> None:
    with open_store(tmp_path / "runs.db") as store:
        result = run_agent("Hi", ScriptedModel(["hello"]), weather_registry(), store=store)
        before = store.get_run(result.run_id).events
        with pytest.raises(DBAPIError, match=r"events are append-only: event \(run_id, seq\) already exists"), \
                store.engine.begin() as conn:
            conn.execute(text(f"{verb} INTO events (run_id, seq, at, step, kind, data) "
                              "VALUES (:run_id, 1, CURRENT_TIMESTAMP, 0, 'forged', '{}')"), {"run_id": result.run_id})
        assert store.get_run(result.run_id).events == before


def test_an_upsert_over_an_event_is_refused(store: RunStore) -> None:
    result = run_agent("Hi", ScriptedModel(["hello"]), weather_registry(), store=store)
    before = store.get_run(result.run_id).events
    refused = r"events are append-only: (UPDATE is not allowed|event \(run_id, seq\) already exists)"
    with pytest.raises(DBAPIError, match=refused), store.engine.begin() as conn:
        conn.execute(text("INSERT INTO events (run_id, seq, at, step, kind, data) "
                          "VALUES (:run_id, 1, CURRENT_TIMESTAMP, 0, 'forged', '{}') "
                          "ON CONFLICT (run_id, seq) DO UPDATE SET kind = excluded.kind"), {"run_id": result.run_id})
    assert store.get_run(result.run_id).events == before


def test_a_duplicate_event_is_refused(store: RunStore) -> None:
    result = run_agent("Hi", ScriptedModel(["hello"]), weather_registry(), store=store)
    with pytest.raises(DBAPIError, match=r"events are append-only: event \(run_id, seq\) already exists|"
                                         r"duplicate key value violates unique constraint \"pk_events\""), \
            store.engine.begin() as conn:
        conn.execute(text("INSERT INTO events (run_id, seq, at, step, kind, data) "
                          "VALUES (:run_id, 1, CURRENT_TIMESTAMP, 0, 'forged', '{}')"), {"run_id": result.run_id})
