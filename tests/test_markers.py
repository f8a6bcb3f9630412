"""Every test that starts or kills a process carries the ``process`` marker, so ``-m "not process"`` is fast.

The test modules are read with ``ast``, not imported. A test needs the marker (on itself, or
``pytestmark`` on its module) when its body, a function of its module it calls, a fixture of its
module it takes, or a helper it imports from ``tests`` starts a process (``subprocess``,
``os.fork``, ``multiprocessing``, ``asyncio.create_subprocess_*``) or signals one (``os.kill``).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

TESTS = Path(__file__).resolve().parent
PROCESS_MODULES = {"subprocess", "multiprocessing", "concurrent.futures.process"}
PROCESS_CALLS = {("os", "fork"), ("os", "forkpty"), ("os", "kill"), ("os", "killpg"), ("os", "system"),
                 ("os", "popen"), ("os", "posix_spawn"), ("os", "posix_spawnp"), ("asyncio", "create_subprocess_exec"),
                 ("asyncio", "create_subprocess_shell")}


def module_name(path: Path) -> str:
    return ".".join(("tests", *path.relative_to(TESTS).with_suffix("").parts))


def tree_of(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), str(path))


def process_names(tree: ast.Module, spawning: dict[str, set[str]]) -> set[str]:
    """The names a module binds to process machinery: its imports of ``subprocess`` and the like,
    and what it imports from a ``tests`` module whose definitions start processes."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.asname or a.name for a in node.names
                      if a.name.split(".")[0] in {"subprocess", "multiprocessing"}}
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module in PROCESS_MODULES or node.module.split(".")[0] == "multiprocessing":
                names |= {a.asname or a.name for a in node.names}
            names |= {a.asname or a.name for a in node.names if a.name in spawning.get(node.module, set())}
    return names


def uses_process(node: ast.AST, names: set[str]) -> bool:
    """Whether ``node`` (a function's whole body) refers to process machinery directly."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and sub.id in names:
            return True
        if (isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name)
                and (sub.value.id, sub.attr) in PROCESS_CALLS):
            return True
    return False


def parameters(node: ast.stmt) -> set[str]:
    """A function's parameter names (for a test or fixture, the fixtures it takes); none for a class."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        return {a.arg for a in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs)}
    return set()


def spawners(tree: ast.Module, names: set[str]) -> set[str]:
    """The module's top-level functions and classes that start or signal a process: directly, by
    calling one that does, or (a test or fixture) by taking a fixture that does."""
    defs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)}
    found = {name for name, node in defs.items() if uses_process(node, names)}
    while more := {name for name, node in defs.items()
                   if name not in found and (uses_process(node, found) or parameters(node) & found)}:
        found |= more
    return found


def is_process_mark(node: ast.expr) -> bool:
    node = node.func if isinstance(node, ast.Call) else node
    return isinstance(node, ast.Attribute) and node.attr == "process" and ast.unparse(node.value) == "pytest.mark"


def module_marked(tree: ast.Module) -> bool:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(ast.unparse(t) == "pytestmark" for t in node.targets):
            marks = node.value.elts if isinstance(node.value, ast.List | ast.Tuple) else [node.value]
            return any(is_process_mark(m) for m in marks)
    return False


def unmarked(tree: ast.Module, spawning: dict[str, set[str]]) -> list[str]:
    """The tests of a module that start or signal a process without the ``process`` marker."""
    if module_marked(tree):
        return []
    found = spawners(tree, process_names(tree, spawning))
    return [node.name for node in tree.body
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test")
            and node.name in found and not any(is_process_mark(d) for d in node.decorator_list)]


def helper_spawners() -> dict[str, set[str]]:
    """For each helper module under tests/ (not a test module), its definitions that start a process."""
    helpers = [p for p in TESTS.rglob("*.py") if not p.name.startswith(("test_", "conftest"))]
    spawning: dict[str, set[str]] = {}
    for _ in helpers:  # a helper may use another one: repeat until nothing new is found
        for path in helpers:
            tree = tree_of(path)
            spawning[module_name(path)] = spawners(tree, process_names(tree, spawning))
    return spawning


def modules_of_tests() -> Iterator[Path]:
    yield from sorted(TESTS.rglob("test_*.py"))


def test_every_test_that_starts_or_kills_a_process_is_marked_process() -> None:
    spawning = helper_spawners()
    missing = {module_name(p): names for p in modules_of_tests() if (names := unmarked(tree_of(p), spawning))}
    assert missing == {}


SPAWNS = '''
import os, subprocess
import pytest
from tests.pool.helpers import Pool

def child():
    return subprocess.Popen(["true"])

@pytest.fixture
def started():
    return child()

def test_direct():
    os.kill(1, 0)

def test_through_a_function():
    child().wait()

def test_through_a_fixture(started):
    pass

def test_through_a_helper():
    Pool()

@pytest.mark.process
def test_marked():
    child()

def test_plain():
    assert True
'''


def test_the_scan_finds_each_way_a_test_can_start_a_process_and_accepts_the_marker() -> None:
    spawning = helper_spawners()
    assert "Pool" in spawning["tests.pool.helpers"]
    assert unmarked(ast.parse(SPAWNS), spawning) == [
        "test_direct", "test_through_a_function", "test_through_a_fixture", "test_through_a_helper"]
    assert unmarked(ast.parse("import pytest\npytestmark = [pytest.mark.process]\n" + SPAWNS), spawning) == []
