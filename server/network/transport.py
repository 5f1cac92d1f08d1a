"""How a connection's bytes cross its socket: in the clear on the descriptor, or through
TLS (the standard library's TLS engine over memory buffers, driven on the same
non-blocking descriptor, so both kinds wait the same way on trio's readiness calls).

A fetch's file regions go out with ``sendfile`` in the clear. Under TLS the kernel would
have to encrypt (kTLS) for that to work; without it, the region is read in chunks and
written through the TLS engine: the one place where zero copy gives way.
"""

from __future__ import annotations

import contextlib
import errno
import os
import ssl
from collections.abc import Sequence

import trio

from josefk.server.network.zero_copy import FileRegion

Buffer = bytes | bytearray | memoryview
# The peer is gone: these end the connection quietly, as trio's broken stream does.
GONE = (errno.EPIPE, errno.ECONNRESET, errno.ETIMEDOUT, errno.ENOTCONN, errno.EHOSTUNREACH)
# TLS: plaintext taken per write call, and ciphertext received per read.
TLS_WRITE_CHUNK = 256 * 1024
TLS_READ_CHUNK = 256 * 1024
# A file region under TLS is read in pieces of this size.
REGION_CHUNK = 256 * 1024


class HandshakeError(Exception):
    """The TLS handshake failed (the peer's certificate, protocol or cipher suites)."""


def raise_if_gone(error: OSError) -> None:
    """A socket error that means the peer is gone ends the connection quietly."""
    if error.errno in GONE:
        raise trio.BrokenResourceError(str(error)) from error


class PlainTransport:
    """The descriptor itself: ``readv`` into the frame buffer, ``writev``, ``sendfile``."""

    tls = False
    peer_certificate: bytes | None = None

    def __init__(self, fd: int) -> None:
        self.fd = fd

    async def handshake(self) -> None:
        return None

    def read_into(self, target: memoryview) -> int | None:
        """Bytes received into ``target``; 0 when the peer closed, None when none arrived."""
        try:
            return os.readv(self.fd, [target])
        except BlockingIOError:
            return None
        except OSError as e:
            raise_if_gone(e)
            raise

    def has_buffered(self) -> bool:
        return False

    def write(self, parts: Sequence[Buffer]) -> int | None:
        """Bytes of ``parts`` taken; None when the socket cannot take any now."""
        try:
            return os.writev(self.fd, parts)
        except BlockingIOError:
            return None
        except OSError as e:
            raise_if_gone(e)
            raise

    async def drain(self) -> None:
        return None

    def close_notify(self) -> None:
        """Queue the end of the session before a close (nothing to say on plain TCP)."""
        return None

    async def send_region(self, region: FileRegion) -> None:
        """Zero copy: segment file → socket, waiting for writability on EAGAIN."""
        position, remaining = region.position, region.length
        while remaining > 0:
            try:
                sent = os.sendfile(self.fd, region.fd, position, remaining)
            except BlockingIOError:
                await trio.lowlevel.wait_writable(self.fd)
                continue
            except OSError as e:
                raise_if_gone(e)
                raise
            if sent == 0:
                # The file shrank under us (truncated): pad so the frame stays whole;
                # the client drops the partial batch at the end of a partition's data.
                await self.write_all(bytes(remaining))
                return
            position += sent
            remaining -= sent
            await trio.lowlevel.checkpoint()

    async def write_all(self, data: Buffer) -> None:
        view = memoryview(data)
        while view:
            sent = self.write([view])
            if sent is None:
                await trio.lowlevel.wait_writable(self.fd)
                continue
            view = view[sent:]
        await self.drain()


