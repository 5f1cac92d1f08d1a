"""JAAS configuration strings as Kafka's ``JaasConfig`` reads them (``sasl.jaas.config`` and
``listener.name.<listener>.<mechanism>.sasl.jaas.config``)::

    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin" password="admin-secret" user_alice="alice-secret";

Kafka tokenizes the value with ``java.io.StreamTokenizer``; this module reproduces the parts of
its syntax that matter: words, single or double quoted strings with Java escapes, numbers,
``//``, ``/`` and ``/* */`` comments. An unquoted value must be a word: like Kafka, a value
starting with a digit (``iterations=4096``) is rejected and must be quoted. Error messages
give an offset, never the text, since option values are passwords.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"

_ESCAPES = {"a": "\x07", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\x0b"}
_WORD, _QUOTED, _NUMBER, _CHAR, _EOF = "word", "quoted", "number", "char", "eof"


class JaasConfigError(ValueError):
    """The JAAS configuration is malformed; the message never contains option values."""


class ControlFlag(StrEnum):
    """A login module's control flag (``javax.security.auth.login``), case-insensitive."""

    REQUIRED = "required"
    REQUISITE = "requisite"
    SUFFICIENT = "sufficient"
    OPTIONAL = "optional"


@dataclass(frozen=True)
class JaasEntry:
    """One login module entry: class name, control flag and options (secrets: not in repr)."""

    login_module: str
    control_flag: ControlFlag
    options: Mapping[str, str] = field(repr=False)

    def __repr__(self) -> str:
        return (f"JaasEntry(login_module={self.login_module!r}, "
                f"control_flag={self.control_flag.value!r}, options=<{len(self.options)} keys>)")


@dataclass(frozen=True)
class _Token:
    kind: str
    text: str  # the string of a word or quoted token, the character of a _CHAR token
    offset: int

    @property
    def sval(self) -> str | None:
        """``StreamTokenizer.sval``: only words and quoted strings have one."""
        return self.text if self.kind in (_WORD, _QUOTED) else None


def _is_alpha(c: str) -> bool:
    return c.isascii() and c.isalpha() or c in "_$" or ord(c) >= 160


def _is_digit(c: str) -> bool:
    return c in "0123456789.-"


def _tokens(text: str) -> Iterator[_Token]:
    i, n = 0, len(text)
    while True:
        while i < n and ord(text[i]) <= 32:
            i += 1
        if i >= n:
            yield _Token(_EOF, "", i)
            return
        start, c = i, text[i]
        if c == "-" and (i + 1 >= n or text[i + 1] not in "0123456789."):
            i += 1
            yield _Token(_CHAR, c, start)
        elif _is_digit(c):
            i += 1 if c == "-" else 0
            seen_dot = False
            while i < n and (text[i] in "0123456789" or text[i] == "." and not seen_dot):
                seen_dot = seen_dot or text[i] == "."
                i += 1
            yield _Token(_NUMBER, text[start:i], start)
        elif _is_alpha(c):
            while i < n and (_is_alpha(text[i]) or _is_digit(text[i])):
                i += 1
            yield _Token(_WORD, text[start:i], start)
        elif c in "\"'":
            value, i = _quoted(text, i)
            yield _Token(_QUOTED, value, start)
        elif c == "/":
            if text.startswith("/*", i):
                end = text.find("*/", i + 2)
                i = n if end < 0 else end + 2
            else:  # "//" and, '/' being a comment character in StreamTokenizer, a lone '/'
                while i < n and text[i] not in "\r\n":
                    i += 1
        else:
            i += 1
            yield _Token(_CHAR, c, start)


def _quoted(text: str, start: int) -> tuple[str, int]:
    """The quoted string at ``start`` and the index after its closing quote."""
    quote, i, n, out = text[start], start + 1, len(text), []
    while i < n and text[i] != quote and text[i] not in "\r\n":
        c = text[i]
        i += 1
        if c == "\\" and i < n:
            c = text[i]
            i += 1
            if c in "01234567":
                digits = 3 if c <= "3" else 2
                j = i
                while j < n and j - i < digits - 1 and text[j] in "01234567":
                    j += 1
                c, i = chr(int(text[i - 1:j], 8)), j
            else:
                c = _ESCAPES.get(c, c)
        out.append(c)
    if i >= n or text[i] != quote:
        # StreamTokenizer ends such a string silently at the line end: a password cut short.
        raise JaasConfigError(f"Unterminated quoted value at offset {start} in JAAS config")
    return "".join(out), i + 1


def _control_flag(token: _Token) -> ControlFlag:
    if token.kind == _EOF:
        raise JaasConfigError("Login module control flag not specified in JAAS config")
    if token.sval is None:
        raise JaasConfigError("Login module control flag is not available in the JAAS config")
    try:
        return ControlFlag(token.sval.lower())
    except ValueError:
        raise JaasConfigError(
            f"Invalid login module control flag at offset {token.offset} in JAAS config "
            f"(expected one of {', '.join(f.value for f in ControlFlag)})") from None


def _entry(first: _Token, tokens: Iterator[_Token]) -> JaasEntry:
    if not first.sval:
        raise JaasConfigError(f"Login module name expected at offset {first.offset} "
                              "in JAAS config")
    flag = _control_flag(next(tokens))
    options: dict[str, str] = {}
    token = next(tokens)
    while token.kind != _EOF and not (token.kind == _CHAR and token.text == ";"):
        key = token.sval
        if not key:
            raise JaasConfigError(f"Option name expected at offset {token.offset} in JAAS config")
        equals, value = next(tokens), None
        if equals.kind == _CHAR and equals.text == "=":
            value = next(tokens).sval
        if value is None:
            raise JaasConfigError(f"Value not specified for the option at offset {token.offset} "
                                  "in JAAS config (a value starting with a digit must be quoted)")
        options[key] = value
        token = next(tokens)
    if token.kind == _EOF:
        raise JaasConfigError("JAAS config entry not terminated by semi-colon")
    return JaasEntry(first.text, flag, MappingProxyType(options))


def parse_jaas_config(text: str) -> list[JaasEntry]:
    """All the login module entries of ``text``; at least one, else ``JaasConfigError``."""
    tokens = _tokens(text)
    entries = []
    for token in tokens:
        if token.kind == _EOF:
            break
        entries.append(_entry(token, tokens))
    if not entries:
        raise JaasConfigError("Login module not specified in JAAS config")
    return entries


def parse_listener_jaas_config(text: str) -> JaasEntry:
    """The single login module of a ``sasl.jaas.config`` property (Kafka's ``JaasContext``
    rejects a property with more than one)."""
    entries = parse_jaas_config(text)
    if len(entries) != 1:
        raise JaasConfigError(f"JAAS config property contains {len(entries)} login modules, "
                              "should be 1 module")
    return entries[0]
