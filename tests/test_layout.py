"""The tests import each other one way: by full path (``from tests.cli.helpers import ...``), and never a test module.

What several test modules share lives in their folder's ``helpers.py`` (or ``tests/helpers.py``),
where a maintainer looks for it; a test module used as a library hides shared code among its tests.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def is_test_module(dotted: str) -> bool:
    return dotted.split(".")[0] == "tests" and dotted.split(".")[-1].startswith("test_")


def wrong_imports(source: str) -> list[str]:
    """Each relative import, and each import of a test module, in ``source``: ``line: what``."""
    wrong = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level:
            wrong.append(f"{node.lineno}: relative import from {'.' * node.level}{node.module or ''}")
        elif isinstance(node, ast.ImportFrom) and node.module:
            named = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            wrong += [f"{node.lineno}: imports test module {m}" for m in named if is_test_module(m)]
        elif isinstance(node, ast.Import):
            wrong += [f"{node.lineno}: imports test module {a.name}" for a in node.names if is_test_module(a.name)]
    return wrong


def test_tests_import_helpers_by_full_path_and_no_test_module() -> None:
    found = {str(path.relative_to(TESTS)): wrong for path in sorted(TESTS.rglob("*.py"))
             if (wrong := wrong_imports(path.read_text(encoding="utf-8")))}
    assert found == {}


def test_the_check_names_relative_imports_and_imported_test_modules() -> None:
    source = ("from .helpers import x\nfrom tests.cli.test_cli_run import y\nfrom tests.cli import test_cli_run\n"
              "import tests.tracing.test_tracing\nfrom tests.cli.helpers import invoke\nimport json\n")
    assert wrong_imports(source) == [
        "1: relative import from .helpers", "2: imports test module tests.cli.test_cli_run",
        "3: imports test module tests.cli.test_cli_run", "4: imports test module tests.tracing.test_tracing"]
