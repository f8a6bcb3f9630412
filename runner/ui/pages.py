"""The console's pages: the runs, one run, the approvals inbox, and the forms that act on a run.

Store work runs in Starlette's thread pool, never on the event loop. A form's action answers
with a redirect (303) to a page that shows what happened once. What a page shows is built in
``_view/console.py``; the HTTP helpers are in ``http.py``.
"""

from __future__ import annotations

import json

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from .._log.decisions import Decision
from .._log.records import LIVE
from .._log.statuses import Status
from .._replay.fixture import fixture_from_run
from .._rerun.stored import recent
from .._view.console import LIVE_STATUSES, inbox, run_view, runs_view
from .._view.listing import RunFilter
from .http import attachment, decider_of, form, redirect, render, run_url
from .query import run_query
from .refs import ref_of
from .state import Console


async def runs_page(request: Request) -> Response:
    """``GET /``: the runs, newest first, filtered as ``runner runs`` filters them."""
    console: Console = request.state.console
    query = run_query(request.query_params)
    view = await run_in_threadpool(runs_view, console.store, query.where, query.limit, query.offset)
    partial = request.headers.get("x-refresh") == "rows"
    unfiltered = not partial and query.page == 1 and query.where == RunFilter()  # the newest reruns, above the runs
    listed = await run_in_threadpool(recent, console.store, console.cases, console.lines) if unfiltered else []
    return render(request, "_rows.html" if partial else "runs.html", headers={"x-live": str(int(view.live))},
                  view=view, query=query, statuses=[s.value for s in Status], reruns=listed)


async def approvals_page(request: Request) -> Response:
    """``GET /approvals``: every call awaiting a decision, each with Approve, Deny and a reason."""
    console: Console = request.state.console
    pending = await run_in_threadpool(inbox, console.store)
    note = console.take_note(request.query_params.get("note"), "approvals")
    return render(request, "approvals.html", pending=pending, note=note, awaiting=len({p.run.run_id for p in pending}))


async def run_page(request: Request) -> Response:
    """``GET /runs/{ref}``: one run's header, timeline, lineage, downloads and actions."""
    console: Console = request.state.console
    view = await run_in_threadpool(run_view, console.store, ref_of(request), console.actions.registry)
    run = view.run
    note = console.take_note(request.query_params.get("note"), "run")
    partial = request.headers.get("x-refresh") == "run"
    return render(request, "_run_live.html" if partial else "run.html", headers={"x-live": str(int(view.live))},
                  view=view, run=run, note=note, live=view.live, stoppable=run.status in LIVE_STATUSES,
                  can_fork=console.actions.registry is not None,
                  resumable=run.status not in (Status.DONE, Status.QUEUED) and run.liveness != LIVE
                  and not view.pending and not view.below)


async def fixture_file(request: Request) -> Response:
    """``GET /runs/{ref}/fixture.json``: what ``runner export`` writes."""
    console: Console = request.state.console
    run = await run_in_threadpool(console.store.find_run, ref_of(request))
    fixture = await run_in_threadpool(fixture_from_run, run, console.store)  # with its sub-agents' child runs
    text = fixture.dumps()
    return Response(text, media_type="application/json", headers=attachment(f"run-{run.run_id[:12]}.json"))


async def spans_file(request: Request) -> Response:
    """``GET /runs/{ref}/spans.json``: the run's spans, rebuilt from its log, as OTLP JSON."""
    from ..tracing.otlp import otlp_json  # lazily: OpenTelemetry takes over a second to import, for one download
    from ..tracing.rebuild import rebuild_spans  # lazily, as above

    console: Console = request.state.console
    run = await run_in_threadpool(console.store.find_run, ref_of(request))
    body = json.dumps(otlp_json(rebuild_spans(run)), ensure_ascii=True)
    return Response(body, media_type="application/json", headers=attachment(f"spans-{run.run_id[:12]}.json"))


async def decide_form(request: Request) -> Response:
    """``POST /runs/{ref}/decide``: Approve or Deny (with a reason) one call, then go on with the run."""
    console: Console = request.state.console
    fields = await form(request)
    call_id, verdict = fields.get("call_id", ""), fields.get("verdict", "")
    if not call_id or verdict not in ("approve", "deny"):
        raise HTTPException(400, "a decision needs call_id and verdict=approve or verdict=deny")
    decision: Decision = True if verdict == "approve" else (fields.get("reason", "").strip() or False)
    by = decider_of(request)
    run_id = await run_in_threadpool(console.store.resolve_run_id, ref_of(request))
    outcome = await run_in_threadpool(console.actions.decide, run_id, {call_id: decision}, by)
    page = "run" if fields.get("back") == "run" else "approvals"
    key = console.note(page, run_id=run_id, call_id=call_id, how=outcome.how, text=outcome.text,
                       command=outcome.command or "", verdict="approved" if decision is True else "denied")
    # A child's call decided on its parent's page goes back to that page (``page``: a run of the store).
    shown = await run_in_threadpool(console.store.resolve_run_id, fields["page"]) if fields.get("page") else run_id
    return redirect(run_url(shown, key) if page == "run" else f"/approvals?note={key}")


async def cancel_form(request: Request) -> Response:
    """``POST /runs/{ref}/cancel``: a queued run is cancelled at once, a running one before its next call."""
    console: Console = request.state.console
    run_id = await run_in_threadpool(console.store.resolve_run_id, ref_of(request))
    status = await run_in_threadpool(console.actions.cancel, run_id)
    text = ("cancelled" if status == Status.CANCELLED
            else "cancel requested: it stops before its next model or tool call")
    return redirect(run_url(run_id, console.note("run", how="cancel", text=text)))


async def resume_form(request: Request) -> Response:
    """``POST /runs/{ref}/resume``: go on with a stopped run, with more steps when ``max_steps`` says so."""
    console: Console = request.state.console
    fields = await form(request)
    raw = fields.get("max_steps", "").strip()
    if raw and not raw.isdecimal():  # isdigit() takes "²", which int() refuses
        raise HTTPException(400, f"max_steps must be a whole number, got {raw!r}")
    by = decider_of(request)
    run_id = await run_in_threadpool(console.store.resolve_run_id, ref_of(request))
    outcome = await run_in_threadpool(console.actions.resume, run_id, int(raw) if raw else None, by)
    key = console.note("run", how=outcome.how, text=outcome.text, command=outcome.command or "")
    return redirect(run_url(run_id, key))


async def fork_form(request: Request) -> Response:
    """``POST /runs/{ref}/fork``: a new run from before step ``at_step``, one observation edited; opens it."""
    console: Console = request.state.console
    fields = await form(request)
    raw = fields.get("at_step", "").strip()
    if not raw.isdecimal() or int(raw) < 1:
        raise HTTPException(400, f"at_step must be a step number (1 or more), got {raw!r}")
    call_id = fields.get("call_id", "").strip()
    observations = {call_id: fields.get("observation", "")} if call_id else {}
    run_id = await run_in_threadpool(console.store.resolve_run_id, ref_of(request))
    try:
        new_id = await run_in_threadpool(console.actions.fork, run_id, int(raw), observations)
    except ValueError as exc:  # an observation for a call with no result before that step
        raise HTTPException(400, str(exc)) from None
    return redirect(run_url(new_id))
