"""``runner.rerun`` end to end: baselines recorded through the OpenAI adapter on one fake server, rerun on
another that behaves differently, over a real SQLite file (and PostgreSQL when RUNNER_TEST_PG_URL is set)."""

from __future__ import annotations

import json
import re
import warnings
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from runner import RerunReport, open_store, rerun, resume, run_agent
from runner._rerun import session
from runner._rerun.diff import Call
from runner._rerun.tools import ToolCounts
from runner.errors import PriceUnknown
from runner.events import RunStarted, ToolFinished
from runner.store import RunStore
from tests.cli.helpers import completion
from tests.rerun import rerun_tools
from tests.rerun.helpers import (
    AFTER,
    DRIFT,
    EMAIL,
    FORECAST,
    LOOP,
    MAX_STEPS,
    WEATHER,
    TaskServer,
    assert_rebuilt,
    fake_model,
    recorded,
    steps,
)


def rerun_all(store: RunStore, ids: dict[str, str], **options: object) -> tuple[RerunReport, TaskServer]:
    with TaskServer(AFTER) as server, fake_model(server) as model:
        report = rerun(store, list(ids.values()), model, **options)  # type: ignore[arg-type]
    assert_rebuilt(store, report)  # the console reads the same report back from the store
    return report, server


def observations(store: RunStore, run_id: str) -> list[tuple[str, str]]:
    return [(f.name, f.observation) for f in store.get_run(run_id).facts if isinstance(f, ToolFinished)]


def test_each_case_reports_what_changed_and_only_the_step_limit_case_regressed(store_url: str) -> None:
    with recorded(store_url) as (store, ids):
        report, _ = rerun_all(store, ids, registry=rerun_tools.tools())
        by_task = {case.task: case for case in report.cases}
        assert [case.baseline.run_id for case in report.cases] == list(ids.values())
        assert by_task[WEATHER].changed == ()
        assert (by_task[WEATHER].verdict, by_task[WEATHER].regressed) == ("unchanged", False)
        assert by_task[DRIFT].changed == ("answer", "tool_calls")
        assert (by_task[DRIFT].verdict, by_task[DRIFT].regressed) == ("changed", False)
        assert by_task[DRIFT].diffs() == [['- c_to_f {"celsius": 21}', '+ c_to_f {"celsius": 22}']]
        loop = by_task[LOOP]
        assert loop.candidates[0].status == "step_limit"
        assert loop.candidates[0].steps == MAX_STEPS
        assert loop.changed == ("status", "answer", "tool_calls", "steps", "tokens")
        assert (loop.verdict, loop.regressed) == ("regressed", True)
        assert [case.task for case in report.regressed] == [LOOP]
        assert report.ok is False
        assert (report.count("unchanged"), report.count("changed"), report.count("regressed")) == (1, 2, 1)
        assert (report.interrupted, report.left, report.samples) == (False, (), 1)


def test_identical_calls_are_served_from_the_recording_and_the_tool_does_not_run(store_url: str) -> None:
    with recorded(store_url, (WEATHER,)) as (store, ids):
        report, _ = rerun_all(store, ids, registry=rerun_tools.tools())
        [case] = report.cases
        assert rerun_tools.RAN == []
        assert (case.tools[0].served, case.tools[0].live, case.tools[0].not_run) == (1, 0, 0)
        baseline, candidate = ids[WEATHER], case.candidates[0].run_id
        assert observations(store, candidate) == observations(store, baseline) == [
            ("get_weather", '{"city": "Paris", "celsius": 21}')]


def test_a_side_effect_runs_neither_again_nor_anew(store_url: str) -> None:
    with recorded(store_url, (EMAIL,)) as (store, ids):
        report, _ = rerun_all(store, ids, registry=rerun_tools.tools())
        [case] = report.cases
        assert rerun_tools.RAN == []  # send_email ran once, for the baseline, and never since
        assert (case.tools[0].served, case.tools[0].live, case.tools[0].not_run) == (1, 0, 1)
        assert observations(store, case.candidates[0].run_id) == [
            ("send_email", '"sent to ann"'),
            ("send_email", f"ERROR: not run: this call to send_email (with these arguments) is not in the recording "
                           f"of run {ids[EMAIL]} that this rerun serves, and send_email has side effects, and a "
                           "rerun never runs one")]
        assert case.diffs() == [[f'  send_email {{"body": "{FORECAST["body"]}", "to": "ann"}}',
                                 f'+ send_email {{"body": "{FORECAST["body"]}", "to": "bob"}}']]


