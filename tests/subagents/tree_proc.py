"""A process that runs (or resumes) a three-level tree of agents with payments, for the kill tests to SIGKILL.

``python -m tests.subagents.tree_proc URL WORKDIR run|resume RUN_ID [--pause=S]``

The planner calls the ``research`` sub-agent and then pays; research looks something up and calls the
``deep`` sub-agent at once, then pays; deep pays. Every tool and every model call appends a line to
``WORKDIR/ran.log`` (fsynced) before anything else: ``pay REF``, ``lookup REF``, ``ask AGENT N`` (the
agent's model asked for its reply N). A tool whose ``WORKDIR/hang-REF`` exists deletes it, writes its
line and sleeps until killed. ``--pause=S``: each tool and model call sleeps S seconds after its line.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from runner import Message, ModelReply, ToolCall, ToolRegistry, ToolSpec, open_store, resume, run_agent

PLANS: dict[str, list[list[tuple[str, str, dict[str, Any]]]]] = {
    "planner": [[("r1", "research", {"task": "find the vendor"})], [("p1", "pay", {"ref": "planner"})]],
    "research": [[("l1", "lookup", {"ref": "vendor"}), ("d1", "deep", {"task": "check the vendor"})],
                 [("p2", "pay", {"ref": "research"})]],
    "deep": [[("p3", "pay", {"ref": "deep"})]],
}


def log_line(workdir: Path, line: str) -> None:
    with open(workdir / "ran.log", "a", encoding="utf-8") as out:
        out.write(line + "\n")
        out.flush()
        os.fsync(out.fileno())


def ran(workdir: Path) -> list[str]:
    log = workdir / "ran.log"
    return log.read_text(encoding="utf-8").splitlines() if log.exists() else []


class TreeModel:
    """Replies by position in its agent's plan (how many replies the history holds), logging each ask."""

    model_name = "tree"

    def __init__(self, agent: str, workdir: Path, pause: float = 0.0) -> None:
        self.agent, self.workdir, self.pause = agent, workdir, pause

    def __call__(self, messages: Sequence[Message], tool_specs: Sequence[ToolSpec]) -> ModelReply:
        made = sum(1 for m in messages if m["role"] == "assistant")
        log_line(self.workdir, f"ask {self.agent} {made}")
        if self.pause:
            time.sleep(self.pause)
        plan = PLANS[self.agent]
        if made >= len(plan):
            return ModelReply(f"{self.agent} done")
        return ModelReply("", [ToolCall(cid, name, dict(args)) for cid, name, args in plan[made]])


def registry(workdir: Path, pause: float = 0.0) -> ToolRegistry:
    """The planner's tools: ``pay`` and the ``research`` sub-agent (which has ``deep`` below it)."""

    def effect(line: str, ref: str) -> None:
        marker = workdir / f"hang-{ref}"
        hang = marker.exists()
        if hang:
            marker.unlink()
        log_line(workdir, line)
        while hang:  # killed here, after the side effect
            time.sleep(1)
        if pause:
            time.sleep(pause)

    def pay(ref: str) -> str:
        effect(f"pay {ref}", ref)
        return f"paid {ref}"

    def lookup(ref: str) -> dict[str, Any]:
        effect(f"lookup {ref}", ref)
        return {"ref": ref, "found": True}

    params = {"type": "object", "properties": {"ref": {"type": "string"}}, "required": ["ref"]}

    def tools() -> ToolRegistry:
        made = ToolRegistry()
        made.register("pay", "Pay (writes).", params, pay, side_effects=True)
        made.register("lookup", "Look up (reads).", params, lookup)
        return made

    deep = tools()
    research = tools()
    research.add_agent("deep", model=TreeModel("deep", workdir, pause), registry=deep, description="Checks deeper.")
    planner = tools()
    planner.add_agent("research", model=TreeModel("research", workdir, pause), registry=research,
                      description="Researches.")
    return planner


def main(argv: list[str]) -> None:
    pause = next((float(a.partition("=")[2]) for a in argv if a.startswith("--pause=")), 0.0)
    argv = [a for a in argv if not a.startswith("--pause=")]
    url, workdir, mode, run_id = argv[0], Path(argv[1]), argv[2], argv[3]
    model = TreeModel("planner", workdir, pause)
    with open_store(url) as store:
        if mode == "run":
            result = run_agent("Pay the vendor.", model, registry(workdir, pause), store=store, run_id=run_id,
                               max_steps=20)
        else:
            result = resume(store, run_id, model, registry(workdir, pause))
    print(json.dumps({"run_id": result.run_id, "status": result.status, "error": result.error}))


if __name__ == "__main__":
    main(sys.argv[1:])
