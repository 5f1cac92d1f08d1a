"""DescribeClientQuotas and AlterClientQuotas, answered as Kafka 4.3 answers them
(``ClientQuotasImage.describe``, ``ClientQuotaControlManager``), kept in the entity
config store where Kafka 3.9 keeps them in ZooKeeper (/config/users, /config/clients,
and /config/ips for the connection creation rates of IP entities)."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import trio
from kafka.protocol.admin.client_quotas import (
    AlterClientQuotasResponse,
    DescribeClientQuotasResponse,
)
from kafka.protocol.api_key import ApiKey

from josefk.cluster.security.acls import AclOperation
from josefk.protocol.error_codes import (
    CLUSTER_AUTHORIZATION_FAILED,
    INVALID_REQUEST,
    NONE,
    UNSUPPORTED_VERSION,
)
from josefk.protocol.messages import Request
from josefk.server.handlers import Response
from josefk.server.quotas.entities import CLIENTS, DEFAULT, USERS, QuotaEntity, from_store
from josefk.server.quotas.manager import QuotaType
from josefk.server.security.checks import ERROR_MESSAGES

if TYPE_CHECKING:
    from josefk.server.broker import Broker

USER, CLIENT_ID, IP = "user", "client-id", "ip"
IPS = "ips"
#: The one quota of an IP entity (Kafka's QuotaConfig.IP_CONNECTION_RATE_OVERRIDE_CONFIG).
CONNECTION_CREATION_RATE = "connection_creation_rate"
INT_MAX = float((1 << 31) - 1)
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2
KEYS: Mapping[str, QuotaType] = {t.key: t for t in QuotaType}
LONG_MAX = float((1 << 63) - 1)
_Entry = DescribeClientQuotasResponse.EntryData
_AlterEntry = AlterClientQuotasResponse.EntryData


class QuotaRequestError(Exception):
    """A request Kafka refuses as a whole: its error code and message."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


# --- DescribeClientQuotas ------------------------------------------------------------

async def describe_client_quotas(broker: Broker, request: Request) -> Response:
    body = request.body
    if not broker.authorizer.cluster_allowed(AclOperation.DESCRIBE_CONFIGS):
        return _describe_error(CLUSTER_AUTHORIZATION_FAILED,
                               ERROR_MESSAGES[CLUSTER_AUTHORIZATION_FAILED])
    try:
        exact, typed = _filter(body.components)
    except QuotaRequestError as e:
        return _describe_error(e.code, str(e))
    entries = [_Entry(entity=[_Entry.EntityData(entity_type=t, entity_name=n)
                              for t, n in entity.items()],
                      values=[_Entry.ValueData(key=k, value=v) for k, v in values.items()])
               for entity, values in _quota_entities(broker.entity_configs)
               if _matches(entity, exact, typed, body.strict)]
    return {"throttle_time_ms": 0, "error_code": NONE, "error_message": None,
            "entries": entries}


def _describe_error(code: int, message: str) -> Response:
    return {"throttle_time_ms": 0, "error_code": code, "error_message": message,
            "entries": None}


def _filter(components: list[Any]) -> tuple[dict[str, str | None], set[str]]:
    """The filter's exact matches (None: the default) and entity types to match."""
    exact: dict[str, str | None] = {}
    typed: set[str] = set()
    for c in components:
        kind = c.entity_type
        if not kind:
            raise QuotaRequestError(INVALID_REQUEST, "Invalid empty entity type.")
        if kind in exact or kind in typed:
            raise QuotaRequestError(INVALID_REQUEST, f"Entity type {kind} cannot appear "
                                    "more than once in the filter.")
        if kind not in (IP, USER, CLIENT_ID):
            raise QuotaRequestError(UNSUPPORTED_VERSION, f"Unsupported entity type {kind}")
        if c.match_type == MATCH_EXACT:
            if c.match is None:
                raise QuotaRequestError(INVALID_REQUEST, "Request specified MATCH_TYPE_EXACT,"
                                        " but set match string to null.")
            exact[kind] = c.match
        elif c.match_type in (MATCH_DEFAULT, MATCH_SPECIFIED):
            if c.match is not None:
                name = "DEFAULT" if c.match_type == MATCH_DEFAULT else "SPECIFIED"
                raise QuotaRequestError(INVALID_REQUEST, f"Request specified MATCH_TYPE_{name}"
                                        ", but also specified a match string.")
            if c.match_type == MATCH_DEFAULT:
                exact[kind] = None
            else:
                typed.add(kind)
        else:
            raise QuotaRequestError(INVALID_REQUEST, f"Unknown match type {c.match_type}")
    if (IP in exact or IP in typed) and ({USER, CLIENT_ID} & (set(exact) | typed)):
        raise QuotaRequestError(INVALID_REQUEST, "Invalid entity filter component "
                                "combination. IP filter component should not be used with "
                                "user or clientId filter component.")
    return exact, typed


