"""The stats page and ``GET /api/stats`` in-process (Starlette's TestClient) over a real store of a week of runs.

The API answers what ``runner stats --json`` prints for the same filters; the page draws the four charts with
the same numbers and the figures' tables; a bad filter is a one-line 400; a tool and a label made of markup stay
text; an empty window draws no chart but says so.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from urllib.parse import quote

import pytest
from starlette.testclient import TestClient

from runner._log.statuses import Status
from runner.store import open_store
from runner.ui import create_app
from tests.cli.helpers import invoke
from tests.ui.stats_runs import XSS, fill_stats

FILTERS = [
    ("", []),
    ("?since=2026-03-04&until=2026-03-07T12:00", ["--since", "2026-03-04", "--until", "2026-03-07T12:00"]),
    (f"?status={Status.DONE}&status={Status.STEP_LIMIT}", ["--status", Status.DONE.value, "--status",
                                                                        Status.STEP_LIMIT.value]),
    ("?label=env=prod", ["--label", "env=prod"]),
    ("?label=env=prod&label=team=web&tool=fetch", ["--label", "env=prod", "--label", "team=web", "--tool", "fetch"]),
    (f"?tool=fetch&status={Status.DONE}&since=2026-03-03", ["--tool", "fetch", "--status", Status.DONE.value,
                                                            "--since", "2026-03-03"]),
    (f"?label=team={quote(XSS)}", ["--label", f"team={XSS}"]),
    (f"?tool={quote(XSS)}", ["--tool", XSS]),
    ("?since=2030-01-01", ["--since", "2030-01-01"]),
]
CHARTS = ("runs", "cost", "tool-latency", "tool-errors")


@pytest.fixture
def client(store_url: str) -> Iterator[TestClient]:
    fill_stats(store_url, xss=True)
    with open_store(store_url) as store, TestClient(create_app(store), base_url="http://127.0.0.1") as test_client:
        yield test_client


@pytest.mark.parametrize(("query", "options"), FILTERS, ids=[q or "all" for q, _ in FILTERS])
def test_api_stats_is_what_stats_json_prints_with_the_same_filters(
        store_url: str, client: TestClient, query: str, options: list[str]) -> None:
    printed = invoke("stats", "--json", "--db", store_url, *options)
    assert printed.exit_code == 0, printed.output
    served = client.get(f"/api/stats{query}")
    assert served.status_code == 200
    assert served.headers["content-type"] == "application/json"
    assert served.json() == json.loads(printed.stdout)


def test_the_filters_pick_different_runs(client: TestClient) -> None:
    """The comparison above means something: each filter changes what is counted."""
    counts = [client.get(f"/api/stats{query}").json()["runs"] for query, _ in FILTERS]
    assert counts[0] == 24
    assert len(set(counts)) >= 6
    assert counts[-1] == 0
    assert client.get(f"/api/stats?tool={quote(XSS)}").json()["tools"][XSS]["calls"] == 1


def test_the_page_draws_the_four_charts_with_the_stats_numbers(client: TestClient) -> None:
    found = client.get("/api/stats").json()
    page = client.get("/stats")
    assert page.status_code == 200
    html = page.text
    for name in CHARTS:
        assert len(re.findall(rf'<svg data-chart="{name}" class="chart" viewBox="[^"]+" role="img" aria-label="',
                              html)) == 1, name
        assert f'data-chart-table="{name}"' in html
    assert html.count("<summary>Table</summary>") == 4
    assert '<a href="/stats" id="stats-link" aria-current="page">Stats</a>' in html
    summary = re.search(r'<p id="summary"[^>]*>(.*?)</p>', html)
    assert summary is not None
    assert re.sub("<[^>]+>", "", summary[1]).startswith(f"{found['runs']} runs since the first run; "
                                                        f"{found['tokens']['total']} tokens")
    runs_table = html[html.index('data-chart-table="runs"'):]
    runs_table = runs_table[:runs_table.index("</table>")]
    totals = [int(cell) for cell in re.findall(r'<td class="n">(\d+)</td></tr>', runs_table)]
    assert sum(totals) == found["runs"]
    assert len(totals) == len(found["days"]) == 7
    bars = re.findall(r'<rect class="bar (st-[a-z_]+)" data-series="([a-z_]+)" data-at="([0-9-]+)" '
                      r'data-value="([0-9.]+)"', html)
    by_status: dict[str, float] = {}
    for _, status, _, value in bars:
        by_status[status] = by_status.get(status, 0) + float(value)
    assert by_status == found["by_status"]
    for status, count in found["by_status"].items():
        assert re.search(rf'<span class="status s-{status}">{status}</span></td><td class="n">{count}</td>', html)
    for name, tool in found["tools"].items():
        if name != XSS:
            assert f'<td class="tool">{name}</td><td class="n">{tool["calls"]}</td>' in html
    assert 'data-series="p95" data-at="search"' in html
    assert 'data-series="error rate" data-at="fetch" data-value="0.5"' in html
    assert "at most 9% above the exact value" in html


def test_the_form_keeps_the_filters_asked_for(client: TestClient) -> None:
    html = client.get(f"/stats?since=2026-03-04&until=3d&label=env=prod&tool=fetch&status={Status.DONE}").text
    assert '<input name="since" value="2026-03-04"' in html
    assert '<input name="until" value="3d"' in html
    assert '<input name="tool" value="fetch"' in html
    assert '<input name="label" value="env=prod"' in html
    assert f'<option value="{Status.DONE}" selected>' in html


def test_markup_in_a_tool_and_a_label_stays_text(client: TestClient) -> None:
    for query in ("", f"?label=team={quote(XSS)}", f"?tool={quote(XSS)}"):
        html = client.get(f"/stats{query}").text
        assert "<img" not in html, query
        assert "onerror=window.__x=1&gt;" in html
    filtered = client.get(f"/stats?label=team={quote(XSS)}").text
    assert 'value="team=&lt;img src=x onerror=window.__x=1&gt;"' in filtered
    assert '<svg data-chart="tool-latency"' in filtered


def test_a_bad_filter_is_a_one_line_400(client: TestClient) -> None:
    for query, message in [("since=yesterday", "since: expected a duration ago"),
                           ("until=2026-13-01", "until: expected a duration ago"),
                           ("status=finished", "status must be one of"), ("label=env", "label must be KEY=VALUE")]:
        api = client.get(f"/api/stats?{query}")
        assert api.status_code == 400
        assert list(api.json()) == ["error"]
        assert api.json()["error"].startswith(message)
        assert "\n" not in api.json()["error"]
        page = client.get(f"/stats?{query}")
        assert page.status_code == 400
        shown = re.search(r'<p class="error" id="error">(.*?)</p>', page.text, re.S)
        assert shown is not None
        assert shown[1].startswith(message)
        assert "\n" not in shown[1]


def test_an_empty_window_draws_no_chart_but_says_so(client: TestClient) -> None:
    html = client.get("/stats?since=2030-01-01").text
    assert "<svg" not in html
    assert 'data-chart-empty="runs">no runs in this window<' in html
    assert 'data-chart-empty="tool-errors">no tool calls in this window<' in html
    assert re.search(r'<p id="summary"[^>]*><strong>0 runs</strong> since 2030-01-01T00:00:00\+00:00; 0 tokens; '
                     r'0 tool calls</p>', html)
    assert 'id="by-status"' not in html
