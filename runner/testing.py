"""The pytest plugin: recorded runs as regression tests.

It gives the fixtures ``runner_store``, ``scripted_model``, ``runner_replay`` and ``runner_no_real_models``.
``runner_replay`` replays a fixture strictly and fails the test with the divergence sentence.
With ``pytest --runner-record`` a missing fixture is recorded with the real model; without it the test fails.
With ``pytest --runner-update`` a fixture that differs is rewritten from the current tools (replies kept).
In replay mode real model calls are blocked, so a test cannot reach a paid API by accident (docs/replay.md).
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Unpack

import pytest

from ._replay.fixture import fixture_from_run
from ._replay.replayer import ReplayReport, replay
from ._replay.scripted import ScriptedModel
from ._replay.update import HINT_PYTEST, update_fixture
from ._run.agent import run_agent
from ._run.build import RunOptions
from ._tools.registry import ToolRegistry
from .messages import Model, ModelReply
from .store import RunStore, open_store

ADAPTERS = (("runner.adapters.openai", ("OpenAIModel", "AsyncOpenAIModel")),
            ("runner.adapters.anthropic", ("AnthropicModel", "AsyncAnthropicModel")))


class RealModelCalled(AssertionError):
    """A real model adapter was called where only recorded replies may be used."""


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("runner", "durable-agent-runner replay fixtures")
    group.addoption("--runner-record", action="store_true", default=False,
                    help="record missing runner fixtures by running the real model given to runner_replay")
    group.addoption("--runner-update", action="store_true", default=False,
                    help="rewrite runner fixtures that differ from the current tools, keeping the recorded model "
                         "replies")
    parser.addini("runner_block_real_models", type="bool", default=False,
                  help="fail any test that calls a real model adapter unless --runner-record is given")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "runner_real_model: this test may call real model adapters")


@pytest.fixture
def runner_store(tmp_path: Path) -> Iterator[RunStore]:
    with open_store(f"sqlite:///{tmp_path / 'runner-runs.db'}") as store:
        yield store


@pytest.fixture
def scripted_model() -> Iterator[Callable[[list[ModelReply | str]], ScriptedModel]]:
    built: list[ScriptedModel] = []

    def build(replies: list[ModelReply | str]) -> ScriptedModel:
        model = ScriptedModel(replies)
        built.append(model)
        return model

    yield build
    for model in built:
        model.assert_complete()


class _Blocker:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def guard(self, cls: type) -> Callable[..., Any]:
        def blocked(model: Any, *args: Any, **kwargs: Any) -> Any:
            name = f"{cls.__name__}({getattr(model, 'model_name', '?')})"
            self.calls.append(name)
            raise RealModelCalled(f"real model {name} called in replay mode; record with pytest --runner-record")

        return blocked


@pytest.fixture
def runner_no_real_models(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    blocker = _Blocker()
    for module_name, names in ADAPTERS:
        with contextlib.suppress(ImportError):
            module = importlib.import_module(module_name)
            for name in names:
                cls = getattr(module, name, None)
                if isinstance(cls, type):
                    monkeypatch.setattr(cls, "__call__", blocker.guard(cls))
    yield blocker.calls
    if blocker.calls:
        # The loop turns a raising model into model_error; the test must still fail.
        pytest.fail(f"a real model was called in replay mode: {', '.join(blocker.calls)}", pytrace=False)


@pytest.fixture(autouse=True)
def _runner_block_by_ini(request: pytest.FixtureRequest) -> None:
    if request.config.getini("runner_block_real_models") and not request.config.getoption("--runner-record") \
            and request.node.get_closest_marker("runner_real_model") is None:
        request.getfixturevalue("runner_no_real_models")


class RunnerReplay:
    """What the ``runner_replay`` fixture gives a test."""

    def __init__(self, request: pytest.FixtureRequest, tmp_path: Path) -> None:
        self.request = request
        self.tmp_path = tmp_path
        self.recording = bool(request.config.getoption("--runner-record"))
        self.updating = bool(request.config.getoption("--runner-update"))

    def __call__(self, fixture: str | Path, registry: ToolRegistry, model: Model | None = None, *,
                 task: str | None = None, check: bool = True, live_side_effects: bool = False,
                 **options: Unpack[RunOptions]) -> ReplayReport:
        path = Path(fixture)
        if not path.is_absolute():
            path = Path(self.request.config.rootpath) / path
        if not path.exists():
            if not self.recording:
                pytest.fail(f"runner fixture {str(fixture)!r} is missing; record it with pytest --runner-record",
                            pytrace=False)
            self._record(path, registry, model, task, options)
        else:
            self.request.getfixturevalue("runner_no_real_models")
            if self.updating:
                update_fixture(path, registry, live_side_effects=live_side_effects)
        report = replay(path, registry, live_side_effects=live_side_effects, **options)
        if check and not report.ok:
            pytest.fail(f"{report.explain()}\n({HINT_PYTEST})", pytrace=False)
        return report

    def _record(self, path: Path, registry: ToolRegistry, model: Model | None, task: str | None,
                options: RunOptions) -> None:
        if model is None or task is None:
            pytest.fail(f"recording {str(path)!r} needs the real model and the task: "
                        "runner_replay(path, registry, model, task=...)", pytrace=False)
        with open_store(f"sqlite:///{self.tmp_path / 'runner-record.db'}") as store:
            recording: RunOptions = {**options}
            recording["store"] = store
            result = run_agent(task, model, registry, **recording)
            fixture_from_run(store.get_run(result.run_id), store).write(path)


@pytest.fixture
def runner_replay(request: pytest.FixtureRequest, tmp_path: Path) -> RunnerReplay:
    return RunnerReplay(request, tmp_path)
