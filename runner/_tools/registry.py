"""The tool registry: what the model is shown, and the allow-list it is held to.

``execute`` never raises: every way a call can go wrong becomes an ``ERROR:``
observation that says what a valid call looks like, because the model can often
repair its own mistake if told precisely what it was.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar, overload

from .. import _jsontext
from .._text import describe_exception
from ..messages import DEFAULT_SYSTEM, DEFAULT_TRAITS, ToolSpec, ToolTraits
from .schema import ArgsCheck, args_checker, check_schema

F = TypeVar("F", bound=Callable[..., Any])

if TYPE_CHECKING:
    from .._log.limits import Limits
    from ..mcp.servers import McpServer
    from ..messages import AnyModel
    from .agents import SubAgent


class Observation(str):
    """A tool's result that is the observation's very text, not encoded as JSON (what an MCP tool returns)."""


@dataclass(frozen=True, slots=True)
class Tool:
    """Hold a registered tool and its per-tool options.

    ``timeout_s`` bounds one call; ``side_effects`` marks a tool that writes somewhere (never re-run blindly).
    ``needs_approval`` makes the loop ask ``approve``, or wait for ``resume(decisions=...)``, before each call.
    ``idempotency_key`` names a parameter given a key stable across one call's attempts; the model never sees it;
    ``idempotent`` says a side effect happens once however often a call runs, so a call in doubt runs again;
    ``exclusive``, that a call never runs beside another of its reply; ``agent``, a sub-agent's (``add_agent``).
    """

    name: str
    description: str
    parameters: dict[str, Any]
    fn: Callable[..., Any]
    timeout_s: float | None = None
    side_effects: bool = False
    needs_approval: bool = False
    idempotency_key: str | None = None
    validate: Callable[[Mapping[str, Any]], str | None] | None = field(default=None, repr=False, compare=False)
    check_formats: bool = True
    idempotent: bool = False
    exclusive: bool = False
    agent: SubAgent | None = field(default=None, repr=False, compare=False)

    def spec(self) -> ToolSpec:
        return {"name": self.name, "description": self.description, "parameters": self.parameters}

    def traits(self) -> ToolTraits:
        """Its side effects, approval, idempotency key, idempotence and exclusiveness, as the log records them."""
        traits: ToolTraits = {"side_effects": self.side_effects, "needs_approval": self.needs_approval,
                              "idempotency_key": self.idempotency_key}
        if self.idempotent:
            traits["idempotent"] = True
        if self.exclusive:
            traits["exclusive"] = True
        if self.agent is not None:
            traits["subagent"] = True
        return traits


class ToolRegistry:
    """Tools by exact name. Only names registered here can ever run."""

    def __init__(self) -> None:
        self._tools: dict[str, Tool] = {}
        self._checks: dict[str, ArgsCheck] = {}  # each tool's schema check, prepared at register

    def register(
        self,
        name: str,
        description: str,
        parameters: Mapping[str, Any],
        fn: Callable[..., Any],
        *,
        timeout_s: float | None = None,
        side_effects: bool = False,
        needs_approval: bool = False,
        idempotency_key: str | None = None,
        idempotent: bool = False,
        exclusive: bool = False,
    ) -> Tool:
        """Add a tool after checking its schema; raises ``ValueError`` on any mistake.

        ``exclusive=True``: a call of it waits for the reply's calls in flight, and none starts until it ends.
        """
        self._check_new(name, fn, timeout_s)
        tool = Tool(name, description, dict(parameters), fn, timeout_s, side_effects, needs_approval, idempotency_key,
                    idempotent=idempotent, exclusive=exclusive)
        return self._add(tool)

    @overload
    def tool(self, fn: F, /) -> F: ...

    @overload
    def tool(self, fn: None = None, /, *, name: str | None = None, description: str | None = None,
             timeout_s: float | None = None, side_effects: bool = False, needs_approval: bool = False,
             idempotency_key: str | None = None, idempotent: bool = False,
             exclusive: bool = False) -> Callable[[F], F]: ...

    def tool(self, fn: F | None = None, /, *, name: str | None = None, description: str | None = None,
             timeout_s: float | None = None, side_effects: bool = False, needs_approval: bool = False,
             idempotency_key: str | None = None, idempotent: bool = False,
             exclusive: bool = False) -> F | Callable[[F], F]:
        """Register a typed function as a tool: ``@registry.tool`` or ``@registry.tool(side_effects=True)``.

        The schema comes from the type hints (through Pydantic), the description from the
        docstring's first paragraph (or ``description=``), each parameter's from a
        Google-style ``Args:`` section or ``Annotated[..., Field(description=...)]``.
        Parameters without defaults are required; the ``idempotency_key`` parameter is
        left out of the schema. The function itself is returned unchanged.
        """

        def add(fn: F) -> F:
            tool_name = name if name is not None else getattr(fn, "__name__", "")
            self._check_new(tool_name, fn, timeout_s)
            from .functions import describe

            try:
                made = describe(fn, tool_name, idempotency_key)
            except ValueError as exc:
                raise ValueError(f"tool {tool_name!r}: {exc}") from None
            text = made.description if description is None else description
            self._add(Tool(tool_name, text, made.parameters, made.fn, timeout_s, side_effects, needs_approval,
                           idempotency_key, made.check, check_formats=False, idempotent=idempotent,
                           exclusive=exclusive))
            return fn

        return add if fn is None else add(fn)

    def add_mcp(self, server: McpServer, *, prefix: str = "", include: Collection[str] | None = None,
                exclude: Collection[str] | None = None, side_effects: bool | Collection[str] | None = None,
                needs_approval: bool | Collection[str] | None = None, timeout_s: float = 60.0,
                max_result_chars: int | None = 100_000,  # runner.mcp.DEFAULT_RESULT_CHARS
                exclusive: bool | Collection[str] = False) -> list[Tool]:
        """Register the tools an MCP server lists, named ``prefix`` + their name; the tools added are returned.

        Their annotations decide side effects (read-only: none; idempotent: some, run again after a crash; else:
        some). ``side_effects``, ``needs_approval`` and ``exclusive`` override: True or False for every tool, or
        the names of exactly the tools they hold for. ``include``/``exclude`` pick tools by the server's names;
        each call has ``timeout_s``, its result cut past ``max_result_chars`` (None: no cap).
        ``runner.mcp.McpError`` when the server cannot be reached.
        """
        from .mcp_tools import add_mcp

        return add_mcp(self, server, prefix=prefix, include=include, exclude=exclude, side_effects=side_effects,
                       needs_approval=needs_approval, timeout_s=timeout_s, max_result_chars=max_result_chars,
                       exclusive=exclusive)

    def add_agent(self, name: str, *, model: AnyModel, registry: ToolRegistry, system: str = DEFAULT_SYSTEM,
                  description: str, limits: Limits | None = None, output_type: Any = None) -> Tool:
        """Register sub-agent ``name``: a tool taking ``{"task": string}`` whose call runs a child run.

        The child has ``model``, the tools of ``registry``, ``system`` and its own ``limits``, and ends
        with ``output_type``'s typed result if one is given; the parent's model reads its final answer
        (the result's JSON). The child is a run of its own in the parent's store, found again on resume;
        the tree's tokens, cost and time count against the parent's limits (docs/subagents.md).
        ``ValueError`` on any mistake.
        """
        from .agents import PARAMETERS, make_agent

        if not isinstance(description, str) or not description.strip():
            raise ValueError(f"sub-agent {name!r}: description must be a non-empty string")
        agent = make_agent(name, model, registry, system, limits, output_type)
        self._check_new(name, agent, None)
        return self._add(Tool(name, description, dict(PARAMETERS), agent, agent=agent))

    def _check_new(self, name: str, fn: object, timeout_s: float | None) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError("tool name must be a non-empty string")
        if name in self._tools:
            raise ValueError(f"tool {name!r} is already registered")
        if not callable(fn):
            raise ValueError(f"tool {name!r}: fn must be callable")
        if timeout_s is not None:
            if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or not timeout_s > 0:
                raise ValueError(f"tool {name!r}: timeout_s must be positive, got {timeout_s!r}")
            if not _jsontext.finite(timeout_s):  # 10**400 would overflow the first clock it is added to
                raise ValueError(f"tool {name!r}: timeout_s must be finite (None: no timeout)")

    def _add(self, tool: Tool) -> Tool:
        name, params = tool.name, tool.parameters
        try:
            check_schema(params, formats=tool.check_formats)
        except ValueError as exc:
            raise ValueError(f"tool {name!r}: {exc}") from None
        if params.get("type", "object") != "object":
            raise ValueError(f"tool {name!r}: parameters must have type 'object'")
        if tool.idempotency_key is not None:
            _check_key_parameter(name, tool.idempotency_key, params, tool.fn)
        self._checks[name] = args_checker(params, formats=tool.check_formats)
        self._tools[name] = tool
        return tool

    def specs(self) -> list[ToolSpec]:
        return [tool.spec() for tool in self._tools.values()]

    def traits(self) -> dict[str, ToolTraits]:
        """The traits of each tool that has any (``DEFAULT_TRAITS`` for the others), by name."""
        return {name: tool.traits() for name, tool in self._tools.items() if tool.traits() != DEFAULT_TRAITS}

    def names(self) -> list[str]:
        return sorted(self._tools)

    def agents(self) -> list[Tool]:
        """The sub-agents' tools (``add_agent``), in the order registered."""
        return [tool for tool in self._tools.values() if tool.agent is not None]

    def get(self, name: object) -> Tool | None:
        """Exact lookup: attribute names, methods and "" are never tools."""
        return self._tools.get(name) if isinstance(name, str) else None

    def __contains__(self, name: object) -> bool:
        return self.get(name) is not None

    def __len__(self) -> int:
        return len(self._tools)

    def check(self, name: object, args: Any) -> str | None:
        """The ``ERROR:`` observation for a call that must not run, else None."""
        tool = self.get(name)
        if tool is None:
            return f"ERROR: unknown tool {name!r}. Available tools: {self.names()}"
        problem = self._checks[tool.name](args)
        if problem is None and tool.validate is not None:
            problem = tool.validate(args)
        if problem is not None:
            expected = json.dumps(tool.parameters.get("properties", {}))
            return f"ERROR: {problem}. {tool.name} expects {expected}"
        return None

    def execute(self, name: str, args: Any) -> str:
        """Check and run one call on this thread; never raises."""
        rejected = self.check(name, args)
        if rejected is not None:
            return rejected
        tool = self._tools[name]
        try:
            value = tool.fn(**args)
        except Exception as exc:
            return failure_observation(name, exc)
        return result_observation(name, value)


def _check_key_parameter(name: str, key: str, params: Mapping[str, Any], fn: Callable[..., Any]) -> None:
    """The key argument must be one the function takes and one the model cannot send."""
    if not isinstance(key, str) or not key.isidentifier():
        raise ValueError(f"tool {name!r}: idempotency_key must be a parameter name, got {key!r}")
    if key in (params.get("properties") or {}):
        raise ValueError(f"tool {name!r}: idempotency_key {key!r} is also in the schema; "
                         "the model must not be able to send it")
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return  # a builtin or C callable: nothing to check
    takes = any(p.kind is p.VAR_KEYWORD for p in signature.parameters.values()) or (
        key in signature.parameters and signature.parameters[key].kind is not inspect.Parameter.POSITIONAL_ONLY)
    if not takes:
        raise ValueError(f"tool {name!r}: fn takes no keyword argument {key!r} (its idempotency_key)")


def result_observation(name: str, value: Any) -> str:
    """``json.dumps`` of a tool's result (an ``Observation`` as it is), or an ``ERROR:`` if it is not valid JSON."""
    if isinstance(value, Observation):
        return str(value)
    try:
        return _jsontext.strict(value)
    except Exception as exc:  # a dict subclass's own items() may raise anything
        return f"ERROR: {name} returned a value that is not JSON-serialisable: {describe_exception(exc)}"


def failure_observation(name: str, exc: BaseException) -> str:
    return f"ERROR: {name} failed: {describe_exception(exc)}"


def timeout_observation(name: str, timeout_s: float) -> str:
    return f"ERROR: {name} timed out after {timeout_s:g} s"
