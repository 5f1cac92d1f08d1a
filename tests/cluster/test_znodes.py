"""cluster/znodes.py: Kafka 3.9's znode paths and JSON (``kafka.zk.ZkData``).

Expected documents are written out by hand from ZkData.scala of Kafka 3.9 (key names,
value types, optional keys). Kafka writes with Jackson: compact, key order of a Java
HashMap, so documents are compared parsed, and checked to be compact.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from josefk.cluster.zk import znodes as zn
from josefk.cluster.zk.znodes import (
    BrokerRegistration,
    Endpoint,
    PartitionState,
    TopicAssignment,
    ZnodeFormatError,
)

TOPIC_ID = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")
TOPIC_ID_KAFKA = base64.urlsafe_b64encode(TOPIC_ID.bytes).rstrip(b"=").decode()  # 22 chars


def doc(data: bytes) -> dict[str, Any]:
    """Parse Kafka-style JSON, checking it is compact like Jackson's output."""
    parsed = json.loads(data)
    assert data == json.dumps(parsed, separators=(",", ":")).encode(), data
    return parsed


# --- paths -------------------------------------------------------------------------------


def test_paths_are_kafkas() -> None:
    assert zn.broker_path(7) == "/brokers/ids/7"
    assert zn.topic_path("t") == "/brokers/topics/t"
    assert zn.partitions_path("t") == "/brokers/topics/t/partitions"
    assert zn.partition_path("t", 3) == "/brokers/topics/t/partitions/3"
    assert zn.partition_state_path("t", 3) == "/brokers/topics/t/partitions/3/state"
    assert zn.topic_config_path("t") == "/config/topics/t"
    assert zn.delete_topic_path("t") == "/admin/delete_topics/t"
    assert (zn.CONTROLLER, zn.CONTROLLER_EPOCH, zn.CLUSTER_ID, zn.SEQID) == (
        "/controller", "/controller_epoch", "/cluster/id", "/brokers/seqid")
    assert (zn.REASSIGN_PARTITIONS, zn.PREFERRED_REPLICA_ELECTION, zn.CONFIG_CHANGES) == (
        "/admin/reassign_partitions", "/admin/preferred_replica_election", "/config/changes")
    # ZkData.PersistentZkPaths of Kafka 3.9 (ConfigType.ALL: topics clients users brokers ips).
    assert set(zn.PERSISTENT_PATHS) == {
        "/consumers", "/brokers/ids", "/brokers/topics", "/config/changes",
        "/admin/delete_topics", "/brokers/seqid", "/isr_change_notification",
        "/latest_producer_id_block", "/log_dir_event_notification", "/config/topics",
        "/config/clients", "/config/users", "/config/brokers", "/config/ips"}
    assert len(zn.PERSISTENT_PATHS) == len(set(zn.PERSISTENT_PATHS))


# --- /brokers/ids/<id> ---------------------------------------------------------------------


def test_broker_registration_v5() -> None:
    reg = BrokerRegistration(
        1, (Endpoint("PLAINTEXT", "127.0.0.1", 9092),
            Endpoint("SSL", "broker1.example", 9093, "SSL")),
        timestamp="1700000000123")
    assert doc(reg.encode()) == {
        "version": 5,
        "host": "127.0.0.1",
        "port": 9092,
        "endpoints": ["PLAINTEXT://127.0.0.1:9092", "SSL://broker1.example:9093"],
        "jmx_port": -1,
        "timestamp": "1700000000123",
        "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT", "SSL": "SSL"},
        "features": {},
    }


def test_broker_registration_rack_only_when_set_and_features() -> None:
    endpoint = (Endpoint("PLAINTEXT", "h", 1),)
    assert "rack" not in doc(BrokerRegistration(1, endpoint, timestamp="1").encode())
    with_rack = doc(BrokerRegistration(
        1, endpoint, rack="rack-a", timestamp="1",
        features={"metadata.version": {"min_version": 1, "max_version": 21}}).encode())
    assert with_rack["rack"] == "rack-a"
    assert with_rack["features"] == {"metadata.version": {"min_version": 1, "max_version": 21}}


