"""Usage a server reports that is not token counts stops the run ``invalid_reply``, through the real SDKs.

Before, such a reply read as "no usage": never priced, so ``max_cost_usd`` never tripped. The
bodies are sent as Python's ``json.dumps`` writes them, so NaN goes on the wire as ``NaN``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest

from runner import Usage, resume, run_agent
from runner.adapters import AnthropicModel, OpenAIModel
from runner.events import ModelCalled
from runner.store import RunStore
from tests.adapters.helpers import START, Ran, ScriptedServer, sdk_connections, weather_registry
from tests.adapters.wire import completion, message, text, tool_use

OPENAI = "gpt-4o-mini"
ANTHROPIC = "claude-sonnet-5"
PRICES = {ANTHROPIC: {"input_mtok": 3.0, "output_mtok": 15.0}}
# Not a count: each stopped the run as if the server had reported no usage.
BAD = [pytest.param(-1, id="negative"), pytest.param(2.5, id="fractional"), pytest.param("many", id="string"),
       pytest.param(float("nan"), id="nan"), pytest.param(1e30, id="1e30")]
# The SDKs read "12" as 12 and true as 1 in their optional counts (all of OpenAI's, Anthropic's cache
# counts); Anthropic's input and output counts they hand over as sent.
BAD_AS_SENT = [*BAD, pytest.param("12", id="digits-string"), pytest.param(True, id="bool")]
ANTHROPIC_BAD = [pytest.param(field, *bad.values, id=f"{field}-{bad.id}")
                 for field in ("input_tokens", "output_tokens") for bad in BAD_AS_SENT] + [
                 pytest.param(field, *bad.values, id=f"{field}-{bad.id}")
                 for field in ("cache_read_input_tokens", "cache_creation_input_tokens") for bad in BAD]

Connect = Any


@pytest.fixture
def openai_connect() -> Iterator[Connect]:
    yield from sdk_connections(openai.OpenAI, "/v1", lambda client, **options: OpenAIModel(client, OPENAI, **options))


@pytest.fixture
def anthropic_connect() -> Iterator[Connect]:
    yield from sdk_connections(anthropic.Anthropic, "",
                               lambda client, **options: AnthropicModel(client, ANTHROPIC, **options))


def wire(body: dict[str, Any]) -> bytes:
    return json.dumps(body).encode()  # allow_nan: NaN is written as the bare word NaN


def openai_call(usage: tuple[object, object] = (20, 5)) -> bytes:
    body = completion(None, [("call_1", "get_weather", '{"city": "Paris"}')], "tool_calls")
    body["usage"].update(prompt_tokens=usage[0], completion_tokens=usage[1])
    return wire(body)


def model_calls(store: RunStore, run_id: str) -> list[ModelCalled]:
    return [f for f in store.get_run(run_id).facts if isinstance(f, ModelCalled)]


@pytest.mark.parametrize("bad", BAD)
@pytest.mark.parametrize("where", ["prompt", "completion"])
def test_openai_usage_that_is_not_a_count_stops_the_run_invalid_reply_and_a_resume_goes_on(
        store: RunStore, openai_connect: Connect, bad: object, where: str) -> None:
    usage = (bad, 5) if where == "prompt" else (20, bad)
    server = ScriptedServer((200, openai_call(usage)), (200, completion("21 C in Paris.")))
    ran = Ran()
    result = run_agent("Weather in Paris?", openai_connect(server), weather_registry(ran), store=store,
                       max_cost_usd=1.0)
    assert result.status == "invalid_reply"
    assert (result.error or "").startswith("reply usage must be Usage(input_tokens, output_tokens) of non-negative "
                                           f"ints, got Usage(input_tokens={usage[0]!r}, output_tokens={usage[1]!r})")
    assert (ran.cities, len(server.requests)) == ([], 1)  # its call did not run; no second model call
    (called,) = model_calls(store, result.run_id)
    assert (called.cost_usd, called.error_type) == (None, "invalid_reply")
    # docs/loop.md: invalid_reply is resumable; the model is asked again
    again = ScriptedServer((200, openai_call()), (200, completion("21 C in Paris.")))
    more = resume(store, result.run_id, openai_connect(again), weather_registry(ran), max_cost_usd=1.0)
    assert (more.status, more.answer, ran.cities) == ("done", "21 C in Paris.", ["Paris"])
    assert more.cost_usd is not None


@pytest.mark.parametrize("bad", BAD)
def test_an_openai_cached_count_that_is_not_a_count_is_an_invalid_reply(openai_connect: Connect, bad: object) -> None:
    body = completion("hi")
    body["usage"]["prompt_tokens_details"] = {"cached_tokens": bad}
    result = run_agent("t", openai_connect(ScriptedServer((200, wire(body)))), weather_registry(Ran()))
    assert result.status == "invalid_reply"
    assert (result.error or "").startswith(f"reply usage must count cached tokens in non-negative ints, got "
                                           f"cache_read_tokens={bad!r}")


@pytest.mark.parametrize(("field", "bad"), ANTHROPIC_BAD)
def test_anthropic_usage_that_is_not_a_count_stops_the_run_invalid_reply(
        store: RunStore, anthropic_connect: Connect, bad: object, field: str) -> None:
    body = message(tool_use("toolu_1", {"city": "Paris"}), stop_reason="tool_use")
    body["usage"][field] = bad
    server = ScriptedServer((200, wire(body)), (200, message(text("21 C in Paris."))))
    ran = Ran()
    result = run_agent("Weather in Paris?", anthropic_connect(server, max_tokens=64), weather_registry(ran),
                       store=store, prices=PRICES, max_cost_usd=1.0)
    assert result.status == "invalid_reply"
    assert (result.error or "").startswith("reply usage must ")
    assert (ran.cities, len(server.requests)) == ([], 1)
    assert [f.cost_usd for f in model_calls(store, result.run_id)] == [None]


def test_whole_counts_sent_as_floats_and_null_cache_counts_are_usage(openai_connect: Connect,
                                                                   anthropic_connect: Connect) -> None:
    body = completion("hi")
    body["usage"].update(prompt_tokens=20.0, completion_tokens=5.0, prompt_tokens_details={"cached_tokens": None})
    assert openai_connect(ScriptedServer((200, wire(body))))(START, []).usage == Usage(20, 5)
    reply = message(text("hi"), usage=(30, 7))
    reply["usage"].update(input_tokens=30.0, cache_read_input_tokens=None, cache_creation_input_tokens=2.0)
    assert anthropic_connect(ScriptedServer((200, wire(reply))), max_tokens=64)(START, []).usage == Usage(
        32, 7, 0, 2)


def test_a_null_count_beside_a_bad_one_is_still_an_invalid_reply(openai_connect: Connect) -> None:
    body = completion("hi")
    body["usage"].update(prompt_tokens=None, completion_tokens=-3)
    result = run_agent("t", openai_connect(ScriptedServer((200, wire(body)))), weather_registry(Ran()))
    assert result.status == "invalid_reply"
    assert result.error == ("reply usage must be Usage(input_tokens, output_tokens) of non-negative ints, got "
                            "Usage(input_tokens=None, output_tokens=-3)")
