"""Kafka wire protocol, sans-IO: framing, headers, version ranges, record batches."""
