"""The console attacked in-process (Starlette's TestClient over a real store): its gate, its escaping, hostile
input and concurrent decisions. A refused action must change nothing in the log, so most tests count events."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from urllib.parse import quote

import pytest
from starlette.testclient import TestClient

from runner import ModelReply, ScriptedModel, run_agent
from runner.cli.console import serving_line
from runner.events import ApprovalDecided
from runner.store import RunStore, open_store
from runner.ui import create_app
from runner.ui.guard import loopback, secrets_for
from tests.loop.helpers import call, reply
from tests.ui.legacy import stored_as
from tests.ui.money import money

BASE = "http://127.0.0.1:8000"
SAME = {"origin": BASE}
RUN = "a" * 32
# Breaks out of text, of a double- and a single-quoted attribute, and opens a script and an image.
XSS = "<script>alert(1)</script>\"'><img src=x onerror=alert(2)>"
TOKEN = "s3cret-token"


def awaiting(store: RunStore, run_id: str = RUN, calls: tuple[str, ...] = ("t1",), ran: list[str] | None = None,
             task: str = "Send 5 to bob") -> str:
    """A run whose model asks for one ``transfer`` per call id: it stops awaiting approval of them all."""
    asked = [call(call_id, "transfer", ref=call_id) for call_id in calls]
    status = stored_as(store, run_id, task, ScriptedModel([reply("", *asked)]), money(ran if ran is not None else []))
    assert status == "awaiting_approval"
    return run_id


def events(store: RunStore, run_id: str = RUN) -> int:
    return len(store.get_run(run_id).events)


def decided(store: RunStore, run_id: str = RUN) -> list[tuple[str, bool, str | None]]:
    return [(f.call_id, f.approved, f.reason) for f in store.get_run(run_id).facts if isinstance(f, ApprovalDecided)]


@pytest.fixture
def client(store: RunStore) -> Iterator[TestClient]:
    with TestClient(create_app(store), base_url=BASE, follow_redirects=False) as test_client:
        yield test_client


# -- the gate: origins, methods, content types ---------------------------------------------------------------------


@pytest.mark.parametrize("headers", [
    pytest.param({"origin": "null"}, id="origin-null"),
    pytest.param({"origin": "http://127.0.0.1:9000"}, id="other-port"),
    pytest.param({"origin": "https://127.0.0.1:8000"}, id="other-scheme"),
    pytest.param({"origin": "http://localhost:8000"}, id="localhost-for-127"),
    pytest.param({"origin": "http://127.0.0.1:8000@evil.example"}, id="userinfo"),
    pytest.param({"origin": "null", "referer": f"{BASE}/approvals"}, id="null-origin-same-referer"),
    pytest.param({"referer": "http://evil.example/approvals"}, id="referer-other"),
    pytest.param({"origin": "", "referer": "http://evil.example/"}, id="empty-origin-other-referer"),
])
def test_an_action_from_another_origin_is_refused_and_changes_nothing(store: RunStore, client: TestClient,
                                                                      headers: dict[str, str]) -> None:
    awaiting(store)
    before = events(store)
    form = client.post(f"/runs/{RUN}/decide", data={"call_id": "t1", "verdict": "approve"}, headers=headers)
    api = client.post(f"/api/runs/{RUN}/decisions", json={"decisions": {"t1": True}}, headers=headers)
    cancel = client.post(f"/api/runs/{RUN}/cancel", headers=headers)
    assert (form.status_code, api.status_code, cancel.status_code) == (403, 403, 403)
    assert form.text == "refused: this action came from another origin\n"
    assert events(store) == before


def test_an_api_refusal_at_the_gate_is_one_json_line(store: RunStore, client: TestClient) -> None:
    awaiting(store)
    refused = client.post(f"/api/runs/{RUN}/decisions", json={"decisions": {"t1": True}},
                          headers={"origin": "http://evil.example"})
    assert (refused.status_code, refused.headers["content-type"]) == (403, "application/json")
    assert refused.json() == {"error": "refused: this action came from another origin"}
    put = client.put(f"/api/runs/{RUN}/cancel")
    assert (put.status_code, put.json()) == (405, {"error": "PUT is not an action here: actions are POSTs"})


@pytest.mark.parametrize("headers", [
    pytest.param({"origin": "HTTP://127.0.0.1:8000"}, id="origin-in-capitals"),
    pytest.param({"referer": f"{BASE}/approvals?x=1"}, id="same-referer"),
    pytest.param({}, id="neither-as-curl-sends"),
])
def test_an_action_from_the_console_or_a_script_is_served(store: RunStore, client: TestClient,
                                                          headers: dict[str, str]) -> None:
    awaiting(store)
    answer = client.post(f"/api/runs/{RUN}/decisions", json={"decisions": {"t1": "no"}}, headers=headers)
    assert answer.status_code == 200, answer.text
    assert decided(store) == [("t1", False, "no")]


@pytest.mark.parametrize("method", ["PUT", "DELETE", "PATCH"])
def test_other_methods_on_action_routes_are_405_and_change_nothing(store: RunStore, client: TestClient,
                                                                   method: str) -> None:
    awaiting(store)
    before = events(store)
    for path in (f"/runs/{RUN}/decide", f"/runs/{RUN}/cancel", f"/api/runs/{RUN}/decisions"):
        answer = client.request(method, path, content=b"call_id=t1&verdict=approve", headers={
            **SAME, "content-type": "application/x-www-form-urlencoded"})
        assert answer.status_code == 405, path
    assert events(store) == before


def test_a_form_that_is_not_urlencoded_is_refused_and_changes_nothing(store: RunStore, client: TestClient) -> None:
    awaiting(store)
    before = events(store)
    plain = client.post(f"/runs/{RUN}/decide", content=b"call_id=t1&verdict=deny&reason=x",
                        headers={**SAME, "content-type": "text/plain"})
    assert plain.status_code == 415
    assert "application/x-www-form-urlencoded" in plain.text
    assert events(store) == before


def test_decisions_sent_as_text_plain_are_refused_and_change_nothing(store: RunStore, client: TestClient) -> None:
    awaiting(store)
    before = events(store)
    answer = client.post(f"/api/runs/{RUN}/decisions", content=json.dumps({"decisions": {"t1": True}}),
                         headers={**SAME, "content-type": "text/plain"})
    assert (answer.status_code, answer.json()) == (415, {"error": "decisions are JSON: send Content-Type: "
                                                                   "application/json"})
    assert events(store) == before


# -- the gate: DNS rebinding and the token -------------------------------------------------------------------------


@pytest.mark.parametrize(("host", "served"), [
    ("127.0.0.1:8000", True), ("127.0.0.2", True), ("localhost:8000", True), ("[::1]:8000", True),
    ("127.0.0.1.nip.io", False), ("127.evil.example:8000", False), ("evil.example", False), ("", False),
])
def test_without_a_token_only_loopback_host_headers_are_served(client: TestClient, host: str, served: bool) -> None:
    answer = client.get("/", headers={"host": host})
    assert answer.status_code == (200 if served else 403)


@pytest.mark.parametrize(("host", "expected"), [
    ("127.0.0.1", True), ("127.1.2.3", True), ("localhost", True), ("::1", True), ("[::1]", True),
    ("127.evil.example", False), ("127.0.0.1.nip.io", False), ("0.0.0.0", False), ("192.168.1.2", False),
])
def test_loopback_is_an_address_not_a_name_that_starts_with_127(host: str, expected: bool) -> None:
    assert loopback(host) is expected


@pytest.fixture
def gated(store: RunStore) -> Iterator[TestClient]:
    with TestClient(create_app(store, token=TOKEN), base_url=BASE, follow_redirects=False) as test_client:
        yield test_client


@pytest.mark.parametrize(("url", "location"), [
    ("/runs/x?token=T&a=1", "/runs/x?a=1"),
    (f"{BASE}//evil.example/x?token=T", "/evil.example/x"),
    (f"{BASE}/%5Cevil.example?token=T", "/%5Cevil.example"),
    ("/runs/%C3%A9?token=T", "/runs/%C3%A9"),
])
def test_the_token_redirect_stays_on_the_console_and_drops_the_token(gated: TestClient, url: str,
                                                                     location: str) -> None:
    answer = gated.get(url.replace("token=T", f"token={TOKEN}"))
    assert answer.status_code == 303
    assert answer.headers["location"] == f"{location}#key={secrets_for(TOKEN).act}"  # the key, for the page only
    assert TOKEN not in answer.headers["location"]


def test_a_wrong_or_missing_token_is_401_and_sets_nothing(store: RunStore, gated: TestClient) -> None:
    awaiting(store)
    for headers, url in [({}, "/"), ({"authorization": "Bearer nope"}, "/"), ({}, "/?token=nope"),
                         ({"cookie": f"{secrets_for(TOKEN).cookie}=nope"}, "/"),
                         ({"cookie": f"runner_ui_token={TOKEN}"}, "/"),
                         ({"cookie": f"{secrets_for(TOKEN).cookie}={TOKEN}"}, "/"),
                         ({"authorization": f"Basic {TOKEN}"}, "/")]:
        answer = gated.get(url, headers=headers)
        assert (answer.status_code, answer.headers.get("set-cookie")) == (401, None), (headers, url)
    before = events(store)
    assert gated.post(f"/api/runs/{RUN}/decisions", json={"decisions": {"t1": True}}).status_code == 401
    assert events(store) == before
    assert gated.get("/", headers={"authorization": f"Bearer {TOKEN}"}).status_code == 200


def test_a_token_with_characters_urls_and_cookies_reserve_still_logs_in(store: RunStore) -> None:
    token = "a b;c&d=e,f"
    with TestClient(create_app(store, token=token), base_url=BASE, follow_redirects=False) as gated:
        answer = gated.get(f"/?token={quote(token, safe='')}")
        assert answer.status_code == 303
        secrets = secrets_for(token)
        assert answer.headers["set-cookie"].startswith(f"{secrets.cookie}={secrets.read}; Path=/; ")
        assert gated.get("/").status_code == 200  # with the cookie it set


def test_an_empty_token_is_a_mistake_at_create_app(store: RunStore) -> None:
    for token in ("", "  "):
        with pytest.raises(ValueError, match="token is empty"):
            create_app(store, token=token)


def test_the_printed_url_carries_the_token_percent_encoded() -> None:
    assert serving_line("http://127.0.0.1:8000", "a b;c&d=e,f") == (
        "runner ui: serving http://127.0.0.1:8000/?token=a%20b%3Bc%26d%3De%2Cf")
    assert serving_line("http://127.0.0.1:8000", None) == "runner ui: serving http://127.0.0.1:8000"


def test_a_malformed_cookie_of_another_app_on_localhost_hides_not_the_token(gated: TestClient) -> None:
    mine = f"{secrets_for(TOKEN).cookie}={secrets_for(TOKEN).read}"
    for cookie in (f'other={{"x": 1}}; {mine}', f"{mine}; a=b c"):
        assert gated.get("/", headers={"cookie": cookie}).status_code == 200, cookie


# -- stored text is text; ids in URLs are path segments ------------------------------------------------------------

ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;&#34;&#39;&gt;&lt;img src=x onerror=alert(2)&gt;"


def boom(messages: object, specs: object) -> ModelReply:
    raise RuntimeError(XSS)


def test_stored_html_in_every_field_is_shown_as_text(store: RunStore) -> None:
    asked = ScriptedModel([reply(XSS, call(XSS, "lookup", ref=XSS), call("t1", "transfer", ref=XSS))])
    run_agent(XSS, asked, money([]), store=store, run_id=RUN, labels={XSS: XSS})
    run_agent(XSS, boom, money([]), store=store, run_id="b" * 32)
    with TestClient(create_app(store, decided_by=XSS), base_url=BASE, follow_redirects=False) as client:
        inbox = client.get("/approvals").text
        assert client.post(f"/api/runs/{RUN}/decisions", json={"decisions": {"t1": XSS}}).status_code == 200
        pages = [client.get(url) for url in ("/", f"/runs/{RUN}", f"/runs/{'b' * 32}")]
        live = client.get(f"/runs/{RUN}", headers={"x-refresh": "run"}).text  # the part the page's script refreshes
    assert live.count("<script") == 0
    assert ESCAPED in live
    for page in [*(p.text for p in pages), inbox]:
        assert page.count("<script") == 1  # the console's own script tag, nothing stored
        assert "<img" not in page
        assert ESCAPED in page
    shown = pages[1].text
    for where in (f'<p class="task" id="task">{ESCAPED}</p>', f'<span class="label">{ESCAPED}={ESCAPED}</span>',
                  f'<pre class="text">{ESCAPED}</pre>', f'data-call-id="{ESCAPED}"', f'<q class="reason">{ESCAPED}</q>',
                  f'<b class="by">{ESCAPED}</b>',
                  '<pre class="observation">&#34;found ' + ESCAPED.replace("&#34;", "\\&#34;") + "&#34;</pre>"):
        assert where in shown, where
    assert f'<p class="error">RuntimeError: {ESCAPED}</p>' in pages[2].text
    assert all(p.headers["content-security-policy"].startswith("default-src 'none'; script-src 'self';")
               for p in pages)


def test_an_error_page_shows_the_run_id_it_was_given_as_text(client: TestClient) -> None:
    page = client.get("/runs/%3Cscript%3Ealert(1)%22%3E")
    assert page.status_code == 404
    assert "no run &#39;&lt;script&gt;alert(1)&#34;&gt;&#39; in " in page.text
    assert "<script>alert" not in page.text
    api = client.get("/api/runs/%3Cscript%3E")
    assert (api.status_code, api.headers["content-type"]) == (404, "application/json")


@pytest.mark.parametrize("run_id", ["q?x", "h#x", "p;x", "$(id>x)"])
def test_a_run_id_in_a_link_or_a_form_is_one_percent_encoded_segment(store: RunStore, client: TestClient,
                                                                     run_id: str) -> None:
    awaiting(store, run_id)
    segment = quote(run_id, safe="")
    assert f'href="/runs/{segment}"' in client.get("/").text
    inbox = client.get("/approvals").text
    assert f'action="/runs/{segment}/decide"' in inbox
    run_page = client.get(f"/runs/{segment}")
    assert f'href="/runs/{segment}/fixture.json"' in run_page.text
    assert f'action="/runs/{segment}/decide"' in run_page.text  # deciding on the run's own page
    answer = client.post(f"/runs/{segment}/decide", data={"call_id": "t1", "verdict": "deny", "back": "run"},
                         headers=SAME)
    assert answer.status_code == 303
    assert answer.headers["location"].startswith(f"/runs/{segment}?note=")
    assert '<p id="outcome">' in client.get(answer.headers["location"]).text
    assert decided(store, run_id) == [("t1", False, None)]
    back = client.post(f"/runs/{segment}/cancel", headers=SAME)
    assert back.status_code == 409  # awaiting approval: nothing to cancel, and no redirect to another run


def test_a_run_id_with_dot_segments_cannot_send_its_decisions_to_another_run(store: RunStore,
                                                                             client: TestClient) -> None:
    awaiting(store, "victim")
    awaiting(store, "x/../victim")  # a browser resolves /runs/x/../victim/decide to /runs/victim/decide
    before = events(store, "victim")
    actions = re.findall(r'action="([^"]*)"', client.get("/approvals").text)
    for action in actions:
        if "x" in action:
            client.post(action, data={"call_id": "t1", "verdict": "approve"}, headers=SAME)
    assert events(store, "victim") == before
    assert sorted(actions) == ["/runs/victim/decide", "/runs/x%2F..%2Fvictim/decide"]


def test_the_command_to_paste_quotes_the_run_id_for_a_shell(store: RunStore, client: TestClient) -> None:
    awaiting(store, "$(id>x)")
    answer = client.post(f"/api/runs/{quote('$(id>x)', safe='')}/decisions", json={"decisions": {"t1": True}})
    assert answer.json()["command"] == "runner resume '$(id>x)' --tools MODULE:ATTR"


def test_a_note_opened_on_another_page_is_not_shown_there(store: RunStore) -> None:
    awaiting(store)
    app = create_app(store)
    with TestClient(app, base_url=BASE) as client:
        cancel_note = client.app_state["console"].note("run", how="cancel", text="cancelled")
        page = client.get(f"/approvals?note={cancel_note}")
        assert page.status_code == 200
        assert 'id="outcome"' not in page.text
        assert '<p id="outcome">cancelled</p>' in client.get(f"/runs/{RUN}?note={cancel_note}").text


def test_a_download_is_named_with_the_run_ids_plain_characters_only(store: RunStore, client: TestClient) -> None:
    stored_as(store, 'a"b\\c', "t", ScriptedModel(["ok"]), money([]))
    for path, name in [("fixture.json", "run-a_b_c.json"), ("spans.json", "spans-a_b_c.json")]:
        answer = client.get(f"/runs/{quote(chr(97) + chr(34) + 'b' + chr(92) + 'c', safe='')}/{path}")
        assert answer.headers["content-disposition"] == f'attachment; filename="{name}"'


# -- text that is not valid Unicode (a lone surrogate from a model's JSON) -----------------------------------------


def test_a_run_holding_a_lone_surrogate_is_shown_and_downloaded(store: RunStore, client: TestClient) -> None:
    bad = "\ud800"
    model = ScriptedModel([reply(f"text {bad}", call(f"c{bad}", f"t{bad}"), call("l1", "lookup", ref=bad)),
                           f"answer {bad}"])
    run_agent(f"task {bad}", model, money([]), store=store, run_id=RUN, labels={f"k{bad}": f"v{bad}"})
    page = client.get(f"/runs/{RUN}")
    assert page.status_code == 200
    assert '<pre class="answer" id="answer">answer \ufffd</pre>' in page.text
    spans = client.get(f"/runs/{RUN}/spans.json")
    assert spans.status_code == 200
    tools = {s["name"]: {a["key"]: a["value"] for a in s["attributes"]}
             for r in spans.json()["resourceSpans"] for sc in r["scopeSpans"] for s in sc["spans"]}
    assert tools["execute_tool t\ufffd"]["gen_ai.tool.call.id"] == {"stringValue": "c\ufffd"}


def test_an_error_holding_a_lone_surrogate_is_one_json_line(store: RunStore, client: TestClient) -> None:
    awaiting(store)
    assert client.post(f"/api/runs/{RUN}/decisions", json={"decisions": {"t1": True}}).status_code == 200
    answer = client.post(f"/api/runs/{RUN}/decisions", content=b'{"decisions": {"t1": "no \\ud800"}}',
                         headers={"content-type": "application/json"})
    assert answer.status_code == 409
    assert answer.json() == {"error": f"run {RUN}: call 't1' was approved by root; it cannot be denied (no \ud800) now"}


# -- hostile sizes, shapes and bytes -------------------------------------------------------------------------------


@pytest.mark.parametrize("body", [
    pytest.param(b"[" * 100_000, id="nested-deeper-than-python-recurses"),
    pytest.param(b"[]", id="a-list"), pytest.param(b"null", id="null"), pytest.param(b"\xff\xfe", id="not-utf8"),
    pytest.param(b'{"decisions": []}', id="decisions-a-list"), pytest.param(b'{"decisions": {}}', id="none"),
    pytest.param(b'{"decisions": {"t1": 1}}', id="a-number"), pytest.param(b'{"decisions": {"t1": null}}', id="null"),
    pytest.param(b'{"decisions": {"t1": " "}}', id="a-blank-reason"),
    pytest.param(b'{"decisions": {"t1": true', id="cut-short"),
])
def test_a_decisions_body_of_the_wrong_shape_is_a_400_and_changes_nothing(store: RunStore, client: TestClient,
                                                                          body: bytes) -> None:
    awaiting(store)
    before = events(store)
    answer = client.post(f"/api/runs/{RUN}/decisions", content=body, headers={"content-type": "application/json"})
    assert (answer.status_code, answer.headers["content-type"]) == (400, "application/json")
    assert list(answer.json()) == ["error"]
    assert events(store) == before


@pytest.mark.parametrize(("path", "fields"), [
    (f"/runs/{RUN}/resume", {"max_steps": "²"}), (f"/runs/{RUN}/fork", {"at_step": "²"}),
    (f"/runs/{RUN}/resume", {"max_steps": "-1"}), (f"/runs/{RUN}/fork", {"at_step": "0"}),
    (f"/runs/{RUN}/decide", {"call_id": "t1", "verdict": "maybe"}), (f"/runs/{RUN}/decide", {"verdict": "approve"}),
])
def test_a_form_field_that_is_not_what_it_should_be_is_a_400_and_changes_nothing(
        store: RunStore, client: TestClient, path: str, fields: dict[str, str]) -> None:
    awaiting(store)
    before = events(store)
    answer = client.post(path, data=fields, headers=SAME)
    assert answer.status_code == 400
    assert events(store) == before


def test_hostile_sizes_and_bytes_are_one_line_refusals(store: RunStore, client: TestClient) -> None:
    awaiting(store)
    awaiting(store, "ab" + "0" * 30)
    before = events(store)
    form = {**SAME, "content-type": "application/x-www-form-urlencoded"}
    assert client.post(f"/runs/{RUN}/decide", content=b"x" * (300 * 1024), headers=form).status_code == 413
    assert client.post(f"/runs/{RUN}/decide", content=b"&".join(b"f%d=1" % i for i in range(60)),
                       headers=form).status_code == 400
    assert client.post(f"/runs/{RUN}/decide", content=b"call_id=t1&verdict=deny&reason=\xff",
                       headers=form).status_code == 400
    huge = client.post(f"/api/runs/{RUN}/decisions", content=b"[" * (300 * 1024),
                       headers={"content-type": "application/json"})
    assert (huge.status_code, huge.json()) == (413, {"error": "request body over 256 KiB"})
    assert events(store) == before
    for url, status in [("/?limit=100000", 400), ("/?page=1000001", 400), ("/?limit=1e3", 400), ("/?since=%FF", 400),
                        ("/?status=%FF", 400), ("/api/runs?label=novalue", 400), ("/runs/%FF%FE", 404),
                        ("/runs/%00", 404), ("/api/runs/%00", 404), ("/runs/a", 400), ("/?page=1000000", 200)]:
        assert client.get(url).status_code == status, url
    assert client.get("/api/runs/a").json()["error"].startswith("run id prefix 'a' is ambiguous: ")


# -- decisions: twice, contradicting, not pending, concurrent ------------------------------------------------------


def test_a_refused_batch_of_decisions_logs_none_of_them(store: RunStore, client: TestClient) -> None:
    awaiting(store, calls=("t1", "t2"))
    assert client.post(f"/api/runs/{RUN}/decisions", json={"decisions": {"t1": True}}).status_code == 200
    before = events(store)
    answer = client.post(f"/api/runs/{RUN}/decisions", json={"decisions": {"t2": True, "t1": False}})
    assert (answer.status_code, answer.json()) == (409, {
        "error": f"run {RUN}: call 't1' was approved by root; it cannot be denied now"})
    assert events(store) == before
    assert decided(store) == [("t1", True, None)]


def test_the_same_decision_twice_logs_once_and_a_contradiction_or_a_stranger_is_409(store: RunStore,
                                                                                    client: TestClient) -> None:
    awaiting(store, calls=("t1", "t2"))
    for _ in range(2):
        answer = client.post(f"/runs/{RUN}/decide", data={"call_id": "t1", "verdict": "deny", "reason": "no"},
                             headers=SAME)
        assert answer.status_code == 303
    before = events(store)
    for call_id, verdict in [("t1", True), ("t1", "other reason"), ("t9", True), ("", True)]:
        refused = client.post(f"/api/runs/{RUN}/decisions", json={"decisions": {call_id: verdict}})
        assert refused.status_code == 409, (call_id, verdict)
    assert events(store) == before
    assert decided(store) == [("t1", False, "no")]


def test_deciding_or_cancelling_a_finished_run_is_409_and_changes_nothing(store: RunStore,
                                                                          client: TestClient) -> None:
    run_agent("t", ScriptedModel([reply("", call("l1", "lookup", ref="x")), "done"]), money([]), store=store,
              run_id=RUN)
    before = events(store)
    assert client.post(f"/api/runs/{RUN}/decisions", json={"decisions": {"l1": True}}).status_code == 409
    assert client.post(f"/runs/{RUN}/decide", data={"call_id": "l1", "verdict": "approve"}).status_code == 409
    assert client.post(f"/api/runs/{RUN}/cancel").status_code == 409
    assert client.post(f"/runs/{RUN}/resume", data={"max_steps": "9"}).status_code == 409
    assert events(store) == before


def test_concurrent_contradicting_decisions_log_one_and_the_tool_runs_at_most_once(store: RunStore) -> None:
    ran: list[str] = []
    awaiting(store, ran=ran)
    app = create_app(store, registry=money(ran), model_for=lambda run: ScriptedModel(["Done."]))
    answers: list[tuple[bool | str, int]] = []
    start = threading.Barrier(4)
    with TestClient(app, base_url=BASE) as client:
        def decide(verdict: bool | str) -> None:
            start.wait()
            answer = client.post(f"/api/runs/{RUN}/decisions", json={"decisions": {"t1": verdict}})
            answers.append((verdict, answer.status_code))

        threads = [threading.Thread(target=decide, args=(v,)) for v in (True, "no", True, "no")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert client.app_state["console"].actions.wait(20) == 0
    verdicts = decided(store)
    assert len(verdicts) == 1
    approved = verdicts[0][1]
    won = True if approved else "no"
    # the contradicting ones are refused; of the winning verdict's two, the first is logged and the other
    # either finds it logged (200) or the run already finished by it (409: done)
    assert sorted(code for verdict, code in answers if verdict != won) == [409, 409]
    assert sorted(code for verdict, code in answers if verdict == won) in ([200, 200], [200, 409])
    assert ran == (["t1"] if approved else [])
    assert store.get_run(RUN).status == "done"


# -- read-only -----------------------------------------------------------------------------------------------------


ACTIONS = [(f"/runs/{RUN}/decide", {"call_id": "t1", "verdict": "approve"}), (f"/runs/{RUN}/cancel", {}),
           (f"/runs/{RUN}/resume", {"max_steps": "9"}), (f"/runs/{RUN}/fork", {"at_step": "1"}),
           (f"/api/runs/{RUN}/cancel", {})]


@pytest.mark.parametrize("how", ["read_only", "read_only_store"])
def test_a_read_only_console_serves_no_action_on_any_route(store_url: str, store: RunStore, how: str) -> None:
    awaiting(store)
    before = events(store)
    with open_store(store_url, read_only=how == "read_only_store") as opened, \
            TestClient(create_app(opened, read_only=how == "read_only"), base_url=BASE) as client:
        for path, fields in ACTIONS:
            assert client.post(path, data=fields, headers=SAME).status_code == 403, path
            assert client.put(path, headers=SAME).status_code == 403, path
        assert client.post(f"/api/runs/{RUN}/decisions", json={"decisions": {"t1": True}}).status_code == 403
        pages = [client.get(url).text for url in ("/", "/approvals", f"/runs/{RUN}")]
    assert not any('method="post"' in page or 'id="actions"' in page for page in pages)
    assert all('id="read-only"' in page for page in pages)
    assert events(store) == before
