"""SCRAM's primitives (RFC 5802) and the grammar of its four messages, as Kafka's
``ScramFormatter`` and ``ScramMessages``: names and values are ASCII (``\\x01``-``\\x7f``),
nonces printable ASCII without ``,``; the reserved ``m=`` attribute fails (RFC 5802, 5.1)."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass

from josefk.server.security.errors import AuthenticationError

SCRAM_SHA_256 = "SCRAM-SHA-256"
SCRAM_SHA_512 = "SCRAM-SHA-512"
HASHES = {SCRAM_SHA_256: "sha256", SCRAM_SHA_512: "sha512"}
# Kafka's ScramMechanism bounds: the minimum both sides require, the maximum credentials take.
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384

# Patterns, compiled on first use (re's cache): compiling them all at import was 2.5 ms of
# every broker's start, SASL or not.
_VALUE_SAFE = r"[\x01-\x2b\x2d-\x3c\x3e-\x7f]"  # ASCII but NUL, ',' and '='
_VALUE = r"[\x01-\x2b\x2d-\x7f]+"
_PRINTABLE = r"[\x21-\x2b\x2d-\x7e]+"
_SASLNAME = rf"(?:{_VALUE_SAFE}|=2C|=3D)+"
_B64 = r"[A-Za-z0-9+/]"
_BASE64 = rf"(?:{_B64}{{4}})*(?:{_B64}{{3}}=|{_B64}{{2}}==)?"
_EXTENSIONS = rf"(?:,[A-Za-z]+={_VALUE})*"

_CLIENT_FIRST = (
    rf"(?P<gs2>n,(?:a=(?P<authzid>{_SASLNAME}))?,)"
    rf"(?P<bare>n=(?P<saslname>{_SASLNAME}),r=(?P<nonce>{_PRINTABLE})(?P<ext>{_EXTENSIONS}))")
_SERVER_FIRST = (
    rf"r=(?P<nonce>{_PRINTABLE}),s=(?P<salt>{_BASE64}),i=(?P<iterations>[0-9]{{1,9}}){_EXTENSIONS}")
_CLIENT_FINAL = (
    rf"(?P<without_proof>c=(?P<channel>{_BASE64}),r=(?P<nonce>{_PRINTABLE}){_EXTENSIONS}),"
    rf"p=(?P<proof>{_BASE64})")
_SERVER_FINAL = (
    rf"(?:e=(?P<error>{_VALUE_SAFE}+)|v=(?P<signature>{_BASE64})){_EXTENSIONS}")
_SASLNAME_ESCAPE = "=(2C|3D)"
_NONCE = _PRINTABLE
_EXTENSION = rf"[A-Za-z]+={_VALUE}"
_BASE36 = "0123456789abcdefghijklmnopqrstuvwxyz"


def check_mechanism(mechanism: str) -> str:
    """The hashlib name of a SCRAM mechanism's hash; ``ValueError`` for another mechanism."""
    try:
        return HASHES[mechanism]
    except KeyError:
        raise ValueError(f"Unsupported SCRAM mechanism {mechanism[:40]!r}, "
                         f"expected one of {', '.join(HASHES)}") from None


def base36(value: int) -> str:
    digits = []
    while True:
        value, digit = divmod(value, 36)
        digits.append(_BASE36[digit])
        if not value:
            return "".join(reversed(digits))


def random_string() -> str:
    """Kafka's ``ScramFormatter.secureRandomString``: 130 random bits in base 36."""
    return base36(secrets.randbits(130))


def check_nonce(nonce: str) -> str:
    if not re.fullmatch(_NONCE, nonce):
        raise ValueError("A SCRAM nonce is printable ASCII without ','")
    return nonce


def check_extension(key: str, value: str) -> str:
    """``,key=value`` of a SCRAM extension: key letters, value ASCII without ','."""
    if not re.fullmatch(_EXTENSION, f"{key}={value}"):
        raise ValueError("A SCRAM extension is letters=ASCII without ','")
    return f",{key}={value}"


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """Hi(password, salt, i) of RFC 5802; Kafka normalizes the password as its UTF-8 bytes."""
    return hashlib.pbkdf2_hmac(check_mechanism(mechanism), password.encode(), salt, iterations)


def hmac_digest(mechanism: str, key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, HASHES[mechanism]).digest()


def digest(mechanism: str, message: bytes) -> bytes:
    return hashlib.new(HASHES[mechanism], message).digest()


def xor(left: bytes, right: bytes) -> bytes:
    return bytes(a ^ b for a, b in zip(left, right, strict=True))


def b64encode(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def b64decode(text: str) -> bytes:
    """Standard base64 with its padding, which the grammar's patterns already checked."""
    try:
        return base64.b64decode(text, validate=True)
    except binascii.Error:  # unreachable past the patterns; kept as the one error type
        raise AuthenticationError("Invalid base64 in SCRAM message") from None


def saslname_decode(saslname: str) -> str:
    return re.sub(_SASLNAME_ESCAPE, lambda m: "," if m[1] == "2C" else "=", saslname)


def saslname_encode(username: str) -> str:
    return username.replace("=", "=3D").replace(",", "=2C")


def _ascii(message: bytes, what: str) -> str:
    try:
        return message.decode("ascii")
    except UnicodeDecodeError:
        raise AuthenticationError(f"Invalid SCRAM {what} format") from None


def _extensions(text: str) -> dict[str, str]:
    return dict(item.split("=", 1) for item in text[1:].split(",")) if text else {}


@dataclass(frozen=True)
class ClientFirst:
    gs2_header: str
    authzid: str
    username: str
    nonce: str
    bare: str
    extensions: dict[str, str]


def parse_client_first(message: bytes) -> ClientFirst:
    match = re.fullmatch(_CLIENT_FIRST, _ascii(message, "client first message"))
    if match is None:
        raise AuthenticationError("Invalid SCRAM client first message format")
    return ClientFirst(match["gs2"], saslname_decode(match["authzid"] or ""),
                       saslname_decode(match["saslname"]), match["nonce"], match["bare"],
                       _extensions(match["ext"]))


@dataclass(frozen=True)
class ServerFirst:
    nonce: str
    salt: bytes
    iterations: int
    text: str  # as received: part of the signed auth message


def parse_server_first(message: bytes) -> ServerFirst:
    text = _ascii(message, "server first message")
    match = re.fullmatch(_SERVER_FIRST, text)
    if match is None or not match["salt"]:
        raise AuthenticationError("Invalid SCRAM server first message format")
    return ServerFirst(match["nonce"], b64decode(match["salt"]), int(match["iterations"]), text)


@dataclass(frozen=True)
class ClientFinal:
    channel_binding: bytes
    nonce: str
    proof: bytes
    without_proof: str


def parse_client_final(message: bytes) -> ClientFinal:
    match = re.fullmatch(_CLIENT_FINAL, _ascii(message, "client final message"))
    if match is None:
        raise AuthenticationError("Invalid SCRAM client final message format")
    return ClientFinal(b64decode(match["channel"]), match["nonce"], b64decode(match["proof"]),
                       match["without_proof"])


@dataclass(frozen=True)
class ServerFinal:
    error: str | None
    signature: bytes | None


def parse_server_final(message: bytes) -> ServerFinal:
    match = re.fullmatch(_SERVER_FINAL, _ascii(message, "server final message"))
    if match is None:
        raise AuthenticationError("Invalid SCRAM server final message format")
    signature = match["signature"]
    return ServerFinal(match["error"], None if signature is None else b64decode(signature))
