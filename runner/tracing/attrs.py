"""Span names, attributes and statuses, defined once for live and rebuilt spans.

The live recorder and ``rebuild_spans`` call the same functions with the same facts,
so a live trace and one rebuilt from the log cannot drift apart.
Names follow the OpenTelemetry GenAI conventions, with OpenInference attributes beside them.
Token usage goes on chat spans only, and only a provider's own counts are usage.
Text from a model, a tool or a caller reaches a span only when content is recorded.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from opentelemetry import trace
from opentelemetry.trace import SpanKind, StatusCode
from opentelemetry.util.types import AttributeValue

from .._log.statuses import Status
from . import classify

Attrs = dict[str, AttributeValue]

SCOPE: Final = "runner"

OPERATION: Final = "gen_ai.operation.name"
PROVIDER: Final = "gen_ai.provider.name"
REQUEST_MODEL: Final = "gen_ai.request.model"
AGENT_NAME: Final = "gen_ai.agent.name"
CONVERSATION_ID: Final = "gen_ai.conversation.id"
TOOL_NAME: Final = "gen_ai.tool.name"
TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
TOOL_TYPE: Final = "gen_ai.tool.type"
INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
INPUT_MESSAGES: Final = "gen_ai.input.messages"
OUTPUT_MESSAGES: Final = "gen_ai.output.messages"
TOOL_ARGUMENTS: Final = "gen_ai.tool.call.arguments"
TOOL_RESULT: Final = "gen_ai.tool.call.result"
# The agent-as-a-tool refinement of execute_tool (semantic-conventions-genai, gen-ai-agent-spans.md#agent-as-a-tool)
TRANSFER_MODE: Final = "gen_ai.transfer.mode"
TRANSFER_TARGET: Final = "gen_ai.transfer.target.name"
RETURN_TO_CALLER: Final = "return_to_caller"  # the caller goes on with the sub-agent's answer (else pass_control)
ERROR_TYPE: Final = "error.type"
SERVICE_NAME: Final = "service.name"  # a resource attribute, not a span's

RUN_ID: Final = "runner.run_id"
STEP: Final = "runner.step"
STATUS: Final = "runner.status"
STOP_REASON: Final = "runner.stop_reason"
USAGE_ESTIMATED: Final = "runner.usage.estimated"
ESTIMATED_INPUT_TOKENS: Final = "runner.usage.estimated_input_tokens"
ESTIMATED_OUTPUT_TOKENS: Final = "runner.usage.estimated_output_tokens"
TOOL_RAN: Final = "runner.tool.ran"
RESUMED_FROM: Final = "runner.resumed_from"
TIME_TO_FIRST_CHUNK: Final = "gen_ai.response.time_to_first_chunk"  # a streamed reply's, in seconds
PARENT_RUN_ID: Final = "runner.parent_run_id"
CHILD_RUN_ID: Final = "runner.child_run_id"
AWAITING_APPROVAL: Final = "runner.tool.awaiting_approval"  # a call that waits for a person's decision
DECISION: Final = "runner.approval.decision"  # approved or denied
DECIDED_BY: Final = "runner.approval.decided_by"
DENIED_BECAUSE: Final = "runner.approval.reason"  # with content on: it may quote the call
ORIGIN: Final = "runner.origin"  # fork, follow_up or subagent
FORKED_AT_STEP: Final = "runner.forked_at_step"
IN_DOUBT: Final = "runner.tool.in_doubt"  # a call its run's end cut short: whether it took effect is unknown
CUT_SHORT: Final = "cut_short"  # its error type and status description

# OpenInference (https://github.com/Arize-ai/openinference, spec/semantic_conventions.md)
OI_KIND: Final = "openinference.span.kind"
OI_PROJECT: Final = "openinference.project.name"  # a resource attribute, not a span's
INPUT_VALUE: Final = "input.value"
INPUT_MIME: Final = "input.mime_type"
OUTPUT_VALUE: Final = "output.value"
OUTPUT_MIME: Final = "output.mime_type"
OI_TOKENS_PROMPT: Final = "llm.token_count.prompt"
OI_TOKENS_COMPLETION: Final = "llm.token_count.completion"
OI_TOKENS_TOTAL: Final = "llm.token_count.total"
OI_COST_PROMPT: Final = "llm.cost.prompt"  # USD, as the call's model_called fact recorded it
OI_COST_COMPLETION: Final = "llm.cost.completion"
OI_COST_TOTAL: Final = "llm.cost.total"
COST_DIGITS: Final = 10  # decimals of USD a cost attribute keeps: 1e-10 is far below any call's price
OI_MODEL_NAME: Final = "llm.model_name"
OI_PROVIDER: Final = "llm.provider"
INVOCATION_PARAMETERS: Final = "llm.invocation_parameters"
OI_TOOL_NAME: Final = "tool.name"
OI_TOOL_DESCRIPTION: Final = "tool.description"
OI_TOOL_SCHEMA: Final = "tool.json_schema"  # the OpenAI tool shape, as under llm.tools.N (ToolAttributes)
OI_TOOL_PARAMETERS: Final = "tool.parameters"  # the parameters' JSON Schema alone: what Phoenix's tool card shows
OI_AGENT_NAME: Final = "agent.name"
SESSION_ID: Final = "session.id"
METADATA: Final = "metadata"
TAGS: Final = "tag.tags"
TEXT: Final = "text/plain"
JSON: Final = "application/json"

# Ends that are not failures: the answer, a wait for a person, and the stops the caller set
# (a budget, the deadline, a cancel), which ``resume`` continues from by design. A span
# cannot be changed once sent, so a live root that stops there must not say ERROR: the
# run may well go on and end ``done``. ``runner.status`` names the stop.
NOT_FAILURES: Final = frozenset({
    Status.DONE, Status.AWAITING_APPROVAL, Status.STEP_LIMIT, Status.TOKEN_BUDGET, Status.TOOL_BUDGET,
    Status.CONTEXT_BUDGET, Status.OUTPUT_BUDGET, Status.DEADLINE, Status.CANCELLED, Status.COST_LIMIT})

KIND_RUN: Final = SpanKind.INTERNAL
KIND_STEP: Final = SpanKind.INTERNAL
KIND_CHAT: Final = SpanKind.CLIENT
KIND_TOOL: Final = SpanKind.INTERNAL

UNSET: Final = trace.Status(StatusCode.UNSET)


def run_name(agent_name: str | None) -> str:
    return f"invoke_agent {agent_name}" if agent_name else "invoke_agent"


def resumed_name(agent_name: str | None, reason: str) -> str:
    """A resumed part's root: named for why the run was resumed, so a trace list tells the parts apart."""
    return f"{run_name(agent_name)} (resumed: {reason})"


