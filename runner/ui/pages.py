"""The console's pages: the runs, one run, the approvals inbox, and the forms that act on a run.

Store work runs in Starlette's thread pool, never on the event loop. A form's action answers
with a redirect (303) to a page that shows what happened once.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple
from urllib.parse import parse_qs, quote

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from .._log.decisions import Decision
from .._log.fixture import fixture_from_run
from .._log.records import LIVE, RunSummary, StoredRun
from .._log.state import fold
from .._log.statuses import Status
from .._text import storable
from .._view.continuation import pooled
from .._view.lineage import Link, children, origin_text, pending_approvals
from .._view.summary import cost_text, seconds, when
from ..errors import AmbiguousRunId, RunnerError, RunNotFound, StoreError
from ..events import ApprovalRequested, StepStarted
from . import timeline
from .query import BadQuery, RunQuery, run_query

if TYPE_CHECKING:
    from .app import Console

MAX_FORM_BYTES = 256 * 1024  # a form or JSON body past this is refused: an observation edit fits easily
MORE_COUNTED = 1000  # the awaiting-approval badge counts this far ("1000+")
INBOX_RUNS = 200  # runs awaiting approval the inbox reads at once
LIVE_STATUSES = frozenset({Status.RUNNING, Status.QUEUED})


def console_of(request: Request) -> Console:
    console: Console = request.app.state.console
    return console


def render(request: Request, name: str, status: int = 200, headers: Mapping[str, str] | None = None,
           **values: Any) -> HTMLResponse:
    """A template rendered with the console's common values (read-only, the awaiting badge).

    The log keeps a lone surrogate from a model's JSON exactly; UTF-8 cannot, so the page shows U+FFFD there.
    """
    console = console_of(request)
    html = console.templates.get_template(name).render(read_only=console.read_only, path=request.url.path,
                                                       **values)
    return HTMLResponse(storable(html), status_code=status, headers=headers)


def json_response(value: Any, status: int = 200) -> Response:
    """JSON as the CLI prints it: every non-ASCII and control character escaped by JSON itself."""
    return Response(json.dumps(value, ensure_ascii=True, default=str), status_code=status,
                    media_type="application/json")


def segment(value: str) -> str:
    """``value`` as one percent-encoded URL path segment: a run id may hold ``?``, ``#``, ``/`` or ``..``."""
    return quote(value, safe="")


class Row(NamedTuple):
    """A run as the runs table shows it."""

    run: RunSummary
    short: str
    refused: int
    started: str
    duration: str
    cost: str


class RunsView(NamedTuple):
    rows: list[Row]
    more: bool
    awaiting: int
    live: bool


def runs_view(console: Console, query: RunQuery) -> RunsView:
    store = console.store
    filters: dict[str, Any] = query.filters()
    found = store.list_runs(**filters, limit=query.limit, offset=query.offset)
    more = len(found) == query.limit and store.count_runs(**filters, at_most=query.offset + query.limit + 1) \
        > query.offset + query.limit
    ids = [run.run_id for run in found]
    shorts, refused = store.short_ids(ids), store.refused_calls(ids)
    rows = [Row(run, shorts[run.run_id], refused[run.run_id], when(run.started_at),
                seconds((run.finished_at - run.started_at).total_seconds() if run.finished_at else None),
                cost_text(run.cost_known_usd, run.costs_unknown))
            for run in found]
    awaiting = store.count_runs(status=Status.AWAITING_APPROVAL, at_most=MORE_COUNTED)
    return RunsView(rows, more, awaiting, any(run.status in LIVE_STATUSES for run in found))


async def runs_page(request: Request) -> Response:
    """``GET /``: the runs, newest first, filtered as ``runner runs`` filters them."""
    console = console_of(request)
    query = run_query(request.query_params)
    view = await run_in_threadpool(runs_view, console, query)
    partial = request.headers.get("x-refresh") == "rows"
    return render(request, "_rows.html" if partial else "runs.html", headers={"x-live": str(int(view.live))},
                  view=view, query=query, statuses=[s.value for s in Status])


class Pending(NamedTuple):
    """A call awaiting a decision, as the inbox shows it."""

    run: RunSummary
    short: str
    call: ApprovalRequested
    args: str


def inbox(console: Console) -> list[Pending]:
    store = console.store
    waiting = store.list_runs(status=Status.AWAITING_APPROVAL, limit=INBOX_RUNS)
    shorts = store.short_ids([run.run_id for run in waiting])
    found = []
    for summary in waiting:
        try:
            run = store.get_run(summary.run_id)
        except RunNotFound:  # pruned since the list was read
            continue
        for call in pending_approvals(run).values():
            found.append(Pending(run, shorts[run.run_id], call, timeline.args_text(call.args)))
    return found


