"""Dynamic password configs as Kafka 3.9 keeps them in ZooKeeper: encrypted with a key
derived from ``password.encoder.secret`` (PBKDF2), stored as a comma-separated map of
the cipher text and every parameter needed to decrypt it, so that a Kafka 3.9 broker
with the same secret reads what a josefk broker wrote, and the other way round.

One broker without ZooKeeper stores them as given, as Kafka's KRaft mode does.
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from josefk.server.config.values import ConfigError

# cryptography is imported where a password is encoded or decoded: a broker without
# password configs (or TLS) never loads it.
#: Java's key factory names and the hash each one's PBKDF2 uses.
KEY_FACTORIES = {"PBKDF2WithHmacSHA512": "SHA512", "PBKDF2WithHmacSHA256": "SHA256",
                 "PBKDF2WithHmacSHA1": "SHA1"}
CBC = "AES/CBC/PKCS5Padding"
GCM = "AES/GCM/NoPadding"
CIPHERS = (CBC, GCM)
SALT_BYTES = 256
GCM_TAG_BITS = 128
GCM_IV_BYTES = 12
#: A stored value asking for more PBKDF2 rounds than this is refused, not computed.
MAX_ITERATIONS = 1_000_000


@dataclass(frozen=True)
class PasswordEncoder:
    """Kafka's ``EncryptingPasswordEncoder``: ``encode`` uses these settings, ``decode``
    the ones stored beside the cipher text."""

    secret: str
    key_factory: str | None = None
    cipher: str = CBC
    key_length: int = 128
    iterations: int = 4096

    def encode(self, password: str) -> str:
        from cryptography.hazmat.primitives import padding
        from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        salt = os.urandom(SALT_BYTES)
        factory = self.key_factory or "PBKDF2WithHmacSHA512"
        key = _key(self.secret, factory, self.key_length, salt, self.iterations)
        fields = {"keyFactoryAlgorithm": factory, "cipherAlgorithm": self.cipher,
                  "keyLength": str(self.key_length), "salt": _b64(salt),
                  "iterations": str(self.iterations),
                  # Java's String.length(): UTF-16 code units.
                  "passwordLength": str(len(password.encode("utf-16-le")) // 2)}
        data = password.encode()
        if self.cipher == GCM:
            iv = os.urandom(GCM_IV_BYTES)
            fields["authenticationTagLength"] = str(GCM_TAG_BITS)
            encrypted = AESGCM(key).encrypt(iv, data, None)
        else:
            iv = os.urandom(16)
            padder = padding.PKCS7(128).padder()
            encryptor = Cipher(algorithms.AES(key), modes.CBC(iv)).encryptor()
            encrypted = encryptor.update(padder.update(data) + padder.finalize())
            encrypted += encryptor.finalize()
        fields["initializationVector"] = _b64(iv)
        fields["encryptedPassword"] = _b64(encrypted)
        return ",".join(f"{k}:{v}" for k, v in fields.items())

    def decode(self, encoded: str) -> str:
        """The password; ConfigError when it cannot be decoded (another secret, a value
        that is no encoded password)."""
        from cryptography.exceptions import InvalidTag
        from cryptography.hazmat.primitives import padding
        from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        try:
            fields = dict(_entry(item) for item in encoded.split(","))
            cipher = fields["cipherAlgorithm"]
            key = _key(self.secret, fields.get("keyFactoryAlgorithm") or "PBKDF2WithHmacSHA512",
                       int(fields["keyLength"]), _unb64(fields["salt"]),
                       int(fields["iterations"]))
            iv = _unb64(fields["initializationVector"])
            encrypted = _unb64(fields["encryptedPassword"])
            if cipher == GCM:
                if int(fields["authenticationTagLength"]) != GCM_TAG_BITS:
                    raise ValueError("unsupported GCM tag length")
                data = AESGCM(key).decrypt(iv, encrypted, None)
            elif cipher == CBC:
                decryptor = Cipher(algorithms.AES(key), modes.CBC(iv)).decryptor()
                unpadder = padding.PKCS7(128).unpadder()
                padded = decryptor.update(encrypted) + decryptor.finalize()
                data = unpadder.update(padded) + unpadder.finalize()
            else:
                raise ValueError(f"unsupported cipher {cipher}")
            password = data.decode()
            length = int(fields["passwordLength"])
        except (KeyError, ValueError, InvalidTag, binascii.Error) as e:
            raise ConfigError("Password could not be decoded") from e
        if len(password.encode("utf-16-le")) // 2 != length:
            raise ConfigError("Password could not be decoded, sanity check of length failed")
        return password


class PasswordCodec(Protocol):
    """How dynamic password configs are stored: ``encode`` before, ``decode`` after."""

    def encode(self, password: str) -> str: ...

    def decode(self, encoded: str) -> str: ...


class Plain:
    """One broker's file keeps them as given (Kafka's KRaft mode: ``PasswordEncoder.NOOP``)."""

    def encode(self, password: str) -> str:
        return password

    def decode(self, encoded: str) -> str:
        return encoded


class NoSecret:
    """ZooKeeper mode without ``password.encoder.secret``: nothing can be stored or read."""

    def encode(self, password: str) -> str:
        raise ConfigError("Password encoder secret not configured")

    def decode(self, encoded: str) -> str:
        raise ConfigError("Password encoder secret not configured")


@dataclass(frozen=True)
class Rotating:
    """The current secret's encoder; what it cannot decode, the old secret's may
    (``password.encoder.old.secret`` while the secret is rotated)."""

    current: PasswordEncoder
    old: PasswordEncoder

    def encode(self, password: str) -> str:
        return self.current.encode(password)

    def decode(self, encoded: str) -> str:
        try:
            return self.current.decode(encoded)
        except ConfigError:
            return self.old.decode(encoded)


def codec_for(values: Mapping[str, Any], zookeeper: bool) -> PasswordCodec:
    """The codec of a broker with these static settings, in a cluster or alone."""
    if not zookeeper:
        return Plain()
    secret = values.get("password.encoder.secret")
    if not secret:
        return NoSecret()
    settings = {"key_factory": values.get("password.encoder.keyfactory.algorithm"),
                "cipher": values.get("password.encoder.cipher.algorithm") or CBC,
                "key_length": values.get("password.encoder.key.length") or 128,
                "iterations": values.get("password.encoder.iterations") or 4096}
    check_settings(settings["key_factory"], settings["cipher"], settings["key_length"])
    current = PasswordEncoder(str(secret), **settings)
    old = values.get("password.encoder.old.secret")
    return Rotating(current, PasswordEncoder(str(old), **settings)) if old else current


def check_settings(key_factory: str | None, cipher: str, key_length: int) -> None:
    """ConfigError for settings this encoder cannot use (Java would fail on first use)."""
    if key_factory is not None and key_factory not in KEY_FACTORIES:
        raise ConfigError(f"password.encoder.keyfactory.algorithm {key_factory} is not one "
                          f"of {', '.join(KEY_FACTORIES)}")
    if cipher not in CIPHERS:
        raise ConfigError(f"password.encoder.cipher.algorithm {cipher} is not one of "
                          f"{', '.join(CIPHERS)}")
    if key_length not in (128, 192, 256):
        raise ConfigError(f"password.encoder.key.length {key_length} is no AES key length")


def _key(secret: str, factory: str, bits: int, salt: bytes, iterations: int) -> bytes:
    if factory not in KEY_FACTORIES or bits not in (128, 192, 256) or \
            not 1 <= iterations <= MAX_ITERATIONS:
        raise ValueError(f"unsupported key derivation {factory}/{bits}/{iterations}")
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.pbkdf2 import PBKDF2HMAC

    algorithm = getattr(hashes, KEY_FACTORIES[factory])()
    kdf = PBKDF2HMAC(algorithm=algorithm, length=bits // 8, salt=salt, iterations=iterations)
    return kdf.derive(secret.encode())


def _entry(item: str) -> tuple[str, str]:
    # Kafka's Csv.parseCsvMap: "key:value", spaces around the colon ignored.
    key, sep, value = item.partition(":")
    if not sep:
        raise ValueError("not a key:value pair")
    return key.strip(), value.strip()


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _unb64(text: str) -> bytes:
    return base64.b64decode(text, validate=True)
