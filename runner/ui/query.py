"""The runs list's filters from a query string, as ``runner runs`` takes them from options."""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple
from urllib.parse import urlencode

from starlette.datastructures import QueryParams

from .._log.statuses import Status
from .._view.filters import parse_when
from .._view.listing import RunFilter

PAGE_SIZE = 50  # runs per page unless ?limit= says otherwise
MAX_PAGE_SIZE = 500


class BadQuery(ValueError):
    """A query parameter the console cannot read (one line, answered with 400)."""


class RunQuery(NamedTuple):
    """What ``GET /`` and ``GET /api/runs`` were asked for."""

    statuses: tuple[str, ...]
    since: datetime | None
    until: datetime | None
    tool: str | None
    labels: dict[str, str]
    search: str | None
    limit: int
    page: int
    since_text: str = ""
    default_limit: int = PAGE_SIZE
    top: bool = False  # only top-level runs: no sub-agent's child run

    @property
    def offset(self) -> int:
        return (self.page - 1) * self.limit

    @property
    def where(self) -> RunFilter:
        """The runs asked for, as ``runner runs`` filters them."""
        return RunFilter(status=self.statuses or None, since=self.since, until=self.until, tool=self.tool,
                         text=self.search, labels=self.labels, top=self.top)

    def link(self, page: int) -> str:
        """The query string of this query's page ``page``."""
        pairs: list[tuple[str, str]] = [("status", s) for s in self.statuses]
        for name, value in (("since", self.since_text), ("tool", self.tool), ("search", self.search)):
            if value:
                pairs.append((name, value))
        pairs += [("label", f"{k}={v}") for k, v in self.labels.items()]
        if self.top:
            pairs.append(("top", "1"))
        if self.limit != self.default_limit:
            pairs.append(("limit", str(self.limit)))
        if page != 1:
            pairs.append(("page", str(page)))
        return "?" + urlencode(pairs) if pairs else "?"


def _int(params: QueryParams, name: str, default: int, low: int, high: int) -> int:
    value = params.get(name, "").strip()
    if not value:
        return default
    try:
        number = int(value)
    except ValueError:
        raise BadQuery(f"{name} must be a whole number, got {value!r}") from None
    if not low <= number <= high:
        raise BadQuery(f"{name} must be between {low} and {high}, got {number}")
    return number


def _when(params: QueryParams, name: str) -> datetime | None:
    value = params.get(name, "").strip()
    if not value:
        return None
    try:
        return parse_when(value)
    except ValueError as exc:
        raise BadQuery(f"{name}: {exc}") from None


def run_query(params: QueryParams, default_limit: int = PAGE_SIZE) -> RunQuery:
    """Read and check the filters; ``BadQuery`` names the first one that is wrong."""
    statuses = tuple(s for s in params.getlist("status") if s)
    known = {status.value for status in Status}
    for status in statuses:
        if status not in known:
            raise BadQuery(f"status must be one of {', '.join(sorted(known))}; got {status!r}")
    labels: dict[str, str] = {}
    for pair in params.getlist("label"):
        if not pair:
            continue
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise BadQuery(f"label must be KEY=VALUE, got {pair!r}")
        labels[key] = value
    return RunQuery(statuses, _when(params, "since"), _when(params, "until"),
                    params.get("tool", "").strip() or None, labels, params.get("search", "") or None,
                    _int(params, "limit", default_limit, 1, MAX_PAGE_SIZE), _int(params, "page", 1, 1, 1_000_000),
                    params.get("since", "").strip(), default_limit, _flag(params, "top"))


def _flag(params: QueryParams, name: str) -> bool:
    """A yes-or-no parameter: ``1``, ``true``, ``on`` (a checked box) or ``yes``; empty or absent is no."""
    value = params.get(name, "").strip().lower()
    if value in ("", "0", "false", "off", "no"):
        return False
    if value in ("1", "true", "on", "yes"):
        return True
    raise BadQuery(f"{name} must be 1 or 0, got {value!r}")
