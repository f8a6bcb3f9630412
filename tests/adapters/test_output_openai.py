"""output_type= through OpenAIModel over the real ``openai`` client, its HTTP transport scripted."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import pytest

from runner import Status, ToolRegistry, run_agent
from runner.adapters import OpenAIModel
from tests.adapters.helpers import Ran, ScriptedServer, sdk_connections, weather_registry
from tests.cli.helpers import completion
from tests.output.helpers import INVOICE_SCHEMA, Invoice, InvoiceData, InvoiceDict

Connect = Any
MODEL = "gpt-4o-mini"


@pytest.fixture
def connect() -> Iterator[Connect]:
    yield from sdk_connections(openai.OpenAI, "/v1", lambda client, **options: OpenAIModel(client, MODEL, **options))


@pytest.mark.parametrize(("output_type", "expected"), [
    (Invoice, Invoice(total=12.5, currency="EUR")),
    (InvoiceData, InvoiceData(12.5, "EUR")),
    (InvoiceDict, {"total": 12.5, "currency": "EUR"}),
    (INVOICE_SCHEMA, {"total": 12.5, "currency": "EUR"}),
], ids=["pydantic", "dataclass", "typeddict", "schema"])
def test_each_kind_of_type_comes_back_through_the_openai_adapter(connect: Connect, output_type: Any,
                                                                  expected: Any) -> None:
    ran = Ran()
    server = ScriptedServer(
        (200, completion("", [("c1", "get_weather", {"city": "Paris"})])),
        (200, completion("", [("c2", "final_result", {"total": "twelve", "currency": "EUR"})])),
        (200, completion("", [("c3", "final_result", {"total": 12.5, "currency": "EUR"})])))
    result = run_agent("Bill the Paris trip", connect(server), weather_registry(ran), output_type=output_type)
    assert (result.status, result.output, ran.cities) == (Status.DONE, expected, ["Paris"])
    tools = server.bodies[0]["tools"]
    assert [tool["function"]["name"] for tool in tools] == ["get_weather", "final_result"]
    assert sorted(tools[1]["function"]["parameters"]["properties"]) == ["currency", "total"]
    told = server.bodies[2]["messages"][-1]
    assert told["role"] == "tool"
    assert told["tool_call_id"] == "c2"
    assert told["content"].startswith("ERROR: argument 'total' must be of type number")


def test_plain_text_through_the_openai_adapter_is_sent_back_as_a_user_message(connect: Connect) -> None:
    server = ScriptedServer(
        (200, completion("It is 12.5 EUR.")),
        (200, completion("", [("c1", "final_result", {"total": 12.5, "currency": "EUR"})])))
    result = run_agent("Bill it", connect(server), ToolRegistry(), output_type=Invoice)
    assert result.output == Invoice(total=12.5, currency="EUR")
    last = server.bodies[1]["messages"][-2:]
    assert last[0] == {"role": "assistant", "content": "It is 12.5 EUR."}
    assert last[1]["role"] == "user"
    assert "final_result" in last[1]["content"]


def test_native_mode_sends_response_format_and_takes_the_json_reply(connect: Connect) -> None:
    server = ScriptedServer((200, completion('{"total": "x", "currency": "EUR"}')),
                            (200, completion('{"total": 12.5, "currency": "EUR"}')))
    result = run_agent("Bill it", connect(server), ToolRegistry(), output_type=Invoice, output_mode="native")
    assert (result.status, result.output) == (Status.DONE, Invoice(total=12.5, currency="EUR"))
    first = server.bodies[0]
    assert "tools" not in first
    assert first["response_format"]["type"] == "json_schema"
    assert first["response_format"]["json_schema"]["name"] == "final_result"
    assert sorted(first["response_format"]["json_schema"]["schema"]["properties"]) == ["currency", "total"]
    told = server.bodies[1]["messages"][-1]
    assert told["role"] == "user"
    assert told["content"].startswith("ERROR: argument 'total' must be of type number")


def test_native_mode_on_a_model_without_structured_output_is_a_value_error() -> None:
    from runner import ScriptedModel

    with pytest.raises(ValueError, match="output_mode='native' needs a model with structured output"):
        run_agent("x", ScriptedModel([]), ToolRegistry(), output_type=Invoice, output_mode="native")
