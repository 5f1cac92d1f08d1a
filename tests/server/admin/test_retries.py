"""The admin client's retries: what a moving leader or coordinator makes fail for a
moment is tried again until ``timeout_s``; anything else fails at once."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
import trio

from josefk.server.admin.brokers import Brokers
from josefk.server.admin.errors import AdminError
from josefk.server.security.client import PLAINTEXT_PEERS


def brokers(timeout_s: float = 5.0) -> Brokers:
    return Brokers([("127.0.0.1", 9)], PLAINTEXT_PEERS, "test", timeout_s)


def failing(errors: list[str],
            answer: str = "ok") -> tuple[Callable[[], Awaitable[str]], list[float]]:
    """An attempt that fails with ``errors`` in turn, then answers; and its call times."""
    calls: list[float] = []

    async def attempt() -> str:
        calls.append(trio.current_time())
        if len(calls) <= len(errors):
            raise AdminError(errors[len(calls) - 1], "not now")
        return answer

    return attempt, calls


@pytest.mark.parametrize("error", ["NOT_COORDINATOR", "COORDINATOR_LOAD_IN_PROGRESS",
                                   "NOT_LEADER_OR_FOLLOWER", "NETWORK_EXCEPTION"])
async def test_retriable_errors_are_retried(error: str, autojump_clock: trio.abc.Clock) -> None:
    attempt, calls = failing([error, error, error])
    assert await brokers().retrying(attempt) == "ok"
    assert len(calls) == 4
    pauses = [b - a for a, b in zip(calls, calls[1:], strict=False)]
    assert pauses == sorted(pauses) and pauses[0] > 0  # growing pauses


async def test_other_errors_fail_at_once(autojump_clock: trio.abc.Clock) -> None:
    attempt, calls = failing(["TOPIC_ALREADY_EXISTS"])
    with pytest.raises(AdminError, match="TOPIC_ALREADY_EXISTS"):
        await brokers().retrying(attempt)
    assert len(calls) == 1


async def test_gives_up_after_timeout(autojump_clock: trio.abc.Clock) -> None:
    attempt, calls = failing(["NOT_COORDINATOR"] * 1000)
    start = trio.current_time()
    with pytest.raises(AdminError, match="NOT_COORDINATOR"):
        await brokers(timeout_s=5.0).retrying(attempt)
    assert 4.0 <= trio.current_time() - start <= 5.0
    assert 5 < len(calls) < 1000
