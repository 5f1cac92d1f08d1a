"""What the request path feeds, in plain counters: cheap to bump, read at scrape.

Nothing here imports ``prometheus_client``; the collector turns these into metric
families when ``/metrics`` is scraped. One `Recorder` per broker.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict
from contextvars import ContextVar
from time import perf_counter
from typing import Any

#: Upper bounds (ms) of the request-time histograms' buckets: few, as every bucket is a
#: line per request type and time in each scrape (writing them out is most of its cost).
BUCKETS_MS = (0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 50.0, 100.0, 500.0, 1000.0, 5000.0, 30000.0)
#: Answered requests are counted in batches of at most this many.
FOLD_EVERY = 4096
#: The parts of a request's time, as Kafka's RequestMetrics splits them.
PHASES = ("requestqueuetimems", "localtimems", "remotetimems", "responsesendtimems",
          "totaltimems")


_BUCKETS_S = tuple(ms / 1000 for ms in BUCKETS_MS)
_LABELS = (*map(str, BUCKETS_MS), "+Inf")


class Histogram:
    """Counts per bucket of ``BUCKETS_MS`` (the last: above them all) and their sum, kept
    in seconds (``sum_ms`` reports it)."""

    __slots__ = ("counts", "sum")

    def __init__(self) -> None:
        self.counts = [0] * (len(BUCKETS_MS) + 1)
        self.sum = 0.0

    def observe(self, seconds: float) -> None:
        self.counts[bisect_left(_BUCKETS_S, seconds)] += 1
        self.sum += seconds

    @property
    def sum_ms(self) -> float:
        return self.sum * 1000

    def cumulative(self) -> list[tuple[str, int]]:
        """Prometheus's buckets: (le, count at or below it), ending with +Inf."""
        total, out = 0, []
        for bound, count in zip(_LABELS, self.counts, strict=True):
            total += count
            out.append((bound, total))
        return out


class RequestTimes:
    """The five time histograms of one request name."""

    __slots__ = ("phases",)

    def __init__(self) -> None:
        self.phases = tuple(Histogram() for _ in PHASES)


class TopicTraffic:
    """Kafka's BrokerTopicMetrics: bytes and messages in, bytes out, per topic."""

    __slots__ = ("bytes_in", "messages_in", "bytes_out")

    def __init__(self) -> None:
        self.bytes_in = 0
        self.messages_in = 0
        self.bytes_out = 0


#: The timer of the request in hand (each connection runs in its own task, so context):
#: the purgatory adds to it the time a request waits there (Kafka's remote time).
current_request: ContextVar[RequestTimer | None] = ContextVar("current_request", default=None)


class RequestTimer:
    """One connection's clock: the requests it handled whose answers are not sent yet.

    The connection calls `read` after receiving bytes, `start` and `handled` around a
    request's handler, and `sent` once its queued answers are written.
    """

    __slots__ = ("recorder", "read_at", "remote", "_started", "_unsent")

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder
        self.read_at = perf_counter()
        self.remote = 0.0
        self._started = 0.0
        self._unsent: list[tuple[str, int, float, float, float, float]] = []
        current_request.set(self)

    def read(self) -> None:
        self.read_at = perf_counter()

    def start(self) -> None:
        self.remote = 0.0
        self._started = perf_counter()

    def handled(self, request: Any) -> None:
        """The handler of ``request`` returned; its answer waits to be sent."""
        self._unsent.append((self.recorder.name(request), request.api_version, self.read_at,
                             self._started, perf_counter(), self.remote))

    def sent(self) -> None:
        if self._unsent:
            self.recorder.sent(self._unsent, perf_counter())
            self._unsent = []


def wait_started() -> float:
    """Before waiting in the purgatory: the time, for `wait_ended`."""
    return perf_counter()


def wait_ended(started: float) -> None:
    """After waiting: count the wait as the current request's remote time."""
    timer = current_request.get()
    if timer is not None:
        timer.remote += perf_counter() - started


