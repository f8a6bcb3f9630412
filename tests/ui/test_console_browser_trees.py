"""Sub-agent trees in a real browser: a real ``runner ui`` process on a SQLite file and PostgreSQL, driven by Chromium.

The parent's run page nests the child's timeline under its call (a ``<details>`` with its status) and links to
the child's page, which links back to the parent's call; the child's call is approved from the parent's page and
the console finishes the tree from its root. A hostile agent name and task in the nested child stay text.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Dialog, Page

from runner import open_store
from runner._log.statuses import Status
from tests.cli.helpers import FakeOpenAI, at, completion, invoke, run_id_in
from tests.trees import run_tree
from tests.ui.console_tools import XSS
from tests.ui.helpers import WAITING, Start, ran, settled, shown_runs

pytestmark = [pytest.mark.process]
TREE_TOOLS = "tests.trees:tools"


def waiting_tree(db: str) -> tuple[str, str]:
    """``runner run`` of a parent whose sub-agent's ``send`` waits for approval: the parent's and the child's ids."""
    with FakeOpenAI(completion("", [("p1", "research", {"task": "find X"})])) as server:
        result = invoke("run", "top task", "--tools", TREE_TOOLS, "--model", "openai:fake", *at(server), "--db", db,
                        "-q")
    parent = run_id_in(result)
    with open_store(db) as store:
        (child,) = [run.run_id for run in store.children(parent)]
    return parent, child


def test_the_child_is_nested_under_its_call_and_approving_its_call_finishes_the_tree(
        store_url: str, page: Page, console: Start, ran_file: Path) -> None:
    parent, child = waiting_tree(store_url)
    with FakeOpenAI(completion("All done.")) as model:
        ui = console(store_url, "--tools", TREE_TOOLS, "--base-url", model.url, "--by", "alice")
        page.goto(ui.at("/"))
        assert shown_runs(page) == [(child, Status.AWAITING_APPROVAL), (parent, Status.AWAITING_APPROVAL)]
        assert page.locator(f'tr[data-run-id="{child}"] .child-of').inner_text() == "↳ research"
        page.locator('form#filters input[name="top"]').check()
        with page.expect_navigation():
            page.locator('form#filters button[type="submit"]').click()
        assert shown_runs(page) == [(parent, Status.AWAITING_APPROVAL)]

        page.goto(ui.at("/approvals"))
        assert page.locator("form.pending").count() == 1
        assert page.locator(f'form.pending[data-run-id="{child}"][data-call-id="c1"]').count() == 1

        page.goto(ui.at(f"/runs/{parent}"))
        nested = page.locator('li.entry[data-kind="child"]')
        assert nested.get_attribute("data-run-id") == child
        assert nested.locator("details.child-run").get_attribute("open") is not None  # a waiting child is open
        assert nested.locator("details.child-run > summary .status").inner_text() == Status.AWAITING_APPROVAL
        assert nested.locator("ol.nested > li.entry").evaluate_all("es => es.map(e => e.dataset.kind)") == [
            "step", "model", "asked", "end"]
        assert page.locator('li.entry[data-kind="tool"][data-call-id="p1"]').get_attribute("data-outcome") == \
            "waiting on its sub-agent"
        nested.locator("details.child-run > summary").click()  # it folds away, and opens again
        assert not nested.locator("ol.nested").is_visible()
        nested.locator("details.child-run > summary").click()
        assert nested.locator("ol.nested").is_visible()

        with page.expect_navigation():
            nested.locator("a.child-link").click()
        assert urlsplit(page.url).path == f"/runs/{child}"
        with page.expect_navigation():
            page.locator("a.lineage.parent").click()
        assert (urlsplit(page.url).path, urlsplit(page.url).fragment) == (f"/runs/{parent}", "call-p1")
        assert page.locator("#call-p1").is_visible()

        form = page.locator(f'form.decide-below[data-run-id="{child}"][data-call-id="c1"]')
        with page.expect_navigation():
            form.locator('button[value="approve"]').click()
        assert urlsplit(page.url).path == f"/runs/{parent}"
        assert "the root of its tree" in page.locator("p#outcome").inner_text()
        assert settled(store_url, parent, WAITING) == Status.DONE
        assert ran(ran_file) == ["send bob"]
        assert len(model.requests) == 1  # the parent's one call after its child's answer

    page.goto(ui.at(f"/runs/{parent}"))
    nested = page.locator('li.entry[data-kind="child"]')
    assert nested.locator("details.child-run > summary .status").inner_text() == Status.DONE
    assert nested.locator("details.child-run").get_attribute("open") is None  # a done child is folded
    calls = page.locator('li.entry[data-kind="tool"][data-call-id="p1"]')  # before the stop, and again on resume
    assert calls.evaluate_all("es => es.map(e => e.dataset.outcome)") == ["waiting on its sub-agent", "ok"]
    assert page.locator('li.entry[data-kind="end"]').last.locator("pre.answer").inner_text() == "All done."


def test_a_hostile_agent_name_and_task_in_a_nested_child_stay_text(store_url: str, page: Page,
                                                                    console: Start) -> None:
    with open_store(store_url) as store:
        tree = run_tree(store, approval=True, name=XSS, task=XSS, child_task=XSS)
    dialogs: list[str] = []

    def opened(dialog: Dialog) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", opened)
    ui = console(store_url)
    for path in (f"/runs/{tree.parent}", f"/runs/{tree.child}", "/", "/approvals"):
        page.goto(ui.at(path))
        assert page.evaluate("window.__pwned") is None, path
    page.goto(ui.at(f"/runs/{tree.parent}"))
    nested = page.locator('li.entry[data-kind="child"]')
    assert nested.locator("details.child-run > summary .tool").inner_text() == XSS
    assert nested.locator("p.child-task").inner_text() == XSS
    assert page.locator("form.decide-below .dim").last.inner_text() == f"of sub-agent {XSS}, run {tree.child[:8]}"
    assert page.locator("img").count() == 0
    assert dialogs == []
