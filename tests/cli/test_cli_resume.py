"""``runner resume``, ``runner fork``, ``runner run --follow-up``, and how ``runs``/``show`` present them.

Every test drives the real CLI (click's ``CliRunner``) against a real store (a SQLite
file, and PostgreSQL when RUNNER_TEST_PG_URL is set) and a real OpenAI-compatible
HTTP server on 127.0.0.1 that answers with scripted completions. The tools are
``tests.cli.resume_tools``: ``RAN`` says which functions really ran.
"""

from __future__ import annotations

import datetime
import json
import re
import shlex
from collections.abc import Callable, Iterator

import pytest
from click.testing import Result

from runner import ModelReply, ScriptedModel, ToolCall, open_store, run_agent
from runner._loop.observations import IN_DOUBT
from runner.cli.resume import decisions_from
from tests.cli import resume_tools
from tests.cli.helpers import (
    RESUME_TOOLS,
    FakeOpenAI,
    at,
    awaiting,
    completion,
    invoke,
    lines,
    one_error_line,
    record_dead_inside_pay,
    rows,
    run_id_in,
)

TOOLS = RESUME_TOOLS
DENIED = "ERROR: the call to transfer was denied by the approver"


@pytest.fixture(autouse=True)
def local_only(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy",
                 "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OPENAI_BASE_URL",
                 "OPENAI_API_KEY", "RUNNER_DB", "COLUMNS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    resume_tools.RAN.clear()
    yield
    resume_tools.RAN.clear()


def hint(url: str) -> str:
    return f" --db {shlex.quote(url)}"


def table(result: Result) -> list[list[str]]:
    """The rows of the runs table, without the notes printed under it."""
    return rows("\n".join(line for line in result.stdout.splitlines() if not line.startswith("note: ")) + "\n")


def finished(url: str) -> str:
    """A ``done`` run whose first step looked ``x`` up: two model calls."""
    with FakeOpenAI(completion("", [("l1", "lookup", {"ref": "x"})]), completion("The value is 42.")) as server:
        result = invoke("run", "Look x up", "--tools", TOOLS, "--model", "openai:fake", *at(server), "--db", url)
    assert result.exit_code == 0, result.output
    return run_id_in(result)


def test_a_run_awaiting_approval_says_how_to_approve_and_resume_approve_runs_the_call_once(store_url: str) -> None:
    with FakeOpenAI(completion("", [("t1", "transfer", {"ref": "a"})])) as server:
        stopped = invoke("run", "Send the money", "--tools", TOOLS, "--model", "openai:fake", *at(server),
                         "--db", store_url)
    assert stopped.exit_code == 1
    run_id = run_id_in(stopped)
    short = run_id[:8]
    assert lines(stopped)[:8] == [
        "stopped: awaiting_approval: call t1 (transfer) needs approval", "", f"run id: {run_id}",
        "status awaiting_approval, 1 step, 0 tool calls, 15 tokens", "", "next, try:",
        f"  runner resume {short} --tools {TOOLS} --approve t1{hint(store_url)}",
        f"  runner resume {short} --tools {TOOLS} --deny t1 --reason TEXT{hint(store_url)}"]
    assert resume_tools.RAN == []

    with FakeOpenAI(completion("Sent.")) as server:
        resumed = invoke("resume", short, "--tools", TOOLS, "--approve", "t1", *at(server), "--db", store_url)
    assert resumed.exit_code == 0, resumed.output
    assert lines(resumed)[:4] == ["Sent.", "", f"run id: {run_id}", "status done, 2 steps, 1 tool call, 30 tokens"]
    assert resume_tools.RAN == ["transfer a"]
    assert [r["model"] for r in server.requests] == ["fake"]  # the model the run was recorded with
    assert server.requests[0]["messages"][-1] == {"role": "tool", "tool_call_id": "t1", "content": '"transferred a"'}
    with open_store(store_url) as store:
        run = store.get_run(run_id)
    assert (run.status, run.answer) == ("done", "Sent.")
    assert [e.data["decisions"] for e in run.events if e.kind == "run_resumed"] == [{"t1": True}]


def test_deny_with_a_reason_is_what_the_model_reads_and_a_bare_deny_has_none(store_url: str) -> None:
    run_id = awaiting(store_url, ("t1", "transfer", {"ref": "a"}), ("t2", "transfer", {"ref": "b"}))
    with FakeOpenAI(completion("Nothing was sent.")) as server:
        result = invoke("resume", run_id[:8], "--tools", TOOLS, "--deny", "t1", "--reason", "too much",
                        "--deny", "t2", *at(server), "--db", store_url, "--json")
    assert result.exit_code == 0, result.output
    found = json.loads(result.stdout)
    assert (found["run_id"], found["status"], found["answer"], found["tool_calls"]) == (
        run_id, "done", "Nothing was sent.", 0)
    assert resume_tools.RAN == []
    told = [{"role": "tool", "tool_call_id": "t1", "content": f"{DENIED}: too much; do not retry it"},
            {"role": "tool", "tool_call_id": "t2", "content": f"{DENIED}; do not retry it"}]
    assert server.requests[0]["messages"][-2:] == told
    with open_store(store_url) as store:
        run = store.get_run(run_id)
    assert [(m["tool_call_id"], m["content"]) for m in run.messages if m["role"] == "tool"] == [
        (t["tool_call_id"], t["content"]) for t in told]
    assert [e.data["decisions"] for e in run.events if e.kind == "run_resumed"] == [{"t1": "too much", "t2": False}]


@pytest.mark.parametrize(("order", "approve", "deny", "reasons", "expected"), [
    (["deny", "reason", "deny"], (), ("c1", "c2"), ("too much",), {"c1": "too much", "c2": False}),
    (["approve", "tools", "deny", "model", "reason", "approve"], ("a1", "a2"), ("d1",), ("no",),
     {"a1": True, "d1": "no", "a2": True}),
    (["deny", "deny", "reason"], (), ("c1", "c2"), ("why",), {"c1": False, "c2": "why"}),
], ids=["reason-then-bare-deny", "other-options-between", "reason-belongs-to-the-last-deny"])
def test_each_reason_belongs_to_the_deny_just_before_it(order: list[str], approve: tuple[str, ...],
                                                        deny: tuple[str, ...], reasons: tuple[str, ...],
                                                        expected: dict[str, bool | str]) -> None:
    assert decisions_from(order, approve, deny, reasons) == expected


@pytest.mark.parametrize(("args", "message"), [
    (["--reason", "why"], "Error: --reason 'why' must come right after the --deny it explains"),
    (["--approve", "t1", "--reason", "why"], "Error: --reason 'why' must come right after the --deny it explains"),
    (["--deny", "t1", "--reason", "a", "--reason", "b"],
     "Error: --reason 'b' must come right after the --deny it explains"),
    (["--approve", "t1", "--deny", "t1"], "Error: call 't1' is decided twice (one --approve or --deny per call)"),
    (["--deny", "t1", "--reason", " "], "Error: --reason for 't1' is empty (a --deny alone refuses without one)"),
])
def test_a_misplaced_reason_or_a_call_decided_twice_is_a_usage_error(store_url: str, args: list[str],
                                                                     message: str) -> None:
    run_id = awaiting(store_url, ("t1", "transfer", {"ref": "a"}))
    result = invoke("resume", run_id[:8], "--tools", TOOLS, *args, "--api-key", "k", "--db", store_url)
    assert result.exit_code == 2
    assert one_error_line(result) == message
    with open_store(store_url) as store:
        assert store.get_run(run_id).status == "awaiting_approval"


@pytest.mark.parametrize("option", ["--approve", "--deny"])
def test_a_decision_for_a_call_not_awaiting_approval_is_one_line_and_changes_nothing(store_url: str,
                                                                                    option: str) -> None:
    run_id = awaiting(store_url, ("t1", "transfer", {"ref": "a"}))
    with open_store(store_url) as store:
        before = len(store.get_run(run_id).events)
    result = invoke("resume", run_id[:8], "--tools", TOOLS, option, "t9", "--api-key", "k", "--db", store_url)
    assert result.exit_code == 2
    assert one_error_line(result) == (f"Error: {option} t9: run {run_id[:8]} has no call 't9' awaiting approval "
                                      "(awaiting: t1)")
    assert result.stdout == ""
    with open_store(store_url) as store:
        run = store.get_run(run_id)
    assert (run.status, len(run.events), resume_tools.RAN) == ("awaiting_approval", before, [])


def test_resuming_a_done_run_is_an_error(store_url: str) -> None:
    run_id = finished(store_url)
    result = invoke("resume", run_id, "--tools", TOOLS, "--db", store_url)
    assert result.exit_code == 3
    assert one_error_line(result) == (f"Error: run {run_id[:8]} is done; nothing to resume (runner fork "
                                      f"{run_id[:8]} --at STEP, or runner run --follow-up {run_id[:8]} MESSAGE, "
                                      "goes on from it)")
    assert result.stdout == ""


def test_resuming_a_run_a_live_process_drives_is_an_error(store_url: str) -> None:
    from tests.loop.helpers import record_unfinished_run

    with open_store(store_url) as store:
        record_unfinished_run(store, "e" * 32, "still going")
        owner = store.get_run("e" * 32).owner
    result = invoke("resume", "eeee", "--tools", TOOLS, "--db", store_url)
    assert result.exit_code == 3
    assert one_error_line(result) == (f"Error: run eeeeeeee is being driven by a live process ({owner}); "
                                      "it cannot be taken over")


@pytest.mark.process
def test_resume_needs_a_model_when_the_log_cannot_name_one(store_url: str) -> None:
    record_dead_inside_pay(store_url, "f" * 32, model="scripted", provider=None)
    result = invoke("resume", "ffff", "--tools", TOOLS, "--db", store_url)
    assert result.exit_code == 2
    assert one_error_line(result) == (f"Error: run {'f' * 32} ran with model 'scripted', which cannot be rebuilt "
                                      "from the log: pass --model (openai:NAME (any OpenAI-compatible server) or "
                                      "anthropic:NAME)")


@pytest.mark.process
def test_a_dead_run_is_marked_and_resumed_without_running_its_side_effect_again(store_url: str) -> None:
    run_id = "d" * 32
    record_dead_inside_pay(store_url, run_id)
    listed = invoke("runs", "--db", store_url)
    assert [row[2] for row in table(listed)] == ["running (dead)"]
    assert lines(listed)[-1] == (f"note: 1 run whose process is gone: runner resume dddddddd --tools MODULE:ATTR"
                                 f"{hint(store_url)} continues it")
    shown = lines(invoke("show", "dddd", "--db", store_url))
    assert shown[-4:-2] == ["  ! pay [p1] started but has no result in the log", ""]
    assert re.fullmatch(r"no run_finished event: the run is dead \(last event [0-9-]+ [0-9:]+ UTC\)", shown[-2])
    assert shown[-1] == f"  runner resume dddddddd --tools MODULE:ATTR{hint(store_url)}   # continues it"
    with FakeOpenAI(completion("I cannot tell whether x was paid.")) as server:
        result = invoke("resume", "dddd", "--tools", TOOLS, *at(server), "--db", store_url)
    assert result.exit_code == 0, result.output
    assert resume_tools.RAN == []
    assert server.requests[0]["messages"][-1] == {"role": "tool", "tool_call_id": "p1", "content": IN_DOUBT}
    shown = lines(invoke("show", "dddd", "--db", store_url))
    resumed = shown.index("resumed: its process is gone (dead)")
    assert shown[resumed + 1].startswith("  by ")
    assert shown[resumed + 1].endswith(" with model fake (openai)")
    assert shown[resumed + 2] == ("  limits: max_steps 8, token_budget 4000, max_identical_calls 2, "
                                  "max_parallel_tools 8, max_output_retries 2")
    assert shown[resumed + 3:resumed + 5] == ["", "step 1 (continued)  " + shown[resumed + 4].split("  ", 1)[1]]
    tool = next(line for line in shown if line.startswith("  tool pay [p1]"))
    assert tool.endswith(", not run (in doubt)  error")
    assert shown[shown.index(tool) + 1] == "    " + IN_DOUBT
    assert shown[-2:] == ["done", "  I cannot tell whether x was paid."]


def test_the_awaiting_approval_note_counts_every_matching_run_not_the_page(store_url: str) -> None:
    first = awaiting(store_url, ("t1", "transfer", {"ref": "a"}))
    awaiting(store_url, ("t1", "transfer", {"ref": "b"}))
    finished(store_url)
    note = f"note: 2 runs awaiting approval: runner show ID{hint(store_url)} lists the calls to --approve or --deny"
    newest_only = invoke("runs", "--limit", "1", "--db", store_url)
    assert [row[2] for row in table(newest_only)] == ["done"]
    assert note in lines(newest_only)
    page = invoke("runs", "--status", "awaiting_approval", "--limit", "1", "--db", store_url)
    assert len(table(page)) == 1
    assert note in lines(page)
    assert not any("awaiting approval" in line for line in lines(invoke("runs", "--status", "done", "--db", store_url)))
    older = invoke("runs", "--until", just_after_start(store_url, first), "--db", store_url)
    assert f"note: 1 run awaiting approval: runner show {first[:8]}{hint(store_url)} lists the calls to --approve " \
           "or --deny" in lines(older)


def just_after_start(url: str, run_id: str) -> str:
    """A microsecond after the run started, as an ISO datetime: ``--until`` it selects that run and those before."""
    with open_store(url) as store:
        when = store.get_run(run_id).started_at
    return (when + datetime.timedelta(microseconds=1)).isoformat()


def test_runs_marks_and_filters_runs_awaiting_approval_and_show_says_how_to_continue(store_url: str) -> None:
    done = finished(store_url)
    waiting = awaiting(store_url, ("t1", "transfer", {"ref": "a"}), ("t2", "transfer", {"ref": "b"}))
    listed = invoke("runs", "--status", "awaiting_approval", "--db", store_url)
    assert listed.exit_code == 0
    assert [(row[0], row[2]) for row in table(listed)] == [(waiting[:8], "awaiting_approval")]
    assert lines(listed)[-1] == (f"note: 1 run awaiting approval: runner show {waiting[:8]}{hint(store_url)} lists "
                                 "the calls to --approve or --deny")
    everything = invoke("runs", "--db", store_url)
    assert [row[0] for row in table(everything)] == [waiting[:8], done[:8]]
    shown = lines(invoke("show", waiting[:8], "--db", store_url))
    assert [line for line in shown if line.startswith("  approval needed")] == [
        "  approval needed: transfer [t1]", "  approval needed: transfer [t2]"]
    assert shown[-6:] == [
        "stopped: awaiting_approval", "  call t1 (transfer) needs approval (and 1 more)", "",
        "awaiting approval: t1 (transfer), t2 (transfer)",
        f"  runner resume {waiting[:8]} --tools {TOOLS} --approve t1 --approve t2{hint(store_url)}",
        "  (--deny CALL_ID [--reason TEXT] refuses a call instead)"]


def test_show_gives_each_resume_boundary_with_its_decisions(store_url: str) -> None:
    run_id = awaiting(store_url, ("t1", "transfer", {"ref": "a"}), ("t2", "transfer", {"ref": "b"}))
    with FakeOpenAI(completion("Sent one.")) as server:
        result = invoke("resume", run_id[:8], "--tools", TOOLS, "--approve", "t1", "--deny", "t2", "--reason",
                        "over the limit", "--max-steps", "5", *at(server), "--db", store_url)
    assert result.exit_code == 0, result.output
    shown = lines(invoke("show", run_id[:8], "--db", store_url))
    resumed = shown.index("resumed after awaiting_approval")
    assert shown[resumed + 2:resumed + 4] == ["  limits: max_steps 5, token_budget 4000, max_identical_calls 2, "
                                              "max_parallel_tools 8, max_output_retries 2",
                                              "  decisions: t1 approved, t2 denied (over the limit)"]
    assert [line.split("  ")[0] for line in shown if line.startswith("step ")] == [
        "step 1", "step 1 (continued)", "step 2"]
    denied = next(line for line in shown if line.startswith("  tool transfer [t2]"))
    assert denied.endswith(", not run (denied)  error")
    assert shown[-2:] == ["done", "  Sent one."]


def test_fork_with_an_observation_makes_a_linked_run_and_leaves_the_parent_untouched(store_url: str) -> None:
    parent = finished(store_url)
    with open_store(store_url) as store:
        before = store.get_run(parent)
    swapped = '{"ref": "x", "value": 7}'
    with FakeOpenAI(completion("The value is 7.")) as server:
        result = invoke("fork", parent[:8], "--at", "2", "--observation", f"l1={swapped}", "--tools", TOOLS,
                        *at(server), "--db", store_url)
    assert result.exit_code == 0, result.output
    child = run_id_in(result)
    assert child != parent
    assert lines(result)[:5] == ["The value is 7.", "", f"run id: {child}",
                                 "status done, 2 steps, 0 tool calls, 15 tokens", f"fork of run {parent[:8]} at step 2"]
    assert resume_tools.RAN == ["lookup x"]  # the parent's call only: step 1 was not run again
    assert server.requests[0]["messages"][1:] == [
        {"role": "user", "content": "Look x up"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "l1", "type": "function", "function": {"name": "lookup", "arguments": '{"ref": "x"}'}}]},
        {"role": "tool", "tool_call_id": "l1", "content": swapped}]
    with open_store(store_url) as store:
        after = store.get_run(parent)
    assert after.events == before.events
    listed = json.loads(invoke("runs", "--json", "--db", store_url).stdout)
    assert [(r["run_id"], r["parent_run_id"]) for r in listed] == [(child, parent), (parent, None)]
    assert f"child run {child} (fork at step 2, done)" in lines(invoke("show", parent, "--db", store_url))
    assert f"parent run {parent} (fork at step 2)" in lines(invoke("show", child, "--db", store_url))
    shown = json.loads(invoke("show", parent, "--json", "--db", store_url).stdout)
    assert shown["children"] == [{"run_id": child, "status": "done", "origin": "fork", "forked_at_step": 2}]


