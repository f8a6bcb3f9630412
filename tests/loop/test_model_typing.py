"""A plain, correctly typed function is a model, for mypy as much as at run time.

``mypy --strict tests`` (part of ``make lint``) checks this file, so the typed models
below pin the ``Model`` and ``AsyncModel`` protocols statically; the subprocess test
pins the same thing for a user's own code, whatever they name the parameters.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from runner import AsyncModel, Message, Model, ModelReply, ToolRegistry, ToolSpec, arun_agent, run_agent


def sync_model(messages: Sequence[Message], specs: Sequence[ToolSpec]) -> ModelReply:
    return ModelReply(content=f"{len(messages)} messages, {len(specs)} tools")


async def async_model(history: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelReply:
    await asyncio.sleep(0)
    return ModelReply(content=f"{len(history)} messages, {len(tools)} tools")

if TYPE_CHECKING:  # the adapters are models too: checked by mypy only (no SDK imported at run time)
    from runner.adapters import AnthropicModel, AsyncAnthropicModel, AsyncOpenAIModel, OpenAIModel

    def _adapters_are_models(a: OpenAIModel, b: AnthropicModel, c: AsyncOpenAIModel, d: AsyncAnthropicModel
                             ) -> tuple[Model, Model, AsyncModel, AsyncModel]:
        return a, b, c, d


def test_a_typed_function_with_its_own_parameter_names_is_a_model() -> None:
    model: Model = sync_model
    result = run_agent("t", model, ToolRegistry())
    assert (result.status, result.answer) == ("done", "2 messages, 0 tools")


def test_arun_agent_takes_a_typed_coroutine_function_and_a_typed_plain_one() -> None:
    amodel: AsyncModel = async_model
    awaited = asyncio.run(arun_agent("t", amodel, ToolRegistry()))
    threaded = asyncio.run(arun_agent("t", sync_model, ToolRegistry()))
    assert (awaited.status, awaited.answer) == ("done", "2 messages, 0 tools")
    assert (threaded.status, threaded.answer) == ("done", "2 messages, 0 tools")


USER_CODE = '''
import asyncio
from collections.abc import Sequence

from runner import Message, ModelReply, ToolRegistry, ToolSpec, arun_agent, run_agent


def model(messages: Sequence[Message], specs: Sequence[ToolSpec]) -> ModelReply:
    return ModelReply(content="ok")


async def amodel(messages: Sequence[Message], specs: Sequence[ToolSpec]) -> ModelReply:
    return ModelReply(content="ok")


run_agent("t", model, ToolRegistry())
asyncio.run(arun_agent("t", model, ToolRegistry()))
asyncio.run(arun_agent("t", amodel, ToolRegistry()))
'''

# A control: the same check must reject a model that returns the wrong thing, so a
# pass above means mypy saw runner's types (not an untyped, all-Any import).
WRONG_MODEL = '''
import asyncio
from collections.abc import Sequence

from runner import Message, ToolRegistry, ToolSpec, arun_agent, run_agent


def model(messages: Sequence[Message], specs: Sequence[ToolSpec]) -> str:
    return "ok"


run_agent("t", model, ToolRegistry())
asyncio.run(arun_agent("t", model, ToolRegistry()))
'''


def _mypy(tmp_path: Path, code: str) -> subprocess.CompletedProcess[str]:
    snippet = tmp_path / "user_model.py"
    snippet.write_text(code)
    cache = Path(__file__).resolve().parents[2] / ".mypy_cache"  # shared with `make lint`: warm, so fast
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-error-summary", "--cache-dir", str(cache), str(snippet)],
        capture_output=True, text=True, cwd=tmp_path, timeout=110,
    )


@pytest.mark.process
def test_mypy_strict_accepts_a_users_typed_model_function(tmp_path: Path) -> None:
    checked = _mypy(tmp_path, USER_CODE)
    assert (checked.returncode, checked.stdout, checked.stderr) == (0, "", "")


@pytest.mark.process
def test_mypy_strict_rejects_a_model_function_that_returns_a_string(tmp_path: Path) -> None:
    checked = _mypy(tmp_path, WRONG_MODEL)
    assert checked.returncode == 1
    assert [line.split(": error: ")[1].split(";")[0] for line in checked.stdout.splitlines() if ": error: " in line] \
        == ['Argument 2 to "run_agent" has incompatible type "Callable[[Sequence[SystemMessage | UserMessage | '
            'AssistantMessage | ToolMessage], Sequence[ToolSpec]], str]"',
            'Argument 2 to "arun_agent" has incompatible type "Callable[[Sequence[SystemMessage | UserMessage | '
            'AssistantMessage | ToolMessage], Sequence[ToolSpec]], str]"']
