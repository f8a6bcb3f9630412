"""The JSON API behind the pages: what ``runner runs --json`` and ``runner show --json`` print, decisions, cancel."""

from __future__ import annotations

import json
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from .._log.decisions import Decision
from .._view.listing import origins, runs_page
from .._view.show import show_json
from .._view.summary import summary_json
from .http import bounded_body, decider_of, json_response, media_type
from .query import run_query
from .refs import ref_of
from .state import Console

CLI_LIMIT = 20  # ``runner runs``'s default --limit


async def list_runs(request: Request) -> Response:
    """``GET /api/runs``: ``runner runs --json`` with the same filters as query parameters."""
    console: Console = request.state.console
    query = run_query(request.query_params, default_limit=CLI_LIMIT)

    def read() -> list[dict[str, Any]]:
        page = runs_page(console.store, query.where, limit=query.limit, offset=query.offset)
        how = origins(console.store, page.runs)
        return [summary_json(run, page.refused[run.run_id], how[run.run_id]) for run in page.runs]

    return json_response(await run_in_threadpool(read))


async def show_run(request: Request) -> Response:
    """``GET /api/runs/{ref}``: ``runner show ID --json``."""
    console: Console = request.state.console

    def read() -> dict[str, Any]:
        return show_json(console.store, console.store.find_run(ref_of(request)))

    return json_response(await run_in_threadpool(read))


def decisions_in(body: bytes) -> dict[str, Decision]:
    """``{"decisions": {"call_1": true, "call_2": "reason"}}`` checked: true approves, false or a reason denies."""
    try:
        value = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:  # nested past Python's stack: no decisions
        raise HTTPException(400, f"the body is not JSON: {exc}") from None
    given = value.get("decisions") if isinstance(value, dict) else None
    if not isinstance(given, dict) or not given:
        raise HTTPException(400, 'expected {"decisions": {"CALL_ID": true | false | "reason"}} with one call at least')
    decisions: dict[str, Decision] = {}
    for call_id, verdict in given.items():
        if isinstance(verdict, bool):
            decisions[call_id] = verdict
        elif isinstance(verdict, str) and verdict.strip():
            decisions[call_id] = verdict.strip()
        else:
            raise HTTPException(400, f"decision for {call_id!r} must be true, false or a non-empty reason")
    return decisions


async def decide(request: Request) -> Response:
    """``POST /api/runs/{ref}/decisions``: log the decisions, then go on with the run as the inbox does."""
    console: Console = request.state.console
    if media_type(request) != "application/json":  # a page on another site cannot send JSON without asking first
        raise HTTPException(415, "decisions are JSON: send Content-Type: application/json")
    decisions = decisions_in(await bounded_body(request))
    by = decider_of(request)
    run_id = await run_in_threadpool(console.store.resolve_run_id, ref_of(request))
    outcome = await run_in_threadpool(console.actions.decide, run_id, decisions, by)
    return json_response({"run_id": run_id, "decisions": decisions, "decided_by": by,
                          "outcome": outcome.how, "message": outcome.text, "command": outcome.command})


async def cancel(request: Request) -> Response:
    """``POST /api/runs/{ref}/cancel``: what ``runner cancel --json`` prints."""
    console: Console = request.state.console
    run_id = await run_in_threadpool(console.store.resolve_run_id, ref_of(request))
    status = await run_in_threadpool(console.actions.cancel, run_id)
    return json_response({"run_id": run_id, "status": status, "cancel_requested": True})
