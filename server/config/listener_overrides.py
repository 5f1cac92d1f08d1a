"""``listener.name.<listener>.<key>`` settings: a key set for one listener only, as Kafka
reads them (``valuesWithPrefixOverride``): the listener's value wins over the broker's.
A SASL mechanism's settings carry the mechanism too:
``listener.name.<listener>.<mechanism>.sasl.jaas.config``."""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from josefk.server.config.keys import BROKER_KEYS
from josefk.server.config.values import parse_value

logger = logging.getLogger(__name__)

PREFIX = "listener.name."
# <mechanism>.sasl.jaas.config and the other per-mechanism keys.
_MECHANISM_KEY = re.compile(r"([a-z0-9-]+)\.(sasl\.[a-z.]+)")


@dataclass(frozen=True)
class ListenerOverrides:
    """The ``listener.name.`` settings, by listener name (upper case) and key."""

    raw: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    @classmethod
    def take(cls, props: dict[str, str]) -> ListenerOverrides:
        """Remove the ``listener.name.`` keys from ``props`` and parse them."""
        found: dict[str, dict[str, str]] = {}
        for key in [k for k in props if k.startswith(PREFIX)]:
            raw = props.pop(key)
            listener, _, rest = key[len(PREFIX):].partition(".")
            if not listener or not rest:
                logger.warning("The configuration '%s' was supplied but isn't a known config.",
                               key)
                continue
            spec = BROKER_KEYS.get(rest)
            if spec is not None:
                parse_value(key, raw, spec.type, spec.validator)
            elif not _MECHANISM_KEY.fullmatch(rest):
                logger.warning("The configuration '%s' was supplied but isn't a known config.",
                               key)
                continue
            found.setdefault(listener.upper(), {})[rest] = raw
        return cls(found)

    def value(self, listener: str, key: str, default: Any) -> Any:
        """The listener's parsed value of ``key``, or ``default`` (the broker's)."""
        raw = self.raw.get(listener.upper(), {}).get(key)
        if raw is None:
            return default
        spec = BROKER_KEYS[key]
        return parse_value(f"{PREFIX}{listener.lower()}.{key}", raw, spec.type, spec.validator)

    def mechanism_value(self, listener: str, mechanism: str, key: str) -> str | None:
        """``listener.name.<listener>.<mechanism>.<key>`` as given, or None."""
        return self.raw.get(listener.upper(), {}).get(f"{mechanism.lower()}.{key}")
