"""Apache Kafka 3.9's ZooKeeper layout: znode paths and their JSON, byte for byte.

Kafka's ``ZkData.scala`` is the reference: the same keys, the same value types (a
timestamp is a string, a cluster-id znode's version is the string "1"), the same
optional keys left out when Kafka leaves them out, so Kafka's own brokers and tools
read what josefk writes and the other way round.

==================================================  ==================================
znode                                               data
==================================================  ==================================
/brokers/ids/<id> (ephemeral)                       `BrokerRegistration` (version 5)
/brokers/topics/<t>                                 `TopicAssignment` (version 3)
/brokers/topics/<t>/partitions/<p>/state            `PartitionState` (version 1)
/brokers/seqid                                      (empty; its version generates ids)
/controller (ephemeral)                             `encode_controller` (version 2)
/controller_epoch                                   the epoch, as a decimal string
/config/topics/<t>                                  `encode_config` (version 1)
/config/changes/config_change_<10 digits>           `encode_config_change` (version 2)
/admin/delete_topics/<t>                            (empty)
/admin/reassign_partitions                          `encode_reassignment` (version 1)
/admin/preferred_replica_election                   {"version":1,"partitions":[...]}
/cluster/id                                         {"version":"1","id":"<cluster id>"}
/isr_change_notification, /latest_producer_id_block, /log_dir_event_notification
==================================================  ==================================
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from josefk.log.partition_metadata import kafka_uuid_str, parse_kafka_uuid

BROKERS = "/brokers"
BROKER_IDS = "/brokers/ids"
TOPICS = "/brokers/topics"
SEQID = "/brokers/seqid"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
CONFIG = "/config"
CONFIG_TOPICS = "/config/topics"
CONFIG_CHANGES = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"
ADMIN = "/admin"
DELETE_TOPICS = "/admin/delete_topics"
REASSIGN_PARTITIONS = "/admin/reassign_partitions"
PREFERRED_REPLICA_ELECTION = "/admin/preferred_replica_election"
CLUSTER_ID = "/cluster/id"
ISR_CHANGE_NOTIFICATION = "/isr_change_notification"
PRODUCER_ID_BLOCK = "/latest_producer_id_block"
LOG_DIR_EVENT_NOTIFICATION = "/log_dir_event_notification"
CONSUMERS = "/consumers"

# What Kafka's ``createTopLevelPaths`` makes at every broker start.
PERSISTENT_PATHS = (CONSUMERS, BROKER_IDS, TOPICS, CONFIG_CHANGES, DELETE_TOPICS, SEQID,
                    ISR_CHANGE_NOTIFICATION, PRODUCER_ID_BLOCK, LOG_DIR_EVENT_NOTIFICATION,
                    CONFIG_TOPICS, "/config/clients", "/config/users", "/config/brokers",
                    "/config/ips")

INITIAL_CONTROLLER_EPOCH = 0
INITIAL_CONTROLLER_EPOCH_ZK_VERSION = 0
BROKER_REGISTRATION_VERSION = 5


class ZnodeFormatError(ValueError):
    """A znode's data is not what Kafka writes there."""


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{TOPICS}/{topic}"


def partitions_path(topic: str) -> str:
    return f"{TOPICS}/{topic}/partitions"


def partition_path(topic: str, partition: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{partition}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{partition}/state"


def topic_config_path(topic: str) -> str:
    return f"{CONFIG_TOPICS}/{topic}"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS}/{topic}"


def _json(doc: Mapping[str, Any]) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()


def _load(data: bytes, what: str) -> dict[str, Any]:
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise ZnodeFormatError(f"{what}: not JSON: {data[:200]!r}") from e
    if not isinstance(doc, dict):
        raise ZnodeFormatError(f"{what}: not a JSON object: {data[:200]!r}")
    return doc


def _int_list(value: Any) -> tuple[int, ...]:
    """A JSON list of broker ids (Kafka refuses anything else, a string included)."""
    if not isinstance(value, list):
        raise TypeError(f"{value!r} is not a list of broker ids")
    return tuple(int(b) for b in value)


def _now_ms_str() -> str:
    return str(int(time.time() * 1000))


# --- /brokers/ids/<id> ---------------------------------------------------------------


@dataclass(frozen=True)
class Endpoint:
    """One listener of a broker: ``PLAINTEXT://host:port``."""

    listener: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"

    @property
    def connection_string(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener}://{host}:{self.port}"


