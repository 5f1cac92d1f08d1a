"""The broker gives memory it freed back to the system: freed buffers between live ones
stay resident until trimmed."""

from __future__ import annotations

import threading

import pytest
import trio

from josefk.server.trim import anonymous_bytes, keep_trimmed, malloc_trim, trim_once

BUFFER = 64 * 1024  # under glibc's mmap threshold: from the heap, as fetch buffers are
COUNT = 1000


def test_freed_holes_between_live_buffers_are_given_back() -> None:
    trim = malloc_trim()
    if trim is None:
        pytest.skip("no glibc malloc_trim here")
    trim(0)
    buffers = [b"\x01" * BUFFER for _ in range(2 * COUNT)]  # written: resident
    kept = buffers[1::2]
    held = anonymous_bytes()
    del buffers  # every other buffer freed: holes between live ones, not the heap's top
    assert anonymous_bytes() > held - COUNT * BUFFER // 4  # free() kept them resident
    assert trim_once(trim) > COUNT * BUFFER // 2
    assert len(kept) == COUNT


async def test_the_broker_trims_again_and_again() -> None:
    calls: list[int] = []
    with trio.fail_after(30), trio.CancelScope() as scope:
        def trim(pad: int) -> int:
            calls.append(pad)
            if len(calls) == 3:
                trio.from_thread.run_sync(scope.cancel)
            return 1
        await keep_trimmed(0.01, trim)
    assert calls == [0, 0, 0]


async def test_a_broker_on_a_thread_of_its_own_leaves_the_process_alone() -> None:
    calls: list[int] = []

    def in_thread() -> None:
        trio.run(keep_trimmed, 0.01, lambda pad: calls.append(pad) or 1)

    thread = threading.Thread(target=in_thread)
    thread.start()
    thread.join(5)
    assert not thread.is_alive() and calls == []
