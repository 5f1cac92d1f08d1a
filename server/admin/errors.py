"""The admin client's one error type."""

from __future__ import annotations


class AdminError(Exception):
    """A request failed: ``error`` is Kafka's error name (UNKNOWN_TOPIC_OR_PARTITION,
    ...) or a client-side one (NETWORK_EXCEPTION, REQUEST_TIMED_OUT, INVALID_CONFIG)."""

    def __init__(self, error: str, message: str) -> None:
        super().__init__(f"{error}: {message}")
        self.error = error
        self.message = message
