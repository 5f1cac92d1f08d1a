"""cluster/security against Apache Kafka 3.9's own codecs (ZkData's ResourceZNode and ACL
change stores, ConfigEntityZNode, Sanitizer, ScramCredentialUtils in the Kafka 3.9.1 jars),
run by KafkaSecurityZnodes.java in one JVM: the bytes must be equal, and Kafka must read
back what josefk wrote."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from josefk.cluster.security import acl_znodes as az
from josefk.cluster.security import scram_znodes as sz
from josefk.cluster.security.acls import (
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from josefk.cluster.security.credentials import ScramCredential

KAFKA39_LIBS = Path(__file__).resolve().parents[3] / ".cache" / "kafka39" / "libs"
HARNESS = Path(__file__).with_name("KafkaSecurityZnodes.java")

ENTRIES = [
    AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW),
    AccessControlEntry("User:bob", "10.0.0.1", AclOperation.CLUSTER_ACTION,
                       AclPermissionType.DENY),
    AccessControlEntry('User:\u00e9"\x01\\/', "::1", AclOperation.IDEMPOTENT_WRITE,
                       AclPermissionType.ALLOW),
    AccessControlEntry("Group:*", "h", AclOperation.ALL, AclPermissionType.DENY),
]
PATTERNS = [ResourcePattern(t, name, p)
            for t in ResourceType if t not in (ResourceType.ANY, ResourceType.UNKNOWN)
            for name, p in (("foo", PatternType.LITERAL), ("a:b c", PatternType.PREFIXED))]
USER_CONFIGS = {
    "one": {"SCRAM-SHA-256": "salt=AQID,stored_key=BAU=,server_key=Bg==,iterations=4096"},
    "both": {"SCRAM-SHA-256": "x", "SCRAM-SHA-512": "y"},
    "with-quotas": {"producer_byte_rate": "1", "SCRAM-SHA-256": "x", "consumer_byte_rate": "2",
                    "request_percentage": "3", "controller_mutation_rate": "4",
                    "SCRAM-SHA-512": "y"},
    "resized-table": {f"k{i}": str(i) for i in range(14)},
    "empty": {},
}
USERS = ["alice", "a b*~\u00e9", "a+b/c:d%", "\U0001f600"]
CREDENTIAL_TEXTS = [
    "salt=AQID,stored_key=BAU=,server_key=Bg==,iterations=4096",
    "iterations=4096,server_key=Bg,salt=AQID,stored_key=BAU",
    "salt=AQID,stored_key=BAU=,server_key=Bg==,iterations=4096,,",
    "salt=AQID,stored_key=BAU=,server_key=Bg==,iterations=+12",
    "salt=AQID,stored_key=BAU=,server_key=Bg==,iterations=4k",
    "salt=AQID,,stored_key=BAU=,server_key=Bg==,iterations=1", ",", "",
]


def pattern_args(p: ResourcePattern) -> dict[str, str]:
    return {"resource_type": p.resource_type.name, "name": p.name,
            "pattern_type": p.pattern_type.name}


def kafka_cases() -> list[tuple[str, str, dict[str, Any], bytes]]:
    """(case id, kind, arguments for Kafka's encoder, josefk's bytes for its decoder)."""
    cases = []
    for n in range(len(ENTRIES) + 1):  # a Scala set keeps insertion order up to four
        entries = ENTRIES[:n]
        args = {**pattern_args(PATTERNS[n]), "entries": [
            [e.principal, e.host, e.operation.name, e.permission.name] for e in entries]}
        cases.append((f"acls-{n}", "acls", args, az.encode_acls(entries)))
    for p in PATTERNS:
        cases.append((f"change-{p.resource_type.name}-{p.pattern_type.name}", "acl_change",
                      pattern_args(p), az.encode_acl_change(p)))
    for (name, configs), user in zip(USER_CONFIGS.items(), USERS * 2, strict=False):
        cases.append((f"user-config-{name}", "user_config", {"user": user, "config": configs},
                      sz.encode_user_config(configs)))
    credential = ScramCredential(bytes(range(40)), b"\xff" * 32, b"", 8192)
    cases.append(("credential", "credential", {
        "salt": base64.b64encode(credential.salt).decode(),
        "stored_key": base64.b64encode(credential.stored_key).decode(),
        "server_key": "", "iterations": 8192}, credential.to_kafka_string().encode()))
    for i, text in enumerate(CREDENTIAL_TEXTS):
        cases.append((f"parse-credential-{i}", "parse_credential", {}, text.encode()))
    return cases


CASES = kafka_cases()
CASE_IDS = [case[0] for case in CASES]


@pytest.fixture(scope="module")
def kafka_answers() -> dict[str, dict[str, Any]]:
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
    result = subprocess.run(["java", "-cp", f"{KAFKA39_LIBS}/*", str(HARNESS)],
                            input=requests, capture_output=True, text=True, timeout=120,
                            check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    answers = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert len(answers) == len(CASES), result.stdout[-3000:] + result.stderr[-3000:]
    return dict(zip(CASE_IDS, answers, strict=True))


@pytest.mark.parametrize(("name", "kind", "args", "josefk"), CASES, ids=CASE_IDS)
def test_same_as_kafka(name: str, kind: str, args: dict[str, Any], josefk: bytes,
                       kafka_answers: dict[str, dict[str, Any]]) -> None:
    answer = kafka_answers[name]
    if kind == "parse_credential":
        try:
            ours: dict[str, Any] | None = _credential_json(
                ScramCredential.from_kafka_string(josefk.decode()))
        except ValueError:
            ours = None
        assert ours == answer.get("decoded"), answer
        return
    assert "error" not in answer, answer
    assert base64.b64decode(answer["kafka"]) == josefk
    match kind:
        case "acls":
            pattern = ResourcePattern(ResourceType[args["resource_type"]], args["name"],
                                      PatternType[args["pattern_type"]])
            assert answer["path"] == az.resource_path(pattern)
            assert sorted(answer["decoded"]) == sorted(args["entries"])
        case "acl_change":
            pattern_type = PatternType[args["pattern_type"]]
            assert answer["path"] == az.acl_change_path(pattern_type)
            assert answer["decoded"] == [args["resource_type"], args["name"], pattern_type.name]
        case "user_config":
            assert answer["path"] == sz.user_config_path(args["user"])
            assert base64.b64decode(answer["change"]) == sz.encode_user_config_change(
                args["user"])
            assert answer["desanitized"] == args["user"]
            assert answer["decoded"] == args["config"]


def _credential_json(credential: ScramCredential) -> dict[str, Any]:
    return {"salt": base64.b64encode(credential.salt).decode(),
            "stored_key": base64.b64encode(credential.stored_key).decode(),
            "server_key": base64.b64encode(credential.server_key).decode(),
            "iterations": credential.iterations}