async def approvals_page(request: Request) -> Response:
    """``GET /approvals``: every call awaiting a decision, each with Approve, Deny and a reason."""
    console = console_of(request)
    pending = await run_in_threadpool(inbox, console)
    note = console.take_note(request.query_params.get("note"), "approvals")
    return render(request, "approvals.html", pending=pending, note=note, awaiting=len({p.run.run_id for p in pending}))


class RunView(NamedTuple):
    run: StoredRun
    short: str
    entries: list[timeline.Entry]
    doubts: list[timeline.InDoubt]
    links: list[Link]
    origins: dict[str, str]
    pending: list[ApprovalRequested]
    steps_made: int
    duration: str
    active: str
    pooled: bool
    cost: str


def run_view(console: Console, ref: str) -> RunView:
    from .._view.activity import active_seconds

    store = console.store
    run = store.find_run(ref)
    state = fold(run.facts, run.run_id)
    links = children(store, run.run_id)
    finished = run.finished_at
    return RunView(
        run, store.short_ids([run.run_id])[run.run_id], timeline.entries(run), timeline.in_doubt(run, state), links,
        {link.run_id: origin_text(link.origin, link.forked_at_step) for link in links}
        | ({run.run_id: origin_text(state.started.origin, state.started.forked_at_step)} if state.started else {}),
        list(pending_approvals(run).values()),
        max((f.step for f in run.facts if isinstance(f, StepStarted)), default=0),
        seconds((finished - run.started_at).total_seconds() if finished else None),
        seconds(active_seconds(run.events, run.facts)), pooled(run), cost_text(run.cost_known_usd, run.costs_unknown))


async def run_page(request: Request) -> Response:
    """``GET /runs/{ref}``: one run's header, timeline, lineage, downloads and actions."""
    console = console_of(request)
    view = await run_in_threadpool(run_view, console, request.path_params["ref"])
    run = view.run
    live = run.status in LIVE_STATUSES and (run.status == Status.QUEUED or run.liveness == LIVE)
    note = console.take_note(request.query_params.get("note"), "run")
    partial = request.headers.get("x-refresh") == "run"
    return render(request, "_run_live.html" if partial else "run.html", headers={"x-live": str(int(live))},
                  view=view, run=run, note=note, live=live, stoppable=run.status in LIVE_STATUSES,
                  can_fork=console.actions.registry is not None,
                  resumable=run.status not in (Status.DONE, Status.QUEUED) and run.liveness != LIVE
                  and not view.pending)


async def fixture_file(request: Request) -> Response:
    """``GET /runs/{ref}/fixture.json``: what ``runner export`` writes."""
    console = console_of(request)
    run = await run_in_threadpool(console.store.find_run, request.path_params["ref"])
    text = fixture_from_run(run).dumps()
    return Response(text, media_type="application/json", headers=attachment(f"run-{run.run_id[:12]}.json"))


async def spans_file(request: Request) -> Response:
    """``GET /runs/{ref}/spans.json``: the run's spans, rebuilt from its log, as OTLP JSON."""
    from ..tracing.otlp import otlp_json
    from ..tracing.rebuild import rebuild_spans

    console = console_of(request)
    run = await run_in_threadpool(console.store.find_run, request.path_params["ref"])
    body = json.dumps(otlp_json(rebuild_spans(run)), ensure_ascii=True)
    return Response(body, media_type="application/json", headers=attachment(f"spans-{run.run_id[:12]}.json"))


def attachment(name: str) -> dict[str, str]:
    """The header that downloads as ``name``, its characters past letters, digits, ``.``, ``_`` and ``-`` as ``_``."""
    return {"content-disposition": f'attachment; filename="{re.sub(r"[^A-Za-z0-9._-]", "_", name)}"'}


def media_type(request: Request) -> str:
    """The request's ``Content-Type`` without its parameters, lower case ("" when it has none)."""
    return request.headers.get("content-type", "").partition(";")[0].strip().lower()


async def form(request: Request) -> dict[str, str]:
    """The urlencoded fields of a POST (the first value of each), refusing a body past ``MAX_FORM_BYTES``.

    Only what an HTML form sends: a ``text/plain`` body is what a page on another site can post without asking.
    """
    body = await bounded_body(request)
    if body and media_type(request) != "application/x-www-form-urlencoded":
        raise HTTPException(415, "a form is sent as application/x-www-form-urlencoded")
    try:
        fields = parse_qs(body.decode("utf-8"), keep_blank_values=True, max_num_fields=50)
    except (UnicodeDecodeError, ValueError) as exc:
        raise HTTPException(400, f"unreadable form: {exc}") from None
    return {key: values[0] for key, values in fields.items()}


async def bounded_body(request: Request) -> bytes:
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_FORM_BYTES:
            raise HTTPException(413, f"request body over {MAX_FORM_BYTES // 1024} KiB")
        chunks.append(chunk)
    return b"".join(chunks)


