"""Fixtures shared by the whole test suite."""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

from josefk.server.broker import Broker
from josefk.server.config.broker import load_config

REPO = Path(__file__).resolve().parents[1]
KAFKA_LIBS = REPO / ".cache" / "kafka" / "libs"


def require_kafka_jars() -> Path:
    """The Apache Kafka jars dir; skips without java or jars, or fails under
    ``JOSEFK_REQUIRE_KAFKA=1`` (set by ``make test``, which fetches them first)."""
    missing = None
    if shutil.which("java") is None:
        missing = "no java on PATH"
    elif not list(KAFKA_LIBS.glob("kafka-storage-*.jar")):
        missing = f"no Apache Kafka jars in {KAFKA_LIBS} (run tools/kafka/fetch.sh)"
    if missing is not None:
        if os.environ.get("JOSEFK_REQUIRE_KAFKA") == "1":
            pytest.fail(missing + " and JOSEFK_REQUIRE_KAFKA=1")
        pytest.skip(missing)
    return KAFKA_LIBS


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    """A broker with the defaults, in-process, on an ephemeral port of 127.0.0.1."""
    config = load_config(None, {"listeners": "PLAINTEXT://127.0.0.1:0",
                                "log.dirs": str(tmp_path / "data")})
    async with trio.open_nursery() as nursery:
        yield await nursery.start(Broker(config).serve)
        nursery.cancel_scope.cancel()
