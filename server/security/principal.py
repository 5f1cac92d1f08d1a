"""Principals: ``User:ANONYMOUS`` on PLAINTEXT, the SASL user after SASL, and on SSL the
client certificate's distinguished name mapped by ``ssl.principal.mapping.rules``
(Kafka's SslPrincipalMapper: ``RULE:pattern/replacement/[LU]`` entries and ``DEFAULT``,
tried in order; the first rule whose pattern matches the whole DN gives the name)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from types import ModuleType

ANONYMOUS = "User:ANONYMOUS"
USER = "User:"

_RULE = r"(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(,\s*|$)")
_PARSER = re.compile(_RULE)
_BACKREF = re.compile(r"\$(\d+)")


class NoMatchingRule(ValueError):
    """No ``ssl.principal.mapping.rules`` entry applies to a certificate's DN."""


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT (the DN as it is)
    replacement: str = ""
    case: str = ""

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        m = self.pattern.fullmatch(dn)
        if m is None:
            return None
        result = self.pattern.sub(lambda g: _expand(self.replacement, g), dn)
        return {"L": result.lower(), "U": result.upper()}.get(self.case, result)


def _expand(replacement: str, m: re.Match[str]) -> str:
    """Java's ``$n`` references; one past the groups is cut to fewer digits, then kept
    literally, as Kafka does (``$4`` with three groups stays ``$4``)."""
    def group(ref: re.Match[str]) -> str:
        digits = ref.group(1)
        index = int(digits)
        while index > len(m.groups()) and index >= 10:
            index //= 10
            digits = digits[:-1]
        if index > len(m.groups()):
            return ref.group(0)
        return (m.group(index) or "") + ref.group(1)[len(digits):]
    return _BACKREF.sub(group, replacement)


class SslPrincipalMapper:
    """``ssl.principal.mapping.rules``, parsed once per listener."""

    def __init__(self, rules: str | None) -> None:
        self.rules = [r for r in map(_parse, _split(rules or "DEFAULT")) if r is not None]

    def name(self, dn: str) -> str:
        for rule in self.rules:
            name = rule.apply(dn)
            if name is not None:
                return name
        raise NoMatchingRule(f"No rules apply to {dn}")


def _split(rules: str) -> list[str]:
    return [m.group(1) for m in _SPLITTER.finditer(rules.strip()) if m.group(0)]


def _parse(rule: str) -> _Rule | None:
    m = _PARSER.match(rule)
    if m is None or m.end() != len(rule):
        raise ValueError(f"Invalid rule: {rule}")
    if m.group(1):
        return _Rule(None)
    if m.group(2) is not None:
        return _Rule(re.compile(m.group(2)), m.group(3), m.group(4))
    return None  # empty rules are ignored


def certificate_dn(der: bytes) -> str:
    """The subject of a DER certificate as Java's ``X500Principal.getName()`` writes it
    (RFC 2253: most specific RDN first, ``CN=...,OU=...,O=...``)."""
    return x509_module().load_der_x509_certificate(der).subject.rfc4514_string()


def x509_module() -> ModuleType:
    """cryptography's ``x509``, imported on first use: only TLS listeners read certificates,
    and it takes a tenth of a second to import (a TLS listener imports it before serving)."""
    from cryptography import x509

    return x509


def ssl_principal(der: bytes | None, mapper: SslPrincipalMapper) -> str:
    """The principal of a TLS connection: the mapped DN, ANONYMOUS without a certificate."""
    if der is None:
        return ANONYMOUS
    return USER + mapper.name(certificate_dn(der))
