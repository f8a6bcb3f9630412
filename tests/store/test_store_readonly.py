"""Reading never writes: ``store.reading()``, ``open_store(read_only=True)``, a store in a read-only directory."""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import inspect, text

from runner import ScriptedModel, StoreError, run_agent
from runner.store import RunStore, open_store
from runner.store.tables import TEXT_INDEX
from tests.loop.helpers import weather_registry

CHECKOUT = Path(__file__).resolve().parents[2]
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
        assert sorted(name for name in inspect(store.engine).get_table_names() if name not in TEXT_INDEX) == [
            "alembic_version", "events", "rollup_minutes", "rollups", "run_cancels", "run_deletions", "run_labels",
            "run_tools", "runs"]


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory outside pytest's private tmp tree, so another user can reach it."""
    folder = Path(tempfile.mkdtemp(prefix="runner-ro-"))
    folder.chmod(0o755)
    yield folder
    folder.chmod(0o755)
    shutil.rmtree(folder)


def unprivileged(folder: Path, env: dict[str, str]) -> list[str]:
    """A command prefix that cannot write ``folder``: as root, drop to nobody; else make it read-only.

    Root ignores file modes, so a chmod alone would prove nothing when the suite runs as root.
    When nobody cannot import this checkout (it lives in a private directory: a ``mktemp -d``,
    root's home), the reader stays root without the two capabilities that ignore file modes,
    and the folder is made read-only, as for any other user.
    """
    if os.geteuid() != 0:
        folder.chmod(0o555)
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: cannot drop the write permission for real")
    nobody = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]
    if imports_runner(nobody, env):
        return nobody
    without = "-dac_override,-dac_read_search"
    modes_apply = [setpriv, f"--inh-caps={without}", f"--bounding-set={without}"]
    if not imports_runner(modes_apply, env):
        pytest.skip("nobody cannot import this checkout (a private directory?) and setpriv cannot drop root's "
                    "capabilities here: no reader can be denied the write permission")
    folder.chmod(0o555)
    return modes_apply


def imports_runner(prefix: list[str], env: dict[str, str]) -> bool:
    """Whether ``runner`` imports from this checkout under ``prefix``."""
    done = subprocess.run([*prefix, sys.executable, "-c", "import runner.store"], capture_output=True, env=env,
                          cwd=CHECKOUT, timeout=60)
    return done.returncode == 0


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


@pytest.mark.process
def test_a_store_in_a_read_only_directory_can_be_read(shared_dir: Path) -> None:
    path = shared_dir / "runs.db"
    with open_store(path) as store:
        result = run_agent("Hi", ScriptedModel(["hello"]), weather_registry(), store=store)
    before = sorted(p.name for p in shared_dir.iterdir())
    env = {"PATH": os.environ["PATH"], "PYTHONDONTWRITEBYTECODE": "1", "HOME": str(shared_dir)}
    prefix = unprivileged(shared_dir, env)
    probe = subprocess.run([*prefix, sys.executable, "-c", "import os, sys; print(os.access(sys.argv[1], os.W_OK))",
                            str(shared_dir)], capture_output=True, text=True, env=env, check=True)
    assert probe.stdout == "False\n"  # the reader really cannot write there
    done = subprocess.run([*prefix, sys.executable, "-c", READER, str(path)], capture_output=True, text=True,
                          env=env, cwd=CHECKOUT, timeout=60)
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


@pytest.mark.process
def test_the_read_only_directory_test_passes_from_a_checkout_in_a_private_directory(tmp_path: Path) -> None:
    """``make test`` in a fresh clone under a 0700 directory (a ``mktemp -d``, root's home): the
    reader dropped to another user could not even start the checkout's interpreter."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("only root drops privileges in the test above (with setpriv)")
    private = Path(tempfile.mkdtemp(prefix="runner-private-"))  # mode 0700, like a fresh clone's home
    try:
        checkout = private / "checkout"
        checkout.mkdir()
        for name in ("runner", "tests", "migrations"):
            shutil.copytree(CHECKOUT / name, checkout / name, ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copy(CHECKOUT / "pyproject.toml", checkout / "pyproject.toml")
        venv = checkout / ".venv"  # its interpreter inside the private directory, as `make` puts it
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60)
        site_packages = next(venv.glob("lib/python3*/site-packages"))
        # The checkout first, then this environment's dependencies (a path line only: their .pth files,
        # this checkout's editable install among them, are not read).
        (site_packages / "checkout.pth").write_text(f"{checkout}\n" + "".join(f"{p}\n" for p in site.getsitepackages()))
        script = venv / "bin" / "runner"
        script.write_text(f"#!{venv / 'bin' / 'python'}\nfrom runner.cli import main\nmain()\n")
        script.chmod(0o755)
        assert oct(private.stat().st_mode & 0o777) == "0o700"
        one_test = "tests/store/test_store_readonly.py::test_a_store_in_a_read_only_directory_can_be_read"
        done = subprocess.run([str(venv / "bin" / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider", one_test],
                              cwd=checkout, capture_output=True, text=True, timeout=120,
                              env={k: v for k, v in os.environ.items() if not k.startswith("PYTEST")})
        assert done.returncode == 0, done.stdout + done.stderr
        assert "1 passed" in done.stdout
    finally:
        shutil.rmtree(private)
