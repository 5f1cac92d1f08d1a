"""Kafka broker settings → the settings josefk reads, for the kafka-python shim (shim.py).

kafka-python's KafkaFixture configures a Kafka broker the JVM way; josefk takes the same
``server.properties`` keys but reads two things differently, and this module rewrites them:

* **Key and trust stores.** Kafka's default store type is Java's ``JKS``, which only the JVM
  reads. Every ``[listener.name.<l>.]ssl.{keystore,truststore}.location`` whose type is JKS
  (said, or unset) is converted next to it with the JDK's own tool::

      keytool -importkeystore -srckeystore S.jks -srcstoretype JKS -srcstorepass P \\
              -destkeystore S.jks.p12 -deststoretype PKCS12 -deststorepass P

  and the properties point at the ``.p12`` file with ``ssl.<store>.type=PKCS12``. PKCS12
  protects the key with the store password, so ``ssl.key.password`` becomes that password.
* **JAAS.** Kafka reads the broker's SASL logins from the JAAS file named by
  ``-Djava.security.auth.login.config=...`` in ``KAFKA_OPTS`` (section
  ``<listener>.KafkaServer``, else ``KafkaServer``); josefk reads the per-listener keys. For
  each SASL listener and each of ``sasl.enabled.mechanisms``, the section's login module for
  that mechanism (``PlainLoginModule`` for PLAIN, ``ScramLoginModule`` for SCRAM-SHA-*)
  becomes ``listener.name.<l>.<mechanism>.sasl.jaas.config``, options unchanged (PLAIN keeps
  its ``user_<name>`` entries, SCRAM its ``username``/``password`` for inter-broker logins).
  A key already set in the properties wins.

Everything else is passed through as it is.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")


# --- Java properties ---------------------------------------------------------------------

def read_properties(text: str) -> dict[str, str]:
    """``java.util.Properties.load`` for the files the fixtures render: comments (``#``,
    ``!``), ``key=value`` / ``key:value`` / ``key value``, backslash line continuations."""
    props: dict[str, str] = {}
    lines = iter(text.splitlines())
    for raw in lines:
        line = raw.lstrip()
        if not line or line[0] in "#!":
            continue
        while _continues(line):
            line = line[:-1] + next(lines, "").lstrip()
        m = re.match(r"((?:\\.|[^=:\s\\])*)\s*[=:\s]?\s*(.*)$", line)
        if m is None:  # pragma: no cover - the pattern matches any line
            continue
        props[_unescape(m.group(1))] = _unescape(m.group(2))
    return props


def _continues(line: str) -> bool:
    trailing = len(line) - len(line.rstrip("\\"))
    return trailing % 2 == 1


def _unescape(text: str) -> str:
    escapes = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
    return re.sub(r"\\(.)", lambda m: escapes.get(m.group(1), m.group(1)), text)


def write_properties(props: dict[str, str]) -> str:
    def esc(text: str, key: bool) -> str:
        text = text.replace("\\", "\\\\").replace("\n", "\\n")
        return re.sub(r"([=:\s#!])", r"\\\1", text) if key else text
    return "".join(f"{esc(k, True)}={esc(v, False)}\n" for k, v in props.items())


# --- JAAS files ----------------------------------------------------------------------------

@dataclass(frozen=True)
class LoginModule:
    """One entry of a JAAS section: ``class flag key=value ...;``."""

    name: str
    flag: str
    options: tuple[tuple[str, str], ...]

    def option(self, key: str) -> str | None:
        return next((v for k, v in self.options if k == key), None)

    def jaas_config(self) -> str:
        """The entry as a ``sasl.jaas.config`` value."""
        opts = "".join(f' {k}="{_quote(v)}"' for k, v in self.options)
        return f"{self.name} {self.flag}{opts};"


def _quote(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


_JAAS_TOKEN = re.compile(r'\s+|//[^\n]*|/\*.*?\*/|"((?:\\.|[^"\\])*)"|([{};=])|([^\s{};="]+)',
                         re.S)


def read_jaas(text: str) -> dict[str, list[LoginModule]]:
    """A JAAS login configuration file: section name → its login modules."""
    tokens: list[tuple[str, str]] = []  # (kind, text): kind "s" string, "p" punctuation
    pos = 0
    while pos < len(text):
        m = _JAAS_TOKEN.match(text, pos)
        if m is None:
            raise ValueError(f"JAAS file: cannot read at offset {pos}")
        pos = m.end()
        if m.group(1) is not None:
            tokens.append(("s", re.sub(r"\\(.)", r"\1", m.group(1))))
        elif m.group(2) is not None:
            tokens.append(("p", m.group(2)))
        elif m.group(3) is not None:
            tokens.append(("s", m.group(3)))
    sections: dict[str, list[LoginModule]] = {}
    i = 0

    def take(kind: str, text: str | None = None) -> str:
        nonlocal i
        if i >= len(tokens) or tokens[i][0] != kind or text not in (None, tokens[i][1]):
            raise ValueError(f"JAAS file: expected {text or 'a name'} at token {i}")
        i += 1
        return tokens[i - 1][1]

    while i < len(tokens):
        section = take("s")
        take("p", "{")
        modules: list[LoginModule] = []
        while tokens[i] != ("p", "}"):
            name, flag = take("s"), take("s")
            options: list[tuple[str, str]] = []
            while tokens[i] != ("p", ";"):
                key = take("s")
                take("p", "=")
                options.append((key, take("s")))
            take("p", ";")
            modules.append(LoginModule(name, flag, tuple(options)))
        take("p", "}")
        take("p", ";")
        sections[section] = modules
    return sections


def jaas_file_from_opts(kafka_opts: str) -> Path | None:
    """The file of ``-Djava.security.auth.login.config=...`` in KAFKA_OPTS, if any."""
    found = None
    for word in shlex.split(kafka_opts):
        if word.startswith("-Djava.security.auth.login.config="):
            found = Path(word.split("=", 1)[1])
    return found


def module_for(mechanism: str, modules: list[LoginModule]) -> LoginModule | None:
    wanted = PLAIN_MODULE if mechanism == "PLAIN" else (
        SCRAM_MODULE if mechanism.startswith("SCRAM-SHA-") else None)
    return next((m for m in modules if m.name == wanted), None)


# --- listeners -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Listener:
    name: str
    protocol: str
    host: str
    port: int


def listeners(props: dict[str, str]) -> list[Listener]:
    """``listeners`` with each listener's protocol (``listener.security.protocol.map``,
    whose default maps each protocol name to itself)."""
    mapping = {p: p for p in ("PLAINTEXT", "SSL", *SASL_PROTOCOLS)}
    for pair in props.get("listener.security.protocol.map", "").split(","):
        name, sep, protocol = pair.strip().partition(":")
        if sep:
            mapping[name.strip().upper()] = protocol.strip().upper()
    found = []
    for item in props.get("listeners", "PLAINTEXT://:9092").split(","):
        m = re.fullmatch(r"\s*([A-Za-z0-9_]+)://(\[[^\]]*\]|[^:]*):(\d+)\s*", item)
        if m is None:
            raise ValueError(f"listeners: cannot read {item!r}")
        name = m.group(1).upper()
        found.append(Listener(name, mapping.get(name, name), m.group(2).strip("[]"),
                              int(m.group(3))))
    return found


def mechanisms(props: dict[str, str], listener: Listener) -> list[str]:
    prefix = f"listener.name.{listener.name.lower()}."
    raw = props.get(prefix + "sasl.enabled.mechanisms", props.get("sasl.enabled.mechanisms",
                                                                  "GSSAPI"))
    return [m.strip().upper() for m in raw.split(",") if m.strip()]


def listener_modules(sections: dict[str, list[LoginModule]],
                     listener: Listener) -> list[LoginModule]:
    """Kafka's lookup: section ``<listener>.KafkaServer``, else ``KafkaServer``."""
    return sections.get(f"{listener.name.lower()}.KafkaServer", sections.get("KafkaServer", []))


