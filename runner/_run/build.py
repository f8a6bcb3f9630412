"""The keyword options every way of running an agent shares, and the core they build.

Users pass one flat ``RunOptions``; it is split here, once, into the run's ``Limits``
(``run_limits``) and its ``RunWiring`` (``wiring_of``), so ``run_agent``, ``arun_agent``,
``resume``, ``fork``, ``follow_up``, ``replay`` and the pool build their cores alike.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from enum import Enum
from typing import TYPE_CHECKING, Any, Final, TypedDict, Unpack

from .._log.decisions import decider
from .._log.facts import OutputSchema
from .._log.limits import Limits, limit_names
from .._log.state import RunState
from .._loop.calls import Approver
from .._loop.core import AgentCore
from .._loop.stream import DELTA_EVERY_S, MAX_DELTA_EVERY_S, Listen, Streaming
from .._loop.waits import Cancel
from .._tools.output import FINAL_RESULT, OutputSpec, output_by_ref, output_from_log, output_spec
from .._tools.registry import ToolRegistry
from ..errors import PriceUnknown
from ..events import Event
from ..messages import AnyModel, McpRef, check_mcp_refs
from ..prices import Costing, Price, PriceBook, price_book
from ..recorder import Recorder
from .cancels import StoreCancel
from .children import TreeChildren
from .identity import checked_run_id, model_identity
from .opening import Lineage, new_run_opening
from .wiring import RunWiring, build_recorder, late_sink

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

    from ..store import RunStore
    from ..tracing.live import TraceLink


class NotGiven(Enum):
    """The default of ``max_steps``/``token_budget`` when left out: ``limits=`` or ``Limits``' default applies."""

    NOT_GIVEN = "NOT_GIVEN"

    def __repr__(self) -> str:
        return self.value


NOT_GIVEN: Final = NotGiven.NOT_GIVEN


class ContinueOptions(TypedDict, total=False):
    """Hold the options of a run that continues a stored one with ``resume``, ``fork`` or ``follow_up``.

    The store and the run id come from the stored run. ``limits`` is a whole ``Limits``, or each limit keyword
    replaces one (not both). ``cancel`` is any object with ``is_set()``. ``tools_ref`` names where the registry
    comes from (``"myapp.tools:registry"``), ``mcp_servers`` the MCP servers whose tools were added beside it.
    ``decided_by`` names who runs it, logged in ``run_started`` and with ``approve``'s decisions (default: the
    OS user). ``prices`` adds or overrides prices by model name (``{"my-model": {"input_mtok": 0.3, ...}}``).
    """

    limits: Limits | None
    max_tool_calls: int | None
    max_cost_usd: float | None
    timeout_s: float | None
    max_context_chars: int | None
    max_output_chars: int | None
    max_result_chars: int | None
    max_identical_calls: int
    cancel: Cancel | None
    approve: Approver | None
    decided_by: str | None
    recorder: Recorder | None
    agent_name: str | None
    tools_ref: str | None
    mcp_servers: Sequence[McpRef] | None
    labels: Mapping[str, str] | None
    tracer_provider: TracerProvider | None
    record_content: bool
    prices: PriceBook | Mapping[str, Price | Mapping[str, float]] | None
    max_parallel_tools: int
    max_output_retries: int
    output_type: Any  # the typed result: a type, a JSON Schema dict, or "module:attr" (docs/output.md)
    output_mode: str  # "tool" (final_result, the default) or "native" (the provider's structured output)
    stream: bool  # consume a model that streams piece by piece, logging model_delta facts (docs/streaming.md)
    delta_interval_s: float  # how often a streamed reply's text is committed (0 < s <= 0.5; default 0.2)


class RunOptions(ContinueOptions, total=False):
    """Everything beyond task, model, registry, system, max_steps and token_budget."""

    run_id: str | None
    store: RunStore | None


