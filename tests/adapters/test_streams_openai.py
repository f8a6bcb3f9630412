"""OpenAIModel.stream and AsyncOpenAIModel.astream through the real ``openai`` client, over a local SSE server."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from typing import Any

import openai
import pytest

from runner import ModelReply, Status, ToolCall, ToolRegistry, Usage, run_agent
from runner.adapters import AsyncOpenAIModel, OpenAIModel
from runner.events import ModelCalled, ModelDelta
from runner.store import RunStore
from runner.streaming import RunEnded, StreamEvent, TextDelta, astream_agent, stream_agent
from tests.adapters.helpers import SPECS, START, Ran, weather_registry
from tests.adapters.sse import CUT, HOLD_S, Script, Serve, SSEServer, Watch, chunk, openai_stream
from tests.adapters.wire import OPENAI_MODEL, completion
from tests.output.helpers import Invoice

PARIS = ["Paris ", "is ", "21 C."]
CALLS = [("call_1", "get_weather", ['{"ci', 'ty": ', '"Paris"}']), ("call_2", "get_weather", ['{"city"', ': "Oslo"}'])]

Connect = Callable[..., OpenAIModel]


@pytest.fixture
def connect() -> Iterator[Connect]:
    """``connect(server, **options)`` -> an OpenAIModel over a real ``openai.OpenAI`` client; closed after the test."""
    models: list[OpenAIModel] = []

    def make(server: SSEServer, **options: Any) -> OpenAIModel:
        client = openai.OpenAI(api_key="test", base_url=f"{server.address}/v1", max_retries=0, timeout=10)
        models.append(OpenAIModel(client, OPENAI_MODEL, **options))
        return models[-1]

    yield make
    for model in models:
        model.close()


def async_model(server: SSEServer) -> AsyncOpenAIModel:
    client = openai.AsyncOpenAI(api_key="test", base_url=f"{server.address}/v1", max_retries=0, timeout=10)
    return AsyncOpenAIModel(client, OPENAI_MODEL)


def split(items: list[str | ModelReply]) -> tuple[list[str], ModelReply]:
    *pieces, reply = items
    assert all(isinstance(piece, str) for piece in pieces)
    assert isinstance(reply, ModelReply)
    return [str(piece) for piece in pieces], reply


def test_the_adapter_asks_for_a_stream_and_ends_with_the_reply_a_call_returns(serve: Serve, connect: Connect) -> None:
    server = serve(openai_stream(PARIS, CALLS, "tool_calls"),
                   (200, completion("Paris is 21 C.", [(i, n, "".join(f)) for i, n, f in CALLS], "tool_calls")))
    model = connect(server, temperature=0)
    pieces, reply = split(list(model.stream(START, SPECS)))
    assert pieces == PARIS
    assert reply == ModelReply("Paris is 21 C.", [ToolCall("call_1", "get_weather", {"city": "Paris"}),
                                                  ToolCall("call_2", "get_weather", {"city": "Oslo"})],
                               Usage(20, 5), "tool_calls")
    assert model(START, SPECS) == reply
    streamed, called = server.bodies
    assert streamed["stream"] is True
    assert streamed["stream_options"] == {"include_usage": True}
    assert {k: v for k, v in streamed.items() if k not in ("stream", "stream_options")} == called
    assert "stream" not in called
    assert server.paths == ["/v1/chat/completions"] * 2


@pytest.mark.parametrize(("frames", "whole", "expected"), [
    (openai_stream(["The weather in Par"], finish_reason="length", usage=(20, 16)),
     completion("The weather in Par", finish_reason="length", usage=(20, 16)),
     ModelReply("The weather in Par", [], Usage(20, 16), "length")),
    (openai_stream(refusal=["I can't ", "help with that."]), completion(None, refusal="I can't help with that."),
     ModelReply("I can't help with that.", [], Usage(20, 5), "refusal")),
    (openai_stream(["hi"], usage=(40, 2), cached=12), completion("hi", usage=(40, 2)),
     ModelReply("hi", [], Usage(40, 2, 12), "stop")),
], ids=["length", "refusal", "cached"])
def test_the_stop_reason_and_usage_come_as_a_call_maps_them(serve: Serve, connect: Connect, frames: Script,
                                                            whole: dict[str, Any], expected: ModelReply) -> None:
    if expected.usage is not None and expected.usage.cache_read_tokens:
        whole["usage"]["prompt_tokens_details"] = {"cached_tokens": expected.usage.cache_read_tokens}
    model = connect(serve(frames, (200, whole)))
    pieces, reply = split(list(model.stream(START, [])))
    assert reply == expected == model(START, [])
    assert "".join(pieces) == expected.content


def test_call_fragments_that_repeat_the_id_and_name_or_send_an_object_are_gathered_as_sent(
        serve: Serve, connect: Connect) -> None:
    def call(**fields: Any) -> bytes:
        return chunk({"tool_calls": [{"index": 0, **fields}]})

    repeated = [chunk({"role": "assistant"}),
                call(id="call_1", type="function", function={"name": "get_weather", "arguments": '{"city"'}),
                call(id="call_1", type="function", function={"name": "get_weather", "arguments": ': "Oslo"}'}),
                *openai_stream(finish_reason="tool_calls")[1:]]
    whole = [chunk({"role": "assistant"}),
             call(id="call_2", type="function", function={"name": "get_weather", "arguments": {"city": "Paris"}}),
             *openai_stream(finish_reason="tool_calls")[1:]]
    model = connect(serve(repeated, whole))
    assert split(list(model.stream(START, SPECS)))[1].tool_calls == [ToolCall("call_1", "get_weather",
                                                                              {"city": "Oslo"})]
    assert split(list(model.stream(START, SPECS)))[1].tool_calls == [ToolCall("call_2", "get_weather",
                                                                              {"city": "Paris"})]


def test_a_stream_that_asks_with_stream_options_keeps_them_and_adds_the_usage(serve: Serve, connect: Connect) -> None:
    server = serve(openai_stream(["ok"]))
    split(list(connect(server, stream_options={"include_obfuscation": False}).stream(START, [])))
    assert server.bodies[0]["stream_options"] == {"include_obfuscation": False, "include_usage": True}


def test_a_stream_without_usage_leaves_it_to_the_estimate(serve: Serve, connect: Connect) -> None:
    frames = [chunk({"role": "assistant", "content": "ok"}), chunk({}, "stop"), b"data: [DONE]\n\n"]
    assert split(list(connect(serve(frames)).stream(START, [])))[1] == ModelReply("ok", [], None, "stop")


def test_an_error_status_raises_the_sdks_error_as_a_call_does(serve: Serve, connect: Connect) -> None:
    error = {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error", "param": None,
                       "code": "invalid_api_key"}}
    model = connect(serve((401, error), (401, error)))
    with pytest.raises(openai.AuthenticationError) as streamed:
        list(model.stream(START, []))
    with pytest.raises(openai.AuthenticationError) as called:
        model(START, [])
    assert str(streamed.value) == str(called.value)


def test_a_run_streams_its_tools_and_counts_the_streamed_usage(serve: Serve, connect: Connect, store: RunStore) -> None:
    server = serve(openai_stream(["Checking."], [CALLS[0]], "tool_calls", usage=(20, 5)),
                   openai_stream(PARIS, usage=(60, 9)))
    ran = Ran()
    result = run_agent("Weather in Paris?", connect(server), weather_registry(ran), store=store, stream=True)
    assert (result.status, result.answer, ran.cities) == (Status.DONE, "Paris is 21 C.", ["Paris"])
    assert result.tokens == 20 + 5 + 60 + 9
    run = store.get_run(result.run_id)
    called = [fact for fact in run.facts if isinstance(fact, ModelCalled)]
    assert [call.usage for call in called] == [Usage(20, 5), Usage(60, 9)]
    assert all(call.first_chunk_s is not None and call.first_chunk_s > 0 for call in called)
    deltas = [fact for fact in run.facts if isinstance(fact, ModelDelta)]
    assert {d.step: "".join(x.text for x in deltas if x.step == d.step) for d in deltas} == \
        {1: "Checking.", 2: "Paris is 21 C."}
    assert all(body["stream"] is True for body in server.bodies)
    assert server.bodies[1]["messages"][-1] == {"role": "tool", "tool_call_id": "call_1", "content": '{"celsius": 21}'}


def test_the_first_delta_reaches_stream_agent_while_the_server_is_still_sending(serve: Serve,
                                                                                connect: Connect) -> None:
    seen = threading.Event()  # the server waits after its first piece until the test has it
    frames = openai_stream(PARIS)
    server = serve([*frames[:2], seen, *frames[2:]])
    texts: list[str] = []
    events: list[StreamEvent] = []
    for event in stream_agent("Weather in Paris?", connect(server), ToolRegistry()):
        events.append(event)
        if isinstance(event, TextDelta):
            if not texts:
                assert not server.done.is_set(), "the first piece came only once the server had sent everything"
                seen.set()
            texts.append(event.text)
    assert server.held == [True]
    assert texts == PARIS
    last = events[-1]
    assert isinstance(last, RunEnded)
    assert (last.result.status, last.result.answer) == (Status.DONE, "Paris is 21 C.")


def test_native_structured_output_streams_with_its_response_format(serve: Serve, connect: Connect) -> None:
    server = serve(openai_stream(['{"total": ', '12.5, "currency": ', '"EUR"}']))
    result = run_agent("Bill it", connect(server), ToolRegistry(), output_type=Invoice, output_mode="native",
                       stream=True)
    assert (result.status, result.output) == (Status.DONE, Invoice(total=12.5, currency="EUR"))
    body = server.bodies[0]
    assert (body["stream"], body["response_format"]["json_schema"]["name"]) == (True, "final_result")


@pytest.mark.parametrize("chunked", [True, False], ids=["broken-body", "clean-close"])
def test_a_stream_cut_mid_way_is_a_model_error_not_a_hang(serve: Serve, connect: Connect, chunked: bool) -> None:
    frames = openai_stream(PARIS)
    server = serve([*frames[:3], CUT], chunked=chunked)
    result = run_agent("Weather in Paris?", connect(server), ToolRegistry(), stream=True)
    assert result.status == Status.MODEL_ERROR
    assert (result.error or "").startswith("APIConnectionError: ")
    assert server.address in (result.error or "")
    if not chunked:
        assert "the stream ended before its finish_reason came" in (result.error or "")


def test_leaving_the_stream_early_closes_the_response(serve: Serve, connect: Connect) -> None:
    watch = Watch()
    server = serve([*openai_stream(PARIS)[:2], watch], openai_stream(["again"]))
    model = connect(server)
    stream = model.stream(START, [])
    assert next(stream) == "Paris "
    stream.close()
    assert watch.checked.wait(HOLD_S + 5)
    assert watch.closed is True
    assert split(list(model.stream(START, [])))[1].content == "again"  # the client goes on with the next


def test_astream_streams_through_the_async_client(serve: Serve) -> None:
    server = serve(openai_stream(PARIS, CALLS, "tool_calls"),
                   (200, completion("Paris is 21 C.", [(i, n, "".join(f)) for i, n, f in CALLS], "tool_calls")))

    async def go() -> tuple[list[str | ModelReply], ModelReply]:
        async with async_model(server) as model:
            return [item async for item in model.astream(START, SPECS)], await model(START, SPECS)

    items, called = asyncio.run(go())
    pieces, reply = split(items)
    assert (pieces, reply) == (PARIS, called)
    assert server.bodies[0]["stream_options"] == {"include_usage": True}


def test_astream_agent_gets_the_first_delta_while_the_server_is_still_sending(serve: Serve) -> None:
    seen = threading.Event()
    frames = openai_stream(PARIS)
    server = serve([*frames[:2], seen, *frames[2:]])

    async def go() -> list[StreamEvent]:
        events: list[StreamEvent] = []
        async with async_model(server) as model:
            async for event in astream_agent("Weather in Paris?", model, ToolRegistry()):
                if isinstance(event, TextDelta) and not seen.is_set():
                    assert not server.done.is_set()
                    seen.set()
                events.append(event)
        return events

    events = asyncio.run(go())
    assert server.held == [True]
    assert [e.text for e in events if isinstance(e, TextDelta)] == PARIS
    last = events[-1]
    assert isinstance(last, RunEnded)
    assert last.result.answer == "Paris is 21 C."


@pytest.mark.parametrize("chunked", [True, False], ids=["broken-body", "clean-close"])
def test_an_async_stream_cut_mid_way_is_a_model_error(serve: Serve, chunked: bool) -> None:
    server = serve([*openai_stream(PARIS)[:3], CUT], chunked=chunked)

    async def go() -> Any:
        async with async_model(server) as model:
            return [event async for event in astream_agent("Weather?", model, ToolRegistry())][-1]

    last = asyncio.run(go())
    assert isinstance(last, RunEnded)
    assert last.result.status == Status.MODEL_ERROR
    assert (last.result.error or "").startswith("APIConnectionError: ")



def test_astream_lets_other_tasks_run_between_pieces_already_read(serve: Serve) -> None:
    """A burst read at once still reaches a task waiting for it piece by piece (``astream_agent``'s caller)."""
    words = [f"w{i} " for i in range(100)]
    release = threading.Event()
    burst = b"".join(chunk({"content": word}) for word in words[1:])  # one write
    server = serve([chunk({"role": "assistant", "content": words[0]}), burst, release,
                    *openai_stream()[1:]])
    read: list[str] = []
    seen: list[int] = []  # how many pieces the other task found read each time it ran

    async def other() -> None:
        while len(read) < len(words):
            seen.append(len(read))
            await asyncio.sleep(0)

    async def go() -> None:
        async with async_model(server) as model:
            stream = model.astream(START, [])
            read.append(str(await anext(stream)))
            await asyncio.sleep(0.3)  # the whole burst is in this machine's socket buffer by now
            task = asyncio.ensure_future(other())
            async for item in stream:
                if isinstance(item, str):
                    read.append(item)
                if len(read) == len(words):
                    release.set()
            await task

    try:
        asyncio.run(go())
    finally:
        release.set()
    assert read == words
    assert [n for n in seen if 1 < n < len(words)], f"the other task ran only at {sorted(set(seen))}"
