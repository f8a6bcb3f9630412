"""A typed result in a fixture: exported, replayed clean, and a changed output named by its field."""

from __future__ import annotations

import math
from pathlib import Path

from pydantic import BaseModel, field_validator

from runner import ScriptedModel, Status, ToolRegistry, replay, run_agent
from runner._replay.fixture import load_fixture
from runner.store import RunStore
from tests.output.helpers import Invoice, final


class PlainInvoice(BaseModel):  # the invoice as recorded (no docstring: it would be the schema's description)
    total: float
    currency: str


class RoundedInvoice(BaseModel):  # the invoice of a new release: its total rounded up, the same schema
    total: float
    currency: str

    @field_validator("total")
    @classmethod
    def up(cls, value: float) -> float:
        return math.ceil(value)


def recorded(store: RunStore, output_type: object = Invoice) -> str:
    model = ScriptedModel(["plain", final("c1", total=12.5, currency="EUR")])
    return run_agent("bill", model, ToolRegistry(), output_type=output_type, store=store).run_id


def test_the_fixture_carries_the_output_schema_and_the_output(store: RunStore, tmp_path: Path) -> None:
    path = store.export_fixture(recorded(store), tmp_path / "run.json")
    fixture = load_fixture(path)
    assert fixture.outcome["output"] == {"total": 12.5, "currency": "EUR"}
    assert fixture.output_schema is not None
    assert sorted(fixture.output_schema["schema"]["properties"]) == ["currency", "total"]
    assert [spec["name"] for spec in fixture.tool_specs] == ["final_result"]


def test_a_replay_of_a_typed_run_is_clean(store: RunStore, tmp_path: Path) -> None:
    path = store.export_fixture(recorded(store), tmp_path / "run.json")
    report = replay(path, ToolRegistry())
    assert report.ok, report.explain()
    assert report.result.output == {"total": 12.5, "currency": "EUR"}  # the logged schema: JSON
    typed = replay(path, ToolRegistry(), output_type=Invoice)
    assert typed.ok, typed.explain()
    assert typed.result.output == Invoice(total=12.5, currency="EUR")


def test_a_changed_output_is_a_divergence_naming_the_field(store: RunStore, tmp_path: Path) -> None:
    path = store.export_fixture(recorded(store, PlainInvoice), tmp_path / "run.json")
    report = replay(path, ToolRegistry(), output_type=RoundedInvoice)
    assert not report.ok
    assert report.divergence is not None
    assert (report.divergence.field, report.divergence.sentence) == ("output", "output.total: recorded 12.5, got 13.0")
    assert report.result.status == Status.DONE
