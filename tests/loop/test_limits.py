"""The incremental token estimate gives exactly the naive figures."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from runner._loop.tokens import TokenMeter, context_chars_of, cut_observation, naive_prompt_tokens
from runner.messages import Message
from tests.loop.helpers import weather_registry

text = st.text(max_size=40)
messages = st.lists(st.one_of(
    st.builds(lambda c: {"role": "user", "content": c}, text),
    st.builds(lambda c, a: {"role": "assistant", "content": c,
                            "tool_calls": [{"id": "x", "name": "n", "args": {"a": a}}]}, text, text),
    st.builds(lambda c: {"role": "tool", "tool_call_id": "x", "name": "n", "content": c}, text),
), max_size=30)


@given(messages)
def test_incremental_meter_equals_naive_after_every_append(msgs: list[Any]) -> None:
    specs = weather_registry().specs()
    fast = TokenMeter(specs)
    shown: list[Message] = []  # the naive figures re-serialise everything shown (bench/naive_meter.py)
    assert fast.prompt_tokens() == naive_prompt_tokens(specs, shown)
    for message in msgs:
        fast.add(message)
        shown.append(message)
        assert fast.prompt_tokens() == naive_prompt_tokens(specs, shown)
        assert fast.context_chars == sum(context_chars_of(m) for m in shown)


def test_cut_observation_keeps_short_text_and_marks_long_text() -> None:
    assert cut_observation("abc", 3) == "abc"
    assert cut_observation("abcdef", 2) == "ab... [cut: 4 more characters]"
    assert cut_observation("abcdef", None) == "abcdef"
