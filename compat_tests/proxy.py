"""A loopback TCP proxy that cuts connections at random points, for retry tests.

``ChaosProxy`` listens on ``127.0.0.1`` (a free port unless one is given) and
forwards every connection to one target. While armed, each connection gets two
byte budgets drawn from a seeded RNG: one towards the broker, one back. The
budget back only starts counting once ``busy_bytes`` went towards the broker, so
it falls among produce responses rather than on a handshake. When a connection
exhausts its budget in the direction whose turn it is (they alternate, the first
at random) the proxy forwards exactly the bytes left in it and then closes both
ends: requests and responses are cut mid-frame, and a cut response means the
broker appended a batch whose acknowledgement was lost. After a cut every open
connection draws new budgets. Only ``cuts`` cuts happen per arming, so a run
always ends.

A broker behind the proxy must advertise the proxy's address, or clients go
around it after their first Metadata.
"""

from __future__ import annotations

import contextlib
import random
import socket
import threading
from dataclasses import dataclass, field

UP, DOWN = "client->broker", "broker->client"
CHUNK = 64 * 1024


@dataclass(frozen=True)
class Cut:
    """One connection the proxy cut: in which direction, after how many bytes of it,
    and how many bytes had gone the other way by then."""

    connection: int
    direction: str
    after_bytes: int
    other_bytes: int


@dataclass(eq=False)
class _Link:
    """One proxied connection: its sockets, bytes forwarded and, if armed, its budgets."""

    number: int
    client: socket.socket
    upstream: socket.socket
    sent: dict[str, int] = field(default_factory=lambda: {UP: 0, DOWN: 0})
    up_limit: int | None = None  # cut when UP bytes reach it
    down_budget: int | None = None  # DOWN bytes allowed once the link is busy
    down_from: int | None = None  # DOWN bytes when it became busy
    closed: bool = False


class ChaosProxy:
    """Forward ``127.0.0.1:port`` to ``target``; cut connections while armed (thread safe)."""

    def __init__(self, target: tuple[str, int], seed: int, port: int = 0) -> None:
        self.target = target
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", port))
        self._listener.settimeout(0.2)
        self.port: int = self._listener.getsockname()[1]
        self._stopping = threading.Event()
        self._links: set[_Link] = set()
        self._threads: list[threading.Thread] = []
        self._cuts_left = 0
        self._up_max = self._down_max = self._busy_bytes = 0
        self._turn = UP
        self.connections = 0
        self.cuts: list[Cut] = []

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def __enter__(self) -> ChaosProxy:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        thread = threading.Thread(target=self._accept_loop, name="chaos-proxy", daemon=True)
        thread.start()
        self._threads.append(thread)

    def arm(self, cuts: int, up_max: int, down_max: int, busy_bytes: int = 4096) -> None:
        """Make up to ``cuts`` cuts, alternating directions: a connection is cut after
        1..``up_max`` more bytes towards the broker, or 1..``down_max`` bytes back
        counted from when ``busy_bytes`` went towards it."""
        with self._lock:
            self._cuts_left = cuts
            self._up_max, self._down_max, self._busy_bytes = up_max, down_max, busy_bytes
            self._turn = self._rng.choice((UP, DOWN))
            self.cuts = []
            for link in self._links if cuts > 0 else ():
                self._plan(link)

    def disarm(self) -> None:
        """No more cuts."""
        with self._lock:
            self._cuts_left = 0

    def close(self) -> None:
        """Stop accepting and close every connection."""
        self._stopping.set()
        with self._lock:
            links = list(self._links)
        for link in links:
            self._close_link(link)
        for thread in self._threads:
            thread.join(timeout=5)
        self._listener.close()

    # --- internals ----------------------------------------------------------------

    def _plan(self, link: _Link) -> None:
        """Draw ``link``'s budgets, counted from its bytes so far (holding the lock)."""
        link.up_limit = link.sent[UP] + self._rng.randint(1, self._up_max)
        link.down_budget = self._rng.randint(1, self._down_max)
        link.down_from = None

    def _accept_loop(self) -> None:
        while not self._stopping.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            for sock in (client, upstream):
                sock.settimeout(None)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self.connections += 1
                link = _Link(self.connections, client, upstream)
                if self._cuts_left > 0:
                    self._plan(link)
                self._links.add(link)
            for src, dst, direction in ((client, upstream, UP), (upstream, client, DOWN)):
                thread = threading.Thread(target=self._pump, args=(link, src, dst, direction),
                                          name=f"chaos-proxy-{link.number}", daemon=True)
                thread.start()

    def _pump(self, link: _Link, src: socket.socket, dst: socket.socket, direction: str) -> None:
        try:
            while True:
                data = src.recv(CHUNK)
                if not data:
                    return
                cut_at = self._cut_point(link, direction, len(data))
                if cut_at is not None:
                    dst.sendall(data[:cut_at])
                    return
                dst.sendall(data)
        except OSError:
            return
        finally:
            self._close_link(link)

    def _cut_point(self, link: _Link, direction: str, size: int) -> int | None:
        """How many of the next ``size`` bytes to forward before cutting; None: all."""
        with self._lock:
            before = link.sent[direction]
            link.sent[direction] = before + size
            if direction == UP and link.down_from is None and link.sent[UP] >= self._busy_bytes:
                link.down_from = link.sent[DOWN]
            if direction != self._turn:
                return None
            if direction == UP:
                if link.up_limit is None or before + size < link.up_limit:
                    return None
                limit = link.up_limit
            else:
                if link.down_budget is None or link.down_from is None:
                    return None
                limit = link.down_from + link.down_budget
                if before + size < limit:
                    return None
            if self._cuts_left <= 0:
                link.up_limit = link.down_budget = None  # disarmed or used up: spare it
                return None
            self._cuts_left -= 1
            other = link.sent[DOWN if direction == UP else UP]
            self.cuts.append(Cut(link.number, direction, limit, other))
            self._turn = DOWN if direction == UP else UP
            for each in self._links:
                if each is not link:
                    self._plan(each)
            link.up_limit = link.down_budget = None
            return max(0, limit - before)

    def _close_link(self, link: _Link) -> None:
        with self._lock:
            if link.closed:
                return
            link.closed = True
            self._links.discard(link)
        for sock in (link.client, link.upstream):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
