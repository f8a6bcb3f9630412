"""The public surface is pinned: names leave or arrive only on purpose."""

from __future__ import annotations

import subprocess
import sys

import pytest

import runner
from runner import Liveness, Status

EXPECTED = {
    "AgentResult", "AgentStopped", "AsyncModel", "CannotResume", "DEFAULT_SYSTEM", "Event", "FanoutRecorder",
    "Fixture", "FixtureError", "Limits", "Liveness", "Message", "Model", "ModelReply", "NullRecorder",
    "ProgressRecorder",
    "Recorder", "ReplayDivergence", "ReplayModel", "ReplayReport", "RerunReport", "RunInUse", "RunNotFound",
    "RunOptions", "RunState", "RunStore",
    "RunSummary", "RunnerError", "STATUSES", "ScriptError", "ScriptExhausted", "ScriptedModel", "Status", "StopRun",
    "StoreError", "StoredEvent", "StoredRun", "Tool", "ToolCall", "ToolRegistry", "ToolSpec", "TracingRecorder",
    "TracingSetupError", "Usage", "afollow_up", "afork", "aresume", "arun_agent", "configure_tracing", "export_run",
    "fold", "follow_up", "fork",
    "load_fixture", "open_store", "rebuild_spans", "replay", "rerun", "resume", "run_agent", "run_plan", "submit",
    "validate_args", "RunEnded", "StreamEvent", "TextDelta", "astream_agent", "astream_follow_up", "astream_fork",
    "astream_resume", "stream_agent", "stream_follow_up", "stream_fork", "stream_resume",
}


def test_all_is_exactly_the_intended_names_sorted() -> None:
    assert set(runner.__all__) == EXPECTED
    assert runner.__all__ == sorted(runner.__all__)
    for name in runner.__all__:
        assert getattr(runner, name) is not None


def test_statuses_are_the_contract() -> None:
    assert runner.STATUSES == ("done", "step_limit", "token_budget", "cost_limit", "tool_budget", "deadline",
                               "context_budget", "output_budget", "cancelled", "invalid_reply", "invalid_output",
                               "model_error", "awaiting_approval")


def test_status_and_liveness_are_string_enums_of_the_logged_text() -> None:
    assert [*Status] == [*runner.STATUSES, "running", "queued"]
    assert [*Liveness] == ["finished", "waiting", "live", "dead", "stale"]
    assert [liveness for liveness in Liveness if liveness.gone] == ["dead", "stale"]
    assert (f"{Status.DONE}", str(Liveness.DEAD)) == ("done", "dead")


@pytest.mark.process
def test_importing_runner_does_not_load_the_store_or_the_otel_sdk() -> None:
    code = ("import sys, runner; print('sqlalchemy' in sys.modules, 'opentelemetry.sdk' in sys.modules); "
            "runner.open_store; print('sqlalchemy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False", "True"]


@pytest.mark.process
def test_the_stored_run_types_and_their_readers_load_without_sqlalchemy() -> None:
    code = ("import sys, runner; runner.StoredRun, runner.StoredEvent, runner.RunSummary; "
            "import runner._log.records, runner._run.resume, runner._replay.fixture, runner.tracing.rebuild; "
            "print('sqlalchemy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False"]


@pytest.mark.process
def test_submit_does_not_import_celery() -> None:
    code = "import sys, runner; runner.submit; import runner.cli.pool; print('celery' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False"]


def test_replay_is_the_function_even_after_its_module_is_imported() -> None:
    import runner._replay.replayer as module  # noqa: F401
    from runner import replay

    assert callable(replay)
    assert replay.__name__ == "replay"


@pytest.mark.process
def test_importing_runner_and_a_seed_schema_tool_load_neither_pydantic_nor_jsonschema() -> None:
    code = ("import sys, runner; r = runner.ToolRegistry(); "
            "r.register('w', 'd', {'type': 'object', 'properties': {'city': {'type': 'string'}}}, lambda city: 1); "
            "print(r.execute('w', {'city': 3}).startswith('ERROR'), 'pydantic' in sys.modules, "
            "'jsonschema' in sys.modules); "
            "r.register('v', 'd', {'type': 'object', 'properties': {'n': {'type': 'integer', 'minimum': 1}}}, "
            "lambda n: n); print('jsonschema' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["True", "False", "False", "True"]
