"""``runner run`` prints a streamed reply's text as the model writes it; ``--no-stream`` and ``--json`` as before.

The model streams through the real command line (``tests/cli/stream_cli.py``): each reply word by
word, its first word then held at a gate the test opens, so what the terminal shows while the model
still writes is read from the real process's stdout, not timed.
"""

from __future__ import annotations

import json
import re
import signal
import time
from pathlib import Path

import openai
import pytest

from runner import Status, open_store
from runner.events import ModelDelta
from tests.cli.helpers import STREAM_CLI, WAIT_S, FakeOpenAI, completion, invoke, start_runner, waiting_at
from tests.cli.stream_tools import CHILD_SAYS

ANSWER = "The answer is forty-two, as the tool computed."
WEATHER = "tests.loop.helpers:weather_registry"
TOOL_STEP = {"content": "Let me check.", "calls": [["c1", "get_weather", {"city": "Paris"}]]}
RUN_ID = re.compile(r"\b[0-9a-f]{32}\b|\b[0-9a-f]{8}\b")


def run_args(db: str, *more: str) -> list[str]:
    return ["run", "Say it", "--model", "openai:fake", "--tools", WEATHER, "--db", db, *more]


def deltas(db: str, run_id: str) -> list[ModelDelta]:
    with open_store(db) as store:
        return [fact for fact in store.get_run(run_id).facts if isinstance(fact, ModelDelta)]


def committed(db: str, text: str) -> str:
    """The id of the one run in ``db``, once its ``model_delta`` facts hold ``text``."""
    deadline = time.monotonic() + WAIT_S
    while True:
        with open_store(db) as store:
            found = store.list_runs()
            if found and "".join(d.text for d in deltas(db, found[0].run_id)) == text:
                return found[0].run_id
        assert time.monotonic() < deadline, "the text was never committed"
        time.sleep(0.02)


def run_id_of(out: str) -> str:
    found = re.search(r"^run id: ([0-9a-f]{32})$", out, re.M)
    assert found is not None, out
    return found[1]


def streamed_as_written(args: list[str], gate: Path) -> str:
    """The stdout of ``runner ARGS``, checked to hold the answer's first word while the model still writes it."""
    run = start_runner(STREAM_CLI, *args, script=[ANSWER], gate=gate, pause_s=0.01)
    assert run.out.wait_for("The ") == "The "  # the first word, on stdout at once
    waiting_at(gate)
    assert run.proc.poll() is None  # the model still writes the rest
    assert "forty-two" not in run.out.text
    gate.touch()
    code, out, err = run.ended()
    assert code == 0, err
    assert re.search(r"^step \d+  model  .*ok", err, re.M)  # the progress lines, on stderr as ever
    return out


