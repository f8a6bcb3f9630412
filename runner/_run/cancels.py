"""A stored run's cancel requests as its driver sees them: ``StoreCancel``, the watch every stored run gets.

``runner cancel`` (``RunStore.request_cancel``) leaves a ``run_cancels`` row; only the run's own
writer appends to its log, so the run reads the row. It reads it for free inside each commit's
transaction (the store's writer tells the watch what it found), and with a read of its own only
when nothing committed for ``every_s``: a fast run makes no extra transaction, a run waiting on a
long model call sees the request within ``every_s``.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from .._loop.waits import Watch
    from ..store import RunStore

POLL_S: Final = 1.0  # the most a cancel request waits to be seen while nothing commits


class StoreCancel:
    """A run's cancel watch backed by the store's cancel requests (``_loop.waits.Watch``).

    ``is_set()`` reads the store at most once every ``every_s`` since the store was last looked at
    (by this or by one of the run's commits, ``seen``). A running tool call is let finish
    (``lets_tools_finish``): the run stops before its next model or tool call, no call left in doubt.
    ``looked``: the store is as good as looked at now (a new run: nobody can have asked yet).
    ``above``: a sub-agent's child run's parent's watch: a cancel of the parent cancels the child.
    """

    lets_tools_finish = True

    def __init__(self, store: RunStore, run_id: str, every_s: float = POLL_S, *, looked: bool = False,
                 above: Watch | None = None) -> None:
        self.store, self.run_id, self.every_s, self.above = store, run_id, every_s, above
        self.requested_by: str | None = None
        self._lock = threading.Lock()
        self._next = time.monotonic() + every_s if looked else 0.0

    def is_set(self) -> bool:
        if self.requested_by is not None:
            return True
        above = self.above
        if above is not None and above.is_set():
            self.requested_by = above.requested_by or "the parent run's cancel"
            return True
        with self._lock:
            now = time.monotonic()
            if now < self._next:
                return False
            self._next = now + self.every_s
        try:
            found = self.store.cancel_request(self.run_id)
        except Exception:
            return False  # the store is briefly unreachable: the run's own next commit will say so
        self.seen(found)
        return self.requested_by is not None

    def seen(self, requested_by: str | None) -> None:
        """What a look at the store found just now: who asked for the cancel, or None (nobody yet)."""
        with self._lock:
            if requested_by is not None and self.requested_by is None:
                self.requested_by = requested_by
            self._next = max(self._next, time.monotonic() + self.every_s)
