"""``runner run --output-schema`` and ``--output-type``: the typed result printed as JSON."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from runner.store import open_store
from tests.cli.helpers import FakeOpenAI, at, completion, installed_runner, invoke, one_error_line
from tests.output.helpers import INVOICE_SCHEMA

TOOLS = ("--tools", "runner.demo:demo_registry")
BILL = ("c1", "final_result", {"total": 12.5, "currency": "EUR\u009b"})


def schema_file(tmp_path: Path) -> Path:
    path = tmp_path / "invoice.json"
    path.write_text(json.dumps(INVOICE_SCHEMA), encoding="utf-8")
    return path


def test_run_with_output_schema_prints_the_json_output_and_exits_0(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    with FakeOpenAI(completion("about 12.5"), completion("", [BILL])) as server:
        result = invoke("run", "Bill it", *TOOLS, "--model", "openai:fake", *at(server), "--db", db,
                        "--output-schema", str(schema_file(tmp_path)), "--quiet")
    assert result.exit_code == 0, result.output
    printed = result.stdout.split("\n\nrun id:")[0]
    assert json.loads(printed) == {"total": 12.5, "currency": "EUR\u009b"}
    assert "\u009b" not in printed
    assert "\\u009b" in printed
    assert "final_result" in [t["function"]["name"] for t in server.requests[0]["tools"]]
    with open_store(db) as store:
        (run,) = store.list_runs()
        assert store.get_run(run.run_id).output == {"total": 12.5, "currency": "EUR\u009b"}


def test_run_with_output_type_and_json_has_output(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    with FakeOpenAI(completion("", [("c1", "final_result", {"total": 3, "currency": "EUR"})])) as server:
        result = invoke("run", "Bill it", *TOOLS, "--model", "openai:fake", *at(server), "--db", db, "--json",
                        "--output-type", "tests.output.helpers:Invoice")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["output"] == {"total": 3.0, "currency": "EUR"}


@pytest.mark.parametrize(("args", "message"), [
    (["--output-type", "tests.output.helpers:Nope"], "cannot import output type"),
    (["--output-schema", "{missing}"], "cannot read a JSON document"),
    (["--output-schema", "{list}"], "a JSON Schema is an object, not list"),
    (["--output-schema", "{bad}"], "unsupported schema keyword"),
    (["--output-schema", "{ok}", "--output-type", "tests.output.helpers:Invoice"], "not both"),
])
def test_a_bad_output_option_is_one_usage_line_and_records_nothing(tmp_path: Path, args: list[str],
                                                                   message: str) -> None:
    files = {"missing": tmp_path / "none.json", "list": tmp_path / "list.json", "bad": tmp_path / "bad.json",
             "ok": schema_file(tmp_path)}
    files["list"].write_text("[]", encoding="utf-8")
    files["bad"].write_text('{"type": "object", "properties": {"x": {"typo": 1}}}', encoding="utf-8")
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    given = [arg.format(**{k: str(v) for k, v in files.items()}) for arg in args]
    result = invoke("run", "Bill it", *TOOLS, "--model", "openai:fake", "--base-url", "http://127.0.0.1:1/v1",
                    "--api-key", "k", "--db", db, *given)
    assert result.exit_code == 2
    assert message in one_error_line(result)
    assert not (tmp_path / "runs.db").exists() or not open_store(db).list_runs()


@pytest.mark.process
def test_the_installed_runner_prints_the_typed_result(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    with FakeOpenAI(completion("", [("c1", "final_result", {"total": 1, "currency": "EUR"})])) as server:
        done = subprocess.run([installed_runner(), "run", "Bill it", *TOOLS, "--model", "openai:fake", *at(server),
                               "--db", db, "--output-schema", str(schema_file(tmp_path)), "--quiet"],
                              capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.split("\n\nrun id:")[0]) == {"total": 1, "currency": "EUR"}


def test_demo_typed_prints_the_tip_split_as_json(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'demo.db'}"
    result = invoke("demo", "--typed", "--db", db, "--quiet")
    assert result.exit_code == 0, result.output
    printed = json.loads(result.stdout.split("\n\nrun id:")[0])
    assert printed == {"people": 4, "total_eur": 150.45, "each_eur": 37.61, "each_usd": 40.62}
    with open_store(db) as store:
        (run,) = store.list_runs()
        found = store.get_run(run.run_id)
        assert found.output == printed
        assert (found.steps, found.tool_calls) == (3, 2)


def test_a_run_ended_invalid_output_resumes_from_the_cli_with_a_larger_limit(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    with FakeOpenAI(completion("twelve and a half")) as server:
        stopped = invoke("run", "Bill it", *TOOLS, "--model", "openai:fake", *at(server), "--db", db, "--json",
                         "--output-schema", str(schema_file(tmp_path)), "--max-output-retries", "0")
    found = json.loads(stopped.stdout)
    assert (stopped.exit_code, found["status"], found["output"]) == (1, "invalid_output", None)
    with FakeOpenAI(completion("", [("c1", "final_result", {"total": 12.5, "currency": "EUR"})])) as server:
        done = invoke("resume", found["run_id"], *TOOLS, "--model", "openai:fake", *at(server), "--db", db,
                      "--max-output-retries", "1", "--json")
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["output"] == {"total": 12.5, "currency": "EUR"}


def test_the_resume_suggested_after_invalid_output_raises_max_output_retries(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    with FakeOpenAI(completion("twelve and a half")) as server:
        stopped = invoke("run", "Bill it", *TOOLS, "--model", "openai:fake", *at(server), "--db", db,
                         "--output-schema", str(schema_file(tmp_path)), "--max-output-retries", "0")
    assert stopped.exit_code == 1, stopped.output
    suggested = [line for line in stopped.output.splitlines() if line.strip().startswith("runner resume ")]
    assert suggested, stopped.output
    assert " --max-output-retries 2 " in suggested[0]  # one failure under 0: room for more
