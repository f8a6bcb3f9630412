"""A pool run's typed result, submitted by reference (``module:attr``) and imported by the worker."""

from __future__ import annotations

from typing import Any

import pytest

from runner import ScriptedModel, ToolRegistry
from runner.events import RunQueued, RunStarted
from runner.pool.queued import record_queued
from runner.pool.take import take
from runner.store import RunStore, open_store
from tests.output.helpers import final


def make_biller() -> tuple[Any, Any, dict[str, Any]]:
    return ScriptedModel(["plain", final("c1", total=7, currency="EUR")]), ToolRegistry(), {}


AGENTS = {"biller": make_biller}


@pytest.fixture(autouse=True)
def quick(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("POOL_LEDGER_URL", raising=False)


def test_a_worker_imports_the_submitted_output_type_and_logs_the_output(store: RunStore) -> None:
    run_id = record_queued(store, "bill", "biller", output_type="tests.output.helpers:Invoice")
    assert take(store, run_id, AGENTS) == "done"
    run = store.get_run(run_id)
    assert run.output == {"total": 7.0, "currency": "EUR"}
    queued = next(fact for fact in run.facts if isinstance(fact, RunQueued))
    started = next(fact for fact in run.facts if isinstance(fact, RunStarted))
    assert queued.output_type == "tests.output.helpers:Invoice"
    assert started.output_schema is not None
    assert started.output_schema["ref"] == "tests.output.helpers:Invoice"


@pytest.mark.parametrize(("ref", "message"), [("tests.output.helpers:Nope", "cannot import output type"),
                                               ("no_colon", "must look like 'module:attr'")])
def test_an_output_type_that_does_not_import_is_refused_at_submission(store: RunStore, ref: str,
                                                                       message: str) -> None:
    with pytest.raises(ValueError, match=message):
        record_queued(store, "bill", "biller", output_type=ref)
    assert store.list_runs() == []


NOWHERE = "amqp://guest:guest@127.0.0.1:1//"  # nothing listens on port 1: publishing fails at once


def test_runner_submit_takes_output_type_and_refuses_one_that_does_not_import(store_url: str) -> None:
    from tests.cli.helpers import invoke, one_error_line

    queued = invoke("submit", "bill", "--agent", "biller", "--broker", NOWHERE, "--db", store_url,
                    "--output-type", "tests.output.helpers:Invoice")
    assert queued.exit_code == 0, queued.output
    with open_store(store_url) as store:
        (run,) = store.list_runs()
        found = next(fact for fact in store.get_run(run.run_id).facts if isinstance(fact, RunQueued))
        assert found.output_type == "tests.output.helpers:Invoice"
    refused = invoke("submit", "bill", "--agent", "biller", "--broker", NOWHERE, "--db", store_url,
                     "--output-type", "tests.output.helpers:Nope")
    assert refused.exit_code == 2
    assert "cannot import output type" in one_error_line(refused)
    with open_store(store_url) as store:
        assert len(store.list_runs()) == 1
