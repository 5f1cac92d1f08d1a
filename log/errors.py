"""The errors of appending to and reading from a log, with their Kafka error codes."""

from __future__ import annotations

from josefk.protocol.record_batch import InvalidRecordError, RecordBatchError


class OffsetOutOfRangeError(Exception):
    """A read or DeleteRecords outside [log start offset, log end offset] (error 1)."""

    error_code = 1


class RecordTooLargeError(RecordBatchError):
    """A batch above ``max.message.bytes`` (MESSAGE_TOO_LARGE)."""

    error_code = 10


class InvalidTimestampError(RecordBatchError):
    """A CreateTime too far from the broker's clock (INVALID_TIMESTAMP)."""

    error_code = 32


class RecordValidationError(InvalidRecordError):
    """Records Kafka rejects one by one (INVALID_RECORD with per-record errors, Produce
    v8+ ``record_errors``): ``record_errors`` holds (index in the batch, message)."""

    def __init__(self, record_errors: list[tuple[int, str]]) -> None:
        shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')"
                          for i, m in record_errors[:3])
        super().__init__(f"One or more records have been rejected due to {len(record_errors)} "
                         f"record errors in total, and only showing the first three errors at "
                         f"most: [{shown}]")
        self.record_errors = record_errors


class RecordListTooLargeError(RecordBatchError):
    """Records larger than a whole segment (RECORD_LIST_TOO_LARGE)."""

    error_code = 18


class StorageError(OSError):
    """A log file could not be opened or written (KAFKA_STORAGE_ERROR): the request that
    needed it fails, the broker and its other partitions go on."""

    error_code = 56
