"""The broker under fuzz: a josefk subprocess with the compatibility suite's security settings
(every listener kind, its certificates, PLAIN users in JAAS entries, SCRAM users created through
the admin API), its RSS, and the internal errors its log reports."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from kafka.protocol.admin import AlterUserScramCredentialsRequest

from compat_tests.certs import Certs
from compat_tests.conftest import Broker, free_port
from compat_tests.rawkafka import RawConnection
from compat_tests.security.conftest import (
    LISTENERS,
    SCRAM_USERS,
    broker_command,
    security_overrides,
)
from josefk.server.security import rfc5802

from .client import Endpoint

# Faster failures and joins than the suite's settings: the fuzzer waits for neither.
FUZZ_OVERRIDES = {"connection.failed.authentication.delay.ms": "0",
                  "group.initial.rebalance.delay.ms": "0"}
SCRAM_TYPES = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
# What the broker logs when a request handler raised: a bug (see Connection.serve).
INTERNAL_ERROR = re.compile(r"after an internal error|^Traceback", re.M)
LOG_RECORD = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d")
FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+), in (\S+)')


def rss_kb(pid: int) -> int | None:
    """VmRSS of a live process, in kB."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    if re.search(r"^State:\s+Z", status, re.M):
        return None
    match = re.search(r"^VmRSS:\s+(\d+) kB", status, re.M)
    return int(match.group(1)) if match else None


@dataclass
class InternalError:
    signature: str
    text: str


class LogWatch:
    """The internal errors the broker logged since the last look."""

    def __init__(self, path: Path, offset: int = 0) -> None:
        self.path, self.offset = path, offset
        self._partial = ""

    def errors(self) -> list[InternalError]:
        try:
            with open(self.path, "rb") as log:
                log.seek(self.offset)
                data = log.read()
        except OSError:
            return []
        self.offset += len(data)
        text = self._partial + data.decode("utf-8", "replace")
        if not INTERNAL_ERROR.search(text):
            self._partial = text[-4096:]  # a match split between two reads
            return []
        self._partial = ""
        return [_error(block) for block in _blocks(text) if INTERNAL_ERROR.search(block)]


def _blocks(text: str) -> list[str]:
    """Log records (a record's traceback lines stay with it)."""
    blocks: list[list[str]] = [[]]
    for line in text.splitlines():
        if LOG_RECORD.match(line):
            blocks.append([])
        blocks[-1].append(line)
    return ["\n".join(b) for b in blocks if b]


def _error(block: str) -> InternalError:
    lines = block.splitlines()
    frames = [m for line in lines if (m := FRAME.match(line))]
    where = (f"{Path(frames[-1].group(1)).name}:{frames[-1].group(2)} in {frames[-1].group(3)}"
             if frames else "?")
    last = lines[-1].strip() if frames else lines[0]
    kind = last.split(":", 1)[0][:80]
    return InternalError(f"internal error: {kind} at {where}", block)


class FuzzBroker:
    """One josefk broker with every listener kind, data and log under ``workdir``."""

    def __init__(self, workdir: Path, certs: Certs) -> None:
        self.workdir, self.certs = workdir, certs
        self.ports = {name: free_port() for name in LISTENERS}
        data = workdir / "data"
        data.mkdir(parents=True, exist_ok=True)
        self.log_path = workdir / "broker.log"
        overrides = {**security_overrides(self.ports, certs), **FUZZ_OVERRIDES}
        self.broker = Broker("josefk", f"127.0.0.1:{self.ports['PLAINTEXT']}",
                             broker_command("josefk", data, overrides, 0), data, self.log_path)

    def start(self) -> None:
        try:
            self.broker.start()
        except BaseException as e:  # the suite's Broker fails through pytest.fail
            if isinstance(e, KeyboardInterrupt):
                raise
            raise RuntimeError(f"broker did not start: {e}") from None
        self.add_scram_users()

    @property
    def pid(self) -> int:
        assert self.broker.proc is not None
        return self.broker.proc.pid

    @property
    def exit_code(self) -> int | None:
        proc = self.broker.proc
        return None if proc is None else proc.poll()

    def stop(self) -> None:
        self.broker.stop()

    def endpoint(self, listener: str) -> Endpoint:
        return Endpoint(listener, self.ports[listener], str(self.certs.ca),
                        str(self.certs.client_cert), str(self.certs.client_key))

    def add_scram_users(self) -> None:
        """The suite's SCRAM users, through AlterUserScramCredentials on PLAINTEXT."""
        salt, iterations = b"fuzz-salt", rfc5802.MIN_ITERATIONS
        upsertions = [(user, code, iterations, salt,
                       rfc5802.salted_password(mechanism, password, salt, iterations))
                      for user, password in SCRAM_USERS.items()
                      for mechanism, code in SCRAM_TYPES.items()]
        with RawConnection(self.broker.bootstrap, client_id="fuzz-admin") as conn:
            for upsertion in upsertions:  # one per request, as Kafka 4 wants
                request = AlterUserScramCredentialsRequest(deletions=[], upsertions=[upsertion])
                response = conn.request(request, 0)
                errors = [r.error_message for r in response.results if r.error_code]
                if errors:
                    raise RuntimeError(f"SCRAM user not created: {errors}")
