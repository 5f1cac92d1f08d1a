"""The spinner: frames on a terminal, nothing elsewhere, errors unwrapped."""

from __future__ import annotations

import io

import pytest
import trio

from josefk.server.admin.errors import AdminError
from josefk.server.admin.spinner import FRAMES, spinning


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


async def test_spins_on_a_terminal_and_clears_the_line() -> None:
    stream = Terminal()

    async def slow() -> int:
        await trio.sleep(0.35)
        return 7

    assert await spinning("waiting for t", slow, stream) == 7
    written = stream.getvalue()
    assert written.count("waiting for t") >= 3
    assert written.startswith(f"\r{FRAMES[0]} waiting for t\r{FRAMES[1]}")
    assert written.endswith("\r\x1b[K")


async def test_silent_when_not_a_terminal() -> None:
    stream = io.StringIO()

    async def quick() -> str:
        await trio.sleep(0.2)
        return "done"

    assert await spinning("waiting", quick, stream) == "done"
    assert stream.getvalue() == ""


async def test_errors_pass_through_unwrapped() -> None:
    stream = Terminal()

    async def failing() -> None:
        await trio.sleep(0.15)
        raise AdminError("REQUEST_TIMED_OUT", "too slow")

    with pytest.raises(AdminError, match="too slow"):
        await spinning("waiting", failing, stream)
    assert stream.getvalue().endswith("\r\x1b[K")
