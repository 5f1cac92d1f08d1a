"""josefk's pytest plugin: Kafka brokers as fixtures for anyone's tests.

``pip install josefk`` registers :mod:`josefk.testing.plugin` with pytest (entry point
``pytest11``), which offers ``kafka_broker`` (one in-process broker, also per module and
per session) and ``kafka_cluster`` (ZooKeeper and three broker processes). Nothing here
imports the broker until a fixture runs.
"""