@pytest.mark.parametrize(("args", "code", "message"), [
    (["--at", "3"], 2, "Error: --at 3: run {short} made 2 model calls; --at must be between 1 and 2"),
    (["--at", "0"], 2, "Error: Invalid value for '--at': 0 is not in the range x>=1."),
    (["--at", "2", "--observation", "zz=1"], 2,
     "Error: --observation: run {run_id} has no tool result for call(s) ['zz'] before that step"),
    (["--at", "2", "--observation", "l1"], 2,
     "Error: Invalid value for '--observation': expected CALL_ID=TEXT, got 'l1'"),
])
def test_bad_fork_inputs_are_one_line_usage_errors_and_record_nothing(store_url: str, args: list[str], code: int,
                                                                      message: str) -> None:
    parent = finished(store_url)
    result = invoke("fork", parent[:8], *args, "--tools", TOOLS, "--api-key", "k", "--db", store_url)
    assert result.exit_code == code
    assert one_error_line(result).startswith(message.format(short=parent[:8], run_id=parent))
    with open_store(store_url) as store:
        assert [run.run_id for run in store.list_runs()] == [parent]


def test_run_follow_up_continues_the_conversation_in_a_linked_run(store_url: str) -> None:
    parent = finished(store_url)
    with open_store(store_url) as store:
        history = store.get_run(parent).messages
    with FakeOpenAI(completion("y is 43.")) as server:
        result = invoke("run", "And y?", "--follow-up", parent[:8], "--tools", TOOLS, *at(server), "--db", store_url)
    assert result.exit_code == 0, result.output
    child = run_id_in(result)
    assert lines(result)[:5] == ["y is 43.", "", f"run id: {child}", "status done, 1 step, 0 tool calls, 15 tokens",
                                 f"follow-up of run {parent[:8]}"]
    assert [r["model"] for r in server.requests] == ["fake"]
    seen = server.requests[0]["messages"]
    assert [m["role"] for m in seen] == [m["role"] for m in history] + ["user"]
    assert seen[-1] == {"role": "user", "content": "And y?"}
    with open_store(store_url) as store:
        run = store.get_run(child)
    assert (run.parent_run_id, run.task, run.messages[:-2]) == (parent, "And y?", history)
    assert f"child run {child} (follow-up, done)" in lines(invoke("show", parent, "--db", store_url))
    assert f"parent run {parent} (follow-up)" in lines(invoke("show", child, "--db", store_url))


