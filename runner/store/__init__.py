"""The durable event log: ``runs`` and ``events`` tables behind ``open_store``.

What this package exports is the store's whole public surface: the CLI and the
worker pool import nothing else from it.
"""

from .._log.ids import derived_span_id, derived_trace_id
from .._log.records import RunSummary, StoredEvent, StoredRun
from .engine import shown_url
from .filters import RunFilter
from .labelled import LabelValue, label_values
from .migrate import NoStoreError, SchemaState, schema_state
from .opening import open_store
from .prune import PRUNABLE, PruneResult
from .queue import DEFAULT_QUEUE, Touched
from .recording import StoreRecorder
from .rows import NAME_WIDTH
from .runstore import RunStore
from .tail import Tail

__all__ = [
    "DEFAULT_QUEUE",
    "NAME_WIDTH",
    "PRUNABLE",
    "LabelValue",
    "NoStoreError",
    "PruneResult",
    "RunFilter",
    "RunStore",
    "RunSummary",
    "SchemaState",
    "StoreRecorder",
    "StoredEvent",
    "StoredRun",
    "Tail",
    "Touched",
    "derived_span_id",
    "derived_trace_id",
    "label_values",
    "open_store",
    "schema_state",
    "shown_url",
]
