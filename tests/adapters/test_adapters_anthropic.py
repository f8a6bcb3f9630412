"""AnthropicModel over the real ``anthropic`` client, its HTTP transport scripted."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx2
import openai
import pytest

from runner import ModelReply, ToolCall, Usage, run_agent
from runner.adapters import AnthropicModel, AsyncAnthropicModel, MissingDependency, anthropic_model
from runner.adapters.anthropic import async_anthropic_model, to_anthropic_messages
from tests.adapters.helpers import (
    CONVERSATION,
    SPECS,
    START,
    TEST_HOST,
    WEATHER_SCHEMA,
    Ran,
    ScriptedServer,
    sdk_connections,
    weather_registry,
)
from tests.adapters.wire import ANTHROPIC_MODEL, message, text, tool_use

MODEL = ANTHROPIC_MODEL
TOOLS_JSON = [{"name": "get_weather", "description": "Current temperature in a city.", "input_schema": WEATHER_SCHEMA}]


Connect = Any


@pytest.fixture
def connect() -> Iterator[Connect]:
    """``connect(server, **model_options)`` -> an AnthropicModel over a real client; closed after the test."""
    yield from sdk_connections(anthropic.Anthropic, "",
                               lambda client, **options: AnthropicModel(client, MODEL, **options))


def test_final_answer_sends_system_apart_and_maps_usage(connect: Connect) -> None:
    server = ScriptedServer((200, message(text("Paris is 21 C."))))
    reply = connect(server)(START, [])
    assert reply == ModelReply("Paris is 21 C.", [], Usage(30, 7), "end_turn")
    assert server.paths == ["/v1/messages"]
    assert server.requests[0].headers["authorization"] == "Bearer test"
    assert "anthropic-version" in server.requests[0].headers
    assert server.bodies == [{"model": MODEL, "max_tokens": 1024, "system": "Be brief.",
                              "messages": [{"role": "user", "content": "Weather in Paris?"}]}]


def test_one_call_sends_input_schema_and_maps_tool_use(connect: Connect) -> None:
    server = ScriptedServer((200, message(tool_use("toolu_01", {"city": "Paris"}), stop_reason="tool_use")))
    reply = connect(server, max_tokens=256)(START, SPECS)
    assert reply == ModelReply("", [ToolCall("toolu_01", "get_weather", {"city": "Paris"})], Usage(30, 7), "tool_use")
    assert server.bodies[0]["tools"] == TOOLS_JSON
    assert server.bodies[0]["max_tokens"] == 256


def test_parallel_calls_keep_their_order_and_ids(connect: Connect) -> None:
    server = ScriptedServer((200, message(tool_use("toolu_b", {"city": "Oslo"}), tool_use("toolu_a", {"city": "Paris"}),
                                          stop_reason="tool_use")))
    assert connect(server)(START, SPECS).tool_calls == [ToolCall("toolu_b", "get_weather", {"city": "Oslo"}),
                                                       ToolCall("toolu_a", "get_weather", {"city": "Paris"})]


def test_text_plus_call_keeps_both_and_joins_text_blocks(connect: Connect) -> None:
    server = ScriptedServer((200, message(text("Let me "), text("check."), tool_use("toolu_1", {"city": "Paris"}),
                                          stop_reason="tool_use")))
    reply = connect(server)(START, SPECS)
    assert reply.content == "Let me check."
    assert reply.tool_calls == [ToolCall("toolu_1", "get_weather", {"city": "Paris"})]


def test_history_groups_results_in_one_user_turn_in_call_order(connect: Connect) -> None:
    server = ScriptedServer((200, message(text("Done."))))
    connect(server, stop_sequences=["###"])(CONVERSATION, SPECS)
    assert server.bodies[0] == {"model": MODEL, "max_tokens": 1024, "system": "Be brief.", "tools": TOOLS_JSON,
                                "stop_sequences": ["###"], "messages": [
        {"role": "user", "content": "Weather in Paris and Oslo?"},
        {"role": "assistant", "content": [tool_use("call_1", {"city": "Paris"}), tool_use("call_2", {"city": "Oslo"})]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "call_1", "content": '{"celsius": 21}', "is_error": False},
            {"type": "tool_result", "tool_use_id": "call_2", "content": "ERROR: get_weather failed: boom",
             "is_error": True},
        ]},
        {"role": "assistant", "content": [text("Let me retry Oslo."), tool_use("call_3", {})]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "call_3", "content": "ERROR: bad args", "is_error": True}]},
    ]}


def test_several_system_messages_are_joined() -> None:
    system, conversation = to_anthropic_messages([
        {"role": "system", "content": "A."}, {"role": "system", "content": "B."}, {"role": "user", "content": "Hi"}])
    assert (system, conversation) == ("A.\n\nB.", [{"role": "user", "content": "Hi"}])


def test_malformed_input_becomes_an_observation_and_the_tool_does_not_run(connect: Connect) -> None:
    server = ScriptedServer(
        (200, message(tool_use("toolu_1", '{"city": "Par'), stop_reason="tool_use")),
        (200, message(tool_use("toolu_2", {"city": "Paris"}), stop_reason="tool_use")),
        (200, message(text("21 C in Paris."))),
    )
    ran = Ran()
    result = run_agent("Weather in Paris?", connect(server), weather_registry(ran), system="Be brief.")
    assert (result.status, result.answer, ran.cities) == ("done", "21 C in Paris.", ["Paris"])
    assert server.bodies[1]["messages"][1:] == [
        {"role": "assistant", "content": [tool_use("toolu_1", {})]},
        {"role": "user", "content": [{
            "type": "tool_result", "tool_use_id": "toolu_1", "is_error": True,
            "content": "ERROR: arguments must be a JSON object, got a string that did not parse: "
                       "'{\"city\": \"Par'. get_weather expects {\"city\": {\"type\": \"string\"}}"}]},
    ]
    assert result.messages[2] == {"role": "assistant", "content": "", "tool_calls": [
        {"id": "toolu_1", "name": "get_weather", "args": '{"city": "Par'}]}  # the log keeps what the model sent


def test_max_tokens_cut_off_is_surfaced_as_length(connect: Connect) -> None:
    server = ScriptedServer((200, message(text("The weather in Par"), stop_reason="max_tokens", usage=(30, 1024))),
                            (200, message(stop_reason="model_context_window_exceeded")))
    model = connect(server)
    assert model(START, SPECS) == ModelReply("The weather in Par", [], Usage(30, 1024), "length")
    assert model(START, SPECS).stop_reason == "length"


def test_refusal_and_other_stop_reasons_are_kept(connect: Connect) -> None:
    server = ScriptedServer((200, message(stop_reason="refusal")),
                            (200, message(text("a"), stop_reason="stop_sequence")))
    model = connect(server)
    assert model(START, []) == ModelReply("", [], Usage(30, 7), "refusal")
    assert model(START, []).stop_reason == "stop_sequence"


def test_cached_prompt_tokens_count_as_input_and_apart(connect: Connect) -> None:
    server = ScriptedServer((200, message(text("ok"), cache_creation_input_tokens=100, cache_read_input_tokens=50)))
    assert connect(server)(START, []).usage == Usage(180, 7, cache_read_tokens=50, cache_write_tokens=100)


def test_thinking_blocks_are_not_content(connect: Connect) -> None:
    server = ScriptedServer((200, message({"type": "thinking", "thinking": "hmm", "signature": "sig"}, text("ok"))))
    assert connect(server)(START, []).content == "ok"


def test_rate_limit_is_retried_by_the_sdk(connect: Connect) -> None:
    error = {"type": "error", "error": {"type": "rate_limit_error", "message": "Rate limited"}}
    server = ScriptedServer((429, error, {"retry-after-ms": "1", "retry-after": "0"}), (200, message(text("ok"))))
    reply = connect(server, max_retries=2)(START, SPECS)
    assert reply.content == "ok"
    assert len(server.requests) == 2
    assert server.bodies[0] == server.bodies[1]


def test_two_step_run_sends_the_tool_result_by_id(connect: Connect) -> None:
    server = ScriptedServer(
        (200, message(text("Checking."), tool_use("toolu_9", {"city": "Paris"}), stop_reason="tool_use",
                      usage=(40, 10))),
        (200, message(text("It is 21 C in Paris."), usage=(60, 8))),
    )
    ran = Ran()
    result = run_agent("Weather in Paris?", connect(server), weather_registry(ran), system="Be brief.")
    assert (result.status, result.answer, result.steps, result.tokens) == ("done", "It is 21 C in Paris.", 2, 118)
    assert ran.cities == ["Paris"]
    assert server.bodies[1]["messages"] == [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": [text("Checking."), tool_use("toolu_9", {"city": "Paris"})]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_9", "content": '{"celsius": 21}', "is_error": False}]},
    ]


def test_async_model_over_the_async_client() -> None:
    server = ScriptedServer((200, message(tool_use("toolu_1", {"city": "Oslo"}), stop_reason="tool_use")))

    async def main() -> ModelReply:
        client = anthropic.AsyncAnthropic(api_key="test", base_url=f"http://{TEST_HOST}", max_retries=0,
                                          http_client=httpx2.AsyncClient(transport=server.transport()))
        async with AsyncAnthropicModel(client, MODEL, max_tokens=64) as model:
            assert (model.model_name, model.provider_name) == (MODEL, "anthropic")
            return await model(START, SPECS)

    reply = asyncio.run(main())
    assert reply == ModelReply("", [ToolCall("toolu_1", "get_weather", {"city": "Oslo"})], Usage(30, 7), "tool_use")
    assert server.bodies[0] == {"model": MODEL, "max_tokens": 64, "system": "Be brief.", "tools": TOOLS_JSON,
                                "messages": [{"role": "user", "content": "Weather in Paris?"}]}


@pytest.mark.parametrize(("options", "message_"), [
    ({"system": "x"}, r"request option\(s\) \['system'\] are set by the adapter"),
    ({"thinking": {"type": "enabled", "budget_tokens": 2048}}, "extended thinking is not supported"),
    ({"max_tokens": 0}, "max_tokens must be a positive integer, got 0"),
])
def test_mistakes_are_refused_at_construction(options: dict[str, Any], message_: str) -> None:
    with pytest.raises(ValueError, match=message_):
        AnthropicModel(None, MODEL, **options)  # type: ignore[arg-type]


def test_anthropic_model_builds_a_client(monkeypatch: pytest.MonkeyPatch) -> None:
    with anthropic_model(MODEL, 512, api_key="k", base_url="http://127.0.0.1:9000", max_retries=1,
                         timeout=30, tool_choice={"type": "auto"}) as model:
        assert isinstance(model.client, anthropic.Anthropic)
        assert (str(model.client.base_url), model.client.api_key) == ("http://127.0.0.1:9000", "k")
        assert (model.client.max_retries, model.client.timeout) == (1, 30)
        assert (model.max_tokens, model.request_options) == (512, {"tool_choice": {"type": "auto"}})
        assert repr(model) == "AnthropicModel(model='claude-sonnet-5', max_tokens=512)"


def test_anthropic_model_for_a_local_server_sends_a_placeholder_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with anthropic_model("local", base_url="http://127.0.0.1:8088") as model:
        assert model.client.api_key == "unused"
    monkeypatch.setenv("ANTHROPIC_API_KEY", "from-env")
    with anthropic_model("local", base_url="http://127.0.0.1:8088") as model:
        assert model.client.api_key == "from-env"


def test_anthropic_model_without_the_sdk_gives_the_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "anthropic", None)
    with pytest.raises(MissingDependency, match=r"pip install 'durable-agent-runner\[anthropic\]'"):
        anthropic_model(MODEL)


def test_the_network_guard_refuses_real_connections() -> None:
    # 192.0.2.1 is TEST-NET-1 (documentation only); the guard lets 127.0.0.1 through for the local SSE servers.
    with openai.OpenAI(api_key="t", base_url="http://192.0.2.1:9/v1", max_retries=0) as client, \
            pytest.raises(AssertionError, match="a test tried to open a real network connection"):
        client.models.list()


@pytest.mark.parametrize("build", [anthropic_model, async_anthropic_model])
def test_anthropic_model_without_a_key_or_server_is_refused_before_any_request(
        monkeypatch: pytest.MonkeyPatch, build: Any) -> None:
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ValueError, match=r"^no Anthropic API key: pass api_key or set ANTHROPIC_API_KEY"):
        build(MODEL)
    monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", "token")  # the SDK's other credential
    assert build(MODEL).client.auth_token == "token"
