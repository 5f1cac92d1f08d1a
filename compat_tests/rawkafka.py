"""A tiny blocking Kafka protocol client for checks no stock client exposes.

Requests and responses are kafka-python's protocol classes; this module only
frames them over one socket. ApiVersions v0 is encoded by hand so a broker can
be probed before anything else is known about it.
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass
from typing import Any

from kafka.protocol.consumer import FetchRequest
from kafka.protocol.metadata import MetadataRequest
from kafka.record import MemoryRecords

API_VERSIONS_KEY = 18


def split_hostport(bootstrap: str) -> tuple[str, int]:
    """``'host:port'`` (the first of a comma-separated list) -> ``(host, port)``."""
    first = bootstrap.split(",")[0].strip()
    host, _, port = first.rpartition(":")
    return host.strip("[]"), int(port)


@dataclass(frozen=True)
class FetchedPartition:
    """One partition of a Fetch response."""

    error_code: int
    high_watermark: int
    log_start_offset: int
    records: bytes


@dataclass(frozen=True)
class BatchInfo:
    """The header fields of one record batch as the broker returned it."""

    base_offset: int
    next_offset: int
    codec: int
    timestamp_type: int
    record_count: int
    producer_id: int
    base_sequence: int


def parse_batches(records: bytes) -> list[BatchInfo]:
    """Batch headers of the complete batches in a Fetch response's ``records``."""
    out = []
    memory = MemoryRecords(records)
    while True:
        batch = memory.next_batch()
        if batch is None:
            return out
        count = sum(1 for _ in batch)
        out.append(
            BatchInfo(
                base_offset=batch.base_offset,
                next_offset=batch.next_offset,
                codec=batch.compression_type,
                timestamp_type=batch.timestamp_type,
                record_count=count,
                producer_id=batch.producer_id,
                base_sequence=batch.base_sequence,
            )
        )


class RawConnection:
    """One socket to a broker; ``request`` sends one request and reads its response."""

    def __init__(self, bootstrap: str, timeout: float = 10.0, client_id: str = "compat-raw"):
        host, port = split_hostport(bootstrap)
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.client_id = client_id
        self._correlation_id = 0
        self._versions: dict[int, tuple[int, int]] | None = None

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def settimeout(self, timeout: float) -> None:
        self.sock.settimeout(timeout)

    def _next_id(self) -> int:
        self._correlation_id += 1
        return self._correlation_id

    def _read_exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError(f"broker closed the connection after {len(buf)}/{n} bytes")
            buf += chunk
        return bytes(buf)

    def _read_frame(self) -> bytes:
        (size,) = struct.unpack(">i", self._read_exact(4))
        return self._read_exact(size)

    def api_versions(self) -> dict[int, tuple[int, int]]:
        """ApiVersions v0 (hand-encoded): ``{api_key: (min_version, max_version)}``."""
        if self._versions is None:
            cid = self._next_id()
            client = self.client_id.encode()
            body = struct.pack(">hhih", API_VERSIONS_KEY, 0, cid, len(client)) + client
            self.sock.sendall(struct.pack(">i", len(body)) + body)
            frame = self._read_frame()
            got_cid, error, count = struct.unpack_from(">ihi", frame, 0)
            if got_cid != cid:
                raise ConnectionError(f"correlation id {got_cid}, expected {cid}")
            if error != 0:
                raise ConnectionError(f"ApiVersions v0 error code {error}")
            versions = {}
            for i in range(count):
                key, lo, hi = struct.unpack_from(">hhh", frame, 10 + 6 * i)
                versions[key] = (lo, hi)
            self._versions = versions
        return self._versions

    def pick_version(self, request_class: Any, lowest: int, highest: int) -> int:
        """The highest version both we (``lowest..highest``) and the broker support."""
        lo, hi = self.api_versions().get(request_class.API_KEY, (-1, -1))
        version = min(hi, highest, request_class.max_version)
        if version < max(lo, lowest):
            raise AssertionError(
                f"{request_class.__name__}: broker supports v{lo}..v{hi}, "
                f"test needs v{lowest}..v{highest}"
            )
        return version

    def request(self, request: Any, version: int) -> Any:
        """Send ``request`` at ``version`` and return the decoded response."""
        cid = self._next_id()
        request.with_header(correlation_id=cid, client_id=self.client_id)
        self.sock.sendall(request.encode(version=version, header=True, framed=True))
        frame = self._read_frame()
        response_class = request.header.get_response_class()
        decoded = response_class.decode(frame, version=version, header=True)
        if decoded.header.correlation_id != cid:
            raise ConnectionError(f"correlation id {decoded.header.correlation_id}, expected {cid}")
        return decoded

    def fetch(
        self,
        topic: str,
        partition: int,
        offset: int,
        max_wait_ms: int = 0,
        min_bytes: int = 1,
        max_bytes: int = 50 * 1024 * 1024,
    ) -> FetchedPartition:
        """A sessionless Fetch (by topic name, v4..v12) of one partition."""
        version = self.pick_version(FetchRequest, 4, 12)
        part = FetchRequest.FetchTopic.FetchPartition(
            partition=partition,
            current_leader_epoch=-1,
            fetch_offset=offset,
            last_fetched_epoch=-1,
            log_start_offset=-1,
            partition_max_bytes=max_bytes,
        )
        request = FetchRequest(
            replica_id=-1,
            max_wait_ms=max_wait_ms,
            min_bytes=min_bytes,
            max_bytes=max_bytes,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            topics=[FetchRequest.FetchTopic(topic=topic, partitions=[part])],
            forgotten_topics_data=[],
            rack_id="",
        )
        response = self.request(request, version)
        if response.error_code:
            raise AssertionError(f"Fetch top-level error code {response.error_code}")
        [topic_response] = response.responses
        [data] = topic_response.partitions
        return FetchedPartition(
            error_code=data.error_code,
            high_watermark=data.high_watermark,
            log_start_offset=data.log_start_offset,
            records=bytes(data.records or b""),
        )

    def all_batches(self, topic: str, partition: int = 0) -> list[BatchInfo]:
        """Every batch of a partition from its log start to its high watermark."""
        first = self.fetch(topic, partition, 0, max_bytes=1)
        offset = 0 if first.error_code else first.log_start_offset
        batches: list[BatchInfo] = []
        while True:
            got = self.fetch(topic, partition, offset)
            if got.error_code:
                raise AssertionError(f"Fetch {topic}-{partition}@{offset}: error {got.error_code}")
            if offset >= got.high_watermark:
                return batches
            new = parse_batches(got.records)
            if not new:
                raise AssertionError(f"Fetch {topic}-{partition}@{offset} returned no batch")
            batches.extend(new)
            offset = new[-1].next_offset

    def broker_count(self) -> int:
        """Brokers in a Metadata response for no topics."""
        version = self.pick_version(MetadataRequest, 1, 12)
        response = self.request(MetadataRequest(topics=[]), version)
        return len(response.brokers)
