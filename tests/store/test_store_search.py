"""The text search through its trigram index finds exactly what reading every run finds, and the index keeps up.

"The scan" below is the search without the index (``matching(..., indexed=False)``): the same
``lower(..) LIKE`` on every run, as before migration 0006. On SQLite the index path is checked
to be taken (``search.candidates``); on PostgreSQL the planner is made to take the GIN index.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from datetime import UTC, datetime, timedelta
from itertools import count
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Connection, Engine, delete, insert, select, text

from runner import ScriptedModel, ToolRegistry, run_agent
from runner._run.resume import follow_up
from runner.pool.queued import record_queued
from runner.store import RunFilter, RunStore, open_store, queries, search
from runner.store.engine import make_engine, parse_url
from runner.store.migrate import alembic_config
from runner.store.tables import runs

T0 = datetime(2025, 1, 1, tzinfo=UTC)
SERIAL = count(1)
TEXTS = ["Weather in Paris?", "100%_done", "a/b\\c", 'say "hi"', "İstanbul weather", "Ağir YAĞMUR", "Café ÉTÉ",
         "ΟΔΟΣ ΟΔΟΣΑ", "Straße STRASSE", "ﬁne ligature", "emoji 😀 here", "tab\there\nnewline", "ab", "x", "",
         "aaaa", "ab ab ab", "%%%", "___", "naïve NAÏVE", "it's O'Brien"]
NEEDLES = ["weather", "WEATHER", "0%_", "%", "_", "%_d", "a/b", "/", "\\", "b\\c", '"hi"', '"', "i̇stanbul",
           "İSTANBUL", "istanbul", "ağir", "yağmur", "été", "CAFÉ", "οδος", "ΟΔΟΣ", "οδοσα", "straße", "STRASSE",
           "ß", "ﬁ", "fi", "😀", "😀 h", "\t", "here\nnew", "a", "ab", "aa", "aaa", "aaaaa", "b a", "%%", "__",
           "zanzibar", "naïve", "NAÏ", "x", "é", "'", "o'b", "it's"]
ALPHABET = "aAbBiIİ\u0131\u03a3\u03c3\u03c2\u039f\u03bfßẞéÉ%_/\\\"' \n😀ﬁ"  # dotless i, sigmas, omicrons


def put(store: RunStore, task: str, answer: str | None) -> str:
    """A ``runs`` row written straight to the table (the triggers index it); its id."""
    n = next(SERIAL)
    run_id = f"{n:032x}"
    at = T0 + timedelta(seconds=n)
    with store.engine.begin() as conn:
        conn.execute(insert(runs).values(run_id=run_id, task=task, system="", model="m", status="done",
                                         answer=answer, steps=0, tokens=0, tool_calls=0, limits="{}",
                                         tool_specs="[]", trace_id="0" * 32, started_at=at, updated_at=at))
    return run_id


def scanned(store: RunStore, needle: str) -> list[str]:
    """The runs the search finds reading every run (no index), newest first."""
    with store.reading() as conn:
        query, _ = queries.matching(conn, select(runs.c.run_id), RunFilter(text=needle), indexed=False)
        return list(conn.execute(query.order_by(runs.c.started_at.desc(), runs.c.run_id.desc())).scalars())


def found(store: RunStore, needle: str) -> list[str]:
    return [run.run_id for run in store.list_runs(text=needle, limit=10**6)]


def narrowed(store: RunStore, needle: str) -> list[str] | None:
    """On SQLite, the runs the index says may hold ``needle`` (None: it does not narrow)."""
    with store.reading() as conn:
        return search.candidates(conn, needle)


def same_as_the_scan(store: RunStore, needle: str) -> None:
    expected = scanned(store, needle)
    assert found(store, needle) == expected, needle
    assert store.count_runs(text=needle) == len(expected), needle
    if store.engine.dialect.name == "sqlite" and len(search.sought(needle)) >= 3:
        among = narrowed(store, needle)
        assert among is not None, needle  # the index path was taken
        assert set(expected) <= set(among), needle


def test_the_index_finds_what_the_scan_finds_for_tricky_needles(store: RunStore) -> None:
    for k, task in enumerate(TEXTS):
        put(store, task, TEXTS[-1 - k] if k % 3 else None)
    for needle in NEEDLES:
        same_as_the_scan(store, needle)
    assert found(store, "0%_") == scanned(store, "0%_") != []  # the tricky ones do match something
    assert found(store, "İSTANBUL") != []
    assert found(store, "ΟΔΟΣ") != []


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(st.tuples(st.text(ALPHABET, max_size=12), st.none() | st.text(ALPHABET, max_size=12)),
                      max_size=5),
       needles=st.lists(st.text(ALPHABET, min_size=1, max_size=5), min_size=1, max_size=4))
def test_the_index_finds_what_the_scan_finds_for_any_text(store: RunStore, texts: list[tuple[str, str | None]],
                                                          needles: list[str]) -> None:
    made = [put(store, task, answer) for task, answer in texts]
    try:
        for needle in needles + [task[1:5] for task, _ in texts]:
            if needle:
                same_as_the_scan(store, needle)
    finally:
        with store.engine.begin() as conn:
            conn.execute(delete(runs).where(runs.c.run_id.in_(made)))


def test_text_only_in_a_later_fact_is_found_through_the_index(store: RunStore) -> None:
    answered = run_agent("Plain task", ScriptedModel(["The Quokka answer"]), ToolRegistry(), store=store).run_id
    run_agent("Another task", ScriptedModel(["nothing here"]), ToolRegistry(), store=store)
    assert found(store, "quokka") == [answered]
    if store.engine.dialect.name == "sqlite":
        assert narrowed(store, "quokka") == [answered]  # the answer, from run_finished, is in the index
    with store.engine.begin() as conn:  # an answer changed later is indexed again
        conn.execute(runs.update().where(runs.c.run_id == answered).values(answer="a wombat now"))
    assert found(store, "quokka") == []
    assert found(store, "WOMBAT") == [answered]


def integrity(conn: Connection) -> None:
    """SQLite: FTS5's own check of its index against its text, and one key per run."""
    conn.execute(text("INSERT INTO run_search (run_search) VALUES ('integrity-check')"))
    keys = conn.execute(text("SELECT count(*) FROM run_search_keys")).scalar_one()
    docs = conn.execute(text("SELECT count(*) FROM run_search")).scalar_one()
    assert keys == docs == conn.execute(text("SELECT count(*) FROM runs")).scalar_one()


