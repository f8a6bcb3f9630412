"""``runner export`` and ``runner replay``: fixtures out, replays in, exit 1 on divergence."""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from runner import ScriptedModel, ToolRegistry, run_agent
from runner._replay.fixture import load_fixture
from runner.store import open_store
from tests.cli.helpers import R1, R3, fill, invoke, one_error_line, registry
from tests.loop.helpers import call, record_unfinished_run, reply

TOOLS = "tests.cli.helpers:registry"


def colder_registry() -> ToolRegistry:
    """The recorded tools, but Paris is colder than when the run was recorded."""
    tools = ToolRegistry()
    for spec in registry().specs():
        recorded = registry().get(spec["name"])
        assert recorded is not None
        fn = (lambda city: {"celsius": 5}) if spec["name"] == "get_weather" else recorded.fn
        tools.register(spec["name"], spec["description"], spec["parameters"], fn)
    return tools


def renamed_registry() -> ToolRegistry:
    """The recorded tools, but get_weather is described differently and takes a unit too."""
    tools = ToolRegistry()
    for spec in registry().specs():
        recorded = registry().get(spec["name"])
        assert recorded is not None
        if spec["name"] == "get_weather":
            tools.register("get_weather", "Weather now.", {"type": "object", "properties": {
                "city": {"type": "string"}, "unit": {"type": "string"}}, "required": ["city"]}, recorded.fn)
        else:
            tools.register(spec["name"], spec["description"], spec["parameters"], recorded.fn)
    return tools


NOT_A_REGISTRY = {"a": 1}

PAID: list[str] = []


def paying_registry() -> ToolRegistry:
    """The recorded tools plus ``pay``, a tool with side effects that notes each payment in ``PAID``."""
    def pay(ref: str) -> str:
        PAID.append(ref)
        return f"paid {ref}"

    tools = registry()
    tools.register("pay", "Pay (writes).", {"type": "object", "properties": {"ref": {"type": "string"}},
                                            "required": ["ref"]}, pay, side_effects=True)
    return tools


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


def test_export_through_a_symlink_writes_the_file_it_points_at_and_keeps_the_link(db: str, tmp_path: Path) -> None:
    kept, missing = tmp_path / "kept.json", tmp_path / "sub" / "new.json"
    kept.write_text("old\n")
    (tmp_path / "sub").mkdir()
    for link, points_at in ((tmp_path / "to-kept.json", kept), (tmp_path / "to-new.json", missing)):
        link.symlink_to(points_at)
        result = invoke("export", R1, "-o", str(link), "--db", db)
        assert result.exit_code == 0, result.output
        assert result.stdout == f"wrote {link}: run {R1}, 2 model replies, ended done\n"
        assert link.readlink() == points_at  # still the link
        assert stat.S_ISREG(points_at.lstat().st_mode)
        assert load_fixture(points_at).data["run_id"] == R1
    assert not list(tmp_path.rglob("*.tmp"))


def test_export_refuses_a_fifo_and_leaves_it_a_fifo(db: str, tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    for output in (fifo, tmp_path / "to-pipe"):
        if output != fifo:
            output.symlink_to(fifo)
        result = invoke("export", R1, "-o", str(output), "--db", db)
        assert result.exit_code == 3, result.output
        assert one_error_line(result) == (f"Error: cannot write fixture {str(output)!r}: not a regular file (a FIFO); "
                                          "a fixture replaces only a regular file")
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("runs.db")) == ["pipe", "to-pipe"]


