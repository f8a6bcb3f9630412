"""The tool of the cross-process cancel test, loaded with ``--tools tests.cli.cancel_tools:tools``.

``tick`` takes a while (``TICK_S``), as a real tool does, so a ``runner cancel`` from another
process lands while the run works; the test counts steps, it times nothing.
"""

from __future__ import annotations

import time

from runner import ToolRegistry

TICK_S = 1.0


def tick(n: int) -> str:
    time.sleep(TICK_S)
    return f"tick {n}"


def tools() -> ToolRegistry:
    registry = ToolRegistry()
    registry.register("tick", "Tick once.", {"type": "object", "properties": {"n": {"type": "integer"}},
                                             "required": ["n"]}, tick)
    return registry