@dataclass(frozen=True)
class BrokerRegistration:
    """A live broker as its ephemeral znode describes it. ``epoch`` is the znode's
    czxid (Kafka's broker epoch), filled in when read back."""

    broker_id: int
    endpoints: tuple[Endpoint, ...]
    rack: str | None = None
    features: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    timestamp: str = ""
    epoch: int = -1

    def endpoint(self, listener: str | None = None) -> Endpoint | None:
        """The endpoint of ``listener`` (the first one if None)."""
        for endpoint in self.endpoints:
            if listener is None or endpoint.listener == listener:
                return endpoint
        return None

    def encode(self) -> bytes:
        """Kafka's ``BrokerIdZNode.encode`` at version 5."""
        plaintext = next((e for e in self.endpoints if e.security_protocol == "PLAINTEXT"), None)
        doc: dict[str, Any] = {
            "features": {name: dict(r) for name, r in self.features.items()},
            "listener_security_protocol_map": {e.listener: e.security_protocol
                                               for e in self.endpoints},
            "endpoints": [e.connection_string for e in self.endpoints],
            "jmx_port": -1,
            "port": plaintext.port if plaintext else -1,
            "host": plaintext.host if plaintext else None,
            "version": BROKER_REGISTRATION_VERSION,
            "timestamp": self.timestamp or _now_ms_str(),
        }
        if self.rack is not None:
            doc["rack"] = self.rack
        return _json(doc)

    @classmethod
    def decode(cls, broker_id: int, data: bytes, epoch: int = -1) -> BrokerRegistration:
        doc = _load(data, f"broker {broker_id}")
        protocols = doc.get("listener_security_protocol_map") or {}
        endpoints = []
        try:
            for text in doc.get("endpoints") or []:
                if not isinstance(text, str):
                    raise TypeError(f"endpoint {text!r} is not a string")
                listener, _, rest = text.partition("://")
                host, _, port = rest.rpartition(":")
                endpoints.append(Endpoint(listener, host.strip("[]"), int(port),
                                          protocols.get(listener, listener)))
            if not endpoints and doc.get("host"):
                endpoints.append(Endpoint("PLAINTEXT", doc["host"], int(doc["port"])))
        except (ValueError, TypeError, KeyError) as e:
            raise ZnodeFormatError(f"broker {broker_id}: bad endpoints in {doc!r}") from e
        return cls(broker_id, tuple(endpoints), doc.get("rack"), doc.get("features") or {},
                   str(doc.get("timestamp", "")), epoch)


# --- /controller, /controller_epoch, /cluster/id -------------------------------------------


def encode_controller(broker_id: int, timestamp_ms: int | None = None) -> bytes:
    """Kafka's ``ControllerZNode.encode`` (version 2, a ZooKeeper controller)."""
    stamp = str(timestamp_ms) if timestamp_ms is not None else _now_ms_str()
    return _json({"version": 2, "brokerid": broker_id, "timestamp": stamp,
                  "kraftControllerEpoch": -1})


def decode_controller(data: bytes) -> int:
    """The controller's broker id (-1 for a KRaft controller mid-migration)."""
    doc = _load(data, "/controller")
    try:
        return int(doc["brokerid"])
    except (KeyError, TypeError, ValueError) as e:
        raise ZnodeFormatError(f"/controller: {doc!r}") from e


def encode_controller_epoch(epoch: int) -> bytes:
    return str(epoch).encode()


def decode_controller_epoch(data: bytes) -> int:
    try:
        return int(data.decode())
    except (ValueError, UnicodeDecodeError) as e:
        raise ZnodeFormatError(f"/controller_epoch: {data!r}") from e


