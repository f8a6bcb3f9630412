"""Serving the console with uvicorn, telling the caller its URL once it listens."""

from __future__ import annotations

import contextlib
import os
import socket
import stat
import threading
from collections.abc import Callable

import uvicorn
from starlette.applications import Starlette


class Server(uvicorn.Server):
    """A uvicorn server that calls ``ready(url)`` once it is listening (port 0 resolved to the real one).

    As it stops it sets ``stopping`` (the console's, when its app has one) before waiting for the
    answers under way: an event stream of a run still going would otherwise keep it waiting.
    """

    def __init__(self, config: uvicorn.Config, ready: Callable[[str], None],
                 stopping: threading.Event | None = None) -> None:
        super().__init__(config)
        self.ready = ready
        self.stopping = stopping

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if not self.started:  # could not bind: uvicorn said why and stops
            return
        name = self.servers[0].sockets[0].getsockname()
        if isinstance(name, str):  # a Unix socket: its path
            self.ready(f"unix:{name}")
            return
        host, port = name[:2]
        shown = f"[{host}]" if ":" in host else host
        self.ready(f"http://{shown}:{port}")

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        if self.stopping is not None:
            self.stopping.set()
        await super().shutdown(sockets)


def serve(app: Starlette, host: str, port: int, ready: Callable[[str], None], uds: str | None = None) -> bool:
    """Serve ``app`` until Ctrl-C or SIGTERM; whether it served at all (False: the address was not free).

    ``uds``: a Unix socket at that path instead, that only this user may open (mode 0600).
    """
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on", access_log=False,
                            server_header=False, proxy_headers=False)
    stopping = getattr(app.state, "stopping", None)
    server = Server(config, ready, stopping if isinstance(stopping, threading.Event) else None)
    sockets = [private_socket(uds)] if uds is not None else None
    try:
        with contextlib.suppress(KeyboardInterrupt):  # uvicorn raises the signal again once it has shut down
            server.run(sockets=sockets)
    finally:
        if uds is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(uds)
    return server.started


def private_socket(path: str) -> socket.socket:
    """A Unix socket listening at ``path`` with mode 0600 from its first moment; ``OSError`` when ``path`` is taken.

    A stale socket file (nobody listening) is replaced; any other file is left alone.
    """
    with contextlib.suppress(FileNotFoundError):
        if stat.S_ISSOCK(os.stat(path).st_mode) and not _listening(path):
            os.unlink(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    mask = os.umask(0o177)
    try:
        sock.bind(path)
    except OSError:
        sock.close()
        raise
    finally:
        os.umask(mask)
    os.chmod(path, 0o600)
    sock.listen(128)
    return sock


def _listening(path: str) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(path)
        except OSError:
            return False
        return True
