"""The run page's live part in a real browser: what it offers to do follows the run's status as it changes."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from runner._log.statuses import Status
from tests.cli.helpers import completion
from tests.ui.helpers import SETTLE_S, TOOLS, HeldOpenAI, Start, awaiting, decide

pytestmark = [pytest.mark.process]


def test_the_actions_follow_the_live_status_and_a_finished_run_offers_no_cancel(store_url: str, page: Page,
                                                                                 console: Start) -> None:
    run_id = awaiting(store_url)
    with HeldOpenAI(completion("Sent.")) as model:
        ui = console(store_url, "--tools", TOOLS, "--base-url", model.url)
        page.goto(ui.at("/approvals"))
        assert decide(page, run_id, "t1", "approve") == 200
        assert model.asked.wait(SETTLE_S)  # running, its model call held
        page.goto(ui.at(f"/runs/{run_id}"))
        assert page.locator("section#run-header").get_attribute("data-status") == Status.RUNNING
        assert page.locator("#live form#cancel").count() == 1
        model.release.set()
        # not reloaded: the live refresh re-renders the actions with the header
        expect(page.locator("section#run-header")).to_have_attribute("data-status", Status.DONE,
                                                                     timeout=SETTLE_S * 1000)
        assert page.locator("form#cancel").count() == 0
        assert page.locator("form#resume").count() == 0
        assert page.locator("#live form#fork").count() == 1
