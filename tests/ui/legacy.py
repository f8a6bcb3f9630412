"""A run stored under an id ``run_id=`` refuses now (``/``, ``..``, ``?``): older stores may hold one.

The run is made under a plain id in a scratch SQLite store, then its facts are written to the store under
test as they were logged, with the id swapped: inserted directly, as an older version would have.
"""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path
from typing import Any

from runner import Model, ToolRegistry, open_store, run_agent
from runner.store import RunStore

PLAIN = "plain-id"


def stored_as(store: RunStore, run_id: str, task: str, model: Model, registry: ToolRegistry, **options: Any) -> str:
    """Run ``task`` and store it in ``store`` under ``run_id``, whatever that id holds; the run's status."""
    with tempfile.TemporaryDirectory() as folder, open_store(f"sqlite:///{Path(folder) / 'scratch.db'}") as scratch:
        result = run_agent(task, model, registry, store=scratch, run_id=PLAIN, **options)
        facts = scratch.get_run(PLAIN).facts
    recorder = store.recorder()
    for fact in facts:
        if getattr(fact, "run_id", None) == PLAIN:
            fact = dataclasses.replace(fact, run_id=run_id)  # type: ignore[arg-type]
        recorder.record(fact)
    recorder.sync()
    return result.status
