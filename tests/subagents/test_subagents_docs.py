"""docs/subagents.md's example runs as printed: a planner, a researcher and a mailer whose mail needs approval."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import run_docs_example


@pytest.mark.process
def test_the_three_agent_example_waits_for_the_mailers_approval_then_finishes(tmp_path: Path) -> None:
    assert run_docs_example("subagents.md", tmp_path) == ["awaiting_approval", "mailer awaiting_approval",
                                                         "done Researched Acme and mailed the boss."]
