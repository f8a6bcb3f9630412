"""The console bench's store (``bench/ui_store.py``) holds the rollups a full read of its log gives.

The bench adds its copied runs' share of the stats' rollups from their templates' own rows
(``copies_rollups``) rather than reading a million logs (``rollups.refill``). Here a store of
3,000 runs is built the bench's way, then its rollups are worked out again from the log: both
tables, the runs' ``rolled`` and ``runner stats --json`` (all time, and since a week) must not change.
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from sqlalchemy import select

from runner._log.tally import FIELDS
from runner.cli import cli
from runner.store import RunStore, rollups
from runner.store.tables import rollup_minutes, runs
from runner.store.tables import rollups as rollup_hours

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))  # the bench's modules are scripts' siblings
import ui_store

RUNS = 3000


def counted(store: RunStore) -> dict[str, list[tuple[Any, ...]]]:
    """Each rollup table's rows that count something (a status row a run left at 0 counts nothing), and each
    run's ``rolled``, in key order."""
    with store.engine.connect() as conn:
        found = {table.name: [tuple(row) for row in conn.execute(select(table).order_by(*table.primary_key))
                              if any(getattr(row, name) for name in FIELDS)]
                 for table in (rollup_hours, rollup_minutes)}
        found["rolled"] = [tuple(row) for row in conn.execute(select(runs.c.run_id, runs.c.rolled)
                                                              .order_by(runs.c.run_id))]
    return found


def stats(url: str, *args: str) -> dict[str, Any]:
    """``runner stats --json`` on the store at ``url``, parsed."""
    result = CliRunner().invoke(cli, ["stats", "--json", *args, "--db", url], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    parsed: dict[str, Any] = json.loads(result.stdout)
    return parsed


def test_the_copies_rollups_are_those_a_read_of_their_logs_gives(store: RunStore) -> None:
    built = ui_store.build(store, RUNS)
    url = store.url.render_as_string(hide_password=False)
    week = (datetime.now(UTC) - timedelta(days=7)).isoformat()  # one moment for both answers
    derived, derived_stats, derived_week = counted(store), stats(url), stats(url, "--since", week)

    with store.engine.begin() as conn:
        assert rollups.refill(conn) == RUNS
    refilled = counted(store)

    assert built.runs == RUNS
    assert derived_stats["runs"] == RUNS
    assert 0 < derived_week["runs"] < RUNS
    assert all(refilled.values())
    assert derived == refilled
    assert derived_stats == stats(url)
    assert derived_week == stats(url, "--since", week)
