"""The seed corpus: a valid frame for every api key and version josefk supports (kafka-python's
own encoding of the defaults, and one populated by ``schema.Plain``), and SASL exchanges."""

from __future__ import annotations

import functools
from collections.abc import Iterator

from kafka.protocol.api_message import ApiMessage
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

from josefk.protocol.messages import API_CLASSES
from josefk.protocol.versions import SUPPORTED_VERSIONS
from josefk.server.security.scram_client import ScramClient

from .schema import Plain, encode_request

PLAIN_LOGIN = b"\0alice\0alice-secret"
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


def kafka_frame(message: ApiMessage, version: int, correlation_id: int = 1) -> bytes:
    """``message`` encoded by kafka-python: size prefix, header, body."""
    message.with_header(correlation_id=correlation_id, client_id="fuzz")
    return bytes(message.encode(version=version, header=True, framed=True))


def versions() -> Iterator[tuple[type[ApiMessage], int]]:
    """Every (request class, version) josefk accepts."""
    for key, (request, _) in sorted(API_CLASSES.items()):
        supported = SUPPORTED_VERSIONS[key]
        for version in range(supported.min_version, supported.max_version + 1):
            yield request, version


@functools.cache
def request_frames() -> tuple[bytes, ...]:
    """Two frames per api key and version: the defaults, and one element in every array."""
    frames = []
    for request, version in versions():
        frames.append(kafka_frame(request[version](), version))
        frames.append(encode_request(request, version, Plain()))
    return tuple(frames)


def sasl_exchanges() -> list[list[bytes]]:
    """Frames of SASL exchanges: ApiVersions, SaslHandshake v0/v1 and each mechanism's first
    token (PLAIN's completes), then a Metadata request."""
    api_versions = kafka_frame(ApiVersionsRequest[3](client_software_name="fuzz",
                                                     client_software_version="1"), 3)
    metadata = kafka_frame(MetadataRequest[12](topics=None), 12, 3)
    exchanges = []
    for mechanism in MECHANISMS:
        token = (PLAIN_LOGIN if mechanism == "PLAIN" else
                 ScramClient(mechanism, "scram-alice", "x", nonce="fuzznonce").evaluate(b""))
        for version in (0, 1):
            handshake = kafka_frame(SaslHandshakeRequest[version](mechanism=mechanism),
                                    version, 2)
            if version == 0:  # the mechanism's tokens as bare frames
                tokens = [len(token).to_bytes(4, "big") + token]
            else:
                tokens = [kafka_frame(SaslAuthenticateRequest[v](auth_bytes=token), v, 3)
                          for v in (0, 2)]
            for token_frame in tokens:
                exchanges.append([api_versions, handshake, token_frame, metadata])
    return exchanges
