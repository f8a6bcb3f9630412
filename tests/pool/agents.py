"""Agents for the worker-pool tests and bench, imported by ``runner worker --agents tests.pool.agents:agents``.

The model reads the conversation to decide its next reply (it is called afresh on every
run and every resume, so a resumed run gets the reply for the step it is at). Side
effects land in a ledger database (``POOL_LEDGER_URL``): ``charge`` with an idempotency
key, ``notify`` without one, so a test can count how often each really ran. The ``approver``
agent's one ``transfer`` needs approval (a notice once it runs).
"""

from __future__ import annotations

import functools
import os
import time
from typing import Any

from sqlalchemy import Engine, create_engine, text

from runner import ModelReply, ToolCall, ToolRegistry

LEDGER_SQL = ("CREATE TABLE charges (key TEXT NOT NULL, at TIMESTAMPTZ NOT NULL DEFAULT now())",
              "CREATE TABLE notices (tag TEXT NOT NULL, at TIMESTAMPTZ NOT NULL DEFAULT now())")


def steps() -> int:
    return int(os.environ.get("POOL_STEPS", "3"))


def nap_s() -> float:
    return float(os.environ.get("POOL_NAP_S", "0.2"))


@functools.cache
def ledger() -> Engine | None:
    url = os.environ.get("POOL_LEDGER_URL")
    return create_engine(url, pool_size=8) if url else None


def _write(sql: str, **params: Any) -> None:
    engine = ledger()
    if engine is not None:
        with engine.begin() as conn:
            conn.execute(text(sql), params)


def nap(seconds: float) -> str:
    time.sleep(seconds)
    return "rested"


def charge(cents: int, key: str) -> dict[str, Any]:
    _write("INSERT INTO charges (key) VALUES (:key)", key=key)
    time.sleep(nap_s() / 2)  # a window in which a kill leaves the call in doubt
    return {"charged": cents}


def notify(tag: str) -> str:
    _write("INSERT INTO notices (tag) VALUES (:tag)", tag=tag)
    time.sleep(nap_s() / 2)
    return "sent"


def plan_model(messages: list[dict[str, Any]], specs: list[dict[str, Any]]) -> ModelReply:
    """Step k naps; step 2 also charges, step 3 also notifies; then a final answer."""
    done = sum(1 for m in messages if m["role"] == "assistant")
    if done >= steps():
        return ModelReply(content=f"finished {messages[1]['content']}")
    k = done + 1
    calls = [ToolCall(f"nap-{k}", "nap", {"seconds": nap_s()})]
    if k == 2:
        calls.append(ToolCall(f"charge-{k}", "charge", {"cents": 100}))
    if k == 3:
        calls.append(ToolCall(f"notify-{k}", "notify", {"tag": messages[1]["content"]}))
    return ModelReply(content="", tool_calls=calls)


def forever_model(messages: list[dict[str, Any]], specs: list[dict[str, Any]]) -> ModelReply:
    done = sum(1 for m in messages if m["role"] == "assistant")
    seconds = 0.2 + 0.05 * (done % 2)  # never the same call twice in a row (the repeat guard would refuse it)
    return ModelReply(content="", tool_calls=[ToolCall(f"nap-{done + 1}", "nap", {"seconds": seconds})])


def registry() -> ToolRegistry:
    tools = ToolRegistry()
    tools.register("nap", "Rest a while.", {"type": "object", "properties": {"seconds": {"type": "number"}},
                                             "required": ["seconds"]}, nap)
    tools.register("charge", "Charge a card.", {"type": "object", "properties": {"cents": {"type": "integer"}},
                                                "required": ["cents"]}, charge, side_effects=True,
                   idempotency_key="key")
    tools.register("notify", "Send a notice.", {"type": "object", "properties": {"tag": {"type": "string"}},
                                                "required": ["tag"]}, notify, side_effects=True)
    return tools


def transfer(ref: str) -> str:
    _write("INSERT INTO notices (tag) VALUES (:tag)", tag=f"transfer {ref}")
    return f"transferred {ref}"


def approval_model(messages: list[dict[str, Any]], specs: list[dict[str, Any]]) -> ModelReply:
    """One transfer (it needs approval), then an answer that says how it went."""
    results = [m["content"] for m in messages if m["role"] == "tool"]
    if results:
        return ModelReply(content=f"transfer: {results[-1]}")
    return ModelReply(content="", tool_calls=[ToolCall("transfer-1", "transfer", {"ref": messages[1]["content"]})])


def approver_registry() -> ToolRegistry:
    tools = registry()
    tools.register("transfer", "Move money (needs approval).", {"type": "object", "properties": {
        "ref": {"type": "string"}}, "required": ["ref"]}, transfer, side_effects=True, needs_approval=True)
    return tools


def make_tipper() -> tuple[Any, ToolRegistry, dict[str, Any]]:
    return plan_model, registry(), {"max_steps": 10, "token_budget": 100_000, "labels": {"agent": "tipper"}}


def make_sleeper() -> tuple[Any, ToolRegistry, dict[str, Any]]:
    return forever_model, registry(), {"max_steps": 200, "token_budget": 10_000_000}


def make_approver() -> tuple[Any, ToolRegistry, dict[str, Any]]:
    return approval_model, approver_registry(), {"max_steps": 5, "token_budget": 100_000}


agents = {"tipper": make_tipper, "sleeper": make_sleeper}
with_approver = {**agents, "approver": make_approver}  # for the approval tests: a transfer awaits a decision
