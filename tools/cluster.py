"""``make cluster``: ZooKeeper and three josefk brokers in the foreground.

ZooKeeper on 127.0.0.1:2181 (chroot /josefk), brokers 1-3 on 127.0.0.1:9092-9094, data
and logs under ./josefk-cluster/. Ctrl-C (or SIGTERM) stops the brokers one at a time
with a controlled shutdown, then ZooKeeper. Each broker's output goes to
./josefk-cluster/broker-<id>.log.
"""

from __future__ import annotations

import argparse
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def wait_port(port: int, timeout: float, proc: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"cluster: {what} exited with status {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.2)
    sys.exit(f"cluster: {what} did not listen on {port} within {timeout:.0f}s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=Path("josefk-cluster"))
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument("--zk-port", type=int, default=2181)
    parser.add_argument("--first-port", type=int, default=9092)
    args = parser.parse_args()
    data = args.dir.resolve()
    data.mkdir(parents=True, exist_ok=True)
    procs: list[tuple[str, subprocess.Popen[bytes]]] = []
    zk_log = open(data / "zookeeper.log", "ab")  # noqa: SIM115 - lives as long as the cluster
    zk = subprocess.Popen([str(REPO / "tools/zookeeper/start.sh"), str(args.zk_port),
                           str(data / "zookeeper")], stdout=zk_log, stderr=subprocess.STDOUT)
    wait_port(args.zk_port, 30, zk, "ZooKeeper")
    print(f"ZooKeeper on 127.0.0.1:{args.zk_port} (chroot /josefk)")
    connect = f"127.0.0.1:{args.zk_port}/josefk"
    for broker_id in range(1, args.brokers + 1):
        port = args.first_port + broker_id - 1
        log = open(data / f"broker-{broker_id}.log", "ab")  # noqa: SIM115
        proc = subprocess.Popen(
            [sys.executable, "-m", "josefk.server", "serve",
             "--override", f"zookeeper.connect={connect}",
             "--override", f"broker.id={broker_id}",
             "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
             "--override", f"log.dirs={data / f'broker-{broker_id}'}"],
            stdout=log, stderr=subprocess.STDOUT)
        procs.append((f"broker {broker_id}", proc))
        wait_port(port, 30, proc, f"broker {broker_id}")
        print(f"broker {broker_id} on 127.0.0.1:{port}, log {data / f'broker-{broker_id}.log'}")
    print(f"bootstrap: {','.join(f'127.0.0.1:{args.first_port + i}' for i in range(args.brokers))}"
          "  (Ctrl-C stops everything)")
    stop = False

    def on_signal(_signum: int, _frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    while not stop:
        for name, proc in procs:
            if proc.poll() is not None:
                print(f"{name} exited with status {proc.returncode}; stopping the cluster")
                stop = True
        time.sleep(0.5)
    for name, proc in reversed(procs):
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
        print(f"{name} stopped")
    zk.terminate()
    zk.wait(timeout=30)
    print("ZooKeeper stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
