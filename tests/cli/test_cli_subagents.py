"""Sub-agent trees through the CLI: ``runs`` marks the children and ``--top`` leaves them out, ``show`` nests
each child under its call with what the tree spent, and ``resume CHILD --approve`` finishes the whole tree.

The parent's model is a fake OpenAI server; the sub-agent's is ``tests.trees``' (it answers from its
conversation, so the resumed tree gets the same answers). The CLI runs in this process.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterator
from typing import Any

import pytest

from runner import ToolRegistry, open_store
from runner.pool.queued import record_queued
from runner.pool.take import take
from tests import trees
from tests.cli.helpers import FakeOpenAI, at, completion, invoke, lines, rows, run_id_in

TOOLS = "tests.trees:tools"
NOWHERE = "amqp://guest:guest@127.0.0.1:1//"  # nothing listens on port 1: publishing fails at once


@pytest.fixture(autouse=True)
def local_only(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "RUNNER_DB", "RUNNER_BROKER_URL", "COLUMNS",
                 "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    monkeypatch.setenv("COLUMNS", "200")
    trees.SENT.clear()
    yield
    trees.SENT.clear()


def waiting_tree(url: str) -> tuple[str, str]:
    """``runner run`` of a parent whose sub-agent's ``send`` waits for approval: the parent's and the child's ids."""
    with FakeOpenAI(completion("", [("p1", "research", {"task": "find X"})])) as server:
        result = invoke("run", "top task", "--tools", TOOLS, "--model", "openai:fake", *at(server), "--db", url)
    assert result.exit_code == 1, result.output
    parent = run_id_in(result)
    with open_store(url) as store:
        (child,) = [run.run_id for run in store.children(parent)]
    return parent, child


def test_runs_marks_a_child_and_top_lists_only_the_parent(store_url: str) -> None:
    parent, child = waiting_tree(store_url)
    listed = {row[0]: row for row in rows(invoke("runs", "--status", "awaiting_approval", "--db", store_url).stdout)}
    assert listed[child[:8]][-1] == "↳ research: find X"
    assert listed[parent[:8]][-1] == "top task"
    listed_top = rows(invoke("runs", "--top", "--db", store_url).stdout)
    assert [row[0] for row in listed_top if not row[0].startswith("note:")] == [parent[:8]]
    found = {run["run_id"]: run for run in json.loads(invoke("runs", "--json", "--db", store_url).stdout)}
    assert {run_id: (run["origin"], run["parent_call_id"], run["parent_run_id"]) for run_id, run in found.items()} \
        == {parent: (None, None, None), child: ("subagent", "p1", parent)}
    assert [run["run_id"] for run in json.loads(invoke("runs", "--top", "--json", "--db", store_url).stdout)] \
        == [parent]


def test_show_puts_the_child_under_its_call_and_lists_the_call_it_waits_on(store_url: str) -> None:
    parent, child = waiting_tree(store_url)
    shown = lines(invoke("show", parent[:8], "--db", store_url))
    at_call = shown.index("  tool research [p1] waits on its sub-agent's run")
    assert shown[at_call + 1].startswith(f"    ↳ sub-agent research: run {child[:8]} awaiting_approval  ")
    assert shown[at_call + 2] == f"      approval needed: send [c1] of run {child[:8]}"
    assert "calls left in doubt by a crash" not in shown  # the call waits on its child: no crash left it
    assert f"awaiting approval in its sub-agents: c1 (send) of run {child[:8]}" in shown
    assert (f"  runner resume {child[:8]} --tools {TOOLS} --approve c1 --db {shlex.quote(store_url)}   "
            f"# resumes the tree from run {parent[:8]}") in shown
    with open_store(store_url) as store:
        own, below = store.get_run(parent), store.get_run(child)
    assert f"with its sub-agents: {own.tokens + below.tokens:,} tokens" in shown  # no price: no cost
    of_child = lines(invoke("show", child[:8], "--db", store_url))
    assert f"parent run {parent} (sub-agent, call p1)" in of_child
    assert not any(line.startswith("inherited from run") for line in of_child)  # it starts from its own task
    assert (f"  runner resume {child[:8]} --tools {TOOLS} --approve c1 --db {shlex.quote(store_url)}   "
            f"# resumes its tree from run {parent[:8]}") in of_child


def test_resume_of_the_child_logs_its_decision_and_finishes_the_tree_from_its_root(store_url: str) -> None:
    parent, child = waiting_tree(store_url)
    with FakeOpenAI(completion("All done.")) as server:
        result = invoke("resume", child[:8], "--tools", TOOLS, "--approve", "c1", "--by", "alice", *at(server),
                        "--db", store_url)
    assert result.exit_code == 0, result.output
    assert trees.SENT == ["bob"]
    said = lines(result)
    assert said[0] == "All done."
    assert f"run id: {parent}" in said
    assert f"sub-agent run {child[:8]}: c1 approved by alice; its tree was resumed from its root run {parent[:8]}" \
        in said
    with open_store(store_url) as store:
        runs = {run.run_id: run for run in store.list_runs()}
        decided = [e.data for e in store.get_run(child).events if e.kind == "approval_decided"]
    assert (runs[parent].status, runs[child].status) == ("done", "done")
    assert runs[child].answer == 'child done: "sent to bob"'
    assert decided == [{"call_id": "c1", "approved": True, "reason": None, "decided_by": "alice"}]
    assert invoke("resume", child[:8], "--tools", TOOLS, "--db", store_url).exit_code == 3  # done: nothing to do