def fork_name(agent_name: str | None, at_step: int | None) -> str:
    """A fork's root: named so, since it opens with its parent's question and shares its session."""
    return f"{run_name(agent_name)} (fork at step {at_step})"


def origin(how: str | None, at_step: int | None) -> Attrs:
    """How a linked run came about, on its root: ``fork`` (and where), ``follow_up`` or ``subagent``."""
    if not how:
        return {}
    found: Attrs = {ORIGIN: how}
    if at_step is not None:
        found[FORKED_AT_STEP] = at_step
    return found


def decision(approved: bool, decided_by: str, reason: str | None) -> Attrs:
    """The decision on a call that waited for approval, for the span of the call it let run (or refused)."""
    found: Attrs = {DECISION: "approved" if approved else "denied", DECIDED_BY: decided_by}
    if reason:
        found[DENIED_BECAUSE] = reason
    return found


def step_name(step: int) -> str:
    return f"step {step}"


def chat_name(model: str) -> str:
    return f"chat {model}"


def tool_name(name: str) -> str:
    return f"execute_tool {name}"


def run_ids(run_id: str, session_id: str | None, labels: Mapping[str, str] | None = None) -> Attrs:
    """What every span of a run carries, made once a run: its id, its conversation's, and its labels.

    A conversation is a chain of runs (follow-ups, forks): its id is its first run's,
    the run's own when it has no parent. A run's labels go out as OpenInference ``metadata``
    (a JSON object, with ``runner.run_id`` beside them) and ``tag.tags`` (``k=v``), in key
    order, so a log that reorders them (JSONB) rebuilds the same text; a run without labels has neither.
    """
    ids: Attrs = {CONVERSATION_ID: session_id or run_id, RUN_ID: run_id}
    if labels:
        ordered = dict(sorted(labels.items()))
        ids[METADATA] = json_text({**ordered, RUN_ID: run_id})
        ids[TAGS] = tuple(f"{k}={v}" for k, v in ordered.items())
    return ids


def run_start(ids: Attrs, model: str, provider: str | None, agent_name: str | None) -> Attrs:
    """The root span at start (also a resumed part's); ``runner.step`` is 0 on it (the run itself)."""
    attrs: Attrs = {OI_KIND: "AGENT", OPERATION: "invoke_agent", **ids, STEP: 0, REQUEST_MODEL: model}
    if provider:
        attrs[PROVIDER] = provider
    if agent_name:
        attrs[AGENT_NAME] = attrs[OI_AGENT_NAME] = agent_name
    return attrs


