"""Open stores across ``os.fork``: the parent's commits held while it forks, the child's started afresh.

A forked child must never use a SQLite connection, a lock or a thread of its parent's.
Every store is tracked here (weakly), and hooks registered with ``os.register_at_fork``
let the commits under way end before the fork, then give the child its own engine pool,
heartbeat and committer.
"""

from __future__ import annotations

import os
import weakref
from typing import TYPE_CHECKING

from .engine import is_memory

if TYPE_CHECKING:
    from .runstore import RunStore

# Every store open in this process, so a forked child can start each one afresh.
_OPEN: weakref.WeakSet[RunStore] = weakref.WeakSet()
# The stores whose commits ``_before_fork`` held off, to let go of in the parent.
_HELD: list[RunStore] = []


def track(store: RunStore) -> None:
    """Start each fork of this process with ``store`` made safe to use in the child."""
    _OPEN.add(store)


def hold(store: RunStore) -> bool:
    """Hold a SQLite file's commits while this process forks; whether they are held.

    The commits under way end first, within the busy timeout (``GroupCommitter.hold_for_fork``).
    A server database needs no wait: its connections are sockets, nothing the child shares.
    """
    if store.closed or store.engine.dialect.name != "sqlite" or is_memory(store.url):
        return False
    store.committer.hold_for_fork(store.busy_timeout_s + 1.0)
    return True


def start_afresh(store: RunStore) -> None:
    """Give ``store`` its own connections, threads and commits in a forked child.

    The parent's connections are let go of without closing them: they are the parent's,
    and SQLite must never use one across a fork. An in-memory store keeps its one
    connection: it is the database, and the child's copy.
    """
    if not store.closed:
        if not is_memory(store.url):
            store.engine.dispose(close=False)
        store.heartbeat.after_fork()
        store.committer.after_fork()


def _before_fork() -> None:
    for store in list(_OPEN):
        if hold(store):
            _HELD.append(store)


def _after_fork_in_parent() -> None:
    while _HELD:
        _HELD.pop().committer.release_after_fork()


def _after_fork_in_child() -> None:
    _HELD.clear()
    for store in list(_OPEN):
        start_afresh(store)


if hasattr(os, "register_at_fork"):  # POSIX: Windows has no fork
    os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent,
                        after_in_child=_after_fork_in_child)
