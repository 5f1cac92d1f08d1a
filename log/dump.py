"""``josefk dump-log``: print segments and check their indexes, like Kafka's DumpLogSegments."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TextIO

from kafka.record.default_records import DefaultRecordBatch

from josefk.log.index.offset import OffsetIndex
from josefk.log.index.time import TimeIndex
from josefk.log.segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX
from josefk.protocol.record_batch import (
    HEADER_SIZE,
    BatchHeader,
    RecordBatchError,
    check_batch,
    parse_header,
    peek_size,
)


def dump_files(paths: list[str], print_records: bool, out: TextIO) -> int:
    """Dump each file; returns 1 if any batch or index entry is invalid, else 0."""
    problems = 0
    for name in paths:
        path = Path(name)
        print(f"Dumping {path}", file=out)
        if not path.exists():
            print(f"error: {path} does not exist", file=out)
            problems += 1
        elif path.suffix == LOG_SUFFIX:
            problems += dump_log(path, print_records, out)
        elif path.suffix == INDEX_SUFFIX:
            problems += dump_offset_index(path, out)
        elif path.suffix == TIME_INDEX_SUFFIX:
            problems += dump_time_index(path, out)
        else:
            print(f"error: {path} is not a .log, .index or .timeindex file", file=out)
            problems += 1
    return 1 if problems else 0


def _base_offset(path: Path) -> int:
    return int(path.stem)


def _read_batches(data: bytes) -> tuple[list[tuple[int, BatchHeader, str | None]], int]:
    """Every batch with its validation error (None if valid), and where valid bytes end."""
    batches: list[tuple[int, BatchHeader, str | None]] = []
    pos = 0
    while pos < len(data):
        size = peek_size(data, pos)
        if size is None or size < HEADER_SIZE or pos + size > len(data):
            break
        header = parse_header(data, pos)
        try:
            check_batch(data, pos, from_client=False)
            error = None
        except RecordBatchError as e:
            error = str(e)
        batches.append((pos, header, error))
        pos += size
    return batches, pos


def dump_log(path: Path, print_records: bool, out: TextIO) -> int:
    data = path.read_bytes()
    print(f"Log starting offset: {_base_offset(path)}", file=out)
    batches, end = _read_batches(data)
    problems = 0
    for pos, h, error in batches:
        time_type = "LogAppendTime" if h.is_log_append_time else "CreateTime"
        print(
            f"baseOffset: {h.base_offset} lastOffset: {h.last_offset} count: {h.record_count} "
            f"baseSequence: {h.base_sequence} lastSequence: {h.last_sequence} "
            f"producerId: {h.producer_id} producerEpoch: {h.producer_epoch} "
            f"partitionLeaderEpoch: {h.partition_leader_epoch} "
            f"isTransactional: {str(h.is_transactional).lower()} "
            f"isControl: {str(h.is_control).lower()} position: {pos} "
            f"{time_type}: {h.max_timestamp} baseTimestamp: {h.base_timestamp} "
            f"size: {h.size} magic: {h.magic} compresscodec: {h.compression_name} "
            f"crc: {h.crc} isvalid: {str(error is None).lower()}",
            file=out,
        )
        if error is not None:
            print(f"error: batch at position {pos}: {error}", file=out)
            problems += 1
        elif print_records:
            _print_records(data[pos : pos + h.size], out)
    if end != len(data):
        print(f"Found {len(data) - end} invalid bytes at the end of {path.name}", file=out)
        problems += 1
    return problems


def _print_records(batch: bytes, out: TextIO) -> None:
    for record in DefaultRecordBatch(batch):
        key = record.key
        value = record.value
        headers = [k for k, _ in record.headers]
        print(
            f"| offset: {record.offset} timestamp: {record.timestamp} "
            f"keySize: {-1 if key is None else len(key)} "
            f"valueSize: {-1 if value is None else len(value)} headerKeys: {headers}",
            file=out,
        )


def _used_entries(entries: list[tuple[int, int]], empty: tuple[int, int], out: TextIO
                  ) -> list[tuple[int, int]]:
    """Drop the zero-filled tail of an active segment's preallocated index."""
    used = len(entries)
    while used > 1 and entries[used - 1] == empty:
        used -= 1
    if used < len(entries):
        print(f"({len(entries) - used} preallocated empty entries not shown)", file=out)
    return entries[:used]


def _log_batches_for(index_path: Path) -> dict[int, BatchHeader] | None:
    log_path = index_path.with_suffix(LOG_SUFFIX)
    if not log_path.exists():
        return None
    batches, _ = _read_batches(log_path.read_bytes())
    return {pos: h for pos, h, _ in batches}


def dump_offset_index(path: Path, out: TextIO) -> int:
    index = OffsetIndex(path, _base_offset(path), os.path.getsize(path), writable=False)
    by_position = _log_batches_for(path)
    problems = 0
    previous = -1
    entries = _used_entries(index.all_entries(), (index.base_offset, 0), out)
    for offset, position in entries:
        print(f"offset: {offset} position: {position}", file=out)
        if offset <= previous:
            print(f"error: index offset {offset} is not above {previous}", file=out)
            problems += 1
        if by_position is not None:
            header = by_position.get(position)
            if header is None or header.last_offset != offset:
                found = "no batch" if header is None else f"last offset {header.last_offset}"
                print(f"error: index entry ({offset}, {position}) does not match the log: "
                      f"{found} at that position", file=out)
                problems += 1
        previous = offset
    index.close()
    return problems


def dump_time_index(path: Path, out: TextIO) -> int:
    index = TimeIndex(path, _base_offset(path), os.path.getsize(path), writable=False)
    by_position = _log_batches_for(path)
    max_by_offset = {}
    if by_position is not None:
        running = -1
        for header in sorted(by_position.values(), key=lambda h: h.base_offset):
            running = max(running, header.max_timestamp)
            max_by_offset[header.last_offset] = (running, header.max_timestamp)
    problems = 0
    previous = None
    entries = _used_entries(index.all_entries(), (0, index.base_offset), out)
    for timestamp, offset in entries:
        print(f"timestamp: {timestamp} offset: {offset}", file=out)
        if previous is not None and timestamp <= previous:
            print(f"error: timestamp {timestamp} is not above {previous}", file=out)
            problems += 1
        if by_position is not None:
            expected = max_by_offset.get(offset)
            if expected is None or expected[1] != timestamp:
                print(f"error: time index entry ({timestamp}, {offset}) does not match the "
                      f"log's batch max timestamp", file=out)
                problems += 1
        previous = timestamp
    index.close()
    return problems
