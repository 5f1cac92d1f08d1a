"""The stock clients' settings for each listener kind, and a round trip through each."""

from __future__ import annotations

import asyncio
import ssl
import time
import uuid
from dataclasses import dataclass

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.helpers import create_ssl_context
from confluent_kafka import Consumer, Producer
from kafka import KafkaConsumer, KafkaProducer

from ..certs import Certs


@dataclass(frozen=True)
class Login:
    """How a client authenticates: the listener kind, SASL mechanism, user, password, and
    whether it presents the client certificate."""

    protocol: str
    mechanism: str | None = None
    user: str | None = None
    password: str | None = None
    client_cert: bool = False


def kafka_python_config(login: Login, certs: Certs) -> dict[str, object]:
    config: dict[str, object] = {"security_protocol": login.protocol}
    if login.protocol in ("SSL", "SASL_SSL"):
        config["ssl_cafile"] = str(certs.ca)
        if login.client_cert:
            config.update(ssl_certfile=str(certs.client_cert), ssl_keyfile=str(certs.client_key))
    if login.mechanism:
        config.update(sasl_mechanism=login.mechanism, sasl_plain_username=login.user,
                      sasl_plain_password=login.password)
    return config


def confluent_config(login: Login, certs: Certs) -> dict[str, object]:
    config: dict[str, object] = {"security.protocol": login.protocol}
    if login.protocol in ("SSL", "SASL_SSL"):
        config["ssl.ca.location"] = str(certs.ca)
        if login.client_cert:
            config.update({"ssl.certificate.location": str(certs.client_cert),
                           "ssl.key.location": str(certs.client_key)})
    if login.mechanism:
        config.update({"sasl.mechanism": login.mechanism, "sasl.username": login.user,
                       "sasl.password": login.password})
    return config


def aiokafka_config(login: Login, certs: Certs) -> dict[str, object]:
    config: dict[str, object] = {"security_protocol": login.protocol}
    if login.protocol in ("SSL", "SASL_SSL"):
        context: ssl.SSLContext = create_ssl_context(
            cafile=str(certs.ca),
            certfile=str(certs.client_cert) if login.client_cert else None,
            keyfile=str(certs.client_key) if login.client_cert else None)
        config["ssl_context"] = context
    if login.mechanism:
        config.update(sasl_mechanism=login.mechanism, sasl_plain_username=login.user,
                      sasl_plain_password=login.password)
    return config


def kafka_python_round_trip(bootstrap: str, topic: str, login: Login, certs: Certs) -> list[bytes]:
    config = kafka_python_config(login, certs)
    producer = KafkaProducer(bootstrap_servers=bootstrap, **config)
    try:
        for i in range(3):
            producer.send(topic, f"kafka-python {i}".encode()).get(30)
    finally:
        producer.close()
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=15000, group_id=None, **config)
    try:
        return [m.value for _, m in zip(range(3), consumer, strict=False)]
    finally:
        consumer.close()


def confluent_round_trip(bootstrap: str, topic: str, login: Login, certs: Certs) -> list[bytes]:
    config = {"bootstrap.servers": bootstrap, **confluent_config(login, certs)}
    producer = Producer(config)
    for i in range(3):
        producer.produce(topic, f"confluent {i}".encode())
    assert producer.flush(30) == 0
    consumer = Consumer({**config, "group.id": f"g-{uuid.uuid4().hex[:8]}",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    try:
        while len(got) < 3 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
    finally:
        consumer.close()
    return got


def aiokafka_round_trip(bootstrap: str, topic: str, login: Login, certs: Certs) -> list[bytes]:
    async def run() -> list[bytes]:
        config = aiokafka_config(login, certs)
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, **config)
        await producer.start()
        try:
            for i in range(3):
                await producer.send_and_wait(topic, f"aiokafka {i}".encode())
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap,
                                    auto_offset_reset="earliest", **config)
        await consumer.start()
        try:
            got: list[bytes] = []
            async with asyncio.timeout(30):
                async for msg in consumer:
                    got.append(msg.value)
                    if len(got) == 3:
                        break
            return got
        finally:
            await consumer.stop()
    return asyncio.run(run())


# What each round trip writes: "<prefix> 0", "<prefix> 1", "<prefix> 2".
PREFIX = {"kafka-python": "kafka-python", "confluent-kafka": "confluent", "aiokafka": "aiokafka"}
ROUND_TRIPS = {"kafka-python": kafka_python_round_trip, "confluent-kafka": confluent_round_trip,
               "aiokafka": aiokafka_round_trip}
