"""Throughput over SASL_SSL, josefk side by side with Apache Kafka 4.x, and what TLS costs
each broker against PLAINTEXT in the same run (issue 27).

    .venv/bin/python -m bench.security            # 3 alternating rounds (~10-12 min, 2 cores)
    .venv/bin/python -m bench.security --quick    # smoke test: 50,000 records, 1 round
    .venv/bin/python -m bench.security --report bench/results/security/results.json

Both brokers get the same settings (bench/brokers.py's single-node overrides plus
:func:`security_overrides`): a PLAINTEXT and a SASL_SSL listener on 127.0.0.1 (Kafka also
its CONTROLLER listener), a PEM key store (a PKCS#8 key and its chain in one file) and a
PEM trust store made at run time with ``trustme`` (never committed: they live in the
data dir and go with it), SASL mechanisms PLAIN and SCRAM-SHA-512, PLAIN users in the
listener's JAAS line.

Each round starts josefk, warms it up, runs the workloads on both listeners, stops it,
then does the same with Kafka (A B A B for ``--rounds``). The clients are
bench/clients.py's librdkafka processes (confluent-kafka), with the settings of
bench/workloads.py's librdkafka rows; on SASL_SSL they add SASL/PLAIN as user ``bench``
and the CA as ``ssl.ca.location``. On each listener:

- produce ``--records`` 1 KiB records, acks=1, linger 5 ms, no compression;
- consume them back from offset 0 (assign, no group; ``fetch.queue.backoff.ms=10``);
- produce as many with acks=all and the idempotent producer.

Figures: MiB/s per broker and listener (medians over the rounds), josefk / Kafka per row,
the TLS cost (SASL_SSL MiB/s over PLAINTEXT MiB/s, paired within a round, then the median)
on each broker, and the broker's CPU seconds per GiB moved (bench/cpu.py). The listener
order alternates between rounds, so neither listener always runs on a fresher broker.
Results: results.json and results.md in ``--out`` (bench/results/security, or .../quick),
broker output in logs/.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import socket
import ssl
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench import cpu, report
from bench.brokers import (
    REPO,
    SINGLE_NODE_OVERRIDES,
    BrokerError,
    BrokerProcess,
    Progress,
    broker_list,
    free_port,
    prepare_run,
    repo_relative,
)
from bench.workloads import (
    ACKS1,
    IDEMPOTENT,
    KIB,
    MIB,
    W4_LIBRDKAFKA,
    Outcome,
    WorkloadError,
    cpu_outcome,
    create_topic,
    delete_topic,
    failed,
    ok,
    run_client,
    unique,
)

RESULTS = REPO / "bench" / "results" / "security"
LISTENERS = ("PLAINTEXT", "SASL_SSL")
WORKLOADS = {
    "produce": "produce 1 KiB, acks=1, linger 5 ms",
    "consume": "consume them back from offset 0",
    "idempotent": "produce 1 KiB, acks=all, idempotent",
}
BENCH_USER, BENCH_PASSWORD = "bench", "bench-secret"
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="admin" password="admin-secret" user_admin="admin-secret" '
              f'user_{BENCH_USER}="{BENCH_PASSWORD}";')
SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
KTLS_ULP = Path("/proc/sys/net/ipv4/tcp_available_ulp")


def key(listener: str, workload: str) -> str:
    """The stable measure key of the JSON: ``sasl_ssl.produce``, ``plaintext.consume``..."""
    return f"{listener.lower()}.{workload}"


# --- certificates and broker settings ----------------------------------------------------------


@dataclass(frozen=True)
class Certs:
    ca: Path
    keystore: Path


def make_certs(folder: Path) -> Certs:
    """A trustme CA and the broker's PEM key store (PKCS#8 key, then its chain) in
    ``folder``, as compat_tests/certs.py writes them."""
    import trustme
    from cryptography.hazmat.primitives.serialization import (
        Encoding,
        NoEncryption,
        PrivateFormat,
        load_pem_private_key,
    )

    folder.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA()
    server = ca.issue_cert("localhost", "127.0.0.1")
    key_pem = load_pem_private_key(server.private_key_pem.bytes(), password=None)
    keystore = folder / "broker-keystore.pem"
    keystore.write_bytes(key_pem.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
                         + b"".join(blob.bytes() for blob in server.cert_chain_pems))
    keystore.chmod(0o600)
    ca.cert_pem.write_to_path(str(folder / "ca.pem"))
    return Certs(folder / "ca.pem", keystore)


def security_overrides(ports: dict[str, int], certs: Certs,
                       controller_port: int | None = None) -> dict[str, str]:
    """The settings both brokers run with; Kafka's adds its CONTROLLER listener."""
    endpoints = ",".join(f"{name}://127.0.0.1:{ports[name]}" for name in LISTENERS)
    protocols = ",".join(f"{name}:{name}" for name in LISTENERS)
    listeners = endpoints
    if controller_port is not None:
        listeners += f",CONTROLLER://127.0.0.1:{controller_port}"
        protocols += ",CONTROLLER:PLAINTEXT"
    return {
        "listeners": listeners,
        "advertised.listeners": endpoints,
        "listener.security.protocol.map": protocols,
        "inter.broker.listener.name": "PLAINTEXT",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certs.keystore),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(certs.ca),
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
    }


