"""SCRAM credentials as Kafka stores them: ``ScramCredentialUtils``' string
``salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>``."""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass, field

SCRAM_SHA_256 = "SCRAM-SHA-256"
SCRAM_SHA_512 = "SCRAM-SHA-512"
# ScramMechanism.values() order; both share Kafka's bounds on the iteration count.
SCRAM_MECHANISMS = (SCRAM_SHA_256, SCRAM_SHA_512)
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384

_KEYS = ("salt", "stored_key", "server_key", "iterations")
# Kafka quotes the text; its keys are secrets a log must not show, so the message does not.
_INVALID = "Credentials not valid: expected salt=..,stored_key=..,server_key=..,iterations=.."
_INT = re.compile(r"[+-]?[0-9]+")


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """One user's credential for one SCRAM mechanism (never the password itself)."""

    salt: bytes
    stored_key: bytes = field(repr=False)
    server_key: bytes = field(repr=False)
    iterations: int

    def to_kafka_string(self) -> str:
        """``ScramCredentialUtils.credentialToString``: standard base64, padded."""
        return (f"salt={_b64(self.salt)},stored_key={_b64(self.stored_key)},"
                f"server_key={_b64(self.server_key)},iterations={self.iterations}")

    @classmethod
    def from_kafka_string(cls, text: str) -> ScramCredential:
        """``ScramCredentialUtils.credentialFromString``: exactly the four keys, in any
        order; raises ValueError("Credentials not valid: ...") as Kafka does."""
        props = _props(text)
        if set(props) != set(_KEYS):
            raise ValueError(_INVALID)
        iterations = props["iterations"]
        if not _INT.fullmatch(iterations) or not -2**31 <= int(iterations) < 2**31:
            raise ValueError(_INVALID)
        return cls(_unb64(props["salt"], text), _unb64(props["stored_key"], text),
                   _unb64(props["server_key"], text), int(iterations))


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str, whole: str) -> bytes:
    # Java's basic decoder accepts the padding left out.
    try:
        return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except (binascii.Error, ValueError) as e:
        raise ValueError(_INVALID) from e


def _props(text: str) -> dict[str, str]:
    tokens = text.split(",")
    while len(tokens) > 1 and tokens[-1] == "":  # String.split drops trailing empty tokens
        tokens.pop()
    props: dict[str, str] = {}
    for token in tokens:
        key, sep, value = token.partition("=")
        if not sep or not key:
            raise ValueError(_INVALID)
        props[key] = value
    return props
