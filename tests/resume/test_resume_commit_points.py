"""A run killed at *any* of its commits resumes to the same end as a run never killed.

A commit is atomic, so a killed process leaves its log at one of the points where
the loop committed: before a model call, before a tool runs, after a side effect's
result, at the end. These tests record a run, note each commit point, cut a copy
of the log there (in a fresh SQLite file, owner gone), resume it, and check the
whole outcome: status, steps, how often the model was asked, which tools ran again.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, insert, select

from runner import open_store, run_agent
from runner._run.resume import fork, resume
from runner.events import Event, ModelCalled, ModelCallStarted, ToolFinished, ToolStarted, decode_all
from runner.store.tables import events, runs
from tests.resume.durable_child import Plan, PlanModel, ran, tools

# Step 1 ends on a side effect without a key, step 2 on a keyed one, step 3 is that side effect alone.
PLAN: Plan = [[["s1a", "lookup", {"ref": "l1"}], ["s1b", "pay", {"ref": "p1"}]],
        [["s2a", "lookup", {"ref": "l2"}], ["s2b", "charge", {"ref": "c2"}]],
        [["s3a", "pay", {"ref": "p3"}]]]
STEPS = len(PLAN) + 1  # and the answer


class CommitPoints:
    """A recorder noting how many facts each commit (``sync``) had seen."""

    def __init__(self) -> None:
        self.facts, self.points = 0, list[int]()

    def record(self, event: Event) -> None:
        self.facts += not isinstance(event, ModelCallStarted)

    def sync(self) -> None:
        if not self.points or self.points[-1] != self.facts:
            self.points.append(self.facts)


def log_of(url: str, run_id: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The run's ``runs`` row and its event rows, as stored."""
    engine = create_engine(url)
    with engine.connect() as conn:
        row = dict(conn.execute(select(runs).where(runs.c.run_id == run_id)).mappings().one())
        rows = [dict(r) for r in conn.execute(select(events).where(events.c.run_id == run_id)
                                              .order_by(events.c.seq)).mappings()]
    engine.dispose()
    return row, rows


def recorded(tmp_path: Path, parallel: int = 1) -> tuple[str, dict[str, Any], list[dict[str, Any]], list[int]]:
    """One whole run: its ``runs`` row, its event rows, and the event count at each commit before the last.

    ``parallel`` is the run's ``max_parallel_tools``: 1 runs each step's calls one by one, more together.
    """
    workdir = tmp_path / "first"
    workdir.mkdir()
    url = f"sqlite:///{tmp_path / 'whole.db'}"
    points = CommitPoints()
    with open_store(url) as store:
        result = run_agent("Do the plan.", PlanModel(PLAN), tools(workdir), store=store, recorder=points,
                           max_parallel_tools=parallel)
    assert (result.status, result.steps) == ("done", STEPS)
    row, rows = log_of(url, result.run_id)
    assert points.points[-1] == len(rows)
    return result.run_id, row, rows, points.points[:-1]


def cut_at(tmp_path: Path, name: str, run_row: dict[str, Any], rows: list[dict[str, Any]], point: int,
           parent: tuple[dict[str, Any], list[dict[str, Any]]] | None = None) -> str:
    """A store holding the run as a process killed right after the commit at ``point`` left it
    (with its ``parent`` run whole, for a fork)."""
    url = f"sqlite:///{tmp_path / f'{name}.db'}"
    open_store(url).close()
    engine = create_engine(url)
    long_ago = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)
    with engine.begin() as conn:
        if parent is not None:
            conn.execute(insert(runs), [parent[0]])
            conn.execute(insert(events), parent[1])
        conn.execute(insert(runs), [dict(run_row, status="running", answer=None, finished_at=None,
                                         owner="a-host-long-gone:1@0", heartbeat_at=long_ago)])
        conn.execute(insert(events), rows[:point])
    engine.dispose()
    return url


def resume_and_check(url: str, run_id: str, workdir: Path, points: CommitPoints | None = None,
                     parallel: int = 1) -> None:
    """Resume the cut run and check it ends as the whole run did, running again only what it must.

    Calls run together (``parallel`` > 1) may run in any order: then only which ran, and how often, counts.
    """
    with open_store(url) as store:
        facts = decode_all(store.get_run(run_id).events, run_id)
    replies_logged = sum(1 for f in facts if isinstance(f, ModelCalled) and f.reply is not None)
    answered = {f.call_id for f in facts if isinstance(f, ToolFinished)}
    in_doubt = {f.call_id for f in facts if isinstance(f, ToolStarted)} - answered
    workdir.mkdir()
    model = PlanModel(PLAN)
    with open_store(url) as store:
        result = resume(store, run_id, model, tools(workdir), recorder=points, max_parallel_tools=parallel)
        run = store.get_run(run_id)
    assert (result.status, result.answer, result.steps, run.status, run.steps) == (
        "done", "all done", STEPS, "done", STEPS), facts[-1]
    assert sum(1 for m in result.messages if m["role"] == "assistant") == STEPS
    assert len(model.seen) == STEPS - replies_logged  # no step asked twice, none skipped
    assert [e.seq for e in run.events] == list(range(1, len(run.events) + 1))
    calls = [c["id"] for m in run.messages if m["role"] == "assistant" for c in m["tool_calls"]]
    assert [m["tool_call_id"] for m in run.messages if m["role"] == "tool"] == calls
    # What runs again: every call without a logged result, except a side effect without a key in doubt.
    expected = [f"{name} {args['ref']}" + (f" {run_id}:{call_id}" if name == "charge" else "")
                for step in PLAN for call_id, name, args in step
                if call_id not in answered and not (name == "pay" and call_id in in_doubt)]
    assert (ran(workdir) if parallel == 1 else sorted(ran(workdir))) == (
        expected if parallel == 1 else sorted(expected))


