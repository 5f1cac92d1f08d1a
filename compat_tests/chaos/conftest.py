"""The chaos tests start their own ZooKeeper and brokers: no single-broker fixture here."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _broker_still_running() -> Iterator[None]:
    """Overrides compat_tests/conftest.py's fixture, which would start the single broker."""
    yield
