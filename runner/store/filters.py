"""``RunFilter``: which runs ``RunStore.list_runs`` and ``count_runs`` find, as one typed value.

``runner runs``, the console's runs page and ``GET /api/runs`` each build one from their options
or query string (``runner._view.listing`` re-exports it), so the three filter alike.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

Label = tuple[str, str] | Mapping[str, str]  # one (key, value) pair, or a mapping of them


@dataclass(frozen=True, slots=True)
class RunFilter:
    """Runs matching every field given (the defaults match all).

    ``status``: any of these (None: any status); ``since``/``until`` bound ``started_at`` (inclusive/exclusive;
    naive means UTC); ``tool`` a tool name the model called (run or refused); ``text`` a case-insensitive
    substring of the task or the answer; ``labels`` every one of these labels; ``top``: only runs that serve
    no sub-agent's call (no ``parent_call_id``: a fork or a follow-up is top-level, a sub-agent's child run is not).
    """

    status: tuple[str, ...] | None = None
    since: datetime | None = None
    until: datetime | None = None
    tool: str | None = None
    text: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict, hash=False)
    top: bool = False

    @classmethod
    def of(cls, status: str | Sequence[str] | None = None, since: datetime | None = None,
           until: datetime | None = None, tool: str | None = None, text: str | None = None,
           label: Label | None = None, top: bool = False) -> RunFilter:
        """The filter of ``list_runs``' keywords: ``status`` one or several, ``label`` a pair or a mapping."""
        statuses = None if status is None else (status,) if isinstance(status, str) else tuple(status)
        labels = dict([label]) if isinstance(label, tuple) else dict(label or {})
        return cls(statuses, since, until, tool, text, labels, top)


def chosen(where: RunFilter | None, keywords: RunFilter) -> RunFilter:
    """``where``, or the filter the keywords make; both at once is a mistake (``TypeError``)."""
    if where is None:
        return keywords
    if keywords != RunFilter():
        raise TypeError("give the filters as a RunFilter or as keywords, not both")
    return where
