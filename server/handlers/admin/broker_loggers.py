"""BROKER_LOGGER config resources: the broker's log levels at runtime, as Kafka's
``Log4jController`` and ``RuntimeLoggerManager`` answer them (``kafka-configs.sh
--entity-type broker-loggers``). The loggers are Python's; Kafka's level names map to
Python's levels (WARN is WARNING, FATAL is CRITICAL, TRACE is below DEBUG)."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from josefk.server.handlers.admin.config_changes import APPEND, DELETE, OP_NAMES, SET, SUBTRACT

ROOT = "root"
TRACE = 5
LEVELS = {"FATAL": logging.CRITICAL, "ERROR": logging.ERROR, "WARN": logging.WARNING,
          "INFO": logging.INFO, "DEBUG": logging.DEBUG, "TRACE": TRACE}
_NAMES = {level: name for name, level in LEVELS.items()}
VALID_LEVELS = ", ".join(sorted(LEVELS))


class LoggerError(Exception):
    """A change Kafka refuses: ``invalid_request`` (INVALID_REQUEST), else INVALID_CONFIG."""

    def __init__(self, message: str, invalid_request: bool = False) -> None:
        super().__init__(message)
        self.invalid_request = invalid_request


def level_name(level: int) -> str:
    """Kafka's name of a Python level (the nearest named level at or above it)."""
    return next((_NAMES[x] for x in sorted(_NAMES) if level <= x), "FATAL")


def _python_loggers() -> dict[str, logging.Logger]:
    return {name: x for name, x in logging.root.manager.loggerDict.items()
            if isinstance(x, logging.Logger)}


def loggers() -> dict[str, str]:
    """Every logger's effective level (``Log4jController.loggers``), the root's as "root"."""
    found = {name: level_name(x.getEffectiveLevel()) for name, x in _python_loggers().items()}
    found[ROOT] = level_name(logging.root.level)
    return dict(sorted(found.items()))


def _exists(name: str) -> None:
    if name != ROOT and name not in _python_loggers():
        raise LoggerError(f"Logger {name} does not exist!")


def validate(changes: Iterable[tuple[str, int, str | None]]) -> None:
    """``RuntimeLoggerManager.validateLogLevelConfigs``; LoggerError with Kafka's message."""
    for name, op, value in changes:
        if op == SET:
            _exists(name)
            if value not in LEVELS:
                raise LoggerError(f"Cannot set the log level of {name} to {value} as it is not "
                                  f"a supported log level. Valid log levels are {VALID_LEVELS}")
        elif op == DELETE:
            _exists(name)
            if name == ROOT:
                raise LoggerError(f"Removing the log level of the {ROOT} logger is not allowed",
                                  invalid_request=True)
        elif op in (APPEND, SUBTRACT):
            raise LoggerError(f"{OP_NAMES[op]} operation is not "
                              "allowed for the BROKER_LOGGER resource", invalid_request=True)
        else:
            raise LoggerError(f"Unknown operation type {op} is not allowed for the "
                              "BROKER_LOGGER resource", invalid_request=True)


def apply(changes: Iterable[tuple[str, int, str | None]], log: logging.Logger) -> None:
    """Set (SET) or unset (DELETE: inherit again) each logger's level."""
    for name, op, value in changes:
        target = logging.root if name == ROOT else logging.getLogger(name)
        if op == SET:
            assert value is not None
            target.setLevel(LEVELS[value])
            log.warning("Updated the log level of %s to %s", name, value)
        else:
            target.setLevel(logging.NOTSET)
            log.warning("Unset the log level of %s", name)


