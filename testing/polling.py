"""Bounded waiting and free ports: the two things every fixture start-up needs."""

from __future__ import annotations

import random
import socket
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

# Raised by a check that means "not yet" (a broker still starting, a socket refused).
NOT_YET: tuple[type[BaseException], ...] = (OSError, ConnectionError, TimeoutError)


class WaitTimeout(AssertionError):
    """A bounded wait ran out; the message names what was awaited and the last answer."""


# Ports handed out below the kernel's ephemeral range, where no outgoing connection takes
# one between the pick and the broker's bind (a port the kernel picked for ``bind(0)`` is in
# that range, and a client connecting meanwhile can get it: "Address already in use").
_PORTS = (10_000, 32_767)


def _ephemeral_start() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port of ``host`` that nothing listens on right now, outside the ephemeral
    range when that leaves room (else one the kernel picks)."""
    low, high = _PORTS[0], min(_PORTS[1], _ephemeral_start() - 1)
    for _ in range(100 if high > low else 0):
        port = random.randint(low, high)
        with socket.socket() as sock:
            try:
                sock.bind((host, port))
            except OSError:
                continue
            return port
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def wait_until(check: Callable[[], T | None], timeout: float, what: str,
               interval: float = 0.05, not_yet: tuple[type[BaseException], ...] = NOT_YET) -> T:
    """Call ``check`` until it returns something truthy, and return that.

    Exceptions of the ``not_yet`` kinds count as "not yet"; after ``timeout`` seconds
    :class:`WaitTimeout` names ``what`` and the last value or error.
    """
    deadline = time.monotonic() + timeout
    last: object = None
    while True:
        try:
            value = check()
            if value:
                return value
            last = value
        except not_yet as exc:
            last = exc
        if time.monotonic() >= deadline:
            raise WaitTimeout(f"timed out after {timeout:g}s waiting for {what}; last: {last!r}")
        time.sleep(interval)
