"""``ssl.principal.mapping.rules`` as Kafka's SslPrincipalMapper reads and applies them, and
the DN of a real certificate."""

from __future__ import annotations

import pytest
import trustme
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

from josefk.server.security.principal import (
    ANONYMOUS,
    NoMatchingRule,
    SslPrincipalMapper,
    certificate_dn,
    ssl_principal,
)

DN = "CN=Duke,OU=JavaSoft,O=Sun Microsystems,C=US"


@pytest.mark.parametrize(("rules", "dn", "name"), [
    ("DEFAULT", DN, DN),
    (None, DN, DN),
    ("RULE:^CN=(.*?),OU=(.*?),O=(.*?),C=(.*?)$/$1@$2/", DN, "Duke@JavaSoft"),
    ("RULE:^CN=(.*?),OU=(.*?),O=(.*?),C=(.*?)$/$1@$2/L", DN, "duke@javasoft"),
    ("RULE:^CN=(.*?),OU=(.*?),O=(.*?),C=(.*?)$/$1@$2/U", DN, "DUKE@JAVASOFT"),
    ("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/, DEFAULT", DN, DN),  # first rule misses
    ("RULE:^CN=(.*?),OU=(.*?).*$/$1/,RULE:.*/nobody/", DN, "Duke"),
    ("RULE:^CN=([^,]*).*$/$1 $4/", DN, "Duke $4"),  # a group past the last stays literal
    ("RULE:^CN=(.*?),.*$/$12/", DN, "Duke2"),  # $12 with one group: $1 then "2"
    (" RULE:^CN=(.*?),.*$/$1/ , DEFAULT ", DN, "Duke"),
])
def test_rules(rules: str | None, dn: str, name: str) -> None:
    assert SslPrincipalMapper(rules).name(dn) == name


def test_no_rule_applies() -> None:
    with pytest.raises(NoMatchingRule):
        SslPrincipalMapper("RULE:^CN=nobody$/x/").name(DN)


@pytest.mark.parametrize("rules", ["RULE:^CN=(.*)$/$1/X", "RULE:^CN=(.*)$", "DEFAULT2"])
def test_invalid_rules(rules: str) -> None:
    with pytest.raises(ValueError, match="Invalid rule"):
        SslPrincipalMapper(rules)


def test_certificate_dn_most_specific_first() -> None:
    ca = trustme.CA()
    leaf = ca.issue_cert("x@example.com", common_name="alice", organization_unit_name="eng",
                         organization_name="corp")
    der = x509.load_pem_x509_certificate(leaf.cert_chain_pems[0].bytes()).public_bytes(
        Encoding.DER)
    assert certificate_dn(der) == "CN=alice,OU=eng,O=corp"
    assert ssl_principal(der, SslPrincipalMapper("RULE:^CN=(.*?),.*$/$1/")) == "User:alice"
    assert ssl_principal(None, SslPrincipalMapper(None)) == ANONYMOUS