class Recorder:
    """Every counter the broker bumps as it works; read by the collector at scrape."""

    def __init__(self, api_names: dict[int, str]) -> None:
        self.api_names = api_names
        self.requests: defaultdict[tuple[str, int], int] = defaultdict(int)
        self.errors: defaultdict[tuple[str, str], int] = defaultdict(int)
        self.times: defaultdict[str, RequestTimes] = defaultdict(RequestTimes)
        self.topics: defaultdict[str, TopicTraffic] = defaultdict(TopicTraffic)
        self.connections_created: defaultdict[str, int] = defaultdict(int)
        self.flushes = Histogram()
        self.replication_bytes_out = 0
        self.error_names: dict[int, str] = {}
        # Requests answered, not yet counted: (sent, [(name, version, read, started,
        # handled, remote seconds)]), and how many.
        self._done: list[tuple[float, list[tuple[str, int, float, float, float, float]]]] = []
        self._pending = 0

    # --- requests -------------------------------------------------------------------

    def timer(self) -> RequestTimer:
        """A connection's clock (call from the connection's own task)."""
        return RequestTimer(self)

    def name(self, request: Any) -> str:
        """Kafka's request label: the API's name, Fetch split into consumer and follower."""
        name = self.api_names.get(request.api_key, str(request.api_key))
        if name == "Fetch":
            body = request.body
            # Up to v14 the replica id is a field of its own; from v15 it is in
            # ReplicaState, and the old field reads -1.
            state = getattr(body, "replica_state", None)
            replicas = (getattr(body, "replica_id", None), getattr(state, "replica_id", None))
            follower = any(r is not None and r >= 0 for r in replicas)
            return "FetchFollower" if follower else "FetchConsumer"
        return name

    def sent(self, requests: list[tuple[str, int, float, float, float, float]],
             at: float) -> None:
        """These requests' answers were written ``at``; they are counted in batches
        (`fold`), so the request path only appends."""
        self._done.append((at, requests))
        self._pending += len(requests)
        if self._pending >= FOLD_EVERY:
            self.fold()

    def fold(self) -> None:
        """Count the requests answered since the last fold (the collector calls it)."""
        done, self._done, self._pending = self._done, [], 0
        requests, times, bounds = self.requests, self.times, _BUCKETS_S
        # Unrolled: this runs once per request, and a loop over the five costs double.
        for sent, batch in done:
            for name, version, read_at, started, handled, remote in batch:
                requests[(name, version)] += 1
                read_at = min(read_at, started)
                queue, local, wait, send, total = times[name].phases
                t = started - read_at
                queue.counts[bisect_left(bounds, t)] += 1
                queue.sum += t
                t = max(handled - started - remote, 0.0)
                local.counts[bisect_left(bounds, t)] += 1
                local.sum += t
                wait.counts[bisect_left(bounds, remote)] += 1
                wait.sum += remote
                t = sent - handled
                send.counts[bisect_left(bounds, t)] += 1
                send.sum += t
                t = sent - read_at
                total.counts[bisect_left(bounds, t)] += 1
                total.sum += t

    def error(self, request_name: str, error_code: int) -> None:
        """A response (or one partition of it) carried ``error_code`` (not NONE)."""
        self.errors[(request_name, self.error_name(error_code))] += 1

    def error_name(self, code: int) -> str:
        """Kafka's error label (``Errors.name()``), e.g. ``NOT_LEADER_OR_FOLLOWER``."""
        name = self.error_names.get(code)
        if name is None:
            from kafka.errors import for_code

            name = getattr(for_code(code), "message", None) or f"UNKNOWN_{code}"
            self.error_names[code] = name
        return name

    # --- traffic and the rest -------------------------------------------------------

    def produced(self, topic: str, size: int, messages: int) -> None:
        traffic = self.topics[topic]
        traffic.bytes_in += size
        traffic.messages_in += messages

    def fetched(self, topic: str, size: int, follower: bool = False) -> None:
        if follower:
            self.replication_bytes_out += size
        else:
            self.topics[topic].bytes_out += size

    def bytes_in_out(self) -> tuple[int, int]:
        """This broker's bytes appended by producers and record bytes sent to consumers,
        over all topics since start (the console's throughput chart)."""
        traffic = list(self.topics.values())
        return sum(t.bytes_in for t in traffic), sum(t.bytes_out for t in traffic)

    def connection_created(self, listener: str) -> None:
        self.connections_created[listener] += 1

    def flushed(self, seconds: float) -> None:
        self.flushes.observe(seconds)



def api_names() -> dict[int, str]:
    """Kafka's request label of each api key (``ApiKeys.name``: Produce, Fetch, ...)."""
    from kafka.protocol.api_key import ApiKey

    return {int(key): key.name for key in ApiKey}