def test_broker_registration_host_and_port_come_from_the_first_plaintext_endpoint() -> None:
    reg = BrokerRegistration(2, (Endpoint("SECURE", "s.example", 9093, "SSL"),
                                 Endpoint("CLIENT", "c.example", 9092, "PLAINTEXT"),
                                 Endpoint("REPLICATION", "r.example", 9094, "PLAINTEXT")),
                             timestamp="5")
    encoded = doc(reg.encode())
    assert (encoded["host"], encoded["port"]) == ("c.example", 9092)
    assert encoded["listener_security_protocol_map"] == {
        "SECURE": "SSL", "CLIENT": "PLAINTEXT", "REPLICATION": "PLAINTEXT"}
    # Without a PLAINTEXT endpoint Kafka writes host null and port -1.
    no_plain = doc(BrokerRegistration(3, (Endpoint("S", "h", 1, "SSL"),), timestamp="5")
                   .encode())
    assert no_plain["host"] is None and no_plain["port"] == -1


def test_broker_registration_ipv6_endpoint_is_bracketed() -> None:
    reg = BrokerRegistration(1, (Endpoint("PLAINTEXT", "::1", 9092),), timestamp="1")
    encoded = doc(reg.encode())
    assert encoded["endpoints"] == ["PLAINTEXT://[::1]:9092"]
    assert encoded["host"] == "::1"
    assert BrokerRegistration.decode(1, reg.encode()).endpoints == reg.endpoints


def test_broker_registration_timestamp_is_now_as_a_string() -> None:
    before = int(time.time() * 1000)
    stamp = doc(BrokerRegistration(1, (Endpoint("PLAINTEXT", "h", 1),)).encode())["timestamp"]
    after = int(time.time() * 1000)
    assert isinstance(stamp, str) and before <= int(stamp) <= after


def test_broker_registration_decodes_what_kafka_writes() -> None:
    kafka = (b'{"features":{},"listener_security_protocol_map":{"CLIENT":"PLAINTEXT",'
             b'"REPLICATION":"SSL"},"endpoints":["CLIENT://k1:9092","REPLICATION://k1:9093"],'
             b'"jmx_port":9999,"port":9092,"host":"k1","version":5,'
             b'"timestamp":"1700000000000","rack":"r1"}')
    assert BrokerRegistration.decode(4, kafka, epoch=77) == BrokerRegistration(
        4, (Endpoint("CLIENT", "k1", 9092, "PLAINTEXT"),
            Endpoint("REPLICATION", "k1", 9093, "SSL")),
        rack="r1", features={}, timestamp="1700000000000", epoch=77)
    # Version 1: host and port only.
    v1 = b'{"version":1,"host":"old","port":9092,"jmx_port":-1,"timestamp":"1"}'
    assert BrokerRegistration.decode(5, v1).endpoints == (Endpoint("PLAINTEXT", "old", 9092),)


@pytest.mark.parametrize("data", [
    b"", b"not json", b"[1,2]", b"42", b"null",
    b'{"version":5,"endpoints":["PLAINTEXT://h:notaport"]}',
    b'{"version":5,"endpoints":["PLAINTEXT://h"]}',
    b'{"version":5,"endpoints":[5]}',
    b'{"version":5,"endpoints":[null]}',
    b'{"version":1,"host":"h","port":"x"}',
    b'\xff\xfe',
])
def test_broker_registration_malformed(data: bytes) -> None:
    with pytest.raises(ZnodeFormatError):
        BrokerRegistration.decode(1, data)


# --- /controller, /controller_epoch, /cluster/id -------------------------------------------


def test_controller_v2() -> None:
    assert doc(zn.encode_controller(3, 1700000000000)) == {
        "version": 2, "brokerid": 3, "timestamp": "1700000000000", "kraftControllerEpoch": -1}
    now = doc(zn.encode_controller(3))["timestamp"]
    assert isinstance(now, str) and abs(int(now) - time.time() * 1000) < 60_000
    assert zn.decode_controller(zn.encode_controller(3)) == 3
    # Version 1 (Kafka before 3.4) has no kraftControllerEpoch.
    assert zn.decode_controller(b'{"version":1,"brokerid":9,"timestamp":"1"}') == 9


@pytest.mark.parametrize("data", [b"", b"x", b"[]", b'{"version":2}',
                                  b'{"brokerid":"abc"}', b'{"brokerid":null}'])
