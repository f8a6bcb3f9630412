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
    "store": KERNEL,
    "tracing": KERNEL,
    "adapters": KERNEL,
    "prices": KERNEL,
    "_loop": KERNEL | {"_tools", "recorder", "store", "tracing", "prices"},
    "_replay": KERNEL | {"_tools", "_loop", "recorder", "store"},
    "demo": KERNEL | {"_tools", "_loop", "_replay"},
    "pool": KERNEL | {"_tools", "_loop", "recorder", "store"},
    "testing": KERNEL | {"_tools", "_loop", "_replay", "recorder", "store"},
    "_view": KERNEL | {"store"},
    "_rerun": KERNEL | {"_tools", "_loop", "recorder", "store", "tracing", "prices", "_view"},
    "ui": KERNEL | {"_view", "_tools", "_loop", "recorder", "store", "tracing", "pool", "adapters"},
    "cli": KERNEL | {"_view", "_tools", "_loop", "_replay", "recorder", "store", "tracing", "pool", "progress",
                     "demo", "adapters", "ui", "prices", "mcp", "_rerun"},
    "__init__": KERNEL | {"_tools", "_loop", "_replay", "recorder", "store", "tracing", "pool", "progress",
                          "_rerun"},
}
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


def _imports(module: str, path: Path) -> Iterator[str]:
    """Every module ``module`` imports, at the top, in a function or for types alone."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
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


MODULES = _modules()


def test_every_part_of_runner_is_on_the_map() -> None:
    assert {_part(module) for module, _ in MODULES} <= set(MAY_IMPORT)


def test_each_part_imports_only_what_the_map_allows() -> None:
    wrong = []
    for module, path in MODULES:
        part = _part(module)
        for target in _imports(module, path):
            if target.startswith("runner.") and _part(target) not in (part, *MAY_IMPORT[part]):
                wrong.append(f"{module} imports {target}")
    assert wrong == []


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
        if _part(module) == "store" or module == "runner.events":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name | ast.Attribute):
                name = node.func.id if isinstance(node.func, ast.Name) else node.func.attr
                if name == "decode_all":
                    callers.add(module)
    assert len(callers) <= 2, sorted(callers)


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
