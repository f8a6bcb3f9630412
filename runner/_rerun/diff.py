"""The behaviour diff: one run's figures, and what differs between a baseline and its candidates.

A field is ``changed`` when any sample differs from the baseline: ``status``, ``answer`` (runs of
whitespace made one space), ``tool_calls`` (name and arguments, in order), ``steps`` (any difference),
``tokens`` (more than ``TOKENS_MOVED`` of the baseline's), each typed result's field as ``output.<path>``.
With several samples, a field the samples disagree on is also ``unstable``: noise, told apart from a change
every sample agrees on. A case is regressed when its baseline ended ``done`` and most of its samples did not.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, NamedTuple

from .._log.records import StoredRun
from .._log.statuses import Status
from ..events import MessageAppended, StepStarted, ToolFinished
from .recording import same_numbers

FIELDS: Final = ("status", "answer", "tool_calls", "steps", "tokens")
_MISSING: Final = object()  # a field one typed result has and the other has not
STEPS_MOVED: Final = 0  # steps move past this many: any difference counts
TOKENS_MOVED: Final = 0.2  # tokens move past this share of the baseline's
NOT_REACHED: Final = "not_run"  # ``ToolFinished.refused`` of a call the run was closed before running


class Call(NamedTuple):
    """A tool call as the diff compares it: the tool's name and the arguments the model sent."""

    name: str
    args: Any

    def line(self) -> str:
        """``name {"arg": 1}``: one line of the tool-call diff (the arguments as sorted JSON)."""
        try:
            shown = json.dumps(same_numbers(self.args), sort_keys=True, ensure_ascii=False)
        except (TypeError, ValueError, RecursionError):
            shown = repr(self.args)
        return f"{self.name} {shown}"


@dataclass(frozen=True, slots=True)
class RunFigures:
    """One run as the diff sees it: how it ended, what it answered, the calls it made, and what it took."""

    run_id: str
    status: str
    answer: str | None
    error: str | None
    tool_calls: tuple[Call, ...]
    steps: int
    tokens: int
    cost_usd: float | None
    cost_known_usd: float
    duration_s: float | None
    output: Any = None  # the typed result (output_type=), as JSON

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "status": self.status, "answer": self.answer, "error": self.error,
                "output": self.output,
                "tool_calls": [{"name": c.name, "args": c.args} for c in self.tool_calls], "steps": self.steps,
                "tokens": self.tokens, "cost_usd": self.cost_usd, "cost_known_usd": self.cost_known_usd,
                "duration_s": self.duration_s}


def figures(run: StoredRun) -> RunFigures:
    """The figures of a stored ``run``; its tool calls are those its own replies asked for (not a history's).

    A call the run never got to is no tool call: one of a reply a stop cut off (a cost limit, a cut-off
    reply), one waiting for approval, or one handed over as the run was closed (``refused`` ``not_run``).
    A call refused for what it was (an unknown tool, bad arguments, a repeat, a denial) was answered.
    """
    answered = {fact.call_id for fact in run.facts if isinstance(fact, ToolFinished) and fact.refused != NOT_REACHED}
    calls: list[Call] = []
    stepping = False
    for fact in run.facts:
        if isinstance(fact, StepStarted):
            stepping = True
        elif stepping and isinstance(fact, MessageAppended) and fact.message["role"] == "assistant":
            calls.extend(Call(call["name"], call["args"]) for call in fact.message["tool_calls"]
                         if call["id"] in answered)
    took = (run.finished_at - run.started_at).total_seconds() if run.finished_at is not None else None
    return RunFigures(run.run_id, run.status, run.answer, run.error, tuple(calls), run.steps, run.tokens,
                      run.cost_usd, run.cost_known_usd, took, run.output)


class CaseVerdict(NamedTuple):
    """What differs in a case: the fields ``changed`` from the baseline, those ``unstable`` between samples."""

    changed: tuple[str, ...]
    unstable: tuple[str, ...]
    regressed: bool


def compare(baseline: RunFigures, samples: Sequence[RunFigures]) -> CaseVerdict:
    """The ``CaseVerdict`` of a baseline and its samples (see the module docstring)."""
    changed = tuple(name for name in FIELDS if any(_differ(name, baseline, baseline, s) for s in samples))
    unstable = tuple(name for name in FIELDS
                     if any(_differ(name, baseline, a, b) for i, a in enumerate(samples) for b in samples[i + 1:]))
    changed += _fields_apart(baseline.output, [(baseline, s) for s in samples])
    unstable += _fields_apart(baseline.output, [(a, b) for i, a in enumerate(samples) for b in samples[i + 1:]])
    not_done = sum(1 for s in samples if s.status != Status.DONE)
    regressed = baseline.status == Status.DONE and not_done * 2 > len(samples)
    return CaseVerdict(changed, unstable, regressed)


def _differ(name: str, baseline: RunFigures, a: RunFigures, b: RunFigures) -> bool:
    """Whether runs ``a`` and ``b`` differ in field ``name``; numbers move past a threshold of ``baseline``'s."""
    match name:
        case "status":
            return a.status != b.status
        case "answer":
            return _words(a.answer) != _words(b.answer)
        case "tool_calls":
            return [c.line() for c in a.tool_calls] != [c.line() for c in b.tool_calls]
        case "steps":
            return abs(a.steps - b.steps) > STEPS_MOVED
        case _:
            return abs(a.tokens - b.tokens) > TOKENS_MOVED * baseline.tokens


def _fields_apart(shape: Any, pairs: Sequence[tuple[RunFigures, RunFigures]]) -> tuple[str, ...]:
    """``output.<path>`` of each field of a typed result that differs in any pair, in the order first met."""
    if shape is None and all(a.output is None and b.output is None for a, b in pairs):
        return ()
    found: dict[str, None] = {}
    for a, b in pairs:
        found.update(dict.fromkeys(output_paths(a.output, b.output)))
    return tuple(found)


def output_paths(a: Any, b: Any, path: str = "output") -> list[str]:
    """The paths at which two JSON values differ: an object's fields by name, an array's items by index."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [found for key in [*a, *(k for k in b if k not in a)]
                for found in output_paths(a.get(key, _MISSING), b.get(key, _MISSING), f"{path}.{key}")]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [found for i, (x, y) in enumerate(zip(a, b, strict=True))
                for found in output_paths(x, y, f"{path}[{i}]")]
    return [] if same_numbers(a) == same_numbers(b) else [path]


def _words(text: str | None) -> str | None:
    return " ".join(text.split()) if text is not None else None


def calls_diff(baseline: Sequence[Call], candidate: Sequence[Call]) -> list[str]:
    """The tool calls of ``candidate`` against ``baseline``'s, a line each: ``-`` removed, ``+`` added, `` `` kept.

    Empty when they are the same. Arguments changed show as the old call removed and the new one added.
    """
    before, after = [c.line() for c in baseline], [c.line() for c in candidate]
    if before == after:
        return []
    lines: list[str] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=before, b=after, autojunk=False).get_opcodes():
        if tag == "equal":
            lines.extend(f"  {line}" for line in before[i1:i2])
            continue
        lines.extend(f"- {line}" for line in before[i1:i2])
        lines.extend(f"+ {line}" for line in after[j1:j2])
    return lines
