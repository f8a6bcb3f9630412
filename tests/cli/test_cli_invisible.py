"""Names holding a character nobody can see are printed escaped (issue 37, "Also").

A tool named ``ech<U+200B>o`` must never look like ``echo``: the CLI prints tool names, call ids,
label keys, agent and model names with each invisible or control character as its escape
(``ech\\u200bo``); a label's value is cleaned as free text, then escaped the same way. Free text (the
task, the answer) keeps the joiners emoji and Indic or Persian words need. The console's side is
tests/ui/test_console_invisible.py.
"""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from runner import ModelReply, ScriptedModel, ToolRegistry, run_agent
from runner._text import shown_name
from runner.events import ApprovalRequested, ToolFinished
from runner.progress import ProgressRecorder
from runner.store import RunStore
from tests.cli.helpers import invoke
from tests.cli.invisible import ANSWER, INVISIBLE, TASK, record
from tests.loop.helpers import call


@pytest.mark.parametrize(("name", "shown"), [
    ("echo", "echo"), *((f"ech{char}o", f"ech{escape}o") for char, escape in INVISIBLE.items()),
    ("a\u00a0b", "a\\u00a0b"), ("tab\there", "tab\\u0009here"), ("tag\U000e0041", "tag\\U000e0041"),
    ("ha\u3164ngul", "ha\\u3164ngul"), ("C:\\dir", "C:\\\\dir"), ("ech\\u200bo", "ech\\\\u200bo"),
    ("नमस्ते", "नमस्ते"), ("get_weather", "get_weather"), ("lone\udc80", "lone\\udc80"),
    ("be\x07ll", "be\\u0007ll"), ("c\x1b[2J1", "c1"),
], ids=["plain", "zwsp", "zwj", "word-joiner", "bom", "rlo", "nbsp", "tab", "tag", "hangul-filler", "backslash",
        "fake-escape", "devanagari", "ascii", "surrogate", "bell", "terminal-sequence"])
def test_shown_name_escapes_what_cannot_be_seen_and_nothing_else(name: str, shown: str) -> None:
    assert shown_name(name) == shown


def test_show_prints_invisible_characters_in_names_escaped_and_free_text_as_it_is(
        store: RunStore, store_url: str) -> None:
    run_id = record(store)
    result = invoke("show", run_id, "--db", store_url)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert not set(INVISIBLE) - {"\u200d"} & set(result.stdout)  # nothing invisible is printed as it is...
    assert result.stdout.count("\u200d") == 3  # ...but the joiner inside the task, the reply and the answer
    assert f"model gp\\u200bt (scripted), agent ag\\u2060ent, started by b\\u200bob; trace {run_id}" in lines
    values = {escape: "blue" if escape == "\\u202e" else f"bl{escape}ue" for escape in INVISIBLE.values()}
    assert "labels " + ", ".join(f"te{escape}am={values[escape]}" for escape in INVISIBLE.values()) in lines
    assert f"  {TASK}" in lines
    assert f"  {ANSWER}" in lines
    for i, escape in enumerate(INVISIBLE.values()):
        assert f"    → ech{escape}o({{}})  [c{i}{escape}]" in lines
        assert any(line.startswith(f"  tool ech{escape}o [c{i}{escape}]  ") for line in lines)
    assert "    → echo({})  [c-plain]" in lines  # the real echo, which now looks like no other


def test_stats_prints_invisible_characters_in_tool_and_model_names_escaped(store: RunStore, store_url: str) -> None:
    record(store)
    result = invoke("stats", "--db", store_url)
    assert result.exit_code == 0, result.output
    cells = [line.split()[0] for line in result.stdout.splitlines() if line.strip()]
    assert {"echo", *(f"ech{escape}o" for escape in INVISIBLE.values()), "scripted:gp\\u200bt"} <= set(cells)
    assert not set(INVISIBLE) & set(result.stdout)


def test_progress_prints_invisible_characters_in_tool_names_escaped() -> None:
    out = io.StringIO()
    progress = ProgressRecorder(Console(file=out, width=200, no_color=True, highlight=False, soft_wrap=True))
    for char in INVISIBLE:
        progress.record(ToolFinished(step=1, call_id="c", name=f"ech{char}o", observation="x", ok=True))
    progress.record(ApprovalRequested(step=2, call_id="c", name="pa\u202ey", args={}))
    lines = out.getvalue().splitlines()
    assert [line.split("  ")[1] for line in lines] == [
        *(f"tool ech{escape}o" for escape in INVISIBLE.values()), "tool pa\\u202ey"]


def test_a_pending_call_is_listed_with_its_name_escaped(store: RunStore, store_url: str) -> None:
    registry = ToolRegistry()
    registry.register("pa\u200by", "Pay.", {"type": "object", "properties": {}}, lambda: "paid", needs_approval=True)
    result = run_agent("Pay", ScriptedModel([ModelReply(content="", tool_calls=[call("p\ufeff1", "pa\u200by")])]),
                       registry, store=store)
    assert result.status == "awaiting_approval"
    shown = invoke("show", result.run_id, "--db", store_url)
    assert "awaiting approval: p\\ufeff1 (pa\\u200by)" in shown.stdout.splitlines()
