"""``runner runs`` and ``runner show``: exact rows for every filter, timelines, one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from runner import ScriptedModel, ToolRegistry, run_agent
from runner.errors import StoreError
from runner.store import open_store
from tests.cli.helpers import R1, R2, R3, R4, R5, fill, invoke, one_error_line, rows


@pytest.fixture
def db(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    fill(url)
    return url


def listed(db: str, *args: str) -> list[list[str]]:
    result = invoke("runs", "--db", db, *args)
    assert result.exit_code == 0, result.output
    return rows(result.stdout)


def ids(db: str, *args: str) -> list[str]:
    return [row[0] for row in listed(db, *args)]


def test_runs_lists_every_run_newest_first_with_its_columns(db: str) -> None:
    with open_store(db) as store:
        tokens = {run.run_id: run.tokens for run in store.list_runs()}
    table = listed(db)
    assert [row[0] for row in table] == ["4444dddd9", "4444dddd0", "3333cccc", "2222bbbb", "1111aaaa"]
    assert [row[1:3] for row in table[1:]] == [
        ["2025-01-01 04:00:00", "step_limit"], ["2025-01-01 03:00:00", "model_error"],
        ["2025-01-01 02:00:00", "done"], ["2025-01-01 01:00:00", "done"]]
    by_id = {row[0]: row for row in table}
    assert by_id["1111aaaa"][3:7] == ["2", "1", str(tokens[R1]), "-"]  # a scripted model has no price: cost "-"
    assert by_id["1111aaaa"][8] == "Weather in Paris?"
    assert by_id["3333cccc"][6] == "$0.0000"  # its one model call failed and returned nothing, at no known cost
    assert by_id["4444dddd0"][3:6] == ["1", "1", str(tokens[R4])]
    assert by_id["4444dddd9"][2:5] == ["done", "2", "1 (+1 refused)"]  # the unknown tool never ran
    assert by_id["3333cccc"][3:5] == ["1", "0"]


def test_status_filter_takes_one_or_several(db: str) -> None:
    assert ids(db, "--status", "done") == ["4444dddd9", "2222bbbb", "1111aaaa"]
    assert ids(db, "--status", "step_limit", "--status", "model_error") == ["4444dddd0", "3333cccc"]


def test_since_and_until_take_iso_dates_datetimes_and_durations(db: str) -> None:
    assert ids(db, "--since", "2025-01-01T03:00:00", "--until", "2025-01-02") == ["4444dddd0", "3333cccc"]
    assert ids(db, "--until", "2025-01-01T02:00:00+00:00") == ["1111aaaa"]
    assert ids(db, "--since", "2025-01-01 02:30", "--until", "2025-01-01T04:00") == ["3333cccc"]
    assert ids(db, "--since", "1h") == ["4444dddd9"]
    assert ids(db, "--since", "30m") == ["4444dddd9"]
    assert ids(db, "--since", "5m") == []
    assert ids(db, "--since", "3d", "--until", "2d") == []
    assert ids(db, "--until", "1h") == ["4444dddd0", "3333cccc", "2222bbbb", "1111aaaa"]


def test_tool_search_label_and_limit_filters(db: str) -> None:
    assert ids(db, "--tool", "get_weather") == ["1111aaaa"]
    assert ids(db, "--tool", "c_to_f") == ["4444dddd0"]
    assert ids(db, "--tool", "get_forecast") == ["4444dddd9"]
    assert ids(db, "--search", "hello") == ["2222bbbb"]
    assert ids(db, "--search", "21c") == ["4444dddd0", "1111aaaa"]
    assert ids(db, "--label", "env=prod") == ["3333cccc", "1111aaaa"]
    assert ids(db, "--label", "env=prod", "--label", "team=a") == ["1111aaaa"]
    assert ids(db, "--label", "env=nowhere") == []
    assert ids(db, "--limit", "2") == ["4444dddd9", "4444dddd0"]
    assert ids(db, "--status", "done", "--label", "env=dev", "--search", "say") == ["2222bbbb"]


def test_no_match_prints_a_note_not_a_table(db: str) -> None:
    result = invoke("runs", "--db", db, "--tool", "nothing")
    assert result.exit_code == 0
    assert result.stdout == "no runs match\n"


def test_runs_json_is_an_array_of_run_objects(db: str) -> None:
    result = invoke("runs", "--db", db, "--json", "--status", "done", "--limit", "2")
    assert result.exit_code == 0
    found = json.loads(result.stdout)
    assert [run["run_id"] for run in found] == [R5, R2]
    second = found[1]
    assert {k: second[k] for k in ("status", "task", "steps", "tool_calls", "answer", "labels", "started_at")} == {
        "status": "done", "task": "Say HELLO", "steps": 1, "tool_calls": 0, "answer": "hello",
        "labels": {"env": "dev"}, "started_at": "2025-01-01T02:00:00+00:00"}
    assert isinstance(second["tokens"], int)
    assert second["tokens"] > 0


def test_the_shared_options_also_come_from_the_environment(db: str) -> None:
    result = invoke("runs", "--json", env={"RUNNER_DB": db})
    assert [run["run_id"] for run in json.loads(result.stdout)] == [R5, R4, R3, R2, R1]


@pytest.mark.parametrize(("args", "message"), [
    (["--since", "yesterday"], "Invalid value for '--since': expected a duration ago (30m, 2h, 3d, 1w) or an ISO"),
    (["--label", "env"], "Invalid value for '--label': expected KEY=VALUE, got 'env'"),
    (["--status", "fine"], "Invalid value for '--status': 'fine' is not one of"),
    (["--limit", "-1"], "Invalid value for '--limit'"),
    (["--bogus"], "No such option '--bogus'"),
])
def test_bad_filters_are_one_line_usage_errors(db: str, args: list[str], message: str) -> None:
    result = invoke("runs", "--db", db, *args)
    assert result.exit_code == 2
    line = one_error_line(result)
    assert message in line
    assert line.endswith("(see 'runner runs --help')")


def test_show_prints_the_run_as_a_timeline(db: str) -> None:
    result = invoke("show", "1111aaaa", "--db", db)
    assert result.exit_code == 0, result.output
    out = [line.rstrip() for line in result.stdout.splitlines()]
    assert out[0] == f"run {R1}  done"
    assert "labels env=prod, team=a" in out
    assert out[out.index("task") + 1] == "  Weather in Paris?"
    assert [line.split("  ")[0] for line in out if line.startswith("step ")] == ["step 1", "step 2"]
    call_line = next(line for line in out if "→" in line)
    assert call_line == '    → get_weather({"city": "Paris"})  [c1]'
    tool = out.index(next(line for line in out if line.startswith("  tool get_weather [c1]")))
    assert out[tool + 1] == '    {"celsius": 21}'
    assert out[-2:] == ["done", "  It is 21C."]


def test_show_accepts_the_full_id_and_highlights_errors_and_the_stop(db: str) -> None:
    result = invoke("show", R3, "--db", db)
    assert result.exit_code == 0
    out = result.stdout.splitlines()
    assert out[0] == f"run {R3}  model_error"
    assert any(line.startswith("    model error (") for line in out)
    assert out[-2] == "stopped: model_error"
    assert "scripted model called 1 time but holds only 0 replies" in out[-1]


def test_show_cuts_observations_unless_full_and_marks_error_observations(db: str) -> None:
    cut = invoke("show", "4444dddd9", "--db", db).stdout.splitlines()
    long_line = cut[cut.index(next(line for line in cut if line.startswith("  tool echo_long"))) + 1]
    assert long_line == "    " + json.dumps("x" * 500)[:300] + f"… ({502 - 300} more chars)"
    unknown = next(line for line in cut if line.startswith("  tool get_forecast"))
    assert unknown.rstrip().endswith("not run  error")
    assert cut[cut.index(unknown) + 1].startswith("    ERROR: unknown tool 'get_forecast'")
    full = invoke("show", "4444dddd9", "--db", db, "--full").stdout.splitlines()
    assert "    " + json.dumps("x" * 500) in full


def test_show_stopped_run_gives_the_status_and_reason(db: str) -> None:
    out = invoke("show", "4444dddd0", "--db", db).stdout.splitlines()
    assert out[-2] == "stopped: step_limit"
    assert out[-1].startswith("  ")


def test_show_json_gives_the_run_and_its_events(db: str) -> None:
    result = invoke("show", "2222", "--db", db, "--json")
    assert result.exit_code == 0
    found = json.loads(result.stdout)
    assert found["run"]["run_id"] == R2
    assert [e["kind"] for e in found["events"]] == [
        "run_started", "message", "message", "step_started", "message", "model_call", "step_finished",
        "run_finished"]
    assert [e["seq"] for e in found["events"]] == list(range(1, 9))
    assert found["events"][-1]["data"]["answer"] == "hello"


@pytest.mark.parametrize(("ref", "message"), [
    ("zzz", "Error: no run 'zzz' in sqlite:///"),
    ("4444dddd", "Error: run id prefix '4444dddd' is ambiguous: "),
])
def test_unknown_or_ambiguous_run_is_one_line(db: str, ref: str, message: str) -> None:
    result = invoke("show", ref, "--db", db)
    assert result.exit_code == 3
    assert one_error_line(result).startswith(message)
    assert result.stdout == ""


def test_an_overflowing_since_is_a_usage_error(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    open_store(db).close()
    result = invoke("runs", "--since", "99999999999w", "--db", db)
    assert result.exit_code == 2
    assert "'99999999999w' reaches before the year 1" in one_error_line(result)


@pytest.mark.process
def test_show_and_runs_label_a_run_whose_process_died(tmp_path: Path) -> None:
    from sqlalchemy import update

    from runner.store.tables import runs as runs_table
    from tests.loop.helpers import record_unfinished_run

    db = f"sqlite:///{tmp_path / 'runs.db'}"
    with open_store(db) as store:
        record_unfinished_run(store, "d" * 32, "killed task")
        gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True, check=True).stdout.strip()
        host = str(store.get_run("d" * 32).owner).rsplit(":", 1)[0]
        with store.engine.begin() as conn:  # as if written by a process that has exited
            conn.execute(update(runs_table).values(owner=f"{host}:{gone}"))
    shown = invoke("show", "dddd", "--db", db)
    assert shown.exit_code == 0
    assert shown.stdout.splitlines()[0] == f"run {'d' * 32}  running (dead)"
    listed = json.loads(invoke("runs", "--json", "--db", db).stdout)
    assert [(r["status"], r["liveness"]) for r in listed] == [("running", "dead")]


def test_runs_says_how_many_more_match_beyond_the_limit(db: str) -> None:
    result = invoke("runs", "--db", db, "--limit", "2")
    assert [row[0] for row in rows(result.stdout)] == ["4444dddd9", "4444dddd0"]
    assert result.stdout.splitlines()[-1] == "… 3 more match; use --limit 5 to see them"
    done = invoke("runs", "--db", db, "--status", "done", "--limit", "1").stdout
    assert done.splitlines()[-1] == "… 2 more match; use --limit 3 to see them"
    assert "more match" not in invoke("runs", "--db", db, "--limit", "5").stdout
    assert "more match" not in invoke("runs", "--db", db).stdout  # 5 runs, under the default 20
    assert [run["run_id"] for run in json.loads(invoke("runs", "--db", db, "--limit", "2", "--json").stdout)] \
        == [R5, R4]


def test_runs_counts_more_matches_only_up_to_a_bound(db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from runner.cli import show as inspect

    monkeypatch.setattr(inspect, "MORE_COUNTED", 2)
    assert invoke("runs", "--db", db, "--limit", "1").stdout.splitlines()[-1] == \
        "… over 2 more match; narrow the filters or raise --limit"
    assert invoke("runs", "--db", db, "--limit", "3").stdout.splitlines()[-1] == \
        "… 2 more match; use --limit 5 to see them"


def test_count_runs_takes_the_filters_of_list_runs(store_url: str) -> None:
    fill(store_url)
    with open_store(store_url) as store:
        assert store.count_runs() == 5
        assert store.count_runs(status="done") == 3
        assert store.count_runs(tool="get_weather") == 1
        assert store.count_runs(label=("env", "prod")) == 2
        assert store.count_runs(text="21c") == 2
        assert store.count_runs(at_most=3) == 3
        assert store.count_runs(status=["done", "step_limit"], at_most=10) == 4


def test_runs_keeps_the_task_visible_at_80_columns(db: str) -> None:
    result = invoke("runs", "--db", db, env={"COLUMNS": "80"})
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert lines[0].split() == ["id", "started", "status", "steps", "tools", "tokens", "task"]
    table = rows(result.stdout)
    assert [row[0] for row in table] == ["4444dddd9", "4444dddd0", "3333cccc", "2222bbbb", "1111aaaa"]
    assert [row[1] for row in table[1:]] == ["01-01 04:00", "01-01 03:00", "01-01 02:00", "01-01 01:00"]
    assert [row[4] for row in table] == ["1+1", "1", "0", "0", "1"]
    assert [row[-1] for row in table] == ["Long output and a ba…", "Convert 21C, then mo…", "Broken run", "Say HELLO",
                                          "Weather in Paris?"]
    assert lines[-1] == "tools: calls run+refused (refused calls never ran)"
    wide = invoke("runs", "--db", db, env={"COLUMNS": "200"}).stdout.splitlines()
    assert wide[0].split() == ["id", "started", "(UTC)", "status", "steps", "tool", "calls", "tokens", "cost",
                               "duration", "task"]


def test_runs_counts_refused_tool_calls_apart(db: str) -> None:
    by_id = {row[0]: row for row in listed(db)}
    assert by_id["4444dddd9"][4] == "1 (+1 refused)"  # echo_long ran; the unknown get_forecast was refused
    assert by_id["1111aaaa"][4] == "1"
    found = {run["run_id"]: (run["tool_calls"], run["tool_calls_refused"])
             for run in json.loads(invoke("runs", "--db", db, "--json").stdout)}
    assert found == {R1: (1, 0), R2: (0, 0), R3: (0, 0), R4: (1, 0), R5: (1, 1)}
    shown = invoke("show", R5, "--db", db, "--json")
    assert json.loads(shown.stdout)["run"]["tool_calls_refused"] == 1
    header = invoke("show", R5, "--db", db).stdout.splitlines()[1]
    assert header.endswith("; 2 steps, 1 tool call (+1 refused), " + header.rsplit(", ", 1)[1])


def test_an_ambiguous_prefix_lists_every_candidate_when_few(db: str) -> None:
    result = invoke("show", "4444dddd", "--db", db)
    assert result.exit_code == 3
    assert one_error_line(result) == f"Error: run id prefix '4444dddd' is ambiguous: {R4}, {R5}"


def test_an_ambiguous_prefix_names_five_candidates_and_how_many_more(store_url: str) -> None:
    with open_store(store_url) as store:
        for n in range(8):
            run_agent("t", ScriptedModel(["ok"]), ToolRegistry(), run_id=f"abc{n}", store=store)
        with pytest.raises(StoreError) as raised:
            store.find_run("abc")
    assert str(raised.value) == "run id prefix 'abc' is ambiguous: abc0, abc1, abc2, abc3, abc4 and 3 more"


def test_one_of_a_thing_is_singular_in_show_stats_and_export(db: str, tmp_path: Path) -> None:
    shown = invoke("show", R2, "--db", db).stdout.splitlines()
    assert shown[1].endswith("; 1 step, 0 tool calls, " + shown[1].rsplit(", ", 1)[1])
    assert not shown[1].endswith(" 1 tokens")
    stats = invoke("stats", "--db", db, "--since", "2025-01-01T02:00", "--until", "2025-01-01T03:00").stdout
    assert stats.splitlines()[0].startswith("1 run since 2025-01-01T02:00:00+00:00 until ")
    exported = invoke("export", R2, "-o", str(tmp_path / "f.json"), "--db", db).stdout
    assert exported == f"wrote {tmp_path / 'f.json'}: run {R2}, 1 model reply, ended done\n"
    replayed = invoke("replay", str(tmp_path / "f.json"), "--tools", "tests.cli.helpers:registry").stdout
    assert replayed == "ok  replay matched the recording (done, 1 step)\n"
    failed = invoke("show", R3, "--db", db).stdout.splitlines()[-1]
    assert failed == "  ScriptExhausted: scripted model called 1 time but holds only 0 replies"


@pytest.mark.parametrize(("n", "word", "text"), [
    (0, "step", "0 steps"), (1, "step", "1 step"), (2, "step", "2 steps"), (1, "reply", "1 reply"),
    (3, "reply", "3 replies"), (1, "tool call", "1 tool call"), (1, "more char", "1 more char")])
def test_plural(n: int, word: str, text: str) -> None:
    from runner._text import plural

    assert plural(n, word) == text


def test_every_status_has_a_colour() -> None:
    from runner._log.statuses import Status
    from runner.cli.render import ERROR_STYLE, STATUS_STYLES, status_style

    assert set(STATUS_STYLES) == set(Status)
    assert {status: status_style(status) for status in Status} == dict(STATUS_STYLES)
    assert status_style(Status.RUNNING, "dead") == ERROR_STYLE  # its process is gone
    assert status_style(Status.QUEUED) != ERROR_STYLE  # waiting for a worker is no failure


def test_runs_show_and_stats_colour_a_queued_run_alike(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One map: a queued run was bold red in ``runs`` and ``show`` but cyan in ``stats``."""
    import io
    import re

    from rich.console import Console
    from rich.text import Text

    from runner._log.statuses import Status
    from runner.cli.render import STATUS_STYLES
    from runner.pool.queued import record_queued

    db = f"sqlite:///{tmp_path / 'runs.db'}"
    with open_store(db) as store:
        run_id = record_queued(store, "job", "tipper")
    sgr = re.compile(r"\x1b\[([0-9;]*)m(?=queued\x1b\[0m)")

    def colours(output: str) -> list[set[str]]:
        """The foreground colour codes of each "queued" printed (``show``'s title adds bold to its own)."""
        return [{code for code in found.split(";") if code.isdigit() and 30 <= int(code) <= 37}
                for found in sgr.findall(output)]

    file = io.StringIO()
    Console(file=file, force_terminal=True, color_system="standard").print(
        Text("queued", style=STATUS_STYLES[Status.QUEUED]))
    assert colours(file.getvalue()) == [{"36"}]  # cyan
    commands = {"runs": ["runs"], "show": ["show", run_id[:8]], "stats": ["stats"]}
    monkeypatch.delenv("NO_COLOR", raising=False)
    env = {"FORCE_COLOR": "1", "TERM": "xterm", "COLORTERM": ""}
    found = {name: colours(invoke(*args, "--db", db, env=env).stdout) for name, args in commands.items()}
    assert found == {name: [{"36"}] for name in commands}


