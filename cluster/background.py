"""Background work that must never take the broker down: a failure is logged and the
work goes on (as Kafka's KafkaScheduler logs an uncaught exception of a scheduled task,
which runs again at its next period)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator

import trio


@contextlib.contextmanager
def failures_logged(logger: logging.Logger, what: str) -> Iterator[None]:
    """Log an exception raised inside (with its traceback) instead of raising it."""
    try:
        yield
    except Exception:
        logger.exception("%s failed", what)


async def every(interval_s: float, job: Callable[[], None], logger: logging.Logger,
                what: str) -> None:
    """Run ``job`` every ``interval_s`` seconds until cancelled; a failed run is logged."""
    while True:
        await trio.sleep(interval_s)
        with failures_logged(logger, what):
            job()
