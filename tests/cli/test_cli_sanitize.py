"""Untrusted text never reaches the terminal as control sequences; ``--json`` keeps it exact."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runner import ModelReply, ScriptedModel, ToolCall, ToolRegistry, run_agent
from runner._text import clean, one_line
from runner.store import open_store
from tests.cli.helpers import invoke, rows

NASTY = ("\x1b[2J\x1b[H\x1b]0;pwned\x07\x1b]8;;http://evil\x1b\\link\x1b]8;;\x1b\\ ok\x07\x08\r"
         "\x9b31mred\x9b0m \x1bPdcs\x1b\\\x1bc\x00\x7f\u202eevil\u202c done")
HARMLESS = "link okred evil done"


@pytest.mark.parametrize(("raw", "shown"), [
    ("\x1b[2Jclear", "clear"),
    ("\x1b[1;31mred\x1b[0m", "red"),
    ("\x1b]0;title\x07after", "after"),
    ("\x1b]52;c;aGk=\x1b\\after", "after"),
    ("\x1bP1$r\x1b\\x", "x"),
    ("\x1b(Bx\x1b=y\x1bcz", "xyz"),
    ("a\rb\x08c\x07d\x00e\x7ff", "abcdef"),
    ("\x9b2J\x9d0;t\x9cx\x85y", "xy"),
    ("keep\ttabs\nand lines", "keep\ttabs\nand lines"),
    ("\u202eevil\u202c", "evil"),
    ("unterminated \x1b]0;title", "unterminated "),
    ("trailing \x1b", "trailing "),
    ("Ünïcödé €", "Ünïcödé €"),
])
def test_clean_removes_control_sequences(raw: str, shown: str) -> None:
    assert clean(raw) == shown


def test_one_line_folds_whitespace() -> None:
    assert one_line(" a\n\tb \x1b[2J c ") == "a b c"


@pytest.fixture
def db(tmp_path: Path) -> tuple[str, str]:
    tools = ToolRegistry()
    tools.register("echo", "Echo.", {"type": "object", "properties": {"text": {"type": "string"}}},
                   lambda text: text)
    model = ScriptedModel([ModelReply(NASTY, [ToolCall("c\x1b[2J1", "echo", {"text": NASTY})]), NASTY])
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    with open_store(url) as store:
        result = run_agent(f"task {NASTY}", model, tools, store=store, labels={"k\x1b[2J": f"v{NASTY}"})
    return url, result.run_id


def assert_harmless(output: str) -> None:
    for bad in ("\x1b", "\x9b", "\x9d", "\x07", "\x08", "\r", "\x00", "\x7f", "\u202e"):
        assert bad not in output, repr(bad)


def test_a_hostile_reply_shows_up_harmlessly_in_the_table(db: tuple[str, str]) -> None:
    url, _ = db
    result = invoke("runs", "--db", url)
    assert_harmless(result.stdout)
    (row,) = rows(result.stdout)
    assert row[-1] == f"task {HARMLESS}"


def test_a_hostile_reply_shows_up_harmlessly_in_show(db: tuple[str, str]) -> None:
    url, run_id = db
    for args in ([], ["--full"]):
        result = invoke("show", run_id[:8], "--db", url, *args)
        assert result.exit_code == 0
        assert_harmless(result.stdout)
        assert f"  task {HARMLESS}" in result.stdout.splitlines()
        assert f"    {HARMLESS}" in result.stdout.splitlines()
        # arguments are shown as JSON, whose escapes show the control characters as text
        assert '    → echo({"text": "\\u001b[2J\\u001b[H\\u001b]0;pwned\\u0007' in result.stdout
        assert "[c1]" in result.stdout
        assert "labels k=v" + HARMLESS in result.stdout


def test_json_keeps_the_exact_text_escaped(db: tuple[str, str]) -> None:
    url, run_id = db
    for args in (["runs"], ["show", run_id]):
        result = invoke(*args, "--db", url, "--json")
        assert_harmless(result.stdout)
        assert "\\u001b[2J" in result.stdout
    found = json.loads(invoke("show", run_id, "--db", url, "--json").stdout)
    assert found["run"]["task"] == f"task {NASTY}"
    assert found["run"]["answer"] == NASTY
    assert found["run"]["labels"] == {"k\x1b[2J": f"v{NASTY}"}
    # `runs` reads the summary columns, which hold the storable rendering (NUL dropped on every backend).
    assert json.loads(invoke("runs", "--db", url, "--json").stdout)[0]["answer"] == NASTY.replace("\x00", "")


def test_error_messages_are_cleaned_too(db: tuple[str, str]) -> None:
    url, _ = db
    result = invoke("show", "\x1b[2Jnope", "--db", url)
    assert result.exit_code == 3
    assert_harmless(result.stderr)
