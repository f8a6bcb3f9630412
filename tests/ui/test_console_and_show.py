"""``runner show`` and the console's run page show the same entries: both render ``_view.timeline``.

For a fork, a follow-up, a resumed run (asked, decided, resumed), a call in doubt and sub-agent trees (the
child under its call; its own entries are the page's only), the CLI's lines and the page's timeline are read
back into (kind, call id or step) pairs, and what each says a run inherited and which calls are in doubt
(with the rule a resume applies) are compared too.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable

import pytest
from starlette.testclient import TestClient

from runner import ScriptedModel, follow_up, fork, resume, run_agent
from runner.store import RunStore, open_store
from runner.ui import create_app
from tests.cli.helpers import invoke, record_dead_inside_pay
from tests.loop.helpers import call, reply, weather_registry
from tests.trees import run_tree
from tests.ui.money import money

Shown = tuple[list[tuple[str, str]], list[tuple[str, str]], list[tuple[str, str]]]  # entries, inherited, doubts

CLI_ENTRY: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"^step (\d+)(?: \(continued\))?  "), "step"),
    (re.compile(r"^  model  "), "model"),
    (re.compile(r"^  tool \S+ \[([^\]]+)\]  "), "tool"),
    (re.compile(r"^  ! \S+ \[([^\]]+)\] started but has no result in the log$"), "tool"),
    (re.compile(r"^  tool \S+ \[([^\]]+)\] waits on its sub-agent's run$"), "tool"),
    (re.compile(r"^    ↳ sub-agent "), "child"),
    (re.compile(r"^  approval needed: \S+ \[([^\]]+)\]$"), "asked"),
    (re.compile(r"^  decision: (\S+) "), "decided"),
    (re.compile(r"^resumed"), "resumed"),
    (re.compile(r"^(?:done$|stopped: )"), "end"),
]
CLI_INHERITED: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"^  user$"), "user"), (re.compile(r"^  model$"), "assistant"),
    (re.compile(r"^  tool \S+ \[([^\]]+)\](?:  swapped)?$"), "tool"),
]


def _match(line: str, patterns: list[tuple[re.Pattern[str], str]]) -> tuple[str, str] | None:
    for pattern, kind in patterns:
        found = pattern.match(line)
        if found:
            return kind, found.group(1) if found.groups() else ""
    return None


def cli_shown(store_url: str, run_id: str) -> Shown:
    """What ``runner show`` prints of ``run_id``: its entries, the messages it inherited, its calls in doubt."""
    result = invoke("show", run_id, "--db", store_url, "--full")
    assert result.exit_code == 0, result.output
    lines = [line.rstrip() for line in result.stdout.splitlines()]
    entries: list[tuple[str, str]] = []
    inherited: list[tuple[str, str]] = []
    doubts: list[tuple[str, str]] = []
    where = "header"
    for line in lines:
        if line.startswith("inherited from run "):
            where = "inherited"
        elif line == "calls left in doubt by a crash":
            where = "doubts"
            continue
        elif re.match(r"^step \d+(?: \(continued\))?  ", line):
            where = "entries"
        if where == "doubts":
            found = re.match(r"^  \S+ \[([^\]]+)\]: (.+)$", line)
            if found is None:
                where = "header"
            else:
                doubts.append((found.group(1), found.group(2)))
        elif where == "inherited" and (kind := _match(line, CLI_INHERITED)):
            inherited.append(kind)
        elif where == "entries" and (kind := _match(line, CLI_ENTRY)):
            entries.append(kind)
    return entries, inherited, doubts


def page_shown(store: RunStore, run_id: str) -> Shown:
    """What the console's run page shows of ``run_id``, read the same way."""
    with TestClient(create_app(store), base_url="http://127.0.0.1") as client:
        page = client.get(f"/runs/{run_id}").text
    timeline = page[page.index('<ol id="timeline"'):]
    # A child's own entries are nested on the page (``runner show`` gives its status): they are left out here.
    timeline = re.sub(r'<ol class="timeline nested">.*?</ol>', "", timeline, flags=re.S)
    entries = [(kind, call_id) for kind, call_id in
               re.findall(r'<li class="entry [^"]*" data-kind="(\w+)"(?: data-(?:call-id|step)="([^"]*)")?', timeline)]
    inherited = re.findall(r'<li class="entry inherited [^"]*" data-role="(\w+)"(?: data-call-id="([^"]*)")?', page)
    doubts = [(call_id, html.unescape(re.sub(r"<[^>]+>", "", text)).split(": ", 1)[1]) for call_id, text in
              re.findall(r'<li data-call-id="([^"]*)">(.*?)</li>', page[page.index('id="in-doubt"'):])] \
        if 'id="in-doubt"' in page else []
    return entries, [(role, call_id) for role, call_id in inherited], doubts