def run_context(ids: Attrs, parent_run_id: str | None) -> Attrs:
    """What a root span says of the run's place: its session and parent run (its labels are in ``ids``).

    ``session.id`` groups a conversation's runs (Phoenix's Sessions).
    """
    attrs: Attrs = {SESSION_ID: ids[CONVERSATION_ID]}
    if parent_run_id:
        attrs[PARENT_RUN_ID] = parent_run_id
    return attrs


def run_input(task: str | None) -> Attrs:
    """Opt-in content of a root span: the task, which UIs list as the run's input."""
    return {INPUT_VALUE: task, INPUT_MIME: TEXT} if task else {}


def run_output(answer: str | None, typed: bool = False) -> Attrs:
    """Opt-in content of a root span that ended with an answer: JSON for a typed result (``output_type=``)."""
    return {OUTPUT_VALUE: answer, OUTPUT_MIME: JSON if typed else TEXT} if answer is not None else {}


def error_text(text: str | None, category: str, content: bool) -> str:
    """Describe a failure on a span, with its text only when content is recorded.

    Error texts quote what the model or a tool produced, such as a refused argument.
    So with content off a failed span says only its class, the ``error.type`` value.
    The full text stays in the run's log, found by the run id on every span.
    """
    return text if content and text else category


def run_end(status: str, error: str | None, *, content: bool) -> tuple[Attrs, trace.Status]:
    """A root span's end: ERROR only for a failure (``NOT_FAILURES`` says why a stop is not)."""
    attrs: Attrs = {STATUS: str(status)}  # plain text, not the enum: exporters take ``str`` itself
    if error and content:
        attrs[STOP_REASON] = error
    if status in NOT_FAILURES:
        if status != Status.DONE:  # the run may go on: its root says so, as a trace list shows outputs
            attrs.update({OUTPUT_VALUE: f"stopped: {status} (a resume continues the run)", OUTPUT_MIME: TEXT})
        return attrs, UNSET
    attrs[ERROR_TYPE] = status
    return attrs, trace.Status(StatusCode.ERROR, error_text(error, status, content))


def step_start(ids: Attrs, step: int) -> Attrs:
    return {OI_KIND: "CHAIN", **ids, STEP: step}


def chat_start(ids: Attrs, step: int, model: str, provider: str | None) -> Attrs:
    return {OI_KIND: "LLM", OPERATION: "chat", **ids, STEP: step, **_chat_model(model, provider)}


@functools.lru_cache(maxsize=64)
def _chat_model(model: str, provider: str | None) -> Attrs:
    """What a chat span says of its model, made once per model (callers copy it, never change it).

    ``llm.invocation_parameters`` holds the model alone: that is all of a request's settings a run
    logs (an adapter's options, such as temperature or max_tokens, are not), and a span rebuilt from
    the log must say what the live one did. ``llm.provider`` is OpenInference's name for the provider.
    """
    attrs: Attrs = {REQUEST_MODEL: model, OI_MODEL_NAME: model, INVOCATION_PARAMETERS: json_text({"model": model})}
    if provider:
        attrs[PROVIDER] = provider
        attrs[OI_PROVIDER] = classify.oi_provider(provider)
    return attrs


def chat_end(
    prompt_tokens: int,
    reply_tokens: int,
    usage: tuple[int, int] | None,
    reply: Mapping[str, Any] | None,
    error: str | None,
    error_type: str | None,
    *,
    content: bool,
) -> tuple[Attrs, trace.Status]:
    """``reply`` is the reply as ``messages.reply_data`` data (None when there was none).

    A call with an ``error`` failed even when it has a reply (an invalid one); it
    carries no usage, as the run did not count its tokens.
    """
    attrs: Attrs = {} if reply is None else {FINISH_REASONS: (finish_reason(reply),)}
    if error is not None or reply is None:
        kind = error_type or Status.MODEL_ERROR
        attrs[ERROR_TYPE] = kind
        return attrs, trace.Status(StatusCode.ERROR, error_text(error, kind, content))
    if usage is not None:
        attrs.update({INPUT_TOKENS: usage[0], OUTPUT_TOKENS: usage[1], OI_TOKENS_PROMPT: usage[0],
                      OI_TOKENS_COMPLETION: usage[1], OI_TOKENS_TOTAL: usage[0] + usage[1],
                      USAGE_ESTIMATED: False})
    else:  # the runner's own estimate (about 4 characters a token): never reported as usage
        attrs.update({ESTIMATED_INPUT_TOKENS: prompt_tokens, ESTIMATED_OUTPUT_TOKENS: reply_tokens,
                      USAGE_ESTIMATED: True})
    return attrs, UNSET


def chat_streamed(first_chunk_s: float | None) -> Attrs:
    """A streamed reply's time to its first piece of text, in seconds (none for a reply not streamed)."""
    return {} if first_chunk_s is None else {TIME_TO_FIRST_CHUNK: first_chunk_s}


