"""Fixtures of the server tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

from josefk.server.broker import Broker
from josefk.server.config import load_config


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    """A broker with the defaults, in-process, on an ephemeral port of 127.0.0.1."""
    config = load_config(None, {"listeners": "PLAINTEXT://127.0.0.1:0",
                                "log.dirs": str(tmp_path / "data")})
    async with trio.open_nursery() as nursery:
        yield await nursery.start(Broker(config).serve)
        nursery.cancel_scope.cancel()
