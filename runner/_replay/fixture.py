"""Turn a stored run into a replay fixture: a versioned, diff-friendly JSON file.

A fixture holds what a replay needs and nothing that changes between exports of the same run.
Keys are sorted and each reply is its own block, so a re-recorded fixture diffs cleanly; loading one needs
no database. A resumed run adds ``resumes``, a forked or followed-up run ``history``, a run with sub-agents
``children`` (each sub-agent call's child run as a fixture of its own, read from the store).
The fixture is read from the log through the event codec, like everything else that reads a run.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import secrets
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, cast

from .._log.facts import OutputSchema
from .._log.records import StoredRun
from .._log.state import RunState
from .._log.statuses import STATUSES, Status
from .._text import escape_surrogates
from .._tools.output import output_from_log
from ..errors import FixtureError
from ..events import (
    Event,
    MessageAppended,
    ModelCalled,
    RunFinished,
    RunResumed,
    RunStarted,
    StepStarted,
)
from ..messages import Cost, Message, ModelReply, ToolCall, Usage, assistant_message, reply_data
from .fixture_shape import FORMAT, VERSION, ShapeError, check_fixture
from .tree import child_runs

if TYPE_CHECKING:
    from ..store import RunStore

INTERRUPTIBLE: Final = (Status.DEADLINE, Status.CANCELLED)


@dataclass(frozen=True, slots=True)
class Fixture:
    """A fixture's content, as loaded. ``data`` is exactly the file's JSON.

    Its shape is checked on construction (``FixtureError`` names the first bad
    field), so nothing later meets a missing key or a wrong type.
    """

    data: dict[str, Any]

    def __post_init__(self) -> None:
        check_fixture(self.data)

    @property
    def task(self) -> str:
        return str(self.data["task"])

    @property
    def system(self) -> str:
        return str(self.data["system"])

    @property
    def limits(self) -> dict[str, Any]:
        return dict(self.data["limits"])

    @property
    def tool_specs(self) -> list[dict[str, Any]]:
        """The tools the recorded model was shown (name, description, parameters)."""
        return list(self.data["tool_specs"])

    @property
    def output_schema(self) -> OutputSchema | None:
        """The typed result the recorded run was to end with (``output_type=``), or None."""
        found = self.data.get("output_schema")
        if found is None:
            return None
        return {"schema": found["schema"], "wrapped": found["wrapped"], "mode": found["mode"],
                "ref": found.get("ref")}

    @property
    def replies(self) -> list[dict[str, Any]]:
        return list(self.data["replies"])

    @property
    def outcome(self) -> dict[str, Any]:
        return dict(self.data["outcome"])

    @property
    def resumes(self) -> list[dict[str, Any]]:
        """Each resume of the recorded run, in order (none for a run that never stopped)."""
        return list(self.data.get("resumes") or [])

    @property
    def run_id(self) -> str | None:
        """The recorded run's id (None in a fixture written without one)."""
        found = self.data.get("run_id")
        return None if found is None else str(found)

    @property
    def first_step(self) -> int:
        """The number of the run's first step in its log: a fork's steps go on from the step it branched at."""
        return int(self.data.get("forked_at_step") or 1)

    @property
    def history(self) -> list[Message]:
        """The messages the run started from: system and task, or a parent's for a fork or follow-up."""
        found = self.data.get("history")
        if found is None:
            return [{"role": "system", "content": self.system}, {"role": "user", "content": self.task}]
        return [cast(Message, dict(m)) for m in found]

    def child(self, call_id: str) -> Fixture | None:
        """The recording of the child run that sub-agent call ``call_id`` ran, or None when the fixture has none."""
        found = (self.data.get("children") or {}).get(call_id)
        return None if found is None else Fixture(found)

    def reply(self, index: int) -> ModelReply:
        block = self.data["replies"][index]
        usage = block.get("usage")
        return ModelReply(
            content=block["content"],
            tool_calls=[ToolCall(c["id"], c["name"], c["args"]) for c in block["tool_calls"]],
            usage=Usage(usage["input_tokens"], usage["output_tokens"], usage.get("cache_read_tokens", 0),
                        usage.get("cache_write_tokens", 0)) if usage else None,
            stop_reason=block.get("stop_reason"),
        )

    def cost(self, index: int) -> Cost | None:
        """The recorded cost of reply ``index`` (0-based), or None when it had none."""
        block = self.data["replies"][index]
        found = block.get("cost_usd")
        return None if found is None else Cost(float(found), str(block.get("price_source") or ""))

    def messages_before(self, call: int) -> list[Message]:
        """The message list the recorded model was shown at model call ``call`` (1-based)."""
        messages = self.history
        for block in self.data["replies"][: call - 1]:
            messages.extend(_block_messages(block))
        return messages

    def messages(self) -> list[Message]:
        """The whole recorded message list."""
        return self.messages_before(len(self.data["replies"]) + 1)

    def dumps(self) -> str:
        return escape_surrogates(json.dumps(self.data, sort_keys=True, indent=2, ensure_ascii=False)) + "\n"

    def write(self, path: str | Path) -> Path:
        """Write the fixture atomically: a failed write leaves any earlier file as it was.

        Through a symlink it writes the file the link points at (creating it when missing), and
        it refuses a path that holds anything but a regular file (a directory, a FIFO, a device):
        the rename that makes the write atomic would replace that node with a file.
        """
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(file_to_replace(target), self.dumps())
        return target