def build_core(
    task: str, model: AnyModel, registry: ToolRegistry, system: str, max_steps: int | NotGiven,
    token_budget: int | NotGiven, *, link: Lineage | None = None, listen: Listen | None = None,
    **options: Unpack[RunOptions],
) -> AgentCore:
    """The core of a new run: it opens with ``run_started`` and the system and user messages.

    ``link`` makes it a linked run (a rerun's candidate names its baseline), which may open with other messages;
    ``listen`` hears each piece of a streamed reply as it comes (``stream_agent``).
    """
    given = {"max_steps": max_steps, "token_budget": token_budget}
    limits = run_limits({}, options, {name: value for name, value in given.items() if value is not NOT_GIVEN})
    run_id = checked_run_id(options.get("run_id"))
    spec = output_of(options, registry)
    first = new_run_opening(run_id, task, system, limits, registry, model, options.get("agent_name"),
                            options.get("labels"), options.get("tools_ref"), options.get("mcp_servers"), link=link,
                            by=options.get("decided_by") or decider(), output=spec)
    return core_for(model, registry, run_id, limits, first, None, wiring_of(options, options.get("store"), listen),
                    output_spec=spec)


def output_of(options: ContinueOptions, registry: ToolRegistry, recorded: OutputSchema | None = None
              ) -> OutputSpec | None:
    """The typed result ``output_type=`` asks for (``recorded``, a stored run's, when none is given), or None.

    ``ValueError`` for a type no JSON Schema comes from, or a registry with its own ``final_result`` tool.
    """
    given, mode = options.get("output_type"), options.get("output_mode")
    if given is None:
        if mode is not None and recorded is None:
            raise ValueError("output_mode needs an output_type")
        return None if recorded is None else output_from_log(recorded).with_mode(mode or recorded["mode"])
    spec = output_by_ref(given, mode or "tool") if isinstance(given, str) else output_spec(given, mode or "tool")
    if spec.mode == "tool" and FINAL_RESULT in registry:
        raise ValueError(f"the registry has a tool named {FINAL_RESULT!r}, the name output_type= gives the model "
                         "for the typed result: rename that tool")
    return spec


def check_options(options: Mapping[str, Any]) -> None:
    """``TypeError`` for an option no run takes, or one of the wrong kind (before anything is recorded)."""
    unknown = set(options) - set(RunOptions.__annotations__)
    if unknown:
        raise TypeError(f"unknown run option(s): {', '.join(sorted(unknown))}")
    limits = options.get("limits")
    if limits is not None and not isinstance(limits, Limits):
        raise TypeError(f"limits must be a Limits, got {type(limits).__name__}")
    decided_by = options.get("decided_by")
    if decided_by is not None and (not isinstance(decided_by, str) or not decided_by.strip()):
        raise TypeError(f"decided_by must be a non-empty string naming who owns approve, got {decided_by!r}")
    recorder = options.get("recorder")
    if recorder is not None and not all(callable(getattr(recorder, name, None)) for name in ("record", "sync")):
        raise TypeError(f"recorder must have record(event) and sync() methods, got {type(recorder).__name__}")
    tools_ref = options.get("tools_ref")
    if tools_ref is not None and not isinstance(tools_ref, str):
        raise TypeError(f"tools_ref must be a string like 'myapp.tools:registry', got {type(tools_ref).__name__}")
    mcp_servers = options.get("mcp_servers")
    check_mcp_refs(None if mcp_servers is None else list(mcp_servers))
    every = options.get("delta_interval_s", DELTA_EVERY_S)
    if isinstance(every, bool) or not isinstance(every, (int, float)) or not 0 < every <= MAX_DELTA_EVERY_S:
        raise TypeError(f"delta_interval_s must be a number of seconds above 0 and at most {MAX_DELTA_EVERY_S:g}, "
                        f"got {every!r}")


def run_limits(base: Mapping[str, Any], options: ContinueOptions, given: Mapping[str, object]) -> Limits:
    """The limits a run gets: ``limits=`` as it stands, or ``base`` with each limit keyword given replacing one.

    ``base`` is what the run starts from (nothing: the defaults; a stored run's or a
    fixture's recorded limits), ``given`` the limits passed as parameters rather than
    options (``max_steps``, ``token_budget``). A limit given both in ``limits=`` and as
    a keyword is a ``TypeError``: ``limits=`` already sets every limit.
    """
    check_options(options)
    flat = {name: value for name, value in options.items() if name in limit_names()}
    flat.update(given)
    chosen = options.get("limits")
    if chosen is None:
        return Limits.from_dict({**base, **flat})
    if flat:
        names = ", ".join(name for name in limit_names() if name in flat)
        raise TypeError(f"{names} given both as a keyword and in limits=, which sets every limit: give "
                        f"{'it' if len(flat) == 1 else 'them'} once (dataclasses.replace(limits, ...) changes one)")
    return chosen


