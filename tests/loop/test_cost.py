"""Cost as a fact: each model call's USD from its usage and a price, and ``max_cost_usd`` as a hard budget."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runner import ModelReply, ScriptedModel, ToolRegistry, Usage, resume, run_agent
from runner.errors import PriceUnknown
from runner.events import EventDecodeError, ModelCalled, decode, encode
from runner.prices import Cost, Price, PriceBook, load_prices
from runner.store import RunStore
from tests.loop.helpers import call

PRICES = {"my-model": {"input_mtok": 100.0, "output_mtok": 1000.0}}  # USD per million tokens in and out


def model(*replies: ModelReply | str, name: str = "my-model", provider: str = "mine") -> ScriptedModel:
    scripted = ScriptedModel(replies)
    scripted.model_name, scripted.provider_name = name, provider
    return scripted


def used(content: str = "", *calls: object, input_tokens: int = 1000, output_tokens: int = 100) -> ModelReply:
    """A reply that reports usage: 1,000 in and 100 out cost 0.1 + 0.1 = 0.2 USD at ``PRICES``."""
    return ModelReply(content, list(calls), Usage(input_tokens, output_tokens))  # type: ignore[arg-type]


def tools(ran: list[str]) -> ToolRegistry:
    registry = ToolRegistry()
    registry.register("pay", "Pay.", {"type": "object", "properties": {}},
                      lambda: ran.append("pay") or "paid", side_effects=True)  # type: ignore[func-returns-value]
    return registry


def costs(store: RunStore, run_id: str) -> list[float | None]:
    return [f.cost_usd for f in store.get_run(run_id).facts if isinstance(f, ModelCalled)]


def test_each_model_call_records_its_cost_and_price_source(store: RunStore) -> None:
    result = run_agent("t", model(used("", call("c1", "pay")), used("done")), tools([]), store=store, prices=PRICES)
    assert result.status == "done"
    assert costs(store, result.run_id) == [pytest.approx(0.2), pytest.approx(0.2)]
    sources = {f.price_source for f in store.get_run(result.run_id).facts if isinstance(f, ModelCalled)}
    assert sources == {"given"}


def test_no_usage_or_no_price_is_no_cost(store: RunStore) -> None:
    result = run_agent("t", model("done"), tools([]), store=store, prices=PRICES)  # no usage reported
    assert costs(store, result.run_id) == [None]
    result = run_agent("t", model(used("done"), name="unpriced-model"), tools([]), store=store)
    assert costs(store, result.run_id) == [None]


def test_genai_prices_prices_a_known_model(store: RunStore) -> None:
    reply = ModelReply("done", [], Usage(1_000_000, 1_000_000))
    result = run_agent("t", model(reply, name="gpt-4o-mini", provider="openai"), tools([]), store=store)
    called = next(f for f in store.get_run(result.run_id).facts if isinstance(f, ModelCalled))
    assert called.cost_usd == pytest.approx(0.15 + 0.60)  # gpt-4o-mini: $0.15 in, $0.60 out per M
    assert called.price_source is not None
    assert called.price_source.startswith("genai-prices ")
    assert called.price_source.endswith(" openai:gpt-4o-mini")


def test_cached_prompt_tokens_take_their_price() -> None:
    price = Price(input_mtok=1.0, output_mtok=0.0, cache_read_mtok=0.1, cache_write_mtok=2.0)
    usage = Usage(1_000_000, 0, cache_read_tokens=500_000, cache_write_tokens=100_000)
    assert price.cost(usage).usd == pytest.approx(0.4 * 1.0 + 0.5 * 0.1 + 0.1 * 2.0)
    assert Price(1.0, 0.0).cost(usage).usd == pytest.approx(1.0)  # no cache price: the input price


def test_the_budget_stops_the_run_at_the_reply_that_crossed_it_before_its_calls_run(store: RunStore) -> None:
    ran: list[str] = []
    script = model(used("", call("c1", "pay")), used("", call("c2", "pay")), used("done"))
    result = run_agent("t", script, tools(ran), store=store, prices=PRICES, max_cost_usd=0.3)
    assert result.status == "cost_limit"
    assert ran == ["pay"]  # the first reply's call ran; the second reply crossed 0.3 and its call did not
    assert costs(store, result.run_id) == [pytest.approx(0.2), pytest.approx(0.2)]
    assert "max_cost_usd=$0.3" in (result.error or "")
    # resumed with a larger budget, it runs the paid-for reply's call and goes on
    more = resume(store, result.run_id, script, tools(ran), prices=PRICES, max_cost_usd=1.0)
    assert more.status == "done"
    assert ran == ["pay", "pay"]


def test_a_resume_without_a_larger_budget_stops_before_another_model_call(store: RunStore) -> None:
    script = model(used("", call("c1", "pay")), used("", call("c2", "pay")))
    first = run_agent("t", script, tools([]), store=store, prices=PRICES, max_cost_usd=0.2)
    assert first.status == "cost_limit"
    again = resume(store, first.run_id, model(), tools([]), prices=PRICES)
    assert again.status == "cost_limit"
    assert len(costs(store, first.run_id)) == 1


def test_a_budget_for_a_model_with_no_price_is_refused_before_the_run_starts(store: RunStore) -> None:
    with pytest.raises(PriceUnknown, match=r"no price for model 'unpriced-model' \(mine\).*prices="):
        run_agent("t", model("x", name="unpriced-model"), tools([]), store=store, max_cost_usd=1.0)
    assert store.list_runs() == []


def test_a_forged_cost_in_the_log_does_not_decode() -> None:
    kind, data = encode(ModelCalled(step=1, prompt_tokens=1, cost_usd=0.5, price_source="given"))
    assert decode(kind, data, 1) == ModelCalled(step=1, prompt_tokens=1, cost_usd=0.5, price_source="given")
    for forged in ("0.5", -1, float("nan"), True):
        with pytest.raises(EventDecodeError, match="cost_usd"):
            decode(kind, {**data, "cost_usd": forged}, 1)


def test_prices_files_in_toml_and_json(tmp_path: Path) -> None:
    (tmp_path / "p.toml").write_text('[my-model]\ninput_mtok = 0.3\noutput_mtok = 1.2\n', encoding="utf-8")
    (tmp_path / "p.json").write_text('{"my-model": {"input_mtok": 0.3, "output_mtok": 1.2}}', encoding="utf-8")
    assert load_prices(tmp_path / "p.toml") == load_prices(tmp_path / "p.json") == {"my-model": Price(0.3, 1.2)}
    (tmp_path / "bad.toml").write_text('[m]\ninput_mtok = -1\noutput_mtok = 1\n', encoding="utf-8")
    with pytest.raises(ValueError, match="price of 'm': price input_mtok must be a non-negative number"):
        load_prices(tmp_path / "bad.toml")
    with pytest.raises(ValueError, match="unknown key"):
        PriceBook({"m": {"input_mtok": 1, "output_mtok": 1, "per_call": 2}})


def test_the_runs_row_adds_up_the_costs_and_counts_the_unknown(store: RunStore) -> None:
    priced = run_agent("t", model(used("", call("c1", "pay")), used("done")), tools([]), store=store, prices=PRICES)
    found = store.get_run(priced.run_id)
    assert found.cost_known_usd == pytest.approx(0.4)
    assert found.costs_unknown == 0
    assert found.cost_usd == pytest.approx(0.4)
    partly = run_agent("t", model(used("", call("c1", "pay")), "done"), tools([]), store=store, prices=PRICES)
    listed = next(run for run in store.list_runs() if run.run_id == partly.run_id)
    assert listed.cost_known_usd == pytest.approx(0.2)
    assert (listed.costs_unknown, listed.cost_usd) == (1, None)


def test_the_result_carries_the_cost_the_stored_run_shows(store: RunStore) -> None:
    priced = run_agent("t", model(used("", call("c1", "pay")), used("done")), tools([]), store=store, prices=PRICES)
    assert priced.cost_usd == pytest.approx(0.4)
    assert priced.cost_known_usd == pytest.approx(0.4)
    partly = run_agent("t", model(used("", call("c1", "pay")), "done"), tools([]), prices=PRICES)  # no store needed
    assert partly.cost_usd is None
    assert partly.cost_known_usd == pytest.approx(0.2)
    stopped = run_agent("t", model(used("", call("c1", "pay")), used("done")), tools([]), store=store, prices=PRICES,
                        max_cost_usd=0.1)
    assert stopped.status == "cost_limit"
    resumed = resume(store, stopped.run_id, model(used("done")), tools([]), prices=PRICES, max_cost_usd=5.0)
    assert resumed.status == "done"
    assert resumed.cost_usd == pytest.approx(0.4)  # the whole run's, as the row says
    assert store.get_run(stopped.run_id).cost_usd == pytest.approx(0.4)


def test_a_store_at_an_older_revision_reads_with_no_cost(store_url: str, tmp_path: Path) -> None:
    from alembic import command

    from runner.store import open_store
    from runner.store.migrate import alembic_config

    if not store_url.startswith("sqlite"):
        pytest.skip("one backend is enough for the read path")
    with open_store(store_url) as store:
        run_id = run_agent("t", model(used("done")), tools([]), store=store, prices=PRICES).run_id
        with store.engine.begin() as conn:
            command.downgrade(alembic_config(conn), "0004")
    with open_store(store_url, read_only=True) as old:
        run = old.get_run(run_id)
        assert (run.cost_known_usd, run.costs_unknown) == (0.0, 0)
        assert [r.run_id for r in old.list_runs()] == [run_id]
        assert [f.cost_usd for f in run.facts if isinstance(f, ModelCalled)] == [pytest.approx(0.2)]


def test_replay_reproduces_a_cost_limit_stop_with_the_recorded_costs(store: RunStore, tmp_path: Path) -> None:
    from runner import replay
    from runner.prices import Price

    ran: list[str] = []
    script = model(used("", call("c1", "pay")), used("", call("c2", "pay")), used("done"))
    result = run_agent("t", script, tools(ran), store=store, prices=PRICES, max_cost_usd=0.3)
    assert result.status == "cost_limit"
    path = store.export_fixture(result.run_id, tmp_path / "run.json")
    fixture = path.read_text(encoding="utf-8")
    assert '"cost_usd": 0.2' in fixture
    assert '"price_source": "given"' in fixture
    # today's prices differ (none given, a free model): the replay still counts the recorded costs
    report = replay(path, tools([]), prices={"my-model": Price(0.0, 0.0)})
    assert report.divergence is None
    assert report.result.status == "cost_limit"


def test_chat_spans_carry_openinference_costs_live_and_rebuilt(store: RunStore,
                                                               live: tuple[Any, Any]) -> None:
    from runner.tracing.rebuild import rebuild_spans

    provider, exporter = live
    result = run_agent("t", model(used("", call("c1", "pay")), "done"), tools([]), store=store, prices=PRICES,
                       tracer_provider=provider)
    live_costs = [dict(span.attributes or {}) for span in exporter.get_finished_spans()
                  if span.name.startswith("chat")]
    found = [(a.get("llm.cost.total"), a.get("llm.cost.prompt"), a.get("llm.cost.completion")) for a in live_costs]
    assert found == [(pytest.approx(0.2), pytest.approx(0.1), pytest.approx(0.1)), (None, None, None)]
    rebuilt = [dict(span.attributes or {}) for span in rebuild_spans(store.get_run(result.run_id))
               if span.name.startswith("chat")]
    assert rebuilt == live_costs


def test_a_reply_with_no_usage_under_a_budget_stops_the_run_cost_limit_and_a_resume_goes_on(store: RunStore) -> None:
    ran: list[str] = []
    script = model(ModelReply("", [call("c1", "pay")]), used("done"))  # the first reports no usage
    result = run_agent("t", script, tools(ran), store=store, prices=PRICES, max_cost_usd=5.0)
    assert result.status == "cost_limit"
    assert result.error == ("the reply's cost is unknown (the provider reported no token usage), so "
                            "max_cost_usd=$5 cannot be counted; the reply's calls were not run")
    assert (ran, costs(store, result.run_id)) == ([], [None])
    more = resume(store, result.run_id, script, tools(ran), prices=PRICES, max_cost_usd=10.0)
    assert (more.status, more.answer, ran) == ("done", "done", ["pay"])  # the paid-for reply's call ran
    assert more.cost_usd is None
    assert more.cost_known_usd == pytest.approx(0.2)


class PriceLost(PriceBook):
    """A price book that knows the model when the run starts but has no price for its second call."""

    def __init__(self) -> None:
        super().__init__(PRICES)
        self.calls = 0

    def cost(self, provider: str | None, name: str, usage: Usage | None) -> Cost | None:
        self.calls += 1
        return super().cost(provider, name, usage) if self.calls == 1 else None


def test_a_reply_whose_cost_cannot_be_priced_mid_run_stops_the_run_cost_limit(store: RunStore) -> None:
    ran: list[str] = []
    script = model(used("", call("c1", "pay")), used("", call("c2", "pay")), used("done"))
    result = run_agent("t", script, tools(ran), store=store, prices=PriceLost(), max_cost_usd=5.0)
    assert result.status == "cost_limit"
    assert result.error == ("the reply's cost is unknown (there is no price for the model), so max_cost_usd=$5 "
                            "cannot be counted; the reply's calls were not run")
    assert (ran, costs(store, result.run_id)) == (["pay"], [pytest.approx(0.2), None])
    more = resume(store, result.run_id, script, tools(ran), prices=PRICES, max_cost_usd=5.0)  # prices given now
    assert (more.status, ran) == ("done", ["pay", "pay"])
    assert costs(store, result.run_id) == [pytest.approx(0.2), None, pytest.approx(0.2)]


def test_a_final_answer_with_no_usage_under_a_budget_is_not_taken(store: RunStore) -> None:
    """As a final answer that crosses the budget is not: the run stops ``cost_limit`` and a resume asks again."""
    script = model(used("", call("c1", "pay")), "the answer", used("the answer, counted"))
    result = run_agent("t", script, tools([]), store=store, prices=PRICES, max_cost_usd=5.0)
    assert (result.status, result.answer, result.cost_usd) == ("cost_limit", None, None)
    assert result.error is not None
    assert "the provider reported no token usage" in result.error
    more = resume(store, result.run_id, script, tools([]), prices=PRICES, max_cost_usd=5.0)
    assert (more.status, more.answer) == ("done", "the answer, counted")


def test_without_a_budget_a_reply_with_no_usage_goes_on_at_an_unknown_cost(store: RunStore) -> None:
    ran: list[str] = []
    result = run_agent("t", model(ModelReply("", [call("c1", "pay")]), "done"), tools(ran), store=store,
                       prices=PRICES)
    assert (result.status, ran, result.cost_usd, result.cost_known_usd) == ("done", ["pay"], None, 0.0)
