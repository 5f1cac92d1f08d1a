"""A ``KAFKA_ROOT`` for kafka-python's own integration tests that runs josefk as the broker.

kafka-python's test fixtures (``test/integration/fixtures.py``: ZookeeperFixture,
KafkaFixture) start their servers from a Kafka installation, ``$KAFKA_ROOT/bin/*.sh``.
``tools/kafka_python/kafka-root`` is such an installation in which every script runs a real
component, and this module decides which::

    kafka-run-class.sh kafka.Kafka PROPS       josefk (python -m josefk.server serve), after
                                               translate.py: JKS stores -> PKCS12 files, the
                                               JAAS file's KafkaServer section ->
                                               listener.name.<l>.<mech>.sasl.jaas.config
    kafka-run-class.sh ...QuorumPeerMain PROPS Apache ZooKeeper 3.8 (.cache/zookeeper, from
                                               make zookeeper-jars) with the rendered config
    kafka-run-class.sh CLASS ARGS              Apache Kafka 3.9.1's CLASS (.cache/kafka39, make
                                               kafka39-jars; tools/kafka39/run-class.sh)
    kafka-configs.sh, kafka-topics.sh,         Kafka 3.9.1's ConfigCommand, TopicCommand,
    kafka-acls.sh, zookeeper-shell.sh          AclCommand, ZooKeeper shell, as Kafka's scripts

Every path ends in ``exec``: the process the fixture started and later terminates is the
server itself, so its signals reach josefk (SIGTERM: controlled shutdown) and ZooKeeper.

The fixture waits for Kafka's log lines (``[KafkaServer id=0] started``, and for SCRAM
``Removing Produce quota for user alice``); josefk does not log them, so before the exec a
watcher is forked (ready.py) that prints them once josefk really answers on the listener,
with the fixture's own credentials for SASL.

What the fixtures pass and the shim leaves out: ``KAFKA_LOG4J_OPTS`` and ``LOG_DIR`` (josefk
logs to stderr, which the fixture captures; Kafka's tools log WARN to stderr through
tools/kafka39/log4j.properties, so ``kafka-topics.sh --list`` prints only the names).
The translated broker properties are written next to the rendered ones, as
``<name>.josefk.properties`` (mode 0600: they hold the JAAS passwords).

Usage (what the bin/ scripts do): ``python tools/kafka_python/shim.py SCRIPT [ARGS...]``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import ready
import translate

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]

#: Kafka 3.9's bin/ scripts the fixtures call, and the class each one runs.
SCRIPTS = {
    "kafka-configs.sh": ["kafka.admin.ConfigCommand"],
    "kafka-topics.sh": ["org.apache.kafka.tools.TopicCommand"],
    "kafka-acls.sh": ["kafka.admin.AclCommand"],
    "zookeeper-shell.sh": ["org.apache.zookeeper.ZooKeeperMainWithTlsSupportForKafka",
                           "-server"],
}
ZOOKEEPER_MAINS = ("org.apache.zookeeper.server.quorum.QuorumPeerMain",
                   "org.apache.zookeeper.server.ZooKeeperServerMain")


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    script, args = argv[0], argv[1:]
    if script in SCRIPTS:
        return kafka_tool([*SCRIPTS[script], *args])
    if script != "kafka-run-class.sh" or not args:
        print(f"kafka_python shim: no {script} here (only kafka-run-class.sh, "
              f"{', '.join(SCRIPTS)})", file=sys.stderr)
        return 2
    if args[0] == "kafka.Kafka":
        return broker(args[1:])
    if args[0] in ZOOKEEPER_MAINS:
        return zookeeper(args)
    return kafka_tool(args)


def kafka_tool(args: list[str]) -> int:
    command = [str(REPO / "tools/kafka39/run-class.sh"), *args]
    os.execv(command[0], command)


def zookeeper(args: list[str]) -> int:
    """Apache ZooKeeper 3.8 (ZooKeeper's own jars) with the fixture's config file; the
    logback file adds the INFO line ZookeeperFixture waits for ("binding to port")."""
    heap = os.environ.get("ZK_HEAP_OPTS", "-Xmx128m").split()
    command = [str(REPO / "tools/zookeeper/run-jars.sh"), ".cache/zookeeper/libs",
               "tools/zookeeper/fetch.sh", *heap, "-XX:+UseSerialGC",
               "-XX:TieredStopAtLevel=1",
               f"-Dlogback.configurationFile={HERE / 'zookeeper-logback.xml'}", "--", *args]
    os.execv(command[0], command)


def broker(args: list[str]) -> int:
    """kafka.Kafka PROPS [--override K=V ...] → josefk on the translated properties."""
    if not args:
        print("kafka_python shim: kafka.Kafka needs a server.properties file", file=sys.stderr)
        return 2
    source = Path(args[0])
    props = translate.read_properties(source.read_text())
    rest = args[1:]
    while rest:
        if rest[0] != "--override" or len(rest) < 2 or "=" not in rest[1]:
            print(f"kafka_python shim: kafka.Kafka: cannot read {rest[0]!r}", file=sys.stderr)
            return 2
        key, _, value = rest[1].partition("=")
        props[key.strip()] = value.strip()
        rest = rest[2:]
    jaas_file = translate.jaas_file_from_opts(os.environ.get("KAFKA_OPTS", ""))
    jaas = translate.read_jaas(jaas_file.read_text()) if jaas_file else None
    changes: list[str] = []
    josefk_props = translate.translate(props, jaas, changes)
    target = source.with_name(source.stem + ".josefk.properties")
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(translate.write_properties(josefk_props))
    for change in changes:
        print(f"[tools/kafka_python] {change}", file=sys.stderr)
    print(f"[tools/kafka_python] josefk serve {target}", file=sys.stderr)
    ready.spawn(probe(josefk_props, jaas))
    command = [sys.executable, "-m", "josefk.server", "serve", str(target)]
    sys.stderr.flush()
    os.execv(command[0], command)


def probe(props: dict[str, str], jaas: dict[str, list[translate.LoginModule]] | None
          ) -> ready.Probe:
    """How ready.py reaches the broker: its first listener, logged in as a broker would."""
    listener = translate.listeners(props)[0]
    host = listener.host if listener.host not in ("", "0.0.0.0", "::") else "127.0.0.1"
    broker_id = int(props.get("broker.id", props.get("node.id", "0")))
    if listener.protocol not in translate.SASL_PROTOCOLS:
        return ready.Probe(broker_id, host, listener.port, listener.protocol)
    enabled = translate.mechanisms(props, listener)
    mechanism = props.get("sasl.mechanism.inter.broker.protocol", "GSSAPI").upper()
    if mechanism not in enabled:
        mechanism = enabled[0]
    key = f"listener.name.{listener.name.lower()}.{mechanism.lower()}.sasl.jaas.config"
    modules = translate.read_jaas(f"p {{ {props[key]} }};")["p"] if key in props else []
    module = translate.module_for(mechanism, modules)
    username = module.option("username") if module else None
    password = module.option("password") if module else None
    return ready.Probe(broker_id, host, listener.port, listener.protocol, mechanism, username,
                       password)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
