"""A JSON Schema ``pattern`` (ECMA-262) rewritten for Rust's regex engine, so it means what it says.

ECMA-262's ``\\d``, ``\\w`` and ``\\b`` are ASCII, its ``\\s`` is a fixed list and its ``.``
stops at four line terminators; Rust's are Unicode-wide (``^\\d{4}$`` accepted Arabic-Indic
digits). Each is spelled out as an explicit class. Inside ``[...]`` Rust also reads ``[``,
``&&``, ``--`` and ``~~`` as nested classes and set operations, literal in ECMA-262, so a
class is rebuilt atom by atom with every literal escaped. Everything else passes through.
"""

from __future__ import annotations

import re
from typing import Final

_SPACE: Final = r"\t\n\x0B\x0C\r \xA0\u1680\u2000-\u200A\u2028\u2029\u202F\u205F\u3000\uFEFF"
_SHORTHANDS: Final = {"d": "0-9", "w": "A-Za-z0-9_", "s": _SPACE}
_DOT: Final = r"[^\n\r\u2028\u2029]"
# One escape: \xHH, \uHHHH, \u{H...}, \cX, or a backslash and one character.
_ESCAPE: Final = re.compile(r"\\(?:x[0-9A-Fa-f]{2}|u[0-9A-Fa-f]{4}|u\{[0-9A-Fa-f]+\}|c[A-Za-z]|.)", re.DOTALL)
_CLASS_META: Final = frozenset("[]\\-^&~")


def rust_pattern(pattern: str) -> str:
    """``pattern`` as Rust's ``regex`` crate reads it with ECMA-262's meaning."""
    out: list[str] = []
    at = 0
    while at < len(pattern):
        char = pattern[at]
        if char == "\\":
            escape = _escape_at(pattern, at)
            out.append(_outside(escape))
            at += len(escape)
        elif char == "[":
            text, at = _class(pattern, at)
            out.append(text)
        else:
            out.append(_DOT if char == "." else char)
            at += 1
    return "".join(out)


def _escape_at(pattern: str, at: int) -> str:
    found = _ESCAPE.match(pattern, at)
    return found.group() if found else "\\"  # a lone trailing backslash: Rust refuses it


def _outside(escape: str) -> str:
    letter = escape[1:]
    plain = _SHORTHANDS.get(letter.lower()) if len(letter) == 1 else None
    if plain is not None:
        return f"[{plain}]" if letter.islower() else f"[^{plain}]"
    if letter in ("b", "B"):
        return f"(?-u:{escape})"  # a word boundary by ECMA-262's ASCII \w
    return escape


def _class(pattern: str, start: int) -> tuple[str, int]:
    """The class opening at ``start`` rewritten, and where it ends (past its ``]``)."""
    at = start + 1
    negated = pattern.startswith("^", at)
    at += 1 if negated else 0
    atoms: list[str] = []
    while at < len(pattern) and pattern[at] != "]":
        atom = _escape_at(pattern, at) if pattern[at] == "\\" else pattern[at]
        atoms.append(atom)
        at += len(atom)
    if at >= len(pattern):  # never closed: left for Rust to refuse
        return pattern[start:], at
    if not atoms:  # ECMA-262's [] matches nothing, [^] any character
        return (r"[\s\S]" if negated else r"[^\s\S]"), at + 1
    return ("[^" if negated else "[") + _ranges(atoms) + "]", at + 1


def _ranges(atoms: list[str]) -> str:
    out: list[str] = []
    index = 0
    while index < len(atoms):
        atom = atoms[index]
        if index + 2 < len(atoms) and atoms[index + 1] == "-" and _single(atom) and _single(atoms[index + 2]):
            out.append(f"{_literal(atom)}-{_literal(atoms[index + 2])}")
            index += 3
            continue
        out.append(_inside(atom))
        index += 1
    return "".join(out)


def _single(atom: str) -> bool:
    """Whether ``atom`` is one character (a range's end), not a class such as ``\\d``."""
    return not (len(atom) == 2 and atom[0] == "\\" and atom[1].lower() in _SHORTHANDS)


def _inside(atom: str) -> str:
    if not _single(atom):
        plain = _SHORTHANDS[atom[1].lower()]
        return plain if atom[1].islower() else f"[^{plain}]"
    return _literal(atom)


def _literal(atom: str) -> str:
    if atom == "\\b":
        return r"\x08"  # backspace, inside a class
    if len(atom) == 1 and atom in _CLASS_META:
        return "\\" + atom
    return atom
