"""What every request reads: the console's lifespan state (the store, the actions, the templates, the notes).

``create_app``'s lifespan yields a ``State``; Starlette hands a copy to each request, read as
``request.state.console`` (starlette.io, "Lifespan"). No module-level global, no ``app.state``.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from secrets import token_urlsafe
from typing import NamedTuple, TypedDict

from jinja2 import Environment

from .._rerun.stored import Cases, Kept, Listed
from ..store import LabelValue, RunStore
from .actions import Actions

NOTES_KEPT = 200  # messages shown once after an action, kept in memory by a random key
CASES_KEPT = 2000  # reruns' cases the runs page rebuilt
LINES_KEPT = 100  # and its lines of reruns


class Note(NamedTuple):
    """A message to show once, on the page it was made for (``approvals`` or ``run``)."""

    page: str
    values: Mapping[str, str]


@dataclass
class Console:
    """What every route needs: the store, the actions, the templates, whether actions are served, who acts."""

    store: RunStore
    actions: Actions
    templates: Environment
    read_only: bool
    by_header: str | None = None  # the request header a trusted proxy names the decider in
    notes: OrderedDict[str, Note] = field(default_factory=OrderedDict)
    stopping: threading.Event = field(default_factory=threading.Event)  # set as the server stops: streams end
    # The runs page's reruns: their cases and lines, each kept while what it was made of stays the same.
    cases: Cases = field(default_factory=lambda: Kept(CASES_KEPT))
    lines: Kept[LabelValue, Listed] = field(default_factory=lambda: Kept(LINES_KEPT))

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


class State(TypedDict):
    """The lifespan state: each request reads it as ``request.state.console``."""

    console: Console
