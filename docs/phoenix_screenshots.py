"""Take docs/img/phoenix-resumed.png, phoenix-crashed.png and phoenix-forked.png: three runs traced live to Phoenix.

Start Phoenix in its own virtualenv (``pip install arize-phoenix``), then from the repository:

    PHOENIX_HOST=127.0.0.1 PHOENIX_WORKING_DIR=$(mktemp -d) phoenix serve &
    OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:6006 OTEL_SERVICE_NAME=runner-story \
        PYTHONPATH=. .venv/bin/python docs/phoenix_screenshots.py

A run stopped at its step limit and resumed; a run SIGKILLed inside a tool call (by the durable-execution
tests' child process, which traces live to the same endpoint) and resumed; a run and its fork. Each trace
is screenshot in Phoenix's UI with the system Chromium (``RUNNER_TEST_CHROMIUM``, default /usr/bin/chromium).
"""

from __future__ import annotations

import json
import os
import tempfile
import urllib.request
from pathlib import Path

from playwright.sync_api import sync_playwright

from runner import ScriptedModel, configure_tracing, fork, open_store, resume, run_agent
from tests.resume.durable_child import PlanModel, tools
from tests.resume.helpers import RUN_ID, killed_in
from tests.tracing.helpers import registry, weather

PHOENIX = "http://127.0.0.1:6006"
OUT = Path(__file__).resolve().parent / "img"


def record(url: str) -> None:
    provider = configure_tracing("runner-story")
    with open_store(url) as store:
        first = run_agent("Weather in Paris, then Oslo?", ScriptedModel([weather("c1", "Paris")]), registry(),
                          store=store, max_steps=1, tracer_provider=provider, record_content=True,
                          agent_name="forecaster")
        resume(store, first.run_id, ScriptedModel([weather("c2", "Paris"), "Paris 21C, Oslo 21C"]), registry(),
               max_steps=4, tracer_provider=provider, record_content=True)
        base = run_agent("Weather in Paris?", ScriptedModel([weather("c3", "Paris"), "21C"]), registry(),
                         store=store, tracer_provider=provider, record_content=True, agent_name="forecaster")
        fork(store, base.run_id, at_step=2, model=ScriptedModel(["Warm: 21C."]), registry=registry(),
             tracer_provider=provider, record_content=True)
    work = Path(tempfile.mkdtemp())
    plan = [[["c1", "lookup", {"ref": "r1"}]], [["c2", "pay", {"ref": "p1"}]]]
    killed_in(url, work, plan, "r1", "lookup r1")
    with open_store(url) as store:
        resume(store, RUN_ID, PlanModel(plan), tools(work), tracer_provider=provider, record_content=True)
    provider.shutdown()


def shoot() -> None:
    projects = json.load(urllib.request.urlopen(f"{PHOENIX}/v1/projects"))["data"]
    project = next(p["id"] for p in projects if p["name"] == "runner-story")
    spans = json.load(urllib.request.urlopen(f"{PHOENIX}/v1/projects/runner-story/spans?limit=1000"))["data"]
    names: dict[str, list[str]] = {}
    for span in spans:
        names.setdefault(span["context"]["trace_id"], []).append(span["name"])
    shots = {}
    for trace_id, found in names.items():
        if any("fork at step" in name for name in found):
            shots["forked"] = trace_id
        elif any("resumed: step_limit" in name for name in found):
            shots["resumed"] = trace_id
        elif any("its process is gone" in name for name in found):
            shots["crashed"] = trace_id
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=os.environ.get("RUNNER_TEST_CHROMIUM", "/usr/bin/chromium"))
        page = browser.new_page(viewport={"width": 1500, "height": 900})
        for shape, trace_id in shots.items():
            page.goto(f"{PHOENIX}/projects/{project}/traces/{trace_id}")
            page.wait_for_timeout(4000)
            page.screenshot(path=str(OUT / f"phoenix-{shape}.png"))
        browser.close()


if __name__ == "__main__":
    record(f"sqlite:///{Path(tempfile.mkdtemp()) / 'runs.db'}")
    shoot()
