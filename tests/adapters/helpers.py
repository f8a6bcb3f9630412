"""A scripted HTTP server for the real SDK clients, models over it, and a guard against real network calls.

The adapters are tested through the official ``openai`` and ``anthropic`` client
objects; only the transport underneath them is replaced (``httpx2.MockTransport``,
the HTTP library both SDKs are built on), so the request JSON asserted here is
exactly what the SDK would put on the wire.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable, Iterator
from typing import Any, Protocol, TypeVar

import httpx2
import pytest

from runner import ToolRegistry

TEST_HOST = "test.invalid"
WEATHER_SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
SPECS: list[Any] = [{"name": "get_weather", "description": "Current temperature in a city.",
                     "parameters": WEATHER_SCHEMA}]
START: list[Any] = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Weather in Paris?"}]


class ScriptedServer:
    """Answers each request with the next scripted response and records what was sent.

    A body given as bytes is sent as it is, as JSON (``NaN``, say, which ``json.dumps`` writes and
    the SDKs read). A request to any other host, or past the end of the script, fails the test.
    """

    def __init__(self, *responses: tuple[int, Any] | tuple[int, Any, dict[str, str]]) -> None:
        self.responses = list(responses)
        self.requests: list[httpx2.Request] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        if request.url.host != TEST_HOST:
            raise AssertionError(f"unexpected request to {request.url}")
        self.requests.append(request)
        if not self.responses:
            raise AssertionError(f"no scripted response left for request {len(self.requests)}")
        status, body, *rest = self.responses.pop(0)
        headers = rest[0] if rest else {}
        if isinstance(body, bytes):
            return httpx2.Response(status, content=body, headers={"content-type": "application/json", **headers})
        return httpx2.Response(status, json=body, headers=headers)

    @property
    def bodies(self) -> list[Any]:
        return [json.loads(r.content) for r in self.requests]

    @property
    def paths(self) -> list[str]:
        return [r.url.path for r in self.requests]

    def transport(self) -> httpx2.MockTransport:
        return httpx2.MockTransport(self)


class Closing(Protocol):
    def close(self) -> None: ...


ModelT = TypeVar("ModelT", bound=Closing)
Build = Callable[[httpx2.Client, int, dict[str, Any]], ModelT]


def connections(build: Build[ModelT]) -> Iterator[Callable[..., ModelT]]:
    """The body of a ``connect`` fixture: ``connect(server, max_retries=0, **options)`` is a model over a real
    SDK client whose transport is ``server``, made by ``build(http_client, max_retries, options)``.

    Every model it made is closed when the fixture ends.
    """
    models: list[ModelT] = []

    def connect(server: ScriptedServer, max_retries: int = 0, **options: Any) -> ModelT:
        models.append(build(httpx2.Client(transport=server.transport()), max_retries, options))
        return models[-1]

    yield connect
    for model in models:
        model.close()


def sdk_connections(sdk_client: Callable[..., Any], base_path: str,
                    model: Callable[..., ModelT]) -> Iterator[Callable[..., ModelT]]:
    """The body of a provider's ``connect`` fixture: ``model(client, **options)`` over a real ``sdk_client``.

    ``sdk_client`` is the SDK's client class (``openai.OpenAI``, ``anthropic.Anthropic``); it is
    built with a test key for the test host at ``base_path``, over the scripted server's transport.
    """
    def build(http_client: httpx2.Client, max_retries: int, options: dict[str, Any]) -> ModelT:
        client = sdk_client(api_key="test", base_url=f"http://{TEST_HOST}{base_path}", max_retries=max_retries,
                            http_client=http_client)
        return model(client, **options)

    return connections(build)


LOOPBACK = frozenset({"127.0.0.1", "::1", "localhost"})


def block_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make any connection attempt but to this machine's loopback raise, so a test can never reach the network.

    The streaming tests' servers listen on 127.0.0.1 (tests/adapters/sse.py).
    """
    create_connection, connect, connect_ex = socket.create_connection, socket.socket.connect, socket.socket.connect_ex

    def local(address: Any) -> Any:
        if not (isinstance(address, tuple) and address[0] in LOOPBACK):
            raise AssertionError(f"a test tried to open a real network connection: {address!r}")
        return address

    monkeypatch.setattr(socket, "create_connection",
                        lambda address, *args, **kwargs: create_connection(local(address), *args, **kwargs))
    monkeypatch.setattr(socket.socket, "connect", lambda self, address: connect(self, local(address)))
    monkeypatch.setattr(socket.socket, "connect_ex", lambda self, address: connect_ex(self, local(address)))


class Ran:
    """The tool calls that really ran."""

    def __init__(self) -> None:
        self.cities: list[str] = []


def weather_registry(ran: Ran) -> ToolRegistry:
    registry = ToolRegistry()

    def get_weather(city: str) -> dict[str, int]:
        ran.cities.append(city)
        return {"celsius": {"Paris": 21, "Oslo": -3}[city]}

    registry.register("get_weather", "Current temperature in a city.", WEATHER_SCHEMA, get_weather)
    return registry


CONVERSATION: list[Any] = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Weather in Paris and Oslo?"},
    {"role": "assistant", "content": "",
     "tool_calls": [{"id": "call_1", "name": "get_weather", "args": {"city": "Paris"}},
                    {"id": "call_2", "name": "get_weather", "args": {"city": "Oslo"}}]},
    {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": '{"celsius": 21}'},
    {"role": "tool", "tool_call_id": "call_2", "name": "get_weather", "content": "ERROR: get_weather failed: boom"},
    {"role": "assistant", "content": "Let me retry Oslo.",
     "tool_calls": [{"id": "call_3", "name": "get_weather", "args": "{'city': Oslo"}]},
    {"role": "tool", "tool_call_id": "call_3", "name": "get_weather", "content": "ERROR: bad args"},
]
"""A history with parallel calls, an error result, text plus a call, and unparsable args."""
