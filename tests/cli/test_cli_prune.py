"""``runner prune``: whole finished runs go, after a confirmation or --yes; --dry-run deletes nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from runner.cli import cli
from runner.cli import prune as prune_module
from runner.store import open_store
from tests.cli.helpers import R1, R2, R3, R4, R5, fill, invoke


@pytest.fixture
def db(store_url: str) -> str:
    fill(store_url)
    return store_url


def left(db: str) -> list[str]:
    with open_store(db) as store:
        return sorted(run.run_id for run in store.list_runs())


def test_prune_dry_run_lists_the_runs_and_deletes_nothing(db: str) -> None:
    result = invoke("prune", "--db", db, "--before", "1h", "--dry-run")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert [line.split()[:3] for line in lines[:4]] == [["would", "delete", run] for run in (R1, R2, R3, R4)]
    assert lines[4].startswith("would delete 4 runs and ")
    assert left(db) == [R1, R2, R3, R4, R5]


def test_prune_yes_deletes_the_runs_and_prints_them(db: str) -> None:
    with open_store(db) as store:
        events = sum(len(store.get_run(run).events) for run in (R1, R2))
    result = invoke("prune", "--db", db, "--before", "1h", "--status", "done", "--yes", "--json")
    assert result.exit_code == 0, result.output
    found = json.loads(result.stdout)
    assert [(run["run_id"], run["status"]) for run in found["runs"]] == [(R1, "done"), (R2, "done")]
    assert (found["events"], found["dry_run"], found["kept_parents"]) == (events, False, [])
    assert left(db) == [R3, R4, R5]


def test_prune_without_yes_off_a_terminal_is_refused_and_deletes_nothing(db: str) -> None:
    result = invoke("prune", "--db", db, "--before", "1h")
    assert result.exit_code == 2
    assert result.stderr == ("Error: prune would delete 4 runs: pass --yes to confirm (stdin is not a terminal), "
                             "or --dry-run to see them\n")
    assert left(db) == [R1, R2, R3, R4, R5]


@pytest.mark.parametrize(("answer", "code", "remaining"), [("n\n", 1, 5), ("y\n", 0, 1)])
def test_prune_on_a_terminal_asks_first(db: str, monkeypatch: pytest.MonkeyPatch, answer: str, code: int,
                                        remaining: int) -> None:
    monkeypatch.setattr(prune_module, "stdin_is_tty", lambda: True)
    result = CliRunner().invoke(cli, ["prune", "--db", db, "--before", "1h"], input=answer)
    assert result.exit_code == code, result.output
    assert "Delete 4 runs and " in result.stderr
    assert len(left(db)) == remaining


def test_prune_refuses_unfinished_statuses_and_a_missing_store(tmp_path: Path) -> None:
    result = invoke("prune", "--before", "1h", "--status", "running", "--db", f"sqlite:///{tmp_path / 'x.db'}")
    assert result.exit_code == 2
    assert "'running' is not one of 'done'," in result.stderr
    result = invoke("prune", "--before", "1h", "--db", f"sqlite:///{tmp_path / 'x.db'}")
    assert result.exit_code == 3
    assert result.stderr.startswith("Error: no store at ")
    assert not (tmp_path / "x.db").exists()