def test_controller_malformed(data: bytes) -> None:
    with pytest.raises(ZnodeFormatError):
        zn.decode_controller(data)


def test_controller_epoch() -> None:
    assert zn.encode_controller_epoch(0) == b"0"
    assert zn.encode_controller_epoch(12) == b"12"
    assert zn.decode_controller_epoch(b"12") == 12
    for bad in (b"", b"x", b"1.5", b"\xff"):
        with pytest.raises(ZnodeFormatError):
            zn.decode_controller_epoch(bad)


def test_cluster_id_version_is_the_string_1() -> None:
    assert doc(zn.encode_cluster_id("AbCdEfGhIjKlMnOpQrStUv")) == {
        "version": "1", "id": "AbCdEfGhIjKlMnOpQrStUv"}
    assert zn.decode_cluster_id(b'{"version":"1","id":"xyz"}') == "xyz"
    for bad in (b"", b"[]", b'{"version":"1"}', b'{"id":5}', b"nope"):
        with pytest.raises(ZnodeFormatError):
            zn.decode_cluster_id(bad)


# --- /brokers/topics/<t> ---------------------------------------------------------------


def test_topic_id_is_kafkas_base64url() -> None:
    assert len(TOPIC_ID_KAFKA) == 22 and "=" not in TOPIC_ID_KAFKA
    # Kafka's Uuid.ONE_UUID (0, 1) prints as AAAAAAAAAAAAAAAAAAAAAQ.
    one = doc(TopicAssignment(uuid.UUID(int=1), {0: (1,)}).encode())
    assert one["topic_id"] == "AAAAAAAAAAAAAAAAAAAAAQ"
    # '-' and '_' (not '+' and '/'): bytes fb ff.. encode to "-_..."
    url = uuid.UUID(bytes=b"\xfb\xff" + bytes(14))
    assert doc(TopicAssignment(url, {0: (1,)}).encode())["topic_id"].startswith("-_")


def test_topic_assignment_v3() -> None:
    encoded = doc(TopicAssignment(TOPIC_ID, {1: (2, 3, 1), 0: (1, 2, 3)}).encode())
    assert encoded == {
        "version": 3,
        "partitions": {"0": [1, 2, 3], "1": [2, 3, 1]},
        "adding_replicas": {},
        "removing_replicas": {},
        "topic_id": TOPIC_ID_KAFKA,
    }


def test_topic_assignment_without_topic_id_has_no_key() -> None:
    assert "topic_id" not in doc(TopicAssignment(None, {0: (1,)}).encode())


def test_topic_assignment_adding_and_removing() -> None:
    assignment = TopicAssignment(TOPIC_ID, {0: (4, 5, 1, 2), 1: (1, 2)},
                                 adding={0: (4, 5), 1: ()}, removing={0: (1, 2)})
    encoded = doc(assignment.encode())
    # Kafka writes adding/removing entries only for partitions that have some.
    assert encoded["adding_replicas"] == {"0": [4, 5]}
    assert encoded["removing_replicas"] == {"0": [1, 2]}
    decoded = TopicAssignment.decode("t", assignment.encode())
    assert decoded.partitions == {0: (4, 5, 1, 2), 1: (1, 2)}
    assert decoded.adding == {0: (4, 5)} and decoded.removing == {0: (1, 2)}
    assert decoded.topic_id == TOPIC_ID


def test_topic_assignment_decodes_older_versions() -> None:
    v1 = TopicAssignment.decode("t", b'{"version":1,"partitions":{"0":[1,2],"1":[2,1]}}')
    assert v1 == TopicAssignment(None, {0: (1, 2), 1: (2, 1)})
    v2 = TopicAssignment.decode(
        "t", b'{"version":2,"partitions":{"0":[3]},"adding_replicas":{},'
             b'"removing_replicas":{},"topic_id":"AAAAAAAAAAAAAAAAAAAAAQ"}')
    assert v2 == TopicAssignment(uuid.UUID(int=1), {0: (3,)})


