"""cluster/security/credentials.py and scram_znodes.py: SCRAM credentials as Kafka 3.9
stores them in ZooKeeper."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from josefk.cluster.security import scram_znodes as sz
from josefk.cluster.security.credentials import (
    SCRAM_MECHANISMS,
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    ScramCredential,
)
from josefk.cluster.zk.znodes import decode_config, decode_config_change

CRED = ScramCredential(b"\x01\x02\x03", b"\x04\x05", b"\x06", 4096)
CRED_TEXT = "salt=AQID,stored_key=BAU=,server_key=Bg==,iterations=4096"


def test_credential_string() -> None:
    assert CRED.to_kafka_string() == CRED_TEXT
    assert ScramCredential.from_kafka_string(CRED_TEXT) == CRED
    reordered = "iterations=4096,server_key=Bg==,salt=AQID,stored_key=BAU"
    assert ScramCredential.from_kafka_string(reordered) == CRED  # padding may be left out
    assert ScramCredential.from_kafka_string(CRED_TEXT + ",,") == CRED  # as String.split


@pytest.mark.parametrize("text", [
    "", ",", "salt=AQID", CRED_TEXT + ",extra=1", "salt=AQID,,stored_key=BAU=",
    "=x," + CRED_TEXT, "salt=A!ID,stored_key=BAU=,server_key=Bg==,iterations=4096",
    "salt=AQID,stored_key=BAU=,server_key=Bg==,iterations=4k",
    "salt=AQID,stored_key=BAU=,server_key=Bg==,iterations=2147483648",
    "salt=AQID,stored_key=BAU=,server_key=Bg==,iterations= 1"])
def test_credential_string_refused(text: str) -> None:
    with pytest.raises(ValueError, match="Credentials not valid"):
        ScramCredential.from_kafka_string(text)


@pytest.mark.parametrize(("user", "sanitized"), [
    ("alice", "alice"), ("a b", "a%20b"), ("a*b", "a%2Ab"), ("a+b", "a%2Bb"), ("a~b", "a%7Eb"),
    ("a/b", "a%2Fb"), ("a:b", "a%3Ab"), ("\u00e9", "%C3%A9"), ("a.b-c_d", "a.b-c_d"),
    ("a%b", "a%25b"), ("\U0001f600", "%F0%9F%98%80")])
def test_sanitize_is_kafkas(user: str, sanitized: str) -> None:
    """Sanitizer.sanitize, as Kafka 3.9.1 answers (see test_security_vs_kafka.py)."""
    assert sz.sanitize(user) == sanitized
    assert sz.desanitize(sanitized) == user
    assert sz.user_config_path(user) == f"/config/users/{sanitized}"


def test_desanitize_is_url_decoding() -> None:
    assert sz.desanitize("a+b") == "a b"
    with pytest.raises(ValueError):
        sz.desanitize("a%zz")
    with pytest.raises(ValueError):
        sz.desanitize("%C3")


def test_user_config_bytes() -> None:
    configs = sz.with_scram_credential({}, SCRAM_SHA_256, CRED)
    assert sz.encode_user_config(configs) == (
        b'{"version":1,"config":{"SCRAM-SHA-256":"' + CRED_TEXT.encode() + b'"}}')
    both = sz.with_scram_credential(configs, SCRAM_SHA_512, CRED)
    # java.util.Properties order: SCRAM-SHA-512 first whatever the insertion order.
    assert sz.encode_user_config(both) == sz.encode_user_config(dict(reversed(both.items())))
    assert sz.encode_user_config(both).startswith(b'{"version":1,"config":{"SCRAM-SHA-512"')
    assert sz.scram_credentials(decode_config(sz.encode_user_config(both))) == {
        SCRAM_SHA_256: CRED, SCRAM_SHA_512: CRED}


def test_credentials_share_the_node_with_quotas() -> None:
    configs = {"producer_byte_rate": "1024", SCRAM_SHA_512: CRED_TEXT}
    updated = sz.with_scram_credential(configs, SCRAM_SHA_256, CRED)
    assert updated["producer_byte_rate"] == "1024" and set(sz.scram_credentials(updated)) == {
        SCRAM_SHA_256, SCRAM_SHA_512}
    assert sz.without_scram_credential(updated, SCRAM_SHA_512) == {
        "producer_byte_rate": "1024", SCRAM_SHA_256: CRED_TEXT}
    assert sz.without_scram_credential({}, SCRAM_SHA_256) == {}
    with pytest.raises(ValueError):
        sz.with_scram_credential({}, "PLAIN", CRED)
    with pytest.raises(ValueError):
        sz.scram_credentials({SCRAM_SHA_256: "garbage"})


def test_user_config_change() -> None:
    assert sz.CONFIG_CHANGE_PATH == "/config/changes/config_change_"
    assert sz.encode_user_config_change("a b") == b'{"version":2,"entity_path":"users/a%20b"}'
    assert decode_config_change(sz.encode_user_config_change("x")) == "users/x"
    assert sz.user_of_entity_path("users/a%20b") == "a b"
    for other in ("topics/t", "users/a/clients/c", "users/", "users"):
        assert sz.user_of_entity_path(other) is None


@given(st.text(max_size=20))
def test_sanitize_round_trip(user: str) -> None:
    sanitized = sz.sanitize(user)
    assert "/" not in sanitized and "*" not in sanitized and " " not in sanitized
    assert sz.desanitize(sanitized) == user
    assert sz.user_of_entity_path(sz.user_entity_path(user) if user else "users/") == (
        user or None)


credentials = st.builds(ScramCredential, st.binary(max_size=64), st.binary(max_size=64),
                        st.binary(max_size=64), st.integers(-2**31, 2**31 - 1))


@given(credentials)
def test_credential_round_trip(credential: ScramCredential) -> None:
    assert ScramCredential.from_kafka_string(credential.to_kafka_string()) == credential


@given(st.dictionaries(st.sampled_from(SCRAM_MECHANISMS), credentials),
       st.dictionaries(st.text(max_size=10).filter(lambda k: k not in SCRAM_MECHANISMS),
                       st.text(max_size=10), max_size=14))
def test_user_config_round_trip(creds: dict[str, ScramCredential],
                                others: dict[str, str]) -> None:
    configs = dict(others)
    for mechanism, credential in creds.items():
        configs = sz.with_scram_credential(configs, mechanism, credential)
    decoded = decode_config(sz.encode_user_config(configs))
    assert decoded == configs and sz.scram_credentials(decoded) == creds
