"""The README's claims that code can check: the schema block and the Python example."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from runner.store.schema_doc import END, START, generated_block

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_starts_with_the_two_setup_commands() -> None:
    head = README.read_text(encoding="utf-8").splitlines()[:6]
    assert head[2:5] == ["```sh", "make demo   # creates .venv, installs, runs the bundled example on the embedded "
                         "SQLite default", "make test   # creates .venv if needed, runs ruff, mypy --strict and the "
                         "whole test suite"]


def test_readme_schema_block_matches_the_migrated_database() -> None:
    text = README.read_text(encoding="utf-8")
    block = text[text.index(START): text.index(END) + len(END)]
    assert block == generated_block(), "regenerate with: python -m runner.store.schema_doc README.md"


def test_readme_python_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## The loop in Python"):]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None
    monkeypatch.chdir(tmp_path)
    exec(compile(code.group(1), "README.md", "exec"), {})
    status, answer_and_id = capsys.readouterr().out.split(" ", 1)
    assert status == "done"
    assert answer_and_id.startswith("It is 21 C in Paris. ")
    assert (tmp_path / "runs.db").exists()


def test_readme_tip_test_snippet_passes_the_projects_ruff() -> None:
    text = README.read_text(encoding="utf-8")
    code = re.search(r"```python\n(# tests/test_tip\.py.*?)```", text, re.S)
    assert code is not None
    ruff = Path(sys.executable).parent / "ruff"
    found = subprocess.run([str(ruff), "check", "--no-cache", "--config", "pyproject.toml", "--output-format",
                            "concise", "--stdin-filename", "tests/test_tip.py", "-"],
                           input=code.group(1), capture_output=True, text=True, cwd=README.parent, check=False)
    assert (found.returncode, found.stdout) == (0, "All checks passed!\n")
