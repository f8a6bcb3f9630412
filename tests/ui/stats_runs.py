"""Runs for the stats page's tests and screenshot: a week of them, two priced models and one unpriced, a tool that
fails, one that waits for approval, labels, and on request a tool and a label whose names are markup.

Each run is recorded by ``run_agent`` with a scripted model, then its start is moved to its day and the
stats' rollups are worked out again (as ``tests/cli/helpers.record`` does).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

from sqlalchemy import update

from runner import ModelReply, ScriptedModel, ToolCall, ToolRegistry, Usage, open_store, run_agent
from runner.store import RunStore, rollups
from runner.store.tables import runs

START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)  # the first day's runs start at 9:00 UTC, an hour apart
DAYS = 7
PARAMS = {"type": "object", "properties": {"ref": {"type": "string"}}, "required": ["ref"]}
PRICES = {"gpt-4o-mini": {"input_mtok": 0.15, "output_mtok": 0.6}, "claude-haiku": {"input_mtok": 0.8,
                                                                                   "output_mtok": 4.0}}
XSS = "<img src=x onerror=window.__x=1>"
"""A tool's name and a label's value that run script on a page that does not escape them."""


class Model(NamedTuple):
    """A model the runs use: its provider and name (``provider:name`` in the stats)."""

    provider: str
    name: str


MINI, HAIKU, LOCAL = Model("openai", "gpt-4o-mini"), Model("anthropic", "claude-haiku"), Model("local", "llama")


def tools(slow: bool = False) -> ToolRegistry:
    """``search``, ``fetch`` (fails for ``bad``), ``calc``, ``transfer`` (needs approval) and the markup-named tool.

    ``slow``: each takes a little while (0.02 to 0.3 s), for a picture whose latencies differ.
    """
    def taking(seconds: float, answer: Callable[[str], str]) -> Callable[[str], str]:
        def tool(ref: str) -> str:
            if slow:
                time.sleep(seconds)
            return answer(ref)
        return tool

    def fetch(ref: str) -> str:
        if ref == "bad":
            raise ConnectionError("the page did not answer")
        return f"page {ref}"

    registry = ToolRegistry()
    registry.register("search", "Search the web.", PARAMS, taking(0.3, lambda ref: f"results for {ref}"))
    registry.register("fetch", "Fetch a page.", PARAMS, taking(0.08, fetch))
    registry.register("calc", "Work a sum out.", PARAMS, taking(0.0, lambda ref: "42"))
    registry.register("transfer", "Move money.", PARAMS, taking(0.0, lambda ref: "sent"), side_effects=True,
                      needs_approval=True)
    registry.register(XSS, "A tool with markup for a name.", PARAMS, taking(0.02, lambda ref: "ran"))
    return registry


def asks(tool: str, ref: str, tokens: int | None = 900) -> ModelReply:
    """A reply that calls ``tool``; ``tokens`` None reports no usage (its cost is unknown)."""
    return ModelReply("", [ToolCall(f"call-{ref}", tool, {"ref": ref})], None if tokens is None else Usage(tokens, 60))


def says(text: str, tokens: int | None = 1200) -> ModelReply:
    return ModelReply(text, [], None if tokens is None else Usage(tokens, 120))


class Kind(NamedTuple):
    """A kind of run: its task, its model, its script, its labels and its options."""

    task: str
    model: Model
    script: list[ModelReply]
    labels: dict[str, str]
    options: dict[str, Any]


KINDS = [
    Kind("Search for flights", MINI, [asks("search", "flights"), says("Found three.")], {"env": "prod"}, {}),
    Kind("Fetch a broken page", HAIKU, [asks("fetch", "bad"), says("It did not answer.")],
         {"env": "prod", "team": "web"}, {}),
    Kind("Add the invoices up", MINI, [asks("calc", "1+1"), asks("fetch", "ok"), says("42")], {"env": "dev"}, {}),
    Kind("Keep searching", LOCAL, [asks("search", "hotels", None), asks("search", "more", None)], {"env": "dev"},
         {"max_steps": 1}),
    Kind("Refund the order", MINI, [asks("transfer", "order-1042")], {"env": "prod", "team": "support"}, {}),
    Kind("A model that fails", HAIKU, [], {"env": "prod"}, {}),
]


def record(store: RunStore, kind: Kind, slow: bool = False) -> str:
    """A run of ``kind``, its id."""
    model = ScriptedModel(kind.script)
    model.model_name, model.provider_name = kind.model.name, kind.model.provider
    return run_agent(kind.task, model, tools(slow), store=store, labels=kind.labels, prices=PRICES,
                     **kind.options).run_id


def fill_stats(url: str, start: datetime = START, xss: bool = False, slow: bool = False) -> list[str]:
    """A week of runs from ``start``'s day (2 to 5 a day, an hour apart), their ids; ``xss`` adds a run on the
    last day that calls the markup-named tool and carries that name as its ``team`` label."""
    started: dict[str, datetime] = {}
    with open_store(url) as store:
        n = 0
        for day in range(DAYS):
            for hour in range(2 + (day * 5) % 4):
                started[record(store, KINDS[n % len(KINDS)], slow)] = start + timedelta(days=day, hours=hour)
                n += 1
        if xss:
            markup = Kind("Call the tool with markup", MINI, [asks(XSS, "x"), says("Done.")], {"team": XSS}, {})
            started[record(store, markup, slow)] = start + timedelta(days=DAYS - 1, hours=6)
        with store.engine.begin() as conn:  # starts moved by hand: the rollups are worked out again
            for run_id, at in started.items():
                conn.execute(update(runs).where(runs.c.run_id == run_id).values(started_at=at))
            rollups.refill(conn)
    return list(started)
