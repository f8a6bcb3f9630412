"""Rows as the tables hold them: the ``runs`` row a run's first fact opens, label rows, column text, upserts.

The summary columns hold a rendering of what the log holds exactly: ``column``
makes text storable and cuts names to their column's width. The recorder (a run's
``run_started``) and the queue (a pool's ``run_queued``) build a run's row with the
same ``run_row``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any, overload

from sqlalchemy import Dialect, Insert, Table
from sqlalchemy.dialects import postgresql, sqlite

from .. import _jsontext
from .._text import storable
from ..errors import StoreError
from ..events import RunQueued, RunStarted
from .tables import run_labels

# The width of the name columns (runs.model, provider, agent_name, parent_call_id; run_labels.key; run_tools.name).
NAME_WIDTH = 200


def dumps(value: Any) -> str:
    return _jsontext.compact(value)


def event_data(run_id: str, seq: int, data: str) -> Any:
    """An event's ``data``; text that is not JSON (a hand edit, a foreign writer) is one ``StoreError``."""
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError is a ValueError
        raise StoreError(f"run {run_id}: event {seq} holds data that is not JSON ({exc}); "
                         "the log was written by something other than runner") from None


@overload
def column(text: str, width: int | None = None) -> str: ...
@overload
def column(text: None, width: int | None = None) -> None: ...
def column(text: str | None, width: int | None = None) -> str | None:
    """Render ``text`` for a summary column: ``storable``, then cut to the column's ``width``.

    ``storable`` drops NUL and puts U+FFFD for a lone surrogate. The event log keeps the exact text.
    """
    shown = storable(text)
    return shown if shown is None or width is None else shown[:width]


def run_row(run_id: str, opened: RunStarted | RunQueued, trace_id: str, owner: str | None,
            started_at: datetime | str) -> dict[str, Any]:
    """The columns of run ``run_id``'s ``runs`` row that its first fact sets, rendered for them.

    A run started by the loop opens with ``run_started``; one submitted to a pool with
    ``run_queued``, which names no model, system prompt or tools yet (its worker's
    ``run_started`` fills them in). The status and progress columns are the caller's.
    """
    match opened:
        case RunStarted():
            parent, system, model, provider, tool_specs = (opened.parent_run_id, opened.system, opened.model,
                                                           opened.provider, opened.tool_specs)
            call = opened.parent_call_id
        case RunQueued():
            parent, system, model, provider, tool_specs, call = None, "", "", None, [], None
    return {
        "run_id": run_id, "parent_run_id": parent, "parent_call_id": column(call, NAME_WIDTH),
        "task": column(opened.task), "system": column(system),
        "model": column(model, NAME_WIDTH), "provider": column(provider, NAME_WIDTH),
        "agent_name": column(opened.agent_name, NAME_WIDTH), "limits": dumps(opened.limits),
        "tool_specs": dumps(tool_specs), "trace_id": trace_id, "owner": owner, "started_at": started_at,
    }


def label_rows(run_id: str, labels: Mapping[str, str], started_at: datetime | str) -> list[dict[str, Any]]:
    """A run's ``run_labels`` rows, keys and values rendered for their columns.

    Of two keys that render alike, the first one given wins.
    """
    rendered = {column(k, NAME_WIDTH): column(v) for k, v in reversed(list(labels.items()))}
    return [{"run_id": run_id, "key": k, "value": v, "started_at": started_at} for k, v in reversed(rendered.items())]


def labels_upsert(dialect: Dialect) -> Insert:
    """The insert of a run's labels, which updates the rows a queued run already has.

    A queued run's start moves their ``started_at`` to the run's, so the label filter
    keeps reading newest first.
    """
    table = run_labels
    if dialect.name in ("postgresql", "sqlite"):
        insert = postgresql.insert(table) if dialect.name == "postgresql" else sqlite.insert(table)
        return insert.on_conflict_do_update(index_elements=[table.c.run_id, table.c.key],
                                            set_={"value": insert.excluded.value,
                                                  "started_at": insert.excluded.started_at})
    return table.insert()


def insert_new(table: Table, dialect: Dialect) -> Insert:
    """An insert that skips rows whose key exists (a resumed run names tools it named before)."""
    if dialect.name == "postgresql":
        return postgresql.insert(table).on_conflict_do_nothing()
    if dialect.name == "sqlite":
        return sqlite.insert(table).on_conflict_do_nothing()
    return table.insert()
