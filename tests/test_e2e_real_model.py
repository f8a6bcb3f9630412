"""End to end against a real model server: opt-in by environment, skipped otherwise.

    RUNNER_E2E_OPENAI_BASE_URL=http://127.0.0.1:8088/v1 RUNNER_E2E_MODEL=local .venv/bin/pytest -m e2e
    RUNNER_E2E_ANTHROPIC_BASE_URL=http://127.0.0.1:8088 RUNNER_E2E_MODEL=local .venv/bin/pytest -m e2e

A small real model is sometimes wrong, so these tests assert on the loop (a valid
call ran, every call got exactly one result with its id, the run ended with a
contract status, the stored run replays strictly), never on the model's wording.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from runner import STATUSES, open_store, replay, run_agent
from runner.demo import DEMO_TASK, demo_registry

pytestmark = [pytest.mark.e2e, pytest.mark.runner_real_model, pytest.mark.timeout(600)]

MODEL = os.environ.get("RUNNER_E2E_MODEL", "")
OPENAI_URL = os.environ.get("RUNNER_E2E_OPENAI_BASE_URL", "")
ANTHROPIC_URL = os.environ.get("RUNNER_E2E_ANTHROPIC_BASE_URL", "")


def _check_run(model: Any, tmp_path: Path, live: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    provider, exporter = live
    with open_store(f"sqlite:///{tmp_path / 'e2e.db'}") as store:
        result = run_agent(DEMO_TASK, model, demo_registry(), max_steps=6, token_budget=20000, timeout_s=500,
                           store=store, tracer_provider=provider)
        assert result.status in STATUSES
        calls = [c for m in result.messages if m["role"] == "assistant" for c in m["tool_calls"]]
        results = [m for m in result.messages if m["role"] == "tool"]
        assert result.tool_calls >= 1, f"no valid tool call ran: {result.messages}"
        ids = [c["id"] for c in calls]
        answered = Counter(m["tool_call_id"] for m in results)
        if result.status == "done":
            assert answered == Counter(ids), "every call gets exactly one result with its id"
        else:
            assert all(count == 1 for count in answered.values())
            assert set(answered) <= set(ids)
        run = store.get_run(result.run_id)
        assert run.messages == result.messages
        assert run.model == MODEL
        assert all(event.span_id for event in run.events)
        chat_spans = [s for s in exporter.get_finished_spans() if s.name == f"chat {MODEL}"]
        assert len(chat_spans) == result.steps
        report = replay(run, demo_registry())
        assert report.divergence is None, report.explain()
        assert report.ok, report.explain()


@pytest.mark.skipif(not (OPENAI_URL and MODEL),
                    reason="set RUNNER_E2E_OPENAI_BASE_URL and RUNNER_E2E_MODEL to run against a real server")
def test_demo_tools_against_a_real_openai_compatible_server(
        tmp_path: Path, live: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    from runner.adapters import openai_model

    with openai_model(MODEL, base_url=OPENAI_URL, api_key="local", timeout=180, provider_name="llama.cpp",
                      temperature=0) as model:
        _check_run(model, tmp_path, live)


@pytest.mark.skipif(not (ANTHROPIC_URL and MODEL),
                    reason="set RUNNER_E2E_ANTHROPIC_BASE_URL and RUNNER_E2E_MODEL to run against a real server")
def test_demo_tools_against_a_real_anthropic_compatible_server(
        tmp_path: Path, live: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    from runner.adapters import anthropic_model

    with anthropic_model(MODEL, max_tokens=512, base_url=ANTHROPIC_URL, api_key="local", timeout=180) as model:
        _check_run(model, tmp_path, live)