@pytest.mark.parametrize(("parallel", "counts"), [(1, (12, STEPS, 5, 0, 3)), (8, (12, STEPS, 3, 4, 1))],
                         ids=["one-by-one", "together"])
def test_the_whole_run_commits_at_each_model_call_each_tool_each_side_effect_and_the_end(
        tmp_path: Path, parallel: int, counts: tuple[int, ...]) -> None:
    """One by one: the model calls, each tool about to run, the side effects that just ran (their tool message).

    Together: the starts of a step's calls in one commit, and each call's result as it returns.
    """
    _, _, rows, points = recorded(tmp_path, parallel)
    ends = [rows[point - 1]["kind"] for point in points]
    assert (len(points), *(ends.count(kind) for kind in ("step_started", "tool_started", "tool_finished",
                                                           "message"))) == counts


@pytest.mark.parametrize("parallel", [1, 8], ids=["one-by-one", "together"])
@pytest.mark.parametrize("index", range(12))
def test_a_run_killed_right_after_any_commit_resumes_to_the_same_end(tmp_path: Path, index: int,
                                                                     parallel: int) -> None:
    run_id, run_row, rows, points = recorded(tmp_path, parallel)
    resume_and_check(cut_at(tmp_path, "cut", run_row, rows, points[index]), run_id, tmp_path / "again",
                     parallel=parallel)


@pytest.mark.parametrize("parallel", [1, 8], ids=["one-by-one", "together"])
@pytest.mark.parametrize("index", range(12))
def test_a_resumed_run_killed_again_after_any_commit_of_its_resume_still_ends_the_same(tmp_path: Path,
                                                                                        index: int,
                                                                                        parallel: int) -> None:
    run_id, run_row, rows, points = recorded(tmp_path, parallel)
    first_cut = points[index]
    url = cut_at(tmp_path, "cut", run_row, rows, first_cut)
    resumed_points = CommitPoints()
    resume_and_check(url, run_id, tmp_path / "again", resumed_points, parallel)
    _, resumed_rows = log_of(url, run_id)
    second_cuts = [first_cut + p for p in resumed_points.points[:-1]]
    assert second_cuts  # every resume commits before it acts
    for n, second_cut in enumerate(second_cuts):
        url = cut_at(tmp_path, f"cut-{n}", run_row, resumed_rows, second_cut)
        resume_and_check(url, run_id, tmp_path / f"again-{n}", parallel=parallel)


def test_a_fork_killed_right_after_any_commit_resumes_to_the_same_end(tmp_path: Path) -> None:
    """A fork starts from its parent's history with its steps numbered on: resumed from any
    commit, it must end as the uninterrupted fork did, asking the model for no step twice."""
    parent_id, parent_row, parent_rows, _ = recorded(tmp_path)
    url = f"sqlite:///{tmp_path / 'whole.db'}"
    points = CommitPoints()
    workdir = tmp_path / "fork"
    workdir.mkdir()
    with open_store(url) as store:
        forked = fork(store, parent_id, at_step=2, model=PlanModel(PLAN), registry=tools(workdir), recorder=points,
                      max_parallel_tools=1)
    assert (forked.status, forked.steps) == ("done", STEPS)
    fork_row, fork_rows = log_of(url, forked.run_id)
    assert points.points[-1] == len(fork_rows)
    for n, point in enumerate(points.points[:-1]):
        cut = cut_at(tmp_path, f"fork-{n}", fork_row, fork_rows, point, parent=(parent_row, parent_rows))
        with open_store(cut) as store:
            facts = decode_all(store.get_run(forked.run_id).events, forked.run_id)
            replies = sum(1 for f in facts if isinstance(f, ModelCalled) and f.reply is not None)
            model = PlanModel(PLAN)
            again = tmp_path / f"fork-again-{n}"
            again.mkdir()
            result = resume(store, forked.run_id, model, tools(again), max_parallel_tools=1)
            run = store.get_run(forked.run_id)
        assert (result.status, result.steps, run.steps) == ("done", STEPS, STEPS), (n, facts[-1])
        assert len(model.seen) == (STEPS - 1) - replies  # the fork asks for steps 2..4 only, each once
        assert sum(1 for m in result.messages if m["role"] == "assistant") == STEPS
        assert [e.seq for e in run.events] == list(range(1, len(run.events) + 1))


def test_the_async_driver_commits_at_exactly_the_same_points(tmp_path: Path) -> None:
    """So every cut above is also every state a killed ``arun_agent`` can leave."""
    import asyncio

    from runner._run.agent import arun_agent

    _, _, rows, points = recorded(tmp_path)
    workdir = tmp_path / "async"
    workdir.mkdir()
    async_points = CommitPoints()
    with open_store(f"sqlite:///{tmp_path / 'async.db'}") as store:
        result = asyncio.run(arun_agent("Do the plan.", PlanModel(PLAN), tools(workdir), store=store,
                                        recorder=async_points, max_parallel_tools=1))
        kinds = [e.kind for e in store.get_run(result.run_id).events]
    assert (result.status, kinds) == ("done", [row["kind"] for row in rows])
    assert async_points.points[:-1] == points
