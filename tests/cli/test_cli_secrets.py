"""The CLI never prints a PostgreSQL password: not in its "next, try:" lines, errors, progress or ``--json``,
whether the URL came from ``--db`` or ``RUNNER_DB``, in its user part or as ``?password=``."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from click.testing import Result
from sqlalchemy import Engine
from sqlalchemy.engine import make_url

from tests.cli.helpers import RESUME_TOOLS, FakeOpenAI, at, completion, invoke, run_id_in
from tests.conftest import SESSION_PREFIX, drop_pg_schema, pg_schema_url

pytestmark = pytest.mark.postgres

SECRET = "Pw-s3cret-4217"  # the local server trusts every connection: any password opens it


@pytest.fixture(params=["user", "query"])
def secret_url(request: pytest.FixtureRequest, pg_admin: Engine) -> Iterator[str]:
    """A schema of the test's own, its URL holding ``SECRET`` (``user:SECRET@`` or ``?password=SECRET``)."""
    schema = f"{SESSION_PREFIX}_{uuid.uuid4().hex[:8]}"
    url = make_url(pg_schema_url(pg_admin, schema))
    url = url.set(password=SECRET) if request.param == "user" else url.update_query_dict({"password": SECRET})
    yield url.render_as_string(hide_password=False)
    drop_pg_schema(pg_admin, schema)


class Cli:
    """Runs commands with the URL in ``--db`` or in ``RUNNER_DB``, and checks no output holds the password."""

    def __init__(self, url: str, where: str) -> None:
        self.url, self.where = url, where

    def __call__(self, *args: str, code: int = 0) -> Result:
        where = {"flag": (["--db", self.url], None), "env": ([], {"RUNNER_DB": self.url})}[self.where]
        result = invoke(*args, *where[0], env=where[1])
        assert result.exit_code == code, result.output
        assert SECRET not in result.stdout, result.stdout
        assert SECRET not in result.stderr, result.stderr
        if self.where == "env":  # the environment names the store already: hints leave --db out
            assert "--db" not in result.output, result.output
        return result


@pytest.mark.parametrize("where", ["flag", "env"])
def test_no_command_prints_the_password(secret_url: str, where: str) -> None:
    cli = Cli(secret_url, where)
    cli("demo")
    with FakeOpenAI(completion("", [("t1", "transfer", {"ref": "x"})])) as server:
        stopped = cli("run", "Send the money", "--tools", RESUME_TOOLS, "--model", "openai:fake", *at(server),
                      code=1)
    run_id = run_id_in(stopped)
    assert "next, try:" in stopped.stdout
    cli("show", run_id[:8])
    cli("show", run_id[:8], "--json")
    cli("runs")
    cli("runs", "--json")
    with FakeOpenAI(completion("Sent.")) as server:
        cli("resume", run_id[:8], "--tools", RESUME_TOOLS, "--approve", "t1", *at(server))
    cli("show", "ffffffff", code=3)  # a failing command: no such run
    cli("resume", run_id[:8], "--tools", "no.such.module:tools", code=2)
