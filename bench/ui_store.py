"""The store `bench/ui.py` measures the console on: a few real runs, multiplied to 100,000 in bulk SQL.

The real runs are recorded through ``run_agent`` with scripted models: one run of 200
model calls (each with one tool call), and small ones ending every common way (done,
a tool error, a refused call, denied and approved payments, step and token limits, a
model error, cancelled, three awaiting approval), with labels and five tools. Then
``INSERT ... SELECT`` copies the small ones' ``runs``, ``events``, ``run_labels`` and
``run_tools`` rows under new run ids, each copy started further back in time, into the
schema ``open_store`` migrated (its indexes and triggers in place), and adds the copies' share
of the stats' rollups from their templates' own (``copies_rollups``). The 200-step run
carries the label ``bench=long``, which is how a store this module built is recognised.
"""

from __future__ import annotations

import random
import sqlite3
import threading
import uuid
from collections.abc import Callable, Sequence
from contextlib import closing
from typing import NamedTuple

from sqlalchemy import Connection, create_engine, select, text
from sqlalchemy.engine import make_url

from runner import (
    Limits,
    Message,
    Model,
    ModelReply,
    RunOptions,
    ScriptedModel,
    ToolCall,
    ToolRegistry,
    ToolSpec,
    Usage,
    run_agent,
)
from runner._log.tally import FIELDS
from runner.store import RunStore, open_store, rollups
from runner.store.tables import events, run_labels, run_tools, runs

LONG_STEPS = 200
LONG_LABEL = ("bench", "long")
CITIES = ("Paris", "Oslo", "Lima", "Kyoto", "Accra", "Perth", "Quito", "Hanoi")
PRICES = {"scripted": {"input_mtok": 0.15, "output_mtok": 0.6}}  # so the runs have a cost to show
SPREAD_S = 30 * 86400  # the copies' start times go this far back
COPIED = (runs, events, run_labels, run_tools)  # every column of theirs is copied, as it is unless named here:
SET = {"run_id": "id", "trace_id": "id",  # the copy's new run id
       "started_at": "at", "updated_at": "at", "heartbeat_at": "at", "finished_at": "at", "at": "at",  # moved back
       "task": "text", "answer": "text", "data": "text"}  # the run id in them replaced, and the city varied


class Template(NamedTuple):
    """A small real run and its share of the copies (out of the weights' sum)."""

    run_id: str
    weight: int


class Built(NamedTuple):
    """The store's runs: the 200-step run's id and how many runs there are in all."""

    long_run: str
    runs: int


def tools() -> ToolRegistry:
    """Five tools: weather, currency, a docs search that always fails, echo, and a payment needing approval."""
    reg = ToolRegistry()
    city = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    money = {"type": "object", "properties": {"amount": {"type": "number"}, "to": {"type": "string"}},
             "required": ["amount", "to"]}
    query = {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}
    number = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    reg.register("get_weather", "Current weather in a city.", city,
                 lambda city: {"city": city, "temp_c": 21, "sky": "clear"})
    reg.register("convert_currency", "Convert euros to another currency.", money,
                 lambda amount, to: {"amount": round(amount * 1.08, 2), "currency": to})
    reg.register("search_docs", "Search the help centre.", query, search_docs)
    reg.register("echo", "Echo a number.", number, lambda n: {"n": n})
    reg.register("pay", "Pay an amount to someone.", money, lambda amount, to: {"paid": amount, "to": to},
                 side_effects=True, needs_approval=True)
    return reg


def search_docs(query: str) -> str:
    """A tool that fails: its call ends in an error observation."""
    raise TimeoutError(f"help centre unreachable while searching {query!r}")


