"""The acceptor takes every queued connection in one call, bounded, and keeps errors."""

from __future__ import annotations

import socket

import trio

from josefk.server import acceptor
from josefk.server.acceptor import Acceptor


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
