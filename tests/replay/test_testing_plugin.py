"""The pytest plugin, exercised by real pytest runs of test files that use its fixtures."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runner import ScriptedModel, ToolRegistry, run_agent
from runner._replay.fixture import fixture_from_run, load_fixture
from runner.store import open_store
from tests.loop.helpers import call, reply, weather_registry

pytest_plugins = ["pytester"]

TOOLS = '''
from runner import ModelReply, ScriptedModel, ToolCall, ToolRegistry

def registry(celsius=21, description="Current temperature in a city."):
    reg = ToolRegistry()
    reg.register("get_weather", description,
                 {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
                 lambda city: {"celsius": celsius})
    return reg

def real_model():
    return ScriptedModel([ModelReply("", [ToolCall("c1", "get_weather", {"city": "Paris"})]), "21 C"])
'''


def _record(tmp_path: Path, target: Path) -> None:
    """Record the run ``TOOLS``'s ``registry()`` replays: the same one tool, Paris at 21 C."""
    tools = ToolRegistry()
    weather = weather_registry().get("get_weather")
    assert weather is not None
    tools.register(weather.name, weather.description, weather.parameters, weather.fn)
    with open_store(f"sqlite:///{tmp_path / 'rec.db'}") as store:
        model = ScriptedModel([reply("", call("c1", "get_weather", city="Paris")), "21 C"])
        result = run_agent("Weather in Paris?", model, tools, store=store)
        fixture_from_run(store.get_run(result.run_id)).write(target)


def test_replay_of_a_recorded_fixture_passes(pytester: pytest.Pytester, tmp_path: Path) -> None:
    _record(tmp_path, pytester.path / "fixtures" / "weather.json")
    pytester.makepyfile(tools=TOOLS, test_weather='''
from tools import registry

def test_weather(runner_replay):
    report = runner_replay("fixtures/weather.json", registry())
    assert report.result.answer == "21 C"
''')
    result = pytester.runpytest()
    result.assert_outcomes(passed=1)


def test_a_changed_tool_fails_with_the_divergence_sentence(pytester: pytest.Pytester, tmp_path: Path) -> None:
    _record(tmp_path, pytester.path / "fixtures" / "weather.json")
    pytester.makepyfile(tools=TOOLS, test_weather='''
from tools import registry

def test_weather(runner_replay):
    runner_replay("fixtures/weather.json", registry(celsius=30))
''')
    result = pytester.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*at step 2 the result of call c1 (get_weather) differs: recorded '{\"celsius\": 21}', "
        "got '{\"celsius\": 30}'*"])


def test_a_changed_tool_description_fails_with_the_tool_specs_sentence(
        pytester: pytest.Pytester, tmp_path: Path) -> None:
    _record(tmp_path, pytester.path / "fixtures" / "weather.json")
    pytester.makepyfile(tools=TOOLS, test_weather='''
from tools import registry

def test_weather(runner_replay):
    runner_replay("fixtures/weather.json", registry(description="Weather now."))
''')
    result = pytester.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*at step 1 the tools shown to the model differ from the recording: the description of tool "
        "'get_weather' changed: recorded 'Current temperature in a city.', got 'Weather now.'*"])


def test_a_missing_fixture_fails_in_the_default_mode(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(tools=TOOLS, test_weather='''
from tools import registry, real_model

def test_weather(runner_replay):
    runner_replay("fixtures/new.json", registry(), real_model(), task="Weather in Paris?")
''')
    result = pytester.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*runner fixture 'fixtures/new.json' is missing; record it with pytest "
                                 "--runner-record*"])
    assert not (pytester.path / "fixtures" / "new.json").exists()


