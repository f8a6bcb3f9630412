"""``runner show`` of a fork or a follow-up: the conversation it inherited, by its parent's step, and the
observations a fork swapped, with the parent's original."""

from __future__ import annotations

import json

from runner import ScriptedModel, follow_up, fork, run_agent
from runner._view.inherited import inherited
from runner.cli.timeline import timeline
from runner.events import decode_all
from runner.store import open_store
from tests.cli.helpers import invoke
from tests.loop.helpers import call, reply, weather_registry

SWAPPED = '{"celsius": 35}'


def forked(store_url: str) -> tuple[str, str]:
    """A two-step run, and its fork at step 2 with the observation of its call c1 swapped."""
    with open_store(store_url) as store:
        parent = run_agent("Weather in Paris?", ScriptedModel([
            reply("Looking.", call("c1", "get_weather", city="Paris")), "It is 21C."]), weather_registry(),
            store=store)
        child = fork(store, parent.run_id, at_step=2, model=ScriptedModel(["It is 35C."]),
                     registry=weather_registry(), observations={"c1": SWAPPED})
    return parent.run_id, child.run_id


def test_show_of_a_fork_gives_the_inherited_steps_and_marks_the_swapped_observation(store_url: str) -> None:
    parent, child = forked(store_url)
    out = [line.rstrip() for line in invoke("show", child, "--db", store_url).stdout.splitlines()]
    start = out.index(f"inherited from run {parent}, before its step 2")
    assert out[start:start + 9] == [
        f"inherited from run {parent}, before its step 2",
        "",
        f"step 1 of run {parent} (inherited)",
        "  model",
        "    Looking.",
        '    → get_weather({"city": "Paris"})  [c1]',
        "  tool get_weather [c1]  swapped",
        f"    {SWAPPED}",
        '    original: {"celsius": 21}',
    ]
    assert out[start + 10].startswith("step 2  ")  # then the fork's own step
    assert out[out.index("task") + 1] == "  Weather in Paris?"  # the task once, not again among the inherited


def test_show_json_of_a_fork_adds_what_it_inherited(store_url: str) -> None:
    parent, child = forked(store_url)
    found = json.loads(invoke("show", child, "--db", store_url, "--json").stdout)
    assert list(found) == ["run", "events", "children", "inherited"]
    inherited = found["inherited"]
    assert {key: inherited[key] for key in ("parent_run_id", "origin", "forked_at_step", "parent_in_store")} == {
        "parent_run_id": parent, "origin": "fork", "forked_at_step": 2, "parent_in_store": True}
    assert [(m["message"]["role"], m["parent_step"], m["swapped"], m["original"]) for m in inherited["messages"]] \
        == [("system", 0, False, None), ("user", 0, False, None), ("assistant", 1, False, None),
            ("tool", 1, True, '{"celsius": 21}')]
    assert inherited["messages"][3]["message"]["content"] == SWAPPED
    assert json.loads(invoke("show", parent, "--db", store_url, "--json").stdout)["inherited"] is None


def test_show_of_a_follow_up_gives_the_whole_inherited_conversation_but_not_its_own_message(
        store_url: str) -> None:
    with open_store(store_url) as store:
        parent = run_agent("Weather in Paris?", ScriptedModel(["It is 21C."]), weather_registry(), store=store)
        child = follow_up(store, parent.run_id, "And in Oslo?", ScriptedModel(["Cold."]), weather_registry())
    out = [line.rstrip() for line in invoke("show", child.run_id, "--db", store_url).stdout.splitlines()]
    start = out.index(f"inherited from run {parent.run_id}, its whole conversation")
    assert out[start + 1:start + 7] == [
        "  user", "    Weather in Paris?", "", f"step 1 of run {parent.run_id} (inherited)", "  model",
        "    It is 21C."]
    assert out[out.index("task") + 1] == "  And in Oslo?"
    assert out.count("    And in Oslo?") == 0
    found = json.loads(invoke("show", child.run_id, "--db", store_url, "--json").stdout)["inherited"]
    assert [m["message"]["role"] for m in found["messages"]] == ["system", "user", "assistant"]


def test_without_the_parents_log_the_inherited_messages_are_shown_as_the_fork_logged_them(store_url: str) -> None:
    _, child = forked(store_url)
    with open_store(store_url) as store:
        run = store.get_run(child)
    carried = inherited(decode_all(run.events, run.run_id), None)
    assert carried is not None
    assert (carried.parent_in_store, [(m.parent_step, m.swapped) for m in carried.messages]) == (
        False, [(None, None)] * 4)
    lines = [line.plain for line in timeline(run, carried=carried)]
    after = lines[lines.index("  tool get_weather [c1]") + 1:]  # not marked swapped, no original
    assert (after[0], after[1].split("  ")[0]) == (f"    {SWAPPED}", "\nstep 2")
    assert any(line.startswith("  (that run is not in the store: ") for line in lines)