@pytest.mark.parametrize("data", [
    b"", b"garbage", b"[]",
    b'{"partitions":{"x":[1]}}',
    b'{"partitions":{"0":1}}',
    b'{"partitions":{"0":["a"]}}',
    b'{"partitions":[1,2]}',
    b'{"partitions":{},"topic_id":"not-a-uuid"}',
    b'{"partitions":{},"topic_id":5}',
    b'{"partitions":{"0":[1]},"adding_replicas":{"0":"x"}}',
    b'{"partitions":{"0":"12"}}',  # a string is not a replica list (Kafka: to[Seq[Int]] fails)
])
def test_topic_assignment_malformed(data: bytes) -> None:
    with pytest.raises(ZnodeFormatError):
        TopicAssignment.decode("t", data)


# --- partition state -----------------------------------------------------------------------


def test_partition_state_v1() -> None:
    assert doc(PartitionState(1, 0, (1, 2, 3), 5).encode()) == {
        "version": 1, "leader": 1, "leader_epoch": 0, "controller_epoch": 5, "isr": [1, 2, 3]}
    recovering = PartitionState(2, 7, (2,), 9, zn.LEADER_RECOVERY_RECOVERING)
    assert doc(recovering.encode()) == {
        "version": 1, "leader": 2, "leader_epoch": 7, "controller_epoch": 9, "isr": [2],
        "leader_recovery_state": 1}
    assert PartitionState.decode(recovering.encode(), zk_version=4) == PartitionState(
        2, 7, (2,), 9, 1, zk_version=4)
    # What Kafka writes for an offline partition.
    assert PartitionState.decode(
        b'{"controller_epoch":3,"leader":-1,"version":1,"leader_epoch":8,"isr":[2]}'
    ) == PartitionState(-1, 8, (2,), 3)


@pytest.mark.parametrize("data", [
    b"", b"{", b"[]",
    b'{"leader_epoch":0,"isr":[1],"controller_epoch":1}',
    b'{"leader":1,"leader_epoch":0,"isr":5,"controller_epoch":1}',
    b'{"leader":"x","leader_epoch":0,"isr":[1],"controller_epoch":1}',
    b'{"leader":1,"leader_epoch":0,"isr":[null],"controller_epoch":1}',
    b'{"leader":1,"leader_epoch":0,"isr":"12","controller_epoch":1}',  # not [1, 2]
])
def test_partition_state_malformed(data: bytes) -> None:
    with pytest.raises(ZnodeFormatError):
        PartitionState.decode(data)


# --- /config -----------------------------------------------------------------------------


def test_config_v1() -> None:
    configs = {"retention.ms": "1000", "cleanup.policy": "compact"}
    assert doc(zn.encode_config(configs)) == {"version": 1, "config": configs}
    assert zn.decode_config(zn.encode_config(configs)) == configs
    assert doc(zn.encode_config({})) == {"version": 1, "config": {}}
    assert zn.decode_config(b"") == {}
    # Kafka's ConfigCommand may write numbers unquoted in hand-made znodes; values are strings.
    assert zn.decode_config(b'{"version":1,"config":{"a":1}}') == {"a": "1"}


@pytest.mark.parametrize("data", [b"{", b"[1]", b'{"version":1,"config":["a"]}',
                                  b'{"version":1,"config":"a=b"}'])
def test_config_malformed(data: bytes) -> None:
    """Kafka's ConfigEntityZNode.decode ignores a config that is not an object (empty
    properties); either that or ZnodeFormatError, never another exception."""
    try:
        result = zn.decode_config(data)
    except ZnodeFormatError:
        return
    assert result == {}


def test_config_change_v2() -> None:
    assert doc(zn.encode_config_change("topics/t")) == {"version": 2, "entity_path": "topics/t"}
    assert zn.decode_config_change(zn.encode_config_change("brokers/1")) == "brokers/1"
    assert zn.decode_config_change(
        b'{"version":1,"entity_type":"topics","entity_name":"t"}') == "topics/t"
    with pytest.raises(ZnodeFormatError):
        zn.decode_config_change(b"nope")


# --- /admin --------------------------------------------------------------------------------


