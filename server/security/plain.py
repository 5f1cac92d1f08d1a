"""The PLAIN SASL mechanism's server (RFC 4616), as Kafka's ``PlainSaslServer`` with the
``PlainServerCallbackHandler``: the users and passwords are the ``user_<name>="<password>"``
options of the listener's ``PlainLoginModule`` JAAS entry."""

from __future__ import annotations

import hmac
from collections.abc import Mapping

from josefk.server.security.errors import AuthenticationError, IllegalSaslStateError
from josefk.server.security.jaas import PLAIN_LOGIN_MODULE, JaasConfigError, JaasEntry

PLAIN = "PLAIN"
_USER_PREFIX = "user_"


def plain_users(options: Mapping[str, str]) -> dict[str, str]:
    """The users and passwords of a ``PlainLoginModule`` entry's options (``user_<name>``)."""
    return {key[len(_USER_PREFIX):]: value for key, value in options.items()
            if key.startswith(_USER_PREFIX) and len(key) > len(_USER_PREFIX)}


class PlainServer:
    """Server side of one SASL/PLAIN exchange: a single response ``authzid NUL authcid NUL
    passwd``, answered with an empty challenge once the password matches."""

    mechanism_name = PLAIN

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self._authorization_id: str | None = None
        self._done = False

    @classmethod
    def from_jaas(cls, entry: JaasEntry) -> PlainServer:
        """A server checking the users of a listener's ``PlainLoginModule`` JAAS entry."""
        if entry.login_module != PLAIN_LOGIN_MODULE:
            raise JaasConfigError(f"SASL/PLAIN needs the login module {PLAIN_LOGIN_MODULE}, "
                                  f"not {entry.login_module}")
        return cls(plain_users(entry.options))

    @property
    def complete(self) -> bool:
        return self._authorization_id is not None

    @property
    def authorization_id(self) -> str:
        """The authenticated user; only once the exchange is complete."""
        if self._authorization_id is None:
            raise IllegalSaslStateError("Authentication exchange has not completed")
        return self._authorization_id

    def evaluate(self, response: bytes) -> bytes:
        """Checks the client's response; the empty challenge on success."""
        if self._done:
            raise IllegalSaslStateError("Unexpected SASL/PLAIN response after the exchange ended")
        self._done = True
        authzid, username, password = _tokens(response)
        if not username:
            raise AuthenticationError("Authentication failed: username not specified")
        if not password:
            raise AuthenticationError("Authentication failed: password not specified")
        expected = self._users.get(username)
        # Compared even for an unknown user, so that the time taken does not tell users apart.
        matches = hmac.compare_digest(password.encode(), (expected or "").encode())
        if expected is None or not matches:
            raise AuthenticationError("Authentication failed: Invalid username or password")
        if authzid and authzid != username:
            raise AuthenticationError("Authentication failed: Client requested an authorization "
                                      "id that is different from username")
        self._authorization_id = username
        return b""


def _tokens(response: bytes) -> tuple[str, str, str]:
    try:
        text = response.decode("utf-8")
    except UnicodeDecodeError:
        raise AuthenticationError("Invalid SASL/PLAIN response: not valid UTF-8") from None
    tokens = text.split("\0", 3)
    if len(tokens) != 3:
        raise AuthenticationError(
            f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(tokens)}")
    return tokens[0], tokens[1], tokens[2]
