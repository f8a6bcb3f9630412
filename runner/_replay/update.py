"""Accept an intended change: rewrite a fixture from the current tools, keeping the recorded model replies.

A replay that differs because a tool now returns something else (or describes itself
otherwise) fails until the fixture says so. Updating plays the recorded replies again,
without stopping at differences, against the current tools, and writes that run as the
fixture: the model's words stay, what the tools gave it is today's.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import NamedTuple

from .._tools.registry import ToolRegistry
from ..errors import FixtureError
from ..store import open_store
from .fixture import fixture_from_run, load_fixture
from .replayer import ReplayReport, replay
from .subagents import MISSING_CHILD

HINT_CLI = "if the change is intended, --update rewrites the fixture from the current tools (the model's replies kept)"
HINT_PYTEST = "if the change is intended, pytest --runner-update rewrites the fixture from the current tools " \
              "(the model's replies kept)"


class Updated(NamedTuple):
    """What an update found (the strict replay before it) and whether it wrote the fixture."""

    before: ReplayReport
    wrote: bool


def update_fixture(path: str | Path, registry: ToolRegistry, *, live_side_effects: bool = False) -> Updated:
    """Replay the fixture at ``path``; when it differs, rewrite it from the current tools and the recorded replies.

    A fixture that still matches is left as it is. One missing a sub-agent's child recording (an older
    export) is left too, with a ``FixtureError``: no replay can make that recording.
    """
    before = replay(path, registry, live_side_effects=live_side_effects)
    if before.ok:
        return Updated(before, False)
    fixture = load_fixture(path)
    with tempfile.TemporaryDirectory(prefix="runner-update-") as folder, \
            open_store(f"sqlite:///{Path(folder) / 'update.db'}") as store:
        played = replay(fixture, registry, strict=False, live_side_effects=live_side_effects, store=store)
        missing = next((d for d in played.differences if d.field == MISSING_CHILD), None)
        if missing is not None:
            raise FixtureError(f"fixture {str(path)!r} cannot be updated: {missing.sentence}")
        fixture_from_run(store.get_run(played.result.run_id), store).write(path)
    return Updated(before, True)
