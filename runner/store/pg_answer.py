"""A bound on how long a psycopg connection waits for the server's answer, where answers are quick.

Keepalives and ``tcp_user_timeout`` catch a server the network lost; a peer whose kernel still
acknowledges (a stalled proxy, a hung server process) is caught only by a clock. The bound holds
while a connection sits in the pool (so the pre-ping of a checkout has it) and around the writer's
commits (``engine.answering``); a checked-out connection otherwise waits as long as its statement takes.
"""

from __future__ import annotations

from typing import Any, TypeVar

import psycopg
from psycopg.abc import PQGen
from sqlalchemy import Engine, event

ANSWER_S = 10.0  # a ping or a commit that gets no answer in this long: the server is gone
RV = TypeVar("RV")


class AnsweringConnection(psycopg.Connection[Any]):
    """A psycopg connection that gives up on a wait past ``answer_s`` (None: no bound), closing itself."""

    answer_s: float | None = ANSWER_S

    def wait(self, gen: PQGen[RV], interval: float = 0.1, timeout: float | None = None) -> RV:
        """Consume ``gen`` as psycopg does, within ``answer_s`` when it is set and no timeout is given."""
        bound = self.answer_s if timeout is None else timeout
        try:
            return super().wait(gen, interval, bound)
        except psycopg.OperationalError as exc:
            if timeout is not None or bound is None or self.pgconn.status == psycopg.pq.ConnStatus.BAD:
                raise
            if "wait timeout" not in str(exc):
                raise
            self.pgconn.finish()  # the connection's state is unknown: closed, so the pool drops it
            raise psycopg.OperationalError(f"the server did not answer in {bound:g} s") from None


def install(engine: Engine) -> None:
    """Connect ``engine``'s psycopg connections as ``AnsweringConnection``, bounded while pooled."""

    @event.listens_for(engine, "do_connect")
    def connect(_dialect: Any, _record: Any, cargs: Any, cparams: Any) -> AnsweringConnection:
        return AnsweringConnection.connect(*cargs, **cparams)

    @event.listens_for(engine, "checkout")
    def checked_out(dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
        if isinstance(dbapi_connection, AnsweringConnection):  # after the pre-ping: a statement may take long
            dbapi_connection.answer_s = None

    @event.listens_for(engine, "checkin")
    def checked_in(dbapi_connection: Any, _record: Any) -> None:
        if isinstance(dbapi_connection, AnsweringConnection):
            dbapi_connection.answer_s = ANSWER_S
