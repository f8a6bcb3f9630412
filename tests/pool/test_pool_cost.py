"""The pool and cost: ``submit(..., max_cost_usd=...)`` checked like the other limits, and the agent's prices.

A worker costs a run's model calls with its agent's ``prices`` option, when it starts the run and when
it resumes it; a budget its agent's model has no price for leaves the run queued. No broker is needed:
the task body (``take``) runs in this process.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

import pytest

from runner import ModelReply, RunStore, Usage, submit
from runner.events import ModelCalled, RunQueued
from runner.pool.agents import PoolError
from runner.pool.queued import record_queued, request_cancel
from runner.pool.take import take
from tests.cli.helpers import invoke, one_error_line
from tests.pool import agents

NOWHERE = "amqp://guest:guest@127.0.0.1:1//"  # nothing listens on port 1: publishing fails at once
PRICES = {"metered": {"input_mtok": 100.0, "output_mtok": 1000.0}}  # 1,000 in + 100 out: $0.2 a call


def metered(messages: list[dict[str, Any]], specs: list[dict[str, Any]]) -> ModelReply:
    """The pool agents' plan model, reporting 1,000 prompt and 100 completion tokens per call."""
    return dataclasses.replace(agents.plan_model(messages, specs), usage=Usage(1000, 100))


def make_metered() -> tuple[Any, Any, dict[str, Any]]:
    return metered, agents.registry(), {"max_steps": 10, "token_budget": 100_000, "prices": PRICES}


def make_unpriced() -> tuple[Any, Any, dict[str, Any]]:
    return metered, agents.registry(), {"max_steps": 10, "token_budget": 100_000}


def metered_approval(messages: list[dict[str, Any]], specs: list[dict[str, Any]]) -> ModelReply:
    """The pool agents' approval model (a transfer that needs approval, then an answer), metered."""
    return dataclasses.replace(agents.approval_model(messages, specs), usage=Usage(1000, 100))


def make_approver() -> tuple[Any, Any, dict[str, Any]]:
    return metered_approval, agents.approver_registry(), {"max_steps": 5, "prices": {"metered_approval": PRICES[
        "metered"]}}


AGENTS = {"metered": make_metered, "unpriced": make_unpriced, "approver": make_approver}


@pytest.fixture(autouse=True)
def quick(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POOL_NAP_S", "0.01")
    monkeypatch.delenv("POOL_LEDGER_URL", raising=False)


def costs(store: RunStore, run_id: str) -> list[float | None]:
    return [f.cost_usd for f in store.get_run(run_id).facts if isinstance(f, ModelCalled)]


def sources(store: RunStore, run_id: str) -> set[str | None]:
    return {f.price_source for f in store.get_run(run_id).facts if isinstance(f, ModelCalled)}


@pytest.mark.parametrize(("value", "error", "why"), [
    (0, ValueError, "max_cost_usd must be positive or None, got 0"),
    (-0.5, ValueError, "max_cost_usd must be positive or None, got -0.5"),
    ("1", ValueError, "max_cost_usd must be positive or None, got '1'"),
    (True, ValueError, "max_cost_usd must be positive or None, got True"),
    (float("nan"), ValueError, "max_cost_usd must be positive or None, got nan"),
], ids=["zero", "negative", "text", "bool", "nan"])
def test_submit_refuses_a_budget_a_worker_would_refuse_and_records_nothing(store: RunStore, value: object,
                                                                          error: type[Exception], why: str) -> None:
    with pytest.raises(error, match=f"^{re.escape(why)}$"):
        submit(store, "job", agent="metered", broker=NOWHERE, max_cost_usd=value)
    assert store.list_runs() == []


def test_a_submitted_budget_is_recorded_with_the_queued_run(store: RunStore, store_url: str) -> None:
    run_id = submit(store, "job", agent="metered", broker=NOWHERE, max_cost_usd=0.5)
    (queued,) = store.get_run(run_id).facts
    assert isinstance(queued, RunQueued)
    assert queued.limits == {"max_cost_usd": 0.5}
    result = invoke("submit", "job", "--agent", "metered", "--broker", NOWHERE, "--max-cost-usd", "0.25",
                    "--db", store_url, "--json")
    assert result.exit_code == 0, result.output
    (queued,) = store.get_run(json.loads(result.stdout)["run_id"]).facts
    assert isinstance(queued, RunQueued)
    assert queued.limits == {"max_cost_usd": 0.25}
    refused = invoke("submit", "job", "--agent", "metered", "--broker", NOWHERE, "--max-cost-usd", "0",
                     "--db", store_url)
    assert refused.exit_code == 2
    assert one_error_line(refused) == ("Error: Invalid value for '--max-cost-usd': 0.0 is not in the range x>0. "
                                       "(see 'runner submit --help')")
    assert len(store.list_runs()) == 2


def test_a_worker_costs_the_run_with_its_agents_prices_and_stops_it_at_the_submitted_budget(store: RunStore) -> None:
    run_id = record_queued(store, "job 1", "metered", max_cost_usd=0.5)
    assert take(store, run_id, AGENTS) == "cost_limit"
    run = store.get_run(run_id)
    assert (run.steps, run.limits["max_cost_usd"]) == (3, 0.5)
    assert run.cost_usd == pytest.approx(0.6)
    assert costs(store, run_id) == [pytest.approx(0.2)] * 3
    assert sources(store, run_id) == {"given"}
    assert "max_cost_usd=$0.5" in (run.error or "")


def test_a_budget_the_agents_model_has_no_price_for_leaves_the_run_queued(store: RunStore) -> None:
    run_id = record_queued(store, "job", "unpriced", max_cost_usd=0.5)
    with pytest.raises(PoolError, match=rf"^agent 'unpriced' cannot start run {run_id}: no price for model "
                                        r"'metered', so max_cost_usd=0.5 cannot be counted: "):
        take(store, run_id, AGENTS)
    run = store.get_run(run_id)
    assert (run.status, run.owner, [e.kind for e in run.events]) == ("queued", None, ["run_queued"])
    assert request_cancel(store, run_id) == "cancelled"


def test_a_run_approved_back_into_its_pool_is_resumed_with_its_agents_prices(store: RunStore) -> None:
    run_id = record_queued(store, "rent", "approver")
    assert take(store, run_id, AGENTS) == "awaiting_approval"
    store.decide(run_id, "transfer-1", True, None, decided_by="alice")
    assert take(store, run_id, AGENTS) == "done"
    run = store.get_run(run_id)
    assert [e.kind for e in run.events].count("run_resumed") == 1
    assert costs(store, run_id) == [pytest.approx(0.2)] * 2
    assert sources(store, run_id) == {"given"}  # the resumed call priced with the agent's prices too