NODE_KINDS: Final = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                     (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def file_to_replace(target: Path) -> Path:
    """The regular file a write to ``target`` replaces: ``target``, or the file a symlink there leads to.

    Missing, it is the path to create. Anything else there raises ``FileExistsError`` in one line.
    """
    real = Path(os.path.realpath(target))
    try:
        mode = os.stat(real).st_mode
    except FileNotFoundError:
        return real
    if stat.S_ISREG(mode):
        return real
    kind = next((name for test, name in NODE_KINDS if test(mode)), "a special file")
    raise FileExistsError(errno.EEXIST, f"not a regular file ({kind}); a fixture replaces only a regular file",
                          str(target))


def write_atomically(target: Path, text: str) -> None:
    """Write ``text`` to a temporary file beside ``target``, then rename it over ``target``.

    The rename is atomic on POSIX and Windows, so a reader (or a crash) sees the old
    file or the new one, never a truncated one; the temporary file is removed on failure.
    """
    temporary = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
    try:
        with open(temporary, "x", encoding="utf-8") as file:
            file.write(text)
            file.flush()
            os.fsync(file.fileno())
        with contextlib.suppress(OSError):
            os.chmod(temporary, stat.S_IMODE(target.stat().st_mode))  # keep an existing file's mode
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            temporary.unlink()
        raise


def _block_messages(block: Mapping[str, Any]) -> list[Message]:
    if "stop" in block or "rejected" in block:
        return []
    reply = ModelReply(block["content"], [ToolCall(c["id"], c["name"], c["args"]) for c in block["tool_calls"]])
    out: list[Message] = [assistant_message(reply)]
    out.extend({"role": "tool", "tool_call_id": o["call_id"], "name": o["name"], "content": o["content"]}
               for o in block["observations"])
    if "told" in block:
        out.append({"role": "user", "content": block["told"]})
    return out


def load_fixture(path: str | Path) -> Fixture:
    """Read and check a fixture file; ``FixtureError`` says what is wrong in one line."""
    file = Path(path)
    if file.exists() and not file.is_file():  # a directory, a FIFO (reading one can block for ever), a device
        raise FixtureError(f"fixture {str(file)!r} is not a regular file")
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FixtureError(f"no fixture file {str(file)!r}") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:  # ValueError: bad JSON, or a too long integer
        raise FixtureError(f"fixture {str(file)!r} is not readable JSON: {exc}") from None
    except RecursionError:
        raise FixtureError(f"fixture {str(file)!r} is not readable JSON: nested too deeply") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise FixtureError(f"{str(file)!r} is not a runner fixture (no \"format\": {FORMAT!r})")
    if data.get("version") != VERSION:
        raise FixtureError(f"fixture {str(file)!r} has version {data.get('version')!r}; "
                           f"this runner reads version {VERSION}")
    try:
        return Fixture(data)
    except ShapeError as exc:
        raise exc.at(str(file)) from None


def fixture_from_run(run: StoredRun, store: RunStore | None = None) -> Fixture:
    """Build the fixture of a stored run from its event log (a finished run only).

    With the ``store`` it is in, the fixture holds its sub-agents' child runs too (``children``).
    """
    if run.status == Status.RUNNING:
        raise FixtureError(f"run {run.run_id} has not finished (status running, {run.liveness}); "
                           "only a finished run can become a fixture")
    facts = run.facts
    ends = _segment_ends(facts)
    state = RunState(run_id=run.run_id)
    replies: list[dict[str, Any]] = []
    by_step: dict[int, dict[str, Any]] = {}
    history: list[Message] = []
    resumes: list[dict[str, Any]] = []
    forked_at: int | None = None
    output: OutputSchema | None = None
    stepped = False
    for fact in facts:
        if isinstance(fact, RunResumed):
            resumes.append(_boundary(state, fact, len(replies), ends[len(resumes)]))
        elif isinstance(fact, ModelCalled):
            block = _reply_block(fact, *ends[len(resumes)])
            if block is not None:
                replies.append(block)
                by_step[fact.step] = block
        elif isinstance(fact, MessageAppended):
            message = fact.message
            if not stepped:
                history.append(message)
            elif message["role"] == "tool":
                by_step[fact.step]["observations"].append(
                    {"call_id": message["tool_call_id"], "name": message["name"], "content": message["content"]})
            elif message["role"] == "user" and fact.step in by_step:  # the loop asked for the typed result
                by_step[fact.step]["told"] = message["content"]
        elif isinstance(fact, RunStarted):
            forked_at, output = fact.forked_at_step, fact.output_schema
        elif isinstance(fact, StepStarted):
            stepped = True
        state.apply(fact)
    data: dict[str, Any] = {
        "format": FORMAT,
        "version": VERSION,
        "run_id": run.run_id,
        "model": run.model,
        "provider": run.provider,
        "task": run.task,
        "system": run.system,
        "limits": run.limits,
        "tool_specs": _shown_specs(run.tool_specs, output),
        "replies": replies,
        "outcome": {
            "status": run.status,
            "answer": run.answer,
            "error": run.error,
            "steps": run.steps,
            "tokens": run.tokens,
            "tool_calls": run.tool_calls,
            "stopped_before_call": _interrupted_call(state, run.status, replies),
        },
    }
    if history != [{"role": "system", "content": run.system}, {"role": "user", "content": run.task}]:
        data["history"] = history
    if forked_at is not None:
        data["forked_at_step"] = forked_at
    if resumes:
        data["resumes"] = resumes
    if output is not None:
        data["output_schema"] = output
        data["outcome"]["output"] = run.output
    children = {call_id: fixture_from_run(child, store).data
                for call_id, child in (child_runs(run, store) if store is not None else {}).items()}
    if children:
        data["children"] = children
    return Fixture(data)


def _shown_specs(registered: list[dict[str, Any]], output: OutputSchema | None) -> list[dict[str, Any]]:
    """The tools the recorded model was shown: the run's, and ``final_result`` when it was to end with one."""
    if output is None or output["mode"] != "tool":
        return registered
    return [*registered, dict(output_from_log(output).tool_spec())]


CRASHED: Final = "crashed"


def _segment_ends(facts: Sequence[Event]) -> list[tuple[str, str | None]]:
    """How each part of the run between resumes ended: its status and error, or ``crashed``."""
    ends: list[tuple[str, str | None]] = []
    current: tuple[str, str | None] = (CRASHED, None)
    for fact in facts:
        if isinstance(fact, RunFinished):
            current = (fact.status, fact.error)
        elif isinstance(fact, RunResumed):
            ends.append(current)
            current = (CRASHED, None)
    ends.append(current)
    return ends


def _boundary(state: RunState, resumed: RunResumed, replies: int, end: tuple[str, str | None]) -> dict[str, Any]:
    status, error = end
    return {
        "after_replies": replies, "status": status, "error": error, "reason": resumed.reason,
        "limits": resumed.limits, "decisions": resumed.decisions,
        "stopped_before_call": _interrupted_call(state, status, None),
        "in_doubt": [c.id for c in state.remaining_calls if state.in_doubt(c.id)],
        "in_model_call": status == CRASHED and state.open_step and state.reply is None,
    }


def _reply_block(fact: ModelCalled, status: str, error: str | None) -> dict[str, Any] | None:
    reply = fact.reply
    if reply is not None:
        data = reply_data(reply)
        block = {"step": fact.step, "content": data["content"], "tool_calls": data["tool_calls"],
                 "usage": data["usage"], "stop_reason": data["stop_reason"], "observations": []}
        if fact.error:  # logged, but refused by the loop (a duplicate call id): never appended
            block["rejected"] = fact.error
        if fact.cost_usd is not None:  # as recorded: a replay counts a cost budget with the costs it had
            block["cost_usd"], block["price_source"] = fact.cost_usd, fact.price_source
        return block
    # No reply: the model raised, or the run stopped while waiting on it.
    kind = fact.error_type if fact.error_type in STATUSES else Status.MODEL_ERROR
    if kind in INTERRUPTIBLE and status != kind:
        return None
    reason = error if kind == status and error else (fact.error or kind)
    return {"step": fact.step, "stop": {"status": kind, "reason": reason}}


def _interrupted_call(state: RunState, status: str, replies: list[dict[str, Any]] | None) -> str | None:
    """The call a deadline, cancel or crash stopped (running, or due next), for replay to stop at."""
    if status not in (*INTERRUPTIBLE, CRASHED) or (replies and "stop" in replies[-1]):
        return None
    for call in state.remaining_calls:
        if not state.in_doubt(call.id):
            return call.id
    return None