def wiring_of(options: ContinueOptions, store: RunStore | None = None, listen: Listen | None = None) -> RunWiring:
    """The wiring ``options`` ask for; ``store`` is the run's (a continued run's is its parent's).

    ``listen``: streaming on, with each piece of a reply told to it as it comes.
    """
    given = options.get("prices")
    streaming = None
    if options.get("stream", False) or listen is not None:
        streaming = Streaming(options.get("delta_interval_s", DELTA_EVERY_S), listen)
    return RunWiring(store, options.get("tracer_provider"), options.get("record_content", False),
                     options.get("recorder"), options.get("cancel"), options.get("approve"),
                     price_book(given) if given is not None else None, decided_by=options.get("decided_by"),
                     streaming=streaming)


def core_for(model: AnyModel, registry: ToolRegistry, run_id: str, limits: Limits, first: Sequence[Event],
             state: RunState | None, wiring: RunWiring, link: TraceLink | None = None,
             output_spec: OutputSpec | None = None) -> AgentCore:
    """A core on the recorders ``wiring`` asks for, starting from ``state`` with the facts ``first``.

    A stored run watches its store's cancel requests (``cancels``), beside the caller's own ``cancel``.
    ``output_spec``: the typed result the run ends with (in ``native`` mode the model is bound to its schema).
    """
    fresh = state is None or not state.events  # a new run: nobody can have asked to cancel it yet
    state = state if state is not None else RunState(run_id=run_id)
    costs = wiring.costs if wiring.costs is not None else costing(model, wiring.prices, limits)
    if output_spec is not None and output_spec.mode == "native":
        model = native_model(model, output_spec)
    cancel, watch = wiring.cancel, None
    if wiring.store is not None and wiring.watches_cancels:
        if isinstance(cancel, StoreCancel) and cancel.store is wiring.store and cancel.run_id == run_id:
            cancel, watch = None, cancel  # the pool's and the console's own: it is the watch
        else:
            watch = StoreCancel(wiring.store, run_id, looked=fresh, above=wiring.above)
    approve = wiring.approve
    decided_by = (wiring.decided_by or decider()) if approve is not None else ""
    recorder, tracing = build_recorder(wiring, state, link, watch)
    children = TreeChildren(wiring, tracing) if registry.agents() else None
    return AgentCore(model, registry, run_id=run_id, limits=limits, recorder=recorder, opening=first, state=state,
                     cancel=cancel, watch=watch, approve=approve, decided_by=decided_by, costs=costs,
                     checkpoints=wiring.checkpoints, late=late_sink(wiring.store, run_id), output_spec=output_spec,
                     children=children, streaming=wiring.streaming)


def native_model(model: AnyModel, spec: OutputSpec) -> AnyModel:
    """``model`` asked for the provider's structured output in ``spec``'s schema (``output_mode="native"``)."""
    bind = getattr(model, "with_output_schema", None)
    if not callable(bind):
        raise ValueError(f"output_mode='native' needs a model with structured output (runner.adapters' OpenAI "
                         f"models); {type(model).__name__} has none: leave output_mode out to use {FINAL_RESULT}")
    bound: AnyModel = bind(spec.schema, FINAL_RESULT)
    return bound


def costing(model: AnyModel, prices: PriceBook | None, limits: Limits) -> Costing:
    """How the run's model calls are costed: by ``prices`` (default: genai-prices) for the model's name.

    ``PriceUnknown`` for a ``max_cost_usd`` budget on a model with no price: a budget that
    cannot be counted is refused before the run starts.
    """
    book = prices if prices is not None else PriceBook()
    name, provider = model_identity(model)
    if limits.max_cost_usd is not None and not book.knows(provider, name):
        raise PriceUnknown(f"no price for model {name!r}" + (f" ({provider})" if provider else "")
                           + f", so max_cost_usd={limits.max_cost_usd:g} cannot be counted: give its price with "
                           f"prices={{{name!r}: {{'input_mtok': ..., 'output_mtok': ...}}}} (--prices FILE)")
    return functools.partial(book.cost, provider, name)
