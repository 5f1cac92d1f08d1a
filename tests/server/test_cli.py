"""The ``josefk`` command line: the open file limit raised at start-up."""

from __future__ import annotations

import logging
import resource

import pytest

from josefk.server import cli


class FakeLimits:
    """getrlimit/setrlimit for RLIMIT_NOFILE, refusing when ``refuse`` says so."""

    def __init__(self, soft: int, hard: int, refuse: bool = False) -> None:
        self.limits = (soft, hard)
        self.refuse = refuse

    def getrlimit(self, which: int) -> tuple[int, int]:
        assert which == resource.RLIMIT_NOFILE
        return self.limits

    def setrlimit(self, which: int, limits: tuple[int, int]) -> None:
        assert which == resource.RLIMIT_NOFILE
        if self.refuse:
            raise ValueError("not allowed to raise maximum limit")
        self.limits = limits


def run(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
        limits: FakeLimits) -> list[logging.LogRecord]:
    monkeypatch.setattr(cli.resource, "getrlimit", limits.getrlimit)
    monkeypatch.setattr(cli.resource, "setrlimit", limits.setrlimit)
    with caplog.at_level(logging.INFO, logger="josefk"):
        cli.raise_fd_limit()
    return [r for r in caplog.records if "RLIMIT_NOFILE" in r.getMessage()]


def test_the_soft_limit_is_raised_to_the_hard_one(monkeypatch: pytest.MonkeyPatch,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    limits = FakeLimits(1024, 20000)
    [record] = run(monkeypatch, caplog, limits)
    assert limits.limits == (20000, 20000)
    assert record.levelno == logging.INFO
    assert "from 1024 to 20000" in record.getMessage()


def test_a_refusal_is_a_warning(monkeypatch: pytest.MonkeyPatch,
                                caplog: pytest.LogCaptureFixture) -> None:
    limits = FakeLimits(1024, resource.RLIM_INFINITY, refuse=True)
    [record] = run(monkeypatch, caplog, limits)
    assert limits.limits == (1024, resource.RLIM_INFINITY)
    assert record.levelno == logging.WARNING
    assert "from 1024 to unlimited" in record.getMessage()


def test_nothing_to_raise_is_said_once(monkeypatch: pytest.MonkeyPatch,
                                       caplog: pytest.LogCaptureFixture) -> None:
    [record] = run(monkeypatch, caplog, FakeLimits(4096, 4096))
    assert record.levelno == logging.INFO
    assert "is 4096" in record.getMessage()


def test_the_real_limit_ends_at_the_hard_limit() -> None:
    before_soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        cli.raise_fd_limit()
        assert resource.getrlimit(resource.RLIMIT_NOFILE) == (hard, hard)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (before_soft, hard))
