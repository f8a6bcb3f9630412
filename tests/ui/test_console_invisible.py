"""The console prints names holding a character nobody can see escaped, as the CLI does (issue 37, "Also").

The run page and the runs list show tool names, call ids, labels, agent and model names through the
``name`` filter (``ech\\u200bo``); the task and the answer keep their joiners; a form's hidden call
id stays exact, so a decision still names the real call.
"""

from __future__ import annotations

import html
import re

from starlette.testclient import TestClient

from runner import ModelReply, ScriptedModel, ToolRegistry, run_agent
from runner.store import RunStore
from runner.ui import create_app
from tests.cli.invisible import ANSWER, INVISIBLE, TASK, record
from tests.loop.helpers import call


def page(store: RunStore, path: str) -> str:
    with TestClient(create_app(store), base_url="http://127.0.0.1:8000") as client:
        got = client.get(path)
    assert got.status_code == 200, got.text
    return html.unescape(got.text)


ATTRIBUTE = re.compile(r'\s[\w-]+="[^"]*"')


def seen(shown: str) -> set[str]:
    """The characters of the page's text, outside attributes (a ``data-call-id`` keeps the exact id for scripts)."""
    return set(ATTRIBUTE.sub("", shown))


def test_the_run_page_shows_invisible_characters_in_names_escaped(store: RunStore) -> None:
    run_id = record(store)
    shown = page(store, f"/runs/{run_id}")
    assert not set(INVISIBLE) - {"\u200d"} & seen(shown)
    text = ATTRIBUTE.sub("", shown)
    assert text.count("\u200d") == text.count("👩\u200d💻") > 0  # a joiner only inside the emoji of the free text
    assert TASK in shown
    assert ANSWER in shown
    assert "gp\\u200bt (scripted)" in shown
    assert "ag\\u2060ent" in shown
    for i, escape in enumerate(INVISIBLE.values()):
        assert f'<span class="tool">ech{escape}o</span> <span class="dim">c{i}{escape}</span>' in shown
        assert f'<span class="label">te{escape}am=bl{escape}ue</span>' in shown
    assert '<span class="tool">echo</span> <span class="dim">c-plain</span>' in shown


def test_the_runs_list_shows_invisible_characters_in_labels_escaped(store: RunStore) -> None:
    record(store)
    shown = page(store, "/")
    for escape in INVISIBLE.values():
        assert f'<span class="label">te{escape}am=bl{escape}ue</span>' in shown
    assert not set(INVISIBLE) - {"\u200d"} & seen(shown)


def test_a_pending_call_is_shown_escaped_and_decided_by_its_exact_id(store: RunStore) -> None:
    registry = ToolRegistry()
    registry.register("pa\u200by", "Pay.", {"type": "object", "properties": {}}, lambda: "paid", needs_approval=True)
    result = run_agent("Pay", ScriptedModel([ModelReply(content="", tool_calls=[call("p\ufeff1", "pa\u200by")])]),
                       registry, store=store)
    assert result.status == "awaiting_approval"
    for path in (f"/runs/{result.run_id}", "/approvals"):
        shown = page(store, path)
        assert '<span class="tool">pa\\u200by</span>' in shown, path
        assert 'name="call_id" value="p\ufeff1"' in shown, path  # the form posts the real id
