"""Replaying a tree of agents: each sub-agent's call is answered by replaying its child's recording."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import BaseModel
from starlette.testclient import TestClient

from runner import Limits, Message, ModelReply, ToolRegistry, ToolSpec, resume, run_agent
from runner._replay.fixture import fixture_from_run, load_fixture
from runner._replay.replayer import replay
from runner._replay.update import update_fixture
from runner._tools.agents import child_run_id
from runner.errors import FixtureError
from runner.messages import AnyModel
from runner.store import RunStore, open_store
from runner.ui import create_app
from tests.cli.helpers import invoke
from tests.loop.helpers import call, reply
from tests.replay.trees import Counts, planner, scripted, unused


def _research_script() -> list[ModelReply | str]:
    return [reply("", call("k1", "lookup", ref="x"), call("k2", "pay", ref="x")), "found x"]


def _recorded(store: RunStore) -> str:
    """A planner that asks ``research`` (which looks up and pays), then pays and answers."""
    counts = Counts()
    model = scripted([reply("", call("p1", "research", task="Find x.")), reply("", call("c1", "pay", ref="y")),
                      "x is found"])
    result = run_agent("Find x and pay.", model, planner(counts, scripted(_research_script())), store=store)
    assert (result.status, counts.ran) == ("done", {"research.lookup": 1, "research.pay": 1, "planner.pay": 1})
    return result.run_id


def test_a_tree_replays_clean_from_its_exported_fixture_without_running_a_side_effect_or_a_model(
        store: RunStore, tmp_path: Path) -> None:
    run_id = _recorded(store)
    path = store.export_fixture(run_id, tmp_path / "tree.json")
    store.close()
    data = json.loads(path.read_text(encoding="utf-8"))
    child = data["children"]["p1"]
    assert (child["run_id"], child["task"], child["outcome"]["answer"]) == (child_run_id(run_id, "p1"), "Find x.",
                                                                           "found x")
    counts, research = Counts(), unused()
    report = replay(load_fixture(path), planner(counts, research))
    assert report.ok, report.explain()
    assert report.result.answer == "x is found"
    assert counts.ran == {"research.lookup": 1}  # the reads ran again; both payments were served
    assert research.calls == 0  # the child's replies are the recording's


def test_a_changed_tool_inside_a_child_is_a_divergence_naming_the_subagent_and_the_call(store: RunStore) -> None:
    run_id = _recorded(store)
    report = replay(run_id, planner(Counts(), unused(), value=2), source_store=store)
    assert not report.ok
    assert report.divergence is not None
    assert report.divergence.sentence == (
        "in sub-agent research (call p1), at step 2 the result of call k1 (lookup) differs: "
        "recorded '{\"ref\": \"x\", \"value\": 1}', got '{\"ref\": \"x\", \"value\": 2}'")
    assert report.explain().startswith("in sub-agent research (call p1), at step 2 the result of call k1")
    assert report.result.status == "model_error"
    assert [d.sentence for d in report.differences] == [report.divergence.sentence]


def test_a_lenient_replay_goes_on_past_a_childs_difference_and_collects_it(store: RunStore) -> None:
    run_id = _recorded(store)
    report = replay(run_id, planner(Counts(), unused(), value=2), source_store=store, strict=False)
    assert report.divergence is None
    assert report.result.status == "done"
    assert [d.sentence.partition(", at step")[0] for d in report.differences] == ["in sub-agent research (call p1)"]


def test_a_changed_subagent_system_prompt_is_a_divergence_inside_it(store: RunStore) -> None:
    run_id = _recorded(store)
    report = replay(run_id, planner(Counts(), unused(), system="You research carefully."), source_store=store)
    assert report.divergence is not None
    assert report.divergence.sentence == ("in sub-agent research (call p1), at step 1 the system prompt differs: "
                                          "recorded 'You research.', got 'You research carefully.'")


def test_two_levels_nest_and_a_divergence_names_each_level(store: RunStore) -> None:
    counts = Counts()
    research = scripted([reply("", call("d1", "deep", task="Check x.")), "research done"])
    deep = scripted([reply("", call("k1", "lookup", ref="z")), "deep done"])
    model = scripted([reply("", call("p1", "research", task="Find x.")), "all done"])
    result = run_agent("Find x.", model, planner(counts, research, deep=deep), store=store)
    assert result.status == "done"
    fixture = fixture_from_run(store.get_run(result.run_id), store)
    assert fixture.child("p1") is not None
    inner = fixture.child("p1")
    assert inner is not None
    assert inner.child("d1") is not None

    clean = replay(fixture, planner(Counts(), unused(), deep=unused()))
    assert clean.ok, clean.explain()
    changed = replay(fixture, planner(Counts(), unused(), deep=unused(), deep_value=5))
    assert changed.divergence is not None
    assert changed.divergence.sentence == (
        "in sub-agent research (call p1), in sub-agent deep (call d1), at step 2 the result of call k1 (lookup) "
        "differs: recorded '{\"ref\": \"z\", \"value\": 1}', got '{\"ref\": \"z\", \"value\": 5}'")


class Found(BaseModel):
    ref: str
    value: int


def test_a_typed_child_replays_and_its_missing_output_type_is_named(store: RunStore) -> None:
    research = scripted([reply("", call("k1", "lookup", ref="x")),
                         reply("", call("f1", "final_result", ref="x", value=1))])
    model = scripted([reply("", call("p1", "research", task="Find x.")), "x has value 1"])
    result = run_agent("Find x.", model, planner(Counts(), research, output_type=Found), store=store)
    assert result.status == "done"
    assert result.messages[3]["content"] == '{"ref": "x", "value": 1}'  # the parent read the child's typed result
    fixture = fixture_from_run(store.get_run(result.run_id), store)

    assert replay(fixture, planner(Counts(), unused(), output_type=Found)).ok
    untyped = replay(fixture, planner(Counts(), unused()))
    assert untyped.divergence is not None
    assert untyped.divergence.sentence == ("in sub-agent research (call p1), at step 1 the tools shown to the model "
                                           "differ from the recording: tool 'final_result' was removed")


def test_a_child_that_waited_for_approval_then_was_decided_replays_as_recorded(store: RunStore) -> None:
    counts = Counts()
    research = scripted([reply("", call("t1", "transfer", ref="x"))])
    model = scripted([reply("", call("p1", "research", task="Move x."))])
    halted = run_agent("Move x.", model, planner(counts, research, approvals=True), store=store)
    assert halted.status == "awaiting_approval"
    waiting = replay(fixture_from_run(store.get_run(halted.run_id), store), planner(Counts(), unused(),
                                                                                  approvals=True))
    assert waiting.ok, waiting.explain()  # the tree stopped with the call left open, as recorded
    assert waiting.result.status == "awaiting_approval"
    child_id = child_run_id(halted.run_id, "p1")
    assert store.decide(child_id, "t1", True)
    done = resume(store, halted.run_id, scripted(["moved"]), planner(counts, scripted(["transfer done"]),
                                                                      approvals=True))
    assert (done.status, done.answer, counts.ran) == ("done", "moved", {"research.transfer": 1})
    fixture = fixture_from_run(store.get_run(done.run_id), store)
    assert [r["status"] for r in fixture.resumes] == ["awaiting_approval"]
    child = fixture.child("p1")
    assert child is not None
    assert [r["decisions"] for r in child.resumes] == [{"t1": True}]

    again = Counts()
    report = replay(fixture, planner(again, unused(), approvals=True))
    assert report.ok, report.explain()
    assert again.ran == {}  # the approved transfer was served from the recording


def by_task(messages: Sequence[Message], specs: Sequence[ToolSpec]) -> ModelReply:
    """A research model for children running at once: it looks up the last word of its task, then answers."""
    ref = messages[1]["content"].split()[-1].rstrip(".")
    if any(m["role"] == "tool" for m in messages):
        return ModelReply(f"{ref} found")
    return reply("", call("k1", "lookup", ref=ref))


def test_calls_of_two_children_in_one_reply_replay_together(store: RunStore) -> None:
    model = scripted([reply("", call("p1", "research", task="Find a."), call("p2", "research", task="Find b.")),
                      "both found"])
    result = run_agent("Find a and b.", model, planner(Counts(), by_task), store=store)
    assert result.status == "done"
    fixture = fixture_from_run(store.get_run(result.run_id), store)
    assert sorted(fixture.data["children"]) == ["p1", "p2"]
    counts = Counts()
    report = replay(fixture, planner(counts, unused()))
    assert report.ok, report.explain()
    assert counts.ran == {"research.lookup": 2}


def test_a_fixture_without_its_childs_recording_is_a_one_line_divergence(store: RunStore, tmp_path: Path) -> None:
    run_id = _recorded(store)
    old = fixture_from_run(store.get_run(run_id))  # no store: as an older runner exported it
    assert "children" not in old.data
    path = old.write(tmp_path / "old.json")
    counts, research = Counts(), unused()
    report = replay(path, planner(counts, research))
    assert report.divergence is not None
    assert report.divergence.sentence == (
        "at step 1 the recording has no run of sub-agent research for call p1: the fixture holds no recording of "
        "the child run this sub-agent call ran (exported without its store, or by an older runner): export the run "
        "again; nothing was run")
    assert (counts.ran, research.calls) == ({}, 0)
    lenient = replay(path, planner(counts, research), strict=False)
    assert lenient.result.messages[3]["content"].startswith("ERROR: not run: the fixture holds no recording")
    assert (counts.ran, research.calls) == ({}, 0)


def test_a_bad_field_inside_a_childs_recording_is_named_by_its_path(store: RunStore, tmp_path: Path) -> None:
    path = store.export_fixture(_recorded(store), tmp_path / "tree.json")
    data = json.loads(path.read_text(encoding="utf-8"))
    del data["children"]["p1"]["replies"][0]["content"]
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(FixtureError, match=r"field 'children\.p1\.replies\[0\]\.content' is missing"):
        load_fixture(path)
    data["children"] = []
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(FixtureError, match="field 'children' must be an object, got array"):
        load_fixture(path)


def test_a_replay_into_a_store_keeps_the_tree_and_an_update_rewrites_the_childs_recording(
        store: RunStore, tmp_path: Path) -> None:
    path = store.export_fixture(_recorded(store), tmp_path / "tree.json")
    played = replay(path, planner(Counts(), unused()), store=store)
    assert played.ok
    child = store.get_run(child_run_id(played.result.run_id, "p1"))
    assert (child.parent_run_id, child.agent_name, child.status) == (played.result.run_id, "research", "done")

    updated = update_fixture(path, planner(Counts(), unused(), value=7))
    assert updated.wrote
    assert not updated.before.ok
    child_fixture = load_fixture(path).child("p1")
    assert child_fixture is not None
    assert child_fixture.replies[0]["observations"][0]["content"] == '{"ref": "x", "value": 7}'
    assert replay(path, planner(Counts(), unused(), value=7)).ok


def _chatty() -> ToolRegistry:
    tools = ToolRegistry()
    tools.register("echo", "Echo.", {"type": "object", "properties": {"text": {"type": "string"}},
                                     "required": ["text"]}, lambda text: text)
    return tools


def _talking(chatty: AnyModel) -> ToolRegistry:
    registry = ToolRegistry()
    registry.add_agent("chatty", model=chatty, registry=_chatty(), description="Talks a lot.",
                       limits=Limits(token_budget=1_000_000, max_steps=100))
    return registry


def test_a_child_stopped_on_the_trees_budget_halts_its_parent_again_and_goes_on_after_the_resume(
        store: RunStore) -> None:
    chatty = scripted([reply("", call(f"k{i}", "echo", text="x" * 400)) for i in range(30)] + ["finally"])
    parent = scripted([reply("", call("p1", "chatty", task="talk")), "done"])
    halted = run_agent("talk", parent, _talking(chatty), store=store, token_budget=3000)
    assert halted.status == "token_budget"
    stopped = fixture_from_run(store.get_run(halted.run_id), store)
    report = replay(stopped, _talking(unused()))
    assert report.ok, report.explain()
    assert report.result.status == "token_budget"

    done = resume(store, halted.run_id, parent, _talking(chatty), token_budget=100_000)
    assert done.status == "done"
    resumed = fixture_from_run(store.get_run(done.run_id), store)
    child = resumed.child("p1")
    assert child is not None
    assert [r["status"] for r in child.resumes] == ["token_budget"]
    again = replay(resumed, _talking(unused()))
    assert again.ok, again.explain()
    assert again.result.answer == "done"


def test_a_tree_cancelled_while_its_child_ran_replays_to_the_same_cancel(store: RunStore) -> None:
    started = threading.Event()
    tools = ToolRegistry()

    def wait_a_bit(n: int) -> str:
        started.set()
        time.sleep(0.1)
        return "waited"

    tools.register("wait_a_bit", "Take a moment.", {"type": "object", "properties": {"n": {"type": "integer"}},
                                                    "required": ["n"]}, wait_a_bit)

    def registry(model: AnyModel) -> ToolRegistry:
        made = ToolRegistry()
        made.add_agent("slow", model=model, registry=tools, description="Slow.", limits=Limits(max_steps=50))
        return made

    slow = scripted([reply("", call(f"k{i}", "wait_a_bit", n=i)) for i in range(50)])
    parent = scripted([reply("", call("p1", "slow", task="go slowly")), "never"])
    worker = threading.Thread(target=run_agent, args=("go", parent, registry(slow)),
                              kwargs={"store": store, "run_id": "cancel-tree"})
    worker.start()
    assert started.wait(10)
    store.request_cancel("cancel-tree", by="bob")
    worker.join(20)
    assert store.get_run("cancel-tree").status == "cancelled"
    report = replay(fixture_from_run(store.get_run("cancel-tree"), store), registry(unused()))
    assert report.ok, report.explain()
    assert report.result.status == "cancelled"


def test_a_replayed_childs_spans_are_under_its_parents_tool_span_in_one_trace(
        store: RunStore, live: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    provider, exporter = live
    fixture = fixture_from_run(store.get_run(_recorded(store)), store)
    assert replay(fixture, planner(Counts(), unused()), tracer_provider=provider).ok
    spans = {span.name: span for span in exporter.get_finished_spans()}
    child, call_span = spans["invoke_agent research"], spans["execute_tool research"]
    assert child.parent is not None
    assert child.parent.span_id == call_span.context.span_id
    assert len({span.context.trace_id for span in exporter.get_finished_spans()}) == 1


def test_an_update_of_a_fixture_without_its_childs_recording_refuses_and_leaves_the_file(
        store: RunStore, tmp_path: Path) -> None:
    path = fixture_from_run(store.get_run(_recorded(store))).write(tmp_path / "old.json")
    before = path.read_bytes()
    with pytest.raises(FixtureError, match=r"^fixture '.*old\.json' cannot be updated: at step 1 the recording has "
                                           r"no run of sub-agent research for call p1: the fixture holds no "
                                           r"recording of the child run"):
        update_fixture(path, planner(Counts(), unused()))
    assert path.read_bytes() == before


def test_runner_export_and_the_consoles_download_carry_the_children(store_url: str, tmp_path: Path) -> None:
    with open_store(store_url) as store:
        run_id = _recorded(store)
        expected = store.export_fixture(run_id, tmp_path / "api.json").read_text(encoding="utf-8")
        with TestClient(create_app(store), base_url="http://127.0.0.1:8000") as client:
            assert client.get(f"/runs/{run_id}/fixture.json").text == expected
    exported = invoke("export", run_id, "-o", "-", "--db", store_url)
    assert exported.exit_code == 0
    assert exported.output == expected
    assert list(json.loads(expected)["children"]) == ["p1"]
