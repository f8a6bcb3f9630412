"""The console (in-process, Starlette's TestClient) lists a rerun's candidates by their label, and its lineage
links a candidate to its baseline and a baseline to its candidates."""

from __future__ import annotations

from starlette.testclient import TestClient

from runner import rerun
from runner.ui import create_app
from tests.rerun.helpers import AFTER, WEATHER, TaskServer, fake_model, recorded


def test_the_console_lists_the_candidates_by_label_and_links_them_to_their_baseline(store_url: str) -> None:
    with recorded(store_url, (WEATHER,)) as (store, ids), TaskServer(AFTER) as server, fake_model(server) as model:
        report = rerun(store, [ids[WEATHER]], model, samples=2)
        candidates = [c.run_id for c in report.cases[0].candidates]
        with TestClient(create_app(store), base_url="http://127.0.0.1:8000") as client:
            listed = client.get(f"/?label=rerun={report.rerun_id}").text
            assert sorted(run_id for run_id in candidates if f'data-run-id="{run_id}"' in listed) == sorted(candidates)
            assert listed.count("data-run-id=") == 2
            page = client.get(f"/runs/{candidates[0]}").text
            assert (f'<a class="lineage parent" href="/runs/{ids[WEATHER]}">{ids[WEATHER][:8]}</a> (rerun candidate)'
                    in page)
            baseline = client.get(f"/runs/{ids[WEATHER]}").text
            for run_id in candidates:
                assert f'<a class="lineage child" href="/runs/{run_id}">{run_id[:8]}</a> rerun candidate' in baseline
