"""Model-call costs in the stats: each call's under the model that made it, a resume's new model included."""

from __future__ import annotations

from runner import ModelReply, RunStore, ScriptedModel, Usage, resume, run_agent
from runner._log.tally import MODEL, Figures
from tests.loop.helpers import call, weather_registry

PRICES = {"priced": {"input_mtok": 100.0, "output_mtok": 1000.0}, "other": {"input_mtok": 1.0, "output_mtok": 1.0}}


def model(name: str, *replies: ModelReply | str) -> ScriptedModel:
    scripted = ScriptedModel(replies)
    scripted.model_name, scripted.provider_name = name, "mine"
    return scripted


def test_each_model_calls_cost_comes_with_the_model_that_made_it(store: RunStore) -> None:
    asked = ModelReply("", [call("c1", "get_weather", city="Paris")], Usage(1000, 100))  # $0.2 at "priced"
    first = run_agent("t", model("priced", asked), weather_registry(), run_id="a" * 32, store=store, prices=PRICES,
                      max_steps=1)
    resume(store, first.run_id, model("other", ModelReply("done", [], Usage(1000, 1000))), weather_registry(),
           max_steps=2, prices=PRICES)
    run_agent("t", model("unpriced", ModelReply("done", [], Usage(10, 5))), weather_registry(), run_id="b" * 32,
              store=store)
    run_agent("t", model("priced"), weather_registry(), run_id="c" * 32, store=store)  # no reply: the model failed
    found = store.stats()
    models = {key.name: found.total(key) for key in found.totals if key.kind == MODEL}
    assert models == {"mine:priced": Figures(number=2, cost_nusd=200_000_000),  # a's first call; c's got no reply
                      "mine:other": Figures(number=1, cost_nusd=2_000_000),  # resumed with another model
                      "mine:unpriced": Figures(number=1, unknown=1)}


def test_runs_older_than_costs_read_as_unknown_after_the_upgrade(store_url: str) -> None:
    from alembic import command

    from runner.store import open_store
    from runner.store.migrate import alembic_config

    with open_store(store_url) as store:
        asks = ModelReply("", [call("c1", "get_weather", city="Paris")], Usage(10, 5))
        replies: list[ModelReply | str] = [asks, "done"]
        old = run_agent("t", model("unpriced", *replies), weather_registry(), store=store).run_id
        silent = run_agent("t", model("unpriced"), weather_registry(), store=store).run_id  # no reply at all
        with store.engine.begin() as conn:
            command.downgrade(alembic_config(conn), "0004")  # as if recorded before costs were
    with open_store(store_url) as store:  # migrates to head, as ``runner db upgrade`` does
        runs = {run.run_id: run for run in store.list_runs()}
        assert (runs[old].cost_usd, runs[old].cost_known_usd, runs[old].costs_unknown) == (None, 0.0, 2)
        assert runs[silent].costs_unknown == 0  # its model never answered: no call to cost
        again = run_agent("t", model("unpriced", *replies), weather_registry(), store=store).run_id
        recorded_today = store.get_run(again)
        assert (recorded_today.cost_usd, recorded_today.costs_unknown) == (runs[old].cost_usd, runs[old].costs_unknown)