def test_export_refuses_dev_null_and_leaves_it_a_character_device(db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    real_replace = os.replace

    def guarded(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        assert os.path.realpath(dst) != "/dev/null", "the export tried to replace /dev/null"  # as root it would
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", guarded)
    result = invoke("export", R1, "-o", "/dev/null", "--db", db)
    assert result.exit_code == 3, result.output
    assert one_error_line(result) == ("Error: cannot write fixture '/dev/null': not a regular file "
                                      "(a character device); a fixture replaces only a regular file")
    assert stat.S_ISCHR(os.lstat("/dev/null").st_mode)


def test_replay_of_a_fixture_that_still_matches_exits_0(db: str, tmp_path: Path) -> None:
    target = tmp_path / "paris.json"
    invoke("export", R1, "-o", str(target), "--db", db)
    result = invoke("replay", str(target), "--tools", TOOLS)
    assert result.exit_code == 0, result.output
    assert result.stdout == "ok  replay matched the recording (done, 2 steps)\n"


def test_replay_of_a_stored_run_resolves_the_id_against_db(db: str) -> None:
    result = invoke("replay", "1111aa", "--tools", TOOLS, "--db", db, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["ok"] is True
    assert report["status"] == report["recorded_status"] == "done"
    assert report["divergence"] is None


def test_replay_reports_a_divergence_and_exits_1(db: str, tmp_path: Path) -> None:
    target = tmp_path / "paris.json"
    invoke("export", R1, "-o", str(target), "--db", db)
    result = invoke("replay", str(target), "--tools", "tests.cli.test_cli_replay:colder_registry")
    assert result.exit_code == 1
    first = result.stdout.splitlines()[0]
    assert first == ("DIFFERS  at step 2 the result of call c1 (get_weather) differs: "
                     "recorded '{\"celsius\": 21}', got '{\"celsius\": 5}'")
    result = invoke("replay", str(target), "--tools", "tests.cli.test_cli_replay:colder_registry", "--json")
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert report["ok"] is False
    assert report["divergence"]["step"] == 2
    assert report["divergence"]["field"] == "content"


@pytest.mark.parametrize(("spec", "message", "code"), [
    ("nocolon", "Error: --tools expects module:attr (e.g. myapp.tools:registry), got 'nocolon'", 2),
    ("tests.no_such_module:x", "Error: --tools tests.no_such_module:x: cannot import 'tests.no_such_module'", 2),
    ("tests.loop.helpers:nothing", "Error: --tools tests.loop.helpers:nothing: 'tests.loop.helpers' has no "
                                   "attribute 'nothing'", 2),
    ("tests.cli.test_cli_replay:NOT_A_REGISTRY", "Error: --tools tests.cli.test_cli_replay:NOT_A_REGISTRY: expected a "
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


def _surrogate_run(url: str) -> str:
    """A finished run whose tool call arguments hold a lone surrogate (a model can send one)."""
    with open_store(url) as store:
        model = ScriptedModel([reply("", call("c1", "echo_long", note="x\ud800y")), "done"])
        tools = registry()
        return run_agent("t", model, tools, store=store, run_id="5555" + "e" * 28).run_id


def _unfinished_run(url: str) -> str:
    with open_store(url) as store:
        record_unfinished_run(store, "6666" + "f" * 28, "half done")
    return "6666" + "f" * 28


def test_export_of_a_run_with_a_lone_surrogate_writes_valid_utf8_and_show_prints_the_run(
        db: str, tmp_path: Path) -> None:
    run_id = _surrogate_run(db)
    keep = tmp_path / "keep.json"
    keep.write_text("good\n")
    result = invoke("export", run_id, "-o", str(keep), "--db", db)
    assert result.exit_code == 0, result.output
    assert load_fixture(keep).replies[0]["tool_calls"][0]["args"] == {"note": "x\ud800y"}
    assert '"x\\ud800y"' in keep.read_bytes().decode("utf-8")
    assert json.loads(invoke("export", run_id, "-o", "-", "--db", db).stdout)["run_id"] == run_id
    shown = invoke("show", run_id, "--db", db)
    assert shown.exit_code == 0, shown.output
    assert "echo_long" in shown.stdout
    assert '"note": "x\\ud800y"' in shown.stdout


def test_a_failed_export_leaves_an_existing_fixture_intact_and_show_still_works(
        db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    keep = tmp_path / "keep.json"
    keep.write_text("good\n")
    unfinished = _unfinished_run(db)
    result = invoke("export", "nope", "-o", str(keep), "--db", db)
    assert result.exit_code == 3
    assert one_error_line(result).startswith("Error: no run 'nope' in ")
    assert keep.read_text() == "good\n"
    result = invoke("export", unfinished, "-o", str(keep), "--db", db)
    assert result.exit_code == 3
    assert one_error_line(result).startswith(f"Error: run {unfinished} has not finished (status running, ")
    assert keep.read_text() == "good\n"
    shown = invoke("show", unfinished, "--db", db)
    assert shown.exit_code == 0, shown.output
    assert shown.stdout.splitlines()[0].startswith(f"run {unfinished}  running")

    def full_disk(src: object, dst: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "replace", full_disk)
    result = invoke("export", R1, "-o", str(keep), "--db", db)
    assert result.exit_code == 3
    assert one_error_line(result) == f"Error: cannot write fixture {str(keep)!r}: No space left on device"
    assert keep.read_text() == "good\n"
    # no temporary fixture is left behind (the store's own -wal/-shm files may be)
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("runs.db")) == ["keep.json"]


def test_replay_reports_changed_tool_specs_in_one_sentence_and_exits_1(db: str, tmp_path: Path) -> None:
    target = tmp_path / "paris.json"
    invoke("export", R1, "-o", str(target), "--db", db)
    result = invoke("replay", str(target), "--tools", "tests.cli.test_cli_replay:renamed_registry")
    assert result.exit_code == 1
    assert result.stdout.splitlines()[0] == (
        "DIFFERS  at step 1 the tools shown to the model differ from the recording: the description of tool "
        "'get_weather' changed: recorded 'Current temperature in a city.', got 'Weather now.'; the parameters of "
        "tool 'get_weather' changed at properties.unit: recorded nothing, got '{\"type\": \"string\"}'")
    result = invoke("replay", str(target), "--tools", "tests.cli.test_cli_replay:renamed_registry", "--json")
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert (report["ok"], report["status"], report["recorded_status"]) == (False, "model_error", "done")
    assert report["divergence"] == {"step": 1, "index": None, "field": "tool_specs",
                                    "sentence": report["divergence"]["sentence"]}
    assert report["divergence"]["sentence"].startswith("at step 1 the tools shown to the model differ")


def test_replay_serves_recorded_side_effects_unless_live_side_effects_is_given(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'pay.db'}"
    with open_store(url) as store:
        model = ScriptedModel([reply("", call("c1", "pay", ref="p1"), call("c2", "get_weather", city="Paris")),
                               "paid"])
        run_id = run_agent("Pay p1.", model, paying_registry(), store=store).run_id
    PAID.clear()
    target = tmp_path / "pay.json"
    assert invoke("export", run_id, "-o", str(target), "--db", url).exit_code == 0
    tools = "tests.cli.test_cli_replay:paying_registry"
    result = invoke("replay", str(target), "--tools", tools)
    assert (result.exit_code, result.stdout) == (0, "ok  replay matched the recording (done, 2 steps)\n")
    assert PAID == []
    result = invoke("replay", str(target), "--tools", tools, "--json")
    assert (result.exit_code, json.loads(result.stdout)["live_side_effects"]) == (0, False)
    assert PAID == []
    result = invoke("replay", str(target), "--tools", tools, "--live-side-effects", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert (report["ok"], report["live_side_effects"]) == (True, True)
    assert PAID == ["p1"]


def test_replay_update_rewrites_a_fixture_that_differs_keeping_the_recorded_replies(db: str, tmp_path: Path) -> None:
    target = tmp_path / "paris.json"
    invoke("export", R1, "-o", str(target), "--db", db)
    before = load_fixture(target)
    colder = "tests.cli.test_cli_replay:colder_registry"
    differs = invoke("replay", str(target), "--tools", colder)
    assert ("  (if the change is intended, --update rewrites the fixture from the current tools (the model's replies "
            "kept))") in differs.stdout.splitlines()
    updated = invoke("replay", str(target), "--tools", colder, "--update")
    assert updated.exit_code == 0, updated.output
    assert updated.stdout.startswith(f"updated  {target} now holds what the current tools return (the model's "
                                     "replies kept); it differed: at step 2 the result of call c1")
    after = load_fixture(target)
    assert said(after.replies) == said(before.replies)
    assert [m["content"] for m in after.messages() if m["role"] == "tool"] == ['{"celsius": 5}']
    again = invoke("replay", str(target), "--tools", colder, "--update")
    assert again.stdout == "ok  replay matched the recording (done, 2 steps); nothing to update\n"
    assert invoke("replay", str(target), "--tools", colder).exit_code == 0
    by_id = invoke("replay", R1, "--tools", colder, "--update", "--db", db)
    assert (by_id.exit_code, one_error_line(by_id)) == (
        2, f"Error: --update rewrites a fixture file, and {R1!r} is none (export a run first: runner export RUN "
           "-o FILE)")


def said(replies: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What the model said in each reply (a reply in a fixture also keeps what its calls returned)."""
    return [{key: value for key, value in reply.items() if key != "observations"} for reply in replies]