def test_reassignment_and_preferred_election_znodes() -> None:
    data = zn.encode_reassignment({("t", 1): [3, 1], ("a", 0): [2]})
    assert doc(data) == {"version": 1, "partitions": [
        {"topic": "a", "partition": 0, "replicas": [2]},
        {"topic": "t", "partition": 1, "replicas": [3, 1]}]}
    assert zn.decode_partitions_list(data, "r") == {("a", 0): [2], ("t", 1): [3, 1]}
    # /admin/preferred_replica_election, as kafka-preferred-replica-election.sh wrote it.
    preferred = b'{"version":1,"partitions":[{"topic":"t","partition":0}]}'
    assert zn.decode_partitions_list(preferred, "p") == {("t", 0): []}
    for bad in (b"x", b'{"partitions":[{"topic":"t"}]}', b'{"partitions":[1]}',
                b'{"partitions":[{"topic":"t","partition":"z"}]}'):
        with pytest.raises(ZnodeFormatError):
            zn.decode_partitions_list(bad, "r")



# --- round trips ---------------------------------------------------------------------------

broker_ids = st.integers(min_value=0, max_value=2**31 - 1)
replica_lists = st.lists(broker_ids, min_size=1, max_size=6, unique=True).map(tuple)
names = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-",
                min_size=1, max_size=20)
hosts = st.one_of(names, st.sampled_from(["::1", "fe80::1", "10.0.0.1", "localhost"]))
protocols = st.sampled_from(["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"])
listener_names = st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZ_", min_size=1, max_size=12)
ports = st.integers(min_value=0, max_value=65535)


@st.composite
def registrations(draw: st.DrawFn) -> BrokerRegistration:
    listeners = draw(st.lists(listener_names, min_size=1, max_size=4, unique=True))
    endpoints = tuple(Endpoint(name, draw(hosts), draw(ports), draw(protocols))
                      for name in listeners)
    features = draw(st.dictionaries(names, st.fixed_dictionaries(
        {"min_version": st.integers(0, 30), "max_version": st.integers(0, 30)}), max_size=3))
    return BrokerRegistration(
        draw(broker_ids), endpoints, draw(st.none() | names), features,
        str(draw(st.integers(min_value=0, max_value=2**62))), draw(st.integers(-1, 2**62)))


@given(registrations())
def test_broker_registration_round_trip(reg: BrokerRegistration) -> None:
    encoded = doc(reg.encode())
    assert encoded["version"] == 5 and encoded["jmx_port"] == -1
    assert ("rack" in encoded) == (reg.rack is not None)
    assert BrokerRegistration.decode(reg.broker_id, reg.encode(), reg.epoch) == reg


topic_ids = st.none() | st.uuids()
assignments = st.dictionaries(st.integers(0, 1000), replica_lists, max_size=8)


@given(topic_ids, assignments, st.data())
def test_topic_assignment_round_trip(topic_id: uuid.UUID | None,
                                     partitions: dict[int, tuple[int, ...]],
                                     data: st.DataObject) -> None:
    keys = sorted(partitions)
    adding = {p: data.draw(replica_lists) for p in data.draw(st.lists(st.sampled_from(keys),
                                                                      unique=True))} if keys else {}
    removing = {p: data.draw(replica_lists) for p in data.draw(
        st.lists(st.sampled_from(keys), unique=True))} if keys else {}
    assignment = TopicAssignment(topic_id, partitions, adding, removing)
    encoded = doc(assignment.encode())
    assert encoded["version"] == 3
    assert ("topic_id" in encoded) == (topic_id is not None)
    assert TopicAssignment.decode("t", assignment.encode()) == assignment


@given(st.integers(-1, 2**31 - 1), st.integers(0, 2**31 - 1), replica_lists,
       st.integers(0, 2**31 - 1), st.sampled_from([0, 1]), st.integers(0, 2**31 - 1))
def test_partition_state_round_trip(leader: int, leader_epoch: int, isr: tuple[int, ...],
                                    controller_epoch: int, recovery: int, version: int) -> None:
    state = PartitionState(leader, leader_epoch, isr, controller_epoch, recovery)
    encoded = doc(state.encode())
    assert ("leader_recovery_state" in encoded) == (recovery == 1)
    assert PartitionState.decode(state.encode(), version) == PartitionState(
        leader, leader_epoch, isr, controller_epoch, recovery, version)


@given(st.dictionaries(names, st.text(max_size=30), max_size=10))
def test_config_round_trip(configs: dict[str, str]) -> None:
    assert zn.decode_config(zn.encode_config(configs)) == configs