def a_fork(store: RunStore) -> str:
    parent = run_agent("Weather in Paris?", ScriptedModel([
        reply("Looking.", call("c1", "get_weather", city="Paris")), "It is 21C."]), weather_registry(), store=store)
    return fork(store, parent.run_id, at_step=2, model=ScriptedModel(["It is 35C."]), registry=weather_registry(),
                observations={"c1": '{"celsius": 35}'}).run_id


def a_follow_up(store: RunStore) -> str:
    parent = run_agent("Weather in Paris?", ScriptedModel([
        reply("Looking.", call("c1", "get_weather", city="Paris")), "It is 21C."]), weather_registry(), store=store)
    return follow_up(store, parent.run_id, "And in Rome?", ScriptedModel([
        reply("", call("c2", "get_weather", city="Rome")), "It is 25C."]), weather_registry()).run_id


def a_resumed_run(store: RunStore) -> str:
    ran: list[str] = []
    asked = run_agent("Send 5 to bob", ScriptedModel([reply("", call("t1", "transfer", ref="bob"))]), money(ran),
                      store=store)
    assert asked.status == "awaiting_approval"
    done = resume(store, asked.run_id, ScriptedModel(["Sent."]), money(ran), decisions={"t1": True},
                  decided_by="alice")
    assert (done.status, ran) == ("done", ["bob"])
    return done.run_id


def a_waiting_tree(store: RunStore) -> str:
    return run_tree(store, approval=True).parent


def a_finished_tree(store: RunStore) -> str:
    return run_tree(store).parent


def a_call_in_doubt(store: RunStore, store_url: str) -> str:
    record_dead_inside_pay(store_url, "d" * 32, traits=True)
    return "d" * 32


@pytest.mark.process  # the call in doubt: make_dead starts a process for a pid that is gone
@pytest.mark.parametrize("make", [a_fork, a_follow_up, a_resumed_run, a_call_in_doubt, a_waiting_tree,
                                  a_finished_tree])
def test_the_cli_and_the_console_show_the_same_entries(store_url: str, make: Callable[..., str]) -> None:
    with open_store(store_url) as store:
        run_id = make(store, store_url) if make is a_call_in_doubt else make(store)
        on_page = page_shown(store, run_id)
    printed = cli_shown(store_url, run_id)
    assert printed == on_page
    entries, inherited, doubts = printed
    assert entries[:1] == [("step", "2" if make is a_fork else "1")]
    if make in (a_fork, a_follow_up):
        assert ("tool", "c1") in inherited  # only the CLI showed it before
    if make is a_resumed_run:
        assert [kind for kind, _ in entries if kind in ("asked", "decided", "resumed")] == [
            "asked", "decided", "resumed"]
    if make in (a_waiting_tree, a_finished_tree):
        assert entries[2:4] == [("tool", "p1"), ("child", "")]  # the child under its call
        assert doubts == []  # a call waiting on its child was left by no crash
    if make is a_call_in_doubt:
        assert entries[-1] == ("tool", "p1")
        assert doubts == [("p1", "not run again: the model is told it may have run (the tool has side effects)")]
