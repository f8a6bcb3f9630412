"""``runner watch RUN`` follows a run from another process: its text as it grows, its calls, its end.

The run is a real ``runner run`` whose model streams (``tests/cli/stream_cli.py``), held at a gate
after its first word, so what the watcher shows before the run goes on is read, not timed. The
watcher is the installed ``runner`` script, in a process of its own, on the same store.
"""

from __future__ import annotations

import json
import re
import signal
from pathlib import Path

import pytest

from runner import ModelReply, Status, open_store
from runner.events import MessageAppended, ModelCalled, RunFinished, RunResumed, StepStarted
from tests.cli.helpers import (
    R2,
    R4,
    STREAM_CLI,
    WAIT_S,
    deltas,
    fill,
    installed_runner,
    invoke,
    logged,
    opening,
    record_dead_inside_pay,
    start_runner,
    waiting_at,
)

WEATHER = "tests.loop.helpers:weather_registry"
TOOL_STEP = {"content": "Let me check the weather.", "calls": [["c1", "get_weather", {"city": "Paris"}]]}
ANSWER = "It is 21C in Paris, sunny and warm."


def first_run(db: str) -> str:
    """The id of the one run in ``db``, once it has one."""
    with open_store(db) as store:
        found = store.list_runs()
    assert len(found) == 1
    return found[0].run_id


@pytest.mark.process
def test_watch_shows_a_live_runs_text_grow_its_calls_and_its_end_then_exits_0(store_url: str, tmp_path: Path
                                                                               ) -> None:
    gate = tmp_path / "gate"
    run = start_runner(STREAM_CLI, "run", "Weather?", "--model", "openai:fake", "--tools", WEATHER, "--db", store_url,
                       script=[TOOL_STEP, ANSWER], gate=gate, pause_s=0.05)
    waiting_at(gate)  # the model wrote "Let " and waits
    run_id = first_run(store_url)
    watch = start_runner([installed_runner()], "watch", run_id[:8], "--db", store_url)
    as_json = start_runner([installed_runner()], "watch", run_id, "--db", store_url, "--json")
    watch.out.wait_for("\nLet ")  # the text committed so far, while the run still runs
    first = as_json.out.wait_for('"model_delta"')
    assert run.proc.poll() is None
    assert (watch.proc.poll(), as_json.proc.poll()) == (None, None)
    assert "weather" not in watch.out.text
    assert '"run_finished"' not in first
    gate.touch()
    code, out, err = watch.ended()
    assert code == 0, err
    assert run.ended()[0] == 0
    lines = out.splitlines()
    assert lines[0] == f"run {run_id[:8]}: Weather?"
    assert lines.index("Let me check the weather.") < lines.index("step 2") < lines.index(ANSWER)  # each text whole
    started = next(i for i, line in enumerate(lines) if line.startswith("step 1  tool get_weather  started"))
    assert lines[started] == 'step 1  tool get_weather  started  {"city": "Paris"}'
    assert re.match(r"step 1  tool get_weather  \S+  ok$", lines[started + 1])
    assert lines[started + 2] == '  {"celsius": 21}'
    assert lines[-2:] == ["", "done"]
    assert out.count(ANSWER) == 1  # its answer is its last reply's text: not printed again

    code, out, err = as_json.ended()
    assert code == 0, err
    followed = [json.loads(line) for line in out.splitlines()]  # one event per line, each JSON
    shown = json.loads(invoke("show", run_id, "--db", store_url, "--json").stdout)["events"]
    assert followed == shown  # every event, as `runner show --json` lists them
    deltas = [e["data"] for e in followed if e["kind"] == "model_delta" and e["step"] == 1]
    assert len(deltas) >= 2  # the text grew in more than one commit
    assert "".join(d["text"] for d in deltas) == TOOL_STEP["content"]
    assert followed[-1]["kind"] == "run_finished"


def test_watch_of_a_run_that_stopped_prints_it_and_exits_as_run_does(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    fill(db)
    done = invoke("watch", R2[:6], "--db", db)  # any unique prefix
    assert done.exit_code == 0, done.output
    assert done.stdout == ("run 2222bbbb: Say HELLO\nmodel scripted\n\nstep 1\nhello\n"  # not streamed: its reply whole
                           f"{done.stdout.splitlines()[5]}\n\ndone\n")
    assert done.stdout.splitlines()[5].startswith("step 1  model  ")
    limited = invoke("watch", R4[:8] + "0", "--db", db)
    assert limited.exit_code == 1  # a run that did not end done, as `runner run` says it
    assert limited.stdout.endswith("\n\nstep_limit\nmade 1 model calls (max_steps=1)\n")
    lines = invoke("watch", R4[:9], "--db", db, "--json")
    assert lines.exit_code == 1
    assert [json.loads(line) for line in lines.stdout.splitlines()] == \
        json.loads(invoke("show", R4, "--db", db, "--json").stdout)["events"]
    ambiguous = invoke("watch", "4444dddd", "--db", db)
    assert ambiguous.exit_code == 3
    assert "ambiguous" in ambiguous.stderr
    assert invoke("watch", "nosuchrun", "--db", db).exit_code == 3


@pytest.mark.process
def test_watch_of_a_run_whose_process_died_says_so_and_exits_1(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    record_dead_inside_pay(db, "died-inside-pay")
    result = invoke("watch", "died", "--db", db)
    assert result.exit_code == 1
    assert "step 1  tool pay  started" in result.stdout
    assert "the run's process is gone (dead): runner show died-ins " in " ".join(result.stdout.split())


@pytest.mark.process
def test_watch_marks_a_reply_cut_off_then_asked_again(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    with open_store(db) as store:
        logged(store, [*opening("again"), *deltas(1, "First ", "try"),
                       RunResumed(run_id="again", step=1, owner="o", reason="running", limits={}),
                       StepStarted(step=1), *deltas(1, "Second\x1b[2J"),
                       MessageAppended(step=1, index=2, message={"role": "assistant", "content": "Second",
                                                                   "tool_calls": []}),
                       ModelCalled(step=1, prompt_tokens=3, reply_tokens=2, reply=ModelReply("Second")),
                       RunFinished(step=1, status=Status.DONE, answer="Second")], dead=False)
    result = invoke("watch", "again", "--db", db)
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[3:8] == ["step 1", "First try", "(the reply was cut off here)", "", "resumed (running)"]
    assert lines[9:11] == ["step 1", "Second"]  # its text without the terminal's control sequence
    assert lines[-2:] == ["", "done"]


@pytest.mark.process
def test_ctrl_c_stops_watching_not_the_run(tmp_path: Path) -> None:
    db, gate = f"sqlite:///{tmp_path / 'runs.db'}", tmp_path / "gate"
    run = start_runner(STREAM_CLI, "run", "Weather?", "--model", "openai:fake", "--tools", WEATHER, "--db", db,
                       script=[ANSWER], gate=gate)
    waiting_at(gate)
    watch = start_runner([installed_runner()], "watch", first_run(db), "--db", db)
    watch.out.wait_for("step 1")
    watch.proc.send_signal(signal.SIGINT)
    code, _, err = watch.ended()
    assert code == 130
    assert "Traceback" not in err
    assert run.proc.poll() is None  # the run goes on
    gate.touch()
    assert run.proc.wait(WAIT_S) == 0
    with open_store(db) as store:
        assert store.get_run(first_run(db)).status == Status.DONE
