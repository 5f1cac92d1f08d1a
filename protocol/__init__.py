"""Kafka wire protocol, sans-IO: framing, headers, version ranges, record batches."""

# Before any module here imports kafka-python: its codec without its client.
from josefk.protocol.kafka_python import defer_client_imports

defer_client_imports()
