"""Run ids an older store may hold (``/``, ``..``, ``?``), opened and decided in a real ``runner ui``."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page

from runner import ScriptedModel, open_store
from runner._log.statuses import Status
from tests.loop.helpers import call, reply
from tests.ui.helpers import Start, decide, decisions, pending, status_of
from tests.ui.legacy import stored_as
from tests.ui.money import money

pytestmark = [pytest.mark.process]

ODD = ["x/../victim", "a/b", "..", ".", "q?x#y", "50%/2F"]


def test_runs_whose_ids_hold_slashes_and_dots_open_and_are_decided(store_url: str, page: Page,
                                                                   console: Start) -> None:
    with open_store(store_url) as store:
        for run_id in ["victim", *ODD]:
            status = stored_as(store, run_id, f"task of {run_id}",
                               ScriptedModel([reply("", call("t1", "transfer", ref=run_id))]), money([]))
            assert status == Status.AWAITING_APPROVAL
    ui = console(store_url, "--by", "alice")
    for run_id in ODD:
        page.goto(ui.url)
        with page.expect_navigation():
            page.locator(f'tr[data-run-id="{run_id}"] td.task a').click()
        assert page.locator("section#run-header p#task").inner_text() == f"task of {run_id}", page.url
        assert page.locator("section#run-header dd.dim").last.inner_text() == run_id
        with page.expect_navigation():
            page.locator('form.decide-here[data-call-id="t1"] button[value="deny"]').click()
        assert page.locator("p#outcome").count() == 1, page.url
        assert page.locator("section#run-header p#task").inner_text() == f"task of {run_id}"
    page.goto(ui.at("/approvals"))
    assert pending(page, "victim", "t1").count() == 1
    assert decide(page, "victim", "t1", "approve") == 200
    for run_id in ODD:
        assert [(d["approved"], d["decided_by"]) for d in decisions(store_url, run_id)] == [(False, "alice")], run_id
    assert [d["approved"] for d in decisions(store_url, "victim")] == [True]
    assert status_of(store_url, "victim") == Status.AWAITING_APPROVAL  # recorded: this console has no tools
