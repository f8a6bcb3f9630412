"""A resume whose cost budget cannot be counted is refused before it takes the run over."""

from __future__ import annotations

import pytest

from runner import ModelReply, RunStore, ScriptedModel, Usage, resume, run_agent
from runner.errors import PriceUnknown
from tests.loop.helpers import call, weather_registry


def test_a_resume_with_a_budget_on_an_unpriced_model_leaves_the_run_as_it_was(store: RunStore) -> None:
    first = run_agent("t", ScriptedModel([ModelReply("", [call("c1", "get_weather", city="Paris")], Usage(10, 5))]),
                      weather_registry(), store=store, max_steps=1)
    assert first.status == "step_limit"
    before = store.get_run(first.run_id)
    with pytest.raises(PriceUnknown, match=r"^no price for model 'scripted' \(scripted\), so max_cost_usd=1 "):
        resume(store, first.run_id, ScriptedModel(["done"]), weather_registry(), max_steps=3, max_cost_usd=1.0)
    after = store.get_run(first.run_id)
    assert (after.status, after.owner, len(after.events)) == ("step_limit", before.owner, len(before.events))
    again = resume(store, first.run_id, ScriptedModel(["done"]), weather_registry(), max_steps=3)
    assert (again.status, again.answer) == ("done", "done")  # not held by the refused resume
