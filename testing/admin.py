"""Admin calls of the fixtures, made with josefk's admin client from any kind of test.

The admin client is trio code; a fixture helper may be called from a plain test, from
inside a pytest-trio test's event loop or an asyncio one. So each call gets a
``trio.run`` of its own on a short-lived thread, which works in all three.
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

T = TypeVar("T")

ADMIN_TIMEOUT_S = 30.0


def run_trio(fn: Callable[..., Awaitable[T]], *args: Any, timeout: float) -> T:
    """``trio.run(fn, *args)`` on a thread of its own; its result or its exception.

    ``fn`` must bound itself; ``timeout`` (plus a margin) bounds the join regardless.
    """
    import trio

    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = trio.run(fn, *args)
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller's thread
            outcome["error"] = e

    thread = threading.Thread(target=target, name="josefk-testing-admin", daemon=True)
    thread.start()
    thread.join(timeout + 10.0)
    if thread.is_alive():
        raise TimeoutError(f"{getattr(fn, '__name__', fn)} did not return within {timeout:g} s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def create_topic(bootstrap: str, name: str, partitions: int, replication_factor: int,
                 config: Mapping[str, str] | None = None,
                 timeout: float = ADMIN_TIMEOUT_S) -> None:
    """CreateTopics, then wait until every broker's Metadata has each partition's leader."""

    async def create() -> None:
        from josefk.server.admin import open_admin

        async with open_admin(bootstrap, client_id="josefk-testing", timeout_s=timeout) as admin:
            await admin.create_topic(name, partitions, replication_factor, dict(config or {}))
            await admin.wait_for_topic(name, timeout_s=timeout)

    run_trio(create, timeout=2 * timeout)


def cluster_view(bootstrap: str, timeout: float = 5.0) -> Any:
    """The cluster as the broker at ``bootstrap`` sees it (josefk.server.admin's
    ``ClusterView``: brokers, controller id, topics)."""

    async def view() -> Any:
        from josefk.server.admin import open_admin

        async with open_admin(bootstrap, client_id="josefk-testing", timeout_s=timeout) as admin:
            return await admin.cluster()

    return run_trio(view, timeout=timeout)
