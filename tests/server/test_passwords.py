"""Dynamic password configs encrypted as Kafka 3.9 stores them in ZooKeeper
(``server.config.passwords``): round trips, refusals of what cannot be decoded, bounded
work on hostile stored values, and both ways against Kafka 3.9.1's own encoder."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from josefk.server.config.dynamic import from_persistent, to_persistent
from josefk.server.config.passwords import (
    CBC,
    GCM,
    KEY_FACTORIES,
    MAX_ITERATIONS,
    NoSecret,
    PasswordEncoder,
    Plain,
    Rotating,
    codec_for,
)
from josefk.server.config.values import ConfigError

KAFKA39_LIBS = Path(__file__).resolve().parents[2] / ".cache" / "kafka39" / "libs"
KAFKA_PASSWORDS_JAVA = Path(__file__).with_name("KafkaPasswords.java")
KEY_PASSWORD = "listener.name.secure.ssl.key.password"
SETTINGS = [(factory, cipher, bits) for factory in KEY_FACTORIES for cipher in (CBC, GCM)
            for bits in (128, 256)]
PASSWORDS = ["s3cret", "", "ünïcödé ✓ 🔑", "x" * 1000, "with,comma:and colon"]


@pytest.mark.parametrize(("factory", "cipher", "bits"), SETTINGS)
def test_round_trip(factory: str, cipher: str, bits: int) -> None:
    encoder = PasswordEncoder("the secret", factory, cipher, bits, 1024)
    for password in PASSWORDS:
        encoded = encoder.encode(password)
        assert password not in encoded or not password
        assert encoder.decode(encoded) == password
        # A fresh salt and IV each time: equal passwords are not equal cipher texts.
        assert encoder.encode(password) != encoded


@pytest.mark.parametrize("cipher", [CBC, GCM])
def test_another_secret_cannot_decode(cipher: str) -> None:
    encoded = PasswordEncoder("one", cipher=cipher).encode("hunter2")
    with pytest.raises(ConfigError, match="could not be decoded"):
        PasswordEncoder("two", cipher=cipher).decode(encoded)


def test_rotation_reads_values_of_the_old_secret() -> None:
    old, new = PasswordEncoder("old"), PasswordEncoder("new")
    rotating = Rotating(new, old)
    assert rotating.decode(old.encode("a")) == "a"
    assert rotating.decode(new.encode("b")) == "b"
    assert new.decode(rotating.encode("c")) == "c"


@pytest.mark.parametrize("stored", [
    "", "garbage", "encryptedPassword:AAAA", "a:b,c:d",
    # huge PBKDF2 work asked for by a stored value: refused, not computed
    f"keyFactoryAlgorithm:PBKDF2WithHmacSHA512,cipherAlgorithm:{CBC},keyLength:128,"
    f"salt:AAAA,iterations:{MAX_ITERATIONS + 1},initializationVector:AAAAAAAAAAAAAAAAAAAAAA==,"
    "encryptedPassword:AAAAAAAAAAAAAAAAAAAAAA==,passwordLength:1",
    f"keyFactoryAlgorithm:MD5,cipherAlgorithm:{CBC},keyLength:128,salt:AAAA,iterations:1024,"
    "initializationVector:AAAAAAAAAAAAAAAAAAAAAA==,encryptedPassword:AAAA,passwordLength:1",
    "keyFactoryAlgorithm:PBKDF2WithHmacSHA1,cipherAlgorithm:DES,keyLength:128,salt:AAAA,"
    "iterations:1024,initializationVector:AAAA,encryptedPassword:AAAA,passwordLength:1",
])
def test_what_is_no_encoded_password_is_refused(stored: str) -> None:
    with pytest.raises(ConfigError, match="could not be decoded"):
        PasswordEncoder("secret").decode(stored)


def test_length_sanity_check() -> None:
    encoded = PasswordEncoder("s").encode("abc").replace("passwordLength:3", "passwordLength:4")
    with pytest.raises(ConfigError, match="sanity check of length"):
        PasswordEncoder("s").decode(encoded)


def test_codec_for_each_mode() -> None:
    assert isinstance(codec_for({}, zookeeper=False), Plain)
    assert isinstance(codec_for({"password.encoder.secret": "s"}, zookeeper=False), Plain)
    assert isinstance(codec_for({}, zookeeper=True), NoSecret)
    encoder = codec_for({"password.encoder.secret": "s",
                         "password.encoder.cipher.algorithm": GCM,
                         "password.encoder.key.length": 256,
                         "password.encoder.iterations": 2048}, zookeeper=True)
    assert encoder == PasswordEncoder("s", None, GCM, 256, 2048)
    with pytest.raises(ConfigError, match="AES key length"):
        codec_for({"password.encoder.secret": "s", "password.encoder.key.length": 64}, True)
    with pytest.raises(ConfigError, match="cipher.algorithm"):
        codec_for({"password.encoder.secret": "s",
                   "password.encoder.cipher.algorithm": "DES/ECB/NoPadding"}, True)


def test_persistent_props_encode_only_passwords_per_broker() -> None:
    encoder = PasswordEncoder("s")
    props = {KEY_PASSWORD: "k", "log.retention.ms": "1000"}
    stored = to_persistent(props, True, encoder)
    assert stored["log.retention.ms"] == "1000" and stored[KEY_PASSWORD] != "k"
    assert from_persistent(stored, True, "1", encoder) == props
    with pytest.raises(ConfigError, match="only at broker level"):
        to_persistent({"sasl.jaas.config": "x"}, False, encoder)
    with pytest.raises(ConfigError, match="secret not configured"):
        to_persistent(props, True, NoSecret())


def test_undecodable_stored_password_is_dropped_without_its_value(
        caplog: pytest.LogCaptureFixture) -> None:
    stored = to_persistent({KEY_PASSWORD: "topsecret", "log.retention.ms": "5"}, True,
                           PasswordEncoder("old"))
    assert from_persistent(stored, True, "1", PasswordEncoder("new")) == {
        "log.retention.ms": "5"}
    assert KEY_PASSWORD in caplog.text and stored[KEY_PASSWORD] not in caplog.text


def _kafka(requests: list[list[str]]) -> list[str]:
    missing = None
    if shutil.which("java") is None:
        missing = "no java on PATH"
    elif not list(KAFKA39_LIBS.glob("kafka-server-common-3.9*.jar")):
        missing = f"no Kafka 3.9 jars in {KAFKA39_LIBS} (tools/kafka39/fetch.sh)"
    if missing is not None:
        if os.environ.get("JOSEFK_REQUIRE_KAFKA") == "1":
            pytest.fail(missing + " and JOSEFK_REQUIRE_KAFKA=1", pytrace=False)
        pytest.skip(missing)
    result = subprocess.run(
        ["java", "-cp", f"{KAFKA39_LIBS}/*", str(KAFKA_PASSWORDS_JAVA)],
        input="".join("\t".join(r) + "\n" for r in requests), capture_output=True,
        text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    answers = result.stdout.splitlines()
    assert len(answers) == len(requests), result.stdout[-3000:] + result.stderr[-3000:]
    return answers


def test_kafka_39_reads_ours_and_we_read_kafkas() -> None:
    secret = "shared secret"
    passwords = [p for p in PASSWORDS if p and "\t" not in p]
    ours = {(s, p): PasswordEncoder(secret, *s, 1024).encode(p)
            for s in SETTINGS for p in passwords}
    requests = [["decode", secret, s[1], encoded] for (s, _), encoded in ours.items()]
    requests += [["encode", secret, s[0], s[1], str(s[2]), "1024", p]
                 for s in SETTINGS for p in passwords]
    # And with Kafka's default settings (no key factory named).
    requests.append(["encode", secret, "-", CBC, "128", "4096", "abc"])
    *answers, default = _kafka(requests)
    decoded, encoded = answers[:len(ours)], answers[len(ours):]
    assert decoded == [p for _, p in ours]
    for (s, p), theirs in zip([(s, p) for s in SETTINGS for p in passwords], encoded,
                              strict=True):
        assert PasswordEncoder(secret).decode(theirs) == p, (s, theirs)
    assert "keyFactoryAlgorithm:PBKDF2WithHmacSHA512" in default
    assert PasswordEncoder(secret).decode(default) == "abc"
