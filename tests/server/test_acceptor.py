"""The acceptor takes every queued connection in one call, bounded, and keeps errors."""

from __future__ import annotations

import errno
import socket

import pytest
import trio

from josefk.server.network import acceptor
from josefk.server.network.acceptor import Acceptor


async def queued_connections(count: int) -> tuple[trio.SocketListener, list[socket.socket]]:
    (listener,) = await trio.open_tcp_listeners(0, host="127.0.0.1", backlog=128)
    port = listener.socket.getsockname()[1]
    clients = [socket.create_connection(("127.0.0.1", port)) for _ in range(count)]
    return listener, clients


async def test_every_queued_connection_in_one_call() -> None:
    listener, clients = await queued_connections(10)
    taker = Acceptor(listener)
    try:
        streams = await taker.accept()
        assert len(streams) == 10
        # They are live streams of those clients.
        assert {s.socket.getpeername() for s in streams} == {c.getsockname() for c in clients}
        await streams[3].send_all(b"hello")
        (client,) = [c for c in clients if c.getsockname() == streams[3].socket.getpeername()]
        client.settimeout(5)
        assert client.recv(5) == b"hello"
    finally:
        taker.close()
        for c in clients:
            c.close()
        await listener.aclose()


async def test_a_batch_is_bounded_and_the_rest_comes_next(monkeypatch) -> None:
    monkeypatch.setattr(acceptor, "MAX_BATCH", 4)
    listener, clients = await queued_connections(6)
    taker = Acceptor(listener)
    try:
        assert len(await taker.accept()) == 4
        assert len(await taker.accept()) == 2
        with trio.move_on_after(0.2) as scope:
            await taker.accept()  # nothing queued: it waits
        assert scope.cancelled_caught
    finally:
        taker.close()
        for c in clients:
            c.close()
        await listener.aclose()


class FailingFirst:
    """The listening socket, whose first accepts fail with ``errors`` (as Linux reports a
    connection that failed before it was accepted, or a descriptor shortage)."""

    def __init__(self, sock: socket.socket, errors: list[int]) -> None:
        self.sock = sock
        self.errors = errors

    def accept(self) -> tuple[socket.socket, object]:
        if self.errors:
            raise OSError(self.errors.pop(0), "injected")
        return self.sock.accept()

    def close(self) -> None:
        self.sock.close()


async def test_a_connection_that_failed_before_accept_is_skipped() -> None:
    listener, clients = await queued_connections(2)
    taker = Acceptor(listener)
    taker._sock = FailingFirst(taker._sock, [errno.EPERM, errno.ECONNABORTED])  # type: ignore[assignment]
    try:
        assert len(await taker.accept()) == 2  # the others are still taken
    finally:
        taker.close()
        for c in clients:
            c.close()
        await listener.aclose()


async def test_running_out_of_descriptors_is_raised() -> None:
    listener, clients = await queued_connections(1)
    taker = Acceptor(listener)
    taker._sock = FailingFirst(taker._sock, [errno.EMFILE])  # type: ignore[assignment]
    try:
        with pytest.raises(OSError) as caught:
            await taker.accept()
        assert caught.value.errno == errno.EMFILE  # for the broker to back off and retry
        assert len(await taker.accept()) == 1
    finally:
        taker.close()
        for c in clients:
            c.close()
        await listener.aclose()
