"""``runner rerun``: the table, ``--json``, ``--html``, progress lines, exit statuses and usage errors; and the
candidates as ordinary runs: listed by their label, linked by ``runner show``, exported and replayed."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from runner import open_store
from runner.events import RunStarted
from tests.cli.helpers import completion, invoke, one_error_line, rows
from tests.rerun import rerun_tools
from tests.rerun.helpers import AFTER, DRIFT, EMAIL, LOOP, TOOLS, WEATHER, TaskServer, recorded, recorded_at, steps


def rerun_cli(url: str, *args: str, server: TaskServer) -> Any:
    return invoke("rerun", *args, "--model", "openai:fake", "--base-url", server.url, "--api-key", "k", "--db", url)


def test_the_table_one_line_per_case_then_the_summary_and_exit_1_for_a_regression(store_url: str) -> None:
    with recorded(store_url) as (store, ids), TaskServer(AFTER) as server:
        result = rerun_cli(store_url, *ids.values(), "--tools", TOOLS, server=server)
        short = store.short_ids(list(ids.values()))
    assert result.exit_code == 1, result.output
    table = [row[:6] for row in rows(result.stdout) if row[0] in short.values()]
    assert table == [[short[ids[WEATHER]], "unchanged", "done", "2", "30", "-"],
                     [short[ids[DRIFT]], "changed", "done", "2", "30", "answer, tool_calls"],
                     [short[ids[LOOP]], "regressed", "done → step_limit", "2 → 3", "30 → 45",
                      "status, answer, tool_calls, steps, tokens"],
                     [short[ids[EMAIL]], "changed", "done", "2", "30", "answer, tool_calls"]]
    summary = [line for line in result.stdout.splitlines() if line.startswith("4 cases")]
    assert summary == ["4 cases: 1 unchanged, 2 changed, 1 regressed (0 unstable); tokens 120 → 135 per sample; "
                       "cost - → - for 4 candidates"]
    assert f"regressed: {short[ids[LOOP]]} ended done, now step_limit (made 3 model calls (max_steps=3))" \
        in result.stdout
    progress = sorted(result.stderr.splitlines())
    assert len(progress) == 4
    assert all(re.fullmatch(r"\[[1-4]/4\] [0-9a-f]{8} (unchanged|changed \(.*\)|regressed \(.*\)): .*", line)
               for line in progress), progress
    assert f"{ids[WEATHER][:8]} unchanged: done" in result.stderr


def test_json_prints_the_report_and_quiet_prints_no_progress(store_url: str) -> None:
    ids = recorded_at(store_url, (WEATHER, DRIFT))
    with TaskServer(AFTER) as server:
        result = rerun_cli(store_url, *ids.values(), "--json", "--quiet", "--samples", "2", server=server)
        assert result.exit_code == 0, result.output
        assert result.stderr == ""
        report = json.loads(result.stdout)
        assert set(report) == {"rerun_id", "model", "provider", "label", "cases", "summary"}
        assert (report["model"], report["provider"], report["label"]) == ("fake", "openai",
                                                                          f"rerun={report['rerun_id']}")
        weather, drift = report["cases"]
        assert set(weather) == {"baseline_run_id", "candidate_run_ids", "task", "verdict", "changed", "regressed",
                                "unstable", "baseline", "candidates"}
        assert (weather["baseline_run_id"], weather["changed"], weather["unstable"], weather["regressed"]) == (
            ids[WEATHER], [], [], False)
        assert len(weather["candidate_run_ids"]) == 2
        assert weather["baseline"]["tool_calls"] == [{"name": "get_weather", "args": {"city": "Paris"}}]
        assert weather["baseline"]["tokens"] == 30
        assert [c["tools"] for c in weather["candidates"]] == [{"served": 1, "live": 0, "not_run": 0}] * 2
        assert drift["changed"] == ["answer", "tool_calls"]
        assert [c["tool_calls_diff"] for c in drift["candidates"]] == [
            ['- c_to_f {"celsius": 21}', '+ c_to_f {"celsius": 22}']] * 2
        assert [c["answer"] for c in drift["candidates"]] == ["22 C is 71.6 F."] * 2
        summary = report["summary"]
        assert {k: summary[k] for k in ("cases", "unchanged", "changed", "regressed", "unstable", "samples",
                                        "interrupted", "left")} == {
            "cases": 2, "unchanged": 1, "changed": 1, "regressed": 0, "unstable": 0, "samples": 2,
            "interrupted": False, "left": []}
        assert summary["baseline"] == {"runs": 2, "tokens": 60, "cost_usd": None, "cost_known_usd": 0.0}
        assert summary["candidates"] == {"runs": 4, "tokens": 120, "cost_usd": None, "cost_known_usd": 0.0}
        listed = json.loads(invoke("runs", "--label", f"rerun={report['rerun_id']}", "--json", "--db",
                                   store_url).stdout)
        assert sorted(run["run_id"] for run in listed) == sorted(
            run_id for case in report["cases"] for run_id in case["candidate_run_ids"])


def test_html_writes_one_self_contained_page_with_every_text_escaped(store_url: str, tmp_path: Path) -> None:
    hostile = "<script>alert(1)</script> & \"quotes\""
    scripts = {WEATHER: steps(completion("", [("w1", "get_weather", {"city": "Paris"})]), completion(hostile))}
    page = tmp_path / "report.html"
    ids = recorded_at(store_url, (WEATHER,))
    with TaskServer(scripts) as server:
        result = rerun_cli(store_url, ids[WEATHER], "--html", str(page), server=server)
    assert result.exit_code == 0, result.output
    assert f"report: {page}" in result.stdout
    html = page.read_text(encoding="utf-8")
    assert html.startswith("<!doctype html>")
    assert "<script" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;quotes&quot;" in html
    assert re.findall(r"(?:src|href)=", html) == []
    assert "default-src 'none'" in html
    assert f'<section class="changed" id="case-{ids[WEATHER]}">' in html
    assert "<p>changed: answer</p>" in html
    assert '<td class="differs"><pre>&lt;script&gt;' in html


def test_candidates_show_their_baseline_and_export_and_replay(store_url: str, tmp_path: Path) -> None:
    ids = recorded_at(store_url, (WEATHER,))
    with TaskServer(AFTER) as server:
        report = json.loads(rerun_cli(store_url, ids[WEATHER], "--json", "-q", server=server).stdout)
    [candidate] = report["cases"][0]["candidate_run_ids"]
    shown = invoke("show", candidate, "--db", store_url).stdout
    assert f"rerun candidate of baseline run {ids[WEATHER]}" in shown
    assert f"labels rerun={report['rerun_id']}" in shown
    assert "inherited from" not in shown
    baseline = invoke("show", ids[WEATHER], "--db", store_url).stdout
    assert f"child run {candidate} (rerun candidate, done)" in baseline
    as_json = json.loads(invoke("show", candidate, "--json", "--db", store_url).stdout)
    assert (as_json["run"]["parent_run_id"], as_json["inherited"]) == (ids[WEATHER], None)
    fixture = tmp_path / "candidate.json"
    exported = invoke("export", candidate, "-o", str(fixture), "--db", store_url)
    assert exported.exit_code == 0, exported.output
    replayed = invoke("replay", str(fixture), "--tools", TOOLS)
    assert (replayed.exit_code, replayed.stdout) == (0, "ok  replay matched the recording (done, 2 steps)\n")
    assert rerun_tools.RAN == [("get_weather", {"city": "Paris"})]  # the replay ran the tool; the rerun did not


def test_filters_select_ended_runs_and_leave_out_earlier_candidates(store_url: str) -> None:
    ids = recorded_at(store_url, (WEATHER, DRIFT))
    with TaskServer(AFTER) as server:
        first = json.loads(rerun_cli(store_url, "--label", "suite=rerun", "--json", "-q", server=server).stdout)
        assert sorted(case["baseline_run_id"] for case in first["cases"]) == sorted(ids.values())
        again = rerun_cli(store_url, "--status", "done", "--json", server=server)
        assert again.exit_code == 0, again.output
        assert sorted(case["baseline_run_id"] for case in json.loads(again.stdout)["cases"]) == sorted(ids.values())
        assert "note: left out 2 candidates of an earlier rerun (select them with --label rerun=ID)\n" \
            in again.stderr
        theirs = rerun_cli(store_url, "--label", f"rerun={first['rerun_id']}", "--json", "-q", server=server)
        assert sorted(case["baseline_run_id"] for case in json.loads(theirs.stdout)["cases"]) == sorted(
            run_id for case in first["cases"] for run_id in case["candidate_run_ids"])
        none = rerun_cli(store_url, "--status", "step_limit", server=server)
        assert (none.exit_code, one_error_line(none)) == (
            2, "Error: no baselines: nothing to rerun (give runs that have ended)")


def test_usage_mistakes_exit_2_in_one_line_before_any_model_call(store_url: str) -> None:
    ids = recorded_at(store_url, (WEATHER,))
    with TaskServer(AFTER) as server:
        base = ids[WEATHER]
        cases = {
            (): "Error: name the baselines: RUN ids, or filters such as --status done --since 1d",
            (base, "--status", "done"): "Error: give RUN ids or filters (--status, --since, --label, --tool), not both",
            (base, "--max-cost-usd", "1"): "Error: no price for model 'fake' (openai), so --max-cost-usd 1 cannot be "
                                           "counted: give its price with --prices FILE ([fake] input_mtok = ..., "
                                           "output_mtok = ..., USD per million tokens)",
            (base, "--samples", "0"): "Error: Invalid value for '--samples': 0 is not in the range x>=1. "
                                      "(see 'runner rerun --help')",
            (base, "--samples", "1001"): "Error: Invalid value for '--samples': 1001 is more than 1000, the most "
                                         "samples a rerun takes (see 'runner rerun --help')",
        }
        for args, error in cases.items():
            result = rerun_cli(store_url, *args, server=server)
            assert (result.exit_code, one_error_line(result)) == (2, error)
        scripted = invoke("rerun", base, "--model", "scripted", "--db", store_url)
        assert (scripted.exit_code, one_error_line(scripted)) == (
            2, "Error: a scripted model cannot answer a rerun: use --model with openai:NAME (any OpenAI-compatible "
               "server) or anthropic:NAME")
        missing = rerun_cli(store_url, "ffffffff", server=server)
        assert missing.exit_code == 3
        assert server.requests == []
    with open_store(store_url) as store:
        assert [run.run_id for run in store.list_runs()] == [base]  # no candidate was started


def test_runs_not_ended_are_skipped_with_a_note_and_none_left_is_a_usage_error(store_url: str) -> None:
    ids = recorded_at(store_url, (WEATHER,))
    with open_store(store_url) as store:
        recorder = store.recorder()
        recorder.record(RunStarted(run_id="r" * 32, task="t", system="s", limits={}, tool_specs=[], model="m"))
        recorder.sync()
    with TaskServer(AFTER) as server:
        one = rerun_cli(store_url, ids[WEATHER], "r" * 10, "--json", "-q", server=server)
        assert one.exit_code == 0, one.output
        assert one.stderr == (f"note: skipped 1 run not ended (running): a rerun compares with runs that have "
                              f"ended: {'r' * 8}\n")
        assert [case["baseline_run_id"] for case in json.loads(one.stdout)["cases"]] == [ids[WEATHER]]
        none = rerun_cli(store_url, "r" * 10, server=server)
        assert none.exit_code == 2
        assert none.stderr.splitlines() == [
            f"note: skipped 1 run not ended (running): a rerun compares with runs that have ended: {'r' * 8}",
            "Error: no baselines: nothing to rerun (give runs that have ended)"]
        filtered = rerun_cli(store_url, "--since", "1d", "--json", "-q", server=server)
        assert filtered.exit_code == 0, filtered.output
        assert filtered.stderr.startswith("note: skipped 1 run not ended (running)")
