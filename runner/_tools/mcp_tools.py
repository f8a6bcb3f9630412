"""An MCP server's tools in a registry: ``ToolRegistry.add_mcp``'s work, with the annotations deciding durability.

A read-only tool (``readOnlyHint``) has no side effects; an idempotent one (``idempotentHint``, not read-only)
has side effects that running it again does not repeat; every other tool has side effects, since MCP's default
is destructive. So a crash never repeats a tool blindly and replay serves its recorded result instead.
``add_mcp``'s own arguments override the annotations. The SDK is imported here only when a server is added.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from .registry import Observation, Tool, ToolRegistry

if TYPE_CHECKING:
    from ..mcp.content import Listed
    from ..mcp.servers import McpServer

Choice = bool | Collection[str] | None  # None: the annotations decide; a bool: every tool; names: exactly those


class McpCall:
    """Calls one tool of an MCP server: what the registry runs, on any thread, for sync and async runs alike."""

    def __init__(self, server: McpServer, shown: str, name: str, timeout_s: float,
                 max_result_chars: int | None = None) -> None:
        self.server, self.shown, self.name, self.timeout_s = server, shown, name, timeout_s
        self.max_result_chars = max_result_chars

    def __call__(self, /, **args: Any) -> Observation:  # any argument name, ``self`` too
        from ..mcp.sessions import call_tool

        observed = call_tool(self.server, self.shown, self.name, args, self.timeout_s, self.max_result_chars)
        return Observation(observed)

    def __repr__(self) -> str:
        return f"<MCP tool {self.name!r} of {self.server.describe()}>"


def add_mcp(registry: ToolRegistry, server: McpServer, *, prefix: str, include: Collection[str] | None,
            exclude: Collection[str] | None, side_effects: Choice, needs_approval: Choice,
            timeout_s: float, max_result_chars: int | None, exclusive: Choice = False) -> list[Tool]:
    """Register the tools ``server`` lists (see ``ToolRegistry.add_mcp``); all or none of them."""
    from ..mcp.servers import HttpServer, StdioServer, checked_cap
    from ..mcp.sessions import list_tools

    if not isinstance(server, (StdioServer, HttpServer)):
        raise ValueError(f"add_mcp takes runner.mcp.stdio(...) or runner.mcp.http(...), got {type(server).__name__}")
    if not isinstance(prefix, str):
        raise ValueError(f"prefix must be a string, got {type(prefix).__name__}")
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or not timeout_s > 0:
        raise ValueError(f"timeout_s must be a positive number of seconds, got {timeout_s!r}")
    cap = checked_cap(max_result_chars)
    listed = list_tools(server)
    offered = [tool.name for tool in listed]
    for what, names in (("include", include), ("exclude", exclude), ("side_effects", side_effects),
                        ("needs_approval", needs_approval), ("exclusive", exclusive)):
        _check_names(server, what, names, offered)
    chosen = [tool for tool in listed if (include is None or tool.name in include)
              and (exclude is None or tool.name not in exclude)]
    trial, made = ToolRegistry(), []  # every tool checked before any joins ``registry``
    for tool in chosen:
        name = prefix + tool.name
        if name in registry:
            raise ValueError(f"tool {name!r} of {server.describe()} is already registered (prefix= tells them apart)")
        effects, idempotent = durability(tool, side_effects)
        try:
            fn = McpCall(server, name, tool.name, float(timeout_s), cap)
            made.append(trial.register(name, tool.description, as_2020_12(tool.parameters), fn,
                                       timeout_s=float(timeout_s),
                                       side_effects=effects, needs_approval=_chosen(needs_approval, tool.name, False),
                                       idempotent=idempotent, exclusive=_chosen(exclusive, tool.name, False)))
        except ValueError as exc:
            raise ValueError(f"{exc} ({server.describe()}; exclude={{{tool.name!r}}} leaves it out)") from None
    return [registry.register(one.name, one.description, one.parameters, one.fn, timeout_s=one.timeout_s,
                              side_effects=one.side_effects, needs_approval=one.needs_approval,
                              idempotent=one.idempotent, exclusive=one.exclusive) for one in made]


DRAFT_07 = frozenset({"http://json-schema.org/draft-07/schema#", "http://json-schema.org/draft-07/schema",
                      "https://json-schema.org/draft-07/schema#", "https://json-schema.org/draft-07/schema"})


def as_2020_12(parameters: Mapping[str, Any]) -> Mapping[str, Any]:
    """A tool's input schema, its draft-07 ``$schema`` dropped (what many MCP servers written in TypeScript emit).

    A tool's arguments are an object of named properties, where draft-07 and 2020-12 agree; the
    registry still refuses anything it cannot check (draft-07's array ``items``, say).
    """
    if parameters.get("$schema") not in DRAFT_07:
        return parameters
    return {key: value for key, value in parameters.items() if key != "$schema"}


class Durability(NamedTuple):
    """How a resume and a replay treat a tool's calls: whether it has side effects, and whether it is idempotent."""

    side_effects: bool
    idempotent: bool


def durability(tool: Listed, side_effects: Choice) -> Durability:
    """The durability of ``tool``: its annotations', unless ``side_effects`` says otherwise."""
    read_only = tool.read_only is True
    idempotent = not read_only and tool.idempotent is True
    effects = _chosen(side_effects, tool.name, not read_only)
    return Durability(effects, idempotent and effects)


def _chosen(choice: Choice, name: str, otherwise: bool) -> bool:
    """True or False for every tool; a set of names turns it on for those and leaves the others as they were.

    A set never turns side effects off: a tool left out of it keeps what its annotations say.
    """
    if choice is None:
        return otherwise
    if isinstance(choice, bool):
        return choice
    return name in choice or otherwise


def _check_names(server: McpServer, what: str, names: Choice, offered: list[str]) -> None:
    """A name the server does not list is a mistake (a typo would silently change nothing): ``ValueError``."""
    if names is None or isinstance(names, bool):
        return
    if isinstance(names, str):
        raise ValueError(f"{what} must be a collection of tool names, not the string {names!r}")
    unknown = sorted(set(names) - set(offered))
    if unknown:
        raise ValueError(f"{what} names {', '.join(map(repr, unknown))}, which {server.describe()} does not list "
                         f"(it lists {', '.join(map(repr, offered)) or 'no tools'})")
