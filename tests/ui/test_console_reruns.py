"""Reruns in the console (in-process, Starlette's TestClient, a real store): the runs page lists the newest,
``/reruns/{id}`` is the report ``runner rerun --html`` writes and ``/api/reruns/{id}`` what ``--json`` prints."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from runner import ModelReply, RerunReport, ScriptedModel, ToolCall, rerun, resume, run_agent
from runner._rerun.html import STYLE
from runner.store import RunStore, open_store
from runner.ui import create_app
from runner.ui.guard import CSP
from tests.cli.helpers import invoke
from tests.rerun import rerun_tools
from tests.rerun.helpers import (
    AFTER,
    ALL,
    DRIFT,
    LOOP,
    TOOLS,
    WEATHER,
    TaskServer,
    fake_model,
    record_baselines,
    recorded_at,
)

HOST = "http://127.0.0.1:8000"
XSS_TASK = "Read <script>window.__pwned = 'task'</script><img src=x onerror=window.__pwned=1>"
XSS_ANSWER = "Done. <img src=x onerror=window.__pwned=2>"
XSS_TOOL = "<img src=x onerror=window.__pwned=3>"
REPORT = re.compile(r'<div class="rerun-report">.*?\n</div>\n', re.S)


@pytest.fixture
def client(store: RunStore) -> Iterator[TestClient]:
    with TestClient(create_app(store), base_url=HOST) as test_client:
        yield test_client


def reran(store: RunStore, tasks: tuple[str, ...] = ALL, samples: int = 1) -> RerunReport:
    """The baselines of ``tasks`` recorded in ``store``, then rerun on the new model with the live tools."""
    ids = record_baselines(store, tasks)
    with TaskServer(AFTER) as server, fake_model(server) as model:
        return rerun(store, list(ids.values()), model, registry=rerun_tools.tools(), samples=samples)


def unlinked(html: str) -> str:
    """``html`` without its links (the console's run ids link to their pages; the file's cannot)."""
    return re.sub(r'<a href="[^"]*">|</a>', "", html)


def test_the_runs_page_lists_the_newest_reruns_with_their_verdicts(store: RunStore, client: TestClient) -> None:
    assert 'id="reruns"' not in client.get("/").text  # no rerun yet: no list
    first = reran(store, (WEATHER,))
    report = reran(store, samples=2)
    page = client.get("/").text
    listed = re.findall(r'<tr data-rerun-id="([^"]+)"', page)
    assert listed == [report.rerun_id, first.rerun_id]  # the newest first
    row = page[page.index(f'<tr data-rerun-id="{report.rerun_id}"'):]
    row = row[:row.index("</tr>")]
    assert 'data-regressed="1" data-changed="2"' in row
    assert f'<a href="/reruns/{report.rerun_id}">{report.rerun_id}</a>' in row
    assert '<td class="n">4</td>' in row
    assert '<td class="n">8</td>' in row
    assert ('<span class="v-unchanged">1 unchanged</span>, <span class="v-changed">2 changed</span>, '
            '<span class="v-regressed">1 regressed</span>') in row
    assert f'href="/?label=rerun%3D{report.rerun_id}">candidates</a>' in row
    candidates = client.get(f"/?label=rerun%3D{report.rerun_id}").text
    assert candidates.count("data-run-id=") == 8
    for filtered in ("/?status=done", "/?page=2", "/?top=1"):
        assert 'id="reruns"' not in client.get(filtered).text, filtered


def test_the_runs_page_counts_again_once_a_candidate_moves_on(store: RunStore, client: TestClient) -> None:
    report = reran(store, (LOOP,))
    row = f'<tr data-rerun-id="{report.rerun_id}" data-regressed="1" data-changed="0">'
    assert row in client.get("/").text
    assert row in client.get("/").text  # kept: read again, unchanged
    [candidate] = report.cases[0].candidates
    resumed = resume(store, candidate.run_id, ScriptedModel(["It is 4 C in Oslo."]), rerun_tools.tools(),
                     max_steps=5)
    assert resumed.status == "done"
    assert f'<tr data-rerun-id="{report.rerun_id}" data-regressed="0" data-changed="1">' in client.get("/").text


def test_the_report_page_shows_the_report_the_cli_writes_inside_the_consoles_layout(store_url: str,
                                                                                    tmp_path: Path) -> None:
    ids = recorded_at(store_url)
    written = tmp_path / "report.html"
    with TaskServer(AFTER) as server:
        result = invoke("rerun", *ids.values(), "--tools", TOOLS, "--samples", "2", "--json", "--html", str(written),
                        "--model", "openai:fake", "--base-url", server.url, "--api-key", "k", "--db", store_url)
    assert result.exit_code == 1, result.output  # the loop case regressed
    printed = json.loads(result.stdout)
    file_body = REPORT.search(written.read_text(encoding="utf-8"))
    assert file_body is not None
    with open_store(store_url) as store, TestClient(create_app(store), base_url=HOST) as client:
        page = client.get(f"/reruns/{printed['rerun_id']}")
        served = client.get(f"/api/reruns/{printed['rerun_id']}").json()
        style = client.get("/reruns.css")
    assert page.status_code == 200
    assert page.headers["content-security-policy"] == CSP
    page_body = REPORT.search(page.text)
    assert page_body is not None
    assert unlinked(page_body.group()) == file_body.group()  # one renderer, one report
    assert f'<a href="/runs/{ids[DRIFT]}"><code>{ids[DRIFT]}</code></a>' in page_body.group()
    assert '<header class="top">' in page.text
    assert '<link rel="stylesheet" href="/reruns.css">' in page.text
    assert "<style" not in page.text
    assert "<script>" not in page.text
    assert (style.status_code, style.headers["content-type"], style.text) == (200, "text/css; charset=utf-8", STYLE)
    assert STYLE in written.read_text(encoding="utf-8")
    printed["summary"].pop("elapsed_s")
    served["summary"].pop("elapsed_s")
    assert served == printed  # what `runner rerun --json` printed, read back from the store


def test_an_unknown_rerun_is_the_consoles_404(client: TestClient) -> None:
    page = client.get("/reruns/r0000nothing")
    assert page.status_code == 404
    assert '<p class="error" id="error">no rerun &#39;r0000nothing&#39; in this store' in page.text
    api = client.get("/api/reruns/r0000nothing")
    assert (api.status_code, api.json()) == (404, {"error": "no rerun 'r0000nothing' in this store: no run is its "
                                                            "candidate"})


def test_every_stored_text_of_a_report_is_escaped(store: RunStore, client: TestClient) -> None:
    before = run_agent(XSS_TASK, ScriptedModel(["All read."]), rerun_tools.tools(), store=store)
    report = rerun(store, [before.run_id], ScriptedModel([ModelReply("", [ToolCall("c1", XSS_TOOL, {})]),
                                                          XSS_ANSWER]))
    for path in (f"/reruns/{report.rerun_id}", "/"):
        page = client.get(path).text
        assert "<img src=x" not in page, path
        assert "<script>window" not in page, path
    page = client.get(f"/reruns/{report.rerun_id}").text
    assert "Read &lt;script&gt;window.__pwned = &#x27;task&#x27;&lt;/script&gt;&lt;img src=x" in page
    assert "Done. &lt;img src=x onerror=window.__pwned=2&gt;" in page
    assert '<span class="add">+ &lt;img src=x onerror=window.__pwned=3&gt; {}</span>' in page
