"""``runner ui --by-header``: behind a proxy, who decides comes from a request header, checked, else ``--by``.

In-process (Starlette's TestClient) over a real store: the decision and the resume after it are logged as the
header's name; a bad name is one line (400) and logs nothing; without a token the option is refused.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient

from runner import ScriptedModel, run_agent
from runner.events import ApprovalDecided, RunResumed
from runner.store import RunStore
from runner.ui import create_app
from tests.cli.helpers import invoke
from tests.loop.helpers import call, reply
from tests.ui.money import money

TOKEN = "s3cret"
HEADER = "X-Forwarded-User"
BEARER = {"authorization": f"Bearer {TOKEN}"}
RUN = "b" * 32


def awaiting(store: RunStore, ran: list[str]) -> str:
    """A run whose model asks for ``transfer``: it stops awaiting approval."""
    result = run_agent("Send 5 to bob", ScriptedModel([reply("", call("t1", "transfer", ref="bob"))]), money(ran),
                       store=store, run_id=RUN)
    assert result.status == "awaiting_approval"
    return RUN


def until_done(store: RunStore, run_id: str, timeout_s: float = 20.0) -> str:
    """The run's status once the console's background thread has finished it (bounded wait)."""
    deadline = time.monotonic() + timeout_s
    status = store.get_run(run_id).status
    while status in ("running", "awaiting_approval") and time.monotonic() < deadline:
        time.sleep(0.05)
        status = store.get_run(run_id).status
    return status


@pytest.fixture
def ran() -> list[str]:
    return []


@pytest.fixture
def proxied(store: RunStore, ran: list[str]) -> Iterator[TestClient]:
    app = create_app(store, registry=money(ran), model=ScriptedModel(["Sent."]), token=TOKEN, decided_by="alice",
                     by_header=HEADER)
    with TestClient(app, base_url="http://127.0.0.1:8000") as client:
        yield client


def test_the_decision_and_the_resume_after_it_are_the_headers_person(store: RunStore, proxied: TestClient,
                                                                     ran: list[str]) -> None:
    run_id = awaiting(store, ran)
    answer = proxied.post(f"/api/runs/{run_id}/decisions", json={"decisions": {"t1": True}},
                          headers={**BEARER, HEADER.lower(): "dana"})
    assert answer.status_code == 200, answer.text
    assert answer.json()["decided_by"] == "dana"
    assert until_done(store, run_id) == "done"
    facts = store.get_run(run_id).facts
    assert [(f.call_id, f.decided_by) for f in facts if isinstance(f, ApprovalDecided)] == [("t1", "dana")]
    assert [f.by for f in facts if isinstance(f, RunResumed)] == ["dana"]
    assert ran == ["bob"]
    page = proxied.get(f"/runs/{run_id}", headers=BEARER).text
    assert 'resumed (awaiting_approval) by <b class="by">dana</b>' in page
    assert ' · by <span class="by">dana</span> <span class="dim process" title="the process driving it">' in page
    assert '<div class="limits dim">limits: max_steps 8, token_budget 4000, max_identical_calls 2, ' \
           'max_parallel_tools 8, max_output_retries 2</div>' in page


def test_a_form_decision_takes_the_header_and_utf8_names_read_as_sent(store: RunStore, proxied: TestClient,
                                                                    ran: list[str]) -> None:
    run_id = awaiting(store, ran)
    answer = proxied.post(f"/runs/{run_id}/decide", data={"call_id": "t1", "verdict": "deny", "reason": "no"},
                          headers={b"authorization": f"Bearer {TOKEN}".encode(), HEADER.encode(): "Zoë Ö".encode()},
                          follow_redirects=False)
    assert answer.status_code == 303, answer.text
    assert [f.decided_by for f in store.get_run(run_id).facts if isinstance(f, ApprovalDecided)] == ["Zoë Ö"]


def test_without_the_header_the_decider_is_by(store: RunStore, proxied: TestClient, ran: list[str]) -> None:
    run_id = awaiting(store, ran)
    answer = proxied.post(f"/api/runs/{run_id}/decisions", json={"decisions": {"t1": "no"}}, headers=BEARER)
    assert answer.json()["decided_by"] == "alice"
    assert [f.decided_by for f in store.get_run(run_id).facts if isinstance(f, ApprovalDecided)] == ["alice"]


@pytest.mark.parametrize("value", [b"", b"   ", b"x" * 101, b"eve\x01", b"eve\x7f", "eve\u200b".encode()])
def test_a_bad_header_is_one_line_400_and_logs_nothing(store: RunStore, proxied: TestClient, ran: list[str],
                                                       value: bytes) -> None:
    run_id = awaiting(store, ran)
    headers = {b"authorization": f"Bearer {TOKEN}".encode(), HEADER.encode(): value}
    before = len(store.get_run(run_id).events)
    api = proxied.post(f"/api/runs/{run_id}/decisions", json={"decisions": {"t1": True}},
                       headers=headers)
    form = proxied.post(f"/runs/{run_id}/decide", data={"call_id": "t1", "verdict": "approve"},
                        headers=headers, follow_redirects=False)
    resume = proxied.post(f"/runs/{run_id}/resume", data={}, headers=headers, follow_redirects=False)
    assert (api.status_code, form.status_code, resume.status_code) == (400, 400, 400)
    error = api.json()["error"]
    assert error.startswith("header x-forwarded-user ")
    assert "\n" not in error
    run = store.get_run(run_id)
    assert (len(run.events), run.status, ran) == (before, "awaiting_approval", [])


def test_by_header_needs_a_token_and_a_header_name(store: RunStore) -> None:
    with pytest.raises(ValueError, match=r"^by_header needs a token"):
        create_app(store, by_header=HEADER)
    with pytest.raises(ValueError, match="is not a header name"):
        create_app(store, token=TOKEN, by_header="X User: admin")


@pytest.mark.parametrize(("args", "said"), [
    (["--by-header", HEADER], "Error: --by-header needs --token"),
    (["--by-header", "X User", "--token", TOKEN], "Error: --by-header 'X User' is not a header name"),
])
def test_runner_ui_refuses_by_header_without_a_token_as_a_usage_error(store_url: str, args: list[str],
                                                                       said: str) -> None:
    result = invoke("ui", "--db", store_url, "--port", "0", *args)
    assert result.exit_code == 2
    assert result.stderr.startswith(said)
    assert len(result.stderr.strip().splitlines()) == 1
