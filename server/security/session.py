"""Who sent the request being handled: the connection's principal, host and listener.

Each connection runs in its own task, so its own context: handlers read the session of
the request in hand with ``current_session.get()``."""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass

from josefk.server.security.principal import ANONYMOUS


@dataclass(frozen=True, slots=True)
class Session:
    """The authenticated side of a connection (Kafka's RequestContext principal part)."""

    principal: str
    host: str
    listener: str
    security_protocol: str


#: PLAINTEXT's anonymous session where no connection set one (in-process calls, tests).
INTERNAL = Session(ANONYMOUS, "", "", "PLAINTEXT")
current_session: ContextVar[Session] = ContextVar("current_session", default=INTERNAL)