def test_run_follow_up_json_names_the_parent_and_refuses_a_new_system_prompt(store_url: str) -> None:
    parent = finished(store_url)
    refused = invoke("run", "And y?", "--follow-up", parent[:8], "--system", "Be terse.", "--tools", TOOLS,
                     "--db", store_url)
    assert refused.exit_code == 2
    assert one_error_line(refused) == ("Error: --system cannot change a follow-up's system prompt: it keeps its "
                                       "parent's")
    with FakeOpenAI(completion("y is 43.")) as server:
        result = invoke("run", "And y?", "--follow-up", parent, "--model", "openai:other", "--max-steps", "3",
                        "--tools", TOOLS, *at(server), "--db", store_url, "--json")
    assert result.exit_code == 0, result.output
    found = json.loads(result.stdout)
    assert (found["status"], found["parent_run_id"], found["awaiting_approval"]) == ("done", parent, [])
    assert [r["model"] for r in server.requests] == ["other"]
    with open_store(store_url) as store:
        assert store.get_run(found["run_id"]).limits["max_steps"] == 3


def test_a_follow_up_of_a_run_awaiting_approval_is_an_error(store_url: str) -> None:
    run_id = awaiting(store_url, ("t1", "transfer", {"ref": "a"}))
    result = invoke("run", "Well?", "--follow-up", run_id[:8], "--tools", TOOLS, "--api-key", "k", "--db", store_url)
    assert result.exit_code == 3
    assert one_error_line(result) == (f"Error: run {run_id} stopped with 1 call unanswered (awaiting_approval); "
                                      "resume it instead")


