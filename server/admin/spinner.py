"""A spinner on stderr while an operation waits, only when stderr is a terminal."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from typing import TextIO, TypeVar

import outcome
import trio

T = TypeVar("T")
FRAMES = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"


async def spinning(message: str, operation: Callable[[], Awaitable[T]],
                   stream: TextIO | None = None) -> T:
    """``await operation()``, with ``message`` and a spinner on ``stream`` (stderr) if
    it is a terminal; the line is cleared afterwards. Errors pass through unwrapped."""
    stream = stream or sys.stderr
    if not stream.isatty():
        return await operation()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_spin, message, stream)
        result = await outcome.acapture(operation)
        nursery.cancel_scope.cancel()
    stream.write("\r\x1b[K")
    stream.flush()
    return result.unwrap()


async def _spin(message: str, stream: TextIO) -> None:
    frame = 0
    while True:
        stream.write(f"\r{FRAMES[frame % len(FRAMES)]} {message}")
        stream.flush()
        frame += 1
        await trio.sleep(0.1)
