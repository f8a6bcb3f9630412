"""Every error the library raises on purpose derives from one base.

    RunnerError
    ├── AgentStopped        a run ended early and the caller asked for an exception
    ├── ScriptError         a scripted model was used outside its script
    │   └── ScriptExhausted called more often than it has replies
    └── StoreError          the event log cannot be opened, read or written

Model mistakes are never raised: they become ``ERROR:`` observations the model
can act on. Developer mistakes (a bad schema at ``register``) raise ``ValueError``
at definition time, before any run starts.
"""

from __future__ import annotations


class RunnerError(Exception):
    """Base of every error this package raises on purpose."""


class AgentStopped(RunnerError):
    """Raised by ``AgentResult.raise_for_status`` for a run that did not finish."""

    def __init__(self, status: str, reason: str, run_id: str = "") -> None:
        self.status = status
        self.reason = reason
        self.run_id = run_id
        super().__init__(f"run {run_id or '?'} stopped with {status}: {reason}")


class ScriptError(RunnerError):
    """A scripted model was called more, or less, than its script allows."""


class ScriptExhausted(ScriptError):
    """A scripted model was called after its last reply."""

    def __init__(self, calls: int, replies: int) -> None:
        self.calls = calls
        self.replies = replies
        super().__init__(
            f"scripted model called {calls} times but holds only {replies} replies"
        )


class StoreError(RunnerError):
    """The event log cannot be used; the message is one line saying why and what to do."""
