"""One josefk broker inside the test process, on a thread with its own ``trio.run``.

In-process because that is what makes a fixture cheap: no Python interpreter to start
and no josefk to import per broker, so a broker serves within milliseconds of being
asked for, and it works the same under a plain, a pytest-trio or an asyncio test (the
broker's event loop is never the test's). The cluster runs brokers as processes
instead (:mod:`josefk.testing.cluster`).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

# What a test wants fast on one broker (Kafka's own test harness sets the same): no
# wait before a group's first rebalance, internal topics that fit on one broker.
FAST_SETTINGS = {
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "5",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "5",
}
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 30.0


class BrokerCrashed(RuntimeError):
    """The broker's ``trio.run`` ended with an error (the cause is chained)."""


class InProcessBroker:
    """A josefk broker on 127.0.0.1 (an ephemeral port) with its data in ``data_dir``.

    ``overrides`` are Kafka config keys on top of :data:`FAST_SETTINGS`.
    """

    def __init__(self, data_dir: Path, overrides: Mapping[str, str] | None = None) -> None:
        self.config = {**FAST_SETTINGS, "listeners": "PLAINTEXT://127.0.0.1:0",
                       "log.dirs": str(data_dir), **(overrides or {})}
        self.broker: Any = None  # josefk.server.broker.Broker once serving
        self.bootstrap = ""
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._token: Any = None
        self._scope: Any = None
        self._error: BaseException | None = None

    def start(self, timeout: float = START_TIMEOUT_S) -> str:
        """Start serving; return the bootstrap address once the listener is bound."""
        from josefk.server.config.broker import load_config

        config = load_config(None, self.config)  # ConfigError here, in the test's thread
        self._thread = threading.Thread(target=self._run, args=(config,),
                                        name=f"josefk-broker-{id(self):x}", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout):
            self.stop()
            raise BrokerCrashed(f"the broker did not start serving within {timeout:g} s")
        self.raise_if_crashed()
        return self.bootstrap

    def _run(self, config: Any) -> None:
        import trio

        try:
            trio.run(self._serve, config)
        except BaseException as e:  # noqa: BLE001 - reported to the test by raise_if_crashed
            self._error = e
        finally:
            self._ready.set()

    async def _serve(self, config: Any) -> None:
        import trio

        from josefk.server.broker import Broker

        self._token = trio.lowlevel.current_trio_token()
        async with trio.open_nursery() as nursery:
            self._scope = nursery.cancel_scope
            self.broker = await nursery.start(Broker(config).serve)
            endpoint = self.broker.local_broker
            self.bootstrap = f"{endpoint.host}:{endpoint.port}"
            self._ready.set()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def raise_if_crashed(self) -> None:
        """Raise :class:`BrokerCrashed` if the broker's event loop ended with an error."""
        if self._error is not None:
            error, self._error = self._error, None
            causes = "; ".join(f"{type(e).__name__}: {e}" for e in _leaves(error))
            raise BrokerCrashed(f"the josefk broker failed: {causes}") from error

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> None:
        """Cancel the broker (it flushes and writes its checkpoints) and join its thread;
        then raise if it crashed at any point."""
        import trio

        if self._thread is None:
            return
        if self._token is not None and self._scope is not None:
            # RunFinishedError: it ended by itself, and raise_if_crashed says why.
            with contextlib.suppress(trio.RunFinishedError):
                self._token.run_sync_soon(self._scope.cancel)
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise BrokerCrashed(f"the broker did not stop within {timeout:g} s")
        self._thread = None
        self.raise_if_crashed()


def _leaves(error: BaseException) -> list[BaseException]:
    """The plain exceptions inside (nested) exception groups, trio's nurseries' way."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in _leaves(inner)]
    return [error]


class BrokerAddress(str):
    """What ``kafka_broker`` yields: the bootstrap address ``"127.0.0.1:PORT"``, usable
    wherever a string is, with the broker's helpers on it."""

    broker: InProcessBroker

    def __new__(cls, broker: InProcessBroker) -> BrokerAddress:
        address = super().__new__(cls, broker.bootstrap)
        address.broker = broker
        return address

    @property
    def bootstrap(self) -> str:
        return str(self)

    @property
    def data_dir(self) -> Path:
        return Path(self.broker.config["log.dirs"])

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = 1,
                     config: Mapping[str, str] | None = None) -> None:
        """Create a topic; return once the broker has each partition's leader."""
        from josefk.testing.admin import create_topic

        create_topic(self.bootstrap, name, partitions, replication_factor, config)
