"""A run whose names hold characters nobody can see, for the CLI's and the console's tests of ``shown_name``."""

from __future__ import annotations

from runner import ScriptedModel, ToolRegistry, run_agent
from runner.store import RunStore
from tests.loop.helpers import call, reply

# U+200B zero-width space, U+200D zero-width joiner, U+2060 word joiner, U+FEFF zero-width no-break
# space (BOM), U+202E right-to-left override.
INVISIBLE = {"\u200b": "\\u200b", "\u200d": "\\u200d", "\u2060": "\\u2060", "\ufeff": "\\ufeff", "\u202e": "\\u202e"}
# Free text: a ZWJ emoji sequence, a Persian word with its ZWNJ, a Devanagari one.
TASK = "Greet 👩\u200d💻 in \u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645 and नमस्ते"
ANSWER = "done 👩\u200d💻"


class NamedModel(ScriptedModel):
    model_name = "gp\u200bt"


def tools() -> ToolRegistry:
    """``echo`` and one look-alike per invisible character, each answering its own name."""
    registry = ToolRegistry()
    for name in ["echo", *(f"ech{char}o" for char in INVISIBLE)]:
        registry.register(name, "Echo.", {"type": "object", "properties": {}}, lambda name=name: f"ran {name!r}")
    return registry


def record(store: RunStore) -> str:
    calls = [call(f"c{i}{char}", f"ech{char}o") for i, char in enumerate(INVISIBLE)]
    labels = {f"te{char}am": f"bl{char}ue" for char in INVISIBLE}
    result = run_agent(TASK, NamedModel([reply("", call("c-plain", "echo"), *calls), ANSWER]), tools(), store=store,
                       labels=labels, agent_name="ag\u2060ent", max_identical_calls=9, decided_by="b\u200bob")
    assert result.status == "done", result.error
    return result.run_id
