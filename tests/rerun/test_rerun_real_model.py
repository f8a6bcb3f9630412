"""The demo's recorded run, rerun against a real model server: opt-in by environment, skipped otherwise.

    ../shared/real-model/serve.sh start
    RUNNER_E2E_OPENAI_BASE_URL=http://127.0.0.1:8088/v1 RUNNER_E2E_MODEL=local .venv/bin/pytest -m e2e tests/rerun

A small real model is sometimes wrong, so this asserts on the rerun (a linked, labelled candidate that
ended with a contract status, each of its calls answered once: served, live or not run, the report's
figures those of the stored runs, a strict replay of the candidate), never on the model's wording.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import pytest

from runner import STATUSES, open_store, replay, rerun, run_agent
from runner._rerun.html import render
from runner.demo import DEMO_TASK, demo_model, demo_registry
from runner.events import ToolFinished

pytestmark = [pytest.mark.e2e, pytest.mark.runner_real_model, pytest.mark.timeout(600)]

MODEL = os.environ.get("RUNNER_E2E_MODEL", "")
OPENAI_URL = os.environ.get("RUNNER_E2E_OPENAI_BASE_URL", "")


@pytest.mark.skipif(not (OPENAI_URL and MODEL),
                    reason="set RUNNER_E2E_OPENAI_BASE_URL and RUNNER_E2E_MODEL to run against a real server")
def test_the_demos_recorded_run_reruns_against_a_real_model(tmp_path: Path) -> None:
    from runner.adapters import openai_model

    with open_store(f"sqlite:///{tmp_path / 'rerun.db'}") as store, \
            openai_model(MODEL, base_url=OPENAI_URL, api_key="local", timeout=180, provider_name="llama.cpp",
                         temperature=0) as model:
        baseline = run_agent(DEMO_TASK, demo_model(), demo_registry(), store=store, max_steps=6, token_budget=20000,
                             timeout_s=500)
        assert baseline.status == "done"
        report = rerun(store, [baseline.run_id], model, registry=demo_registry(), concurrency=1)
        [case] = report.cases
        [candidate] = case.candidates
        run = store.get_run(candidate.run_id)
        assert (run.parent_run_id, run.labels, run.model) == (baseline.run_id, {"rerun": report.rerun_id}, MODEL)
        assert run.status in STATUSES
        assert (candidate.status, candidate.steps, candidate.tokens) == (run.status, run.steps, run.tokens)
        answered = Counter(f.call_id for f in run.facts if isinstance(f, ToolFinished))
        assert all(count == 1 for count in answered.values())
        tools = case.tools[0]
        assert tools.served + tools.live + tools.not_run == sum(
            1 for f in run.facts if isinstance(f, ToolFinished) and f.refused is None)
        assert case.regressed == (run.status != "done")
        json.dumps(report.to_json())
        assert f'id="case-{baseline.run_id}"' in render(report)
        replayed = replay(run, demo_registry())
        assert replayed.ok, replayed.explain()
