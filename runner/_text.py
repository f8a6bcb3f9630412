"""Make text from models, tools and exceptions safe to format, to store and to print.

Such text is untrusted: an exception's ``__str__`` may raise, and a string may hold a lone
surrogate or a NUL, which UTF-8 or PostgreSQL's text refuses. The log keeps it exactly; the summary
columns get ``storable``'s rendering. Before text reaches a terminal, ``clean`` removes escape
sequences, control characters but newline and tab, and the bidirectional overrides; a name (of a
tool, a label, an agent, a model) is ``shown_name``, with what cannot be seen escaped.
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


# Terminal control: escape sequences, and the controls no terminal line should carry.
ESCAPES = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]"             # CSI: ESC [ params intermediates final (or 8-bit CSI)
    r"|(?:\x1b[]PX^_]|[\x90\x98\x9d\x9e\x9f])"       # OSC, DCS, SOS, PM, APC: a string up to its terminator
    r"[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c|$)"
    r"|\x1b[ -/]*[0-~]"                              # other ESC sequences (charset, keypad, RIS...)
    r"|\x1b"                                         # a lone ESC at the very end
)
# C0 except tab and newline, DEL, C1, and the bidi embeddings, overrides and isolates.
CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
SPACES = re.compile(r"\s+")


def clean(text: object) -> str:
    """``text`` as a string without terminal control sequences (newline and tab kept)."""
    plain = CONTROLS.sub("", ESCAPES.sub("", text if isinstance(text, str) else str(text)))
    return escape_surrogates(plain)  # a lone surrogate cannot be encoded for the terminal: its escape, as JSON has


def one_line(text: object) -> str:
    """``clean`` with every run of whitespace (newlines included) made one space."""
    return SPACES.sub(" ", clean(text)).strip()


# Printable to Python yet invisible: the combining grapheme joiner, the Hangul fillers, the braille
# blank, the variation selectors. (``str.isprintable`` is False for the controls, the format characters
# such as U+200B..U+200F, U+2060 and U+FEFF, the bidi controls, the separators and spaces but U+0020.)
_INVISIBLE = frozenset("\u034f\u115f\u1160\u3164\uffa0\u2800") | frozenset(map(chr, range(0xFE00, 0xFE10)))


def shown_name(name: object) -> str:
    """A name as printed: terminal sequences dropped, every invisible or control character escaped (``ech\\u200bo``).

    So ``echo`` and ``ech<U+200B>o`` never look alike, nor a name whose bidi override turns it
    around. A backslash is doubled, so an escape cannot be faked. Only names: free text (a task,
    an answer) keeps its joiners, which emoji and Indic or Persian words need.
    """
    text = ESCAPES.sub("", name if isinstance(name, str) else str(name))
    if text.isprintable() and "\\" not in text and _INVISIBLE.isdisjoint(text):
        return text
    return "".join(_escaped(char) for char in text)


def _escaped(char: str) -> str:
    if char == "\\":
        return "\\\\"
    if char.isprintable() and char not in _INVISIBLE:
        return char
    code = ord(char)
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def plural(count: int, noun: str) -> str:
    """``1 step``, ``2 steps``, ``3 replies``: a count and its noun, agreeing."""
    if count == 1:
        return f"{count} {noun}"
    if noun.endswith("y") and noun[-2:-1] not in ("a", "e", "o", "u"):
        return f"{count} {noun[:-1]}ies"
    return f"{count} {noun}s"