def interrupting(*args: object) -> Callable[[object, object], ModelReply]:
    """A model that is Ctrl-C'd while its first request is in flight."""
    def model(messages: object, specs: object) -> ModelReply:
        raise KeyboardInterrupt

    return model


@pytest.mark.parametrize("command", ["resume", "fork", "follow-up"])
def test_ctrl_c_names_the_run_it_cancelled_and_exits_130(store_url: str, monkeypatch: pytest.MonkeyPatch,
                                                         command: str) -> None:
    import runner.cli.resume as continuing
    import runner.cli.run as running

    parent = awaiting(store_url, ("t1", "transfer", {"ref": "a"})) if command == "resume" else finished(store_url)
    monkeypatch.setattr(continuing, "continuing_model", interrupting)
    monkeypatch.setattr(running, "continuing_model", interrupting)
    args = {"resume": ["resume", parent[:8], "--approve", "t1"], "fork": ["fork", parent[:8], "--at", "2"],
            "follow-up": ["run", "And y?", "--follow-up", parent[:8]]}[command]
    result = invoke(*args, "--tools", TOOLS, "--db", store_url)
    assert result.exit_code == 130
    with open_store(store_url) as store:
        (cancelled,) = store.list_runs(status="cancelled")
    assert (cancelled.run_id == parent) is (command == "resume")
    assert result.stdout.splitlines() == [
        f"interrupted: run {cancelled.run_id} is cancelled (aborted by KeyboardInterrupt)",
        f"  runner show {cancelled.run_id[:8]}{hint(store_url)}"]


