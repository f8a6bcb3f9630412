"""Take the console's screenshots for the docs: docs/img/console-runs.png, console-run.png, console-approvals.png,
console-run-tree.png.

Run it from the checkout, after `make`: `.venv/bin/python docs/screenshots.py`. It records four runs
in a temporary SQLite store (the demo, a refund awaiting approval, a search stopped at its step
limit, a trip plan whose sub-agent's child run waits for approval), starts the installed `runner ui`
on it and has the system Chromium take each page, as the browser tests do (`RUNNER_TEST_CHROMIUM`
names another Chromium).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the tests' helpers and tools, and this checkout's runner

from playwright.sync_api import ViewportSize, sync_playwright  # noqa: E402

from runner import ModelReply, ScriptedModel, ToolCall, open_store, run_agent  # noqa: E402
from tests import trees  # noqa: E402
from tests.cli.helpers import installed_runner  # noqa: E402
from tests.ui import console_tools  # noqa: E402
from tests.ui.helpers import CHROMIUM_ARGS, chromium_path, start_console  # noqa: E402

OUT = ROOT / "docs" / "img"
VIEWPORT: ViewportSize = {"width": 1280, "height": 800}


def record(db: str) -> tuple[str, str]:
    """Fill the store with the runs; the demo's run id and the tree's parent's (the run pages to show)."""
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
    return demo, tree.parent


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        db = f"sqlite:///{tmp}/runs.db"
        demo, tree = record(db)
        console = start_console(db, ran=Path(tmp) / "ran.txt", logs=Path(tmp))
        try:
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
                page = browser.new_page(viewport=VIEWPORT)
                for path, name in (("/", "console-runs.png"), (f"/runs/{demo}", "console-run.png"),
                                   ("/approvals", "console-approvals.png"), (f"/runs/{tree}", "console-run-tree.png")):
                    page.goto(console.at(path))
                    page.screenshot(path=str(OUT / name), full_page=True)
                    print(f"wrote {(OUT / name).relative_to(ROOT)}")
                browser.close()
        finally:
            console.stop()


if __name__ == "__main__":
    main()