def _matches(entity: Mapping[str, str | None], exact: Mapping[str, str | None],
             typed: set[str], strict: bool) -> bool:
    if strict and len(entity) != len(exact) + len(typed):
        return False
    return (all(k in entity and entity[k] == v for k, v in exact.items())
            and all(k in entity for k in typed))


def _quota_entities(store: Any) -> Iterator[tuple[dict[str, str | None], dict[str, float]]]:
    """Every entity of the store with a client quota: its (type -> name) map (None for
    a default) and its quota values."""
    for name in store.names(IPS):
        rate = store.get(IPS, name).get(CONNECTION_CREATION_RATE)
        if rate is not None:
            yield {IP: None if name == DEFAULT else name}, {CONNECTION_CREATION_RATE: float(rate)}
    for entity_type in (USERS, CLIENTS):
        for name in store.names(entity_type):
            entity = from_store(entity_type, name)
            configs = store.get(entity_type, name)
            values = {k: float(v) for k, v in configs.items() if k in KEYS}
            if entity is None or not values:
                continue
            described: dict[str, str | None] = {}
            if entity.user is not None:
                described[USER] = None if entity.user == DEFAULT else entity.user
            if entity.client is not None:
                described[CLIENT_ID] = None if entity.client == DEFAULT else entity.client
            yield described, values


# --- AlterClientQuotas ---------------------------------------------------------------

async def alter_client_quotas(broker: Broker, request: Request) -> Response:
    body = request.body
    allowed = broker.authorizer.cluster_allowed(AclOperation.ALTER_CONFIGS)
    results = []
    seen: set[tuple[tuple[str, str | None], ...]] = set()
    for entry in body.entries:
        entity = [(e.entity_type, e.entity_name) for e in entry.entity]
        code, message = NONE, None
        try:
            if not allowed:
                raise QuotaRequestError(CLUSTER_AUTHORIZATION_FAILED,
                                        ERROR_MESSAGES[CLUSTER_AUTHORIZATION_FAILED])
            key = tuple(sorted(entity, key=lambda e: e[0]))
            if key in seen:
                raise QuotaRequestError(INVALID_REQUEST, "Ignoring duplicate entity "
                                        f"{_entity_text(entity)}")
            seen.add(key)
            target, set_, delete = _alteration(entity, entry.ops)
            await _check_ip_entity(*target)
            if not body.validate_only:
                await broker.entity_configs.alter(*target, set_, delete)
        except QuotaRequestError as e:
            code, message = e.code, str(e)
        results.append(_AlterEntry(
            error_code=code, error_message=message,
            entity=[_AlterEntry.EntityData(entity_type=t, entity_name=n) for t, n in entity]))
    return {"throttle_time_ms": 0, "entries": results}


def _entity_text(entity: list[tuple[str, str | None]]) -> str:
    return "ClientQuotaEntity(entries={" + ", ".join(f"{t}={n}" for t, n in entity) + "})"


