"""``run_plan``: run a fixed ReAct-style plan of tool actions, without a model.

Useful to exercise tools in the order an agent would, and as the smallest
possible illustration of act/observe.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from .._text import describe_exception


def run_plan(
    plan: Iterable[Sequence[Any]],
    tools: Mapping[str, Callable[[dict[str, Any]], Any]],
    max_steps: int = 10,
) -> list[tuple[str, dict[str, Any], Any]]:
    """Run ``(tool, args)`` actions in order and return ``(tool, args, observation)``.

    Args may be missing (``{}``). ``"finish"`` ends the plan and is not recorded;
    an unknown tool or a raising one gives an ``ERROR:`` observation; the loop
    stops once the trace holds ``max_steps`` entries.
    """
    trace: list[tuple[str, dict[str, Any], Any]] = []
    for action in plan:
        if len(trace) >= max_steps:
            break
        name = action[0]
        args = dict(action[1]) if len(action) > 1 and action[1] is not None else {}
        if name == "finish":
            break
        fn = tools.get(name)
        if fn is None:
            observation: Any = f"ERROR: unknown tool {name!r}. Available tools: {sorted(tools)}"
        else:
            try:
                observation = fn(args)
            except Exception as exc:
                observation = f"ERROR: {name} failed: {describe_exception(exc)}"
        trace.append((name, args, observation))
    return trace
