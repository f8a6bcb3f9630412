"""How a replay differs from its recording, each difference as one readable sentence.

Three things are compared: the tool specs the model is shown (a changed
description or schema changes what the model does, so it is drift too), the
message list at every model call, and the calls of each reply against the calls
the recording handled, before any of them runs.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from ..errors import ReplayDivergence
from ..messages import Message, ToolSpec

SHOWN_CHARS: Final = 120
SPEC_CHANGES_SHOWN: Final = 3
ABSENT: Final = object()


def compare_specs(step: int, recorded: Sequence[Mapping[str, Any]], got: Sequence[ToolSpec]
                  ) -> ReplayDivergence | None:
    """The tools shown to the model against the recording's: added, removed or changed tools, or their order."""
    want = {spec["name"]: spec for spec in recorded}
    have = {spec["name"]: spec for spec in got}
    changes: list[str] = []
    for name, spec in want.items():
        if name not in have:
            changes.append(f"tool {name!r} was removed")
            continue
        mine = have[name]
        if spec["description"] != mine["description"]:
            changes.append(f"the description of tool {name!r} changed: recorded {shown(spec['description'])}, "
                           f"got {shown(mine['description'])}")
        if spec["parameters"] != mine["parameters"]:
            where, before, after = first_difference(spec["parameters"], mine["parameters"])
            at = f" at {where}" if where else ""
            changes.append(f"the parameters of tool {name!r} changed{at}: recorded {shown_value(before)}, "
                           f"got {shown_value(after)}")
    changes.extend(f"tool {name!r} was added" for name in have if name not in want)
    if not changes and list(want) != list(have):
        changes.append(f"the tools are in a different order: recorded {list(want)}, got {list(have)}")
    if not changes and [dict(s) for s in recorded] != [dict(s) for s in got]:
        changes.append("a tool spec holds other fields than recorded")
    if not changes:
        return None
    listed = "; ".join(changes[:SPEC_CHANGES_SHOWN])
    if len(changes) > SPEC_CHANGES_SHOWN:
        listed += f"; and {len(changes) - SPEC_CHANGES_SHOWN} more changes"
    return ReplayDivergence(step, None, "tool_specs",
                            f"at step {step} the tools shown to the model differ from the recording: {listed}",
                            list(recorded), list(got), diff(list(recorded), list(got)))


def first_difference(recorded: Any, got: Any, path: str = "") -> tuple[str, Any, Any]:
    """The dotted path of the first place two JSON values differ, and the values there."""
    if isinstance(recorded, dict) and isinstance(got, dict):
        for key in [*recorded, *(k for k in got if k not in recorded)]:
            before, after = recorded.get(key, ABSENT), got.get(key, ABSENT)
            if before != after:
                return first_difference(before, after, f"{path}.{key}" if path else str(key))
    return path, recorded, got


def compare_output(step: int, recorded: Any, got: Any) -> ReplayDivergence | None:
    """The typed result against the recording's, named by its first differing field (``output.total``)."""
    if recorded == got:
        return None
    where, before, after = first_difference(recorded, got)
    field = f"output.{where}" if where else "output"
    return ReplayDivergence(step, None, "output", f"{field}: recorded {as_json(before)}, got {as_json(after)}",
                            recorded, got, diff(recorded, got))


def as_json(value: Any) -> str:
    """A JSON value as JSON text (``12.5``, ``"EUR"``), cut to ``SHOWN_CHARS``; ``nothing`` for a missing one."""
    if value is ABSENT:
        return "nothing"
    text = json.dumps(value, sort_keys=True, ensure_ascii=False)
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "..."


