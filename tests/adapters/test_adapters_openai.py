"""OpenAIModel over the real ``openai`` client, its HTTP transport scripted."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any, cast

import httpx
import httpx2
import openai
import pytest

from runner import ModelReply, ToolCall, Usage, run_agent
from runner.adapters import (
    AsyncOpenAIModel,
    MissingDependency,
    OpenAIModel,
    UnusableResponse,
    openai_model,
)
from runner.adapters.openai import to_openai_messages
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
from tests.adapters.wire import OPENAI_MODEL, completion

MODEL = OPENAI_MODEL
TOOLS_JSON = [{"type": "function", "function": {
    "name": "get_weather", "description": "Current temperature in a city.", "parameters": WEATHER_SCHEMA}}]


Connect = Any


@pytest.fixture
def connect() -> Iterator[Connect]:
    """``connect(server, **model_options)`` -> an OpenAIModel over a real client; closed after the test."""
    yield from sdk_connections(openai.OpenAI, "/v1", lambda client, **options: OpenAIModel(client, MODEL, **options))


def test_final_answer_sends_messages_without_tools_and_maps_usage(connect: Connect) -> None:
    server = ScriptedServer((200, completion("Paris is 21 C.")))
    reply = connect(server)(START, [])
    assert reply == ModelReply("Paris is 21 C.", [], Usage(20, 5), "stop")
    assert server.paths == ["/v1/chat/completions"]
    assert server.requests[0].headers["authorization"] == "Bearer test"
    assert server.bodies == [{"model": MODEL, "messages": [
        {"role": "system", "content": "Be brief."}, {"role": "user", "content": "Weather in Paris?"}]}]


def test_one_call_sends_tools_as_functions_and_parses_arguments(connect: Connect) -> None:
    server = ScriptedServer((200, completion(None, [("call_1", "get_weather", '{"city": "Paris"}')], "tool_calls")))
    reply = connect(server)(START, SPECS)
    assert reply == ModelReply("", [ToolCall("call_1", "get_weather", {"city": "Paris"})], Usage(20, 5),
                               "tool_calls")
    assert server.bodies[0]["tools"] == TOOLS_JSON


def test_parallel_calls_keep_their_order_and_ids(connect: Connect) -> None:
    server = ScriptedServer((200, completion(None, [("call_b", "get_weather", '{"city": "Oslo"}'),
                                                    ("call_a", "get_weather", '{"city": "Paris"}')], "tool_calls")))
    reply = connect(server)(START, SPECS)
    assert reply.tool_calls == [ToolCall("call_b", "get_weather", {"city": "Oslo"}),
                                ToolCall("call_a", "get_weather", {"city": "Paris"})]


def test_text_plus_call_keeps_both(connect: Connect) -> None:
    server = ScriptedServer((200, completion("Checking.", [("call_1", "get_weather", '{"city": "Paris"}')],
                                             "tool_calls")))
    reply = connect(server)(START, SPECS)
    assert (reply.content, reply.tool_calls) == ("Checking.", [ToolCall("call_1", "get_weather", {"city": "Paris"})])


def test_history_maps_calls_results_and_unparsable_args_to_the_wire(connect: Connect) -> None:
    server = ScriptedServer((200, completion("Done.")))
    connect(server, temperature=0)(CONVERSATION, SPECS)
    assert server.bodies[0] == {"model": MODEL, "temperature": 0, "tools": TOOLS_JSON, "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris and Oslo?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}},
            {"id": "call_2", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}},
        ]},
        {"role": "tool", "tool_call_id": "call_1", "content": '{"celsius": 21}'},
        {"role": "tool", "tool_call_id": "call_2", "content": "ERROR: get_weather failed: boom"},
        {"role": "assistant", "content": "Let me retry Oslo.", "tool_calls": [
            {"id": "call_3", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_3", "content": "ERROR: bad args"},
    ]}


@pytest.mark.parametrize(("arguments", "args"), [
    ('{"city": "Par', '{"city": "Par'),          # cut off: the raw string
    ("{'city': 'Paris'}", "{'city': 'Paris'}"),  # not JSON
    ('{"x": NaN}', '{"x": NaN}'),                # not strict JSON
    ('["Paris"]', ["Paris"]),                    # JSON, not an object: parsed
    ("", {}),                                    # no arguments at all
])
def test_arguments_that_are_not_a_json_object_pass_through(connect: Connect, arguments: str, args: Any) -> None:
    server = ScriptedServer((200, completion(None, [("call_1", "get_weather", arguments)], "tool_calls")))
    assert connect(server)(START, SPECS).tool_calls == [ToolCall("call_1", "get_weather", args)]


def test_a_custom_tool_call_passes_its_free_text_input_through(connect: Connect) -> None:
    body = completion(None, finish_reason="tool_calls")
    body["choices"][0]["message"]["tool_calls"] = [
        {"id": "call_1", "type": "custom", "custom": {"name": "get_weather", "input": "Paris"}}]
    assert connect(ScriptedServer((200, body)))(START, SPECS).tool_calls == [ToolCall("call_1", "get_weather", "Paris")]


def test_a_tool_call_without_a_type_is_a_function_call(connect: Connect) -> None:
    body = completion(None, [("call_1", "get_weather", '{"city": "Paris"}')], "tool_calls")
    del body["choices"][0]["message"]["tool_calls"][0]["type"]
    assert connect(ScriptedServer((200, body)))(START, SPECS).tool_calls == [
        ToolCall("call_1", "get_weather", {"city": "Paris"})]


def test_arguments_sent_as_an_object_pass_through(connect: Connect) -> None:
    body = completion(None, [("call_1", "get_weather", "")], "tool_calls")
    body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = {"city": "Paris"}
    assert connect(ScriptedServer((200, body)))(START, SPECS).tool_calls == [
        ToolCall("call_1", "get_weather", {"city": "Paris"})]


def test_null_token_counts_leave_usage_to_the_estimate(connect: Connect) -> None:
    body = completion("hi")
    body["usage"]["completion_tokens"] = None
    assert connect(ScriptedServer((200, body)))(START, []).usage is None


def test_malformed_arguments_become_an_observation_and_the_tool_does_not_run(connect: Connect) -> None:
    server = ScriptedServer(
        (200, completion(None, [("call_1", "get_weather", '{"city": "Par')], "tool_calls")),
        (200, completion(None, [("call_2", "get_weather", '{"city": "Paris"}')], "tool_calls")),
        (200, completion("21 C in Paris.")),
    )
    ran = Ran()
    result = run_agent("Weather in Paris?", connect(server), weather_registry(ran), system="Be brief.")
    assert (result.status, result.answer, ran.cities) == ("done", "21 C in Paris.", ["Paris"])
    second = server.bodies[1]["messages"]
    assert second[2:] == [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_1",
         "content": "ERROR: arguments must be a JSON object, got a string that did not parse: "
                    "'{\"city\": \"Par'. get_weather expects {\"city\": {\"type\": \"string\"}}"},
    ]
    assert result.messages[2] == {"role": "assistant", "content": "", "tool_calls": [
        {"id": "call_1", "name": "get_weather", "args": '{"city": "Par'}]}  # the log keeps what the model sent


def test_length_cut_off_is_surfaced_as_stop_reason(connect: Connect) -> None:
    server = ScriptedServer((200, completion("The weather in Par", finish_reason="length", usage=(20, 16))))
    assert connect(server)(START, SPECS) == ModelReply("The weather in Par", [], Usage(20, 16), "length")


def test_refusal_becomes_the_content_with_stop_reason_refusal(connect: Connect) -> None:
    server = ScriptedServer((200, completion(None, refusal="I can't help with that.")),
                            (200, completion("", finish_reason="content_filter")))
    model = connect(server)
    assert model(START, SPECS) == ModelReply("I can't help with that.", [], Usage(20, 5), "refusal")
    assert model(START, SPECS) == ModelReply("", [], Usage(20, 5), "content_filter")


def test_missing_usage_leaves_usage_none(connect: Connect) -> None:
    server = ScriptedServer((200, completion("ok", usage=None)))
    assert connect(server)(START, []).usage is None


def test_rate_limit_is_retried_by_the_sdk(connect: Connect) -> None:
    error = {"error": {"message": "Rate limit reached", "type": "requests", "param": None,
                       "code": "rate_limit_exceeded"}}
    server = ScriptedServer((429, error, {"retry-after-ms": "1", "retry-after": "0"}), (200, completion("ok")))
    reply = connect(server, max_retries=2)(START, SPECS)
    assert reply.content == "ok"
    assert len(server.requests) == 2
    assert server.bodies[0] == server.bodies[1]


def test_api_error_after_retries_stops_the_run_with_model_error(connect: Connect) -> None:
    error = {"error": {"message": "Rate limit reached", "type": "requests", "param": None,
                       "code": "rate_limit_exceeded"}}
    server = ScriptedServer((429, error))
    result = run_agent("Weather in Paris?", connect(server), weather_registry(Ran()))
    assert result.status == "model_error"
    assert (result.error or "").startswith("RateLimitError: Error code: 429")


def test_no_choices_is_an_unusable_response(connect: Connect) -> None:
    body = completion("x")
    body["choices"] = []
    with pytest.raises(UnusableResponse, match="openai response cannot be used: the completion has no choices"):
        connect(ScriptedServer((200, body)))(START, [])


def test_two_step_run_sends_the_tool_result_by_id(connect: Connect) -> None:
    server = ScriptedServer(
        (200, completion(None, [("call_9", "get_weather", '{"city": "Paris"}')], "tool_calls", usage=(40, 10))),
        (200, completion("It is 21 C in Paris.", usage=(60, 8))),
    )
    ran = Ran()
    result = run_agent("Weather in Paris?", connect(server), weather_registry(ran), system="Be brief.")
    assert (result.status, result.answer, result.steps, result.tokens) == ("done", "It is 21 C in Paris.", 2, 118)
    assert ran.cities == ["Paris"]
    assert server.bodies[1]["messages"][2:] == [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_9", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
        {"role": "tool", "tool_call_id": "call_9", "content": '{"celsius": 21}'},
    ]


def test_async_model_over_the_async_client() -> None:
    server = ScriptedServer((200, completion(None, [("call_1", "get_weather", '{"city": "Oslo"}')], "tool_calls")))

    async def main() -> ModelReply:
        client = openai.AsyncOpenAI(api_key="test", base_url=f"http://{TEST_HOST}/v1", max_retries=0,
                                    http_client=httpx2.AsyncClient(transport=server.transport()))
        async with AsyncOpenAIModel(client, MODEL, provider_name="vllm") as model:
            assert (model.model_name, model.provider_name) == (MODEL, "vllm")
            return await model(START, SPECS)

    reply = asyncio.run(main())
    assert reply == ModelReply("", [ToolCall("call_1", "get_weather", {"city": "Oslo"})], Usage(20, 5), "tool_calls")
    assert server.bodies[0] == {"model": MODEL, "messages": START, "tools": TOOLS_JSON}


def test_a_legacy_httpx_client_works_too() -> None:
    sent: list[Any] = []

    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.host == TEST_HOST
        sent.append(json.loads(request.content))
        return httpx.Response(200, json=completion("ok"))

    # The SDK is typed for httpx2 but accepts an httpx.Client at run time.
    http_client = cast(Any, httpx.Client(transport=httpx.MockTransport(handler)))
    client = openai.OpenAI(api_key="test", base_url=f"http://{TEST_HOST}/v1", max_retries=0, http_client=http_client)
    with OpenAIModel(client, MODEL) as model:
        assert model(START, []).content == "ok"
    assert sent == [{"model": MODEL, "messages": START}]


def test_model_and_provider_names(connect: Connect) -> None:
    model = connect(ScriptedServer(), provider_name="llama.cpp")
    assert (model.model_name, model.provider_name) == (MODEL, "llama.cpp")
    assert repr(model) == "OpenAIModel(model='gpt-4o-mini', provider='llama.cpp')"


@pytest.mark.parametrize("option", ["messages", "tools", "stream", "n"])
def test_options_the_adapter_sets_are_refused(option: str) -> None:
    with pytest.raises(ValueError, match=f"request option\\(s\\) \\['{option}'\\] are set by the adapter"):
        OpenAIModel(None, MODEL, **{option: 1})  # type: ignore[arg-type]


def test_unknown_role_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="unknown message role 'function'"):
        to_openai_messages(cast(Any, [{"role": "function", "content": "x"}]))


def test_openai_model_builds_a_client_for_a_local_server(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with openai_model("qwen2.5-1.5b", "http://127.0.0.1:8080/v1", provider_name="llama.cpp",
                      max_retries=1, timeout=30, temperature=0) as model:
        assert isinstance(model.client, openai.OpenAI)
        assert str(model.client.base_url) == "http://127.0.0.1:8080/v1/"
        assert (model.client.api_key, model.client.max_retries, model.client.timeout) == ("unused", 1, 30)
        assert (model.provider_name, model.request_options) == ("llama.cpp", {"temperature": 0})


def test_openai_model_without_the_sdk_gives_the_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "openai", None)
    with pytest.raises(MissingDependency) as info:
        openai_model(MODEL)
    assert str(info.value) == ("the openai adapter needs the 'openai' package: "
                               "pip install 'durable-agent-runner[openai]'")
    assert (info.value.package, info.value.extra) == ("openai", "openai")


@pytest.mark.process
def test_the_adapters_import_without_any_sdk() -> None:
    code = (
        "import sys; sys.modules['openai'] = None; sys.modules['anthropic'] = None\n"
        "import runner.adapters as a\n"
        "print(a.OpenAIModel.__name__, a.AnthropicModel.__name__, a.AsyncOpenAIModel.__name__)\n"
        "try:\n    a.anthropic_model('m')\nexcept a.MissingDependency as e:\n    print(e)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert done.stdout.splitlines() == [
        "OpenAIModel AnthropicModel AsyncOpenAIModel",
        "the anthropic adapter needs the 'anthropic' package: pip install 'durable-agent-runner[anthropic]'",
    ]



def test_cached_prompt_tokens_are_part_of_the_prompt_and_counted_apart(connect: Connect) -> None:
    body = completion("ok")
    body["usage"]["prompt_tokens_details"] = {"cached_tokens": 12, "audio_tokens": 0}
    assert connect(ScriptedServer((200, body)))(START, []).usage == Usage(20, 5, cache_read_tokens=12)


def test_a_cached_count_past_the_prompt_is_cut_to_it(connect: Connect) -> None:
    body = completion("ok")
    body["usage"]["prompt_tokens_details"] = {"cached_tokens": 999}
    assert connect(ScriptedServer((200, body)))(START, []).usage == Usage(20, 5, cache_read_tokens=20)
