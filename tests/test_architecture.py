"""The package map in docs/architecture.md holds: who may import whom, and the size rules."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

RUNNER = Path(__file__).resolve().parent.parent / "runner"

KERNEL = frozenset({"errors", "messages", "events", "_text", "_jsontext", "_log"})
# Each part of runner (a subpackage, or a module directly in runner/) and the other parts it may import.
MAY_IMPORT: dict[str, frozenset[str]] = {
    "errors": frozenset(),
    "messages": frozenset(),
    "_text": frozenset(),
    "_jsontext": frozenset(),
    "events": KERNEL,
    "_log": KERNEL,
    "recorder": KERNEL,
    "progress": KERNEL,
    "_tools": KERNEL | {"mcp"},  # add_mcp imports runner.mcp inside the call, so importing the registry never loads it
    "mcp": KERNEL,
    "store": KERNEL,  # and _replay inside RunStore.export_fixture only (LAZY_EDGES)
    "tracing": KERNEL,
    "adapters": KERNEL,
    "prices": KERNEL,
    "_loop": KERNEL | {"_tools", "recorder", "prices"},  # the loop and its drivers: no store, no tracer
    "_run": KERNEL | {"_tools", "_loop", "recorder", "store", "tracing", "prices"},
    "_replay": KERNEL | {"_tools", "_loop", "_run", "recorder", "store"},
    "demo": KERNEL | {"_tools", "_loop", "_run", "_replay"},
    "pool": KERNEL | {"_tools", "_loop", "_run", "recorder", "store"},
    "testing": KERNEL | {"_tools", "_loop", "_run", "_replay", "recorder", "store"},
    "streaming": KERNEL | {"_run"},  # the public names of stream_agent's events
    "_view": KERNEL | {"_tools", "store"},
    "_rerun": KERNEL | {"_tools", "_loop", "_run", "recorder", "store", "tracing", "prices", "_view"},
    "ui": KERNEL | {"_view", "_tools", "_loop", "_run", "_replay", "_rerun", "recorder", "store", "tracing", "pool",
                    "adapters"},
    "cli": KERNEL | {"_view", "_tools", "_loop", "_run", "_replay", "recorder", "store", "tracing", "pool",
                     "progress", "demo", "adapters", "ui", "prices", "mcp", "_rerun"},
    "__init__": KERNEL | {"_tools", "_loop", "_run", "_replay", "recorder", "store", "tracing", "pool", "progress",
                          "_rerun"},
}
# The one edge that runs upward, imported inside one function: (importing module, imported module).
# RunStore.export_fixture is documented (docs/replay.md); replay owns the file's format and imports the store.
LAZY_EDGES = frozenset({("runner.store.runstore", "runner._replay.fixture")})
# Standard-library modules that reach files, processes or sockets: the kernel imports none of them.
IO_MODULES = frozenset({"os", "socket", "subprocess", "tempfile", "pathlib", "shutil", "io", "glob", "signal",
                        "multiprocessing", "urllib", "http", "sqlite3"})
# Third-party layers and the parts that may import them (progress prints its lines with rich, as the CLI does).
OUTSIDE = {"sqlalchemy": {"store"}, "alembic": {"store"}, "click": {"cli"}, "rich": {"cli", "progress"},
           "celery": {"pool"}, "kombu": {"pool"},
           "starlette": {"ui"}, "uvicorn": {"ui"}, "jinja2": {"ui"}, "genai_prices": {"prices"},
           "mcp": {"mcp"}, "anyio": {"mcp"}, "httpx2": {"mcp"}}


def _modules() -> list[tuple[str, Path]]:
    found = []
    for path in sorted(RUNNER.rglob("*.py")):
        parts = list(path.relative_to(RUNNER.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found.append((".".join(parts), path))
    return found


def _part(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _imports(module: str, path: Path, *, top_only: bool = False) -> Iterator[str]:
    """Every module ``module`` imports, at the top, in a function or for types alone (``top_only``: at the top)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in (_top_level(tree) if top_only else ast.walk(tree)):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            yield target
            if target == "runner" or (target.count(".") == 1 and target.startswith("runner._")):
                yield from (f"{target}.{alias.name}" for alias in node.names)


def _top_level(tree: ast.Module) -> Iterator[ast.stmt]:
    """The statements run when the module loads: its body, and the bodies of its top-level ``if``/``try``."""
    pending: list[ast.stmt] = list(tree.body)
    while pending:
        node = pending.pop(0)
        yield node
        if isinstance(node, ast.If | ast.Try):
            pending.extend([*node.body, *node.orelse, *getattr(node, "handlers", []), *getattr(node, "finalbody", [])])


MODULES = _modules()


def test_every_part_of_runner_is_on_the_map() -> None:
    assert {_part(module) for module, _ in MODULES} <= set(MAY_IMPORT)


def test_each_part_imports_only_what_the_map_allows() -> None:
    wrong = []
    for module, path in MODULES:
        part = _part(module)
        at_top = set(_imports(module, path, top_only=True))
        for target in _imports(module, path):
            if target.startswith("runner.") and _part(target) not in (part, *MAY_IMPORT[part]):
                lazy = target not in at_top and any(target.startswith(edge) for m, edge in LAZY_EDGES if m == module)
                if not lazy:
                    wrong.append(f"{module} imports {target}")
    assert wrong == []