def compare_calls(step: int, block: Mapping[str, Any], last: bool) -> ReplayDivergence | None:
    """A call in a recorded reply that the recording did not handle, found before anything runs.

    The loop handles the calls of a reply in order, one observation each, and
    stops only inside the last reply; so every call has the observation at its
    position, except calls after the point where the recording stopped.
    """
    observations = block["observations"]
    for position, call in enumerate(block["tool_calls"]):
        if position >= len(observations):
            if last:
                return None
            return ReplayDivergence(step, None, "tool_calls",
                                    f"at step {step} the reply calls {call['name']} ({call['id']}), but the "
                                    "recording has no result for that call; nothing was run",
                                    None, {"id": call["id"], "name": call["name"]})
        observed = observations[position]
        if (observed["call_id"], observed["name"]) != (call["id"], call["name"]):
            return ReplayDivergence(step, None, "tool_calls",
                                    f"at step {step} the reply calls {call['name']} ({call['id']}), but the "
                                    f"recording handled {observed['name']} ({observed['call_id']}) there; "
                                    "nothing was run",
                                    {"id": observed["call_id"], "name": observed["name"]},
                                    {"id": call["id"], "name": call["name"]})
    return None


def unrecorded_run(step: int, name: str, call_id: str) -> ReplayDivergence:
    """The loop was about to run a call the recording never handled (say, under a larger budget)."""
    return ReplayDivergence(step, None, "tool_calls",
                            f"at step {step} the loop was about to run {name} ({call_id}), a call the recording "
                            "did not make; it was not run", None, {"id": call_id, "name": name})


def compare_messages(step: int, recorded: Sequence[Message], got: Sequence[Message]) -> ReplayDivergence | None:
    """The first difference between two message lists, as a readable divergence."""
    for index, (want, have) in enumerate(zip(recorded, got, strict=False)):
        if want != have:
            return _message_divergence(step, index, want, have)
    if len(recorded) != len(got):
        index = min(len(recorded), len(got))
        if len(got) > len(recorded):
            extra = got[index]
            return ReplayDivergence(step, index, "messages",
                                    f"at step {step} the loop showed an extra message {index} "
                                    f"({_describe(extra)}) that the recording does not have",
                                    None, extra)
        missing = recorded[index]
        return ReplayDivergence(step, index, "messages",
                                f"at step {step} message {index} ({_describe(missing)}) is missing from "
                                "the replay", missing, None)
    return None


def _message_divergence(step: int, index: int, want: Message, have: Message) -> ReplayDivergence:
    field_name = next((k for k in ("role", "tool_call_id", "name", "content", "tool_calls")
                       if want.get(k) != have.get(k)), "message")
    recorded, got = want.get(field_name), have.get(field_name)
    if want["role"] == "tool" and field_name == "content":
        what = f"the result of call {want['tool_call_id']} ({want['name']})"
    elif index == 0 and field_name == "content":
        what = "the system prompt"
    elif index == 1 and field_name == "content":
        what = "the task"
    else:
        what = f"message {index} ({_describe(want)}) field {field_name!r}"
    sentence = f"at step {step} {what} differs: recorded {shown(recorded)}, got {shown(got)}"
    return ReplayDivergence(step, index, field_name, sentence, recorded, got, diff(recorded, got))


def _describe(message: Message) -> str:
    if message["role"] == "tool":
        return f"result of call {message['tool_call_id']} ({message['name']})"
    if message["role"] == "assistant" and message["tool_calls"]:
        return "assistant calling " + ", ".join(c["name"] for c in message["tool_calls"])
    return f"{message['role']} message"


def shown(value: Any) -> str:
    """A value quoted for a sentence, cut to ``SHOWN_CHARS``."""
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return repr(text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "...")


def shown_value(value: Any) -> str:
    return "nothing" if value is ABSENT else shown(value)


def diff(recorded: Any, got: Any) -> str:
    def lines(value: Any) -> list[str]:
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                return value.splitlines() or [""]
        return json.dumps(value, indent=1, sort_keys=True).splitlines()

    out = list(difflib.unified_diff(lines(recorded), lines(got), "recorded", "replayed", n=1, lineterm=""))
    return "\n".join(out[:20] + (["..."] if len(out) > 20 else []))
