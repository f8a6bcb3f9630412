"""AnthropicModel.stream and AsyncAnthropicModel.astream through the real ``anthropic`` client, over local SSE."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from typing import Any

import anthropic
import pytest

from runner import ModelReply, Status, ToolCall, ToolRegistry, Usage, run_agent
from runner.adapters import AnthropicModel, AsyncAnthropicModel
from runner.events import ModelCalled, ModelDelta
from runner.store import RunStore
from runner.streaming import RunEnded, StreamEvent, TextDelta, astream_agent, stream_agent
from tests.adapters.helpers import SPECS, START, Ran, weather_registry
from tests.adapters.sse import CUT, Frame, Serve, SSEServer, anthropic_event, anthropic_stream
from tests.adapters.wire import ANTHROPIC_MODEL, message, text, tool_use

PARIS = ["Paris ", "is ", "21 C."]
PARIS_CALL = ("toolu_01", "get_weather", ['{"ci', 'ty": "Pa', 'ris"}'])

Connect = Callable[..., AnthropicModel]


@pytest.fixture
def connect() -> Iterator[Connect]:
    """``connect(server, **options)`` -> an AnthropicModel over a real ``anthropic.Anthropic`` client; closed after."""
    models: list[AnthropicModel] = []

    def make(server: SSEServer, **options: Any) -> AnthropicModel:
        client = anthropic.Anthropic(api_key="test", base_url=server.address, max_retries=0, timeout=10)
        models.append(AnthropicModel(client, ANTHROPIC_MODEL, **options))
        return models[-1]

    yield make
    for model in models:
        model.close()


def async_model(server: SSEServer) -> AsyncAnthropicModel:
    client = anthropic.AsyncAnthropic(api_key="test", base_url=server.address, max_retries=0, timeout=10)
    return AsyncAnthropicModel(client, ANTHROPIC_MODEL)


def split(items: list[str | ModelReply]) -> tuple[list[str], ModelReply]:
    *pieces, reply = items
    assert all(isinstance(piece, str) for piece in pieces)
    assert isinstance(reply, ModelReply)
    return [str(piece) for piece in pieces], reply


def test_the_adapter_asks_for_a_stream_and_ends_with_the_reply_a_call_returns(serve: Serve, connect: Connect) -> None:
    cached = {"cache_read_input_tokens": 50, "cache_creation_input_tokens": 100}
    server = serve(anthropic_stream([("text", PARIS), ("tool_use", PARIS_CALL)], "tool_use", (30, 7), **cached),
                   (200, message(text("Paris is 21 C."), tool_use("toolu_01", {"city": "Paris"}),
                                 stop_reason="tool_use", usage=(30, 7), **cached)))
    model = connect(server, max_tokens=256)
    pieces, reply = split(list(model.stream(START, SPECS)))
    assert pieces == PARIS
    assert reply == ModelReply("Paris is 21 C.", [ToolCall("toolu_01", "get_weather", {"city": "Paris"})],
                               Usage(180, 7, cache_read_tokens=50, cache_write_tokens=100), "tool_use")
    assert model(START, SPECS) == reply
    streamed, called = server.bodies
    assert streamed["stream"] is True
    assert {k: v for k, v in streamed.items() if k != "stream"} == called
    assert server.paths == ["/v1/messages"] * 2


@pytest.mark.parametrize(("stop_reason", "expected"), [("max_tokens", "length"), ("refusal", "refusal"),
                                                      ("stop_sequence", "stop_sequence")])
def test_the_stop_reason_comes_as_a_call_maps_it(serve: Serve, connect: Connect, stop_reason: str,
                                                 expected: str) -> None:
    server = serve(anthropic_stream([("text", ["The weather ", "in Par"])], stop_reason),
                   (200, message(text("The weather in Par"), stop_reason=stop_reason)))
    model = connect(server)
    reply = split(list(model.stream(START, [])))[1]
    assert reply == ModelReply("The weather in Par", [], Usage(30, 7), expected) == model(START, [])


def test_an_error_event_mid_stream_is_the_sdks_error(serve: Serve, connect: Connect) -> None:
    frames = anthropic_stream([("text", PARIS)])
    overloaded = anthropic_event({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    result = run_agent("Weather?", connect(serve([*frames[:3], overloaded])), ToolRegistry(), stream=True)
    assert result.status == Status.MODEL_ERROR
    assert "Overloaded" in (result.error or "")
    assert isinstance(result.exception, anthropic.APIError)


def test_a_run_streams_its_tools_and_counts_the_streamed_usage(serve: Serve, connect: Connect,
                                                               store: RunStore) -> None:
    server = serve(anthropic_stream([("text", ["Checking."]), ("tool_use", PARIS_CALL)], "tool_use", (40, 10)),
                   anthropic_stream([("text", PARIS)], usage=(60, 8)))
    ran = Ran()
    result = run_agent("Weather in Paris?", connect(server), weather_registry(ran), store=store, stream=True)
    assert (result.status, result.answer, ran.cities, result.tokens) == (Status.DONE, "Paris is 21 C.", ["Paris"],
                                                                          118)
    run = store.get_run(result.run_id)
    assert [f.usage for f in run.facts if isinstance(f, ModelCalled)] == [Usage(40, 10), Usage(60, 8)]
    assert "".join(f.text for f in run.facts if isinstance(f, ModelDelta)) == "Checking.Paris is 21 C."
    assert server.bodies[1]["messages"][1:] == [
        {"role": "assistant", "content": [text("Checking."), tool_use("toolu_01", {"city": "Paris"})]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_01", "content": '{"celsius": 21}', "is_error": False}]},
    ]


def held(frames: list[Frame], seen: threading.Event) -> list[Frame]:
    """The frames with a wait on ``seen`` after the first text delta (message_start, block start, delta)."""
    return [*frames[:3], seen, *frames[3:]]


def test_the_first_delta_reaches_stream_agent_while_the_server_is_still_sending(serve: Serve,
                                                                                connect: Connect) -> None:
    seen = threading.Event()
    server = serve(held(anthropic_stream([("text", PARIS)]), seen))
    events: list[StreamEvent] = []
    for event in stream_agent("Weather in Paris?", connect(server), ToolRegistry()):
        if isinstance(event, TextDelta) and not seen.is_set():
            assert not server.done.is_set(), "the first piece came only once the server had sent everything"
            seen.set()
        events.append(event)
    assert server.held == [True]
    assert [e.text for e in events if isinstance(e, TextDelta)] == PARIS
    last = events[-1]
    assert isinstance(last, RunEnded)
    assert (last.result.status, last.result.answer) == (Status.DONE, "Paris is 21 C.")


@pytest.mark.parametrize("chunked", [True, False], ids=["broken-body", "clean-close"])
def test_a_stream_cut_mid_way_is_a_model_error_not_a_hang(serve: Serve, connect: Connect, chunked: bool) -> None:
    server = serve([*anthropic_stream([("text", PARIS)])[:4], CUT], chunked=chunked)
    result = run_agent("Weather in Paris?", connect(server), ToolRegistry(), stream=True)
    assert result.status == Status.MODEL_ERROR
    assert (result.error or "").startswith("APIConnectionError: ")
    assert isinstance(result.exception, anthropic.APIConnectionError)
    assert server.address in (result.error or "")
    if not chunked:
        assert "the stream ended before its message_stop came" in (result.error or "")


def test_astream_streams_through_the_async_client(serve: Serve) -> None:
    server = serve(anthropic_stream([("text", PARIS), ("tool_use", PARIS_CALL)], "tool_use"),
                   (200, message(text("Paris is 21 C."), tool_use("toolu_01", {"city": "Paris"}),
                                 stop_reason="tool_use")))

    async def go() -> tuple[list[str | ModelReply], ModelReply]:
        async with async_model(server) as model:
            return [item async for item in model.astream(START, SPECS)], await model(START, SPECS)

    items, called = asyncio.run(go())
    assert split(items) == (PARIS, called)
    assert server.bodies[0]["stream"] is True


def test_astream_agent_gets_the_first_delta_while_the_server_is_still_sending(serve: Serve) -> None:
    seen = threading.Event()
    server = serve(held(anthropic_stream([("text", PARIS)]), seen))

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
    server = serve([*anthropic_stream([("text", PARIS)])[:4], CUT], chunked=chunked)

    async def go() -> StreamEvent:
        async with async_model(server) as model:
            return [event async for event in astream_agent("Weather?", model, ToolRegistry())][-1]

    last = asyncio.run(go())
    assert isinstance(last, RunEnded)
    assert last.result.status == Status.MODEL_ERROR
    assert isinstance(last.result.exception, anthropic.APIConnectionError)


def test_a_stream_that_stalls_past_the_clients_timeout_is_the_sdks_timeout_error(serve: Serve) -> None:
    stalled = threading.Event()
    server = serve([*anthropic_stream([("text", PARIS)])[:4], stalled])
    client = anthropic.Anthropic(api_key="test", base_url=server.address, max_retries=0, timeout=0.3)
    try:
        with AnthropicModel(client, ANTHROPIC_MODEL) as model:
            result = run_agent("Weather in Paris?", model, ToolRegistry(), stream=True)
    finally:
        stalled.set()
    assert result.status == Status.MODEL_ERROR
    assert isinstance(result.exception, anthropic.APITimeoutError)
