"""Every error the library raises on purpose derives from one base, ``RunnerError``.

    RunnerError
    ├── AgentStopped          a run ended early and the caller asked for an exception
    ├── ScriptError           a scripted model was used outside its script
    │   └── ScriptExhausted   called more often than it has replies
    ├── StoreError            the event log cannot be opened, read or written
    │   ├── RunNotFound       the store holds no run of that id
    │   ├── AmbiguousRunId    a run id prefix names several runs
    │   ├── NoStoreError      a read-only open found no store (runner.store.migrate)
    │   └── EventDecodeError  a stored event is not one of this runner's facts (runner.events)
    ├── StopRun               deprecated: nothing raises it
    ├── FixtureError          a replay fixture cannot be read
    │   └── ShapeError        a fixture field is missing or has the wrong type (runner._replay.fixture_shape)
    ├── ReplayDivergence      a replay differs from its recording
    ├── CannotResume          a run cannot be resumed (it is done, say)
    │   └── RunInUse          another live process drives the run
    ├── TracingSetupError     the OTLP exporter cannot be set up (runner.tracing.otlp)
    ├── PoolError             a worker pool is configured wrong (runner.pool.agents)
    ├── PriceUnknown          a cost budget for a model with no known price (runner.prices)
    ├── ActionRefused         the console cannot act on a run as it is (runner.ui)
    ├── McpError              an MCP server cannot be started or listed, or does not answer in time (runner.mcp)
    ├── MissingDependency     a model adapter's SDK is not installed (runner.adapters)
    └── UnusableResponse      a provider answered with nothing a reply can be made of (runner.adapters)

Model mistakes are never raised: they become ``ERROR:`` observations the model can act on.
Developer mistakes, such as a bad schema at ``register``, raise ``ValueError`` before any run starts.
Outside the tree are the pytest plugin's ``RealModelCalled``, an ``AssertionError``,
and the CLI's ``CliError``, a click exception.
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
            f"scripted model called {calls} time{'s' * (calls != 1)} but holds only "
            f"{replies} {'reply' if replies == 1 else 'replies'}"
        )


class StoreError(RunnerError):
    """The event log cannot be used; the message is one line saying why and what to do."""


class RunNotFound(StoreError):
    """The store holds no run of that id (every other ``StoreError`` says the store could not answer)."""


class AmbiguousRunId(StoreError):
    """A run id prefix names several runs (the message lists some of them)."""


class PriceUnknown(RunnerError):
    """A ``max_cost_usd`` budget for a model whose price is unknown: refused before the run starts."""


class ActionRefused(RunnerError):
    """The console cannot take an action on a run as the run is (one line, shown to whoever asked)."""


class StopRun(RunnerError):
    """Deprecated: kept so that imports of it still work; nothing raises it any more.

    Replay reproduces a recorded stop through its own driver now, and the loop no
    longer treats this class specially: a model raising it ends its run with
    ``model_error``, as any exception does.
    """

    def __init__(self, status: str, reason: str) -> None:
        self.status = status
        self.reason = reason
        super().__init__(reason)


class FixtureError(RunnerError):
    """A replay fixture file cannot be read (missing, not JSON, unknown format or version)."""


class ReplayDivergence(RunnerError):
    """A replay showed the model something other than what the recording holds.

    ``sentence`` says where and what in one line; ``str()`` adds a compact diff.
    """

    def __init__(self, step: int, index: int | None, field: str, sentence: str,
                 recorded: object = None, got: object = None, diff: str = "") -> None:
        self.step = step
        self.index = index
        self.field = field
        self.sentence = sentence
        self.recorded = recorded
        self.got = got
        self.diff = diff
        super().__init__(sentence + (f"\n{diff}" if diff else ""))


class CannotResume(RunnerError):
    """``resume`` refused a run; the message says why in one line.

    For example the run is done, a decision is unknown, or a run to follow up has not finished.
    """


class RunInUse(CannotResume):
    """The run is driven by a live process (or another process took it over first)."""
