"""A reply cut off mid-stream, or still being written, in ``runner show`` and on the console's run page.

Its ``model_delta`` facts with no ``model_call`` after them are one entry of the shared timeline: the
text written so far, marked interrupted (the process died, the call failed) or streaming (the run's
process still goes). A reply that came has its model entry alone: the deltas are not shown twice.
"""

from __future__ import annotations

import html
import json
import re

import pytest
from starlette.testclient import TestClient

from runner.events import MessageAppended, ModelCalled, RunResumed, StepStarted
from runner.messages import ModelReply
from runner.store import RunStore, open_store
from runner.ui import create_app
from tests.cli.helpers import deltas, invoke, logged, opening

pytestmark = pytest.mark.process  # its runs' processes are gone: a pid that was (tests.cli.helpers.make_dead)
HOSTILE = "<script>alert(1)</script> & \x1b[31mred"


def page_entries(store: RunStore, run_id: str) -> list[tuple[str, str]]:
    """The run page's timeline entries: their kind, and a partial reply's text and whether it is live."""
    with TestClient(create_app(store), base_url="http://127.0.0.1") as client:
        page = client.get(f"/runs/{run_id}")
    assert page.status_code == 200
    found = []
    for item in re.finditer(r'<li class="entry([^"]*)"[^>]*data-kind="(\w+)"[^>]*>(.*?)</li>', page.text, re.S):
        classes, kind, body = item[1], item[2], item[3]
        if kind in ("partial", "streaming"):  # the run's last one is drawn apart, where the page grows it
            live = re.search(r'data-live="(\w+)"', item[0])
            shown_live = live[1] if live is not None else ("false" if " cut" in classes else "true")
            text = re.search(r'<pre class="text">(.*?)</pre>', body, re.S)
            assert text is not None
            kind = f"partial {shown_live}: {html.unescape(text[1])}"
        found.append((kind, body))
    return found


def kinds(store: RunStore, run_id: str) -> list[str]:
    return [kind for kind, _ in page_entries(store, run_id)]


def test_a_reply_killed_mid_stream_shows_its_text_so_far_marked_interrupted(store_url: str) -> None:
    with open_store(store_url) as store:
        run_id = logged(store, [*opening("killed"), *deltas(1, "Hello ", "wor")])
        assert kinds(store, run_id) == ["step", "partial false: Hello wor"]
    shown = invoke("show", run_id, "--db", store_url).stdout
    assert "  model  interrupted: the reply so far (it never came; a resume asks the model again)\n    Hello wor\n" \
        in shown
    events = invoke("show", run_id, "--db", store_url, "--json")
    assert events.exit_code == 0
    listed = [(e["step"], e["data"]) for e in json.loads(events.stdout)["events"] if e["kind"] == "model_delta"]
    assert listed == [(1, {"text": "Hello ", "offset": 0}), (1, {"text": "wor", "offset": 6})]


def test_a_reply_being_written_shows_as_streaming(store_url: str) -> None:
    with open_store(store_url) as store:
        run_id = logged(store, [*opening("live"), *deltas(1, "Hel")], dead=False)  # this process owns it
        assert kinds(store, run_id) == ["step", "partial true: Hel"]
    assert "  model  streaming: the reply so far\n    Hel\n" in invoke("show", run_id, "--db", store_url).stdout


def test_a_reply_that_came_shows_once_and_a_failed_one_keeps_its_text(store_url: str) -> None:
    with open_store(store_url) as store:
        came = logged(store, [*opening("came"), *deltas(1, "Hi", " there"),
                              MessageAppended(step=1, index=2, message={"role": "assistant", "content": "Hi there",
                                                                          "tool_calls": []}),
                              ModelCalled(step=1, prompt_tokens=3, reply_tokens=2, reply=ModelReply("Hi there"))])
        assert kinds(store, came) == ["step", "model"]
        failed = logged(store, [*opening("failed"), *deltas(1, "Hi"),
                                ModelCalled(step=1, prompt_tokens=3, reply_tokens=0, error="connection reset",
                                            error_type="APIConnectionError")])
        assert kinds(store, failed) == ["step", "model", "partial false: Hi"]  # the last one drawn apart, below


def test_a_resume_after_a_cut_keeps_the_cut_text_and_the_new_reply_alone(store_url: str) -> None:
    with open_store(store_url) as store:
        run_id = logged(store, [
            *opening("again"), *deltas(1, "First try"),
            RunResumed(run_id="again", step=1, owner="o", reason="running", limits={}),
            StepStarted(step=1), *deltas(1, "Second"),
            MessageAppended(step=1, index=2, message={"role": "assistant", "content": "Second", "tool_calls": []}),
            ModelCalled(step=1, prompt_tokens=3, reply_tokens=2, reply=ModelReply("Second"))])
        assert kinds(store, run_id) == ["step", "partial false: First try", "resumed", "step", "model"]
    shown = invoke("show", run_id, "--db", store_url).stdout
    assert shown.count("interrupted: the reply so far") == 1


def test_a_partial_replys_text_is_escaped_on_the_page_and_cleaned_in_the_terminal(store_url: str) -> None:
    with open_store(store_url) as store:
        run_id = logged(store, [*opening("hostile"), *deltas(1, HOSTILE)])
        entries = page_entries(store, run_id)
        assert entries[1][0] == f"partial false: {HOSTILE}"  # the text as written, once unescaped
        assert "<script>" not in entries[1][1]
    shown = invoke("show", run_id, "--db", store_url).stdout
    assert "\x1b" not in shown
    assert "    <script>alert(1)</script> & red" in shown
