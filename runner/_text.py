"""Text from models, tools and exceptions, made safe to format and to store.

Anything a model, a tool or a user's exception hands the loop is untrusted: an
exception's ``__str__`` may raise, and a string may hold what no database column
accepts (a lone surrogate, which UTF-8 cannot encode; NUL, which PostgreSQL's
text refuses). The event log keeps such text exactly (``events.data`` is JSON,
which escapes both); only the summary columns get ``storable``'s rendering.
"""

from __future__ import annotations

import re
from typing import overload

# Code points no text column takes on every backend: lone surrogates and NUL.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
_SURROGATE = re.compile("[\ud800-\udfff]")
REPLACEMENT = "\ufffd"


@overload
def storable(text: str) -> str: ...
@overload
def storable(text: None) -> None: ...
def storable(text: str | None) -> str | None:
    """``text`` as every backend can store it: the one rule for summary columns.

    NUL is dropped (PostgreSQL's text refuses it; it is a control character no display
    shows) and each lone surrogate (UTF-8 cannot encode one) becomes U+FFFD, the
    replacement character. A surrogate pair spelt as two code points
    (``"\\ud83d\\ude00"``) is two lone surrogates to UTF-8: two replacement characters.
    """
    if text is None or _UNSTORABLE.search(text) is None:
        return text
    return _SURROGATE.sub(REPLACEMENT, text.replace("\x00", ""))


def escape_surrogates(json_text: str) -> str:
    """JSON text (from ``ensure_ascii=False``) with each lone surrogate written as its ``\\uXXXX`` escape.

    Outside strings JSON has no surrogates, so this is the same JSON, and now it can be
    written as UTF-8; reading it back gives the exact string again.
    """
    if _SURROGATE.search(json_text) is None:
        return json_text
    return _SURROGATE.sub(lambda found: f"\\u{ord(found.group()):04x}", json_text)


def describe_exception(exc: BaseException) -> str:
    """``"TypeName: message"``, or the type name alone for an empty message; never raises.

    The loop formats exceptions raised by user code (models, tools, callbacks), whose
    ``__str__`` may itself raise: that becomes ``<str() failed: ErrorType>``.
    """
    name = type(exc).__name__
    try:
        message = str(exc)
    except Exception as failure:
        message = f"<str() failed: {type(failure).__name__}>"
    return f"{name}: {message}" if message else name