@pytest.mark.parametrize(("tools_ref", "shown_as"), [
    ("myapp.tools:registry", "myapp.tools:registry"),
    (None, "MODULE:ATTR"),
    ("x; rm -rf ~:registry", "MODULE:ATTR"),  # a log may come from anywhere: never a shell command
    ("$(reboot):x", "MODULE:ATTR"),
])
def test_show_prints_the_tools_the_run_was_started_with_when_the_log_names_them(
        store_url: str, tools_ref: str | None, shown_as: str) -> None:
    with open_store(store_url) as store:
        result = run_agent("Send", ScriptedModel([ModelReply("", [ToolCall("t1", "transfer", {"ref": "a"})])]),
                           resume_tools.tools(), store=store, tools_ref=tools_ref)
    assert result.status == "awaiting_approval"
    shown = lines(invoke("show", result.run_id[:8], "--db", store_url))
    assert shown[-2] == f"  runner resume {result.run_id[:8]} --tools {shown_as} --approve t1{hint(store_url)}"


@pytest.mark.parametrize("as_json", [False, True])
def test_resume_approve_reads_the_run_at_most_twice_and_logs_the_decision_by_its_decider(
        store_url: str, monkeypatch: pytest.MonkeyPatch, as_json: bool) -> None:
    from runner import RunStore
    from runner.events import ApprovalDecided, RunResumed

    run_id = awaiting(store_url, ("t1", "transfer", {"ref": "a"}))
    reads: list[str] = []
    get_run = RunStore.get_run

    def counted(self: RunStore, wanted: str) -> object:  # find_run reads through get_run too
        reads.append(wanted)
        return get_run(self, wanted)

    monkeypatch.setattr(RunStore, "get_run", counted)
    with FakeOpenAI(completion("Sent.")) as server:
        result = invoke("resume", run_id[:8], "--tools", TOOLS, "--approve", "t1", "--by", "alice", *at(server),
                        *(["--json"] if as_json else []), "--db", store_url)
    assert result.exit_code == 0, result.output
    assert len(reads) <= 2, reads
    monkeypatch.undo()
    with open_store(store_url) as store:
        facts = store.get_run(run_id).facts
    decided = [(f.call_id, f.approved, f.decided_by) for f in facts if isinstance(f, ApprovalDecided)]
    assert decided == [("t1", True, "alice")]
    resumed = [f for f in facts if isinstance(f, RunResumed)]
    assert facts.index(resumed[0]) == [type(f) for f in facts].index(ApprovalDecided) + 1  # logged with run_resumed
    assert resume_tools.RAN == ["transfer a"]
