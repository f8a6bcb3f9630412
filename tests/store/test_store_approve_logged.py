"""An ``approve=`` callback's decisions are logged as ``approval_decided`` facts (issue 31 item 17)."""

from __future__ import annotations

import getpass
from pathlib import Path
from typing import Any

import pytest

from runner import ModelReply, ScriptedModel, ToolCall, ToolRegistry, replay, resume, run_agent
from runner.events import ApprovalDecided, ToolFinished
from runner.store import RunStore
from tests.loop.helpers import call, reply

PARAMS = {"type": "object", "properties": {"ref": {"type": "string"}}, "required": ["ref"]}


def guarded() -> ToolRegistry:
    registry = ToolRegistry()
    registry.register("pay", "Pay (needs approval).", PARAMS, lambda ref: f"paid {ref}", needs_approval=True)
    registry.register("peek", "Peek.", PARAMS, lambda ref: f"saw {ref}")
    return registry


def script() -> list[ModelReply]:
    return [reply("", call("a", "pay", ref="ok"), call("b", "pay", ref="no"), call("c", "peek", ref="x")),
            reply("done")]


def approver(found: ToolCall) -> bool | str | None:
    return True if found.args["ref"] == "ok" else "not this one"


def decisions(store: RunStore, run_id: str) -> list[tuple[str, bool, str | None, str]]:
    return [(f.call_id, f.approved, f.reason, f.decided_by) for f in store.get_run(run_id).facts
            if isinstance(f, ApprovalDecided)]


def test_each_decision_of_an_approve_callback_is_logged_with_its_owner(store: RunStore) -> None:
    result = run_agent("pay", ScriptedModel(script()), guarded(), store=store, approve=approver, decided_by="ops-bot")
    assert result.status == "done"
    assert decisions(store, result.run_id) == [("a", True, None, "ops-bot"), ("b", False, "not this one", "ops-bot")]
    facts = store.get_run(result.run_id).facts
    first_decision = next(i for i, f in enumerate(facts) if isinstance(f, ApprovalDecided))
    first_result = next(i for i, f in enumerate(facts) if isinstance(f, ToolFinished))
    assert first_decision < first_result  # logged as it is taken, before the call runs


def test_the_owner_defaults_to_the_os_user(store: RunStore) -> None:
    result = run_agent("pay", ScriptedModel(script()), guarded(), store=store, approve=approver,
                       max_parallel_tools=4)
    assert {by for *_, by in decisions(store, result.run_id)} == {getpass.getuser()}
    assert [d[:2] for d in decisions(store, result.run_id)] == [("a", True), ("b", False)]


def test_a_resume_with_an_approve_callback_logs_its_decisions_by_decided_by(store: RunStore) -> None:
    stopped = run_agent("pay", ScriptedModel(script()), guarded(), store=store)
    assert stopped.status == "awaiting_approval"
    assert decisions(store, stopped.run_id) == []
    again = resume(store, stopped.run_id, ScriptedModel([reply("done")]), guarded(), approve=approver,
                   decided_by="night-shift")
    assert again.status == "done"
    assert [d[3] for d in decisions(store, stopped.run_id)] == ["night-shift", "night-shift"]


def test_a_callback_that_asks_for_no_decision_logs_none(store: RunStore) -> None:
    result = run_agent("pay", ScriptedModel(script()), guarded(), store=store, approve=lambda found: None)
    assert result.status == "awaiting_approval"
    assert decisions(store, result.run_id) == []


@pytest.mark.parametrize("bad", ["", "  ", 3])
def test_decided_by_must_name_someone(store: RunStore, bad: Any) -> None:
    with pytest.raises(TypeError, match="decided_by must be a non-empty string"):
        run_agent("pay", ScriptedModel(script()), guarded(), store=store, approve=approver, decided_by=bad)
    assert store.list_runs() == []


def test_a_recording_with_callback_decisions_replays_clean(store: RunStore, tmp_path: Path) -> None:
    result = run_agent("pay", ScriptedModel(script()), guarded(), store=store, approve=approver)
    path = tmp_path / "run.json"
    store.export_fixture(result.run_id, path)
    report = replay(path, guarded(), store=store)
    assert report.divergence is None
    assert report.differences == []
    assert report.result.status == "done"
    assert decisions(store, report.result.run_id) == [("a", True, None, "replay"),
                                                      ("b", False, "not this one", "replay")]
