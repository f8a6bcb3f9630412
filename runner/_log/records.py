"""What the store returns: frozen values with attributes, never bare rows.

``liveness`` tells an unfinished run whose process died from one still going (``Liveness``).
The store judges it when it reads a run, looking at the owner's process where it can
(``runner.store.owner``); here it is a function of values only: the status, whether the
owner's process was seen running, and the heartbeat's age. On PostgreSQL heartbeats are
judged by the server's clock (``read_at``), so a host whose clock runs ahead sees no live run stale.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from ..errors import StoreError
from ..messages import Message
from .facts import Event, RunFinished, RunResumed, RunStarted
from .statuses import UNFINISHED, Liveness, Status

STALE_AFTER_S: Final = 30.0  # three missed heartbeats (store.lease.HEARTBEAT_S)
# The members by their old names, for the readers that compare with them.
FINISHED: Final = Liveness.FINISHED
WAITING: Final = Liveness.WAITING
LIVE: Final = Liveness.LIVE
DEAD: Final = Liveness.DEAD
STALE: Final = Liveness.STALE


@dataclass(frozen=True, slots=True)
class StoredEvent:
    """One row of ``events``; ``data`` is its JSON decoded."""

    seq: int
    at: datetime
    step: int
    kind: str
    data: dict[str, Any]
    span_id: str | None


@dataclass(frozen=True, slots=True)
class RunSummary:
    """One row of ``runs`` with its labels: what ``list_runs`` returns."""

    run_id: str
    status: Status
    answer: str | None
    error: str | None
    task: str
    system: str
    model: str
    provider: str | None
    agent_name: str | None
    steps: int
    tokens: int
    tool_calls: int
    limits: dict[str, Any]
    tool_specs: list[dict[str, Any]]
    labels: dict[str, str]
    trace_id: str
    parent_run_id: str | None
    started_at: datetime
    updated_at: datetime
    finished_at: datetime | None
    owner: str | None
    heartbeat_at: datetime | None
    # What the model calls cost: the calls whose cost is known, added up, and how many are unknown.
    cost_known_usd: float = field(default=0.0, kw_only=True)
    costs_unknown: int = field(default=0, kw_only=True)
    # A sub-agent's child run: the parent's call it serves (None: any other run, a fork or a follow-up too).
    parent_call_id: str | None = field(default=None, kw_only=True)
    # When the row was read, by the database server's clock (PostgreSQL; None: this process's clock judges).
    read_at: datetime | None = field(default=None, kw_only=True, repr=False, compare=False)
    # How the store judged the run's process when it read the row (None: by the values alone).
    judged: Liveness | None = field(default=None, kw_only=True, repr=False, compare=False)

    @property
    def cost_usd(self) -> float | None:
        """What the run cost, or None while any model call's cost is unknown (``cost_known_usd`` is then a floor)."""
        return None if self.costs_unknown else self.cost_known_usd

    @property
    def finished(self) -> bool:
        return self.status not in UNFINISHED

    @property
    def liveness(self) -> Liveness:
        """As the store judged it when it read the run; for a record made otherwise, from its values alone."""
        if self.judged is not None:
            return self.judged
        return liveness(self.status, self.heartbeat_at, self.read_at or datetime.now(UTC))

    @property
    def gone(self) -> bool:
        """Whether the run has not ended and no process drives it any more (dead or stale)."""
        return self.liveness.gone


@dataclass(frozen=True, slots=True)
class StoredRun(RunSummary):
    """A run with its whole log: ``events``, their decoded ``facts`` in the same order, and its ``messages``.

    The store decodes the log once, when it reads the run; readers use ``facts``.
    """

    events: list[StoredEvent] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)
    facts: tuple[Event, ...] = ()

    @property
    def output(self) -> Any:
        """The typed result (``output_type=``) the run ended with, as JSON; None while it has none."""
        output = None
        for fact in self.facts:
            if isinstance(fact, RunFinished):
                output = fact.output
            elif isinstance(fact, RunResumed):
                output = None
        return output


def liveness(status: str, heartbeat_at: datetime | None, now: datetime, stale_after_s: float = STALE_AFTER_S, *,
             alive: bool | None = None) -> Liveness:
    """How a run with this ``status`` stands, from values (see the module docstring).

    ``alive`` says whether its owner's process was seen running (None: it could not be seen), and
    then decides; else the heartbeat's age at ``now`` does (the database server's clock on PostgreSQL).
    """
    if status == Status.QUEUED:
        return Liveness.WAITING
    if status != Status.RUNNING:
        return Liveness.FINISHED
    if alive is not None:
        return Liveness.LIVE if alive else Liveness.DEAD
    if heartbeat_at is None or now - heartbeat_at > timedelta(seconds=stale_after_s):
        return Liveness.STALE
    return Liveness.LIVE


def summary_fields(row: Mapping[Any, Any], labels: dict[str, str], loads: Any) -> dict[str, Any]:
    """Keyword arguments for ``RunSummary`` from a ``runs`` row."""
    values = {name: row[name] for name in RunSummary.__dataclass_fields__ if name in row}
    values["status"] = status_of(row["run_id"], row["status"])
    values["limits"] = loads(row["limits"])
    values["tool_specs"] = loads(row["tool_specs"])
    values["labels"] = labels
    return values


def status_of(run_id: str, text: str) -> Status:
    """The ``Status`` a ``runs`` row's ``status`` names; ``StoreError`` for text that names none (a foreign row)."""
    try:
        return Status(text)
    except ValueError:
        raise StoreError(f"run {run_id} has status {text!r}, which is not one of this runner's") from None


def logged_text(facts: Iterable[Event]) -> dict[str, Any]:
    """The run's text fields exactly as its log holds them.

    The ``runs`` columns hold a rendering: U+FFFD for what a backend cannot store, names cut to the column width.
    """
    found: dict[str, Any] = {}
    for fact in facts:
        if isinstance(fact, RunStarted):
            found.update(task=fact.task, system=fact.system, model=fact.model, provider=fact.provider,
                         agent_name=fact.agent_name, labels=dict(fact.labels), parent_call_id=fact.parent_call_id)
        elif isinstance(fact, RunFinished):
            found.update(answer=fact.answer, error=fact.error)
        elif isinstance(fact, RunResumed):
            found.update(answer=None, error=None)
    return found
