"""``runner export`` and ``runner replay``: fixtures out, replays in, exit 1 on divergence."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runner import ToolRegistry
from runner.fixture import load_fixture
from tests.test_cli_helpers import R1, R3, fill, invoke, one_error_line

TOOLS = "tests.test_cli_helpers:registry"


def colder_registry() -> ToolRegistry:
    """The weather tools, but Paris is colder than when the run was recorded."""
    tools = ToolRegistry()
    tools.register("get_weather", "Current temperature in a city.",
                   {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
                   lambda city: {"celsius": 5})
    return tools


NOT_A_REGISTRY = {"a": 1}


@pytest.fixture
def db(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    fill(url)
    return url


def test_export_writes_a_fixture_of_the_run(db: str, tmp_path: Path) -> None:
    target = tmp_path / "fixtures" / "paris.json"
    result = invoke("export", "1111", "-o", str(target), "--db", db)
    assert result.exit_code == 0, result.output
    assert result.stdout == f"wrote {target}: run {R1}, 2 model replies, ended done\n"
    fixture = load_fixture(target)
    assert fixture.data["run_id"] == R1
    assert fixture.task == "Weather in Paris?"
    assert [r["content"] for r in fixture.replies] == ["", "It is 21C."]


def test_export_to_stdout_and_as_json(db: str, tmp_path: Path) -> None:
    result = invoke("export", R3, "-o", "-", "--db", db)
    assert json.loads(result.stdout)["outcome"]["status"] == "model_error"
    result = invoke("export", R1, "-o", str(tmp_path / "f.json"), "--db", db, "--json")
    assert json.loads(result.stdout) == {"path": str(tmp_path / "f.json"), "run_id": R1, "replies": 2}


def test_export_errors_are_one_line(db: str, tmp_path: Path) -> None:
    result = invoke("export", "nope", "-o", str(tmp_path / "f.json"), "--db", db)
    assert result.exit_code == 3
    assert one_error_line(result).startswith("Error: no run 'nope'")
    result = invoke("export", R1, "-o", str(tmp_path), "--db", db)
    assert result.exit_code == 3
    assert one_error_line(result).startswith(f"Error: cannot write fixture {str(tmp_path)!r}")
    result = invoke("export", R1, "--db", db)
    assert result.exit_code == 2
    assert "Missing option '-o' / '--output'" in one_error_line(result)


def test_replay_of_a_fixture_that_still_matches_exits_0(db: str, tmp_path: Path) -> None:
    target = tmp_path / "paris.json"
    invoke("export", R1, "-o", str(target), "--db", db)
    result = invoke("replay", str(target), "--tools", TOOLS)
    assert result.exit_code == 0, result.output
    assert result.stdout == "ok  replay matched the recording (done, 2 steps)\n"


def test_replay_of_a_stored_run_resolves_the_id_against_db(db: str) -> None:
    result = invoke("replay", "1111aa", "--tools", "tests.loop_helpers:weather_registry", "--db", db, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["ok"] is True
    assert report["status"] == report["recorded_status"] == "done"
    assert report["divergence"] is None


def test_replay_reports_a_divergence_and_exits_1(db: str, tmp_path: Path) -> None:
    target = tmp_path / "paris.json"
    invoke("export", R1, "-o", str(target), "--db", db)
    result = invoke("replay", str(target), "--tools", "tests.test_cli_replay:colder_registry")
    assert result.exit_code == 1
    first = result.stdout.splitlines()[0]
    assert first == ("DIFFERS  at step 2 the result of call c1 (get_weather) differs: "
                     "recorded '{\"celsius\": 21}', got '{\"celsius\": 5}'")
    result = invoke("replay", str(target), "--tools", "tests.test_cli_replay:colder_registry", "--json")
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert report["ok"] is False
    assert report["divergence"]["step"] == 2
    assert report["divergence"]["field"] == "content"


@pytest.mark.parametrize(("spec", "message", "code"), [
    ("nocolon", "Error: --tools expects module:attr (e.g. myapp.tools:registry), got 'nocolon'", 2),
    ("tests.no_such_module:x", "Error: --tools tests.no_such_module:x: cannot import 'tests.no_such_module'", 2),
    ("tests.loop_helpers:nothing", "Error: --tools tests.loop_helpers:nothing: 'tests.loop_helpers' has no "
                                   "attribute 'nothing'", 2),
    ("tests.test_cli_replay:NOT_A_REGISTRY", "Error: --tools tests.test_cli_replay:NOT_A_REGISTRY: expected a "
                                             "ToolRegistry or a function returning one, got dict", 2),
])
def test_bad_tools_specs_are_one_line_usage_errors(db: str, spec: str, message: str, code: int) -> None:
    result = invoke("replay", R1, "--tools", spec, "--db", db)
    assert result.exit_code == code
    assert one_error_line(result).startswith(message)


def test_missing_and_corrupt_fixtures_are_one_line(db: str, tmp_path: Path) -> None:
    result = invoke("replay", str(tmp_path / "missing.json"), "--tools", TOOLS, "--db", db)
    assert result.exit_code == 3
    assert one_error_line(result) == f"Error: no fixture file {str(tmp_path / 'missing.json')!r}"
    corrupt = tmp_path / "corrupt.json"
    corrupt.write_text("{not json")
    result = invoke("replay", str(corrupt), "--tools", TOOLS, "--db", db)
    assert result.exit_code == 3
    assert one_error_line(result).startswith(f"Error: fixture {str(corrupt)!r} is not readable JSON")
    other = tmp_path / "other.json"
    other.write_text('{"hello": 1}')
    result = invoke("replay", str(other), "--tools", TOOLS, "--db", db)
    assert result.exit_code == 3
    assert "is not a runner fixture" in one_error_line(result)
