"""docs/streaming.md's example runs as printed: the text as it streams, then the run's status."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import run_docs_example


@pytest.mark.process
def test_the_streaming_example_prints_the_text_then_done(tmp_path: Path) -> None:
    assert run_docs_example("streaming.md", tmp_path) == ["Hello, world.", "done"]
