"""``Tally``: what a run's facts add to the stats' rollups, and the latency buckets' bounds."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from runner._log import tally
from runner._log.tally import BOUNDS, LAST_BUCKET, MODEL, RUN, STEP, TOOL, TOOL_STEPS, Figures, Key, Tally
from runner._view.stats import latency
from runner.events import ModelCalled, RunResumed, RunStarted, StepFinished, StepStarted, ToolFinished, ToolStarted
from runner.messages import ModelReply, ToolCall, Usage

T0 = datetime(2026, 12, 2, 10, tzinfo=UTC)


def asks(*names: str, tokens: int = 10) -> ModelReply:
    return ModelReply("", [ToolCall(f"c{i}", name, {}) for i, name in enumerate(names)], Usage(tokens, 0))


def test_each_bucket_holds_latencies_up_to_its_bound_at_most_nine_percent_above() -> None:
    assert [tally.bucket_of(m) for m in (0, 1000, 1001, BOUNDS[5], BOUNDS[5] + 1, 10**15)] == [0, 0, 1, 5, 6,
                                                                                              LAST_BUCKET]
    rng = random.Random(35)
    for _ in range(2000):
        micros = rng.randint(1001, BOUNDS[-2])
        bound = tally.upper_bound(tally.bucket_of(micros)) * 1e6
        assert micros <= bound <= micros * 2 ** (1 / 8) + 1


def test_a_step_and_its_calls_fill_their_rows() -> None:
    run = Tally()
    run.feed(RunStarted(run_id="r", task="t", system="s", limits={}, tool_specs=[], model="m", provider="p"))
    run.feed(StepStarted(step=1), T0)
    run.feed(ModelCalled(step=1, prompt_tokens=3, reply=asks("a", "b", tokens=7), cost_usd=0.5))
    run.feed(ToolStarted(step=1, call_id="c0", name="a", args={}))
    run.feed(ToolFinished(step=1, call_id="c0", name="a", observation="ok", ok=True, duration_s=0.3))
    run.feed(ToolStarted(step=1, call_id="c1", name="b", args={}))
    run.feed(ToolFinished(step=1, call_id="c1", name="b", observation="ERROR: no", ok=True, duration_s=0.0005))
    run.feed(StepFinished(step=1), T0 + timedelta(seconds=2))
    rows = {key: Figures(*row) for key, row in run.take().items()}
    assert rows == {
        Key(MODEL, "p:m"): Figures(number=1, tokens=7, cost_nusd=500_000_000),
        Key(TOOL_STEPS, "a"): Figures(number=1, cost_nusd=500_000_000),
        Key(TOOL_STEPS, "b"): Figures(number=1, cost_nusd=500_000_000),
        Key(RUN, ""): Figures(number=2),
        Key(TOOL, "a", tally.bucket_of(300_000)): Figures(number=1, micros=300_000),
        Key(TOOL, "b", 0): Figures(number=1, errors=1, micros=500),
        Key(STEP, "", tally.bucket_of(2_000_000)): Figures(number=1, micros=2_000_000)}
    assert run.take() == {}


def test_a_tools_step_is_charged_every_model_call_of_the_step() -> None:
    run = Tally("m")
    run.feed(ModelCalled(step=3, prompt_tokens=1, reply=asks("a"), error="refused", cost_usd=0.25))  # asks nothing
    run.feed(ModelCalled(step=3, prompt_tokens=1, reply=asks("a"), cost_usd=0.5))
    run.feed(ModelCalled(step=3, prompt_tokens=1, reply=None, cost_usd=None))  # no reply: costs nothing known
    run.feed(ModelCalled(step=3, prompt_tokens=1, reply=ModelReply("x", [], None), cost_usd=None))  # unpriced
    assert Figures(*run.take()[Key(TOOL_STEPS, "a")]) == Figures(number=1, cost_nusd=750_000_000, unknown=1)


def test_a_call_in_doubt_run_again_counts_once_and_a_resume_starts_a_new_part() -> None:
    run = Tally("m", started={"c1"})  # a resumed run's reply had started c1
    run.feed(StepStarted(step=2), T0)
    run.feed(RunResumed(run_id="r", owner="o", reason="failed", limits={}, model="n"))
    run.feed(ToolStarted(step=2, call_id="c1", name="a", args={}))
    run.feed(StepFinished(step=2), T0 + timedelta(hours=5))  # its start was in the part before: no latency
    run.feed(ModelCalled(step=3, prompt_tokens=4, reply=ModelReply("done"), cost_usd=None))
    assert {key: Figures(*row) for key, row in run.take().items()} == {
        Key(MODEL, "n"): Figures(number=1, tokens=4, unknown=1)}


def test_a_percentile_is_the_upper_bound_of_its_bucket_by_nearest_rank() -> None:
    rows = [(tally.bucket_of(1000 * k), Figures(number=1, micros=1000 * k)) for k in range(1, 101)]
    found = latency(rows)
    assert found["count"] == 100
    assert found["median_s"] == tally.upper_bound(tally.bucket_of(50_000))
    assert found["p95_s"] == tally.upper_bound(tally.bucket_of(95_000))
    assert found["mean_s"] == 0.0505
    assert latency([]) == {"count": 0, "median_s": None, "p95_s": None, "mean_s": None}
