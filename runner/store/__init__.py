"""The durable event log: ``runs`` and ``events`` tables behind ``open_store``."""

from .._log.ids import derived_span_id, derived_trace_id
from .._log.records import RunSummary, StoredEvent, StoredRun
from .recording import StoreRecorder
from .runstore import RunStore, open_store

__all__ = [
    "RunStore",
    "RunSummary",
    "StoreRecorder",
    "StoredEvent",
    "StoredRun",
    "derived_span_id",
    "derived_trace_id",
    "open_store",
]