def say(content: str, *calls: tuple[str, str, dict[str, object]], tokens: int = 400) -> ModelReply:
    """A scripted reply with token usage; each call is (call id, tool, arguments)."""
    return ModelReply(content, [ToolCall(i, name, args) for i, name, args in calls], Usage(tokens, tokens // 8))


def failing_model(messages: Sequence[Message], specs: Sequence[ToolSpec]) -> ModelReply:
    """A model whose provider is down."""
    raise ConnectionError("api.example.com: connection refused")


def record_long(store: RunStore, reg: ToolRegistry) -> str:
    """The 200-step run: 200 model calls, each calling ``echo`` once; it ends at its step limit."""
    replies = [say(f"Counting, step {i}.", (f"c{i}", "echo", {"n": i}), tokens=300 + 40 * i)
               for i in range(LONG_STEPS)]
    result = run_agent("Count to two hundred, one tool call a step.", ScriptedModel(replies), reg,
                       max_steps=LONG_STEPS, token_budget=10**9, max_identical_calls=LONG_STEPS, store=store,
                       prices=PRICES, labels=dict([LONG_LABEL, ("env", "prod")]))
    return result.run_id


class Planned(NamedTuple):
    """A small run to record: its task, model, labels, other options, and its weight among the copies."""

    task: str
    model: Model
    labels: dict[str, str]
    options: RunOptions
    weight: int


def scripted(*replies: ModelReply | str) -> ScriptedModel:
    """A scripted model of these replies."""
    return ScriptedModel(replies)


def small_runs() -> list[Planned]:
    """Every common way a run ends, with labels and tools; the weights sum to 99 (the 100th: awaiting)."""
    weather = scripted(say("", ("c1", "get_weather", {"city": "Paris"})), "It is 21 °C and clear in Paris.")
    counting = scripted(*[say(f"step {i}", (f"c{i}", "echo", {"n": i})) for i in range(7)], "Counted to seven.")
    stop = threading.Event()
    stop.set()
    prod, dev = {"env": "prod"}, {"env": "dev"}
    return [
        Planned("What is the weather in Paris?", weather, {**prod, "team": "travel"}, {}, 30),
        Planned("Convert 12 EUR to USD", scripted(say("", ("c1", "convert_currency", {"amount": 12, "to": "USD"})),
                                                  "12 EUR is 12.96 USD."), dev, {}, 20),
        Planned("Find our refund policy", scripted(say("", ("c1", "search_docs", {"query": "refund policy"})),
                                                   "The help centre is down; try again later."),
                {**prod, "team": "support"}, {}, 10),
        Planned("Count to seven", counting, dev, {}, 10),
        Planned("Count forever", scripted(*[say("", (f"c{i}", "echo", {"n": i})) for i in range(3)]), dev,
                {"limits": Limits(max_steps=3)}, 8),
        Planned("Weather, at any cost", scripted(say("", ("c1", "get_weather", {"city": "Paris"}), tokens=6000),
                                                 "Sunny."), prod, {"limits": Limits(token_budget=4000)}, 5),
        Planned("Summarise ticket #4521", failing_model, {**prod, "team": "support"}, {}, 5),
        Planned("Clean up the disk", scripted(say("", ("c1", "delete_everything", {})),
                                              "I cannot do that; there is no such tool."), dev, {}, 4),
        Planned("Pay 9000 to whoever asks", scripted(say("", ("c1", "pay", {"amount": 9000, "to": "unknown"})),
                                                     "The payment was denied."),
                {**prod, "team": "billing"}, {"approve": lambda call: False}, 3),
        Planned("Pay invoice 42 to ACME Ltd", scripted(say("", ("c1", "pay", {"amount": 120, "to": "ACME Ltd"})),
                                                       "Paid invoice 42."),
                {**prod, "team": "billing"}, {"approve": lambda call: True}, 3),
        Planned("Plan a trip to Paris", weather, {**dev, "team": "travel"}, {"cancel": stop}, 1),
    ]


def record_small(store: RunStore, reg: ToolRegistry) -> list[Template]:
    """The small runs, then three awaiting approval (only the first is copied), each with its weight."""
    made = []
    for p in small_runs():
        options: RunOptions = {**p.options, "store": store, "labels": p.labels, "prices": PRICES}
        made.append(Template(run_agent(p.task, p.model, reg, **options).run_id, p.weight))
    for n, amount in enumerate((120, 75, 4300)):
        waiting = scripted(say("", ("c1", "pay", {"amount": amount, "to": f"supplier {n}"})))
        run_id = run_agent(f"Pay invoice {43 + n}", waiting, reg, store=store, prices=PRICES,
                           labels={"env": "prod", "team": "billing"}).run_id
        made.append(Template(run_id, 1 if n == 0 else 0))
    return made


def copied(dialect: str, column: str, how: str) -> str:
    """SQL for a copy's ``column`` from the template row ``t`` and its line ``c`` in ``bench_copies``."""
    if how == "id":
        return "c.new_id"
    if how == "text":  # the run id inside the text too (run_started names it), and the city varied
        return f"replace(replace(t.{column}, c.template_id, c.new_id), 'Paris', c.city)"
    if how != "at":
        return f"t.{column}"
    if dialect == "sqlite":  # 'YYYY-MM-DD HH:MM:SS.ffffff': datetime() drops the fraction, so keep it aside
        return f"datetime(t.{column}, '-' || c.shift_s || ' seconds') || substr(t.{column}, 20)"
    return f"t.{column} - c.shift_s * interval '1 second'"


def copy_rows(conn: Connection, templates: list[Template], count: int, seed: int = 22) -> None:
    """``count`` copies of the templates (by weight) under new run ids, one ``INSERT ... SELECT`` a table.

    Each copy starts ``SPREAD_S / count`` seconds before the one before it; the rows go in the order
    of the primary key, so the inserts append to its index rather than land all over it. On PostgreSQL
    they go in as a replica's would (``session_replication_role``): copies of rows that hold need no
    foreign key checked, and their ``status`` rollups are added with the rest, not by a trigger a row.
    """
    rng = random.Random(seed)
    picks = rng.choices([t.run_id for t in templates], [t.weight for t in templates], k=count)
    step = max(SPREAD_S // max(count, 1), 1)
    conn.execute(text("CREATE TEMPORARY TABLE bench_copies (template_id VARCHAR(64), new_id VARCHAR(64), "
                      "shift_s INTEGER, city VARCHAR(32))"))
    mapping = [{"t": pick, "n": uuid.UUID(int=rng.getrandbits(128), version=4).hex, "s": (k + 1) * step,
                "c": CITIES[k % len(CITIES)]} for k, pick in enumerate(picks)]
    conn.execute(text("INSERT INTO bench_copies VALUES (:t, :n, :s, :c)"), mapping)
    pg = conn.dialect.name == "postgresql"
    if pg:  # no foreign key checks, no triggers: row by row they took most of an hour at 1,000,000 runs
        conn.execute(text("SET LOCAL session_replication_role = replica"))
    for table in COPIED:
        columns = [column.name for column in table.c]
        values = ", ".join(copied(conn.dialect.name, name, SET.get(name, "")) for name in columns)
        order = "c.new_id, t.seq" if table is events else "c.new_id"
        conn.execute(text(f"INSERT INTO {table.name} ({', '.join(columns)}) SELECT {values} "
                          f"FROM bench_copies c JOIN {table.name} t ON t.run_id = c.template_id ORDER BY {order}"))
    if pg:
        conn.execute(text("SET LOCAL session_replication_role = origin"))
    copies_rollups(conn, templates, statuses=pg)
    conn.execute(text("DROP TABLE bench_copies"))


def copies_rollups(conn: Connection, templates: list[Template], *, statuses: bool) -> None:
    """The copies' share of the stats' rollups: each template's own rows, added once a copy in the copy's period.

    A copy's facts are its template's at times shifted alike, so it adds up to what its template does, in
    its own minute: each template is scanned once (``rollups.scan``), never the copies' logs (``rollups.refill``
    took hours at 1,000,000 runs). ``statuses``: with the ``status`` rows (else the triggers on ``runs`` added them).
    """
    figures = ", ".join(FIELDS)
    conn.execute(text("CREATE TEMPORARY TABLE bench_shares (template_id VARCHAR(64), kind VARCHAR(16), "
                      "name VARCHAR(200), bucket INTEGER, " + ", ".join(f"{f} BIGINT" for f in FIELDS) + ")"))
    shares = [{"template_id": t.run_id, **row.key._asdict(), **row.figures._asdict()} for t in templates
              for row in rollups.scan(conn, select(runs.c.run_id).where(runs.c.run_id == t.run_id), statuses=statuses)]
    if shares:
        conn.execute(text(f"INSERT INTO bench_shares (template_id, kind, name, bucket, {figures}) VALUES "
                          f"(:template_id, :kind, :name, :bucket, {', '.join(':' + f for f in FIELDS)})"), shares)
    started = copied(conn.dialect.name, "started_at", "at")  # the copy's start, from its template's
    for period in rollups.PERIODS:
        table = period.table.name
        start = rollups.start_sql(conn.dialect.name, started, period).replace(":", "\\:")  # not a parameter
        conn.execute(text(
            f"INSERT INTO {table} ({', '.join(rollups.KEY)}, {figures}) "
            f"SELECT {start}, s.kind, s.name, s.bucket, " + ", ".join(f"sum(s.{f})" for f in FIELDS)
            + " FROM bench_copies c JOIN runs t ON t.run_id = c.template_id "
            "JOIN bench_shares s ON s.template_id = c.template_id GROUP BY 1, 2, 3, 4 "
            f"ON CONFLICT ({', '.join(rollups.KEY)}) DO UPDATE SET "
            + ", ".join(f"{f} = {table}.{f} + excluded.{f}" for f in FIELDS)))
    conn.execute(text("DROP TABLE bench_shares"))


def build(store: RunStore, runs: int) -> Built:
    """Record the real runs into ``store`` (empty), then copy the small ones until it holds ``runs`` runs."""
    reg = tools()
    long_run = record_long(store, reg)
    templates = record_small(store, reg)
    copies = max(runs - 1 - len(templates), 0)
    with store.engine.begin() as conn:
        copy_rows(conn, templates, copies)
    # A store in its steady state, not one fresh from a bulk load: PostgreSQL's autovacuum would
    # analyze the tables soon; SQLite's write-ahead log goes back into the file.
    if store.engine.dialect.name == "sqlite":
        with closing(sqlite3.connect(store.url.database or "")) as db:  # outside any transaction
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    else:
        with store.engine.begin() as conn:
            conn.execute(text("ANALYZE"))
    return Built(long_run, store.count_runs())


def store_bytes(store: RunStore) -> int:
    """The bytes the store takes: the SQLite file's pages, or the tables of the PostgreSQL schema with indexes."""
    with store.engine.connect() as conn:
        if conn.dialect.name == "sqlite":
            pages = conn.execute(text("PRAGMA page_count")).scalar_one()
            return int(pages) * int(conn.execute(text("PRAGMA page_size")).scalar_one())
        return int(conn.execute(text(
            "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = current_schema() AND c.relkind = 'r'")).scalar_one())


def built_before(store: RunStore) -> Built | None:
    """The store's runs when this module built it (its 200-step run is labelled), else None."""
    found = store.list_runs(label=LONG_LABEL, limit=1)
    return Built(found[0].run_id, store.count_runs()) if found else None


def scratch_pg(url: str) -> tuple[RunStore, Callable[[], None]]:
    """A store in a new schema of the PostgreSQL database at ``url``, and how to drop it."""
    admin = create_engine(url, isolation_level="AUTOCOMMIT")
    schema = f"runner_bench_ui_{uuid.uuid4().hex[:8]}"
    with admin.connect() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    store = open_store(make_url(url).update_query_dict({"options": f"-csearch_path={schema}"}))

    def drop() -> None:
        store.close()
        with admin.connect() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()

    return store, drop