@pytest.mark.process
def test_run_prints_the_first_words_while_the_model_still_writes_and_the_answer_once(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    out = streamed_as_written(run_args(db), tmp_path / "gate")
    assert out.startswith(f"{ANSWER}\n\nrun id: ")  # the answer as it streamed, then the report as ever
    assert out.count(ANSWER) == 1
    assert "".join(delta.text for delta in deltas(db, run_id_of(out))) == ANSWER  # logged as it came, too


@pytest.mark.process
def test_no_stream_prints_nothing_until_the_run_ends_then_what_a_streamed_run_prints(tmp_path: Path) -> None:
    db, gate = f"sqlite:///{tmp_path / 'runs.db'}", tmp_path / "gate"
    run = start_runner(STREAM_CLI, *run_args(db, "--no-stream"), script=[ANSWER], gate=gate)
    waiting_at(gate)  # the model is asked for its whole reply, and holds it
    time.sleep(0.3)  # had the command printed anything meanwhile, it would be here by now
    assert run.out.text == ""
    gate.touch()
    code, plain, _ = run.ended()
    assert code == 0
    code, streamed, _ = start_runner(STREAM_CLI, *run_args(db), script=[ANSWER]).ended()
    assert code == 0
    assert RUN_ID.sub("ID", plain) == RUN_ID.sub("ID", streamed)  # the same lines, streamed or not
    assert deltas(db, run_id_of(plain)) == []  # not streamed: no model_delta logged
    assert deltas(db, run_id_of(streamed))


@pytest.mark.process
def test_each_steps_text_streams_with_its_progress_lines_after_it(tmp_path: Path) -> None:
    """stdout and stderr in one pipe: each reply's line ends before the progress lines that follow it."""
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    run = start_runner(STREAM_CLI, *run_args(db), script=[TOOL_STEP, "It is 21C in Paris."], merged=True)
    code, out, _ = run.ended()
    assert code == 0, out
    lines = out.splitlines()
    assert lines[0] == "Let me check."
    assert re.match(r"step 1  model  \S+  ok", lines[1])
    assert re.match(r"step 1  tool get_weather  \S+  ok", lines[2])
    assert lines[3] == "It is 21C in Paris."
    assert re.match(r"step 2  model  \S+  ok", lines[4])
    assert lines[5:7] == ["", f"run id: {run_id_of(out)}"]
    assert out.count("It is 21C in Paris.") == 1


@pytest.mark.process
def test_json_prints_the_result_alone_while_the_run_still_streams_into_the_log(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    code, out, err = start_runner(STREAM_CLI, *run_args(db, "--json"), script=[TOOL_STEP, ANSWER]).ended()
    assert code == 0, err
    streamed = json.loads(out)  # stdout is the one JSON document
    code, out, _ = start_runner(STREAM_CLI, *run_args(db, "--json", "--no-stream"), script=[TOOL_STEP, ANSWER]).ended()
    plain = json.loads(out)
    assert (streamed["status"], streamed["answer"], streamed["steps"]) == (Status.DONE, ANSWER, 2)
    assert streamed.keys() == plain.keys()
    assert {k: v for k, v in streamed.items() if k != "run_id"} == {k: v for k, v in plain.items() if k != "run_id"}
    assert re.search(r"^step 2  model", err, re.M)  # the progress lines, on stderr as ever
    assert "".join(d.text for d in deltas(db, streamed["run_id"])) == "Let me check." + ANSWER  # another process
    assert deltas(db, plain["run_id"]) == []  # following the run saw its text grow


@pytest.mark.process
def test_ctrl_c_mid_reply_ends_its_line_and_names_the_run_it_cancelled(tmp_path: Path) -> None:
    db, gate = f"sqlite:///{tmp_path / 'runs.db'}", tmp_path / "gate"
    run = start_runner(STREAM_CLI, *run_args(db), script=[ANSWER], gate=gate)
    run.out.wait_for("The ")
    waiting_at(gate)
    committed(db, "The ")  # (a piece not committed yet when Ctrl-C comes is not logged)
    run.proc.send_signal(signal.SIGINT)
    code, out, err = run.ended()
    assert code == 130, err
    lines = out.splitlines()
    assert lines[0] == "The "
    found = re.match(r"interrupted: run ([0-9a-f]{32}) is cancelled ", lines[1])
    assert found is not None, out
    assert "Traceback" not in err
    with open_store(db) as store:
        assert store.get_run(found[1]).status == Status.CANCELLED
    shown = invoke("show", found[1], "--db", db).stdout  # what it wrote before the cancel, cut off
    assert "  model  interrupted: the reply so far" in shown
    assert "\n    The \n" in shown


def test_a_model_that_does_not_stream_prints_as_before(tmp_path: Path) -> None:
    """The demo's scripted model has no ``stream``: its answer is printed at the end, streaming on or off."""
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    streamed, plain = invoke("demo", "--db", db), invoke("demo", "--no-stream", "--db", db)
    assert (streamed.exit_code, plain.exit_code) == (0, 0)
    assert RUN_ID.sub("ID", streamed.stdout) == RUN_ID.sub("ID", plain.stdout)
    assert streamed.stdout.startswith("Each person pays")
    with open_store(db) as store:
        assert not [f for run in store.list_runs() for f in store.get_run(run.run_id).facts
                    if isinstance(f, ModelDelta)]


@pytest.mark.process
def test_a_run_killed_mid_reply_shows_its_partial_text_and_resume_fork_and_follow_up_stream(tmp_path: Path) -> None:
    db, gate = f"sqlite:///{tmp_path / 'runs.db'}", tmp_path / "gate"
    run = start_runner(STREAM_CLI, *run_args(db), script=[ANSWER], gate=gate)
    run.out.wait_for("The ")
    waiting_at(gate)
    run_id = committed(db, "The ")
    run.proc.kill()  # SIGKILL mid-reply
    assert run.proc.wait(WAIT_S) == -signal.SIGKILL
    shown = invoke("show", run_id, "--db", db).stdout
    assert "running (dead)" in shown
    assert "  model  interrupted: the reply so far (it never came; a resume asks the model again)\n    The \n" in shown
    events = json.loads(invoke("show", run_id, "--db", db, "--json").stdout)["events"]
    assert [(e["kind"], e["data"]) for e in events if e["kind"] == "model_delta"] == [
        ("model_delta", {"text": "The ", "offset": 0})]

    resumed = streamed_as_written(["resume", run_id[:8], "--tools", WEATHER, "--db", db], tmp_path / "gate2")
    assert resumed.startswith(f"{ANSWER}\n\nrun id: {run_id}\n")  # asked again, streamed, printed once
    assert resumed.count(ANSWER) == 1
    forked = streamed_as_written(["fork", run_id[:8], "--at", "1", "--tools", WEATHER, "--db", db],
                                 tmp_path / "gate3")
    assert forked.startswith(f"{ANSWER}\n\nrun id: ")
    assert forked.count(ANSWER) == 1
    followed = streamed_as_written(["run", "And again?", "--follow-up", run_id[:8], "--tools", WEATHER, "--db", db],
                                   tmp_path / "gate4")
    assert followed.startswith(f"{ANSWER}\n\nrun id: ")
    assert followed.count(ANSWER) == 1


@pytest.mark.process
@pytest.mark.parametrize("calls", [1, 2], ids=["one-child", "two-children-together"])
def test_a_sub_agents_text_is_left_to_its_own_log(tmp_path: Path, calls: int) -> None:
    """Its child runs stream into their own logs (``runner watch CHILD``), not into the parent's terminal."""
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    asks = {"content": "Asking.", "calls": [[f"a{i}", "research", {"task": f"find {i}"}] for i in range(calls)]}
    code, out, err = start_runner(STREAM_CLI, "run", "Find it", "--model", "openai:fake", "--tools",
                                  "tests.cli.stream_tools:tools", "--db", db, script=[asks, "Done."]).ended()
    assert code == 0, err
    assert out.startswith("Asking.\nDone.\n\nrun id: ")
    assert CHILD_SAYS not in out
    assert len(re.findall(r"^step 1  tool research  \S+  ok$", err, re.M)) == calls  # its progress lines, as ever
    with open_store(db) as store:
        children = store.children(run_id_of(out))
    assert len(children) == calls
    for child in children:
        assert "".join(d.text for d in deltas(db, child.run_id)) == CHILD_SAYS
        watched = invoke("watch", child.run_id, "--db", db)
        assert watched.exit_code == 0
        assert f"\n{CHILD_SAYS}\n" in watched.stdout


def test_the_fake_servers_stream_gathers_into_the_completion_it_sends_whole() -> None:
    """``FakeOpenAI`` answers a request for a stream as a server streams (what ``runner run`` asks a model that can)."""
    body = completion("Let me check it.", [("c1", "get_weather", {"city": "Paris"}), ("c2", "c_to_f", {"celsius": 3})],
                      usage=(12, 7))
    with FakeOpenAI(body, body) as server:
        client = openai.OpenAI(base_url=server.url, api_key="k", max_retries=0)
        whole = client.chat.completions.create(model="fake", messages=[{"role": "user", "content": "hi"}])
        chunks = list(client.chat.completions.create(model="fake", messages=[{"role": "user", "content": "hi"}],
                                                     stream=True, stream_options={"include_usage": True}))
        client.close()
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    calls = [(t.id, t.function.name if t.function else None, t.function.arguments if t.function else None)
             for c in chunks if c.choices for t in c.choices[0].delta.tool_calls or []]
    message = whole.choices[0].message
    assert len([c for c in chunks if c.choices and c.choices[0].delta.content]) == 4  # word by word
    assert text == message.content
    assert calls == [(t.id, t.function.name, t.function.arguments) for t in message.tool_calls or []
                     if isinstance(t, openai.types.chat.ChatCompletionMessageFunctionToolCall)]
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == whole.choices[0].finish_reason
    assert chunks[-1].usage == whole.usage