@given(st.text(max_size=40), broker_ids, st.integers(0, 2**31 - 1))
def test_small_znodes_round_trip(cluster_id: str, broker_id: int, epoch: int) -> None:
    assert zn.decode_cluster_id(zn.encode_cluster_id(cluster_id)) == cluster_id
    assert zn.decode_controller(zn.encode_controller(broker_id)) == broker_id
    assert zn.decode_controller_epoch(zn.encode_controller_epoch(epoch)) == epoch
    path = f"topics/{cluster_id}"
    assert zn.decode_config_change(zn.encode_config_change(path)) == path


@given(st.dictionaries(st.tuples(names, st.integers(0, 1000)), replica_lists, max_size=6))
def test_reassignment_round_trip(target: dict[tuple[str, int], tuple[int, ...]]) -> None:
    decoded = zn.decode_partitions_list(zn.encode_reassignment(target), "r")
    assert decoded == {tp: list(r) for tp, r in target.items()}


# --- against Kafka 3.9's own codecs (kafka.zk.ZkData in the Kafka 3.9.1 jar) -------------

KAFKA39_LIBS = Path(__file__).resolve().parents[2] / ".cache" / "kafka39" / "libs"
KAFKA_ZNODES_JAVA = Path(__file__).with_name("KafkaZnodes.java")

BROKERS = {
    "plaintext-and-ssl": BrokerRegistration(
        1, (Endpoint("PLAINTEXT", "127.0.0.1", 9092), Endpoint("SSL", "b1.example", 9093, "SSL")),
        timestamp="1700000000000"),
    "custom-listeners-rack-features": BrokerRegistration(
        2, (Endpoint("REPLICATION", "r.example", 9094, "SSL"),
            Endpoint("CLIENT", "c.example", 9092, "PLAINTEXT")),
        rack="rack-a", features={"metadata.version": {"min_version": 1, "max_version": 21}},
        timestamp="1700000000000"),
    "ipv6": BrokerRegistration(3, (Endpoint("PLAINTEXT", "::1", 9092),), timestamp="1"),
    "no-plaintext": BrokerRegistration(
        4, (Endpoint("SASL_SSL", "s.example", 9095, "SASL_SSL"),), timestamp="1"),
}
TOPICS = {
    "with-id": TopicAssignment(TOPIC_ID, {0: (1, 2, 3), 1: (2, 3, 1)}),
    "reassigning": TopicAssignment(uuid.UUID(int=1), {0: (4, 5, 1, 2), 1: (1, 2)},
                                   {0: (4, 5)}, {0: (1, 2)}),
    "no-id": TopicAssignment(None, {0: (7,)}),
}
STATES = {
    "recovered": PartitionState(1, 4, (1, 2, 3), 6),
    "recovering": PartitionState(2, 0, (2,), 1, zn.LEADER_RECOVERY_RECOVERING),
    "offline": PartitionState(-1, 9, (3,), 2),
}
CONFIGS = {"some": {"retention.ms": "1000", "cleanup.policy": "compact"}, "none": {}}
REASSIGNMENT = {("t", 1): [3, 1], ("a", 0): [2]}


def kafka_cases() -> list[tuple[str, str, dict[str, Any], bytes]]:
    """(case id, kind, arguments for Kafka's encoder, josefk's bytes for its decoder)."""
    cases = []
    for name, reg in BROKERS.items():
        cases.append((f"broker-{name}", "broker", {
            "id": reg.broker_id, "rack": reg.rack,
            "endpoints": [[e.listener, e.host, e.port, e.security_protocol]
                          for e in reg.endpoints],
            "features": {f: [r["min_version"], r["max_version"]]
                         for f, r in reg.features.items()}}, reg.encode()))
    cases.append(("controller", "controller", {"id": 3, "timestamp": 1700000000000},
                  zn.encode_controller(3, 1700000000000)))
    cases.append(("cluster-id", "cluster_id", {"id": "AbCdEfGhIjKlMnOpQrStUv"},
                  zn.encode_cluster_id("AbCdEfGhIjKlMnOpQrStUv")))
    for name, t in TOPICS.items():
        cases.append((f"topic-{name}", "topic", {
            "topic_id": zn.kafka_uuid_str(t.topic_id) if t.topic_id else None,
            "partitions": {str(p): list(r) for p, r in t.partitions.items()},
            "adding": {str(p): list(r) for p, r in t.adding.items()},
            "removing": {str(p): list(r) for p, r in t.removing.items()}}, t.encode()))
    for name, s in STATES.items():
        cases.append((f"state-{name}", "state", {
            "leader": s.leader, "leader_epoch": s.leader_epoch, "isr": list(s.isr),
            "controller_epoch": s.controller_epoch,
            "leader_recovery_state": s.leader_recovery_state}, s.encode()))
    for name, configs in CONFIGS.items():
        cases.append((f"config-{name}", "config", {"config": configs}, zn.encode_config(configs)))
    cases.append(("config-change", "config_change", {"entity_path": "topics/t"},
                  zn.encode_config_change("topics/t")))
    cases.append(("reassignment", "reassignment", {
        "partitions": [[t, p, r] for (t, p), r in REASSIGNMENT.items()]},
        zn.encode_reassignment(REASSIGNMENT)))
    return cases