@pytest.mark.parametrize(("known", "unknown", "shown"), [
    (0.2, 0, "$0.2000"), (2.98, 1, "≥$2.9800"), (0.0, 0, "$0.0000"), (0.0, 2, "-"),
    (0.000018, 0, "$0.000018"), (0.000018, 1, "≥$0.000018"), (0.0000123, 0, "$0.000012"), (0.00005, 0, "$0.0001"),
    (0.0000000042, 0, "$0.0000000042"),
])
def test_money_never_shows_a_cost_as_zero_and_says_when_part_is_unknown(known: float, unknown: int,
                                                                         shown: str) -> None:
    from runner._view.summary import money

    assert money(known, unknown) == shown


def test_runs_and_show_write_a_cheap_run_to_its_significant_digits(tmp_path: Path) -> None:
    from runner import ModelReply, Usage

    db = f"sqlite:///{tmp_path / 'runs.db'}"
    cheap = ScriptedModel([ModelReply("done", [], Usage(100, 10))])
    cheap.model_name = "cheap"
    with open_store(db) as store:  # 100 in + 10 out at $0.10 and $0.80 per million: $0.000018
        run_id = run_agent("t", cheap, ToolRegistry(), store=store,
                           prices={"cheap": {"input_mtok": 0.1, "output_mtok": 0.8}}).run_id
    assert listed(db)[0][6] == "$0.000018"
    shown = invoke("show", run_id, "--db", db).stdout
    assert shown.splitlines()[1].endswith(", $0.000018")
    assert " 100 in + 10 out tokens, $0.000018" in shown