def test_an_unrecorded_call_runs_live_only_on_a_tool_without_side_effects_and_only_with_live_tools(
        store_url: str) -> None:
    with recorded(store_url, (DRIFT,)) as (store, ids):
        live, _ = rerun_all(store, ids, registry=rerun_tools.tools())
        assert rerun_tools.RAN == [("c_to_f", {"celsius": 22})]
        assert observations(store, live.cases[0].candidates[0].run_id) == [("c_to_f", "71.6")]
        rerun_tools.RAN.clear()
        without, _ = rerun_all(store, ids)
        assert rerun_tools.RAN == []
        assert observations(store, without.cases[0].candidates[0].run_id) == [
            ("c_to_f", f"ERROR: not run: this call to c_to_f (with these arguments) is not in the recording of run "
                       f"{ids[DRIFT]} that this rerun serves, and this rerun has no live tools")]
        assert (without.cases[0].tools[0].served, without.cases[0].tools[0].not_run) == (0, 1)


def test_three_samples_give_three_linked_candidates_labelled_with_the_rerun(store_url: str) -> None:
    with recorded(store_url, (WEATHER,)) as (store, ids):
        report, server = rerun_all(store, ids, samples=3)
        [case] = report.cases
        assert len(case.candidates) == 3
        assert len({c.run_id for c in case.candidates}) == 3
        assert len(server.asked(WEATHER)) == 6  # two model calls each
        for sample, candidate in enumerate(case.candidates, 1):
            run = store.get_run(candidate.run_id)
            started = run.facts[0]
            assert isinstance(started, RunStarted)
            assert (run.parent_run_id, started.origin, run.labels) == (
                ids[WEATHER], "rerun", {"rerun": report.rerun_id, "rerun.case": "1/1", "rerun.sample": f"{sample}/3"})
            assert (run.status, run.task, run.model, run.provider) == ("done", WEATHER, "fake", "openai")
        listed = store.list_runs(label={"rerun": report.rerun_id})
        assert sorted(run.run_id for run in listed) == sorted(c.run_id for c in case.candidates)


def test_a_candidate_gets_the_baselines_task_system_prompt_tool_specs_and_limits(store_url: str) -> None:
    with recorded(store_url, (WEATHER,)) as (store, ids):
        report, server = rerun_all(store, ids, max_cost_usd=2.5, prices={"fake": {"input_mtok": 1, "output_mtok": 2}})
        baseline, candidate = store.get_run(ids[WEATHER]), store.get_run(report.cases[0].candidates[0].run_id)
        assert candidate.messages[:2] == baseline.messages[:2]
        assert candidate.tool_specs == baseline.tool_specs
        assert candidate.limits == {**baseline.limits, "max_cost_usd": 2.5}
        assert server.asked(WEATHER)[0].tools == ["get_weather", "c_to_f", "send_email", "transfer"]
        assert candidate.cost_usd == pytest.approx(2 * (10 * 1 + 5 * 2) / 1e6)
        assert report.candidate_totals.cost_usd == candidate.cost_usd
        assert report.baseline_totals.cost_usd is None  # the baseline's model had no price


def test_system_replaces_the_baselines_system_prompt(store_url: str) -> None:
    with recorded(store_url, (WEATHER,)) as (store, ids):
        report, _ = rerun_all(store, ids, system="Answer in French.")
        candidate = store.get_run(report.cases[0].candidates[0].run_id)
        assert candidate.system == "Answer in French."
        assert candidate.messages[0] == {"role": "system", "content": "Answer in French."}
        assert candidate.messages[1] == {"role": "user", "content": WEATHER}