CASES = kafka_cases()


@pytest.fixture(scope="module")
def kafka_answers() -> dict[str, dict[str, Any]]:
    """Kafka 3.9's encoding of each case and its decoding of josefk's bytes (one JVM)."""
    missing = None
    if shutil.which("java") is None:
        missing = "no java on PATH"
    elif not list(KAFKA39_LIBS.glob("kafka_2.13-3.9*.jar")):
        missing = f"no Kafka 3.9 jars in {KAFKA39_LIBS} (tools/kafka39/fetch.sh)"
    if missing is not None:
        if os.environ.get("JOSEFK_REQUIRE_KAFKA") == "1":
            pytest.fail(missing + " and JOSEFK_REQUIRE_KAFKA=1", pytrace=False)
        pytest.skip(missing)
    requests = "".join(json.dumps({"kind": kind, "args": args,
                                   "josefk": base64.b64encode(data).decode()}) + "\n"
                       for _, kind, args, data in CASES)
    result = subprocess.run(
        ["java", "-cp", f"{KAFKA39_LIBS}/*", str(KAFKA_ZNODES_JAVA)], input=requests,
        capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    answers = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert len(answers) == len(CASES), result.stdout[-3000:] + result.stderr[-3000:]
    return {case[0]: answer for case, answer in zip(CASES, answers, strict=True)}


def without_timestamp(d: dict[str, Any]) -> dict[str, Any]:
    assert isinstance(d.get("timestamp"), str) and d["timestamp"].isdigit()
    return {k: v for k, v in d.items() if k != "timestamp"}


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_same_json_as_kafka_and_kafka_reads_ours(
        case: tuple[str, str, dict[str, Any], bytes],
        kafka_answers: dict[str, dict[str, Any]]) -> None:
    name, kind, args, ours = case
    answer = kafka_answers[name]
    assert "error" not in answer, f"Kafka 3.9 cannot read josefk's {name}: {answer['error']}"
    kafka, josefk = json.loads(answer["kafka"]), doc(ours)
    decoded = answer["decoded"]
    match kind:
        case "broker":
            # Kafka stamps its own time; everything else is byte-for-byte the same JSON.
            assert without_timestamp(josefk) == without_timestamp(kafka)
            reg = BrokerRegistration.decode(args["id"], ours)
            assert decoded == {
                "id": reg.broker_id, "version": 5, "jmx_port": -1, "rack": reg.rack,
                "endpoints": [[e.listener, e.host, e.port, e.security_protocol]
                              for e in reg.endpoints],
                "features": args["features"]}
        case "controller":
            assert josefk == kafka
            assert decoded == {"broker": 3, "kraft_epoch": -1}
        case "cluster_id":
            assert josefk == kafka and decoded == {"id": args["id"]}
        case "topic":
            assert josefk == kafka
            assert decoded == {"topic_id": args["topic_id"], "partitions": args["partitions"],
                               "adding": args["adding"], "removing": args["removing"]}
        case "state":
            assert josefk == kafka
            assert decoded == {**args, "partition_epoch": 7}  # the znode version
        case "config":
            assert josefk == kafka and decoded == args["config"]
        case "config_change":
            assert josefk == kafka
        case "reassignment":
            key = lambda e: (e["topic"], e["partition"])  # noqa: E731
            assert josefk["version"] == kafka["version"] == 1
            assert sorted(josefk["partitions"], key=key) == sorted(kafka["partitions"], key=key)
        case _:
            raise AssertionError(kind)
