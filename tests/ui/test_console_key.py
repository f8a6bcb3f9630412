"""The gate of a console with a token, in-process: its cookie reads, the cookie and the key act, the token acts."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient

from runner import ScriptedModel
from runner.events import ApprovalDecided
from runner.store import RunStore
from runner.ui import create_app
from runner.ui.guard import NO_KEY, secrets_for
from tests.loop.helpers import call, reply
from tests.ui.legacy import stored_as
from tests.ui.money import money

BASE = "http://127.0.0.1:8000"
RUN = "a" * 32
TOKEN = "s3cret-token"
SECRETS = secrets_for(TOKEN)
COOKIE = {"cookie": f"{SECRETS.cookie}={SECRETS.read}"}


@pytest.fixture
def gated(store: RunStore) -> Iterator[TestClient]:
    with TestClient(create_app(store, token=TOKEN), base_url=BASE, follow_redirects=False) as test_client:
        yield test_client


def awaiting(store: RunStore, calls: tuple[str, ...] = ("t1",)) -> None:
    asked = [call(call_id, "transfer", ref=call_id) for call_id in calls]
    assert stored_as(store, RUN, "Send 5 to bob", ScriptedModel([reply("", *asked)]), money([])) == "awaiting_approval"


def events(store: RunStore) -> int:
    return len(store.get_run(RUN).events)


def reasons(store: RunStore) -> list[str | None]:
    return [f.reason for f in store.get_run(RUN).facts if isinstance(f, ApprovalDecided)]


def test_the_cookie_alone_reads_but_cannot_act(store: RunStore, gated: TestClient) -> None:
    awaiting(store)
    before = events(store)
    assert gated.get(f"/runs/{RUN}", headers=COOKIE).status_code == 200
    form = gated.post(f"/runs/{RUN}/decide", data={"call_id": "t1", "verdict": "deny", "reason": "x"}, headers=COOKIE)
    wrong = gated.post(f"/runs/{RUN}/decide", data={"call_id": "t1", "verdict": "deny", "_key": SECRETS.read},
                       headers=COOKIE)
    api = gated.post(f"/api/runs/{RUN}/decisions", json={"decisions": {"t1": "x"}}, headers=COOKIE)
    text = gated.post(f"/runs/{RUN}/cancel", content=f"_key={SECRETS.act}",
                      headers={**COOKIE, "content-type": "text/plain"})
    assert [(a.status_code, a.text) for a in (form, wrong, text)] == [(403, NO_KEY + "\n")] * 3
    assert (api.status_code, api.json()) == (403, {"error": NO_KEY})
    assert events(store) == before


def test_the_cookie_with_the_key_acts_in_a_form_field_or_a_header(store: RunStore, gated: TestClient) -> None:
    awaiting(store, calls=("t1", "t2"))
    form = gated.post(f"/runs/{RUN}/decide", headers=COOKIE,
                      data={"call_id": "t1", "verdict": "deny", "reason": "by form", "_key": SECRETS.act})
    api = gated.post(f"/api/runs/{RUN}/decisions", json={"decisions": {"t2": "by header"}},
                     headers={**COOKIE, "x-runner-key": SECRETS.act})
    assert (form.status_code, api.status_code) == (303, 200)
    assert reasons(store) == ["by form", "by header"]


def test_the_token_itself_acts_without_a_key(store: RunStore, gated: TestClient) -> None:
    awaiting(store)
    answer = gated.post(f"/api/runs/{RUN}/decisions", json={"decisions": {"t1": "bearer"}},
                        headers={"authorization": f"Bearer {TOKEN}"})
    assert answer.status_code == 200
    assert reasons(store) == ["bearer"]


def test_two_tokens_give_two_cookie_names_and_neither_holds_its_token() -> None:
    one, other = secrets_for("a"), secrets_for("b")
    assert one.cookie != other.cookie
    assert one.cookie.startswith("runner_ui_token_")
    assert len({one.read, one.act, other.read, other.act, "a", "b"}) == 6
