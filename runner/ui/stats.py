"""The stats page (``GET /stats``) and ``GET /api/stats``: what ``runner stats`` shows, with the same filters.

Both read ``stats.gather`` in Starlette's thread pool, never on the event loop. The API answers its
JSON exactly (``runner stats --json``); the page adds the charts of ``_view/charts.py``.
"""

from __future__ import annotations

from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from .._log.statuses import Status
from .._view import charts
from .._view import stats as view_stats
from ..store import RunFilter
from .http import json_response, render
from .query import run_query
from .state import Console


def stats_filter(request: Request) -> RunFilter:
    """The runs asked for: ``since``, ``until``, ``status`` and ``label`` (repeatable) and ``tool``, as the CLI's."""
    query = run_query(request.query_params)
    return RunFilter(status=query.statuses or None, since=query.since, until=query.until, tool=query.tool,
                     labels=query.labels)


async def gathered(request: Request) -> dict[str, Any]:
    """``stats.gather`` for the request's filters, read off the event loop."""
    console: Console = request.state.console
    where = stats_filter(request)
    found: dict[str, Any] = await run_in_threadpool(view_stats.gather, console.store, where)
    return found


async def stats_page(request: Request) -> Response:
    """``GET /stats``: the figures of ``runner stats``, four charts, and the filters that chose the runs."""
    found = await gathered(request)
    params = request.query_params
    return render(request, "stats.html", found=found, charts=charts.of_stats(found),
                  statuses=[status.value for status in Status], since_text=params.get("since", "").strip(),
                  until_text=params.get("until", "").strip())


async def stats_json(request: Request) -> Response:
    """``GET /api/stats``: what ``runner stats --json`` prints for the same filters."""
    return json_response(await gathered(request))
