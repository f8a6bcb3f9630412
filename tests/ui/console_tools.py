"""Tools for the console's browser tests: ``runner ui --tools tests.ui.console_tools:tools`` loads them.

The console runs them in its own process, so a test cannot look at a list in memory: each
call that really runs appends a line (``transfer a``) to the file named by ``RUNNER_UI_TEST_RAN``
(nothing is written when it is unset, as when ``runner run`` records a run in the test's process).
"""

from __future__ import annotations

import os
from typing import Any

from runner import ToolRegistry

RAN_ENV = "RUNNER_UI_TEST_RAN"
PARAMS = {"type": "object", "properties": {"ref": {"type": "string"}}, "required": ["ref"]}
XSS = "<script>window.__pwned = 'tool'</script><img src=x onerror=window.__pwned=4>"
"""What ``fetch_page`` returns: markup that runs script if a page does not escape it."""


def ran(line: str) -> None:
    path = os.environ.get(RAN_ENV)
    if path:
        with open(path, "a", encoding="utf-8") as out:
            out.write(line + "\n")


def transfer(ref: str) -> str:
    ran(f"transfer {ref}")
    return f"transferred {ref}"


def lookup(ref: str) -> dict[str, Any]:
    ran(f"lookup {ref}")
    return {"ref": ref, "value": 42}


def fetch_page(ref: str) -> str:
    ran(f"fetch_page {ref}")
    return XSS


def tools() -> ToolRegistry:
    """``transfer`` (side effects, needs approval), ``lookup`` (reads) and ``fetch_page`` (returns markup)."""
    registry = ToolRegistry()
    registry.register("transfer", "Transfer money (needs approval).", PARAMS, transfer, side_effects=True,
                      needs_approval=True)
    registry.register("lookup", "Look a reference up (reads only).", PARAMS, lookup)
    registry.register("fetch_page", "Fetch a web page's text.", PARAMS, fetch_page)
    return registry


MARKED = "<img src=x onerror=window.__pwned=8>Look <b>up</b>"
"""The description ``marked_tools`` gives ``lookup`` and its parameter: markup a page must show as text."""


def marked_tools() -> ToolRegistry:
    """``lookup`` with markup in its description and in its JSON Schema's."""
    registry = ToolRegistry()
    params = {"type": "object", "properties": {"ref": {"type": "string", "description": MARKED}}, "required": ["ref"]}
    registry.register("lookup", MARKED, params, lookup)
    return registry
