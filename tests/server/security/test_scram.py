"""SCRAM-SHA-256/512 (RFC 5802, RFC 7677) as Kafka's ScramSaslServer and ScramSaslClient,
checked against RFC 7677's example and kafka-python's independent client."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.net.sasl.scram import ScramClient as KafkaPythonClient

from josefk.cluster.security.credentials import ScramCredential
from josefk.server.security.errors import AuthenticationError, IllegalSaslStateError
from josefk.server.security.scram import ScramServer, ScramServerState, credential_from_password
from josefk.server.security.scram_client import ScramClient, ScramClientState

MECHANISMS = ["SCRAM-SHA-256", "SCRAM-SHA-512"]
INVALID = "Authentication failed: Invalid user credentials"
# RFC 7677, section 3.
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_NONCE = RFC_CLIENT_NONCE + RFC_SERVER_NONCE
RFC_SERVER_FIRST = f"r={RFC_NONCE},s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096".encode()
RFC_CLIENT_FINAL = f"c=biws,r={RFC_NONCE},p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=".encode()
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="

_CREDENTIALS = {m: credential_from_password(m, "alice-secret") for m in MECHANISMS}


def lookup(mechanism: str, username: str) -> ScramCredential | None:
    return _CREDENTIALS[mechanism] if username == "alice" else None


def rfc_server() -> ScramServer:
    credential = credential_from_password("SCRAM-SHA-256", "pencil", salt=RFC_SALT)
    return ScramServer("SCRAM-SHA-256", lambda _m, user: credential if user == "user" else None,
                       server_nonce=RFC_SERVER_NONCE)


def client_final(mechanism: str, password: str, gs2: str, client_first_bare: str,
                 server_first: bytes) -> bytes:
    """RFC 5802's client proof straight from hashlib: a second opinion on the modules'."""
    name = mechanism.removeprefix("SCRAM-").replace("-", "").lower()
    fields = dict(item.split("=", 1) for item in server_first.decode().split(","))
    salted = hashlib.pbkdf2_hmac(name, password.encode(), base64.b64decode(fields["s"]),
                                 int(fields["i"]))
    client_key = hmac.digest(salted, b"Client Key", name)
    without_proof = f"c={base64.b64encode(gs2.encode()).decode()},r={fields['r']}"
    auth = f"{client_first_bare},{server_first.decode()},{without_proof}".encode()
    signature = hmac.digest(hashlib.new(name, client_key).digest(), auth, name)
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()


def test_rfc_7677_example_server() -> None:
    server = rfc_server()
    assert server.evaluate(f"n,,n=user,r={RFC_CLIENT_NONCE}".encode()) == RFC_SERVER_FIRST
    assert server.state is ScramServerState.RECEIVE_CLIENT_FINAL and not server.complete
    assert server.evaluate(RFC_CLIENT_FINAL) == RFC_SERVER_FINAL
    assert server.complete and server.authorization_id == "user"


def test_rfc_7677_example_client() -> None:
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce=RFC_CLIENT_NONCE)
    assert client.evaluate(b"") == f"n,,n=user,r={RFC_CLIENT_NONCE}".encode()
    assert client.evaluate(RFC_SERVER_FIRST) == RFC_CLIENT_FINAL
    assert client.evaluate(RFC_SERVER_FINAL) == b"" and client.complete


@pytest.mark.parametrize("mechanism", MECHANISMS)
@pytest.mark.parametrize(("user", "password", "ok"), [
    ("alice", "alice-secret", True), ("alice", "wrong", False), ("mallory", "alice-secret", False)])
def test_kafka_python_client(mechanism: str, user: str, password: str, ok: bool) -> None:
    client = KafkaPythonClient(user, password, mechanism)
    server = ScramServer(mechanism, lookup)
    # An unknown user gets a server first message as a known one, and fails only at the end.
    client.process_server_first_message(server.evaluate(client.first_message()))
    if ok:
        client.process_server_final_message(server.evaluate(client.final_message()))
        assert server.complete and server.authorization_id == "alice"
        return
    with pytest.raises(AuthenticationError) as info:
        server.evaluate(client.final_message())
    assert info.value.message == INVALID and server.state is ScramServerState.FAILED


@pytest.mark.parametrize("mechanism", MECHANISMS)
@pytest.mark.parametrize("password", ["alice-secret", "wrong"])
def test_our_client_with_our_server(mechanism: str, password: str) -> None:
    client, server = ScramClient(mechanism, "alice", password), ScramServer(mechanism, lookup)
    server_first = server.evaluate(client.evaluate(b""))
    final = client.evaluate(server_first)
    if password == "wrong":
        with pytest.raises(AuthenticationError, match=INVALID):
            server.evaluate(final)
        return
    assert client.evaluate(server.evaluate(final)) == b""
    assert client.complete and client.state is ScramClientState.COMPLETE and server.complete


def test_unknown_users_cannot_be_told_apart_by_the_server_first_message() -> None:
    def server_first(user: str, key: bytes) -> dict[str, str]:
        server = ScramServer("SCRAM-SHA-256", lookup, fake_salt_key=key)
        text = server.evaluate(f"n,,n={user},r=abc".encode()).decode()
        return dict(item.split("=", 1) for item in text.split(","))

    mallory = server_first("mallory", b"k")
    assert mallory["i"] == "4096" and mallory["r"].startswith("abc")
    assert server_first("mallory", b"k")["s"] == mallory["s"]  # stable, like a real salt
    assert server_first("eve", b"k")["s"] != mallory["s"]
    assert server_first("mallory", b"other key")["s"] != mallory["s"]
    assert len(base64.b64decode(mallory["s"])) in range(20, 27)  # Kafka's base-36 salts


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_sasl_names_escape_comma_and_equals(mechanism: str) -> None:
    seen = []
    credential = credential_from_password(mechanism, "pw")

    def record(_mechanism: str, user: str) -> ScramCredential:
        seen.append(user)
        return credential

    client, server = ScramClient(mechanism, "a,b=c=2C", "pw"), ScramServer(mechanism, record)
    first = client.evaluate(b"")
    assert first.startswith(b"n,,n=a=2Cb=3Dc=3D2C,r=")
    client.evaluate(server.evaluate(client.evaluate(server.evaluate(first))))
    assert seen == ["a,b=c=2C"] and server.authorization_id == "a,b=c=2C"


def test_authzid_must_be_the_user_and_the_channel_binding_its_gs2_header() -> None:
    server = ScramServer("SCRAM-SHA-256", lookup)
    server_first = server.evaluate(b"n,a=alice,n=alice,r=nonce")
    final = client_final("SCRAM-SHA-256", "alice-secret", "n,a=alice,", "n=alice,r=nonce",
                         server_first)
    assert server.evaluate(final).startswith(b"v=") and server.authorization_id == "alice"

    server = ScramServer("SCRAM-SHA-256", lookup)
    server_first = server.evaluate(b"n,a=alice,n=alice,r=nonce")
    with pytest.raises(AuthenticationError, match="Invalid channel binding"):
        server.evaluate(client_final("SCRAM-SHA-256", "alice-secret", "n,,", "n=alice,r=nonce",
                                     server_first))
    with pytest.raises(AuthenticationError, match="authorization id that is different"):
        ScramServer("SCRAM-SHA-256", lookup).evaluate(b"n,a=admin,n=alice,r=nonce")


def test_the_final_nonce_must_be_the_combined_one() -> None:
    server = ScramServer("SCRAM-SHA-256", lookup)
    server_first = server.evaluate(b"n,,n=alice,r=nonce").replace(b"r=nonce", b"r=Xnonce")
    with pytest.raises(AuthenticationError, match="Invalid client nonce"):
        server.evaluate(client_final("SCRAM-SHA-256", "alice-secret", "n,,", "n=alice,r=nonce",
                                     server_first))


def test_extensions_and_delegation_tokens() -> None:
    token = credential_from_password("SCRAM-SHA-512", "hmac-of-token")
    tokens = {"token-id": (token, "bob")}
    client = ScramClient("SCRAM-SHA-512", "token-id", "hmac-of-token",
                         extensions={"tokenauth": "true"})
    server = ScramServer("SCRAM-SHA-512", lookup, tokens=lambda _m, t: tokens.get(t))
    client.evaluate(server.evaluate(client.evaluate(server.evaluate(client.evaluate(b"")))))
    assert server.token_authenticated and server.authorization_id == "bob"
    assert server.extensions == {"tokenauth": "true"}
    # No token store: the token is unknown, and fails as an unknown user.
    client = ScramClient("SCRAM-SHA-512", "alice", "alice-secret",
                         extensions={"tokenauth": "TRUE", "other": "ignored=x"})
    server = ScramServer("SCRAM-SHA-512", lookup)
    with pytest.raises(AuthenticationError, match=INVALID):
        server.evaluate(client.evaluate(server.evaluate(client.evaluate(b""))))


def test_stored_iterations_below_kafkas_minimum_fail() -> None:
    weak = ScramCredential(b"salt", b"k" * 32, b"k" * 32, 1000)
    with pytest.raises(AuthenticationError, match="Iterations 1000 is less than the minimum 4096"):
        ScramServer("SCRAM-SHA-256", lambda _m, _u: weak).evaluate(b"n,,n=alice,r=n")


def test_a_failing_lookup_fails_the_exchange() -> None:
    def broken(_mechanism: str, _user: str) -> ScramCredential:
        raise OSError("store unavailable")

    server = ScramServer("SCRAM-SHA-256", broken)
    with pytest.raises(AuthenticationError, match="Credentials could not be obtained"):
        server.evaluate(b"n,,n=alice,r=n")
    assert server.state is ScramServerState.FAILED


@pytest.mark.parametrize("message", [
    b"y,,n=alice,r=n", b"p=tls-unique,,n=alice,r=n", b"n,,m=ext,n=alice,r=n", b"n,,n=alice",
    b"n,,n=,r=n", b"n,,n=al,ice,r=n", b"n,,n=a=2Dx,r=n", b"n,,n=al\0ice,r=n",
    "n,,n=zoë,r=n".encode(), b"n,,n=alice,r=n\xff", b"n,,n=alice,r=a,b", b"n,,n=alice,r=n,1=x",
    b"", b"garbage"])
def test_malformed_client_first_messages(message: bytes) -> None:
    server = ScramServer("SCRAM-SHA-256", lookup)
    with pytest.raises(AuthenticationError, match="Invalid SCRAM client first message format"):
        server.evaluate(message)
    assert server.state is ScramServerState.FAILED


def test_transitions_not_in_the_table_raise() -> None:
    server = ScramServer("SCRAM-SHA-256", lookup)
    with pytest.raises(IllegalSaslStateError, match="final message in SCRAM server state "
                                                    "RECEIVE_CLIENT_FIRST"):
        server.evaluate(b"c=biws,r=n,p=")
    with pytest.raises(IllegalSaslStateError, match="state FAILED"):
        server.evaluate(b"n,,n=alice,r=n")
    with pytest.raises(IllegalSaslStateError, match="not completed"):
        server.authorization_id  # noqa: B018

    server = rfc_server()
    server.evaluate(f"n,,n=user,r={RFC_CLIENT_NONCE}".encode())
    with pytest.raises(IllegalSaslStateError, match="first message in SCRAM server state"):
        server.evaluate(b"n,,n=user,r=again")
    server = rfc_server()
    server.evaluate(f"n,,n=user,r={RFC_CLIENT_NONCE}".encode())
    server.evaluate(RFC_CLIENT_FINAL)
    with pytest.raises(IllegalSaslStateError, match="state COMPLETE"):
        server.evaluate(RFC_CLIENT_FINAL)
    assert server.state is ScramServerState.FAILED


@pytest.mark.parametrize(("server_first", "message"), [
    (b"r=theirs-ours,s=c2FsdA==,i=4096", "does not start with client nonce"),
    (b"r=ours,s=c2FsdA==,i=4096", "does not start with client nonce"),
    (b"r=oursX,s=c2FsdA==,i=4095", "is less than the minimum 4096 for SCRAM-SHA-256"),
    (b"r=oursX,s=c2FsdA==,i=999999999", "is more than the maximum 16384"),
    (b"r=oursX,s=,i=4096", "Invalid SCRAM server first message format"),
    (b"r=oursX,s=c2FsdA,i=4096", "Invalid SCRAM server first message format"),
])
def test_client_checks_the_server_first_message(server_first: bytes, message: str) -> None:
    client = ScramClient("SCRAM-SHA-256", "alice", "pw", nonce="ours")
    client.evaluate(b"")
    with pytest.raises(AuthenticationError, match=message):
        client.evaluate(server_first)
    assert client.state is ScramClientState.FAILED


def test_client_checks_the_server_final_message() -> None:
    for final, message in [(b"v=" + base64.b64encode(b"x" * 32), "Invalid server signature"),
                           (b"e=invalid-proof", "failed with error: invalid-proof")]:
        client = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce=RFC_CLIENT_NONCE)
        client.evaluate(client.evaluate(b"") and RFC_SERVER_FIRST)
        with pytest.raises(AuthenticationError, match=message):
            client.evaluate(final)
    client = ScramClient("SCRAM-SHA-256", "user", "pencil")
    with pytest.raises(IllegalSaslStateError, match="SEND_CLIENT_FIRST"):
        client.evaluate(RFC_SERVER_FIRST)


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_credential_string_form_both_ways(mechanism: str) -> None:
    credential = credential_from_password(mechanism, "pencil", salt=RFC_SALT, iterations=8192)
    text = credential.to_kafka_string()
    assert text.startswith("salt=W22ZaJ0SNY7soEsUEjb6gQ==,stored_key=")
    assert text.endswith(",iterations=8192")
    assert ScramCredential.from_kafka_string(text) == credential
    name = mechanism.removeprefix("SCRAM-").replace("-", "").lower()
    salted = hashlib.pbkdf2_hmac(name, b"pencil", RFC_SALT, 8192)
    assert credential.server_key == hmac.digest(salted, b"Server Key", name)
    assert credential.stored_key == hashlib.new(
        name, hmac.digest(salted, b"Client Key", name)).digest()
    assert "stored_key" not in repr(credential) and "server_key" not in repr(credential)


def test_credential_strings_accept_javas_unpadded_base64() -> None:
    parsed = ScramCredential.from_kafka_string(
        "salt=YQ,stored_key=YWI,server_key=YWJj,iterations=4096")
    assert (parsed.salt, parsed.stored_key, parsed.server_key) == (b"a", b"ab", b"abc")


@pytest.mark.parametrize("text", [
    "", "salt=YQ==,stored_key=c2VjcmV0,server_key=YQ==",
    "salt=YQ==,stored_key=c2VjcmV0,server_key=YQ==,iterations=4096,extra=1",
    "salt=YQ==,stored_key=c2VjcmV0,server_key=YQ==,iterations=x4096",
    "salt=YQ==,stored_key=c2VjcmV0,server_key=YQ==,iterations=99999999999",
    "salt=YQ==,stored_key=c2VjcmV0!,server_key=YQ==,iterations=4096",
    "salt=YQ==,=c2VjcmV0,server_key=YQ==,iterations=4096",
])
def test_invalid_credential_strings(text: str) -> None:
    with pytest.raises(ValueError, match="Credentials not valid") as info:
        ScramCredential.from_kafka_string(text)
    assert "c2VjcmV0" not in str(info.value)


def test_credential_iterations_and_mechanism_bounds() -> None:
    with pytest.raises(ValueError, match="less than the minimum 4096"):
        credential_from_password("SCRAM-SHA-256", "pw", iterations=4095)
    with pytest.raises(ValueError, match="more than the maximum 16384"):
        credential_from_password("SCRAM-SHA-256", "pw", iterations=16385)
    with pytest.raises(ValueError, match="Unsupported SCRAM mechanism"):
        credential_from_password("SCRAM-SHA-1", "pw")
    with pytest.raises(ValueError, match="nonce"):
        ScramServer("SCRAM-SHA-256", lookup, server_nonce="a,b")
    with pytest.raises(ValueError, match="nonce"):
        ScramClient("SCRAM-SHA-256", "alice", "pw", nonce="")
    with pytest.raises(ValueError, match="extension"):
        ScramClient("SCRAM-SHA-256", "alice", "pw", extensions={"tokenauth": "a,b"})


@given(st.binary(max_size=200) | st.text(max_size=100).map(str.encode))
def test_any_client_first_message_challenges_or_raises_authentication_error(
        message: bytes) -> None:
    with contextlib.suppress(AuthenticationError):
        assert ScramServer("SCRAM-SHA-256", lookup).evaluate(message).startswith(b"r=")


@given(st.binary(max_size=200) | st.from_regex(rb"c=biws,r=nonce[^\n]{0,60}", fullmatch=True))
def test_any_client_final_message_fails_with_authentication_error(message: bytes) -> None:
    server = ScramServer("SCRAM-SHA-512", lookup)
    server.evaluate(b"n,,n=alice,r=nonce")
    with pytest.raises(AuthenticationError):
        server.evaluate(message)


@settings(deadline=None, max_examples=20)
@given(st.binary(max_size=200) | st.from_regex(rb"r=ours[^\n]{0,60}", fullmatch=True),
       st.binary(max_size=100))
def test_any_server_message_is_answered_or_raises_authentication_error(
        first: bytes, final: bytes) -> None:
    client = ScramClient("SCRAM-SHA-256", "alice", "pw", nonce="ours")
    client.evaluate(b"")
    with contextlib.suppress(AuthenticationError):
        client.evaluate(first)
        client.evaluate(final)


@given(st.text(max_size=80))
def test_any_credential_string_parses_or_raises_value_error(text: str) -> None:
    with contextlib.suppress(ValueError):
        ScramCredential.from_kafka_string(text)


@settings(deadline=None, max_examples=15)
@given(st.text(st.characters(min_codepoint=1, max_codepoint=127), min_size=1, max_size=30))
def test_any_ascii_user_name_round_trips(username: str) -> None:
    credential = _CREDENTIALS["SCRAM-SHA-256"]
    client = ScramClient("SCRAM-SHA-256", username, "alice-secret")
    server = ScramServer("SCRAM-SHA-256", lambda _m, u: credential if u == username else None)
    client.evaluate(server.evaluate(client.evaluate(server.evaluate(client.evaluate(b"")))))
    assert server.authorization_id == username
