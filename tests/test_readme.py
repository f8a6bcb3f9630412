"""What the README and the docs say that code can check.

The README is the front door and docs/ the rest, so both are held to what the
code does: the set-up lines, the examples (run, linted, type-checked), the table
schema, the SQL examples on each backend, the fixture keys, and every relative link.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from docs import reference
from runner import ModelReply, ScriptedModel, ToolCall, ToolRegistry, fork, open_store, resume, run_agent
from runner._log.limits import limit_names
from runner._log.statuses import Status
from runner.store.schema_doc import END, START, generated_block

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
EVENT_LOG = DOCS / "event-log.md"
REPLAY = DOCS / "replay.md"
REQUIRED_PAGES = ("index.md", "event-log.md", "durable-execution.md", "tracing.md", "replay.md", "workers.md",
                  "benchmarks.md", "development.md", "real-models.md", "rerun.md")
TIP_SNIPPET = re.compile(r"```python\n(# tests/test_tip\.py.*?)```", re.S)


def markdown_files() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


def python_block_after(text: str, heading: str) -> str:
    code = re.search(r"```python\n(.*?)```", text[text.index(heading):], re.S)
    assert code is not None, f"no python block after {heading!r}"
    return code.group(1)


def test_readme_starts_with_the_two_setup_commands() -> None:
    head = README.read_text(encoding="utf-8").splitlines()[:6]
    assert head[2:5] == ["```sh", "make demo   # creates .venv, installs, runs the bundled example on the embedded "
                         "SQLite default", "make test   # creates .venv if needed, runs ruff, mypy --strict and the "
                         "whole test suite"]


def installs(target: str, venv: Path) -> list[str]:
    """The ``pip install`` lines ``make TARGET`` would run for a fresh ``venv`` (``make -n``: nothing runs)."""
    shown = subprocess.run(["make", "-n", "-C", str(ROOT), target, f"VENV={venv}"], capture_output=True, text=True,
                           timeout=60, check=True).stdout
    return [line.split(" install ", 1)[1] for line in shown.splitlines() if " -m pip install" in line
            and "--upgrade pip" not in line]


@pytest.mark.process
def test_make_demo_installs_only_the_package_and_make_test_the_dev_extras(tmp_path: Path) -> None:
    assert installs("demo", tmp_path / "venv") == ["--quiet -e ."]  # it installed every dev extra (playwright...)
    assert installs("test", tmp_path / "venv") == ["--quiet -e '.[dev]'"]
    assert installs("test-fast", tmp_path / "venv") == ["--quiet -e '.[dev]'"]


def test_readme_is_at_most_16000_bytes() -> None:
    assert len(README.read_bytes()) <= 16_000


@pytest.mark.parametrize("page", REQUIRED_PAGES)
def test_each_docs_page_exists_and_is_in_the_mkdocs_nav(page: str) -> None:
    assert (DOCS / page).is_file()
    assert f": {page}\n" in (ROOT / "mkdocs.yml").read_text(encoding="utf-8")


def test_event_log_page_schema_block_matches_the_migrated_database() -> None:
    text = EVENT_LOG.read_text(encoding="utf-8")
    block = text[text.index(START): text.index(END) + len(END)]
    assert block == generated_block(), "regenerate with: python -m runner.store.schema_doc docs/event-log.md"


def extras_named(text: str) -> list[str]:
    """The extras an install paragraph names: the ``[name]`` spans in its ``(extras: ...)``."""
    found = re.search(r"\(extras: ([^)]*)\)", text)
    assert found is not None, "no '(extras: ...)' list"
    return re.findall(r"`\[(\w+)\]`", found.group(1))


@pytest.mark.parametrize("source", [README, DOCS / "index.md"], ids=lambda p: str(p.relative_to(ROOT)))
def test_the_install_paragraph_names_every_extra_of_pyproject(source: Path) -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    assert extras_named(source.read_text(encoding="utf-8")) == list(extras)


def test_the_index_lists_every_page_of_the_nav_in_its_order() -> None:
    nav = re.findall(r"^  - [^:\n]+: (\S+\.md)$", (ROOT / "mkdocs.yml").read_text(encoding="utf-8"), re.M)
    text = (DOCS / "index.md").read_text(encoding="utf-8")
    listed = re.findall(r"^- \[[^\]]+\]\(([^)#]+\.md)\)", text[text.index("## The pages"):], re.M)
    assert nav[0] == "index.md"
    assert listed == nav[1:]


@pytest.mark.parametrize("block", reference.blocks(), ids=lambda block: block.name)
def test_the_loop_pages_lists_of_limits_and_statuses_match_the_code(block: reference.Block) -> None:
    text = (DOCS / "loop.md").read_text(encoding="utf-8")
    assert reference.found_block(text, block) == block.marked(), "regenerate with: python docs/reference.py"


def test_the_generated_lists_name_every_limit_and_every_status() -> None:
    limits, statuses = (block.text for block in reference.blocks())
    assert [line.split("`")[1] for line in limits.splitlines()[2:]] == list(limit_names())
    assert [line.split("`")[1] for line in statuses.splitlines()[2:]] == [status.value for status in Status]
    assert "| `cost_limit` | yes |" in statuses
    assert "| `queued` | no |" in statuses
    assert "| `max_identical_calls` | `2` | an integer, at least 1 |" in limits


def test_readme_python_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    code = python_block_after(README.read_text(encoding="utf-8"), "## The loop in Python")
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "README.md", "exec"), {})
    status, answer_and_id = capsys.readouterr().out.split(" ", 1)
    assert status == "done"
    assert answer_and_id.startswith("It is 21 C in Paris. ")
    assert (tmp_path / "runs.db").exists()


@pytest.mark.parametrize(("page", "heading"), [("loop.md", "# The loop"), ("tools.md", "# Tools")])
def test_the_docs_pages_carry_the_readmes_examples_unchanged(page: str, heading: str) -> None:
    readme_heading = {"loop.md": "## The loop in Python", "tools.md": "## Tools"}[page]
    assert python_block_after((DOCS / page).read_text(encoding="utf-8"), heading) == \
        python_block_after(README.read_text(encoding="utf-8"), readme_heading)


def tip_snippet() -> str:
    """The pytest snippet, the same wherever it is shown (the README's tour and the replay page)."""
    found = [m.group(1) for path in (README, REPLAY) for m in TIP_SNIPPET.finditer(path.read_text(encoding="utf-8"))]
    assert len(found) == 2
    assert found[0] == found[1]
    return found[0]


@pytest.mark.process
def test_tip_test_snippet_passes_the_projects_ruff() -> None:
    ruff = Path(sys.executable).parent / "ruff"
    found = subprocess.run([str(ruff), "check", "--no-cache", "--config", "pyproject.toml", "--output-format",
                            "concise", "--stdin-filename", "tests/test_tip.py", "-"],
                           input=tip_snippet(), capture_output=True, text=True, cwd=ROOT, check=False)
    assert (found.returncode, found.stdout) == (0, "All checks passed!\n")


@pytest.mark.process
@pytest.mark.timeout(300)
def test_tip_test_snippet_passes_mypy_strict(tmp_path: Path) -> None:
    snippet = tmp_path / "test_tip.py"
    snippet.write_text(tip_snippet(), encoding="utf-8")
    mypy = Path(sys.executable).parent / "mypy"
    found = subprocess.run([str(mypy), "--strict", "--config-file", "pyproject.toml", str(snippet)],
                           capture_output=True, text=True, cwd=ROOT, check=False)
    assert (found.returncode, found.stdout) == (0, "Success: no issues found in 1 source file\n")


def weather_registry(*, needs_approval: bool = False) -> ToolRegistry:
    registry = ToolRegistry()
    registry.register("get_weather", "Current temperature in a city.",
                      {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
                      lambda city: {"celsius": 21}, needs_approval=needs_approval)
    return registry


def look(call_id: str) -> ModelReply:
    return ModelReply("Let me look.", [ToolCall(call_id, "get_weather", {"city": "Paris"})])


def sql_example(dialect: str) -> str:
    """The event log page's SQL block for one backend, the one whose first line names it (``-- SQLite``)."""
    blocks = re.finditer(r"```sql\n(-- (\w+)\n.*?)```", EVENT_LOG.read_text(encoding="utf-8"), re.S)
    by_dialect = {m.group(2): m.group(1) for m in blocks}
    assert sorted(by_dialect) == ["PostgreSQL", "SQLite"]
    return by_dialect[{"sqlite": "SQLite", "postgresql": "PostgreSQL"}[dialect]]


def test_event_log_sql_example_runs_on_its_backend(store_url: str) -> None:
    with open_store(store_url) as store:
        stopped = run_agent("Weather in Paris?", ScriptedModel([look("c1")]), weather_registry(), token_budget=30,
                            store=store)
        done = run_agent("Weather in Oslo?", ScriptedModel([look("c1"), "21 C."]), weather_registry(), store=store)
        assert (stopped.status, done.status) == ("token_budget", "done")
        run = store.get_run(stopped.run_id)
        with store.reading() as conn:
            rows = [tuple(row) for row in conn.exec_driver_sql(sql_example(store.engine.dialect.name))]
    messages = [(e.seq, e.data["message"]) for e in run.events if e.kind == "message"]
    assert rows == [(run.run_id, "Weather in Paris?", seq, message["role"], message["content"])
                    for seq, message in reversed(messages)]
    assert [row[3] for row in rows] == ["user", "system"]


def test_event_log_sql_example_reads_a_tool_messages_content_stored_once(store_url: str) -> None:
    with open_store(store_url) as store:
        stopped = run_agent("Weather in Paris?", ScriptedModel([look("c1"), look("c2")]), weather_registry(),
                            token_budget=100, store=store)
        run = store.get_run(stopped.run_id)
        with store.reading() as conn:
            rows = [tuple(row) for row in conn.exec_driver_sql(sql_example(store.engine.dialect.name))]
    messages = [(e.seq, e.data["message"]) for e in run.events if e.kind == "message"]
    assert rows == [(run.run_id, "Weather in Paris?", seq, message.get("role"), message.get("content"))
                    for seq, message in reversed(messages)]
    assert [row[3] for row in rows] == ["tool", "assistant", "user", "system"]
    assert rows[0][4] == '{"celsius": 21}'


def test_license_is_mit_as_pyproject_says() -> None:
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert text.splitlines()[:3] == ["MIT License", "", "Copyright (c) 2026 runner contributors"]
    assert 'license = "MIT"' in (ROOT / "pyproject.toml").read_text(encoding="utf-8")


def exported_fixtures(folder: Path) -> list[dict[str, Any]]:
    """Fixtures written by the exporter for a plain run, a resumed one and a fork."""
    with open_store(f"sqlite:///{folder / 'runs.db'}") as store:
        plain = run_agent("Weather in Paris?", ScriptedModel([look("c1"), "21 C."]), weather_registry(), store=store)
        waiting = run_agent("Weather in Paris?", ScriptedModel([look("c1")]), weather_registry(needs_approval=True),
                            store=store)
        resumed = resume(store, waiting.run_id, ScriptedModel(["21 C."]), weather_registry(needs_approval=True),
                         decisions={"c1": True})
        forked = fork(store, plain.run_id, at_step=2, model=ScriptedModel(["Warm."]), registry=weather_registry())
        assert (plain.status, waiting.status, resumed.status, forked.status) == ("done", "awaiting_approval",
                                                                                 "done", "done")
        paths = [store.export_fixture(run.run_id, folder / f"{run.run_id}.json") for run in (plain, resumed, forked)]
    return [json.loads(path.read_text(encoding="utf-8")) for path in paths]


def test_every_key_the_fixture_writer_emits_is_documented(tmp_path: Path) -> None:
    fixtures = exported_fixtures(tmp_path)
    keys = {key for fixture in fixtures for key in fixture}
    assert {"resumes", "history", "forked_at_step"} <= keys  # the optional ones were really produced
    keys |= {key for fixture in fixtures for key in fixture["outcome"]}
    keys |= {key for fixture in fixtures for part in ("replies", "resumes") for entry in fixture.get(part, [])
             for key in entry}
    text = REPLAY.read_text(encoding="utf-8")
    assert sorted(key for key in keys if f"`{key}`" not in text and f'"{key}"' not in text) == []


LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def prose(text: str) -> str:
    """Markdown without code: fenced blocks, indented blocks and inline code spans."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    text = re.sub(r"^(?: {4}.*\n)+", "", text, flags=re.M)
    return re.sub(r"`[^`\n]*`", "", text)


def anchors(path: Path) -> set[str]:
    """The heading anchors GitHub and mkdocs both derive: lower case, punctuation dropped, spaces as hyphens."""
    headings = re.findall(r"^#{1,6} (.+)$", prose(path.read_text(encoding="utf-8")), re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


@pytest.mark.parametrize("source", markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_points_to_an_existing_file(source: Path) -> None:
    broken = []
    for target in LINK.findall(prose(source.read_text(encoding="utf-8"))):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):
            continue  # https:, mailto: ...
        file, _, anchor = target.partition("#")
        resolved = (source.parent / file).resolve() if file else source
        if not resolved.is_file() or (anchor and resolved.suffix == ".md" and anchor not in anchors(resolved)):
            broken.append(target)
    assert broken == []


MCP = DOCS / "mcp.md"
MCP_SERVER = re.compile(r"```python\n(# server\.py: .*?)```", re.S)


@pytest.mark.process
def test_the_mcp_server_docs_mcp_shows_runs_over_stdio_through_runner(tmp_path: Path) -> None:
    """docs/mcp.md's whole server, as written there, started by ``runner.mcp.stdio``: its tools listed and called."""
    import runner.mcp  # loads the SDK: only this test needs it

    [code] = MCP_SERVER.findall(MCP.read_text(encoding="utf-8"))
    assert "from mcp.server.mcpserver import MCPServer" in code
    script = tmp_path / "server.py"
    script.write_text(code, encoding="utf-8")
    registry = ToolRegistry()
    try:
        added = registry.add_mcp(runner.mcp.stdio(sys.executable, [str(script)]))
        assert [(t.name, t.description, t.side_effects) for t in added] == [
            ("add", "Add two integers.", False), ("send", "Send a message.", True)]
        assert registry.execute("add", {"a": 2, "b": 3}) == '{"result": 5}'
        assert registry.execute("send", {"to": "ann", "text": "hi"}) == '{"result": "sent to ann"}'
    finally:
        runner.mcp.close()
