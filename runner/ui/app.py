"""``create_app``: the console as an ASGI app over one store (Starlette, Jinja2 templates, packaged assets)."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from .._log.records import StoredRun
from .._log.statuses import Status
from .._text import plural, shown_name
from .._tools.registry import ToolRegistry
from .._view.summary import money, seconds
from .._view.timeline import args_text
from ..messages import McpRef, Model
from ..pool.agents import Factory
from ..store import RunStore
from . import api, follow, http, pages, refs, reruns, stats
from .actions import Actions
from .guard import Guard
from .state import Console, State

HERE = Path(__file__).resolve().parent
HEADER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,63}")
SHUTDOWN_GRACE_S = 5.0  # how long stopping the console waits for the runs it drives


def templates() -> Environment:
    """The Jinja2 environment: every value escaped, whatever the template's name."""
    env = Environment(loader=FileSystemLoader(HERE / "templates"), autoescape=select_autoescape(default=True),
                      trim_blocks=True, lstrip_blocks=True)
    env.globals["STATUS"] = Status
    env.globals["FOLLOWED"] = follow.FOLLOWED  # the event kinds the run page's script follows
    env.filters["seconds"] = seconds  # the CLI's way of writing a duration
    env.filters["money"] = money  # and of writing a cost
    env.filters["args"] = args_text  # a call's arguments as JSON
    env.filters["pretty"] = pretty_json  # a tool's JSON Schema, indented
    env.filters["segment"] = refs.segment
    env.filters["run_path"] = refs.run_path
    env.filters["plural"] = plural  # ``{{ n|plural("call") }}``: 1 call, 2 calls
    env.filters["name"] = shown_name  # a name with what cannot be seen escaped, as the CLI prints it
    return env


def pretty_json(value: Any) -> str:
    """``value`` as indented JSON, keys sorted, non-ASCII kept (the template escapes it)."""
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str)


def create_app(store: RunStore, *, registry: ToolRegistry | None = None, agents: Mapping[str, Factory] | None = None,
               read_only: bool = False, token: str | None = None, model: Model | None = None,
               model_for: Callable[[StoredRun], Model] | None = None, broker: str | None = None,
               decided_by: str | None = None, tools_ref: str | None = None, db_hint: str = "",
               mcp_servers: Sequence[McpRef] = (), by_header: str | None = None) -> Starlette:
    """The console over ``store`` as an ASGI app: the pages, the JSON API, and the actions unless ``read_only``.

    ``registry`` (with ``model``, ``model_for(run)``, or the run's recorded model) lets the console go on with a
    run after a decision, resume it or fork it; ``agents`` does so for pool runs, ``broker`` publishes them.
    ``token``: every request must carry it. A read-only store serves no action either. ``tools_ref`` and
    ``mcp_servers`` say where ``registry``'s tools come from, for the runs it forks and the commands it shows.
    ``by_header``: the request header a trusted proxy names who decides in (else ``decided_by``); ``token`` only.
    """
    if token is not None and not token.strip():
        raise ValueError("token is empty: give None for no token, or a secret every request must carry")
    if by_header is not None and token is None:
        raise ValueError("by_header needs a token: without one anyone who reaches the console names the decider")
    if by_header is not None and not HEADER_NAME.fullmatch(by_header):
        raise ValueError(f"by_header {by_header!r} is not a header name (letters, digits and -)")
    read_only = read_only or store.read_only
    actions = Actions(store, registry=registry, agents=agents, model=model, model_for=model_for, broker=broker,
                      decided_by=decided_by, tools_ref=tools_ref, db_hint=db_hint, mcp_servers=mcp_servers)
    console = Console(store, actions, templates(), read_only, by_header.lower() if by_header is not None else None)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[State]:
        yield {"console": console}
        console.stopping.set()
        actions.wait(SHUTDOWN_GRACE_S)

    routes: list[Any] = [
        Route("/", pages.runs_page),
        Route("/approvals", pages.approvals_page),
        Route("/reruns.css", reruns.report_style),
        Route("/reruns/{rerun_id:path}", reruns.rerun_page),
        Route("/stats", stats.stats_page),
        Route("/runs/{ref}", pages.run_page),
        Route("/runs/{ref}/fixture.json", pages.fixture_file),
        Route("/runs/{ref}/spans.json", pages.spans_file),
        Route("/runs/{ref}/decide", pages.decide_form, methods=["POST"]),
        Route("/runs/{ref}/cancel", pages.cancel_form, methods=["POST"]),
        Route("/runs/{ref}/resume", pages.resume_form, methods=["POST"]),
        Route("/runs/{ref}/fork", pages.fork_form, methods=["POST"]),
        Route("/api/runs", api.list_runs),
        Route("/api/runs/{ref}", api.show_run),
        Route("/api/runs/{ref}/events", follow.run_events),
        Route("/api/runs/{ref}/decisions", api.decide, methods=["POST"]),
        Route("/api/runs/{ref}/cancel", api.cancel, methods=["POST"]),
        Route("/api/reruns/{rerun_id:path}", reruns.rerun_json),
        Route("/api/stats", stats.stats_json),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    app = Starlette(routes=routes, lifespan=lifespan, exception_handlers=http.HANDLERS,
                    middleware=[Middleware(Guard, token=token, read_only=read_only),
                                Middleware(refs.RawRunRef)])
    app.state.stopping = console.stopping  # ``serve`` sets it first as it stops: the open event streams end
    return app
