"""One session per MCP server per process, on a private event loop thread: opened lazily, closed by ``close``.

The SDK is async. Its sessions live on one loop in a thread of their own, so a sync run, an async run's
worker and the console's threads all reach the same session; ``close`` (at the end of a command, and at
exit) shuts every server down and joins the thread. A session whose connection fails is dropped, and the
next call opens a new one. A forked child never touches its parent's sessions: it opens its own.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import logging
import math
import os
import sys
import threading
from collections.abc import AsyncIterator, Coroutine
from contextlib import asynccontextmanager
from typing import Any, TextIO, TypeVar

from .servers import INITIALIZE_TIMEOUT_S, HttpServer, McpError, McpServer, StdioServer

try:
    import anyio
    import httpx2
    from mcp import Client, MCPError, StdioServerParameters, stdio_client, types
    from mcp.client.streamable_http import streamable_http_client
except ImportError as missing:  # pragma: no cover  (the [mcp] extra is in [dev])
    raise McpError(f"MCP servers need the 'mcp' package (2.x): pip install 'durable-agent-runner[mcp]' "
                   f"({missing})") from None

from .content import Listed, capped, listed, observation

# The SDK logs what it fails to parse with a traceback (12 to 22 lines on stderr when nobody configured
# logging); runner's one-line McpError says it. An application's own logging still gets the records,
# and RUNNER_DEBUG=1 leaves them to Python's last-resort handler, tracebacks and all.
if not os.environ.get("RUNNER_DEBUG"):
    logging.getLogger("mcp").addHandler(logging.NullHandler())

T = TypeVar("T")
LIST_PAGES = 100  # a server that pages its tools past this is not listed further
SHUTDOWN_S = 10.0  # the SDK gives a server 2 s after its stdin closes, then 2 s after SIGTERM, then kills it
CLOSED = (types.CONNECTION_CLOSED,)


class Session:
    """A connection to one server, owned by one task on the private loop (the SDK's scopes need one owner)."""

    def __init__(self, server: McpServer) -> None:
        self.server = server
        self.client: Client | None = None
        self.closing = asyncio.Event()
        self.ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.scope = anyio.CancelScope(deadline=anyio.current_time() + INITIALIZE_TIMEOUT_S)
        self.task = asyncio.get_running_loop().create_task(self._own())

    async def _own(self) -> None:
        scope = self.scope
        try:
            with scope:
                async with Client(_transport(self.server)) as client:
                    scope.deadline = math.inf  # initialized: from now on only ``close`` ends it
                    self.client = client
                    self.ready.set_result(None)
                    await self.closing.wait()
            if scope.cancelled_caught and not self.ready.done():
                self.ready.set_exception(McpError(
                    f"{self.server.describe()} did not answer initialize within {INITIALIZE_TIMEOUT_S:g} s"))
        except Exception as exc:
            if not self.ready.done():
                why = ("it closed the connection before answering initialize" if _closed(exc)
                       else _why(exc))
                self.ready.set_exception(McpError(f"{self.server.describe()} could not be started: {why}"))
        finally:
            self.client = None
            if not self.ready.done():  # cancelled from outside (the loop is closing)
                self.ready.set_exception(McpError(f"{self.server.describe()} was closed while it started"))

    @property
    def alive(self) -> bool:
        return self.client is not None and not self.closing.is_set()

    async def close(self) -> None:
        """End the session: the SDK closes the server's stdin, then stops it (the process tree) if it stays."""
        self.closing.set()
        if not self.ready.done():  # still starting: stop waiting for its ``initialize``
            self.scope.cancel()
        await asyncio.wait({self.task}, timeout=SHUTDOWN_S)


class Hub:
    """The process's sessions and the loop thread they run on."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.loop = asyncio.new_event_loop()
        self.sessions: dict[McpServer, Session] = {}
        self.locks: dict[McpServer, asyncio.Lock] = {}
        self.waiting: set[concurrent.futures.Future[Any]] = set()  # cancelled by ``close``, so nobody waits on
        self.closed = False
        self.guard = threading.Lock()
        self.thread = threading.Thread(target=self._serve, name="runner-mcp", daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def run(self, work: Coroutine[Any, Any, T], timeout_s: float) -> T:
        """``work`` run on the loop thread, waited for from this one (at most ``timeout_s``).

        ``McpError`` when the hub is closed first, or closes while ``work`` runs.
        """
        with self.guard:
            if self.closed or threading.current_thread() is self.thread:
                work.close()
                raise McpError("the MCP sessions were closed" if self.closed
                               else "runner.mcp cannot wait for its own loop from inside it")
            future = asyncio.run_coroutine_threadsafe(work, self.loop)
            self.waiting.add(future)
        try:
            return future.result(timeout_s)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise
        except concurrent.futures.CancelledError:
            raise McpError("the MCP sessions were closed during the call") from None
        finally:
            with self.guard:
                self.waiting.discard(future)

    async def session(self, server: McpServer) -> Session:
        """The server's live session, opened now if it has none (``McpError`` when that fails)."""
        lock = self.locks.setdefault(server, asyncio.Lock())
        async with lock:
            found = self.sessions.get(server)
            if found is not None and found.alive:
                return found
            if found is not None:
                await found.close()
            session = self.sessions[server] = Session(server)
            try:
                await asyncio.shield(session.ready)
            except McpError:
                del self.sessions[server]
                raise
            return session

    async def tools(self, server: McpServer) -> list[Listed]:
        """Every tool ``server`` lists, page by page."""
        session = await self.session(server)
        found: list[Listed] = []
        cursor: str | None = None
        for _ in range(LIST_PAGES):
            try:
                with anyio.fail_after(INITIALIZE_TIMEOUT_S):
                    assert session.client is not None
                    page = await session.client.list_tools(cursor=cursor)
            except TimeoutError:
                raise McpError(f"{server.describe()} did not list its tools within "
                               f"{INITIALIZE_TIMEOUT_S:g} s") from None
            except Exception as exc:
                await self._drop(session, exc)
                raise McpError(f"{server.describe()} could not list its tools: {_why(exc)}") from None
            found.extend(listed(tool) for tool in page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        return found

    async def call(self, server: McpServer, shown: str, name: str, args: dict[str, Any], timeout_s: float) -> str:
        """The observation of calling tool ``name`` (``shown`` to the model) on ``server``; never raises."""
        try:
            session = await self.session(server)
        except McpError as exc:
            return f"ERROR: {shown} failed: {exc}"
        try:
            assert session.client is not None
            result = await session.client.call_tool(name, args, read_timeout_seconds=timeout_s)
        except MCPError as exc:
            if exc.code == types.REQUEST_TIMEOUT:
                return f"ERROR: {shown} timed out after {timeout_s:g} s"
            if exc.code in CLOSED:
                await self._drop(session, exc)
                return (f"ERROR: {shown} failed: {server.describe()} closed the connection before answering; "
                        "the next call opens a new one")
            return f"ERROR: {shown} failed: {server.describe()} answered an error: {exc.message} (code {exc.code})"
        except Exception as exc:
            if not _broken(exc):  # the connection holds (a result that breaks its own output schema, say)
                return f"ERROR: {shown} failed: {_why(exc)}"
            await self._drop(session, exc)
            return (f"ERROR: {shown} failed: the connection to {server.describe()} broke ({_why(exc)}); "
                    "the next call opens a new one")
        return observation(shown, result)

    async def _drop(self, session: Session, exc: BaseException) -> None:
        """Close a session whose connection failed; the next call opens a new one."""
        if self.sessions.get(session.server) is session:
            del self.sessions[session.server]
        await session.close()

    async def aclose(self) -> None:
        """Close every session, then cancel whatever else still runs on the loop (calls nobody waits for)."""
        sessions, self.sessions = list(self.sessions.values()), {}
        await asyncio.gather(*(session.close() for session in sessions))
        others = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        for task in others:
            task.cancel()
        await asyncio.wait(others, timeout=SHUTDOWN_S) if others else None

    def close(self) -> None:
        """Close every session, then stop the loop and join its thread; a call still waiting gets ``McpError``."""
        with contextlib.suppress(TimeoutError, McpError):
            self.run(self.aclose(), SHUTDOWN_S + 1)
        with self.guard:
            self.closed = True
            waiting, self.waiting = list(self.waiting), set()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(SHUTDOWN_S)
        for future in waiting:  # submitted too late for ``aclose`` to see: it will never run now
            future.cancel()
        if not self.thread.is_alive():
            self.loop.close()


_hub: Hub | None = None
_hub_lock = threading.Lock()


def hub() -> Hub:
    """This process's hub, started on first use (and afresh in a forked child)."""
    global _hub
    with _hub_lock:
        if _hub is None or _hub.pid != os.getpid():
            if _hub is None:
                atexit.register(close)
            _hub = Hub()
        return _hub


def close() -> None:
    """Close every MCP session of this process and stop its loop thread; a later call opens them again."""
    global _hub
    with _hub_lock:
        found, _hub = _hub, None
    if found is not None and found.pid == os.getpid():
        found.close()


@asynccontextmanager
async def _transport(server: McpServer) -> AsyncIterator[tuple[Any, Any]]:
    """The streams to ``server``: a child process's pipes, or streamable HTTP."""
    if isinstance(server, StdioServer):
        params = StdioServerParameters(command=server.command, args=list(server.args),
                                       env=dict(server.env) if server.env else None, cwd=server.cwd)
        async with stdio_client(params, errlog=_errlog()) as streams:
            yield streams
        return
    assert isinstance(server, HttpServer)
    timeout = httpx2.Timeout(30.0, read=300.0)  # the SDK's own: a server may hold a stream open
    async with httpx2.AsyncClient(headers=dict(server.headers or ()), timeout=timeout) as http, \
            streamable_http_client(server.url, http_client=http) as streams:
        yield streams


_devnull: TextIO | None = None


def _errlog() -> TextIO:
    """Where a stdio server's stderr goes: ours, or nowhere when ours is not a file (a test's capture)."""
    global _devnull
    for stream in (sys.stderr, sys.__stderr__):
        try:
            if stream is not None:
                stream.fileno()
                return stream
        except (OSError, ValueError, AttributeError):
            continue
    if _devnull is None:
        _devnull = open(os.devnull, "w")  # noqa: SIM115  (kept for the process's life)
    return _devnull


def _broken(exc: BaseException) -> bool:
    """Whether ``exc`` says the connection itself failed (a pipe, a socket, a stream), not one call."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return isinstance(exc, (OSError, httpx2.TransportError, anyio.ClosedResourceError, anyio.BrokenResourceError,
                            anyio.EndOfStream))


def _closed(exc: BaseException) -> bool:
    """Whether ``exc`` (or the first error a task group wrapped in it) says the connection closed."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return isinstance(exc, MCPError) and exc.code in CLOSED


def _why(exc: BaseException) -> str:
    """The first real error inside ``exc`` (task groups wrap theirs), as one line."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def list_tools(server: McpServer) -> list[Listed]:
    """Every tool ``server`` lists, its session opened if need be; ``McpError`` (one line) when that fails."""
    found = hub()
    try:
        return found.run(found.tools(server), INITIALIZE_TIMEOUT_S * 3 + SHUTDOWN_S)
    except TimeoutError:
        raise McpError(f"{server.describe()} did not list its tools in time") from None


def call_tool(server: McpServer, shown: str, name: str, args: dict[str, Any], timeout_s: float,
              max_chars: int | None = None) -> str:
    """The observation of one call of tool ``name`` (``shown`` to the model as its name); never raises.

    An observation past ``max_chars`` is cut, with a marker (``content.capped``).
    """
    found = hub()
    try:
        work = found.call(server, shown, name, args, timeout_s)
        return capped(found.run(work, INITIALIZE_TIMEOUT_S + SHUTDOWN_S + timeout_s), max_chars)
    except TimeoutError:
        return f"ERROR: {shown} timed out after {timeout_s:g} s"
    except McpError as exc:
        return f"ERROR: {shown} failed: {exc}"
