"""docs/streaming.md's example runs as printed: the text as it streams, then the run's status."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.process
def test_the_streaming_example_prints_the_text_then_done(tmp_path: Path) -> None:
    text = (ROOT / "docs" / "streaming.md").read_text(encoding="utf-8")
    found = re.search(r"```python\n(.*?)```", text, re.S)
    assert found is not None
    script = tmp_path / "example.py"
    script.write_text(found.group(1), encoding="utf-8")
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["Hello, world.", "done"]
