"""Every budget a run is held to, and what values each limit takes.

``Limits`` is the one list of limits and their defaults; ``limit_rules`` reads each
limit's rule from its field, so a log, a fixture or a pool's submission is checked
against the same list the loop runs with.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import Field, asdict, dataclass, field, fields
from typing import Any, Final, NamedTuple

from .._jsontext import finite

__all__ = ["Limits", "LimitRule", "limit_names", "limit_rules"]


@dataclass(frozen=True, slots=True)
class Limits:
    """Every budget a run is held to (None means unlimited), and how many of a reply's calls run at once.

    The one list of limits and their defaults: the limit keywords of ``run_agent`` and the
    others, the fixture's limits and a pool's submitted limits all come from these fields.
    ``max_identical_calls`` is the repeat guard: that many identical consecutive calls run, the
    next is refused. ``max_parallel_tools`` stops nothing; it is here to be logged and kept
    with the run (docs/loop.md, "Calls run together").
    """

    # Each field's "doc" is its line in docs/loop.md's list of limits (docs/reference.py writes it).
    max_steps: int = field(default=8, metadata={"doc": "model calls the whole run may make"})
    token_budget: int = field(default=4000, metadata={
        "doc": "tokens the whole run may spend; checked before each model call, with the next prompt's estimate"})
    max_tool_calls: int | None = field(default=None, metadata={"doc": "tool calls the whole run may run"})
    timeout_s: float | None = field(default=None, metadata={
        "doc": "seconds the whole run may take, held even when the model or a tool never returns"})
    max_context_chars: int | None = field(default=None, metadata={
        "doc": "characters the messages may hold (contents and calls' arguments) before the next model call"})
    max_output_chars: int | None = field(default=None, metadata={
        "doc": "characters of one reply (its text and its calls' arguments as JSON); a longer one's calls do not run"})
    max_result_chars: int | None = field(default=None, metadata={
        "doc": "characters of one tool result; a longer one is cut, with a marker"})
    max_identical_calls: int = field(default=2, metadata={
        "minimum": 1, "doc": "identical consecutive calls that run; the next is refused, and told to change course"})
    max_cost_usd: float | None = field(default=None, metadata={
        "doc": "USD the run's known cost may reach (its model calls at runner.prices' prices)"})
    max_parallel_tools: int = field(default=8, metadata={
        "minimum": 1, "doc": "how many of a reply's tool calls run at once; it stops nothing"})
    max_output_retries: int = field(default=2, metadata={
        "doc": "failed attempts at the typed result (output_type) the run allows; the next ends it invalid_output"})

    def __post_init__(self) -> None:
        for rule in limit_rules():
            rule.check(getattr(self, rule.name))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, recorded: Mapping[str, Any]) -> Limits:
        """The limits a log or a fixture recorded: a missing one takes its default, an unknown one is ignored."""
        return cls(**{name: recorded[name] for name in limit_names() if name in recorded})


class LimitRule(NamedTuple):
    """What values one limit takes, read from its field in ``Limits``.

    A count is a non-negative integer (at least ``minimum``), a duration or an amount of USD
    (``seconds``: a ``float`` limit) a positive number; ``optional`` limits also take None, for unlimited.
    """

    name: str
    seconds: bool
    optional: bool
    minimum: int

    def check(self, value: object) -> None:
        """Raise ``ValueError`` (naming the limit) unless ``value`` is one this limit takes."""
        if value is None and self.optional:
            return
        unlimited = " or None" if self.optional else ""
        if self.seconds:
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise ValueError(f"{self.name} must be positive{unlimited}, got {value!r}")
            if not finite(value):  # inf is not JSON, and 10**400 overflows the first float it meets
                shown = repr(value) if isinstance(value, float) else "an int too large for a float"
                raise ValueError(f"{self.name} must be finite{unlimited}, got {shown}")
            return
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{self.name} must be a non-negative integer{unlimited}, got {value!r}")
        if value < self.minimum:
            raise ValueError(f"{self.name} must be at least {self.minimum}")


def _rule(limit: Field[Any]) -> LimitRule:
    kind = str(limit.type)  # the annotation's text (``from __future__ import annotations``)
    if kind not in ("int", "int | None", "float | None"):
        raise TypeError(f"Limits.{limit.name}: a limit is int, int | None or float | None, not {kind}")
    return LimitRule(limit.name, kind.startswith("float"), kind.endswith("| None"), limit.metadata.get("minimum", 0))


_RULES: Final = tuple(_rule(limit) for limit in fields(Limits))
_NAMES: Final = tuple(rule.name for rule in _RULES)


def limit_rules() -> tuple[LimitRule, ...]:
    """The rule of every limit, in the order of ``Limits``' fields."""
    return _RULES


def limit_names() -> tuple[str, ...]:
    """The name of every limit, in the order of ``Limits``' fields (each is also a keyword of ``run_agent``)."""
    return _NAMES