def _alteration(entity: list[tuple[str, str | None]], ops: list[Any]
                ) -> tuple[tuple[str, str], dict[str, str], list[str]]:
    """The store's (entity type, name) to alter, the values to set (as Kafka 3.9 writes
    them) and the keys to delete; QuotaRequestError for what Kafka refuses."""
    changes: dict[str, float | None] = {}
    for op in ops:
        if op.key in changes:
            raise QuotaRequestError(INVALID_REQUEST, f"Duplicate quota key {op.key} not "
                                    f"updating quota for this entity {_entity_text(entity)}")
        changes[op.key] = None if op.remove else op.value
    target = _entity(entity)
    validated = _validated if target[0] != IPS else _validated_ip_rate
    set_: dict[str, str] = {}
    for key, value in changes.items():
        if value is not None:
            set_[key] = validated(key, value)
    return target, set_, [k for k, v in changes.items() if v is None]


def _entity(entity: list[tuple[str, str | None]]) -> tuple[str, str]:
    if not entity:
        raise QuotaRequestError(INVALID_REQUEST, "Invalid empty client quota entity")
    names: dict[str, str | None] = {}
    for kind, name in entity:
        if kind in names:
            raise QuotaRequestError(INVALID_REQUEST, "Invalid client quota entity, duplicate "
                                    f"entity entry {kind}")
        if kind not in (USER, CLIENT_ID, IP):
            raise QuotaRequestError(INVALID_REQUEST, f"Unhandled client quota entity type: "
                                    f"{kind}")
        if name is not None and not name:
            raise QuotaRequestError(INVALID_REQUEST, f"Empty {kind} not supported")
        names[kind] = name
    if IP in names:
        if len(names) > 1:
            raise QuotaRequestError(INVALID_REQUEST, "Invalid quota entity combination, IP "
                                    "entity shouldnot be combined with User or ClientId")
        return IPS, DEFAULT if names[IP] is None else str(names[IP])

    def named(kind: str) -> str | None:
        if kind not in names:
            return None
        return names[kind] if names[kind] is not None else DEFAULT
    return QuotaEntity(named(USER), named(CLIENT_ID)).store_key()


async def _check_ip_entity(entity_type: str, name: str) -> None:
    """Kafka's ``isValidIpEntity``: an address, or a name that resolves (``getByName``,
    off the event loop)."""
    if entity_type != IPS or name == DEFAULT:
        return
    try:
        ipaddress.ip_address(name)
        return
    except ValueError:
        pass
    try:
        await trio.to_thread.run_sync(
            lambda: socket.getaddrinfo(name, None, type=socket.SOCK_STREAM))
    except (OSError, UnicodeError) as e:
        raise QuotaRequestError(INVALID_REQUEST,
                                f"{name} is not a valid IP or resolvable host.") from e


def _validated_ip_rate(key: str, value: float) -> str:
    """An IP entity's ``connection_creation_rate`` as Kafka stores an INT."""
    if key != CONNECTION_CREATION_RATE:
        raise QuotaRequestError(INVALID_REQUEST, f"Invalid configuration key {key}")
    return _integral(key, value, INT_MAX, "an INT")


def _validated(key: str, value: float) -> str:
    """The value as Kafka 3.9 stores it (a LONG as an integer, a DOUBLE as Java prints
    it), or QuotaRequestError as Kafka 4.3's controller refuses it."""
    quota_type = KEYS.get(key)
    if quota_type is None:
        raise QuotaRequestError(INVALID_REQUEST, f"Invalid configuration key {key}")
    if quota_type.integral:
        return _integral(key, value, LONG_MAX, "a LONG")
    _positive(key, value)
    return repr(float(value))


def _positive(key: str, value: float) -> None:
    if value <= 0.0:
        raise QuotaRequestError(INVALID_REQUEST, f"Quota {key} must be greater than 0")


def _integral(key: str, value: float, most: float, kind: str) -> str:
    """A positive whole value up to ``most`` (Kafka's INT or LONG), as Kafka refuses it."""
    _positive(key, value)
    if value > most:
        raise QuotaRequestError(INVALID_REQUEST, f"Proposed value for {key} is too large "
                                f"for {kind}.")
    if abs(value % 1.0) > 1e-6:
        raise QuotaRequestError(INVALID_REQUEST, f"{key} cannot be a fractional value.")
    return str(int(value))


HANDLERS = {
    ApiKey.DescribeClientQuotas: describe_client_quotas,
    ApiKey.AlterClientQuotas: alter_client_quotas,
}