def test_prune_and_vacuum_keep_the_index_in_step(store: RunStore) -> None:
    old = [run_agent(f"Old kiwi {n}", ScriptedModel([f"answer {n}"]), ToolRegistry(), store=store).run_id
           for n in range(4)]
    kept = run_agent("New kiwi", ScriptedModel(["fine"]), ToolRegistry(), store=store).run_id
    assert sorted(found(store, "kiwi")) == sorted([*old, kept])
    with store.engine.begin() as conn:
        conn.execute(runs.update().where(runs.c.run_id.in_(old)).values(started_at=T0))
    assert sorted(run.run_id for run in store.prune(before=T0 + timedelta(days=1)).runs) == sorted(old)
    assert found(store, "kiwi") == [kept]
    if store.engine.dialect.name != "sqlite":
        return
    with store.engine.begin() as conn:
        integrity(conn)
    # VACUUM may renumber the rowids of ``runs`` (no INTEGER PRIMARY KEY): the index has keys of its own.
    with closing(sqlite3.connect(str(store.url.database))) as db:  # outside any transaction
        db.execute("VACUUM")
    again = run_agent("Kiwi after vacuum", ScriptedModel(["ok"]), ToolRegistry(), store=store).run_id
    assert found(store, "kiwi") == [again, kept]
    assert narrowed(store, "kiwi") is not None
    with store.engine.begin() as conn:
        integrity(conn)


def test_postgresql_serves_a_search_from_the_trigram_index(store: RunStore) -> None:
    if store.engine.dialect.name != "postgresql":
        pytest.skip("PostgreSQL's GIN indexes")
    target = put(store, "The Zanzibar trip", None)
    for n in range(30):
        put(store, f"other task {n}", f"answer {n}")
    with store.engine.begin() as conn:
        conn.execute(text("SET LOCAL enable_seqscan = off"))
        conn.execute(text("SET LOCAL enable_indexscan = off"))
        query, _ = queries.matching(conn, select(runs.c.run_id), RunFilter(text="ZANZIBAR"))
        plan = "\n".join(conn.execute(text("EXPLAIN " + str(query.compile(
            conn, compile_kwargs={"literal_binds": True})))).scalars())
        assert "ix_runs_task_trgm" in plan, plan
        assert "ix_runs_answer_trgm" in plan, plan
        assert list(conn.execute(query).scalars()) == [target]


def upgrade(engine: Engine, target: str) -> None:
    with engine.begin() as conn:
        command.upgrade(alembic_config(conn), target)


