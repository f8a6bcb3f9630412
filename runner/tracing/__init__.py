"""OpenTelemetry spans for runs: live, and rebuilt from the event log.

Span tree of one run (names from the OpenTelemetry GenAI conventions)::

    invoke_agent [{agent_name}]
    ├── step 1
    │   ├── chat {model}
    │   └── execute_tool {tool}   (one per call that got an observation)
    └── step 2 ...

Every run is traced, on the global provider when none is given, so this package
is imported by any ``run_agent``. The live recorder needs only the OpenTelemetry
API; the SDK (exporters, resources, rebuilt spans) loads on first use of the
names that need it, so a plain run does not pay for it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .._log.ids import derived_span_id, derived_trace_id
from .live import TracingRecorder

if TYPE_CHECKING:
    from .otlp import TracingSetupError, configure_tracing, otlp_exporter
    from .rebuild import export_run, rebuild_spans

_LAZY = {"TracingSetupError": "otlp", "configure_tracing": "otlp", "otlp_exporter": "otlp",
         "export_run": "rebuild", "rebuild_spans": "rebuild"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


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
