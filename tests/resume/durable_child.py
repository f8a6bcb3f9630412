"""A process for the durable-execution tests to run, kill with SIGKILL, and resume.

``python -m tests.resume.durable_child URL WORKDIR PLAN_JSON [run|resume RUN_ID] [CALL=VERDICT ...] [--parallel=N]``

Every tool execution appends one line to ``WORKDIR/ran.log`` (flushed and fsynced
before anything else happens) and then, if ``WORKDIR/hang-REF`` exists, deletes it
and sleeps until killed: the parent waits for the line, then sends SIGKILL, so the
process dies *inside* the tool, after its side effect. The model is ``PlanModel``:
its reply depends only on how many replies the history already holds, so a resumed
run in another process continues the same plan. ``--parallel=N`` is the run's ``max_parallel_tools``
(default 1: one call at a time, in the plan's order); ``--pause=S`` keeps each tool S seconds after its line.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from runner import Message, ModelReply, ToolCall, ToolRegistry, ToolSpec, configure_tracing, open_store, run_agent
from runner._run.resume import resume

Plan = list[list[list[Any]]]  # per step: [call_id, tool, args] triples; after the last step, the answer


class PlanModel:
    """Replies by position in the plan; records a copy of every message list it is shown."""

    model_name = "plan"

    def __init__(self, plan: Plan, answer: str = "all done") -> None:
        self.plan, self.answer = plan, answer
        self.seen: list[list[Message]] = []

    def __call__(self, messages: Sequence[Message], tool_specs: Sequence[ToolSpec]) -> ModelReply:
        self.seen.append([dict(m) for m in messages])  # type: ignore[misc]
        made = sum(1 for m in messages if m["role"] == "assistant")
        if made >= len(self.plan):
            return ModelReply(self.answer)
        return ModelReply("", [ToolCall(cid, name, args) for cid, name, args in self.plan[made]])


def tools(workdir: Path, pause: float = 0.0) -> ToolRegistry:
    log = workdir / "ran.log"

    def effect(line: str, ref: str) -> None:
        marker = workdir / f"hang-{ref}"
        hang = marker.exists()
        if hang:
            marker.unlink()  # before the line: the parent kills us as soon as it reads the line
        with open(log, "a", encoding="utf-8") as out:
            out.write(line + "\n")
            out.flush()
            os.fsync(out.fileno())
        while hang:  # killed here
            time.sleep(1)
        if pause:
            time.sleep(pause)

    def pay(ref: str) -> str:
        effect(f"pay {ref}", ref)
        return f"paid {ref}"

    def lookup(ref: str) -> dict[str, Any]:
        effect(f"lookup {ref}", ref)
        return {"ref": ref, "value": 42}

    def charge(ref: str, key: str) -> str:
        effect(f"charge {ref} {key}", ref)
        return f"charged {ref}"

    def put(ref: str) -> str:
        effect(f"put {ref}", ref)
        return f"put {ref}"

    def transfer(ref: str) -> str:
        effect(f"transfer {ref}", ref)
        return f"transferred {ref}"

    params = {"type": "object", "properties": {"ref": {"type": "string"}}, "required": ["ref"]}
    registry = ToolRegistry()
    registry.register("pay", "Pay (writes).", params, pay, side_effects=True)
    registry.register("lookup", "Look up (reads).", params, lookup)
    registry.register("charge", "Charge (writes, deduplicated by key).", params, charge, side_effects=True,
                      idempotency_key="key")
    registry.register("transfer", "Transfer (writes, needs approval).", params, transfer, side_effects=True,
                      needs_approval=True)
    registry.register("put", "Put (writes, idempotent).", params, put, side_effects=True, idempotent=True)
    return registry


def ran(workdir: Path) -> list[str]:
    log = workdir / "ran.log"
    return log.read_text(encoding="utf-8").splitlines() if log.exists() else []


def main(argv: list[str]) -> None:
    parallel = next((int(a.partition("=")[2]) for a in argv if a.startswith("--parallel=")), 1)
    pause = next((float(a.partition("=")[2]) for a in argv if a.startswith("--pause=")), 0.0)
    argv = [a for a in argv if not a.startswith(("--parallel=", "--pause="))]
    url, workdir, plan = argv[0], Path(argv[1]), json.loads(argv[2])
    mode = argv[3] if len(argv) > 3 else "run"
    # Traced live to the collector the environment names, if any (the chaos test's OTLP receiver).
    provider = configure_tracing("durable-child") if os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") else None
    with open_store(url) as store:
        if mode == "run":
            result = run_agent("Do the plan.", PlanModel(plan), tools(workdir, pause), store=store, max_steps=50,
                               token_budget=10_000_000, run_id=argv[4] if len(argv) > 4 else None,
                               max_parallel_tools=parallel, tracer_provider=provider)
        else:
            decisions: dict[str, bool | str] = {}
            for item in argv[5:]:
                call_id, _, verdict = item.partition("=")
                decisions[call_id] = True if verdict == "yes" else (False if verdict == "no" else verdict)
            result = resume(store, argv[4], PlanModel(plan), tools(workdir, pause), decisions=decisions,
                            max_parallel_tools=parallel, tracer_provider=provider)
    if provider is not None:
        provider.shutdown()
    print(json.dumps({"run_id": result.run_id, "status": result.status, "error": result.error}))


if __name__ == "__main__":
    main(sys.argv[1:])