def chat_cost(total: float | None, prompt: float | None, completion: float | None) -> Attrs:
    """OpenInference's cost attributes of a model call, for those of its costs that are known.

    Rounded to ``COST_DIGITS`` decimals: a price times a count is a float such as
    1.8000000000000002e-05, which a UI prints as it is. The log keeps the exact cost.
    """
    found = ((OI_COST_TOTAL, total), (OI_COST_PROMPT, prompt), (OI_COST_COMPLETION, completion))
    return {name: round(value, COST_DIGITS) for name, value in found if value is not None}


def tool_start(ids: Attrs, step: int, name: str, call_id: str,
               described: Mapping[str, Attrs] | None = None) -> Attrs:
    """A tool span at start; ``described`` is the run's ``tools_described`` (a tool not in it: its name only)."""
    found = described.get(name) if described is not None else None
    return {OI_KIND: "TOOL", OPERATION: "execute_tool", **ids, STEP: step, TOOL_NAME: name,
            TOOL_CALL_ID: call_id, TOOL_TYPE: "function", **(found or {OI_TOOL_NAME: name})}


def tools_described(tool_specs: Sequence[Mapping[str, Any]]) -> dict[str, Attrs]:
    """What each tool's spans say of it, by name, made once a run from its ``run_started`` tool specs.

    OpenInference's ``tool.name``, ``tool.description``, ``tool.json_schema`` (the OpenAI tool
    shape, as ``llm.tools.N.tool.json_schema`` has it) and ``tool.parameters`` (its parameters'
    JSON Schema, which Phoenix shows on a tool span). A tool's definition is not content: always on.
    """
    described: dict[str, Attrs] = {}
    for spec in tool_specs:
        name = str(spec.get("name"))
        one: Attrs = {OI_TOOL_NAME: name}
        if spec.get("description"):
            one[OI_TOOL_DESCRIPTION] = str(spec["description"])
        one[OI_TOOL_SCHEMA] = tool_schema(spec)
        one[OI_TOOL_PARAMETERS] = json_text(spec.get("parameters") or {})
        described[name] = one
    return described


def tool_schema(spec: Mapping[str, Any]) -> str:
    """A tool's definition in the OpenAI tool shape, as OpenInference's ``tool.json_schema`` wants it."""
    return json_text({"type": "function", "function": dict(spec)})


def transfer(agent_name: str, child_run_id: str | None) -> Attrs:
    """What a sub-agent's call adds to its tool span: the agent it hands the task to, who returns, and its run.

    ``child_run_id`` is None for a call refused before it ran (no child run was started).
    """
    attrs: Attrs = {TRANSFER_MODE: RETURN_TO_CALLER, TRANSFER_TARGET: agent_name}
    if child_run_id is not None:
        attrs[CHILD_RUN_ID] = child_run_id
    return attrs


def subagents(traits: Mapping[str, Mapping[str, object]] | None) -> frozenset[str]:
    """The names of the tools that are sub-agents (``add_agent``), from a run's logged ``tool_traits``."""
    return frozenset(name for name, one in (traits or {}).items() if one.get("subagent"))


def tool_end(name: str, observation: str, ok: bool, ran: bool, *, content: bool) -> tuple[Attrs, trace.Status]:
    attrs: Attrs = {TOOL_RAN: ran}
    if ok:
        return attrs, UNSET
    kind = attrs[ERROR_TYPE] = classify.tool_error_type(name, observation, ran)
    return attrs, trace.Status(StatusCode.ERROR, error_text(_first_line(observation), kind, content))


def tool_content(args: Any, observation: str) -> Attrs:
    """Opt-in content of a tool span, under the GenAI and the OpenInference names."""
    arguments = json_text(args)
    return {TOOL_ARGUMENTS: arguments, TOOL_RESULT: observation, INPUT_VALUE: arguments, INPUT_MIME: JSON,
            OUTPUT_VALUE: observation}


def tool_arguments(args: Any) -> Attrs:
    """Opt-in arguments of a tool call that has no result (a call cut short)."""
    arguments = json_text(args)
    return {TOOL_ARGUMENTS: arguments, INPUT_VALUE: arguments, INPUT_MIME: JSON}


def cut_short() -> Attrs:
    """What a tool span says when its run stopped before the call returned: its outcome is unknown."""
    return {IN_DOUBT: True, ERROR_TYPE: CUT_SHORT}


def finish_reason(reply: Mapping[str, Any]) -> str:
    stop = reply.get("stop_reason")
    if stop:
        return str(stop)
    return "tool_call" if reply.get("tool_calls") else "stop"


def json_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _first_line(text: str) -> str:
    return text.split("\n", 1)[0]
