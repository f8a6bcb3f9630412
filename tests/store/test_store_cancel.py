"""A cancel request in the store stops any run recorded there, whatever drives it (issue 31 item 1).

Each run here is asked to stop from another store handle, as ``runner cancel`` in another process
would; it ends ``cancelled`` with a ``cancel_requested`` fact naming who asked, well before its
``max_steps``. No clock is asserted: a tool waits on an event until the request is in.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from runner import AgentResult, Limits, ModelReply, arun_agent, follow_up, fork, open_store, rerun, resume, run_agent
from runner.events import CancelRequested, ModelCalled, RunFinished, StepStarted, ToolStarted
from runner.store import RunStore
from tests.loop.helpers import call, numbered, reply

MAX_STEPS = 8


def counting_model(first: int = 1) -> Callable[[Any, Any], ModelReply]:
    """A model that calls ``work`` once a step, for ever (the run only ends on a limit or a cancel)."""
    made = iter(range(first, first + 1000))

    def model(messages: Any, specs: Any) -> ModelReply:
        n = next(made)
        return reply("", call(f"c{n}", "work", n=n))

    return model


class Asker:
    """A ``work`` tool that, on its ``at``-th call, asks (on another store handle) for its run's cancel.

    The request is in the store before the tool returns, so the run stops before its next call.
    """

    def __init__(self, url: str, at: int = 2, by: str = "alice") -> None:
        self.url, self.at, self.by = url, at, by
        self.ran: list[int] = []

    def __call__(self, n: int) -> str:
        self.ran.append(n)
        if len(self.ran) == self.at:
            with open_store(self.url) as other:
                (running,) = other.list_runs(status="running")
                other.request_cancel(running.run_id, by=self.by)
        return f"r{n}"


def assert_cancelled_by(store: RunStore, result: AgentResult, by: str) -> None:
    """The run ended ``cancelled`` on the request, logged who asked, and started nothing after it.

    The request is seen at the run's next commit: the asking call's own, or its step's end when
    the two went in together (a loaded machine): either way no call and no step comes after it.
    """
    assert result.status == "cancelled"
    run = store.get_run(result.run_id)
    assert run.status == "cancelled"
    asked = [n for n, fact in enumerate(run.facts) if isinstance(fact, CancelRequested)]
    assert asked  # the last one stopped it (a resumed run may have stopped on one before)
    request = run.facts[asked[-1]]
    assert isinstance(request, CancelRequested)
    assert request.requested_by == by
    after = run.facts[asked[-1] + 1:]
    assert not [fact for fact in after if isinstance(fact, (StepStarted, ToolStarted, ModelCalled))]
    assert isinstance(after[-1], RunFinished)
    assert after[-1].status == "cancelled"
    assert result.error is not None
    assert result.error.startswith(f"cancel requested by {by}")
    assert run.error == result.error


def test_run_agent_stops_on_a_cancel_request_from_another_store_handle(store: RunStore, store_url: str) -> None:
    asker = Asker(store_url)
    result = run_agent("count", counting_model(), numbered(asker), store=store, max_steps=MAX_STEPS)
    assert_cancelled_by(store, result, "alice")
    assert asker.ran == [1, 2]  # the tool under way was let finish; no model or tool call after it
    assert result.steps <= 3


def test_arun_agent_stops_on_a_cancel_request_from_another_store_handle(store: RunStore, store_url: str) -> None:
    asker = Asker(store_url, by="bob")
    result = asyncio.run(arun_agent("count", counting_model(), numbered(asker), store=store, max_steps=MAX_STEPS))
    assert_cancelled_by(store, result, "bob")
    assert asker.ran == [1, 2]


@pytest.fixture
def released() -> Iterator[threading.Event]:
    release = threading.Event()
    yield release
    release.set()  # the abandoned model call's thread ends too


def test_a_model_call_that_never_returns_is_abandoned_on_a_cancel_request(
        store: RunStore, store_url: str, released: threading.Event) -> None:
    """No commit comes while the model thinks: the run reads the store itself (within a second)."""
    entered = threading.Event()

    def model(messages: Any, specs: Any) -> ModelReply:
        entered.set()
        released.wait(60)
        return reply("too late")

    outcome: list[AgentResult] = []
    runner = threading.Thread(target=lambda: outcome.append(run_agent("t", model, numbered(str), store=store)))
    runner.start()
    assert entered.wait(30)
    with open_store(store_url) as other:
        (running,) = other.list_runs(status="running")
        assert other.request_cancel(running.run_id, by="carol")
    runner.join(60)
    assert not released.is_set()
    assert outcome, "the run still waits on its model"
    assert_cancelled_by(store, outcome[0], "carol")


def test_an_async_model_call_that_never_returns_is_abandoned_on_a_cancel_request(
        store: RunStore, store_url: str) -> None:
    async def main() -> AgentResult:
        entered, release = asyncio.Event(), asyncio.Event()

        async def model(messages: Any, specs: Any) -> ModelReply:
            entered.set()
            await release.wait()
            return reply("too late")

        task = asyncio.ensure_future(arun_agent("t", model, numbered(str), store=store))
        await asyncio.wait_for(entered.wait(), 30)
        with open_store(store_url) as other:
            (running,) = other.list_runs(status="running")
            other.request_cancel(running.run_id, by="dan")
        return await asyncio.wait_for(task, 60)

    assert_cancelled_by(store, asyncio.run(main()), "dan")


def stopped_run(store: RunStore) -> str:
    """A run stopped on its step limit after one step: one to resume, fork and follow up."""
    return run_agent("count", counting_model(), numbered(str), store=store, max_steps=1).run_id


def test_resume_stops_on_a_cancel_request(store: RunStore, store_url: str) -> None:
    run_id = stopped_run(store)
    asker = Asker(store_url, by="erin")
    assert_cancelled_by(store, resume(store, run_id, counting_model(10), numbered(asker), max_steps=MAX_STEPS), "erin")
    assert asker.ran == [10, 11]


def test_fork_and_follow_up_stop_on_a_cancel_request(store: RunStore, store_url: str) -> None:
    parent = stopped_run(store)
    forked = fork(store, parent, at_step=1, model=counting_model(), registry=numbered(Asker(store_url, by="f")),
                  max_steps=MAX_STEPS)
    assert_cancelled_by(store, forked, "f")
    followed = follow_up(store, parent, "and again", counting_model(20), numbered(Asker(store_url, by="g")),
                         max_steps=MAX_STEPS)
    assert_cancelled_by(store, followed, "g")


def test_a_rerun_candidate_stops_on_a_cancel_request(store: RunStore, store_url: str) -> None:
    baseline = run_agent("count", counting_model(), numbered(str), store=store, max_steps=MAX_STEPS)
    assert baseline.status == "step_limit"
    # Calls the baseline never made: they run live, on the asking tool.
    report = rerun(store, [baseline.run_id], counting_model(100), registry=numbered(Asker(store_url, by="h")))
    (case,) = report.cases
    (candidate,) = case.candidates
    assert candidate.status == "cancelled"
    run = store.get_run(candidate.run_id)
    assert [f.requested_by for f in run.facts if isinstance(f, CancelRequested)] == ["h"]
    assert run.steps < MAX_STEPS


def test_a_resume_does_not_stop_on_the_request_that_cancelled_the_run_before(store: RunStore, store_url: str) -> None:
    first = run_agent("count", counting_model(), numbered(Asker(store_url)), store=store, max_steps=MAX_STEPS)
    assert first.status == "cancelled"
    again = resume(store, first.run_id, counting_model(50), numbered(str), max_steps=first.steps + 2)
    assert again.status == "step_limit"
    assert not store.cancel_requested(first.run_id)
    # and a new request stops the resumed run again
    later = resume(store, first.run_id, counting_model(70), numbered(Asker(store_url, by="ivy")),
                   limits=Limits(max_steps=MAX_STEPS * 2))
    assert_cancelled_by(store, later, "ivy")


def test_a_run_without_a_store_ignores_nothing_and_watches_nothing() -> None:
    ran: list[int] = []
    result = run_agent("count", counting_model(), numbered(lambda n: ran.append(n)), max_steps=3)
    assert (result.status, ran) == ("step_limit", [1, 2, 3])


def test_the_callers_own_cancel_keeps_its_meaning_beside_the_stores(store: RunStore) -> None:
    """A set ``cancel=`` event stops the run as before: cancelled by the caller, no request logged."""
    cancel = threading.Event()
    cancel.set()
    result = run_agent("count", counting_model(), numbered(str), store=store, cancel=cancel)
    assert result.status == "cancelled"
    assert result.error == "cancelled by the caller"
    assert not any(isinstance(f, CancelRequested) for f in store.get_run(result.run_id).facts)
