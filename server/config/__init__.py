"""Configuration as Kafka reads it: ``server.properties`` (``properties``), every key with
its type, default and synonyms (``keys``), value parsing (``values``), listeners and the
security protocol map (``listeners``), and the broker's typed view of it all (``broker``).

Uses ``josefk.log`` (the topic-level log config); used by the rest of the server.
"""
