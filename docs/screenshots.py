"""Take the console's screenshots for the docs: docs/img/console-runs.png, console-run.png, console-approvals.png,
console-run-tree.png, console-waterfall.png, console-rerun.png, console-stats.png.

Run it from the checkout, after `make`: `.venv/bin/python docs/screenshots.py [NAME ...]` (only those
pictures, e.g. `console-stats`). It records five runs in a temporary SQLite store (the demo, a refund
awaiting approval, a search stopped at its step limit, a trip plan whose sub-agent's child run waits for
approval, a booking whose searches run together and whose payment waited for approval) and a rerun of
three weather questions on a new model, and a week of runs in another for the stats page
(``tests/ui/stats_runs.py``), starts the installed `runner ui` on each and has the system Chromium take
each page, as the browser tests do (`RUNNER_TEST_CHROMIUM` names another Chromium).
"""

from __future__ import annotations

import itertools
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the tests' helpers and tools, and this checkout's runner

from playwright.sync_api import Browser, ViewportSize, sync_playwright  # noqa: E402

from runner import (  # noqa: E402
    ModelReply,
    RunStore,
    ScriptedModel,
    ToolCall,
    ToolRegistry,
    open_store,
    rerun,
    resume,
    run_agent,
)
from tests import trees  # noqa: E402
from tests.cli.helpers import installed_runner  # noqa: E402
from tests.ui import console_tools  # noqa: E402
from tests.ui.helpers import CHROMIUM_ARGS, chromium_path, start_console  # noqa: E402
from tests.ui.stats_runs import DAYS, fill_stats  # noqa: E402

OUT = ROOT / "docs" / "img"
VIEWPORT: ViewportSize = {"width": 1280, "height": 800}
WAITED_S = 3.0  # how long the booking's payment waits for its approval


def taking(seconds: float, answer: Any) -> Any:
    """A tool that takes ``seconds`` and answers ``answer``."""
    def tool(**args: Any) -> Any:
        time.sleep(seconds)
        return answer
    return tool


def booking(store: RunStore) -> str:
    """A booking run, its id: three searches run together, a sub-agent's reviews, a payment approved later.

    The payment waits ``WAITED_S`` for its approval: the waterfall draws that wait narrow, and marks the resume.
    """
    where = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    tools = ToolRegistry()
    tools.register("search_flights", "Find flights.", where, taking(0.6, "TP 1351, EUR 89"))
    tools.register("search_hotels", "Find hotels.", where, taking(0.45, "Alfama Suites, EUR 140/night"))
    tools.register("get_weather", "The forecast.", where, taking(0.2, "sunny, 24C"))
    tools.register("pay", "Pay for the booking.", where, taking(0.3, "paid"), side_effects=True, needs_approval=True)
    reading = ToolRegistry()
    reading.register("read_reviews", "Read a hotel's reviews.", where, taking(0.35, "4.6/5 from 812 reviews"))
    reviews = ScriptedModel([ModelReply("", [ToolCall("r1", "read_reviews", {"city": "Alfama Suites"})]),
                             "Guests love the terrace; some find the street noisy."])
    tools.add_agent("reviewer", model=reviews, registry=reading, description="Reads and sums up hotel reviews.")
    search = ModelReply("Searching.", [ToolCall("c1", "search_flights", {"city": "Lisbon"}),
                                       ToolCall("c2", "search_hotels", {"city": "Lisbon"}),
                                       ToolCall("c3", "get_weather", {"city": "Lisbon"})])
    review = ModelReply("", [ToolCall("c4", "reviewer", {"task": "Sum up the reviews of Alfama Suites"})])
    pay = ModelReply("Booking it.", [ToolCall("c5", "pay", {"city": "Lisbon"})])
    waiting = run_agent("Book a weekend in Lisbon for two", ScriptedModel([search, review, pay]), tools, store=store,
                        labels={"env": "prod"})
    time.sleep(WAITED_S)
    resume(store, waiting.run_id, ScriptedModel(["Booked: TP 1351 and two nights at Alfama Suites."]), tools,
           decisions={"c5": True}, decided_by="alice")
    return waiting.run_id


def weather_tools() -> ToolRegistry:
    """``get_weather`` and ``c_to_f``, the rerun's tools."""
    tools = ToolRegistry()
    temperatures = {"Paris": 21, "Oslo": 4}

    @tools.tool
    def get_weather(city: str) -> dict[str, object]:
        """The temperature in a city, in Celsius."""
        return {"city": city, "celsius": temperatures.get(city, 10)}

    @tools.tool
    def c_to_f(celsius: float) -> float:
        """Celsius to Fahrenheit."""
        return round(celsius * 9 / 5 + 32, 1)

    return tools


