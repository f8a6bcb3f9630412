"""Sub-agent trees in the console, in-process (Starlette's TestClient) over a real store.

The run page nests each child under its call and the child's page links back; the runs list marks children
and filters top-level runs; the inbox lists a child's call under the child's id; deciding on the child, or
resuming a parent whose child's call is decided, finishes the whole tree from its root in the console.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient

from runner.store import RunStore
from runner.ui import create_app
from tests import trees
from tests.cli.helpers import invoke
from tests.trees import Asks, run_tree, tree_registry


def until_done(store: RunStore, run_id: str, timeout_s: float = 20.0) -> str:
    """The run's status once the console's background thread has finished it (bounded wait)."""
    deadline = time.monotonic() + timeout_s
    status = store.get_run(run_id).status
    while status in ("running", "awaiting_approval") and time.monotonic() < deadline:
        time.sleep(0.05)
        status = store.get_run(run_id).status
    return status


@pytest.fixture(autouse=True)
def nothing_sent() -> Iterator[None]:
    trees.SENT.clear()
    yield
    trees.SENT.clear()


def console(store: RunStore, **options: Any) -> TestClient:
    """The console with the tree's tools and the parent's model: it can go on with a tree's root."""
    app = create_app(store, registry=tree_registry(approval=True),
                     model=Asks("research", {"task": trees.CHILD_TASK}, "p1", "final"), **options)
    return TestClient(app, base_url="http://127.0.0.1", follow_redirects=False)


def test_the_run_page_nests_the_child_under_its_call_and_the_childs_page_links_back(store: RunStore) -> None:
    tree = run_tree(store, approval=True)
    with console(store) as client:
        page = client.get(f"/runs/{tree.parent}").text
        of_child = client.get(f"/runs/{tree.child}").text
    call = page.index('data-kind="tool" data-call-id="p1"')
    child = page.index(f'data-kind="child" data-run-id="{tree.child}" data-call-id="p1"')
    assert call < child < page.index('data-kind="end"', child + 1)
    nested = page[child:]
    assert f'<a class="child-link" href="/runs/{tree.child}">{tree.child[:8]}</a>' in nested
    assert 'data-kind="asked" data-call-id="c1"' in nested  # the child's own timeline, nested
    assert 'data-outcome="waiting on its sub-agent"' in page
    assert 'id="in-doubt"' not in page
    below = re.search(r'<form class="decide-here decide-below card" method="post" action="([^"]+)" '
                      r'data-run-id="([0-9a-f]+)" data-call-id="c1">', page)
    assert below is not None
    assert below.groups() == (f"/runs/{tree.child}/decide", tree.child)
    assert f'<input type="hidden" name="page" value="{tree.parent}">' in page
    assert 'id="resume"' not in page  # nothing to resume with until the child's call is decided
    own, spent = store.get_run(tree.parent).tokens, store.get_run(tree.child).tokens
    assert f'<span class="dim" id="tree-tokens">({own + spent} with its sub-agents)</span>' in page
    assert f'<a class="lineage parent" href="/runs/{tree.parent}#call-p1">{tree.parent[:8]}</a> (sub-agent, call p1)' \
        in of_child
    assert 'id="inherited"' not in of_child  # a child starts from its own task


def test_the_runs_list_marks_children_and_top_lists_only_top_level_runs(store: RunStore, store_url: str) -> None:
    tree = run_tree(store)
    with console(store) as client:
        everyone = client.get("/").text
        top = client.get("/?top=1").text
        api = client.get("/api/runs?top=1").json()
        assert client.get("/?top=maybe").status_code == 400
    assert re.findall(r'<tr data-run-id="([0-9a-f]+)"', everyone) == [tree.child, tree.parent]
    assert re.findall(r'<tr data-run-id="([0-9a-f]+)"', top) == [tree.parent]
    assert '<span class="child-of"' in everyone
    assert "↳ research</span>" in everyone
    assert '<input type="checkbox" name="top" value="1" checked>' in top
    assert api == json.loads(invoke("runs", "--top", "--json", "--db", store_url).stdout)


def test_the_inbox_lists_the_childs_call_under_the_childs_id(store: RunStore) -> None:
    tree = run_tree(store, approval=True)
    with console(store) as client:
        inbox = client.get("/approvals").text
    forms = re.findall(r'<form class="pending card" method="post" action="[^"]+" data-run-id="([0-9a-f]+)" '
                       r'data-call-id="([^"]+)">', inbox)
    assert forms == [(tree.child, "c1")]  # the parent waits on the child: its call is the only one to decide
    assert (f'sub-agent research of run <a class="parent" href="/runs/{tree.parent}">{tree.parent[:8]}</a>'
            in inbox)


def test_approving_the_childs_call_on_the_parents_page_finishes_the_tree(store: RunStore) -> None:
    tree = run_tree(store, approval=True)
    with console(store, decided_by="alice") as client:
        went = client.post(f"/runs/{tree.child}/decide",
                           data={"call_id": "c1", "verdict": "approve", "back": "run", "page": tree.parent[:10]})
        assert went.status_code == 303
        assert went.headers["location"].startswith(f"/runs/{tree.parent}?note=")  # back to the page it was on
        assert until_done(store, tree.parent) == "done"
        note = client.get(went.headers["location"]).text
    assert "from run " + tree.parent[:8] + ", the root of its tree" in note
    assert trees.SENT == ["bob"]
    assert store.get_run(tree.child).status == "done"
    assert store.get_run(tree.parent).answer == 'final: child done: "sent to bob"'
    decided = [e.data for e in store.get_run(tree.child).events if e.kind == "approval_decided"]
    assert decided == [{"call_id": "c1", "approved": True, "reason": None, "decided_by": "alice"}]


def test_resuming_the_parent_is_refused_until_the_childs_call_is_decided_then_finishes_the_tree(
        store: RunStore) -> None:
    tree = run_tree(store, approval=True)
    with console(store) as client:
        early = client.post(f"/runs/{tree.parent}/resume", data={})
        assert early.status_code == 409, early.text
        assert f"waits on sub-agent run {tree.child} (call p1)" in early.text
        assert store.get_run(tree.parent).status == "awaiting_approval"
        store.decide(tree.child, "c1", True, decided_by="bob")
        went = client.post(f"/runs/{tree.child}/resume", data={})  # the child's Resume: its tree goes on
        assert went.status_code == 303
        assert until_done(store, tree.parent) == "done"
    assert (store.get_run(tree.child).status, trees.SENT) == ("done", ["bob"])
