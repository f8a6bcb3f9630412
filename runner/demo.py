"""The bundled example: an 18% tip on a EUR 127.50 bill split 4 ways, in USD; and its sub-agents' variant.

Two tools a reader can trust: ``calculate`` walks the expression's AST and
allows only numbers, + - * / ** and parentheses (never ``eval``), and
``convert_currency`` reads a fixed, labelled rate table (not live rates).
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ._replay.scripted import ScriptedModel
from ._tools.registry import ToolRegistry
from .messages import Message, ModelReply, ToolCall, ToolSpec

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


# ``runner demo --subagents``: a planner with two sub-agents, the mailer's ``send_mail`` waiting for approval.
TEAM_TASK = "Work out what each person pays for tonight's dinner (the tip split) and mail it to the team."
TEAM = "team@example.com"
OUTBOX_LABEL = "demo outbox: nothing leaves this machine"


def send_mail(to: str, subject: str, body: str) -> dict[str, Any]:
    """Put the mail in the demo's outbox (no network): what a real mailer would confirm."""
    return {"queued_for": to, "subject": subject, "chars": len(body), "outbox": OUTBOX_LABEL}


class TurnModel:
    """Scripted replies by turn: the reply for the conversation's n-th model call (its assistant messages so far).

    A resumed run asks again for the turn where it stopped, so a demo run goes on in another process.
    ``answer`` gives the last turn's reply from the last tool result (a denied mail is not "sent").
    """

    model_name = "scripted"
    provider_name = "scripted"

    def __init__(self, replies: list[ModelReply], answer: Callable[[str], str]) -> None:
        self.replies, self.answer = replies, answer

    def __call__(self, messages: Sequence[Message], tool_specs: Sequence[ToolSpec]) -> ModelReply:
        turn = sum(1 for m in messages if m["role"] == "assistant")
        if turn < len(self.replies):
            return self.replies[turn]
        last = next((m["content"] for m in reversed(messages) if m["role"] == "tool"), "")
        return ModelReply(self.answer(last))


def researcher_model() -> TurnModel:
    """``demo_model``'s work, by turn: the sub-agent that works the numbers out."""
    *work, answer = demo_model().replies
    return TurnModel(work, lambda last: answer.content)


def mailer_model() -> TurnModel:
    body = "Each person pays $40.62 (EUR 37.61) for dinner, an 18% tip on EUR 127.50 included."
    mail = ModelReply("", [ToolCall("mail_1", "send_mail", {"to": TEAM, "subject": "Dinner", "body": body})])
    return TurnModel([mail], lambda last: (f"Not sent: {last.removeprefix('ERROR: ')}" if last.startswith("ERROR")
                                           else f"Sent to {TEAM}."))


def planner_model() -> TurnModel:
    """The planner: asks the researcher, hands the mail to the mailer, then reports."""
    research = ModelReply("First the numbers.", [ToolCall("call_1", "researcher", {"task": DEMO_TASK})])
    mail = ModelReply("Now the mail.", [ToolCall("call_2", "mailer", {
        "task": f"Mail {TEAM}, subject Dinner: each person pays $40.62 (EUR 37.61), an 18% tip on EUR 127.50 "
                "included."})])

    def answer(last: str) -> str:
        if last.startswith(("Not sent", "ERROR")):
            return f"Each person pays $40.62 (EUR 37.61), but the team was not mailed. {last}"
        return f"Each person pays $40.62 (EUR 37.61); the team has it by mail ({TEAM})."

    return TurnModel([research, mail], answer)


def subagents_registry() -> ToolRegistry:
    """The planner's tools: the sub-agents ``researcher`` (the demo's tools) and ``mailer`` (``send_mail``)."""
    mail = ToolRegistry()
    mail.register("send_mail", f"Send a mail ({OUTBOX_LABEL}).",
                  {"type": "object", "properties": {"to": {"type": "string"}, "subject": {"type": "string"},
                                                    "body": {"type": "string"}},
                   "required": ["to", "subject", "body"]},
                  send_mail, side_effects=True, needs_approval=True)
    planner = ToolRegistry()
    planner.add_agent("researcher", model=researcher_model(), registry=demo_registry(),
                      description="Works out sums and currency conversions; give it the whole question.")
    planner.add_agent("mailer", model=mailer_model(), registry=mail,
                      description="Sends one mail; give it the recipient, the subject and the text.")
    return planner


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
