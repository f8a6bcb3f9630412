"""A sub-agent as a tool (``ToolRegistry.add_agent``): what the parent's model is offered, and the child it runs.

A call of a sub-agent's tool starts a child run in the parent's store (``runner._run.children``), whose
id derives from the parent run's id and the call's, so a resumed parent finds its child instead of
starting another. The tool's function only refuses: the loop's drivers run the child instead.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from .._log.ids import child_run_id
from .._log.limits import Limits
from ..events import Event, RunResumed, RunStarted, ToolStarted
from .output import FINAL_RESULT, OutputSpec, output_spec

__all__ = ["PARAMETERS", "SUBAGENT", "SubAgent", "child_run_id", "make_agent", "stopped_observation", "subagent_calls"]

if TYPE_CHECKING:
    from ..messages import AnyModel, ToolTraits
    from .registry import ToolRegistry

SUBAGENT: Final = "subagent"  # the ``origin`` of a child run
PARAMETERS: Final[Mapping[str, Any]] = {
    "type": "object",
    "properties": {"task": {"type": "string", "description": "What the sub-agent is to do, in full: it sees "
                                                              "nothing of this conversation but this text."}},
    "required": ["task"],
    "additionalProperties": False,
}


@dataclass(frozen=True, slots=True)
class SubAgent:
    """A sub-agent: the child run's model, tools, system prompt, limits and typed result.

    ``limits`` are the child's own (None: ``Limits()``'s defaults); a child also gets at most
    what its parent has left of tokens, cost and time. ``output`` is its ``output_type``'s spec.
    """

    name: str
    model: AnyModel
    registry: ToolRegistry
    system: str
    limits: Limits | None = None
    output: OutputSpec | None = field(default=None, compare=False)
    output_type: Any = field(default=None, compare=False, repr=False)  # as given, for a resume to use again

    def __call__(self, task: str) -> str:
        """Refuse: a sub-agent's call is a child run, which only a run (``run_agent``, ``resume``...) can start."""
        raise RuntimeError(f"sub-agent {self.name!r} runs as a child run of a run (run_agent, arun_agent, resume, "
                           "the pool), not as a plain function")


def make_agent(name: str, model: AnyModel, registry: ToolRegistry, system: str, limits: Limits | None,
               output_type: Any) -> SubAgent:
    """The ``SubAgent`` ``add_agent`` registers; ``ValueError`` for options it cannot run with."""
    if limits is not None and not isinstance(limits, Limits):
        raise ValueError(f"sub-agent {name!r}: limits must be a Limits, got {type(limits).__name__}")
    if not isinstance(system, str) or not system:
        raise ValueError(f"sub-agent {name!r}: system must be a non-empty string")
    if not callable(model):
        raise ValueError(f"sub-agent {name!r}: model must be callable")
    from .registry import ToolRegistry

    if not isinstance(registry, ToolRegistry):
        raise ValueError(f"sub-agent {name!r}: registry must be a ToolRegistry, got {type(registry).__name__}")
    spec = None
    if output_type is not None:
        try:
            spec = output_spec(output_type)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"sub-agent {name!r}: output_type: {exc}") from None
        if FINAL_RESULT in registry:
            raise ValueError(f"sub-agent {name!r}: its registry has a tool named {FINAL_RESULT!r}, the name "
                             "output_type= gives the typed result: rename that tool")
    return SubAgent(name, model, registry, system, limits, spec, output_type)


def stopped_observation(name: str, status: str, error: str | None) -> str:
    """What the parent's model reads of a child that stopped without finishing."""
    return f"ERROR: sub-agent {name} stopped: {status}" + (f" ({error})" if error else "")


def subagent_calls(facts: Iterable[Event]) -> dict[str, str]:
    """The sub-agent calls a run's log started, call id to sub-agent name, in the order first started.

    A call is a sub-agent's when its tool's traits, as the log last recorded them, say ``subagent``.
    """
    traits: Mapping[str, ToolTraits] = {}
    found: dict[str, str] = {}
    for fact in facts:
        if isinstance(fact, RunStarted | RunResumed):
            traits = fact.tool_traits or {}
        elif isinstance(fact, ToolStarted):
            recorded = traits.get(fact.name)
            if recorded is not None and recorded.get("subagent", False):
                found.setdefault(fact.call_id, fact.name)
    return found
