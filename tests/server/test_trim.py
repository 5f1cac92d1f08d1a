"""The broker gives memory it freed back to the system: freed buffers between live ones
stay resident until trimmed, and threads allocate from the one arena the trim reaches."""

from __future__ import annotations

import subprocess
import sys
import threading

import pytest
import trio

from josefk.server.trim import anonymous_bytes, keep_trimmed, malloc_trim, one_arena, trim_once

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


CHURN = """
import sys, threading
from josefk.server.trim import anonymous_bytes, malloc_trim, one_arena
if sys.argv[1] == "one":
    assert one_arena()
trim = malloc_trim()
big = bytearray(16 << 20)  # mmap'd: freeing it raises glibc's trim threshold to 32 MB
del big
trim(0)
before = anonymous_bytes()

def churn():
    chunks = [b"\\x01" * (64 << 10) for _ in range(320)]  # 20 MB from a thread's arena
    del chunks

thread = threading.Thread(target=churn)
thread.start()
thread.join()
trim(0)
print((anonymous_bytes() - before) >> 20)
"""


def _kept_after_a_thread(mode: str) -> int:
    """MB still resident after a thread allocated and freed 20 MB and a trim, in a
    fresh process (``mode`` "one": the broker's single arena)."""
    out = subprocess.run([sys.executable, "-c", CHURN, mode], capture_output=True,
                         text=True, timeout=60, check=True)
    return int(out.stdout)


def test_with_one_arena_the_trim_reaches_what_threads_freed() -> None:
    if malloc_trim() is None:
        pytest.skip("no glibc malloc_trim here")
    one, many = _kept_after_a_thread("one"), _kept_after_a_thread("many")
    assert one <= 2
    # Without it the thread's arena keeps what it freed at its top, out of the trim's
    # reach (glibc 2.36: 13 of the 20 MB).
    assert many >= one + 8


def test_a_broker_on_a_thread_of_its_own_leaves_the_arenas_alone() -> None:
    taken: list[bool] = []
    thread = threading.Thread(target=lambda: taken.append(one_arena()))
    thread.start()
    thread.join(5)
    assert taken == [False]
