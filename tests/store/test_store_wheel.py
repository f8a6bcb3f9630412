"""An installed, non-editable wheel carries its migrations and opens a fresh store.

Slow-ish (builds a wheel and a venv, a few seconds) but part of the default run:
``open_store`` migrates at run time, so a wheel without the scripts would be broken.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.process

ROOT = Path(__file__).resolve().parents[2]

PROBE = textwrap.dedent("""
    import json, sys
    import runner
    from runner import ScriptedModel, ToolRegistry, run_agent
    from runner.store import open_store
    from runner.store.migrate import script_location

    with open_store(sys.argv[1]) as store:
        result = run_agent("Hi", ScriptedModel(["hello"]), ToolRegistry(), store=store)
        run = store.get_run(result.run_id)
        print(json.dumps({"runner": runner.__file__, "scripts": str(script_location()),
                          "status": run.status, "same": run.messages == result.messages}))
""")


def run(*args: str | Path, cwd: Path) -> str:
    done = subprocess.run([str(a) for a in args], cwd=cwd, capture_output=True, text=True, timeout=110,
                          env={k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")})
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_an_installed_wheel_opens_a_fresh_store(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    run(sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", dist, ROOT, cwd=tmp_path)
    (wheel,) = dist.glob("*.whl")
    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", venv, cwd=tmp_path)
    python = venv / "bin" / "python"
    site = Path(run(python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))", cwd=tmp_path).strip())
    # The dependencies (sqlalchemy, alembic) come from the dev venv's site-packages, added as a plain
    # path: .pth files inside it (the editable install of this checkout) are not processed.
    (site / "deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    run(python, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", wheel, cwd=tmp_path)
    work = tmp_path / "elsewhere"
    work.mkdir()
    found = json.loads(run(python, "-c", PROBE, f"sqlite:///{work / 'runs.db'}", cwd=work))
    assert Path(found["runner"]).is_relative_to(site)
    assert Path(found["scripts"]) == site / "runner" / "_migrations"
    assert (found["status"], found["same"]) == ("done", True)
