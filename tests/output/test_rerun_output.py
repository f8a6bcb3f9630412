"""``rerun`` of typed runs: candidates end with the baseline's typed result, and ``changed`` names its fields."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from runner import ModelReply, ScriptedModel, Status, ToolRegistry, rerun, run_agent
from runner._rerun.diff import output_paths
from runner.messages import Message, ToolSpec
from runner.store import RunStore
from tests.output.helpers import Invoice, final


class ByTask:
    """A model whose one reply depends on the task (candidates run on threads, in any order)."""

    def __init__(self, replies: dict[str, ModelReply]) -> None:
        self.replies = replies
        self.model_name, self.provider_name = "candidate", "scripted"

    def __call__(self, messages: Sequence[Message], specs: Sequence[ToolSpec], /) -> ModelReply:
        assert "final_result" in [spec["name"] for spec in specs]
        return self.replies[str(messages[1]["content"])]


def test_rerun_lists_the_changed_output_fields_per_case(store: RunStore) -> None:
    invoices: dict[str, dict[str, Any]] = {"a": {"total": 10, "currency": "EUR"}, "b": {"total": 20, "currency": "EUR"},
                                           "c": {"total": 30, "currency": "EUR"}}
    ids = [run_agent(task, ScriptedModel([final("c1", **bill)]), ToolRegistry(), output_type=Invoice,
                     store=store).run_id for task, bill in invoices.items()]
    model = ByTask({"a": final("n1", total=10, currency="USD"), "b": final("n2", total=20.0, currency="EUR"),
                    "c": final("n3", total=31, currency="USD")})
    report = rerun(store, ids, model)
    cases = {case.baseline.run_id: case for case in report.cases}
    assert [case.candidates[0].status for case in cases.values()] == [Status.DONE] * 3
    assert [cases[run_id].changed for run_id in ids] == [
        ("answer", "tool_calls", "output.currency"), (),
        ("answer", "tool_calls", "output.total", "output.currency")]
    assert cases[ids[0]].candidates[0].output == {"total": 10.0, "currency": "USD"}
    assert sum("output.currency" in case.changed for case in report.cases) == 2


def test_output_paths_name_nested_fields_and_items() -> None:
    before = {"lines": [{"sku": "a", "qty": 1}, {"sku": "b", "qty": 2}], "total": 3.0, "note": None}
    after = {"lines": [{"sku": "a", "qty": 1}, {"sku": "b", "qty": 5}], "total": 3, "extra": True}
    assert output_paths(before, after) == ["output.lines[1].qty", "output.note", "output.extra"]
    assert output_paths([1, 2], [1, 2, 3]) == ["output"]