def test_bad_counts_and_one_string_are_refused(store_url: str) -> None:
    with recorded(store_url, (WEATHER,)) as (store, ids), TaskServer(AFTER) as server, fake_model(server) as model:
        with pytest.raises(ValueError, match="samples must be a positive integer, got 0"):
            rerun(store, [ids[WEATHER]], model, samples=0)
        with pytest.raises(ValueError, match="samples must be at most 1000, got 1001"):
            rerun(store, [ids[WEATHER]], model, samples=1001)
        with pytest.raises(TypeError, match="not one string"):
            rerun(store, ids[WEATHER], model)
        assert server.requests == []


TRANSFER = "Move 5 to bob."


def awaiting_and_running(store: RunStore) -> tuple[str, str]:
    """A run awaiting approval (a transfer) and a run still running, recorded in ``store``: their ids."""
    asks = {TRANSFER: steps(completion("", [("t1", "transfer", {"to": "bob", "amount": 5})]), completion("Moved."))}
    with TaskServer(asks) as server, fake_model(server) as model:
        waiting = run_agent(TRANSFER, model, rerun_tools.tools(), store=store)
    assert waiting.status == "awaiting_approval"
    recorder = store.recorder()
    recorder.record(RunStarted(run_id="r" * 32, task="t", system="s", limits={}, tool_specs=[], model="m"))
    recorder.sync()
    return waiting.run_id, "r" * 32


def test_runs_not_ended_are_skipped_with_a_warning_saying_how_many_and_why(store_url: str) -> None:
    with recorded(store_url, (WEATHER,)) as (store, ids), TaskServer(AFTER) as server, fake_model(server) as model:
        waiting, running = awaiting_and_running(store)
        with pytest.warns(UserWarning, match="^skipped 2 runs not ended") as warned:
            report = rerun(store, [waiting, ids[WEATHER], running, ids[WEATHER][:10]], model)
    assert [str(w.message) for w in warned] == [
        f"skipped 2 runs not ended (awaiting_approval, running): a rerun compares with runs that have ended: "
        f"{waiting[:8]}, {'r' * 8}"]
    assert [case.baseline.run_id for case in report.cases] == [ids[WEATHER]]  # the prefix is the same run: once
    assert (report.skipped, report.to_json()["summary"]["skipped"]) == ((waiting, running), [waiting, running])
    assert {r.task for r in server.requests} == {WEATHER}


def test_no_baselines_warn_and_give_an_empty_report_and_no_model_call(tmp_path: Path) -> None:
    with open_store(f"sqlite:///{tmp_path}/empty.db") as store, TaskServer(AFTER) as server, \
            fake_model(server) as model:
        with pytest.warns(UserWarning, match="^no baselines: nothing to rerun") as warned:
            report = rerun(store, [], model)
        assert len(warned) == 1
        running = awaiting_and_running(store)[1]
        with warnings.catch_warnings(record=True) as both:
            warnings.simplefilter("always")
            skipped = rerun(store, [running], model)
    assert (report.cases, report.left, report.skipped, report.ok) == ((), (), (), True)
    assert report.to_json()["summary"]["cases"] == 0
    assert [(w.category, str(w.message)) for w in both] == [
        (UserWarning, f"skipped 1 run not ended (running): a rerun compares with runs that have ended: {'r' * 8}"),
        (UserWarning, "no baselines: nothing to rerun (give runs that have ended)")]
    assert (skipped.cases, skipped.skipped, server.requests) == ((), (running,), [])


def test_each_recorded_observation_serves_one_call_of_each_sample(store_url: str) -> None:
    twice = {WEATHER: steps(completion("", [("w1", "get_weather", {"city": "Paris"})]),
                            completion("", [("w2", "get_weather", {"city": "Paris"})]), completion("It is 21 C."))}
    with recorded(store_url, (WEATHER,)) as (store, ids), TaskServer(twice) as server, fake_model(server) as model:
        report = rerun(store, [ids[WEATHER]], model, samples=2)
        assert_rebuilt(store, report)
        for candidate, tools in zip(report.cases[0].candidates, report.cases[0].tools, strict=True):
            assert (tools.served, tools.not_run) == (1, 1)
            assert [o for _, o in observations(store, candidate.run_id)] == [
                '{"city": "Paris", "celsius": 21}',
                f"ERROR: not run: this call to get_weather (with these arguments) is not in the recording of run "
                f"{ids[WEATHER]} that this rerun serves, and this rerun has no live tools"]


