"""OpenTelemetry spans for runs: live, and rebuilt from the event log.

Span tree of one run (names from the OpenTelemetry GenAI conventions)::

    invoke_agent [{agent_name}]
    ├── step 1
    │   ├── chat {model}
    │   └── execute_tool {tool}   (one per call that got an observation)
    └── step 2 ...
"""

from __future__ import annotations

from ..ids import derived_span_id, derived_trace_id
from .live import TracingRecorder
from .otlp import TracingSetupError, configure_tracing, otlp_exporter
from .rebuild import export_run, rebuild_spans

__all__ = [
    "TracingRecorder",
    "TracingSetupError",
    "configure_tracing",
    "derived_span_id",
    "derived_trace_id",
    "export_run",
    "otlp_exporter",
    "rebuild_spans",
]
