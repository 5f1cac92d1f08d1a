"""Imported at start-up by a josefk broker that the chaos harness runs under libfaketime
(``clock.py`` puts this folder on its PYTHONPATH).

libfaketime 0.9.10 (Debian 12) with FAKETIME_DONT_FAKE_MONOTONIC hands the kernel a
negative deadline for ``clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME)``
(wolfcw/libfaketime#426), which is how ``time.sleep`` sleeps since Python 3.11: every
call fails with EINVAL. A relative ``select`` timeout is left alone, so sleep on that.
"""

import select
import time


def _sleep(seconds: float) -> None:
    if seconds < 0:
        raise ValueError("sleep length must be non-negative")
    select.select([], [], [], seconds)


time.sleep = _sleep