def test_record_mode_writes_the_fixture_then_replay_mode_uses_it(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(tools=TOOLS, test_weather='''
from tools import registry, real_model

def test_weather(runner_replay):
    report = runner_replay("fixtures/new.json", registry(), real_model(), task="Weather in Paris?")
    assert report.result.answer == "21 C"
''')
    pytester.runpytest("--runner-record").assert_outcomes(passed=1)
    written = pytester.path / "fixtures" / "new.json"
    assert written.exists()
    first = written.read_bytes()
    pytester.runpytest().assert_outcomes(passed=1)
    assert written.read_bytes() == first


def test_an_accidental_real_model_call_in_replay_mode_fails_the_test(
        pytester: pytest.Pytester, tmp_path: Path) -> None:
    _record(tmp_path, pytester.path / "fixtures" / "weather.json")
    pytester.makepyfile(tools=TOOLS, test_weather='''
import openai
from runner import run_agent
from runner.adapters import OpenAIModel
from tools import registry

def test_weather(runner_replay):
    runner_replay("fixtures/weather.json", registry())
    client = openai.OpenAI(api_key="x", base_url="http://127.0.0.1:9/v1", max_retries=0)
    result = run_agent("t", OpenAIModel(client, "gpt-test"), registry())
    client.close()
    assert result.status == "model_error"
''')
    result = pytester.runpytest()
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*a real model was called in replay mode: OpenAIModel(gpt-test)*"])


def test_scripted_model_fixture_fails_when_replies_are_left(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_script='''
from runner import ToolRegistry, run_agent

def test_leftover(scripted_model):
    model = scripted_model(["one", "two"])
    assert run_agent("t", model, ToolRegistry()).answer == "one"
''')
    result = pytester.runpytest()
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*scripted model was called 1 time for 2 replies*"])


def test_runner_store_fixture_gives_a_fresh_store(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_store='''
from runner import ScriptedModel, ToolRegistry, run_agent

def test_store(runner_store):
    assert runner_store.list_runs() == []
    result = run_agent("t", ScriptedModel(["ok"]), ToolRegistry(), store=runner_store)
    assert [r.run_id for r in runner_store.list_runs()] == [result.run_id]
''')
    pytester.runpytest().assert_outcomes(passed=1)


PAYING = '''
from runner import ToolRegistry

PAID = []

def registry():
    reg = ToolRegistry()
    reg.register("pay", "Pay (writes).",
                 {"type": "object", "properties": {"ref": {"type": "string"}}, "required": ["ref"]},
                 lambda ref: PAID.append(ref) or f"paid {ref}", side_effects=True)
    return reg
'''


def test_replay_serves_a_recorded_side_effect_unless_live_side_effects_is_given(
        pytester: pytest.Pytester, tmp_path: Path) -> None:
    paid: list[str] = []

    def pay(ref: str) -> str:
        paid.append(ref)
        return f"paid {ref}"

    tools = ToolRegistry()
    tools.register("pay", "Pay (writes).",
                   {"type": "object", "properties": {"ref": {"type": "string"}}, "required": ["ref"]},
                   pay, side_effects=True)
    with open_store(f"sqlite:///{tmp_path / 'rec.db'}") as store:
        result = run_agent("Pay p1.", ScriptedModel([reply("", call("c1", "pay", ref="p1")), "paid"]), tools,
                           store=store)
        store.export_fixture(result.run_id, pytester.path / "fixtures" / "pay.json")
    assert paid == ["p1"]
    pytester.makepyfile(paying=PAYING, test_pay='''
from paying import PAID, registry

def test_served(runner_replay):
    PAID.clear()
    runner_replay("fixtures/pay.json", registry())
    assert PAID == []

def test_live(runner_replay):
    PAID.clear()
    report = runner_replay("fixtures/pay.json", registry(), live_side_effects=True)
    assert PAID == ["p1"]
    assert report.ok
''')
    pytester.runpytest().assert_outcomes(passed=2)


def test_runner_update_rewrites_a_fixture_that_differs_keeping_the_recorded_replies(
        pytester: pytest.Pytester, tmp_path: Path) -> None:
    target = pytester.path / "fixtures" / "weather.json"
    _record(tmp_path, target)
    before = load_fixture(target)
    pytester.makepyfile(tools=TOOLS, test_weather='''
from tools import registry

def test_weather(runner_replay):
    runner_replay("fixtures/weather.json", registry(celsius=30))
''')
    failed = pytester.runpytest()
    failed.assert_outcomes(failed=1)
    failed.stdout.fnmatch_lines(["*if the change is intended, pytest --runner-update rewrites the fixture from the "
                                 "current tools (the model's replies kept)*"])
    pytester.runpytest("--runner-update").assert_outcomes(passed=1)
    after = load_fixture(target)
    assert said(after.replies) == said(before.replies)
    assert [m["content"] for m in after.messages() if m["role"] == "tool"] == ['{"celsius": 30}']
    pytester.runpytest().assert_outcomes(passed=1)  # the fixture now says what the tool returns


def said(replies: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What the model said in each reply (a reply in a fixture also keeps what its calls returned)."""
    return [{key: value for key, value in reply.items() if key != "observations"} for reply in replies]


TREE = '''
from runner import ModelReply, ScriptedModel, ToolCall, ToolRegistry

REF = {"type": "object", "properties": {"ref": {"type": "string"}}, "required": ["ref"]}

def registry(value=1, research=None):
    below = ToolRegistry()
    below.register("lookup", "Look up (reads).", REF, lambda ref: {"ref": ref, "value": value})
    top = ToolRegistry()
    top.add_agent("research", model=research or ScriptedModel([]), registry=below, description="Researches.")
    return top

def real_models():
    research = ScriptedModel([ModelReply("", [ToolCall("k1", "lookup", {"ref": "x"})]), "found x"])
    planner = ScriptedModel([ModelReply("", [ToolCall("p1", "research", {"task": "Find x."})]), "done"])
    return planner, registry(research=research)
'''


def test_the_plugin_records_a_tree_and_replays_it_naming_a_change_inside_the_child(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(tree=TREE, test_tree='''
import os
from tree import real_models, registry

def test_tree(runner_replay):
    if os.path.exists("fixtures/tree.json"):
        runner_replay("fixtures/tree.json", registry(value=int(os.environ.get("VALUE", "1"))))
    else:
        planner, tools = real_models()
        runner_replay("fixtures/tree.json", tools, planner, task="Find x.")
''')
    pytester.runpytest("--runner-record").assert_outcomes(passed=1)
    assert list(load_fixture(pytester.path / "fixtures" / "tree.json").data["children"]) == ["p1"]
    pytester.runpytest().assert_outcomes(passed=1)
    monkeypatch.setenv("VALUE", "2")
    changed = pytester.runpytest()
    changed.assert_outcomes(failed=1)
    changed.stdout.fnmatch_lines(["*in sub-agent research (call p1), at step 2 the result of call k1 (lookup) "
                                  "differs: recorded '{\"ref\": \"x\", \"value\": 1}', got '{\"ref\": \"x\", "
                                  "\"value\": 2}'*"])
