"""Each model call's input, read back from the log by ``_view.timeline``, is what the model was sent.

Scripted models keep a copy of what each call was sent; a call's input (the call before's, then its
``fresh`` messages) must equal it exactly, for a run with tools, a resumed run and a fork, on both stores.
"""

from __future__ import annotations

from runner import ScriptedModel, fork, resume, run_agent
from runner._view.timeline import ModelEntry, entries
from runner.messages import Message
from runner.store import RunStore
from tests.loop.helpers import call, reply, weather_registry
from tests.ui.money import money


def inputs(store: RunStore, run_id: str) -> list[list[Message]]:
    """What each model call of ``run_id`` was sent, as its timeline rebuilds it."""
    found: list[list[Message]] = []
    for entry in entries(store.get_run(run_id)):
        if isinstance(entry, ModelEntry):
            sent = [*(found[-1] if found and entry.earlier else []), *entry.fresh]
            assert len(sent) == entry.seen
            found.append(sent)
    return found


def test_a_runs_calls_were_sent_what_the_timeline_says(store: RunStore) -> None:
    model = ScriptedModel([reply("Looking.", call("c1", "get_weather", city="Paris"),
                                 call("c2", "get_weather", city="Rome")), "Both sunny."])
    result = run_agent("Weather in Paris and Rome?", model, weather_registry(), store=store, system="Be brief.")
    shown = inputs(store, result.run_id)
    assert shown == model.seen
    assert [len(messages) for messages in shown] == [2, 5]


def test_a_resumed_runs_calls_and_a_forks_were_sent_what_the_timeline_says(store: RunStore) -> None:
    asked = ScriptedModel([reply("", call("t1", "transfer", ref="bob"))])
    first = run_agent("Send 5 to bob", asked, money([]), store=store)
    assert first.status == "awaiting_approval"
    then = ScriptedModel(["Sent."])
    resume(store, first.run_id, then, money([]), decisions={"t1": "not today"})
    assert inputs(store, first.run_id) == [*asked.seen, *then.seen]
    assert then.seen[0][-1]["role"] == "tool"  # the denial the model read is in the input shown

    forked = ScriptedModel(["Not sent."])
    child = fork(store, first.run_id, at_step=2, model=forked, registry=money([]),
                 observations={"t1": "ERROR: the bank is closed"})
    assert inputs(store, child.run_id) == forked.seen
    assert forked.seen[0][-1]["content"] == "ERROR: the bank is closed"