def client_config(listener: str, certs: Certs) -> dict[str, Any]:
    """What a librdkafka client adds to reach ``listener``."""
    if listener == "PLAINTEXT":
        return {}
    return {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
            "sasl.username": BENCH_USER, "sasl.password": BENCH_PASSWORD,
            "ssl.ca.location": str(certs.ca)}


def ktls_available() -> bool:
    """Whether the kernel offers kernel TLS (a ``tls`` upper layer protocol)."""
    try:
        return "tls" in KTLS_ULP.read_text().split()
    except OSError:
        return False


def tls_probe(port: int, certs: Certs) -> dict[str, Any]:
    """A TLS handshake with the SASL_SSL listener from Python's ssl module (OpenSSL, the
    same defaults as librdkafka's): the protocol and cipher suite the broker picks."""
    context = ssl.create_default_context(cafile=str(certs.ca))
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, \
                context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            name, version, bits = tls.cipher() or ("?", "?", 0)
            return {"protocol": tls.version(), "cipher": name, "bits": bits}
    except (OSError, ssl.SSLError) as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}


# --- sizes ------------------------------------------------------------------------------------


@dataclass
class Sizes:
    records: int = 750_000             # 1 KiB each, per produce run: 732 MiB, as workload 1's
    warmup_records: int = 150_000      # per listener, untimed, after each start
    seconds: float = 90.0              # each client's own bound
    start_timeout: float = 120.0

    @classmethod
    def quick(cls) -> Sizes:
        return cls(records=50_000, warmup_records=20_000, seconds=30.0)


# --- one broker's round -----------------------------------------------------------------------


