"""SQLite query parameters in a store's URL: ``mode=ro`` opens the store read-only and never creates a file;
an unknown parameter is refused in one line (not handed to the driver, which warned and ignored it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner import ScriptedModel, ToolRegistry, run_agent
from runner.errors import StoreError
from runner.store import NoStoreError, open_store
from tests.cli.helpers import invoke, one_error_line


def test_mode_ro_never_creates_the_file_it_names(tmp_path: Path) -> None:
    path = tmp_path / "ro.db"
    with pytest.raises(NoStoreError):
        open_store(f"sqlite:///{path}?mode=ro")
    assert not path.exists()


def test_mode_ro_opens_an_existing_store_read_only(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    with open_store(f"sqlite:///{path}") as store:
        run_id = run_agent("t", ScriptedModel(["done"]), ToolRegistry(), store=store).run_id
    before = path.stat().st_mtime_ns
    with open_store(f"sqlite:///{path}?mode=ro") as store:
        assert store.read_only
        assert store.get_run(run_id).status == "done"
        with pytest.raises(StoreError):
            run_agent("t", ScriptedModel(["done"]), ToolRegistry(), store=store)
    assert path.stat().st_mtime_ns == before


def test_an_unknown_sqlite_parameter_is_refused_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    with pytest.raises(StoreError, match=r"^cannot open store .*: unknown SQLite URL parameter 'cache' "):
        open_store(f"sqlite:///{path}?cache=shared")
    with pytest.raises(StoreError, match=r"^cannot open store .*: mode must be ro, got 'rwc'"):
        open_store(f"sqlite:///{path}?mode=rwc")
    assert not path.exists()


def test_a_command_that_must_write_says_so_and_creates_nothing(tmp_path: Path) -> None:
    path = tmp_path / "ro.db"
    result = invoke("demo", "--db", f"sqlite:///{path}?mode=ro")
    assert result.exit_code == 3
    assert one_error_line(result) == (f"Error: runner demo writes to its store, but sqlite:///{path}?mode=ro "
                                      "opens it read-only (mode=ro)")
    assert not path.exists()
    assert invoke("demo", "--db", f"sqlite:///{path}").exit_code == 0
    listed = invoke("runs", "--db", f"sqlite:///{path}?mode=ro")
    assert listed.exit_code == 0, listed.output
    assert listed.stderr == ""
    unknown = invoke("runs", "--db", f"sqlite:///{path}?cache=shared")
    assert unknown.exit_code == 3
    assert "unknown SQLite URL parameter 'cache'" in one_error_line(unknown)