def downgrade(engine: Engine, target: str) -> None:
    with engine.begin() as conn:
        command.downgrade(alembic_config(conn), target)


def test_upgrading_a_store_of_0005_indexes_its_runs_and_downgrading_drops_the_index(store_url: str) -> None:
    engine = make_engine(parse_url(store_url))
    try:
        upgrade(engine, "0005")
        with engine.begin() as conn:
            for n, (task, answer) in enumerate([("Find the Quokka", None), ("Say hi", "a QUOKKA said hi"),
                                                ("İstanbul trip", "ok"), ("nothing", None)]):
                conn.execute(text(
                    "INSERT INTO runs (run_id, task, system, model, status, answer, steps, tokens, tool_calls, "
                    "limits, tool_specs, trace_id, started_at, updated_at) VALUES (:id, :task, '', 'm', 'done', "
                    ":answer, 0, 0, 0, '{}', '[]', 'x', :at, :at)"),
                    {"id": f"{n:032x}", "task": task, "answer": answer, "at": T0 + timedelta(hours=n)})
        with open_store(store_url) as store:  # migrates to head: the runs already there are indexed
            assert found(store, "quokka") == [f"{1:032x}", f"{0:032x}"]
            assert found(store, "İSTANBUL") == [f"{2:032x}"]
            if store.engine.dialect.name == "sqlite":
                assert narrowed(store, "quokka") is not None
                with store.engine.begin() as conn:
                    integrity(conn)
        downgrade(engine, "0005")
        with engine.connect() as conn:
            names = set(conn.execute(text(
                "SELECT name FROM sqlite_master" if conn.dialect.name == "sqlite" else
                "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema()")).scalars())
        assert not {name for name in names if "search" in name or "trgm" in name}, names
        upgrade(engine, "head")
        with open_store(store_url) as store:
            assert found(store, "quokka") == [f"{1:032x}", f"{0:032x}"]
    finally:
        engine.dispose()


@pytest.mark.parametrize("filters", [{}, {"status": ("done",)}, {"status": ("done",), "since": T0},
                                     {"tool": "get_weather"}, {"labels": {"env": "prod", "team": "a"}}])
def test_sqlite_reads_only_the_runs_the_index_names_whatever_else_filters(tmp_path: Path,
                                                                          filters: dict[str, Any]) -> None:
    with open_store(tmp_path / "plan.db") as store:
        target = put(store, "A rare Zanzibar task", None)
        with store.reading() as conn:
            query, driver = queries.matching(conn, select(runs.c.run_id), RunFilter(text="zanzibar", **filters))
            query = query.order_by(driver.c.started_at.desc(), driver.c.run_id.desc()).limit(50)
            plan = [row[-1] for row in conn.execute(text("EXPLAIN QUERY PLAN " + str(query.compile(
                conn, compile_kwargs={"literal_binds": True}))))]
        # The candidates drive, each run read by its primary key: no walk of an index over every run.
        assert plan[:2] == ["SCAN among VIRTUAL TABLE INDEX 1:",
                            "SEARCH runs USING INDEX sqlite_autoindex_runs_1 (run_id=?)"], plan
        assert found(store, "zanzibar") == [target]


def test_queued_runs_and_follow_ups_are_in_the_index(store: RunStore) -> None:
    queued = record_queued(store, "Reconcile the Platypus ledger", "job")
    parent = run_agent("Start", ScriptedModel(["first"]), ToolRegistry(), store=store).run_id
    child = follow_up(store, parent, "Now the platypus part", ScriptedModel(["second"]), ToolRegistry()).run_id
    assert found(store, "PLATYPUS") == [child, queued]
    if store.engine.dialect.name == "sqlite":
        assert sorted(narrowed(store, "platypus") or []) == sorted([child, queued])


def test_a_store_read_only_at_0005_is_searched_without_the_index(store_url: str) -> None:
    engine = make_engine(parse_url(store_url))
    try:
        upgrade(engine, "0005")
        with engine.begin() as conn:
            conn.execute(text(
                "INSERT INTO runs (run_id, task, system, model, status, steps, tokens, tool_calls, limits, "
                "tool_specs, trace_id, started_at, updated_at) VALUES ('r1', 'Find the Quokka', '', 'm', 'done', "
                "0, 0, 0, '{}', '[]', 'x', CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"))
        with open_store(store_url, read_only=True) as store:  # read at the revision it is at: no text index
            assert found(store, "quokka") == ["r1"]
            assert store.count_runs(text="zanzibar") == 0
    finally:
        engine.dispose()
