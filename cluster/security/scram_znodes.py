"""SCRAM credentials in Kafka 3.9's ZooKeeper layout (``ZkAdminManager
.alterUserScramCredentials``, ``AdminZkClient.changeEntityConfig``, ``ZkData.scala``).

=================================================  ========================================
znode                                              data
=================================================  ========================================
/config/users/<sanitized user>                     {"version":1,"config":{"SCRAM-SHA-256":
                                                   "salt=...,stored_key=...,server_key=...,
                                                   iterations=4096"}} (`encode_user_config`)
/config/changes/config_change_<10 digits>          {"version":2,"entity_path":"users/<sanitized
                                                   user>"} (`encode_user_config_change`)
=================================================  ========================================

The user's node is a config entity shared with the user's quotas (``producer_byte_rate``
...): the functions here change only the SCRAM keys. User names are sanitized with
Kafka's ``Sanitizer`` (URL encoding, with ``*`` as ``%2A`` and space as ``%20``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from urllib.parse import quote, unquote_plus

from josefk.cluster.security.credentials import SCRAM_MECHANISMS, ScramCredential
from josefk.cluster.zk.znodes import (
    CONFIG,
    CONFIG_CHANGE_PREFIX,
    CONFIG_CHANGES,
    encode_config,
    encode_config_change,
)

USER_ENTITY_TYPE = "users"
USERS_CONFIG = f"{CONFIG}/{USER_ENTITY_TYPE}"
CONFIG_CHANGE_PATH = f"{CONFIG_CHANGES}/{CONFIG_CHANGE_PREFIX}"

_BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")


def sanitize(name: str) -> str:
    """``Sanitizer.sanitize``: Java's ``URLEncoder`` (which escapes ``~`` and keeps
    ``*``), then ``*`` as ``%2A`` and ``+`` (a space) as ``%20``."""
    return quote(name, safe="").replace("~", "%7E")


def desanitize(name: str) -> str:
    """``Sanitizer.desanitize``: Java's ``URLDecoder`` (``+`` is a space)."""
    if _BAD_ESCAPE.search(name):
        raise ValueError(f"URLDecoder: Illegal hex characters in escape (%) pattern: {name}")
    return unquote_plus(name, errors="strict")


def user_config_path(user: str) -> str:
    return f"{USERS_CONFIG}/{sanitize(user)}"


def user_entity_path(user: str) -> str:
    """The ``entity_path`` of the user's change notification: ``users/<sanitized>``."""
    return f"{USER_ENTITY_TYPE}/{sanitize(user)}"


def user_of_entity_path(entity_path: str) -> str | None:
    """The user a ``users/<sanitized>`` notification names; None for other entities
    (topics, clients, ``users/<u>/clients/<c>`` quotas...)."""
    entity_type, sep, sanitized = entity_path.partition("/")
    if entity_type != USER_ENTITY_TYPE or not sep or not sanitized or "/" in sanitized:
        return None
    return desanitize(sanitized)


def scram_credentials(configs: Mapping[str, str]) -> dict[str, ScramCredential]:
    """The credentials in a user's config, by mechanism (``CredentialProvider
    .updateCredentials``); ValueError for a malformed credential string."""
    return {mechanism: ScramCredential.from_kafka_string(configs[mechanism])
            for mechanism in SCRAM_MECHANISMS if mechanism in configs}


def with_scram_credential(configs: Mapping[str, str], mechanism: str,
                          credential: ScramCredential) -> dict[str, str]:
    """The user's config with the mechanism's credential set (other keys kept)."""
    _check_mechanism(mechanism)
    return {**configs, mechanism: credential.to_kafka_string()}


def without_scram_credential(configs: Mapping[str, str], mechanism: str) -> dict[str, str]:
    """The user's config with the mechanism's credential removed (other keys kept)."""
    _check_mechanism(mechanism)
    return {k: v for k, v in configs.items() if k != mechanism}


def _check_mechanism(mechanism: str) -> None:
    if mechanism not in SCRAM_MECHANISMS:
        raise ValueError(f"not a SCRAM mechanism: {mechanism}")


def encode_user_config(configs: Mapping[str, str]) -> bytes:
    """``ConfigEntityZNode.encode`` of the user's config, keys in the order Kafka's
    ``java.util.Properties`` (a ``ConcurrentHashMap`` since Java 9) yields them."""
    return encode_config(dict(sorted(configs.items(),
                                     key=lambda kv: _properties_bin(kv[0], len(configs)))))


def encode_user_config_change(user: str) -> bytes:
    """The ``/config/changes`` notification that makes brokers reload the user."""
    return encode_config_change(user_entity_path(user))


def _java_hash(text: str) -> int:
    """``String.hashCode``: over UTF-16 code units, as a signed 32-bit int's bits."""
    units = text.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    return h


def _properties_bin(key: str, size: int) -> int:
    """The table bin of ``key`` in a ``new Properties()`` (16 bins, doubled each time
    three quarters fill); a stable sort by bin keeps insertion order within a bin."""
    bins = 16
    while size >= bins - (bins >> 2):
        bins *= 2
    h = _java_hash(key)
    return ((h ^ (h >> 16)) & 0x7FFFFFFF) & (bins - 1)
