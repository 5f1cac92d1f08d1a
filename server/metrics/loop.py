"""How idle the event loop is: Kafka's NetworkProcessorAvgIdlePercent for one trio thread."""

from __future__ import annotations

from time import perf_counter

import trio

#: The instrument listens for this long...
WINDOW_S = 1.0
#: ...once every this many seconds: trio calls an instrument's hooks on every pass of its
#: scheduler, which costs a loop that passes often about a third more per pass, so
#: the idle share is sampled rather than followed throughout.
EVERY_S = 10.0


class IdleInstrument(trio.abc.Instrument):
    """Adds up the time trio waits for I/O (asleep in epoll) while it is installed: two
    clock reads per scheduler pass, never per task step."""

    def __init__(self) -> None:
        self.idle = 0.0
        self._waiting_since = 0.0
        #: The idle share of the last window (None before the first one ends).
        self.ratio: float | None = None

    def before_io_wait(self, timeout: float) -> None:
        self._waiting_since = perf_counter()

    def after_io_wait(self, timeout: float) -> None:
        self.idle += perf_counter() - self._waiting_since

    async def sample(self, window_s: float = WINDOW_S, every_s: float = EVERY_S) -> None:
        """Until cancelled: every `every_s`, measure the idle share over `window_s`."""
        while True:
            self.idle = 0.0
            began = perf_counter()
            trio.lowlevel.add_instrument(self)
            try:
                await trio.sleep(window_s)
            finally:
                trio.lowlevel.remove_instrument(self)
            self.ratio = min(1.0, max(0.0, self.idle / (perf_counter() - began)))
            await trio.sleep(max(every_s - window_s, 0.0))
