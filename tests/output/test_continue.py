"""A typed result across resume, fork, follow-up and arun_agent, and in ``runner show --json``."""

from __future__ import annotations

import asyncio
import json

from runner import ScriptedModel, Status, ToolRegistry, arun_agent, follow_up, fork, resume, run_agent
from runner.events import OutputRejected, RunResumed
from runner.store import RunStore
from tests.cli.helpers import invoke
from tests.output.helpers import Invoice, final


def test_resume_with_a_larger_max_output_retries_finishes(store: RunStore) -> None:
    stopped = run_agent("bill", ScriptedModel(["plain", "plain again"]), ToolRegistry(), output_type=Invoice,
                        max_output_retries=1, store=store)
    assert stopped.status == Status.INVALID_OUTPUT
    result = resume(store, stopped.run_id, ScriptedModel([final("c1", total=4, currency="EUR")]), ToolRegistry(),
                    output_type=Invoice, max_output_retries=3)
    assert (result.status, result.output, result.steps) == (Status.DONE, Invoice(total=4, currency="EUR"), 3)
    run = store.get_run(stopped.run_id)
    assert run.output == {"total": 4.0, "currency": "EUR"}
    assert sum(isinstance(fact, OutputRejected) for fact in run.facts) == 2


def test_resume_without_output_type_checks_the_logged_schema_and_gives_json(store: RunStore) -> None:
    stopped = run_agent("bill", ScriptedModel(["plain"]), ToolRegistry(), output_type=Invoice,
                        max_output_retries=0, store=store)
    model = ScriptedModel([final("c1", total=-1, currency="EUR"), final("c2", total=4, currency="EUR")])
    result = resume(store, stopped.run_id, model, ToolRegistry(), max_output_retries=2)
    assert (result.status, result.output) == (Status.DONE, {"total": 4, "currency": "EUR"})
    assert model.seen[1][-1]["content"].startswith("ERROR: argument 'total' must be >= 0")
    resumed = [fact for fact in store.get_run(stopped.run_id).facts if isinstance(fact, RunResumed)]
    assert resumed[0].output_schema is None  # none given: the start's record still holds


def test_a_fork_ends_with_its_parents_typed_result(store: RunStore) -> None:
    parent = run_agent("bill", ScriptedModel(["plain", final("c1", total=1, currency="EUR")]), ToolRegistry(),
                       output_type=Invoice, store=store)
    forked = fork(store, parent.run_id, at_step=2, model=ScriptedModel([final("c2", total=9, currency="USD")]),
                  registry=ToolRegistry())
    assert (forked.status, forked.output) == (Status.DONE, {"total": 9, "currency": "USD"})


def test_a_follow_up_is_typed_only_when_output_type_is_given_again(store: RunStore) -> None:
    parent = run_agent("bill", ScriptedModel([final("c1", total=1, currency="EUR")]), ToolRegistry(),
                       output_type=Invoice, store=store)
    free = follow_up(store, parent.run_id, "thanks", ScriptedModel(["you are welcome"]), ToolRegistry())
    assert (free.status, free.answer, free.output) == (Status.DONE, "you are welcome", None)
    typed = follow_up(store, parent.run_id, "again in USD", ScriptedModel([final("c2", total=2, currency="USD")]),
                      ToolRegistry(), output_type=Invoice)
    assert typed.output == Invoice(total=2, currency="USD")


def test_arun_agent_gives_the_typed_result(store: RunStore) -> None:
    model = ScriptedModel(["plain", final("c1", total=3, currency="EUR")])
    result = asyncio.run(arun_agent("bill", model, ToolRegistry(), output_type=Invoice, store=store))
    assert (result.status, result.output) == (Status.DONE, Invoice(total=3, currency="EUR"))


def test_runner_show_json_has_run_output(store: RunStore, store_url: str) -> None:
    done = run_agent("bill", ScriptedModel([final("c1", total=3, currency="EUR")]), ToolRegistry(),
                     output_type=Invoice, store=store)
    free = run_agent("hi", ScriptedModel(["hello"]), ToolRegistry(), store=store)
    shown = json.loads(invoke("show", done.run_id, "--db", store_url, "--json").stdout)
    assert shown["run"]["output"] == {"total": 3.0, "currency": "EUR"}
    assert shown["run"]["answer"] == '{"total": 3.0, "currency": "EUR"}'
    assert json.loads(invoke("show", free.run_id, "--db", store_url, "--json").stdout)["run"]["output"] is None


def test_runner_show_prints_the_output_pretty(store: RunStore, store_url: str) -> None:
    done = run_agent("bill", ScriptedModel(["plain", final("c1", total=3, currency="EUR")]), ToolRegistry(),
                     output_type=Invoice, store=store)
    shown = invoke("show", done.run_id, "--db", store_url).stdout
    assert '\ndone, output:\n  {\n    "total": 3.0,\n    "currency": "EUR"\n  }\n' in shown
    assert "the final result was accepted" in shown
    rejected = shown.index("  output rejected (plain text)\n")
    assert shown[rejected:].split("\n")[1].startswith("    ERROR: the run must end with a call to final_result")
