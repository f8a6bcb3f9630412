"""``create_app``: the console as an ASGI app over one store (Starlette, Jinja2 templates, packaged assets)."""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from secrets import token_urlsafe
from typing import Any, NamedTuple

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from .._log.records import StoredRun
from .._log.statuses import Status
from .._tools.registry import ToolRegistry
from .._view.summary import seconds
from ..messages import McpRef, Model
from ..pool.agents import Factory
from ..store import RunStore
from . import api, pages
from .actions import Actions
from .guard import Guard

HERE = Path(__file__).resolve().parent
NOTES_KEPT = 200  # messages shown once after an action, kept in memory by a random key
SHUTDOWN_GRACE_S = 5.0  # how long stopping the console waits for the runs it drives


class Note(NamedTuple):
    """A message to show once, on the page it was made for (``approvals`` or ``run``)."""

    page: str
    values: Mapping[str, str]


@dataclass
class Console:
    """What every route needs: the store, the actions, the templates, and whether actions are served."""

    store: RunStore
    actions: Actions
    templates: Environment
    read_only: bool
    notes: OrderedDict[str, Note] = field(default_factory=OrderedDict)

    def note(self, page: str, **values: str) -> str:
        """Keep a message to show once on ``page`` after a redirect; its key for the URL (no text goes in URLs)."""
        key = token_urlsafe(9)
        self.notes[key] = Note(page, values)
        while len(self.notes) > NOTES_KEPT:
            self.notes.popitem(last=False)
        return key

    def take_note(self, key: str | None, page: str) -> Mapping[str, str] | None:
        """The message kept under ``key`` for ``page``, once; a note made for another page is none of its own."""
        found = self.notes.get(key) if key else None
        if key is None or found is None or found.page != page:
            return None
        del self.notes[key]
        return found.values


def templates() -> Environment:
    """The Jinja2 environment: every value escaped, whatever the template's name."""
    env = Environment(loader=FileSystemLoader(HERE / "templates"), autoescape=select_autoescape(default=True),
                      trim_blocks=True, lstrip_blocks=True)
    env.globals["STATUS"] = Status
    env.filters["seconds"] = seconds  # the CLI's way of writing a duration
    env.filters["segment"] = pages.segment
    return env


def create_app(store: RunStore, *, registry: ToolRegistry | None = None, agents: Mapping[str, Factory] | None = None,
               read_only: bool = False, token: str | None = None, model: Model | None = None,
               model_for: Callable[[StoredRun], Model] | None = None, broker: str | None = None,
               decided_by: str | None = None, tools_ref: str | None = None, db_hint: str = "",
               mcp_servers: Sequence[McpRef] = ()) -> Starlette:
    """The console over ``store`` as an ASGI app: the pages, the JSON API, and the actions unless ``read_only``.

    ``registry`` (with ``model``, ``model_for(run)``, or the run's recorded model) lets the console go on with a
    run after a decision, resume it or fork it; ``agents`` does so for pool runs, ``broker`` publishes them.
    ``token``: every request must carry it. A read-only store serves no action either. ``tools_ref`` and
    ``mcp_servers`` say where ``registry``'s tools come from, for the runs it forks and the commands it shows.
    """
    if token is not None and not token.strip():
        raise ValueError("token is empty: give None for no token, or a secret every request must carry")
    read_only = read_only or store.read_only
    actions = Actions(store, registry=registry, agents=agents, model=model, model_for=model_for, broker=broker,
                      decided_by=decided_by, tools_ref=tools_ref, db_hint=db_hint, mcp_servers=mcp_servers)
    console = Console(store, actions, templates(), read_only)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        actions.wait(SHUTDOWN_GRACE_S)

    routes: list[Any] = [
        Route("/", pages.runs_page),
        Route("/approvals", pages.approvals_page),
        Route("/runs/{ref}", pages.run_page),
        Route("/runs/{ref}/fixture.json", pages.fixture_file),
        Route("/runs/{ref}/spans.json", pages.spans_file),
        Route("/runs/{ref}/decide", pages.decide_form, methods=["POST"]),
        Route("/runs/{ref}/cancel", pages.cancel_form, methods=["POST"]),
        Route("/runs/{ref}/resume", pages.resume_form, methods=["POST"]),
        Route("/runs/{ref}/fork", pages.fork_form, methods=["POST"]),
        Route("/api/runs", api.list_runs),
        Route("/api/runs/{ref}", api.show_run),
        Route("/api/runs/{ref}/decisions", api.decide, methods=["POST"]),
        Route("/api/runs/{ref}/cancel", api.cancel, methods=["POST"]),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    app = Starlette(routes=routes, lifespan=lifespan, exception_handlers=pages.HANDLERS,
                    middleware=[Middleware(Guard, token=token, read_only=read_only)])
    app.state.console = console
    return app
