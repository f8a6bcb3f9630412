"""Cost from the command line, through the real OpenAI adapter against a local fake server reporting usage.

gpt-4o-mini is priced by genai-prices at $0.15 per million prompt tokens and $0.60 per million
completion tokens, so the token counts below cost round amounts: 1M in + 200k out is $0.27.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import genai_prices
import pytest
from click.testing import Result

from runner.cli import one_line_errors
from runner.cli.options import CliUsageError
from runner.errors import PriceUnknown
from runner.events import ModelCalled
from runner.store import open_store
from tests.cli import resume_tools
from tests.cli.helpers import RESUME_TOOLS, FakeOpenAI, at, completion, invoke, one_error_line, rows, run_id_in

MODEL = "openai:gpt-4o-mini"
BIG = "10000000"  # a token budget the reported millions of tokens stay under
FIRST = completion("", [("l1", "lookup", {"ref": "a"})], usage=(1_000_000, 200_000))  # $0.15 + $0.12 = $0.27
SECOND = completion("", [("l2", "lookup", {"ref": "b"})], usage=(1_000_000, 100_000))  # $0.15 + $0.06 = $0.21
LAST = completion("found both", usage=(1_000_000, 0))  # $0.15


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


def run(url: str, *bodies: dict[str, Any], args: tuple[str, ...] = ()) -> tuple[Result, FakeOpenAI]:
    with FakeOpenAI(*bodies) as server:
        result = invoke("run", "Look up a and b", "--tools", RESUME_TOOLS, "--model", MODEL, *at(server),
                        "--token-budget", BIG, "--db", url, *args)
    return result, server


def calls(url: str, run_id: str) -> list[ModelCalled]:
    with open_store(url) as store:
        return [fact for fact in store.get_run(run_id).facts if isinstance(fact, ModelCalled)]


def costs(url: str, run_id: str) -> list[float | None]:
    return [call.cost_usd for call in calls(url, run_id)]


def sources(url: str, run_id: str) -> set[str | None]:
    return {call.price_source for call in calls(url, run_id)}


def listed(url: str) -> dict[str, dict[str, Any]]:
    found = invoke("runs", "--db", url, "--json")
    assert found.exit_code == 0, found.output
    return {run["run_id"]: run for run in json.loads(found.stdout)}


def test_a_budget_stops_the_run_cost_limit_at_the_call_that_crossed_it_and_a_resume_goes_on(store_url: str) -> None:
    result, server = run(store_url, FIRST, SECOND, args=("--max-cost-usd", "0.4"))
    assert result.exit_code == 1, result.output
    assert len(server.requests) == 2
    run_id = run_id_in(result)
    assert result.stdout.startswith("stopped: cost_limit: cost $0.4800 reached max_cost_usd=$0.4; the reply's calls "
                                    "were not run\n")
    assert "status cost_limit, 2 steps, 1 tool call, 2300000 tokens, $0.4800\n" in result.stdout
    assert resume_tools.RAN == ["lookup a"]  # the reply that crossed the budget asked for b: not run
    assert costs(store_url, run_id) == [pytest.approx(0.27), pytest.approx(0.21)]
    assert sources(store_url, run_id) == {f"genai-prices {genai_prices.__version__} openai:gpt-4o-mini"}

    filtered = json.loads(invoke("runs", "--status", "cost_limit", "--db", store_url, "--json").stdout)
    assert [found["run_id"] for found in filtered] == [run_id]
    summary = listed(store_url)[run_id]
    assert (summary["status"], summary["costs_unknown"]) == ("cost_limit", 0)
    assert summary["cost_usd"] == pytest.approx(0.48)
    assert summary["cost_known_usd"] == pytest.approx(0.48)
    shown = json.loads(invoke("show", run_id, "--db", store_url, "--json").stdout)
    assert shown["run"]["cost_usd"] == pytest.approx(0.48)
    assert [e["data"].get("cost_usd") for e in shown["events"] if e["kind"] == "model_call"] == [
        pytest.approx(0.27), pytest.approx(0.21)]

    with FakeOpenAI(LAST) as server:
        more = invoke("resume", run_id[:8], "--tools", RESUME_TOOLS, *at(server), "--max-cost-usd", "100",
                      "--db", store_url)
    assert more.exit_code == 0, more.output
    assert more.stdout.startswith("found both\n")
    assert "status done, 3 steps, 2 tool calls, 3300000 tokens, $0.6300\n" in more.stdout
    assert resume_tools.RAN == ["lookup a", "lookup b"]
    assert listed(store_url)[run_id]["cost_usd"] == pytest.approx(0.63)
    shown = invoke("show", run_id, "--db", store_url).stdout
    assert "\nstopped: cost_limit\n" in shown
    assert "\nresumed after cost_limit\n" in shown


def test_runs_and_show_print_the_cost(store_url: str) -> None:
    result, _ = run(store_url, FIRST, LAST)
    run_id = run_id_in(result)
    (row,) = rows(invoke("runs", "--db", store_url).stdout)
    assert row[3:7] == ["2", "1", "2200000", "$0.4200"]
    shown = [line.rstrip() for line in invoke("show", run_id, "--db", store_url).stdout.splitlines()]
    assert shown[1].endswith("; 2 steps, 1 tool call, 2200000 tokens, $0.4200")
    model_lines = [line for line in shown if line.startswith("  model  ")]
    assert [line.rsplit(", ", 1)[1] for line in model_lines] == ["$0.2700", "$0.1500"]
    assert model_lines[0].endswith(" 1000000 in + 200000 out tokens, $0.2700")


def test_a_budget_for_a_model_with_no_price_is_a_usage_error_and_nothing_runs(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    with FakeOpenAI(FIRST) as server:
        result = invoke("run", "t", "--tools", RESUME_TOOLS, "--model", "openai:no-such-model-x1", *at(server),
                        "--max-cost-usd", "1", "--db", url)
    assert result.exit_code == 2
    assert one_error_line(result) == (
        "Error: no price for model 'no-such-model-x1' (openai), so --max-cost-usd 1 cannot be counted: give its "
        "price with --prices FILE ([no-such-model-x1] input_mtok = ..., output_mtok = ..., USD per million tokens)")
    assert "price" in result.stderr
    assert (server.requests, (tmp_path / "runs.db").exists()) == ([], False)
    demo = invoke("demo", "--max-cost-usd", "0.5", "--db", url)  # the bundled scripted model has no price
    assert demo.exit_code == 2
    assert one_error_line(demo).startswith("Error: no price for model 'scripted' (scripted), so --max-cost-usd 0.5 ")


def test_a_resume_with_another_model_keeps_the_recorded_budget_and_needs_its_price(store_url: str) -> None:
    result, _ = run(store_url, FIRST, SECOND, args=("--max-cost-usd", "0.4"))
    run_id = run_id_in(result)
    with open_store(store_url) as store:
        before = len(store.get_run(run_id).events)
    with FakeOpenAI(LAST) as server:
        refused = invoke("resume", run_id, "--tools", RESUME_TOOLS, "--model", "openai:no-such-model-x1", *at(server),
                         "--db", store_url)
    assert refused.exit_code == 2
    assert one_error_line(refused).startswith("Error: no price for model 'no-such-model-x1' (openai), so the run's "
                                              "max_cost_usd=0.4 cannot be counted")
    with open_store(store_url) as store:
        stored = store.get_run(run_id)
        assert (stored.status, len(stored.events)) == ("cost_limit", before)


def test_the_library_refusal_is_a_usage_error_too() -> None:
    with pytest.raises(CliUsageError, match=r"^no price for model 'm'$") as raised, one_line_errors():
        raise PriceUnknown("no price for model 'm'")
    assert raised.value.exit_code == 2


def test_without_a_budget_the_cost_is_recorded_and_a_new_price_changes_only_new_runs(store_url: str,
                                                                                      tmp_path: Path) -> None:
    old, _ = run(store_url, LAST)
    assert old.exit_code == 0, old.output
    old_id = run_id_in(old)
    assert listed(store_url)[old_id]["cost_usd"] == pytest.approx(0.15)
    prices = tmp_path / "prices.toml"
    prices.write_text("[gpt-4o-mini]\ninput_mtok = 1.0\noutput_mtok = 2.0\n", encoding="utf-8")
    new, _ = run(store_url, completion("again", usage=(1_000_000, 100_000)), args=("--prices", str(prices)))
    assert new.exit_code == 0, new.output
    new_id = run_id_in(new)
    found = listed(store_url)
    assert found[old_id]["cost_usd"] == pytest.approx(0.15)  # recorded when it ran: the new price changes nothing
    assert found[new_id]["cost_usd"] == pytest.approx(1.0 + 0.2)
    assert costs(store_url, new_id) == [pytest.approx(1.2)]
    assert sources(store_url, new_id) == {"given"}
    assert costs(store_url, old_id) == [pytest.approx(0.15)]


def test_fork_takes_a_budget_and_prices(store_url: str, tmp_path: Path) -> None:
    parent, _ = run(store_url, FIRST, SECOND, args=("--max-cost-usd", "0.4"))
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"gpt-4o-mini": {"input_mtok": 0.1, "output_mtok": 0.1}}), encoding="utf-8")
    with FakeOpenAI(SECOND) as server:
        forked = invoke("fork", run_id_in(parent), "--at", "2", "--tools", RESUME_TOOLS, *at(server),
                        "--prices", str(prices), "--max-cost-usd", "0.1", "--db", store_url, "--json")
    assert forked.exit_code == 1, forked.output
    found = json.loads(forked.stdout)
    assert (found["status"], found["steps"]) == ("cost_limit", 2)  # its step 2: 1.1M tokens at $0.1 per million
    assert found["cost_usd"] == pytest.approx(0.11)
    assert costs(store_url, found["run_id"]) == [pytest.approx(0.11)]
    assert sources(store_url, found["run_id"]) == {"given"}


@pytest.mark.parametrize(("args", "message"), [
    (("--max-cost-usd", "0"), "Error: Invalid value for '--max-cost-usd': 0.0 is not in the range x>0."),
    (("--max-cost-usd", "nan"), "Error: Invalid value for '--max-cost-usd': nan is not an amount of USD"),
    (("--max-cost-usd", "inf"), "Error: Invalid value for '--max-cost-usd': inf is not an amount of USD"),
    (("--prices", "{missing}"), "Error: Invalid value for '--prices': cannot read prices from {missing}: "),
    (("--prices", "{bad}"), "Error: Invalid value for '--prices': prices file {bad} is not valid TOML: "),
    (("--prices", "{negative}"), "Error: Invalid value for '--prices': price of 'gpt-4o-mini': price input_mtok must "
                                 "be a non-negative number of USD, got -1"),
    (("--prices", "/dev/zero"), "Error: Invalid value for '--prices': prices file /dev/zero is not a regular file"),
    (("--prices", "{fifo}"), "Error: Invalid value for '--prices': prices file {fifo} is not a regular file"),
    (("--prices", "{folder}"), "Error: Invalid value for '--prices': prices file {folder} is not a regular file"),
    (("--prices", "{huge}"), "Error: Invalid value for '--prices': prices file {huge} is over 1 MB"),
], ids=["zero", "nan", "inf", "missing-file", "not-toml", "negative-price", "dev-zero", "fifo", "folder", "huge"])
def test_a_bad_budget_or_prices_file_is_one_usage_error_line(tmp_path: Path, args: tuple[str, str],
                                                             message: str) -> None:
    files = {"missing": tmp_path / "missing.toml", "bad": tmp_path / "bad.toml", "negative": tmp_path / "neg.toml"}
    files["bad"].write_text("[gpt-4o-mini\n", encoding="utf-8")
    files["negative"].write_text("[gpt-4o-mini]\ninput_mtok = -1\noutput_mtok = 1\n", encoding="utf-8")
    files.update(fifo=tmp_path / "prices.fifo", folder=tmp_path / "folder", huge=tmp_path / "huge.toml")
    os.mkfifo(files["fifo"])  # read, it would block for ever; /dev/zero would read for ever
    files["folder"].mkdir()
    files["huge"].write_text("# " + "x" * 1_000_000 + "\n", encoding="utf-8")
    named = {name: str(path) for name, path in files.items()}
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    for command in (["run", "t", "--tools", RESUME_TOOLS, "--model", MODEL], ["demo"], ["resume", "abc"],
                    ["fork", "abc", "--at", "1", "--tools", RESUME_TOOLS]):
        result = invoke(*command, args[0], args[1].format(**named), "--db", url)
        assert result.exit_code == 2, (command, result.output)
        assert one_error_line(result).startswith(message.format(**named)), command
    assert not (tmp_path / "runs.db").exists()


def test_stats_gives_the_cost_per_model_and_per_tool_and_says_when_some_is_unknown(store_url: str) -> None:
    stopped, _ = run(store_url, FIRST, SECOND, args=("--max-cost-usd", "0.4"))
    with FakeOpenAI(LAST) as server:  # resumed with another model: its call is gpt-4o's, $2.50 per million in
        resumed = invoke("resume", run_id_in(stopped), "--tools", RESUME_TOOLS, "--model", "openai:gpt-4o",
                         *at(server), "--max-cost-usd", "100", "--db", store_url)
    assert resumed.exit_code == 0, resumed.output
    with FakeOpenAI(completion("", [("l1", "lookup", {"ref": "c"})]), completion("ok")) as server:
        unpriced = invoke("run", "Look up c", "--tools", RESUME_TOOLS, "--model", "openai:no-such-model-x1",
                          *at(server), "--db", store_url)
    assert unpriced.exit_code == 0, unpriced.output
    found = json.loads(invoke("stats", "--db", store_url, "--json").stdout)
    assert found["cost"] == {"cost_usd": None, "cost_known_usd": pytest.approx(0.48 + 2.5), "costs_unknown": 2}
    assert found["models"] == {
        "openai:gpt-4o": {"calls": 1, "cost_usd": pytest.approx(2.5), "cost_known_usd": pytest.approx(2.5),
                          "costs_unknown": 0},
        "openai:gpt-4o-mini": {"calls": 2, "cost_usd": pytest.approx(0.48), "cost_known_usd": pytest.approx(0.48),
                               "costs_unknown": 0},
        "openai:no-such-model-x1": {"calls": 2, "cost_usd": None, "cost_known_usd": 0.0, "costs_unknown": 2}}
    # lookup was asked for in steps 1 and 2 of the priced run ($0.27 + $0.21) and step 1 of the unpriced one
    assert found["tools"]["lookup"]["step_cost"] == {"steps": 3, "cost_usd": None,
                                                     "cost_known_usd": pytest.approx(0.48), "costs_unknown": 1}
    text = invoke("stats", "--db", store_url).stdout
    assert text.splitlines()[0].endswith("; 3 tool calls; cost ≥$2.9800")
    models, tools = text.split("\nmodel ", 1)[1].split("\ntool ", 1)
    assert rows(models) == [["openai:gpt-4o", "1", "$2.5000"], ["openai:gpt-4o-mini", "2", "$0.4800"],
                            ["openai:no-such-model-x1", "2", "-"]]
    assert tools.split()[:7] == ["calls", "errors", "error", "rate", "median", "p95", "step"]
    (lookup,) = rows(tools)
    assert (lookup[0], lookup[1], lookup[-1]) == ("lookup", "3", "≥$0.4800")


def suggested_resume(result: Result) -> list[str]:
    """The ``runner resume`` command under "next, try:", as its words (less ``runner``)."""
    after = result.stdout.split("next, try:\n", 1)[1]
    command = after.splitlines()[0].strip()
    assert command.startswith("runner resume "), result.stdout
    return shlex.split(command)[1:]


def test_the_resume_suggested_after_a_step_limit_goes_on(store_url: str) -> None:
    stopped, _ = run(store_url, FIRST, args=("--max-steps", "1"))
    assert stopped.exit_code == 1, stopped.output
    command = suggested_resume(stopped)
    assert command[-4:] == ["--max-steps", "2", "--db", store_url]  # it said resume with the recorded 1: stopped again
    with FakeOpenAI(LAST) as server:
        resumed = invoke(*command, *at(server), "--json")
    assert json.loads(resumed.stdout)["status"] == "done", resumed.output


def test_the_resume_suggested_after_a_tool_budget_goes_on(store_url: str) -> None:
    """One rule (``going_on``) for every limit a resume option raises: this one as large again as the calls run."""
    stopped, _ = run(store_url, FIRST, SECOND, args=("--max-tool-calls", "1"))
    assert "stopped: tool_budget" in stopped.stdout, stopped.output
    command = suggested_resume(stopped)
    assert command[-4:] == ["--max-tool-calls", "2", "--db", store_url]
    with FakeOpenAI(LAST) as server:
        resumed = invoke(*command, *at(server), "--json")
    assert json.loads(resumed.stdout)["status"] == "done", resumed.output


def test_the_resume_suggested_after_a_cost_limit_goes_on_with_the_prices_file(store_url: str, tmp_path: Path) -> None:
    prices = tmp_path / "my prices.toml"
    prices.write_text("[gpt-4o-mini]\ninput_mtok = 1.0\noutput_mtok = 1.0\n", encoding="utf-8")
    stopped, _ = run(store_url, FIRST, args=("--max-cost-usd", "0.4", "--prices", str(prices)))  # $1.20 at once
    assert "stopped: cost_limit" in stopped.stdout, stopped.output
    command = suggested_resume(stopped)
    assert command[-6:] == ["--max-cost-usd", "1.6", "--prices", str(prices), "--db", store_url]
    with FakeOpenAI(completion("found a", usage=(1_000, 0))) as server:
        resumed = invoke(*command, *at(server), "--json")
    found = json.loads(resumed.stdout)
    assert (found["status"], found["cost_usd"]) == ("done", pytest.approx(1.201)), resumed.output


def test_a_reply_with_no_usage_under_a_budget_stops_cost_limit_exit_1_and_the_suggested_resume_goes_on(
        store_url: str) -> None:
    no_usage = completion("", [("l1", "lookup", {"ref": "a"})])
    del no_usage["usage"]
    stopped, server = run(store_url, no_usage, LAST, args=("--max-cost-usd", "0.4"))
    assert stopped.exit_code == 1, stopped.output
    assert stopped.stdout.startswith("stopped: cost_limit: the reply's cost is unknown (the provider reported no "
                                     "token usage), so max_cost_usd=$0.4 cannot be counted; the reply's calls were "
                                     "not run\n")
    assert (len(server.requests), resume_tools.RAN) == (1, [])
    run_id = run_id_in(stopped)
    assert costs(store_url, run_id) == [None]
    command = suggested_resume(stopped)
    assert command[-4:] == ["--max-cost-usd", "0.8", "--db", store_url]  # no --prices: a price costs no missing usage
    with FakeOpenAI(LAST) as server:
        resumed = invoke(*command, *at(server), "--json")
    found = json.loads(resumed.stdout)
    assert (found["status"], found["cost_usd"], found["cost_known_usd"]) == ("done", None, pytest.approx(0.15))
    assert resume_tools.RAN == ["lookup a"]  # the reply that stopped it was paid for: its call ran on resume


def test_without_a_budget_a_reply_with_no_usage_is_done_at_a_cost_of_at_least(store_url: str) -> None:
    no_usage = completion("", [("l1", "lookup", {"ref": "a"})])
    del no_usage["usage"]
    result, _ = run(store_url, no_usage, LAST)
    assert result.exit_code == 0, result.output
    summary = listed(store_url)[run_id_in(result)]
    assert (summary["status"], summary["cost_usd"], summary["costs_unknown"]) == ("done", None, 1)


def test_usage_sent_as_nan_stops_the_run_invalid_reply_exit_1_instead_of_done(store_url: str) -> None:
    nan = completion("", [("l1", "lookup", {"ref": "a"})], usage=(1_000, 10))
    nan["usage"]["prompt_tokens"] = float("nan")  # the fake server's json.dumps sends it as NaN
    stopped, server = run(store_url, nan, LAST, args=("--max-cost-usd", "0.4"))
    assert stopped.exit_code == 1, stopped.output
    assert stopped.stdout.startswith("stopped: invalid_reply: reply usage must be Usage(input_tokens, output_tokens) "
                                     "of non-negative ints, got Usage(input_tokens=nan, output_tokens=10)\n")
    assert (len(server.requests), resume_tools.RAN) == (1, [])
