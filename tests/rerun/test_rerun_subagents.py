"""Rerunning a tree of agents: the candidate's sub-agent calls run child runs on the candidate model, whose calls
are served from the baseline's children's recordings under the rerun's rules (a side effect never runs)."""

from __future__ import annotations

import json

from pydantic import BaseModel

from runner import ModelReply, ScriptedModel, rerun, run_agent
from runner._rerun.tools import ToolCounts
from runner._tools.agents import child_run_id
from runner.events import ToolFinished
from runner.store import RunStore
from tests.loop.helpers import call, reply
from tests.replay.trees import Counts, planner, scripted, unused
from tests.rerun.helpers import assert_rebuilt


def _baseline(store: RunStore, counts: Counts) -> str:
    """A planner that asks ``research`` (which looks x up and pays x), then pays y and answers."""
    research = scripted([reply("", call("k1", "lookup", ref="x"), call("k2", "pay", ref="x")), "found x"])
    model = scripted([reply("", call("p1", "research", task="Find x.")), reply("", call("c1", "pay", ref="y")),
                      "x is found"])
    result = run_agent("Find x and pay.", model, planner(counts, research), store=store)
    assert result.status == "done"
    return result.run_id


def candidate_model(replies: list[ModelReply | str]) -> ScriptedModel:
    """One scripted model for the whole candidate tree, named so its runs show it was the candidate's."""
    model = ScriptedModel(replies)
    model.model_name = "candidate"
    return model


def observations(store: RunStore, run_id: str) -> list[tuple[str, str]]:
    return [(f.name, f.observation) for f in store.get_run(run_id).facts if isinstance(f, ToolFinished)]


def test_a_tree_reruns_on_the_candidate_model_and_the_report_lists_what_changed(store: RunStore) -> None:
    counts = Counts()
    baseline = _baseline(store, counts)
    paid_before = dict(counts.ran)
    model = candidate_model([reply("", call("q1", "research", task="Find x.")),
                             reply("", call("m1", "lookup", ref="x"), call("m2", "pay", ref="z")), "found x",
                             "x is found"])
    report = rerun(store, [baseline], model)
    assert_rebuilt(store, report)  # the console reads the same report back
    case = report.cases[0]
    assert model.calls == 4  # the parent's two replies and its child's two: the child ran on the candidate model
    assert case.candidates[0].status == "done"
    assert "tool_calls" in case.changed  # the candidate's planner never paid y
    assert case.diffs() == [['  research {"task": "Find x."}', '- pay {"ref": "y"}']]
    assert case.tools == (ToolCounts(served=1, live=0, not_run=1),)  # counted across the tree
    assert counts.ran == paid_before  # nothing ran again, the side effects least of all

    candidate = case.candidates[0].run_id
    child = store.get_run(child_run_id(candidate, "q1"))
    assert (child.parent_run_id, child.agent_name, child.model, child.task) == (candidate, "research", "candidate",
                                                                                "Find x.")
    assert child.system == "You research."  # the baseline's child's, not the candidate's parent's
    served = observations(store, child.run_id)
    assert served[0] == ("lookup", '{"ref": "x", "value": 1}')
    assert served[1][0] == "pay"
    assert served[1][1].startswith("ERROR: not run: this call to pay (with these arguments) is not in the "
                                   "recording of run ")
    assert served[1][1].endswith("and this rerun has no live tools")
    assert observations(store, candidate) == [("research", "found x")]


def test_with_live_tools_a_childs_new_read_runs_live_and_its_new_side_effect_never_does(store: RunStore) -> None:
    baseline = _baseline(store, Counts())
    model = candidate_model([reply("", call("q1", "research", task="Find w.")),
                             reply("", call("m1", "lookup", ref="w"), call("m2", "pay", ref="w"),
                                   call("m3", "pay", ref="x")), "found w", "w is found"])
    live = Counts()
    report = rerun(store, [baseline], model, registry=planner(live, unused()))
    assert_rebuilt(store, report)  # the console reads the same report back
    assert report.cases[0].tools == (ToolCounts(served=1, live=1, not_run=1),)
    assert live.ran == {"research.lookup": 1}  # the new read ran; pay w never, and pay x was served
    child = child_run_id(report.cases[0].candidates[0].run_id, "q1")
    by_call = {m["tool_call_id"]: m["content"] for m in store.get_run(child).messages if m["role"] == "tool"}
    assert by_call["m1"] == '{"ref": "w", "value": 1}'
    assert by_call["m2"].endswith("pay has side effects, and a rerun never runs one")
    assert by_call["m3"] == '"payment 1 for x"'  # the baseline child's, served