class Round:
    """One broker started with both listeners, warmed up, every workload on each."""

    def __init__(self, bench: Bench, kind: str, rnd: int) -> None:
        self.bench = bench
        self.log = bench.log
        self.sizes = bench.sizes
        ports = {"PLAINTEXT": free_port(), "SASL_SSL": free_port()}
        self.ports = ports
        self.broker = BrokerProcess(kind, bench.root / f"{kind}-r{rnd}", ports["PLAINTEXT"],
                                    log_path=bench.logs / f"{kind}.log")
        controller = None
        if kind == "kafka":
            controller = self.broker.controller_port = free_port()
        self.broker.overrides = security_overrides(ports, bench.certs, controller)

    def bootstrap(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"

    def args(self, listener: str, topic: str, **more: Any) -> dict[str, Any]:
        config = {**more.pop("config", {}), **client_config(listener, self.bench.certs)}
        return {"bootstrap": self.bootstrap(listener), "topic": topic,
                "seconds": self.sizes.seconds, "config": config, **more}

    def run(self, listeners: tuple[str, ...]) -> dict[str, Any]:
        out: dict[str, Any] = {"listener_order": list(listeners)}
        broker = self.broker
        try:
            started = broker.start(self.sizes.start_timeout)
        except BrokerError as exc:
            msg = f"{broker.kind} did not start: {exc}"
            self.log(f"!! {msg[:400]}")
            self.bench.notes.append(msg[:1500])
            out["outcomes"] = {key(lst, w): failed(msg).as_dict()
                               for lst in LISTENERS for w in WORKLOADS}
            return out
        try:
            self.log(f"{broker.kind} up after {started:.1f}s (PLAINTEXT {self.ports['PLAINTEXT']}"
                     f", SASL_SSL {self.ports['SASL_SSL']})")
            out["tls"] = tls_probe(self.ports["SASL_SSL"], self.bench.certs)
            out["warmup"] = self.warm_up().as_dict()
            outcomes: dict[str, Outcome] = {}
            for listener in listeners:
                outcomes.update(self.listener_workloads(listener))
            out["outcomes"] = {k: v.as_dict() for k, v in outcomes.items()}
            out["rss_mib"] = round(broker.rss_mib(), 1) if broker.alive() else None
            out["alive_at_end"] = broker.alive()
            if not broker.alive():
                self.bench.notes.append(f"{broker.kind} had exited by the end of its round: "
                                        f"{broker.log_tail(8)}")
        finally:
            stopped = broker.stop()
            self.log(f"{broker.kind} stopped in {stopped:.1f}s")
            if not self.bench.args.keep_data:
                shutil.rmtree(broker.data_dir, ignore_errors=True)
        return out

    def warm_up(self) -> Outcome:
        """Untimed: on each listener, ``warmup_records`` x 1 KiB acks=1 and half as many
        idempotent, then all of them consumed back, so Kafka's JIT has compiled its produce,
        fetch and TLS paths (josefk has nothing to compile; it gets the same pass)."""
        n = self.sizes.warmup_records
        self.log(f"warm-up (untimed): on each listener {n} x 1 KiB acks=1, {n // 2} "
                 "idempotent, then consumed ...")
        began = time.monotonic()
        moved = 0
        try:
            for listener in LISTENERS:
                topic = unique("sec-warmup")
                create_topic(self.broker.bootstrap, topic)
                try:
                    produced = 0
                    for count, config in ((n, ACKS1), (n // 2, IDEMPOTENT)):
                        got = run_client("produce", self.args(listener, topic, count=count,
                                                              size=KIB, config=config),
                                         timeout=self.sizes.seconds + 60)
                        produced += got["records"]
                    read = run_client("consume", self.args(listener, topic, count=produced,
                                                           config=W4_LIBRDKAFKA),
                                      timeout=self.sizes.seconds + 60)
                    moved += produced + read["records"]
                finally:
                    delete_topic(self.broker.bootstrap, topic)
        except Exception as exc:
            msg = f"warm-up: {type(exc).__name__}: {exc}"
            self.bench.notes.append(f"{self.broker.kind}: {msg[:500]}")
            self.log(f"  !! {msg[:300]}")
            return failed(msg)
        took = time.monotonic() - began
        self.log(f"  warm-up: {moved} records moved in {took:.1f}s")
        return ok(took, records_moved=moved)

    def listener_workloads(self, listener: str) -> dict[str, Outcome]:
        sizes = self.sizes
        out: dict[str, Outcome] = {}
        topic = unique(f"sec-{listener.lower()}")
        try:
            create_topic(self.broker.bootstrap, topic)
        except Exception as exc:
            for w in WORKLOADS:
                out[key(listener, w)] = failed(f"CreateTopics: {exc}")
            return out
        try:
            out.update(self.measured(listener, "produce", "produce",
                                     self.args(listener, topic, count=sizes.records, size=KIB,
                                               config=ACKS1)))
            got = out[key(listener, "produce")].detail.get("records", 0)
            if got:
                out.update(self.measured(listener, "consume", "consume",
                                         self.args(listener, topic, count=got,
                                                   config=W4_LIBRDKAFKA)))
            else:
                out[key(listener, "consume")] = failed("nothing was produced to read back")
        finally:
            delete_topic(self.broker.bootstrap, topic)
        topic = unique(f"sec-{listener.lower()}-idem")
        try:
            create_topic(self.broker.bootstrap, topic)
            out.update(self.measured(listener, "idempotent", "produce",
                                     self.args(listener, topic, count=sizes.records, size=KIB,
                                               config=IDEMPOTENT)))
        except WorkloadError as exc:
            out[key(listener, "idempotent")] = failed(str(exc))
        finally:
            delete_topic(self.broker.bootstrap, topic)
        return out

    def measured(self, listener: str, workload: str, role: str,
                 args: dict[str, Any]) -> dict[str, Outcome]:
        """One client run under a CPU meter of the broker: MiB/s and CPU s/GiB."""
        name = key(listener, workload)
        self.log(f"{name}: {args['count']:,} x 1 KiB ...")
        meter = cpu.Meter(self.broker.pid)
        load = round(os.getloadavg()[0], 2)
        try:
            with meter:
                res = run_client(role, args, timeout=self.sizes.seconds + 60)
            outcome = self._outcome(res, args["count"])
            outcome.detail["loadavg_1min_before"] = load
        except Exception as exc:
            outcome = failed(str(exc) if isinstance(exc, WorkloadError)
                             else f"{type(exc).__name__}: {exc}")
        moved = "consumed" if role == "consume" else "produced"
        cpu_out = cpu_outcome(meter, outcome, outcome.detail.get("records", 0) * KIB, moved)
        if outcome.status == "ok":
            self.log(f"  {name}: {outcome.value:,.1f} MiB/s; broker "
                     f"{cpu_out.value or 0:.2f} CPU s/GiB")
        else:
            self.log(f"  {name}: FAILED: {(outcome.error or '')[:300]}")
        return {name: outcome, name + ".cpu": cpu_out}

    @staticmethod
    def _outcome(res: dict[str, Any], count: int) -> Outcome:
        if not res["records"]:
            return failed(f"no record moved; errors: {res['errors']}")
        detail: dict[str, Any] = {"records": res["records"], "seconds": round(res["seconds"], 3)}
        if res["records"] < count:
            detail["capped"] = f"{res['records']} of {count} records in the time bound"
        if res.get("errors"):
            detail["errors"] = res["errors"]
        if res.get("fetch_requests"):
            detail["fetch_requests"] = res["fetch_requests"]
            detail["kib_per_fetch_response"] = res.get("kib_per_fetch")
        return ok(res["bytes"] / MIB / res["seconds"], **detail)


# --- the whole run ----------------------------------------------------------------------------


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.log = Progress()
        self.sizes = Sizes.quick() if args.quick else Sizes()
        if args.records:
            self.sizes.records = args.records
        stamp = time.strftime("%Y%m%d-%H%M%S")
        self.root = (args.data_dir / f"security-{stamp}").resolve()
        self.logs = args.out / "logs"
        self.notes: list[str] = []
        self.certs = Certs(Path(), Path())
        self.result: dict[str, Any] = {}

    def run(self) -> int:
        args = self.args
        if why := prepare_run(args.broker_list, args.out, self.logs, self.root):
            print(f"cannot start Apache Kafka: {why}", file=sys.stderr)
            return 2
        try:
            self.certs = make_certs(self.root / "certs")
        except ImportError as exc:
            print(f"needs trustme (pip install trustme): {exc}", file=sys.stderr)
            return 2
        placeholder = Certs(Path("<data dir>/certs/ca.pem"),
                            Path("<data dir>/certs/broker-keystore.pem"))
        self.result = {
            "label": "quick" if args.quick else "default", "started": report.now_iso(),
            "finished": None, "machine": report.machine_info(self.root),
            "config": {"rounds": args.rounds, "order": args.broker_list,
                       "sizes": asdict(self.sizes), "client": "librdkafka (confluent-kafka)",
                       "sasl": f"PLAIN as {BENCH_USER!r}",
                       "overrides_both": {**SINGLE_NODE_OVERRIDES,
                                          **security_overrides(
                                              {"PLAINTEXT": 0, "SASL_SSL": 0}, placeholder)},
                       "ktls_available": ktls_available(),
                       "tcp_available_ulp": _read(KTLS_ULP)},
            "rounds": [], "notes": self.notes}
        self.log(f"security bench: {args.rounds} round(s) of {' / '.join(args.broker_list)}, "
                 f"{self.sizes.records:,} x 1 KiB per run; data in {self.root}")
        try:
            for rnd in range(1, args.rounds + 1):
                order = LISTENERS if rnd % 2 else LISTENERS[::-1]
                entry: dict[str, Any] = {}
                self.result["rounds"].append(entry)
                for kind in args.broker_list:
                    self.log.prefix = f"round {rnd}/{args.rounds} · {kind} · "
                    entry[kind] = Round(self, kind, rnd).run(order)
                    self._write()
        except KeyboardInterrupt:
            self.notes.append("interrupted (Ctrl-C): results are partial")
        finally:
            self.log.prefix = ""
            self.result["log_warnings"] = broker_log_warnings(self.logs)
            paths = self._write(final=True)
            if not args.keep_data:
                shutil.rmtree(self.root, ignore_errors=True)
                with contextlib.suppress(OSError):
                    self.root.parent.rmdir()
        from bench import security_report

        print()
        print(security_report.markdown(self.result).split("\n## TLS in each broker")[0])
        for p in paths:
            self.log(f"wrote {repo_relative(p)}")
        return 0

    def _write(self, final: bool = False) -> list[Path]:
        from bench import security_report

        if final:
            self.result["finished"] = report.now_iso()
            self.result["machine"]["loadavg_at_end"] = [round(x, 2) for x in os.getloadavg()]
        return security_report.write(self.result, self.args.out)


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def broker_log_warnings(logs: Path, keep: int = 12) -> dict[str, Any]:
    """WARN / ERROR lines of each broker's output (josefk runs at WARNING, Kafka's
    run-class.sh logs WARN and up): how many, and the first few distinct ones."""
    out: dict[str, Any] = {}
    for path in sorted(logs.glob("*.log")):
        lines = [ln for ln in path.read_text(errors="replace").splitlines()
                 if not ln.startswith("=== start:")
                 and any(tag in ln for tag in ("WARN", "ERROR", "Traceback", "CRITICAL"))]
        seen: dict[str, str] = {}
        for ln in lines:
            stem = " ".join(ln.split()[2:])[:160]  # without the timestamp
            seen.setdefault(stem, ln[:400])
        out[path.stem] = {"count": len(lines), "distinct": list(seen.values())[:keep]}
    return out


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.security", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="smoke test: 50,000 records per run, 1 round (~2 min)")
    parser.add_argument("--rounds", type=int, default=None,
                        help="alternating rounds (default 3; 1 with --quick)")
    parser.add_argument("--records", type=int, default=None,
                        help="1 KiB records per produce run (default 750,000)")
    parser.add_argument("--brokers", default="josefk,kafka",
                        help="which brokers, in round order (default josefk,kafka)")
    parser.add_argument("--out", type=Path, default=None,
                        help="results directory (default bench/results/security, "
                             ".../security/quick with --quick)")
    parser.add_argument("--data-dir", type=Path, default=REPO / "bench" / "results" / "tmp",
                        help="log dirs and certificates (default bench/results/tmp)")
    parser.add_argument("--keep-data", action="store_true",
                        help="keep the log dirs and the certificates")
    parser.add_argument("--report", type=Path, default=None,
                        help="only rewrite results.md from this results.json")
    args = parser.parse_args(argv)
    args.rounds = args.rounds or (1 if args.quick else 3)
    args.out = args.out or (RESULTS / "quick" if args.quick else RESULTS)
    args.broker_list = broker_list(parser, args.brokers)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.report:
        from bench import security_report

        result = json.loads(args.report.read_text())
        for path in security_report.write(result, args.report.parent):
            print(f"wrote {path}")
        return 0
    return Bench(args).run()


if __name__ == "__main__":
    sys.exit(main())