# --- the translation -------------------------------------------------------------------------

def translate(props: dict[str, str], jaas: dict[str, list[LoginModule]] | None,
              log: list[str]) -> dict[str, str]:
    """The josefk properties for a Kafka broker's ``props`` and JAAS sections; what was
    changed is appended to ``log`` (never a secret)."""
    out = dict(props)
    _convert_stores(out, log)
    if jaas is not None:
        for listener in listeners(props):
            if listener.protocol not in SASL_PROTOCOLS:
                continue
            modules = listener_modules(jaas, listener)
            for mechanism in mechanisms(props, listener):
                key = f"listener.name.{listener.name.lower()}.{mechanism.lower()}.sasl.jaas.config"
                module = module_for(mechanism, modules)
                if key in out or module is None:
                    continue
                out[key] = module.jaas_config()
                log.append(f"JAAS {module.name.rsplit('.', 1)[-1]} for {listener.name} "
                           f"{mechanism} -> {key}")
    return out


def _convert_stores(props: dict[str, str], log: list[str]) -> None:
    jobs = []
    for key in [k for k in props if re.fullmatch(r"(listener\.name\.[^.]+\.)?ssl\."
                                                 r"(keystore|truststore)\.location", k)]:
        prefix, store = re.fullmatch(r"(.*)ssl\.(keystore|truststore)\.location", key).groups()
        type_key = f"{prefix}ssl.{store}.type"
        if props.get(type_key, props.get(f"ssl.{store}.type", "JKS")).upper() != "JKS":
            continue
        source = Path(props[key])
        password = props.get(f"{prefix}ssl.{store}.password") or "changeit"
        key_password = props.get(f"{prefix}ssl.key.password") if store == "keystore" else None
        target = source.with_name(source.name + ".p12")
        jobs.append((source, target, password, key_password))
        props[key] = str(target)
        props[type_key] = "PKCS12"
        props[f"{prefix}ssl.{store}.password"] = password
        if key_password:
            # PKCS12 keeps the key under the store's password.
            props[f"{prefix}ssl.key.password"] = password
        log.append(f"{key}: JKS {source.name} -> PKCS12 {target.name} ({type_key}=PKCS12)")
    # One JVM each, side by side: the fixture gives the broker 5 s for its first start.
    with ThreadPoolExecutor(max(1, len(jobs))) as pool:
        for done in [pool.submit(_converted, *job) for job in jobs]:
            done.result()