def test_a_two_level_tree_reruns_two_levels_deep(store: RunStore) -> None:
    counts = Counts()
    research = scripted([reply("", call("d1", "deep", task="Check x.")), "research done"])
    deep = scripted([reply("", call("k1", "pay", ref="z")), "deep done"])
    result = run_agent("Find x.", scripted([reply("", call("p1", "research", task="Find x.")), "all done"]),
                       planner(counts, research, deep=deep), store=store)
    assert counts.ran == {"deep.pay": 1}
    model = candidate_model([reply("", call("q1", "research", task="Find x!")),
                             reply("", call("e1", "deep", task="Check x!")),
                             reply("", call("n1", "pay", ref="z")), "deep again", "research again", "all again"])
    report = rerun(store, [result.run_id], model)
    assert_rebuilt(store, report)  # the console reads the same report back
    assert counts.ran == {"deep.pay": 1}
    case = report.cases[0]
    assert (case.candidates[0].status, case.candidates[0].answer) == ("done", "all again")
    assert case.tools == (ToolCounts(served=1, live=0, not_run=0),)
    middle = child_run_id(case.candidates[0].run_id, "q1")
    inner = child_run_id(middle, "e1")
    assert observations(store, inner) == [("pay", '"payment 1 for z"')]
    assert store.get_run(inner).model == "candidate"


class Found(BaseModel):
    ref: str
    value: int


def test_a_typed_childs_candidate_ends_with_the_recorded_schema(store: RunStore) -> None:
    research = scripted([reply("", call("f1", "final_result", ref="x", value=1))])
    result = run_agent("Find x.", scripted([reply("", call("p1", "research", task="Find x.")), "x is 1"]),
                       planner(Counts(), research, output_type=Found), store=store)
    assert result.status == "done"
    model = candidate_model([reply("", call("q1", "research", task="Find x.")),
                             reply("", call("g1", "final_result", ref="x", value=2)), "x is 2"])
    report = rerun(store, [result.run_id], model)
    assert_rebuilt(store, report)  # the console reads the same report back
    case = report.cases[0]
    assert case.changed == ("answer",)
    child = store.get_run(child_run_id(case.candidates[0].run_id, "q1"))
    assert child.output == {"ref": "x", "value": 2}
    assert json.loads(observations(store, case.candidates[0].run_id)[0][1]) == {"ref": "x", "value": 2}


def test_a_subagent_the_baseline_never_called_is_not_run(store: RunStore) -> None:
    result = run_agent("Find x.", scripted(["nothing to find"]), planner(Counts(), unused()), store=store)
    model = candidate_model([reply("", call("q1", "research", task="Find x.")), "gave up"])
    live = Counts()
    report = rerun(store, [result.run_id], model, registry=planner(live, unused()))
    assert_rebuilt(store, report)  # the console reads the same report back
    case = report.cases[0]
    assert (case.candidates[0].answer, case.tools, live.ran) == ("gave up", (ToolCounts(0, 0, 1),), {})
    [(_, observation)] = observations(store, case.candidates[0].run_id)
    assert observation.endswith("research is a sub-agent none of whose runs the baseline holds, so its tools are "
                                "not recorded")
    assert store.children(case.candidates[0].run_id) == []


def test_the_cli_selects_a_trees_root_as_a_baseline_never_its_children(store: RunStore) -> None:
    from runner.cli.rerun import selected

    root = _baseline(store, Counts())
    assert child_run_id(root, "p1") in {run.run_id for run in store.list_runs()}
    assert selected(store, (), None, {}, None, 20) == [root]