def redirect(url: str) -> RedirectResponse:
    return RedirectResponse(url, status_code=303)


def run_url(run_id: str, note: str | None = None) -> str:
    """The run page's URL (the id one path segment), with the key of a note to show there."""
    return f"/runs/{segment(run_id)}" + (f"?note={note}" if note else "")


async def decide_form(request: Request) -> Response:
    """``POST /runs/{ref}/decide``: Approve or Deny (with a reason) one call, then go on with the run."""
    console = console_of(request)
    fields = await form(request)
    call_id, verdict = fields.get("call_id", ""), fields.get("verdict", "")
    if not call_id or verdict not in ("approve", "deny"):
        raise HTTPException(400, "a decision needs call_id and verdict=approve or verdict=deny")
    decision: Decision = True if verdict == "approve" else (fields.get("reason", "").strip() or False)
    run_id = await run_in_threadpool(console.store.resolve_run_id, request.path_params["ref"])
    outcome = await run_in_threadpool(console.actions.decide, run_id, {call_id: decision})
    page = "run" if fields.get("back") == "run" else "approvals"
    key = console.note(page, run_id=run_id, call_id=call_id, how=outcome.how, text=outcome.text,
                       command=outcome.command or "", verdict="approved" if decision is True else "denied")
    return redirect(run_url(run_id, key) if page == "run" else f"/approvals?note={key}")


async def cancel_form(request: Request) -> Response:
    """``POST /runs/{ref}/cancel``: a queued run is cancelled at once, a running one before its next call."""
    console = console_of(request)
    run_id = await run_in_threadpool(console.store.resolve_run_id, request.path_params["ref"])
    status = await run_in_threadpool(console.actions.cancel, run_id)
    text = ("cancelled" if status == Status.CANCELLED
            else "cancel requested: it stops before its next model or tool call")
    return redirect(run_url(run_id, console.note("run", how="cancel", text=text)))


async def resume_form(request: Request) -> Response:
    """``POST /runs/{ref}/resume``: go on with a stopped run, with more steps when ``max_steps`` says so."""
    console = console_of(request)
    fields = await form(request)
    raw = fields.get("max_steps", "").strip()
    if raw and not raw.isdecimal():  # isdigit() takes "²", which int() refuses
        raise HTTPException(400, f"max_steps must be a whole number, got {raw!r}")
    run_id = await run_in_threadpool(console.store.resolve_run_id, request.path_params["ref"])
    outcome = await run_in_threadpool(console.actions.resume, run_id, int(raw) if raw else None)
    key = console.note("run", how=outcome.how, text=outcome.text, command=outcome.command or "")
    return redirect(run_url(run_id, key))


async def fork_form(request: Request) -> Response:
    """``POST /runs/{ref}/fork``: a new run from before step ``at_step``, one observation edited; opens it."""
    console = console_of(request)
    fields = await form(request)
    raw = fields.get("at_step", "").strip()
    if not raw.isdecimal() or int(raw) < 1:
        raise HTTPException(400, f"at_step must be a step number (1 or more), got {raw!r}")
    call_id = fields.get("call_id", "").strip()
    observations = {call_id: fields.get("observation", "")} if call_id else {}
    run_id = await run_in_threadpool(console.store.resolve_run_id, request.path_params["ref"])
    try:
        new_id = await run_in_threadpool(console.actions.fork, run_id, int(raw), observations)
    except ValueError as exc:  # an observation for a call with no result before that step
        raise HTTPException(400, str(exc)) from None
    return redirect(run_url(new_id))


async def failed(request: Request, exc: Exception) -> Response:
    """Every refusal as one line: JSON ``{"error": ...}`` under ``/api/``, else a small page."""
    if isinstance(exc, HTTPException):
        status, text = exc.status_code, str(exc.detail)
    elif isinstance(exc, RunNotFound):
        status, text = 404, str(exc)
    elif isinstance(exc, (BadQuery, AmbiguousRunId)):
        status, text = 400, str(exc)
    elif isinstance(exc, StoreError):  # the store could not answer
        status, text = 503, str(exc)
    elif isinstance(exc, RunnerError):  # an action refused, a run that cannot be resumed
        status, text = 409, str(exc)
    else:
        raise exc
    if request.url.path.startswith("/api/"):
        return json_response({"error": text}, status)
    return render(request, "error.html", status=status, message=text, code=status)


async def crashed(request: Request, exc: Exception) -> Response:
    """An unexpected error: a fixed line, with the safety headers (this answer is sent outside the gate)."""
    from .guard import HEADERS

    headers = {name.decode(): value.decode() for name, value in HEADERS}
    return Response("Internal Server Error\n", status_code=500, media_type="text/plain", headers=headers)


HANDLERS: dict[Any, Any] = {HTTPException: failed, RunnerError: failed, BadQuery: failed, 500: crashed}
