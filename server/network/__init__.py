"""Sockets: the acceptor and its connection quotas, a client connection (framing, one
request at a time, pipelined answers, zero-copy parts), and connections to other brokers.

The bottom of the server: uses ``josefk.server.config`` and ``josefk.protocol`` only, never
a handler or the broker; everything else in the server uses it.
"""
