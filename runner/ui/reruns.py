"""The console's ``/reruns/{id}``: the report ``runner rerun --html`` writes, read back from the store; its JSON twin.

The report is read back by ``_rerun.stored`` (which also lists the newest reruns on the runs page) and
drawn by the CLI's own renderer (``_rerun.html.fragment``) inside the console's layout; its styles are
that renderer's, served as a stylesheet (``/reruns.css``), so the page needs no inline style.
"""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from .._rerun import RerunReport
from .._rerun.html import STYLE, fragment
from .._rerun.stored import stored_report
from .http import json_response, render
from .refs import run_path
from .state import Console


def rerun_id_of(request: Request) -> str:
    return str(request.path_params["rerun_id"])


async def report_of(request: Request) -> RerunReport:
    """The report of the request's rerun, read back from the store off the event loop; 404 for no such rerun."""
    console: Console = request.state.console
    rerun_id = rerun_id_of(request)
    report = await run_in_threadpool(stored_report, console.store, rerun_id)
    if report is None:
        raise HTTPException(404, f"no rerun {rerun_id!r} in this store: no run is its candidate")
    return report


async def rerun_page(request: Request) -> Response:
    """``GET /reruns/{id}``: the rerun's report, as ``runner rerun --html`` draws it; 404 for no such rerun."""
    report = await report_of(request)
    return render(request, "rerun.html", report=report, body=fragment(report, run_path))


async def rerun_json(request: Request) -> Response:
    """``GET /api/reruns/{id}``: the report as ``runner rerun --json`` prints it, read back from the store."""
    return json_response((await report_of(request)).to_json())


async def report_style(request: Request) -> Response:
    """``GET /reruns.css``: the report's styles, the very ones ``runner rerun --html`` writes inline."""
    return Response(STYLE, media_type="text/css")
