"""``run_agent``: the synchronous driver of the loop in ``core``.

With no deadline and no cancel event, the model and the tools run on the
caller's thread (nothing to wait for, nothing to pay). Otherwise each call runs
on a daemon worker thread and the loop waits with the time that remains, so a
model or tool that never returns cannot hold the run past its deadline. A reply's
calls run together on worker threads (``flight``), at most ``max_parallel_tools`` at once.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from typing import Any, Unpack

from .._tools.registry import ToolRegistry
from ..messages import Model
from .build import NOT_GIVEN, NotGiven, RunOptions, build_core
from .core import DEFAULT_SYSTEM, AgentCore
from .flight import CANCEL_POLL_S, ThreadFlight, bounded
from .results import COMMITTED, GO_ON, Action, AgentResult, CallModel, Checkpoint, Commit, Outcome, RunTools


def run_agent(
    task: str,
    model: Model,
    registry: ToolRegistry,
    system: str = DEFAULT_SYSTEM,
    max_steps: int | NotGiven = NOT_GIVEN,
    token_budget: int | NotGiven = NOT_GIVEN,
    **options: Unpack[RunOptions],
) -> AgentResult:
    """Run ``task`` with ``model`` and the tools in ``registry`` until it is done or hits a limit.

    It never raises for anything the model or a tool does: the result says how the run ended.
    ``result.raise_for_status()`` turns a stop into an error.

    Args:
        task: what the user asks.
        model: the model, a callable from the messages and tool specs to a reply.
        registry: the tools the model may call.
        system: the system prompt.
        max_steps, token_budget: limits; any field of ``Limits`` is a keyword too (``timeout_s=60``;
            ``max_parallel_tools=1`` runs a reply's calls one by one), and the others keep ``Limits``'
            defaults. ``limits=Limits(...)`` sets them all; a limit given both ways is a ``TypeError``.
        **options: see ``RunOptions``: ``cancel`` (a ``threading.Event``), ``approve`` for tools
            registered with ``needs_approval``, ``store`` to commit every fact to an event log,
            ``tracer_provider`` for spans (content only with ``record_content``), ``labels``,
            ``agent_name``, ``run_id``, ``recorder``.
    """
    return drive(build_core(task, model, registry, system, max_steps, token_budget, **options))


def drive(core: AgentCore) -> AgentResult:
    """Perform the actions ``core`` decides on until it returns a result.

    An exception leaving the loop (Ctrl-C, a raising ``approve`` callback or
    recorder) first closes the run, so the log never shows it running forever.
    """
    result = drive_until(core, None)
    assert result is not None
    return result


def drive_until(core: AgentCore, halt: Callable[[Action], bool] | None) -> AgentResult | None:
    """``drive``, but give up without a word before any action ``halt`` picks: None then.

    Nothing is recorded after that point, as if the process had died there (tests
    use it to leave a run as a killed process would).
    """
    decisions = core.run()
    flight = ThreadFlight(core)
    try:
        action = next(decisions)
        while True:
            if halt is not None and halt(action):
                decisions.close()
                return None
            action = decisions.send(perform(core, action, flight))
    except StopIteration as finished:
        result: AgentResult = finished.value
        return result
    except BaseException as exc:
        decisions.close()
        core.abort(exc)
        raise


_NO_ARGS: tuple[Any, ...] = ()
_NO_KWARGS: dict[str, Any] = {}


def perform(core: AgentCore, action: Action, flight: ThreadFlight | None = None) -> Outcome:
    """Perform one of ``core``'s actions; ``flight`` holds the run's calls running together (``RunTools``)."""
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    if isinstance(action, Commit):
        core.recorder.sync()
        return COMMITTED
    if isinstance(action, Checkpoint):
        return at_checkpoint(core)
    if isinstance(action, CallModel):
        fn, args, kwargs, timeout_s, in_tool = action.model, (action.messages, action.specs), _NO_KWARGS, None, False
    elif isinstance(action, RunTools):
        if flight is None:
            raise TypeError("RunTools needs the run's ThreadFlight: its calls stay in flight between actions")
        return flight.perform(action)
    else:
        fn, args, kwargs, timeout_s, in_tool = action.tool.fn, _NO_ARGS, action.args, action.tool.timeout_s, True
    if timeout_s is None and not core.needs_waiting:  # on this thread: nothing to wait for
        started = time.monotonic()
        try:
            value = fn(*args, **kwargs)
        except Exception as exc:
            return Outcome(error=exc, elapsed_s=time.monotonic() - started)
        return Outcome(value=value, elapsed_s=time.monotonic() - started)

    def work() -> Any:
        return fn(*args, **kwargs)

    return _call_on_worker(work, time.monotonic(), timeout_s, core, in_tool)


def at_checkpoint(core: AgentCore) -> Outcome:
    """A ``Checkpoint``'s answer from the deadline and the cancel event: stop now, or go on."""
    status = core.stop_requested()
    return Outcome(stop=status) if status else GO_ON


def _call_on_worker(
    work: Callable[[], Any], started: float, timeout_s: float | None, core: AgentCore, in_tool: bool
) -> Outcome:
    box: dict[str, Any] = {}
    done = threading.Event()

    def target() -> None:
        try:
            box["value"] = work()
        except BaseException as exc:  # handed to the loop's thread, never lost in this one
            box["error"] = exc
        finally:
            done.set()

    threading.Thread(target=target, name=f"runner-{core.run_id[:8]}", daemon=True).start()
    call_end = started + timeout_s if timeout_s is not None else math.inf
    run_end = core.deadline if core.deadline is not None else math.inf
    while True:
        now = time.monotonic()
        wait = min(call_end, run_end) - now
        if core.watches_cancel(in_tool):
            wait = min(wait, CANCEL_POLL_S)
        if done.wait(bounded(wait)):  # inf: a tool a cancel lets finish
            elapsed = time.monotonic() - started
            if "error" in box:
                if not isinstance(box["error"], Exception):
                    raise box["error"]  # SystemExit, KeyboardInterrupt: as if raised on this thread
                return Outcome(error=box["error"], elapsed_s=elapsed)
            return Outcome(value=box.get("value"), elapsed_s=elapsed)
        now = time.monotonic()
        stop = core.stop_requested(in_tool)
        if stop:
            return Outcome(stop=stop, elapsed_s=now - started)
        if now >= call_end:
            return Outcome(timed_out=True, elapsed_s=now - started)


