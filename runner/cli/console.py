"""``runner ui``: the console in a browser, on the same store as every other command."""

from __future__ import annotations

import errno
import gc
import os
import shlex
import socket
from contextlib import nullcontext
from pathlib import Path
from urllib.parse import quote

import click

from .._log.decisions import decider
from .._log.records import StoredRun
from ..messages import Model
from ..pool.agents import load_agents
from ..pool.submission import BROKER_ENV
from ..store import NoStoreError, RunStore, open_store
from .options import CliError, CliUsageError, Env, common
from .specs import MODEL_HELP, continuing_model, load_tools, model_options
from .tooling import ToolsGiven, check, mcp_options, tools_for

TOKEN_ENV = "RUNNER_UI_TOKEN"


def taken(host: str, port: int) -> str:
    return (f"cannot listen on {host}:{port}: the port is in use; give another with --port "
            "(or --port 0 for any free one)")


def check_free(host: str, port: int) -> None:
    """A usage error, before anything is set up, when ``host:port`` is taken (uvicorn would log an error line)."""
    if port == 0:
        return
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    except (OSError, UnicodeError):
        return  # a host that does not resolve: uvicorn says so
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds: a closing port is free
        try:
            probe.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise CliUsageError(taken(host, port)) from None


def serving_line(url: str, token: str | None) -> str:
    """The line ``runner ui`` prints once it serves: its URL, with the token percent-encoded when it has one.

    On a Unix socket (``unix:PATH``) the path to open through it follows the socket's.
    """
    login = f"/?token={quote(token, safe='')}" if token else ""
    if url.startswith("unix:"):
        return f"runner ui: serving {url}" + (f" (open {login} through it)" if login else "")
    return f"runner ui: serving {url}{login}"


def shown_hint(env: Env, store: RunStore) -> str:
    """``Env.hint`` for the commands the console shows, with the database's password hidden (pages are shared)."""
    if store.url.password is None:
        return env.hint()
    return f" --db {shlex.quote(store.url.render_as_string(hide_password=True))}"


def writable(store: RunStore) -> bool:
    """Whether the console may write to ``store``: a SQLite file (and its folder, for the WAL) it can write."""
    if store.url.get_backend_name() != "sqlite" or not store.url.database:
        return True
    path = Path(store.url.database)
    return os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)


GC_YOUNG = 50_000  # objects allocated between young collections (CPython's default: 700)


def for_serving() -> None:
    """Tune the collector for a server whose requests allocate many short-lived objects.

    What is loaded by now lives as long as the process (``gc.freeze``), and young collections come
    less often: the inbox decoding 200 runs' logs spent its p95 in the collector (at 100,000 runs,
    inbox reads p50 / p95 79 / 164 ms before, 62 / 106 ms after, in one sitting).
    """
    gc.freeze()
    gc.set_threshold(GC_YOUNG, *gc.get_threshold()[1:])


@click.command("ui")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on (beyond this machine "
                                                                        "only with --token).")
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True,
              help="Port to listen on (0: any free one).")
@click.option("--uds", metavar="PATH", help="Serve on a Unix socket at PATH (mode 0600: this user only) instead of "
                                            "a port; see docs/console.md for a shared host.")
@click.option("--tools", "tools_spec", metavar="MODULE:ATTR",
              help="The runs' tools, so the console can go on with a run after a decision, resume or fork it.")
@mcp_options
@click.option("--agents", "agents_spec", metavar="MODULE:ATTR",
              help="A worker pool's agents, so the console can go on with pool runs itself.")
@click.option("--model", "model_spec", metavar="SPEC", help=f"{MODEL_HELP}; default: the model each run last "
                                                              "ran with.")
@model_options
@click.option("--read-only", is_flag=True, help="Serve no action: no decisions, cancel, resume or fork.")
@click.option("--token", envvar=TOKEN_ENV, show_envvar=True, metavar="TOKEN",
              help="Every request must carry it (needed with a --host beyond this machine).")
@click.option("--by", "decided_by", metavar="NAME", help="Who decides, logged with each decision (default: the OS "
                                                          "user).")
@click.option("--by-header", metavar="HEADER", help="Take who decides from this request header, set by a trusted "
                                                  "proxy in front (else --by); only with --token.")
@click.option("--broker", metavar="URL", envvar=BROKER_ENV, show_envvar=True,
              help="A pool's Celery broker, to send a decided pool run back to its queue.")
@common
def ui(env: Env, host: str, port: int, uds: str | None, tools_spec: str | None, mcp_commands: tuple[str, ...],
       mcp_urls: tuple[str, ...], agents_spec: str | None, model_spec: str | None,
       base_url: str | None, api_key: str | None, read_only: bool, token: str | None, decided_by: str | None,
       by_header: str | None, broker: str | None) -> None:
    """Serve the console: runs, a run's timeline, an approvals inbox, fork, resume and cancel.

    It prints its URL once it is serving; Ctrl-C stops it. The console opens the same store as every
    command; a store it cannot write is served read-only.

    \b
      runner ui
      runner ui --tools myapp.tools:registry --by alice
      runner ui --host 0.0.0.0 --token "$(openssl rand -hex 16)"
    """
    try:
        from ..ui import create_app
        from ..ui.app import HEADER_NAME
        from ..ui.guard import loopback
        from ..ui.serve import serve
    except ImportError as exc:
        raise CliError(f"the console needs its extra: pip install 'durable-agent-runner[ui]' ({exc})") from None
    if token is not None and not token.strip():
        raise CliUsageError(f"--token is empty ({TOKEN_ENV} too, when set)")
    if by_header is not None and token is None:
        raise CliUsageError("--by-header needs --token: without one anyone who reaches the console could name the "
                            "decider")
    if by_header is not None and not HEADER_NAME.fullmatch(by_header):
        raise CliUsageError(f"--by-header {by_header!r} is not a header name (letters, digits and -)")
    if not loopback(host) and token is None:
        raise CliUsageError(f"--host {host} serves beyond this machine: give --token TOKEN (or set {TOKEN_ENV})")
    if uds is None:  # a Unix socket takes no port
        check_free(host, port)
    tools = ToolsGiven(tools_spec, mcp_commands, mcp_urls)
    check(tools, None)
    base = load_tools(tools_spec) if tools_spec is not None else None
    agents = load_agents(agents_spec) if agents_spec is not None else None

    def model_for(run: StoredRun) -> Model:
        return continuing_model(model_spec, run, base_url, api_key)

    with env.store() as probe:  # no store there: one line, and nothing created
        can_write = not read_only and writable(probe)
    if not read_only and not can_write:
        click.echo(f"note: the console cannot write to {env.db}; it serves it read-only", err=True)
    try:
        store = open_store(env.db, read_only=not can_write)
    except NoStoreError as exc:
        raise CliError(f"no store at {exc.location}") from None
    try:
        with tools_for(tools, base) if tools.given else nullcontext(None) as registry:
            app = create_app(store, registry=registry, agents=agents, read_only=read_only or not can_write,
                             token=token, model_for=model_for, broker=broker, decided_by=decided_by or decider(),
                             tools_ref=tools_spec, db_hint=shown_hint(env, store), mcp_servers=tools.refs(),
                             by_header=by_header)

            def ready(url: str) -> None:
                click.echo(serving_line(url, token))

            for_serving()

            try:
                served = serve(app, host, port, ready, uds)
            except OSError as exc:
                raise CliError(f"cannot listen on {uds}: {exc.strerror or exc}") from None
            if not served:
                raise CliUsageError(taken(host, port))
    finally:
        store.close()
