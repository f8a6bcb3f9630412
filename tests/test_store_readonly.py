"""Reading never writes: ``store.reading()``, ``open_store(read_only=True)``, a store in a read-only directory."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import inspect, text

from runner import ScriptedModel, StoreError, run_agent
from runner.store import RunStore, open_store
from tests.loop_helpers import weather_registry

READ_ONLY_REFUSAL = r"(attempt to write a readonly database|cannot execute \w+( TABLE)? in a read-only transaction)"


@pytest.mark.parametrize("statement", ["UPDATE runs SET task = 'edited'", "CREATE TABLE intruder (x INTEGER)"])
def test_reading_refuses_writes(store: RunStore, statement: str) -> None:
    result = run_agent("Hi", ScriptedModel(["hello"]), weather_registry(), store=store)
    with pytest.raises(StoreError, match=rf"^cannot read store .*: {READ_ONLY_REFUSAL}$"), store.reading() as conn:
        conn.execute(text(statement))
    assert store.get_run(result.run_id).task == "Hi"
    assert "intruder" not in inspect(store.engine).get_table_names()


def test_the_pooled_connection_is_writable_again_after_reading(store: RunStore) -> None:
    with store.reading() as conn:
        first = conn.connection.dbapi_connection
        assert conn.execute(text("SELECT count(*) FROM runs")).scalar() == 0
    with store.engine.begin() as conn:
        assert conn.connection.dbapi_connection is first  # the same pooled connection, reset
        conn.execute(text("CREATE TABLE scratch (x INTEGER)"))
        conn.execute(text("DROP TABLE scratch"))
    result = run_agent("Hi", ScriptedModel(["hello"]), weather_registry(), store=store)
    assert store.get_run(result.run_id).status == "done"


def test_a_read_only_store_reads_and_refuses_writes(store_url: str) -> None:
    with open_store(store_url) as store:
        result = run_agent("Hi", ScriptedModel(["hello"]), weather_registry(), store=store)
    with open_store(store_url, read_only=True) as reader:
        assert [r.run_id for r in reader.list_runs()] == [result.run_id]
        assert reader.get_run(result.run_id).answer == "hello"
        with pytest.raises(StoreError, match=r"^store .* is open read-only: it cannot record runs$"):
            reader.recorder()
        with pytest.raises(Exception, match=READ_ONLY_REFUSAL), reader.engine.begin() as conn:
            conn.execute(text("UPDATE runs SET task = 'edited'"))
    with open_store(store_url, read_only=True) as reader:
        assert reader.get_run(result.run_id).task == "Hi"


def test_a_read_only_open_of_an_empty_database_creates_nothing(store_url: str) -> None:
    from runner.store.migrate import NoStoreError

    with pytest.raises(NoStoreError, match=r"^no runner store at .* \(open_store\(url\) without read_only "
                                           r"creates one\)$"):
        open_store(store_url, read_only=True)
    with open_store(store_url) as store:
        assert sorted(inspect(store.engine).get_table_names()) == [
            "alembic_version", "events", "run_cancels", "run_deletions", "run_labels", "run_tools", "runs"]


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory outside pytest's private tmp tree, so another user can reach it."""
    folder = Path(tempfile.mkdtemp(prefix="runner-ro-"))
    folder.chmod(0o755)
    yield folder
    folder.chmod(0o755)
    shutil.rmtree(folder)


def unprivileged(folder: Path) -> list[str]:
    """A command prefix that cannot write ``folder``: as root, drop to nobody; else make it read-only.

    Root ignores file modes, so a chmod alone would prove nothing when the suite runs as root.
    """
    if os.geteuid() != 0:
        folder.chmod(0o555)
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: cannot drop the write permission for real")
    return [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]


READER = """
import json, sys
from runner.store import open_store
from runner import StoreError
path = sys.argv[1]
try:
    open_store(path).close()
    writable = "opened"
except StoreError as exc:
    writable = str(exc)
with open_store(path, read_only=True) as store:
    runs = store.list_runs()
    print(json.dumps({"writable": writable, "runs": [r.run_id for r in runs],
                      "answer": store.get_run(runs[0].run_id).answer}))
"""


def test_a_store_in_a_read_only_directory_can_be_read(shared_dir: Path) -> None:
    path = shared_dir / "runs.db"
    with open_store(path) as store:
        result = run_agent("Hi", ScriptedModel(["hello"]), weather_registry(), store=store)
    before = sorted(p.name for p in shared_dir.iterdir())
    prefix = unprivileged(shared_dir)
    env = {"PATH": os.environ["PATH"], "PYTHONDONTWRITEBYTECODE": "1", "HOME": str(shared_dir)}
    probe = subprocess.run([*prefix, sys.executable, "-c", "import os, sys; print(os.access(sys.argv[1], os.W_OK))",
                            str(shared_dir)], capture_output=True, text=True, env=env, check=True)
    assert probe.stdout == "False\n"  # the reader really cannot write there
    done = subprocess.run([*prefix, sys.executable, "-c", READER, str(path)], capture_output=True, text=True,
                          env=env, cwd=Path(__file__).parent.parent, timeout=60)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["runs"] == [result.run_id]
    assert found["answer"] == "hello"
    assert found["writable"] == (f"cannot open store sqlite:///{path} for writing: attempt to write a readonly "
                                 "database (its directory is not writable; it can still be opened read-only)")
    cli = subprocess.run([*prefix, str(Path(sys.executable).parent / "runner"), "runs", "--json", "--db",
                          f"sqlite:///{path}"], capture_output=True, text=True, env=env, timeout=60)
    assert cli.returncode == 0, cli.stderr
    assert [r["run_id"] for r in json.loads(cli.stdout)] == [result.run_id]
    assert sorted(p.name for p in shared_dir.iterdir()) == before
