"""Give memory the broker has freed back to the system, so its resident size follows what
it holds.

glibc's malloc keeps what is freed in its arenas for reuse, and hands it back only from
the top of the main heap; a burst of large buffers (fetch answers, a follower's catch-up
reads, producer-state loads at a leadership change) leaves free pages between live ones
that stay resident for ever. In a soak's brokers ``malloc_trim(0)`` gave back 12-14 MB at
once (their traced Python heap had grown about 1 MB in 25 minutes while RSS rose 11-14 MB).
So every TRIM_S the broker calls it, in a worker thread (ctypes releases the GIL, so the
event loop runs on; 1-8 ms on a 66 MB heap of mixed buffers, the first trim the longest).

``malloc_trim`` does not shrink the top of the other arenas glibc gives threads (up to
eight per core): each keeps free memory at its top up to the trim threshold, which glibc
raises to twice the largest freed mmap'd buffer. In a soak's brokers six or seven arenas
(the worker threads', kazoo's) grew from 132 kB to about 2 MB each, almost all of it one
free chunk at the top, which ``malloc_trim`` left resident (the README's soak section). The
GIL serializes nearly all of a broker's allocations anyway, so the broker asks for one
arena (``mallopt(M_ARENA_MAX, 1)``) before it starts a thread, and the trim reaches it all.

Only with glibc; elsewhere (musl, macOS) nothing. As with the collector (``heap.py``),
only a broker that owns its process (``josefk serve``) does either.
"""

from __future__ import annotations

import ctypes
import logging
import os
import sys
import threading
from collections.abc import Callable

import trio

logger = logging.getLogger(__name__)

#: Seconds between trims.
TRIM_S = 60.0
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


#: glibc's mallopt parameter for the most arenas (malloc.h).
M_ARENA_MAX = -8


def _libc(name: str, *argtypes: type) -> Callable[..., int] | None:
    """The C library's function ``name``, or None where there is none (not glibc)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        fn = getattr(ctypes.CDLL(None), name)
    except (OSError, AttributeError):
        return None
    fn.argtypes = list(argtypes)
    fn.restype = ctypes.c_int
    return fn


def malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or None where the C library has none."""
    return _libc("malloc_trim", ctypes.c_size_t)


def one_arena() -> bool:
    """Have every thread started from now on allocate from the main arena, which the trim
    reaches (the module's docstring); only from a broker that owns its process (the main
    thread). True if glibc took it."""
    mallopt = _libc("mallopt", ctypes.c_int, ctypes.c_int)
    if mallopt is None or threading.current_thread() is not threading.main_thread():
        return False
    return mallopt(M_ARENA_MAX, 1) == 1


def anonymous_bytes() -> int:
    """The process's resident memory that is not file-backed (statm resident - shared)."""
    with open("/proc/self/statm") as statm:
        fields = statm.read().split()
    return (int(fields[1]) - int(fields[2])) * _PAGE


def trim_once(trim: Callable[[int], int]) -> int:
    """Trim; the bytes it gave back (the fall of the anonymous resident size)."""
    before = anonymous_bytes()
    trim(0)
    return max(0, before - anonymous_bytes())


async def keep_trimmed(every_s: float = TRIM_S,
                       trim: Callable[[int], int] | None = None) -> None:
    """Trim every ``every_s`` seconds until cancelled."""
    trim = trim or malloc_trim()
    if trim is None or threading.current_thread() is not threading.main_thread():
        return
    while True:
        await trio.sleep(every_s)
        released = await trio.to_thread.run_sync(trim_once, trim)
        if released:
            logger.debug("gave %.1f MB of freed memory back to the system", released / 1e6)