def encode_cluster_id(cluster_id: str) -> bytes:
    return _json({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes) -> str:
    doc = _load(data, "/cluster/id")
    if not isinstance(doc.get("id"), str):
        raise ZnodeFormatError(f"/cluster/id: {doc!r}")
    return doc["id"]


# --- /brokers/topics/<t> -------------------------------------------------------------------


@dataclass(frozen=True)
class TopicAssignment:
    """A topic's replica assignment; during a reassignment ``partitions`` holds the
    union of old and new replicas and ``adding`` / ``removing`` say which is which."""

    topic_id: uuid.UUID | None
    partitions: Mapping[int, tuple[int, ...]]
    adding: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    removing: Mapping[int, tuple[int, ...]] = field(default_factory=dict)

    def encode(self) -> bytes:
        """Kafka's ``TopicZNode.encode``."""

        def lists(m: Mapping[int, Sequence[int]]) -> dict[str, list[int]]:
            return {str(p): list(r) for p, r in sorted(m.items()) if r}

        doc: dict[str, Any] = {
            "partitions": lists(self.partitions),
            "adding_replicas": lists(self.adding),
            "removing_replicas": lists(self.removing),
            "version": 3,
        }
        if self.topic_id is not None:
            doc["topic_id"] = kafka_uuid_str(self.topic_id)
        return _json(doc)

    @classmethod
    def decode(cls, topic: str, data: bytes) -> TopicAssignment:
        doc = _load(data, f"topic {topic}")

        def lists(key: str) -> dict[int, tuple[int, ...]]:
            return {int(p): _int_list(r) for p, r in (doc.get(key) or {}).items()}

        try:
            topic_id = parse_kafka_uuid(doc["topic_id"]) if doc.get("topic_id") else None
            return cls(topic_id, lists("partitions"), lists("adding_replicas"),
                       lists("removing_replicas"))
        except (ValueError, TypeError, AttributeError) as e:
            raise ZnodeFormatError(f"topic {topic}: {doc!r}") from e


# --- /brokers/topics/<t>/partitions/<p>/state -------------------------------------------


LEADER_RECOVERY_RECOVERED = 0
LEADER_RECOVERY_RECOVERING = 1


@dataclass(frozen=True)
class PartitionState:
    """Leader, epoch and ISR as the controller last wrote them. ``zk_version`` (the
    znode's version, Kafka's partition epoch) is filled in when read back."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    leader_recovery_state: int = LEADER_RECOVERY_RECOVERED
    zk_version: int = -1

    def encode(self) -> bytes:
        """Kafka's ``TopicPartitionStateZNode.encode``: the recovery state only when
        not RECOVERED."""
        doc: dict[str, Any] = {"controller_epoch": self.controller_epoch,
                               "leader": self.leader, "version": 1,
                               "leader_epoch": self.leader_epoch, "isr": list(self.isr)}
        if self.leader_recovery_state != LEADER_RECOVERY_RECOVERED:
            doc["leader_recovery_state"] = self.leader_recovery_state
        return _json(doc)

    @classmethod
    def decode(cls, data: bytes, zk_version: int = -1) -> PartitionState:
        doc = _load(data, "partition state")
        try:
            return cls(int(doc["leader"]), int(doc["leader_epoch"]),
                       _int_list(doc["isr"]), int(doc["controller_epoch"]),
                       int(doc.get("leader_recovery_state", LEADER_RECOVERY_RECOVERED)),
                       zk_version)
        except (KeyError, TypeError, ValueError) as e:
            raise ZnodeFormatError(f"partition state: {doc!r}") from e


# --- /config -------------------------------------------------------------------------------


def encode_config(configs: Mapping[str, str]) -> bytes:
    return _json({"version": 1, "config": dict(configs)})


def decode_config(data: bytes) -> dict[str, str]:
    if not data:
        return {}
    doc = _load(data, "config")
    configs = doc.get("config") or {}
    if not isinstance(configs, dict):
        raise ZnodeFormatError(f"config: {doc!r}")
    return {str(k): str(v) for k, v in configs.items()}


def encode_config_change(entity_path: str) -> bytes:
    """A ``/config/changes`` notification: ``topics/<t>``, ``brokers/<id>``..."""
    return _json({"version": 2, "entity_path": entity_path})


def decode_config_change(data: bytes) -> str:
    doc = _load(data, "config change")
    if "entity_path" in doc:
        return str(doc["entity_path"])
    # version 1: {"version":1,"entity_type":"topics","entity_name":"t"}
    return f"{doc.get('entity_type')}/{doc.get('entity_name')}"


# --- /latest_producer_id_block --------------------------------------------------------


def encode_producer_id_block(broker_id: int, start: int, end: int) -> bytes:
    """Kafka's ``ProducerIdBlockZNode``: the last block handed out (ends inclusive)."""
    return _json({"version": 1, "broker": broker_id, "block_start": str(start),
                  "block_end": str(end)})


def decode_producer_id_block_end(data: bytes) -> int:
    """The last producer id handed out so far (-1 when none: an empty znode)."""
    if not data:
        return -1
    doc = _load(data, PRODUCER_ID_BLOCK)
    try:
        return int(doc["block_end"])
    except (KeyError, TypeError, ValueError) as e:
        raise ZnodeFormatError(f"{PRODUCER_ID_BLOCK}: {doc!r}") from e


# --- /admin --------------------------------------------------------------------------------


def encode_reassignment(target: Mapping[tuple[str, int], Sequence[int]]) -> bytes:
    return _json({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": list(r)} for (t, p), r in sorted(target.items())]})


def decode_partitions_list(data: bytes, what: str) -> dict[tuple[str, int], list[int]]:
    """``/admin/reassign_partitions`` (with replicas) or
    ``/admin/preferred_replica_election`` (without: empty lists)."""
    doc = _load(data, what)
    try:
        return {(str(e["topic"]), int(e["partition"])): [int(b) for b in e.get("replicas", [])]
                for e in doc.get("partitions") or []}
    except (KeyError, TypeError, ValueError) as e:
        raise ZnodeFormatError(f"{what}: {doc!r}") from e


# --- /log_dir_event_notification ---------------------------------------------------------

LOG_DIR_EVENT_PREFIX = "log_dir_event_"
LOG_DIR_FAILURE_EVENT = 1


def log_dir_event_path() -> str:
    """The prefix of a new sequential ``log_dir_event_<seq>`` znode (ZooKeeper adds the
    sequence number)."""
    return f"{LOG_DIR_EVENT_NOTIFICATION}/{LOG_DIR_EVENT_PREFIX}"


def encode_log_dir_event(broker_id: int) -> bytes:
    """Kafka's ``LogDirEventNotificationSequenceZNode``: a log directory of ``broker_id``
    failed."""
    return _json({"version": 1, "broker": broker_id, "event": LOG_DIR_FAILURE_EVENT})


def decode_log_dir_event(data: bytes) -> int:
    """The broker whose log directory failed."""
    doc = _load(data, LOG_DIR_EVENT_NOTIFICATION)
    try:
        return int(doc["broker"])
    except (KeyError, TypeError, ValueError) as e:
        raise ZnodeFormatError(f"{LOG_DIR_EVENT_NOTIFICATION}: no broker id: {e}") from e
