"""The bundled example: an 18% tip on a EUR 127.50 bill split 4 ways, in USD.

Two tools a reader can trust: ``calculate`` walks the expression's AST and
allows only numbers, + - * / ** and parentheses (never ``eval``), and
``convert_currency`` reads a fixed, labelled rate table (not live rates).
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ._replay.scripted import ScriptedModel
from ._tools.registry import ToolRegistry
from .messages import ModelReply, ToolCall

DEMO_TASK = "What does each person pay, in USD, for an 18% tip on a EUR 127.50 bill split 4 ways?"
RATES_LABEL = "fixed demo rates, not live market data"
# Units of the second currency per unit of the first.
RATES: dict[tuple[str, str], float] = {("EUR", "USD"): 1.08, ("USD", "EUR"): 0.93, ("GBP", "USD"): 1.27}
MAX_EXPONENT = 100

_BINARY: dict[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[float], float]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}


def calculate(expression: str) -> float | int:
    """Evaluate arithmetic safely: anything but numbers and + - * / ** ( ) is refused."""
    tree = ast.parse(expression, mode="eval")
    return _evaluate(tree.body)


def _evaluate(node: ast.expr) -> float | int:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) \
            and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > MAX_EXPONENT:
            raise ValueError(f"exponent {right} is larger than {MAX_EXPONENT}")
        return _BINARY[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_evaluate(node.operand))
    raise ValueError(f"only numbers and + - * / ** ( ) are allowed, not {ast.unparse(node)!r}")


def convert_currency(amount: float, from_currency: str, to_currency: str) -> dict[str, Any]:
    """Convert with the fixed table; the result says where its rate came from."""
    pair = (from_currency.upper(), to_currency.upper())
    if pair not in RATES:
        known = ", ".join(f"{a}->{b}" for a, b in RATES)
        raise KeyError(f"no rate for {pair[0]}->{pair[1]} (known: {known})")
    rate = RATES[pair]
    return {"amount": round(amount * rate, 2), "currency": pair[1], "rate": rate, "rates": RATES_LABEL}


def demo_registry() -> ToolRegistry:
    registry = ToolRegistry()
    registry.register(
        "calculate", "Evaluate an arithmetic expression (numbers, + - * / ** and parentheses).",
        {"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]},
        calculate,
    )
    registry.register(
        "convert_currency", f"Convert an amount between currencies ({RATES_LABEL}).",
        {"type": "object",
         "properties": {"amount": {"type": "number"},
                        "from_currency": {"type": "string", "enum": ["EUR", "USD", "GBP"]},
                        "to_currency": {"type": "string", "enum": ["EUR", "USD", "GBP"]}},
         "required": ["amount", "from_currency", "to_currency"]},
        convert_currency,
    )
    return registry


def demo_model() -> ScriptedModel:
    """The replies a good model gives for ``DEMO_TASK``, scripted."""
    return ScriptedModel([
        ModelReply("First the bill with the tip, per person.",
                   [ToolCall("call_1", "calculate", {"expression": "127.50 * 1.18 / 4"})]),
        ModelReply("", [ToolCall("call_2", "convert_currency",
                                 {"amount": 37.6125, "from_currency": "EUR", "to_currency": "USD"})]),
        ModelReply("Each person pays $40.62: EUR 127.50 plus an 18% tip is EUR 150.45, "
                   "split 4 ways is EUR 37.61 each, at 1.08 USD per EUR (fixed demo rate)."),
    ])


@dataclass
class TipSplit:
    """The demo's answer as a typed result (``runner demo --typed``, ``output_type=TipSplit``)."""

    people: int
    total_eur: float
    each_eur: float
    each_usd: float


def demo_typed_model() -> ScriptedModel:
    """``demo_model``'s replies, ending with the split as a ``final_result`` call instead of text."""
    *work, _ = demo_model().replies
    split = {"people": 4, "total_eur": 150.45, "each_eur": 37.61, "each_usd": 40.62}
    return ScriptedModel([*work, ModelReply("", [ToolCall("call_3", "final_result", split)])])


def main() -> None:
    from ._run.agent import run_agent

    result = run_agent(DEMO_TASK, demo_model(), demo_registry())
    for message in result.messages:
        calls = message["tool_calls"] if message["role"] == "assistant" else []
        text = message["content"] or ", ".join(f"{c['name']}({c['args']})" for c in calls)
        print(f"{message['role']:>9}: {text}")
    print(f"\nstatus: {result.status}  steps: {result.steps}  tokens: {result.tokens}  run id: {result.run_id}")
    print(f"answer: {result.answer}")


if __name__ == "__main__":
    main()