def test_the_kernel_does_no_io() -> None:
    """The kernel is vocabulary: owner probing is the store's (store/owner.py), the fixture file replay's."""
    assert not (RUNNER / "_log" / "owner.py").exists()
    assert sorted(RUNNER.glob("_log/fixture*.py")) == []
    kernel = [(module, path) for module, path in MODULES if _part(module) in KERNEL]
    assert {"runner.events", "runner._log.codec", "runner._log.facts", "runner._log.records"} <= dict(kernel).keys()
    wrong = [f"{module} imports {target}" for module, path in kernel for target in _imports(module, path)
             if target.partition(".")[0] in IO_MODULES]
    assert wrong == []
    for module, path in kernel:  # nor opens a file through a builtin
        calls = [node.func.id for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                 if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)]
        assert "open" not in calls, module


def test_the_kernel_subpackage_imports_neither_store_nor_tracing() -> None:
    """The loop (``_loop``: the core and its drivers) does no I/O of its own, not even for types.

    The assembly that wires a run to a store and a tracer is ``_run``'s.
    """
    wrong = [f"{module} imports {target}" for module, path in MODULES if _part(module) == "_loop"
             for target in _imports(module, path)
             if target.startswith("runner.") and _part(target) in ("store", "tracing")]
    assert wrong == []
    assert not MAY_IMPORT["_loop"] & {"store", "tracing", "_run"}


def test_third_party_layers_stay_in_their_part() -> None:
    wrong = [f"{module} imports {target}" for module, path in MODULES for target in _imports(module, path)
             if _part(module) not in OUTSIDE.get(target.partition(".")[0], {_part(module)})]
    assert wrong == []


def test_at_most_twelve_modules_directly_in_runner() -> None:
    direct = sorted(path.name for path in RUNNER.glob("*.py"))
    assert len(direct) <= 12, direct


@pytest.mark.parametrize("path", [pytest.param(path, id=module) for module, path in MODULES])
def test_no_module_passes_400_lines(path: Path) -> None:
    assert len(path.read_text(encoding="utf-8").splitlines()) <= 400


def test_the_log_is_decoded_in_at_most_two_modules_outside_the_store_and_the_codec() -> None:
    callers = set()
    for module, path in MODULES:
        if _part(module) == "store" or module == "runner._log.codec":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name | ast.Attribute):
                name = node.func.id if isinstance(node.func, ast.Name) else node.func.attr
                if name == "decode_all":
                    callers.add(module)
    assert len(callers) <= 2, sorted(callers)


def _ui_graph() -> dict[str, set[str]]:
    """The console's modules and the ones of them each imports, at the top, in a function or for types alone.

    ``from . import pages`` imports ``runner.ui.pages``, not the package's ``__init__``.
    """
    ui = {module: path for module, path in MODULES if module.startswith("runner.ui")}
    graph: dict[str, set[str]] = {module: set() for module in ui}
    for module, path in ui.items():
        for target in _imports(module, path):
            if target in ui and target != module:
                graph[module].add(target)
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module is None:
                graph[module] |= {f"{package}.{alias.name}" for alias in node.names} & set(ui)
        if path.name != "__init__.py":  # "from . import x" resolved above; the package itself is no edge of it
            graph[module].discard("runner.ui")
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle in ``graph`` (its modules, the first again at the end), or [] when there is none."""
    done: set[str] = set()
    path: list[str] = []

    def visit(node: str) -> list[str]:
        if node in path:
            return [*path[path.index(node):], node]
        if node in done:
            return []
        path.append(node)
        for target in sorted(graph.get(node, ())):
            found = visit(target)
            if found:
                return found
        path.pop()
        done.add(node)
        return []

    for start in sorted(graph):
        found = visit(start)
        if found:
            return found
    return []


def test_the_cycle_finder_finds_a_cycle_through_a_type_only_import() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) == []
    found = _ui_graph()
    assert "runner.ui.state" in found["runner.ui.http"]  # a type the helpers read: the graph sees it
    assert {"runner.ui.api", "runner.ui.pages", "runner.ui.http"} <= found["runner.ui.app"]


def test_no_import_cycle_among_the_consoles_modules() -> None:
    assert _cycle(_ui_graph()) == []


def _command_modules() -> set[str]:
    """The CLI's command modules: those ``runner/cli/__init__.py``'s command table names (``"run": "run:run"``)."""
    tree = ast.parse((RUNNER / "cli" / "__init__.py").read_text(encoding="utf-8"))
    table = next(node.value for node in ast.walk(tree) if isinstance(node, ast.Assign)
                 and any(isinstance(target, ast.Name) and target.id == "COMMANDS" for target in node.targets))
    assert isinstance(table, ast.Dict)
    return {f"runner.cli.{value.value.partition(':')[0]}" for value in table.values
            if isinstance(value, ast.Constant) and isinstance(value.value, str)}


def test_no_cli_command_module_imports_another() -> None:
    commands = _command_modules()
    assert {"runner.cli.run", "runner.cli.resume", "runner.cli.show"} <= commands
    wrong = [f"{module} imports {target}" for module, path in MODULES if module in commands
             for target in _cli_imports(module, path) if target in commands - {module}]
    assert wrong == []


def _cli_imports(module: str, path: Path) -> Iterator[str]:
    """``_imports``, with ``from . import show`` read as an import of ``runner.cli.show``."""
    yield from _imports(module, path)
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module is None:
            yield from (f"runner.cli.{alias.name}" for alias in node.names)


def test_the_command_module_rule_sees_an_import_of_one_command_module_from_another(tmp_path: Path) -> None:
    commands = _command_modules()
    stats = tmp_path / "stats.py"
    stats.write_text("from .show import when_option\nfrom . import resume\nfrom .render import plural\n")
    assert {target for target in _cli_imports("runner.cli.stats", stats) if target in commands} == {
        "runner.cli.show", "runner.cli.resume"}
