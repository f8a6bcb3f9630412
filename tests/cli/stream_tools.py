"""The tools of the streamed sub-agent test, loaded with ``--tools tests.cli.stream_tools:tools``.

``research`` is a sub-agent whose model streams its replies word by word, each ``CHILD_SAYS`` (two children
at most: one per call of a reply that asks for two).
"""

from __future__ import annotations

from runner import ToolRegistry
from tests.streaming.helpers import StreamingModel

CHILD_SAYS = "The child found it in the archive."


def tools() -> ToolRegistry:
    registry = ToolRegistry()
    registry.add_agent("research", model=StreamingModel([CHILD_SAYS] * 2, pause_s=0.01), registry=ToolRegistry(),
                       description="Finds things out.")
    return registry
