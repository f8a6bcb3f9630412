"""The parts of a recorded run: where each ended, and how the next was resumed.

A run that was resumed is recorded in parts (the run, then each resume). Replay
drives one core per part, stops it where the recording's part stopped, and
resumes the next as the recording did. A fixture holds these boundaries as JSON
(``resumes`` and ``outcome``); here they are read once into typed values.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .._log.limits import Limits
from .fixture import CRASHED, Fixture


@dataclass(frozen=True, slots=True)
class PartEnd:
    """How one part of a recorded run ended: where it was resumed, or where the run ended."""

    status: str  # the part's status, or ``CRASHED`` when its process died
    error: str | None
    after_replies: int  # the model replies recorded up to that point
    stopped_before_call: str | None = None  # the call a deadline, cancel or crash interrupted
    in_doubt: frozenset[str] = field(default_factory=frozenset)  # calls a crash left started, never finished

    @property
    def crashed(self) -> bool:
        return self.status == CRASHED


@dataclass(frozen=True, slots=True)
class Resumption:
    """How the part after a resume began: the reason, limits and decisions it was resumed with."""

    reason: str
    limits: Limits
    decisions: dict[str, bool | str]


def part_ends(fixture: Fixture) -> list[PartEnd]:
    """How each part ended, in order; the last is the run's own end."""
    ends = [PartEnd(str(found["status"]), found.get("error"), int(found["after_replies"]),
                    found.get("stopped_before_call"), frozenset(found.get("in_doubt") or ()))
            for found in fixture.resumes]
    outcome = fixture.outcome
    ends.append(PartEnd(str(outcome["status"]), outcome["error"], len(fixture.replies),
                        outcome.get("stopped_before_call")))
    return ends


def resumptions(fixture: Fixture) -> list[Resumption]:
    """How each part after the first was resumed, in order."""
    # Limits a later version may add are ignored, as everywhere in a fixture.
    return [Resumption(str(found["reason"]), Limits.from_dict(found["limits"]), dict(found["decisions"]))
            for found in fixture.resumes]
