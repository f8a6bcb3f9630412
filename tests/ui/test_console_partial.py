"""The reply a model is still writing on a run's page: its deltas' text so far, drawn by the server.

A live run's page shows it as "model writing" with the last event it was drawn from (the script goes on
from there); a reply whose model call failed or whose process is gone shows as cut off.
"""

from __future__ import annotations

import time
from collections.abc import Generator
from dataclasses import replace
from datetime import UTC, datetime
from html import escape

from starlette.testclient import TestClient

from runner import ModelReply, ToolRegistry, stream_agent
from runner._view.partial import Partial, partial_reply
from runner.events import KIND_OF, Event, ModelCalled, ModelDelta, RunResumed, StepStarted
from runner.store import RunStore, StoredEvent
from runner.streaming import TextDelta
from runner.ui import create_app
from tests.streaming.helpers import StreamingModel
from tests.ui.helpers import streaming

RUN = "c" * 32
WORDS = "one two <b>three</b> four five six seven eight nine ten"
DELTA = KIND_OF[ModelDelta]


def logged(run_id: str, store: RunStore, *facts: Event) -> list[Partial | None]:
    """``partial_reply`` of the run as its log would be after each of ``facts`` (appended to what it holds)."""
    run = store.get_run(run_id)
    events, found = list(run.events), list[Partial | None]()
    for fact in facts:
        events.append(StoredEvent(events[-1].seq + 1, datetime.now(UTC), 0, KIND_OF[type(fact)], {}, None))
        found.append(partial_reply(replace(run, events=events, facts=(*run.facts, *facts[:len(found) + 1]))))
    return found


def delta(text: str, offset: int) -> ModelDelta:
    return ModelDelta(step=2, text=text, offset=offset)


def cancelled_mid_reply(store: RunStore) -> str:
    """A run whose caller left after four pieces of its reply: cancelled, its model call failed."""
    pieces = stream_agent("Write", StreamingModel([WORDS], pause_s=0.05), ToolRegistry(), store=store, run_id=RUN,
                          delta_interval_s=0.01)
    seen = 0
    for event in pieces:
        seen += isinstance(event, TextDelta)
        if seen == 4:
            break
    assert isinstance(pieces, Generator)
    pieces.close()  # as leaving a for loop does, once the generator is dropped
    return RUN


def test_each_delta_goes_at_its_offset_and_a_reply_logged_whole_or_a_resume_ends_the_partial(
        store: RunStore) -> None:
    run_id = cancelled_mid_reply(store)  # a run to graft facts on: it ends with its failed model call
    before = partial_reply(store.get_run(run_id))
    assert before is not None
    assert before.cut
    whole = ModelCalled(step=2, prompt_tokens=1, reply_tokens=1, latency_s=0.1, reply=ModelReply("ab"))
    found = logged(run_id, store, StepStarted(step=2), delta("a", 0), delta("bc", 1), delta("B", 1), delta("x", 0),
                   whole, delta("again", 0), RunResumed(owner="me", reason="running", limits={}))
    texts = [(p.step, p.text, p.cut) if p is not None else None for p in found]
    assert texts == [(1, before.text, True), (2, "a", False), (2, "abc", False), (2, "aB", False),
                     (2, "x", False), None, (2, "again", False), None]
    assert found[2] is not None
    assert found[2].seq == store.get_run(run_id).events[-1].seq + 3  # the last delta's event


def test_a_reply_cut_off_by_a_cancel_shows_its_text_so_far_escaped(store: RunStore) -> None:
    run_id = cancelled_mid_reply(store)
    run = store.get_run(run_id)
    written = "".join(e.data["text"] for e in run.events if e.kind == DELTA)
    assert 0 < len(written) < len(WORDS)
    assert "<b>" in written
    with TestClient(create_app(store), base_url="http://127.0.0.1") as client:
        html = client.get(f"/runs/{run_id}").text
    assert ('<li class="entry model streaming cut" id="streaming" data-kind="streaming" data-step="1" '
            f'data-seq="{max(e.seq for e in run.events if e.kind == DELTA)}"><div class="what">reply cut off '
            f'<span class="dim">step 1</span></div><pre class="text">{escape(written, quote=False)}</pre></li>') in html
    assert "<b>three" not in html


def test_a_live_runs_page_shows_the_text_written_so_far_and_the_event_it_was_drawn_from(store: RunStore) -> None:
    model = StreamingModel([" ".join(["word"] * 40)], pause_s=0.05)
    with streaming(store, model, ToolRegistry(), RUN) as done, \
            TestClient(create_app(store), base_url="http://127.0.0.1") as client:
        deadline = time.monotonic() + 20
        while sum(e.kind == DELTA for e in store.get_run(RUN).events) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        page = client.get(f"/runs/{RUN}", headers={"X-Refresh": "run"})
        assert not done.done()
    run_seq = int(page.text.split('data-seq="', 1)[1].split('"', 1)[0])  # the header's, first on the part
    assert page.headers["x-live"] == "1"
    assert '<li class="entry model streaming" id="streaming"' in page.text
    assert '<div class="what">model writing <span class="dim">step 1</span></div><pre class="text">word word' \
        in page.text
    assert run_seq >= 6  # run_started, the system and user messages, step_started, two deltas at least
