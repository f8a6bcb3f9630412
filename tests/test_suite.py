"""The suite about itself: what it says about the tests it leaves out."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

CHECKOUT = Path(__file__).resolve().parent.parent


@pytest.mark.process
def test_without_a_postgresql_url_the_variants_left_out_are_counted_in_one_skip_line() -> None:
    env = {k: v for k, v in os.environ.items() if k != "RUNNER_TEST_PG_URL" and not k.startswith("PYTEST")}
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                           "tests/store/test_store_readonly.py", "tests/store/test_store_log.py",
                           "-k", "not reading_refuses"],
                          cwd=CHECKOUT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    collected = re.findall(r"^tests/.+::.+$", done.stdout, re.M)
    sqlite = [item for item in collected if re.search(r"[\[-]sqlite[\]-]", item)]
    assert sqlite  # the store_url fixture's SQLite variants, each with a PostgreSQL twin left out
    assert not [item for item in collected if "reading_refuses" in item]  # counted after -k deselects
    assert not [item for item in collected if "postgresql" in item]
    lines = [line for line in done.stdout.splitlines() if "PostgreSQL" in line]
    assert lines == [f"SKIPPED [{len(sqlite)}] PostgreSQL variants not collected: RUNNER_TEST_PG_URL is not set"]
