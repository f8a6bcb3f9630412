"""A rerun's report read back from the store (``_rerun.stored``), as the console shows it: the same report the
rerun returned, from the candidates' labels and logs alone; and the newest reruns first from the label index."""

from __future__ import annotations

import threading
import time

import pytest

from runner import ScriptedModel, ToolRegistry, fork, rerun, run_agent
from runner._rerun import session
from runner._rerun.html import fragment
from runner._rerun.stored import read_position, stored_report
from runner._rerun.tools import ToolCounts
from runner.events import ToolFinished
from runner.store import RunStore, label_values
from tests.rerun import rerun_tools
from tests.rerun.helpers import (
    AFTER,
    DRIFT,
    EMAIL,
    LOOP,
    WEATHER,
    TaskServer,
    assert_rebuilt,
    fake_model,
    record_baselines,
    recorded,
)

WAIT_S = 30.0  # a bound, not an expectation


def strict_c_to_f() -> ToolRegistry:
    """Live tools whose ``c_to_f`` takes at most 21.5 degrees: stricter than the one the baselines recorded."""
    registry = ToolRegistry()
    schema = {"type": "object", "properties": {"celsius": {"type": "number", "maximum": 21.5}}, "required": ["celsius"]}
    registry.register("c_to_f", "Celsius to Fahrenheit.", schema, lambda celsius: celsius * 9 / 5 + 32)
    return registry


def test_a_call_the_live_tool_refuses_is_not_run_and_says_so_and_the_store_counts_it_so(store_url: str) -> None:
    with recorded(store_url, (DRIFT,)) as (store, ids), TaskServer(AFTER) as server, fake_model(server) as model:
        report = rerun(store, [ids[DRIFT]], model, registry=strict_c_to_f())
        assert_rebuilt(store, report)
        assert report.cases[0].tools == (ToolCounts(served=0, live=0, not_run=1),)
        [observation] = [f.observation for f in store.get_run(report.cases[0].candidates[0].run_id).facts
                         if isinstance(f, ToolFinished)]
    assert observation.startswith(f"ERROR: not run: this call to c_to_f (with these arguments) is not in the "
                                  f"recording of run {ids[DRIFT]} that this rerun serves, and the live c_to_f refuses "
                                  "these arguments: ")


def test_a_rerun_of_candidates_serves_their_not_run_observations_and_the_store_counts_them_served(
        store_url: str) -> None:
    with recorded(store_url, (EMAIL,)) as (store, ids), TaskServer(AFTER) as server, fake_model(server) as model:
        first = rerun(store, [ids[EMAIL]], model)
        assert first.cases[0].tools == (ToolCounts(served=1, live=0, not_run=1),)
        again = rerun(store, [first.cases[0].candidates[0].run_id], model)
        assert_rebuilt(store, again)
    assert again.cases[0].tools == (ToolCounts(served=2, live=0, not_run=0),)  # "not run" is what was recorded


def test_a_fork_of_a_candidate_keeps_its_labels_but_is_no_candidate(store_url: str) -> None:
    with recorded(store_url, (WEATHER,)) as (store, ids), TaskServer(AFTER) as server, fake_model(server) as model:
        report = rerun(store, [ids[WEATHER]], model)
        forked = fork(store, report.cases[0].candidates[0].run_id, at_step=2, model=model,
                      registry=rerun_tools.tools())
        assert store.get_run(forked.run_id).labels["rerun"] == report.rerun_id
        assert_rebuilt(store, report)


def test_a_rerun_whose_candidates_have_no_positions_reads_back_in_the_order_they_started(
        store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Reruns made before the ``rerun.case`` and ``rerun.sample`` labels: their cases and samples go by start."""
    monkeypatch.setattr(session.Rerun, "labels", lambda self, job: {"rerun": self.rerun_id})
    with recorded(store_url, (WEATHER, DRIFT, LOOP)) as (store, ids), TaskServer(AFTER) as server, \
            fake_model(server) as model:
        report = rerun(store, list(ids.values()), model, samples=2, concurrency=1)
        assert set(store.get_run(report.cases[0].candidates[0].run_id).labels) == {"rerun"}
        assert_rebuilt(store, report)


def test_a_rerun_still_going_reads_back_with_its_unfinished_cases_left_and_not_interrupted(store_url: str) -> None:
    with recorded(store_url, (WEATHER, DRIFT)) as (store, ids), \
            TaskServer(AFTER, hold=frozenset({DRIFT})) as server, fake_model(server) as model:
        going = threading.Thread(target=rerun, args=(store, list(ids.values()), model), kwargs={"concurrency": 1})
        going.start()
        try:
            deadline = time.monotonic() + WAIT_S
            while not server.asked(DRIFT):
                assert time.monotonic() < deadline, "timed out"
                time.sleep(0.01)
            [value] = label_values(store, "rerun", limit=5)
            found = stored_report(store, value.value)
        finally:
            server.release.set()
            going.join(WAIT_S)
        assert found is not None
        assert ([c.baseline.run_id for c in found.cases], found.left, found.interrupted) == (
            [ids[WEATHER]], (ids[DRIFT],), False)
        assert '<p class="verdict running">running: 1 case not finished yet</p>' in fragment(found)
        done = stored_report(store, value.value)
        assert done is not None
        assert ([c.baseline.run_id for c in done.cases], done.left) == ([ids[WEATHER], ids[DRIFT]], ())


def test_the_newest_reruns_come_first_a_page_at_a_time(store: RunStore) -> None:
    ids = record_baselines(store, (WEATHER,))
    with TaskServer(AFTER) as server, fake_model(server) as model:
        made = [rerun(store, [ids[WEATHER]], model).rerun_id for _ in range(3)]
    old_style = "f" * 12  # an id of an earlier version (12 random hex digits): below every newer one
    store_run_labelled(store, old_style)
    assert [v.value for v in label_values(store, "rerun", limit=10)] == [*reversed(made), old_style]
    assert [v.value for v in label_values(store, "rerun", limit=2)] == made[:0:-1]
    assert [v.value for v in label_values(store, "rerun", limit=2, below=made[1])] == [made[0], old_style]
    assert label_values(store, "rerun", limit=0) == []
    first = label_values(store, "rerun", limit=1)[0]
    assert first.first_started_at == min(run.started_at for run in store.list_runs(label={"rerun": made[-1]}))
    assert stored_report(store, old_style) is None  # a run labelled so that no rerun started
    assert stored_report(store, "no-such-rerun") is None


def store_run_labelled(store: RunStore, rerun_id: str) -> None:
    """A run (no rerun's candidate) labelled ``rerun=rerun_id``."""
    run_agent("Say hi.", ScriptedModel(["hi"]), ToolRegistry(), store=store, labels={"rerun": rerun_id})


@pytest.mark.parametrize(("text", "found"), [("2/4", (1, 4)), ("1/1", (0, 1)), ("4/4", (3, 4)), ("0/4", None),
                                             ("5/4", None), ("2", None), ("a/4", None), ("²/4", None), (None, None)])
def test_a_position_label_reads_as_its_place_and_count(text: str | None, found: tuple[int, int] | None) -> None:
    assert read_position(text) == found
