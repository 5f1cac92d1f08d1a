"""Benchmarks: figures measured in the same run, never assertions.

``python -m bench.run`` compares josefk with Apache Kafka side by side (see
bench/README.md); ``bench/log_append.py`` times the storage engine alone.
"""