class TlsTransport(PlainTransport):
    """TLS on the descriptor: ciphertext moves between the socket and the engine's
    memory buffers, plaintext between the engine and the connection."""

    tls = True

    def __init__(self, fd: int, context: ssl.SSLContext) -> None:
        super().__init__(fd)
        self._in = ssl.MemoryBIO()
        self._out = ssl.MemoryBIO()
        self._engine = context.wrap_bio(self._in, self._out, server_side=True)
        self._backlog = bytearray()  # ciphertext the socket has not taken yet
        self._eof = False

    async def handshake(self) -> None:
        while True:
            try:
                self._engine.do_handshake()
                break
            except ssl.SSLWantReadError:
                await self.drain()
                if not await self._receive_ciphertext():
                    raise HandshakeError("the peer closed the connection during the TLS "
                                         "handshake") from None
            except ssl.SSLError as e:
                self._take_output()
                # The alert that tells the peer why goes out before the close.
                with trio.move_on_after(1):
                    await self.drain()
                raise HandshakeError(e.reason or str(e)) from e
        await self.drain()
        self.peer_certificate = self._engine.getpeercert(binary_form=True)

    async def _receive_ciphertext(self) -> bool:
        """Wait for ciphertext from the socket; False when the peer closed instead."""
        while not self._pull():
            await trio.lowlevel.wait_readable(self.fd)
        return not self._eof

    def read_into(self, target: memoryview) -> int | None:
        """Decrypt into ``target`` all the records that have arrived, up to its size (one
        TLS record is at most 16 KiB: stopping after one would run the connection's
        whole receive path per record)."""
        total = 0
        try:
            while total < len(target):
                try:
                    count = self._engine.read(len(target) - total, target[total:])
                except ssl.SSLWantReadError:
                    if self._eof or not self._pull():
                        break
                    continue
                if count == 0:  # Python's answer to the peer's close_notify
                    self._eof = True
                    break
                total += count
        except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
            self._eof = True  # the peer's close_notify, or its end of the stream
        except ssl.SSLError as e:
            raise trio.BrokenResourceError(f"TLS: {e.reason or e}") from e
        self._take_output()
        if total:
            return total
        return 0 if self._eof else None

    def _pull(self) -> bool:
        """Ciphertext from the socket into the engine: False when none has arrived."""
        try:
            data = os.read(self.fd, TLS_READ_CHUNK)
        except BlockingIOError:
            return False
        except OSError as e:
            raise_if_gone(e)
            raise
        if data:
            self._in.write(data)
        else:
            self._eof = True
            self._in.write_eof()
        return True

    def has_buffered(self) -> bool:
        """Plaintext (or ciphertext) already received: readable without waiting."""
        return self._engine.pending() > 0 or self._in.pending > 0

    def write(self, parts: Sequence[Buffer]) -> int | None:
        if self._backlog and not self._send_backlog():
            return None
        taken = 0
        try:
            for part in parts:
                if taken >= TLS_WRITE_CHUNK:
                    break
                taken += self._engine.write(part)
        except ssl.SSLError as e:  # the peer closed or broke the session
            raise trio.BrokenResourceError(f"TLS: {e.reason or e}") from e
        self._take_output()
        self._send_backlog()
        return taken

    def close_notify(self) -> None:
        """Queue TLS's close_notify, as Kafka's SslTransportLayer does on close: a client
        that ended the session waits for it (asyncio's SSL transport 30 s) and one that
        did not learns the end is deliberate. Nothing when no session was set up."""
        with contextlib.suppress(ssl.SSLError, ValueError, OSError):
            self._engine.unwrap()  # SSLWantReadError: ours is queued, the peer's not in
        self._take_output()

    def _take_output(self) -> None:
        if self._out.pending:
            self._backlog += self._out.read()

    def _send_backlog(self) -> bool:
        """Send what ciphertext the socket takes now; True when none is left."""
        while self._backlog:
            try:
                sent = os.write(self.fd, self._backlog)
            except BlockingIOError:
                return False
            except OSError as e:
                raise_if_gone(e)
                raise
            del self._backlog[:sent]
        return True

    async def drain(self) -> None:
        self._take_output()
        while not self._send_backlog():
            await trio.lowlevel.wait_writable(self.fd)

    async def send_region(self, region: FileRegion) -> None:
        position, remaining = region.position, region.length
        while remaining > 0:
            chunk = os.pread(region.fd, min(remaining, REGION_CHUNK), position)
            if not chunk:
                chunk = bytes(remaining)  # truncated under us: keep the frame whole
            await self.write_all(chunk)
            position += len(chunk)
            remaining -= len(chunk)