def test_a_budget_the_new_model_cannot_count_is_refused_before_any_candidate_starts(store_url: str) -> None:
    with recorded(store_url, (WEATHER,)) as (store, ids), TaskServer(AFTER) as server, fake_model(server) as model:
        priced = {"fake": {"input_mtok": 1.0, "output_mtok": 2.0}}
        budgeted = run_agent(WEATHER, model, rerun_tools.tools(), store=store, max_cost_usd=1.0, prices=priced)
        with pytest.raises(PriceUnknown, match=re.escape("model 'fake' (openai), so max_cost_usd=1 cannot")):
            rerun(store, [budgeted.run_id], model)
        with pytest.raises(PriceUnknown, match=re.escape("so max_cost_usd=0.5 cannot be counted")):
            rerun(store, [ids[WEATHER]], model, max_cost_usd=0.5)
        report = rerun(store, [budgeted.run_id], model, prices=priced)
        assert store.get_run(report.cases[0].candidates[0].run_id).limits["max_cost_usd"] == 1.0
        assert len(store.list_runs(label={"rerun": report.rerun_id})) == 1
        assert len(store.list_runs()) == 3


def test_candidates_are_queued_as_threads_free_up_not_all_at_once(store_url: str,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    in_flight, most = set[object](), [0]

    class Counted(ThreadPoolExecutor):
        """A pool that counts the jobs handed to it and not yet finished."""

        def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future[Any]:
            future = super().submit(fn, *args, **kwargs)
            in_flight.add(future)
            most[0] = max(most[0], len(in_flight))
            future.add_done_callback(in_flight.discard)
            return future

    monkeypatch.setattr(session, "ThreadPoolExecutor", Counted)
    with recorded(store_url, (WEATHER,)) as (store, ids):
        report, _ = rerun_all(store, ids, samples=12, concurrency=2)
    assert len(report.cases[0].candidates) == 12
    assert most[0] <= 2 * 2  # all 12 were queued before the first ended; now a few beyond the threads at most


def test_resuming_a_candidate_with_real_tools_runs_its_pending_calls_for_real(store_url: str) -> None:
    """docs/rerun.md says so: on resume nothing is served from the recording, side effects included."""
    priced = {"fake": {"input_mtok": 1.0, "output_mtok": 2.0}}
    with recorded(store_url, (EMAIL,)) as (store, ids), TaskServer(AFTER) as server, fake_model(server) as model:
        report = rerun(store, [ids[EMAIL]], model, max_cost_usd=1e-9, prices=priced)  # stops at the first reply
        [candidate] = report.cases[0].candidates
        assert (candidate.status, rerun_tools.RAN) == ("cost_limit", [])  # in the rerun its calls never ran
        resumed = resume(store, candidate.run_id, model, rerun_tools.tools(), max_cost_usd=1.0, prices=priced)
    assert resumed.status == "done", resumed.error
    assert rerun_tools.RAN == [("send_email", FORECAST), ("send_email", {**FORECAST, "to": "bob"})]
    rerun_tools.RAN.clear()


def test_calls_a_candidate_never_got_to_run_are_not_among_its_tool_calls(store_url: str) -> None:
    priced = {"fake": {"input_mtok": 1.0, "output_mtok": 2.0}}
    with recorded(store_url, (EMAIL,)) as (store, ids), TaskServer(AFTER) as server, fake_model(server) as model:
        report = rerun(store, [ids[EMAIL]], model, max_cost_usd=1e-9, prices=priced)  # stops at the first reply
    case = report.cases[0]
    [candidate] = case.candidates
    assert candidate.status == "cost_limit"
    assert (candidate.tool_calls, case.tools[0]) == ((), ToolCounts(0, 0, 0))
    assert case.baseline.tool_calls == (Call("send_email", FORECAST),)
    assert case.diffs() == [[f"- send_email {json.dumps(FORECAST, sort_keys=True)}"]]
    assert report.to_json()["cases"][0]["candidates"][0]["tool_calls"] == []
