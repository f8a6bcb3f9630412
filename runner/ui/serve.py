"""Serving the console with uvicorn, telling the caller its URL once it listens."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Callable

import uvicorn
from starlette.applications import Starlette


class _Server(uvicorn.Server):
    """A uvicorn server that calls ``ready(url)`` once it is listening (port 0 resolved to the real one)."""

    def __init__(self, config: uvicorn.Config, ready: Callable[[str], None]) -> None:
        super().__init__(config)
        self.ready = ready

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if not self.started:  # could not bind: uvicorn said why and stops
            return
        host, port = self.servers[0].sockets[0].getsockname()[:2]
        shown = f"[{host}]" if ":" in host else host
        self.ready(f"http://{shown}:{port}")


def serve(app: Starlette, host: str, port: int, ready: Callable[[str], None]) -> bool:
    """Serve ``app`` until Ctrl-C or SIGTERM; whether it served at all (False: the address was not free)."""
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on", access_log=False,
                            server_header=False, proxy_headers=False)
    server = _Server(config, ready)
    with contextlib.suppress(KeyboardInterrupt):  # uvicorn raises the signal again once it has shut down
        server.run()
    return server.started