def _converted(source: Path, target: Path, password: str, key_password: str | None) -> None:
    """``target`` converted from ``source``, unless it already is: the fixture starts the
    broker again (new port, same stores) when it was not up in time."""
    if target.exists() and target.stat().st_mtime >= source.stat().st_mtime:
        return
    scratch = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    scratch.unlink(missing_ok=True)
    try:
        _to_pkcs12(source, scratch, password, key_password)
        os.replace(scratch, target)
    finally:
        scratch.unlink(missing_ok=True)


def _to_pkcs12(source: Path, target: Path, password: str, key_password: str | None) -> None:
    """keytool -importkeystore JKS → PKCS12, the target's store password being the source's.
    A key password of its own needs the entries one by one (-srckeypass goes with -srcalias)."""
    common = ["-noprompt", "-srckeystore", str(source), "-srcstoretype", "JKS",
              "-srcstorepass", password, "-destkeystore", str(target),
              "-deststoretype", "PKCS12", "-deststorepass", password]
    if not key_password or key_password == password:
        _keytool(["-importkeystore", *common])
        return
    listing = _keytool(["-list", "-keystore", str(source), "-storetype", "JKS",
                        "-storepass", password])
    for alias, kind in re.findall(r"^([^,\n]+), [^\n]*?, (\w+Entry),", listing, re.M):
        extra = ["-srckeypass", key_password] if kind == "PrivateKeyEntry" else []
        _keytool(["-importkeystore", *common, "-srcalias", alias, "-destalias", alias, *extra])


#: keytool's JVM on the quick start-up settings: about 1 s a store instead of 2 on a busy
#: two-CPU machine (the fixture gives the broker's first start 5 s).
KEYTOOL_JVM = ["-J-XX:TieredStopAtLevel=1", "-J-XX:+UseSerialGC", "-J-Xshare:auto"]


def _keytool(args: list[str]) -> str:
    done = subprocess.run(["keytool", *KEYTOOL_JVM, *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"keytool {args[0]} failed: {done.stdout.strip()} "
                           f"{done.stderr.strip()}")
    return done.stdout
