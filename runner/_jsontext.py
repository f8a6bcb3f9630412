"""Encode JSON at the loop's pace, with the standard library's encoders each built once.

``json.dumps`` with options builds an encoder on every call, which was a large share of a logged step.
Here the C encoder is made once per set of options and called directly; the text is the same, byte for byte.
A kept C encoder has no circular-reference memo, so a circular value recurses until ``RecursionError``.
That error is caught and the standard library encodes the value again, raising its usual error.
Without the C accelerator every call is the standard library's.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from json import encoder as _stdlib
from typing import Any

Encode = Callable[[Any], str]


def _kept(**options: Any) -> Encode:
    """``json.dumps(value, **options)`` with the encoder built once."""
    reference = json.JSONEncoder(**options)
    make = getattr(_stdlib, "c_make_encoder", None)
    if make is None or reference.indent is not None:
        return reference.encode
    text = _stdlib.encode_basestring_ascii if reference.ensure_ascii else _stdlib.encode_basestring
    fast = make(None, reference.default, text, None, reference.key_separator, reference.item_separator,
                reference.sort_keys, reference.skipkeys, reference.allow_nan)
    join = "".join

    def encode(value: Any) -> str:
        try:
            return join(fast(value, 0))
        except RecursionError:
            return reference.encode(value)  # circular: the standard library's own ValueError

    return encode


def finite(value: float) -> bool:
    """Whether a number is a finite float: False for inf, NaN and an int too large for any float.

    ``math.isfinite`` raises ``OverflowError`` for such an int (one JSON can spell: ``1`` and 400 zeros).
    """
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


standard: Encode = _kept()
"""``json.dumps(value)``: what the token estimate measures."""

sorted_keys: Encode = _kept(sort_keys=True)
"""``json.dumps(value, sort_keys=True)``: one text for equal values (the repeat guard's key)."""

strict: Encode = _kept(allow_nan=False)
"""``json.dumps(value, allow_nan=False)``: a tool's result as the model reads it."""

compact: Encode = _kept(separators=(",", ":"), default=repr)
"""The log's ``data``: no spaces, and anything that is not JSON as its ``repr``."""