def reran(store: RunStore) -> str:
    """Three weather questions answered, then rerun on a new model: one unchanged, one changed, one regressed.

    The new model is scripted too (named so), one case at a time; its rerun id.
    """
    ids = itertools.count(1)

    def call(name: str, **args: object) -> ModelReply:
        return ModelReply("", [ToolCall(f"c{next(ids)}", name, args)])

    asked = [("What is the weather in Paris?", [call("get_weather", city="Paris"), "It is 21 C in Paris."]),
             ("Convert 21 C to Fahrenheit.", [call("c_to_f", celsius=21), "21 C is 69.8 F."]),
             ("Weather in Oslo, then stop.", [call("get_weather", city="Oslo"), "It is 4 C in Oslo."])]
    baselines = [run_agent(task, ScriptedModel(replies), weather_tools(), store=store, max_steps=3,
                           labels={"suite": "weather"}).run_id for task, replies in asked]
    candidate = ScriptedModel([call("get_weather", city="Paris"), "It is 21 C in Paris.",
                               call("c_to_f", celsius=22), "22 C is 71.6 F.",
                               *(call("get_weather", city=f"Oslo {n}") for n in (1, 2, 3))])
    candidate.model_name = "new-model"
    return rerun(store, baselines, candidate, registry=weather_tools(), concurrency=1).rerun_id


def record(db: str) -> tuple[str, str, str, str]:
    """Fill the store with the runs; the demo's run id, the tree's parent's, the booking's and the rerun's id."""
    subprocess.run([installed_runner(), "demo", "--quiet", "--db", db], check=True, capture_output=True)
    with open_store(db) as store:
        demo = store.list_runs(limit=1)[0].run_id
        tools = console_tools.tools()
        refund = ModelReply("I will transfer the refund.",
                            [ToolCall("t1", "transfer", {"ref": "order-1042 EUR 59.90"})])
        run_agent("Refund order 1042 (EUR 59.90) to the customer", ScriptedModel([refund]), tools, store=store,
                  labels={"env": "prod", "team": "support"})
        search = ModelReply("", [ToolCall("c1", "lookup", {"ref": "flights to Lisbon, Saturday"})])
        run_agent("Find the cheapest flight to Lisbon this weekend", ScriptedModel([search]), tools, store=store,
                  max_steps=1, labels={"env": "dev"})
        tree = trees.run_tree(store, approval=True, task="Plan a weekend in Lisbon for two and send the plan",
                              child_task="Find three well-reviewed restaurants near Alfama and send the list")
        booked = booking(store)
        rerun_id = reran(store)
    return demo, tree.parent, booked, rerun_id


def wanted(name: str) -> bool:
    """Whether to take the picture ``name`` (``console-stats.png``): all of them unless some are named."""
    asked = sys.argv[1:]
    return not asked or name.removesuffix(".png") in {n.removesuffix(".png") for n in asked}


def pages(browser: Browser, tmp: str) -> None:
    """The runs, a run, the approvals, a run with a sub-agent, a run's waterfall and a rerun's report."""
    names = ("console-runs.png", "console-run.png", "console-approvals.png", "console-run-tree.png",
             "console-waterfall.png", "console-rerun.png")
    if not any(wanted(name) for name in names):
        return
    db = f"sqlite:///{tmp}/runs.db"
    demo, tree, booked, rerun_id = record(db)
    console = start_console(db, ran=Path(tmp) / "ran.txt", logs=Path(tmp))
    try:
        page = browser.new_page(viewport=VIEWPORT)
        for path, name in (("/", names[0]), (f"/runs/{demo}", names[1]), ("/approvals", names[2]),
                           (f"/runs/{tree}", names[3]), (f"/reruns/{rerun_id}", names[5])):
            if wanted(name):
                page.goto(console.at(path))
                page.screenshot(path=str(OUT / name), full_page=True)
                print(f"wrote {(OUT / name).relative_to(ROOT)}")
        if wanted(names[4]):
            page.goto(console.at(f"/runs/{booked}"))
            page.locator("#waterfall").screenshot(path=str(OUT / names[4]))
            print(f"wrote {(OUT / names[4]).relative_to(ROOT)}")
    finally:
        console.stop()


def stats(browser: Browser, tmp: str) -> None:
    """The stats page over a week of runs ending today, whose tools take a little while."""
    name = "console-stats.png"
    if not wanted(name):
        return
    db = f"sqlite:///{tmp}/stats.db"
    today = datetime.now(UTC).replace(hour=9, minute=0, second=0, microsecond=0)
    fill_stats(db, start=today - timedelta(days=DAYS - 1), slow=True)
    console = start_console(db, ran=Path(tmp) / "ran.txt", logs=Path(tmp))
    try:
        page = browser.new_page(viewport=VIEWPORT)
        page.goto(console.at("/stats"))
        page.screenshot(path=str(OUT / name), full_page=True)
        print(f"wrote {(OUT / name).relative_to(ROOT)}")
    finally:
        console.stop()


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        try:
            pages(browser, tmp)
            stats(browser, tmp)
        finally:
            browser.close()


if __name__ == "__main__":
    main()