def test_resume_of_the_root_with_its_childs_call_decides_it_on_the_child_and_finishes_the_tree(store_url: str) -> None:
    parent, child = waiting_tree(store_url)
    with FakeOpenAI(completion("All done.")) as server:
        result = invoke("resume", parent[:8], "--tools", TOOLS, "--approve", "c1", "--by", "dana", *at(server),
                        "--db", store_url)
    assert result.exit_code == 0, result.output
    assert trees.SENT == ["bob"]
    with open_store(store_url) as store:
        statuses = {run.run_id: run.status for run in store.list_runs()}
        decided = [e.data for e in store.get_run(child).events if e.kind == "approval_decided"]
    assert (statuses[parent], statuses[child]) == ("done", "done")
    assert decided == [{"call_id": "c1", "approved": True, "reason": None, "decided_by": "dana"}]


def test_show_json_lists_the_sub_agents_child_with_what_it_and_the_tree_spent(store_url: str) -> None:
    parent, child = waiting_tree(store_url)
    with FakeOpenAI(completion("All done.")) as server:
        assert invoke("resume", child[:8], "--tools", TOOLS, "--approve", "c1", *at(server),
                      "--db", store_url).exit_code == 0
    shown = json.loads(invoke("show", parent[:8], "--json", "--db", store_url).stdout)
    with open_store(store_url) as store:
        own, below = store.get_run(parent), store.get_run(child)
    assert shown["children"] == [{
        "run_id": child, "status": "done", "origin": "subagent", "forked_at_step": None, "call_id": "p1",
        "agent_name": "research", "tokens": below.tokens, "cost_usd": below.cost_usd,
        "cost_known_usd": below.cost_known_usd, "tree_tokens": below.tokens, "tree_cost_usd": below.cost_usd,
        "tree_cost_known_usd": below.cost_known_usd}]
    assert (shown["run"]["tokens"], shown["run"]["tree_tokens"]) == (own.tokens, own.tokens + below.tokens)
    assert shown["run"]["tree_cost_usd"] is None  # no price for the fake model: the cost is unknown
    of_child = json.loads(invoke("show", child[:8], "--json", "--db", store_url).stdout)["run"]
    assert (of_child["origin"], of_child["parent_call_id"], of_child["parent_run_id"]) == ("subagent", "p1", parent)


def test_a_grandchild_is_nested_two_deep_and_its_resume_finishes_the_tree_from_the_top(store_url: str) -> None:
    with open_store(store_url) as store:
        tree = trees.run_tree(store, approval=True, deeper=True)
        (grandchild,) = [run.run_id for run in store.children(tree.child)]
    assert tree.status == "awaiting_approval"
    shown = lines(invoke("show", tree.parent[:8], "--db", store_url))
    nested = [line for line in shown if "↳ sub-agent" in line or "approval needed" in line]
    assert [line.split(":")[0] for line in nested] == [
        "    ↳ sub-agent research", "      ↳ sub-agent deep", "        approval needed"]
    assert f"awaiting approval in its sub-agents: c1 (send) of run {grandchild[:8]}" in shown
    with FakeOpenAI(completion("All done.")) as server:
        result = invoke("resume", grandchild[:8], "--tools", "tests.trees:deep_tools", "--model", "openai:fake",
                        "--approve", "c1", *at(server), "--db", store_url)
    assert result.exit_code == 0, result.output
    assert trees.SENT == ["bob"]
    with open_store(store_url) as store:
        assert [store.get_run(run_id).status for run_id in (tree.parent, tree.child, grandchild)] == ["done"] * 3
        assert store.get_run(tree.child).answer == 'middle done: child done: "sent to bob"'


def planner() -> tuple[Any, ToolRegistry, dict[str, Any]]:
    """A pool's agent whose model calls the sub-agent ``research``, whose ``send`` waits for approval."""
    return trees.Asks("research", {"task": "find X"}, "p1", "final"), trees.tools(), {}


def test_a_pool_trees_child_gets_its_decision_and_the_root_goes_back_to_its_pool(store_url: str) -> None:
    with open_store(store_url) as store:
        root = record_queued(store, "top task", "planner")
        assert take(store, root, {"planner": planner}) == "awaiting_approval"
        (child,) = [run.run_id for run in store.children(root)]
    result = invoke("resume", child[:8], "--approve", "c1", "--by", "alice", "--broker", NOWHERE, "--db", store_url)
    assert result.exit_code == 3  # no --tools: the root's workers have them; the broker here takes nothing
    assert result.stdout.splitlines() == [
        f"sub-agent run {child[:8]}: c1 approved by alice; its tree goes back to its pool from its root run {root[:8]}"]
    assert result.stderr.startswith(f"Error: run {root[:8]}: the decision is logged, but the broker did not take")
    with open_store(store_url) as store:
        assert [e.data["decided_by"] for e in store.get_run(child).events if e.kind == "approval_decided"] == ["alice"]
        assert take(store, root, {"planner": planner}) == "done"  # a worker, given the root, finishes the tree
        assert (store.get_run(child).status, trees.SENT) == ("done", ["bob"])
