"""A stored run as a readable timeline of rich ``Text`` lines, built from its event log only."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from rich.text import Text

from ..store import RunSummary, StoredEvent, StoredRun
from .queries import refused_in
from .render import clean, cut, iso, plural, seconds, when

SHOWN_CHARS = 300
ERROR_STYLE = "bold red"


def event_json(event: StoredEvent) -> dict[str, Any]:
    return {"seq": event.seq, "at": iso(event.at), "step": event.step, "kind": event.kind, "data": event.data,
            "span_id": event.span_id}


def _tokens(data: dict[str, Any]) -> int:
    usage = data.get("usage")
    if usage:
        return int(usage.get("input_tokens", 0)) + int(usage.get("output_tokens", 0))
    return int(data.get("prompt_tokens") or 0) + int(data.get("reply_tokens") or 0)


def _block(value: str, indent: str, style: str = "") -> Iterator[Text]:
    """Cleaned multi-line text, each line indented."""
    for line in clean(value).splitlines() or [""]:
        yield Text(indent + line, style=style)


def _args(args: Any) -> str:
    return json.dumps(args, ensure_ascii=False, sort_keys=True) if not isinstance(args, str) else args


def step_facts(run: StoredRun) -> dict[int, dict[str, float]]:
    """Per step: its duration (step_started to step_finished) and the tokens of its model call."""
    started: dict[int, Any] = {}
    facts: dict[int, dict[str, float]] = {}
    for event in run.events:
        if event.kind == "step_started":
            started[event.data["step"]] = event.at
        elif event.kind == "step_finished" and event.data["step"] in started:
            step = event.data["step"]
            facts.setdefault(step, {})["duration"] = (event.at - started[step]).total_seconds()
        elif event.kind == "model_call":
            facts.setdefault(event.data["step"], {})["tokens"] = _tokens(event.data)
    return facts


def status_label(run: RunSummary) -> str:
    """The status, saying so when an unfinished run's process is gone (``running (dead)``)."""
    return f"{run.status} ({run.liveness})" if run.liveness in ("dead", "stale") else run.status


def header(run: StoredRun) -> Iterator[Text]:
    title = Text("run ", style="bold")
    title.append(clean(run.run_id), style="bold")
    title.append("  ")
    title.append(status_label(run), style="green" if run.status == "done" else "yellow" if run.status == "running"
                 else ERROR_STYLE)
    yield title
    duration = (run.finished_at - run.started_at).total_seconds() if run.finished_at is not None else None
    refused = refused_in(run)
    calls = plural(run.tool_calls, "tool call") + (f" (+{refused} refused)" if refused else "")
    yield Text(f"started {when(run.started_at)} UTC, took {seconds(duration)}; {plural(run.steps, 'step')}, "
               f"{calls}, {plural(run.tokens, 'token')}", style="dim")
    model = clean(run.model) + (f" ({clean(run.provider)})" if run.provider else "")
    extra = f", agent {clean(run.agent_name)}" if run.agent_name else ""
    yield Text(f"model {model}{extra}; trace {run.trace_id}", style="dim")
    if run.labels:
        yield Text("labels " + ", ".join(f"{clean(k)}={clean(v)}" for k, v in run.labels.items()), style="dim")
    if run.parent_run_id:
        yield Text(f"parent run {clean(run.parent_run_id)}", style="dim")
    yield Text("task", style="bold")
    yield from _block(run.task, "  ")


def timeline(run: StoredRun, *, full: bool = False) -> Iterator[Text]:
    """Every step of ``run``: model text and calls, observations (cut unless ``full``), errors, the stop."""
    limit = None if full else SHOWN_CHARS
    facts = step_facts(run)
    yield from header(run)
    pending: dict[str, str] = {}
    finished = False
    for event in run.events:
        data = event.data
        if event.kind == "step_started":
            step = data["step"]
            fact = facts.get(step, {})
            line = Text(f"\nstep {step}", style="bold")
            line.append(f"  {seconds(fact.get('duration'))}, {plural(int(fact.get('tokens', 0)), 'token')}",
                        style="dim")
            yield line
        elif event.kind == "model_call":
            yield from model_call(data, limit)
        elif event.kind == "tool_started":
            pending[data["call_id"]] = data["name"]
        elif event.kind == "tool_finished":
            pending.pop(data["call_id"], None)
            yield from tool_finished(data, limit)
        elif event.kind == "run_finished":
            finished = True
            yield from stop(data)
    for call_id, name in pending.items():
        yield Text(f"  ! {clean(name)} [{clean(call_id)}] started but has no result in the log", style=ERROR_STYLE)
    if not finished:
        yield Text(f"\nno run_finished event: the run is {run.liveness} "
                   f"(last event {when(run.events[-1].at) if run.events else '-'} UTC)", style="yellow")


def model_call(data: dict[str, Any], limit: int | None) -> Iterator[Text]:
    line = Text("  model", style="bold cyan")
    tokens = f"prompt {data.get('prompt_tokens')} + reply {data.get('reply_tokens')} tokens"
    if data.get("usage"):
        usage = data["usage"]
        tokens = f"{usage.get('input_tokens')} in + {usage.get('output_tokens')} out tokens (reported)"
    line.append(f"  {seconds(data.get('latency_s'))}, {tokens}", style="dim")
    yield line
    if data.get("error"):
        yield from _block(f"model error ({data.get('error_type') or 'error'}): {data['error']}", "    ",
                          ERROR_STYLE)
    reply = data.get("reply")
    if reply is None:
        return
    if reply.get("content"):
        yield from _block(reply["content"], "    ")
    for call in reply.get("tool_calls") or []:
        line = Text(f"    → {clean(call.get('name'))}", style="bold")
        line.append(f"({clean(cut(_args(call.get('args')), limit))})")
        line.append(f"  [{clean(call.get('id'))}]", style="dim")
        yield line
    if reply.get("stop_reason"):
        yield Text(f"    stop reason: {clean(reply['stop_reason'])}", style="dim")


def tool_failed(data: dict[str, Any]) -> bool:
    """Whether a ``tool_finished`` event is a failure: not ok, or an ``ERROR:`` observation."""
    return not data.get("ok", True) or str(data.get("observation", "")).startswith("ERROR:")


def tool_finished(data: dict[str, Any], limit: int | None) -> Iterator[Text]:
    observation = str(data.get("observation", ""))
    failed = tool_failed(data)
    line = Text(f"  tool {clean(data.get('name'))}", style="bold magenta")
    line.append(f" [{clean(data.get('call_id'))}]", style="dim")
    ran = "" if data.get("ran", True) else ", not run"
    line.append(f"  {seconds(data.get('duration_s'))}{ran}", style="dim")
    if failed:
        line.append("  error", style=ERROR_STYLE)
    yield line
    yield from _block(cut(observation, limit), "    ", ERROR_STYLE if failed else "")


def stop(data: dict[str, Any]) -> Iterator[Text]:
    status = data.get("status")
    if status == "done":
        yield Text("\ndone", style="bold green")
        yield from _block(data.get("answer") or "", "  ")
        return
    line = Text(f"\nstopped: {clean(status)}", style=ERROR_STYLE)
    yield line
    yield from _block(data.get("error") or "", "  ", "red")
