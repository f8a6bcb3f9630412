"""Every docstring in runner/ says what in one line, then why in at most five lines."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "runner"
MAX_WHY_LINES = 5

SECTION = re.compile(r"(Args|Arguments|Returns|Raises|Yields):$")
DOCTEST = (">>>", "...")
CLICK_VERBATIM = "\b"  # click's mark for a paragraph printed as written, such as the examples of a command


class Docstring(NamedTuple):
    """One docstring and where it is, as ``runner/path.py:line name``."""

    where: str
    text: str


def problems(doc: str) -> list[str]:
    """Say what is wrong with one docstring, or nothing when it keeps the rule."""
    lines = doc.expandtabs().strip("\n").splitlines()
    first = lines[0].strip() if lines else ""
    found = []
    if not first.endswith("."):
        found.append(f"the first line does not end with a period: {first!r}")
    if len(lines) > 1 and lines[1].strip():
        found.append("the first line runs on into a second line")
    prose = _prose_lines(_dedented(lines[1:]))
    if len(prose) > MAX_WHY_LINES:
        found.append(f"{len(prose)} lines of prose after the first line (at most {MAX_WHY_LINES}): {prose[0]!r} ...")
    return found


def _dedented(lines: list[str]) -> list[str]:
    """Remove the common indentation of the lines after the first, as Python's help() does."""
    indents = [len(line) - len(line.lstrip()) for line in lines if line.strip()]
    cut = min(indents, default=0)
    return [line[cut:] for line in lines]


def _prose_lines(lines: list[str]) -> list[str]:
    """Keep the prose lines, leaving out sections, indented blocks and doctest examples.

    An indented block starts after a blank line or a line ending with a colon;
    an indented line right under a prose line is that prose running on, so it counts.
    """
    prose: list[str] = []
    in_section = in_doctest = in_block = False
    before = ""
    for line in lines:
        if line == CLICK_VERBATIM:
            line = ""
        if not line.strip():
            in_section = in_doctest = in_block = False
        elif line[0].isspace():
            in_block = in_block or not before.strip() or before.rstrip().endswith(":")
            if not (in_block or in_section or in_doctest):
                prose.append(line)
        elif SECTION.match(line):
            in_section = True
        elif line.startswith(DOCTEST):
            in_doctest = True
        elif not (in_section or in_doctest):
            in_block = False
            prose.append(line)
        before = line
    return prose


def docstrings() -> Iterator[Docstring]:
    """Yield every module, class and function docstring in the package with where it is."""
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            doc = ast.get_docstring(node, clean=False)
            if doc is not None:
                line = 1 if isinstance(node, ast.Module) else node.lineno
                name = "<module>" if isinstance(node, ast.Module) else node.name
                yield Docstring(f"runner/{relative}:{line} {name}", doc)


def test_every_docstring_says_what_in_one_line_then_why_in_five() -> None:
    bad = [f"{where}: {problem}" for where, doc in docstrings() for problem in problems(doc)]
    assert not bad, "\n".join(bad)


def test_the_walk_finds_docstrings_in_every_area() -> None:
    places = {where.split(":")[0].split("/")[1] for where, _ in docstrings()}
    assert {"_loop", "_log", "_tools", "_replay", "tracing", "cli", "adapters", "errors.py", "recorder.py"} <= places


def runner_errors() -> set[str]:
    """Name every public class in the package that derives from ``RunnerError``."""
    bases: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                bases.setdefault(node.name, set()).update(b.id for b in node.bases if isinstance(b, ast.Name))
    found = {"RunnerError"}
    while grown := {name for name, of in bases.items() if of & found} - found:
        found |= grown
    return found


def test_the_error_tree_names_every_runner_error() -> None:
    doc = ast.get_docstring(ast.parse((PACKAGE / "errors.py").read_text(encoding="utf-8"))) or ""
    drawn = set(re.findall(r"^ +(?:[│ ]*[├└]── )?(\w+)", doc, re.M))
    assert {"RunnerError", "StoreError", "EventDecodeError", "PoolError"} <= runner_errors()
    assert drawn == runner_errors()


@pytest.mark.parametrize(
    ("doc", "complaint"),
    [
        ("Says what, with no period", "does not end with a period"),
        ("Says what\nover two lines.", "runs on into a second line"),
        ("Says what.\n\n" + "why\n" * 6, "6 lines of prose"),
        ("Says what.\n\n    why\n    " + "why\n    " * 5, "6 lines of prose"),
        ("Says what.\n\n\b\n" + "runner runs\n" * 6, "6 lines of prose"),
        ("Says what.\n\n- a bullet\n  that runs on\n- b\n  on\n  on\n  on\n", "6 lines of prose"),
    ],
)
def test_a_docstring_that_breaks_the_rule_is_named(doc: str, complaint: str) -> None:
    assert any(complaint in problem for problem in problems(doc))


@pytest.mark.parametrize(
    "doc",
    [
        "Says what.",
        "Says what.\n\n" + "why\n" * 5,
        "Says what.\n\nwhy\n\nArgs:\n    a: one.\n    b: two.\n\nReturns:\n    three.\n",
        "Says what.\n\nThe tree::\n\n    Error\n    ├── A\n    └── B\n" + "    more\n" * 10,
        "Says what.\n\n>>> f(1)\n2\n>>> f(2)\n3\n",
        "Says what.\n\nwhy\n\n\b\n  runner runs\n" + "  runner runs --json\n" * 6,
    ],
)
def test_a_docstring_that_keeps_the_rule_passes(doc: str) -> None:
    assert problems(doc) == []
