"""Servers a test can stop and start again with the same data, for the server-restart tests (and the chaos run):
the session's shared servers (``deploy/local/``) always start fresh, and stopping them would disturb the other
tests. ``PrivatePostgres``: Debian's PostgreSQL binaries on a free port and a data dir of its own, run as the
``postgres`` user when the tests run as root, as ``deploy/local/postgres.sh`` does. ``PrivateKafka``: the Kafka
jars ``deploy/local/kafka.sh`` fetched, one KRaft broker on free ports and a log dir of its own.
``restart_apiserver``: the session's kube-apiserver stopped and started again with the same arguments (the same
etcd, so the same data); its controllers and KWOK reconnect on their own."""

from __future__ import annotations

import base64
import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from pathlib import Path

from tests.kit.system import free_port

USER = "ebb"
DATABASE = "ebb"


def kraft_cluster_id() -> str:
    """A KRaft cluster id: a random UUID in URL-safe base64, never starting with "-" (StorageTool would read it as an
    option, and one id in 64 does; Kafka's own ``Uuid.randomUuid`` draws again for the same reason)."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


def _bindir() -> Path:
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parts[-3]), reverse=True)
    if found:
        return found[0].parent
    initdb = shutil.which("initdb")
    if initdb is None:
        raise RuntimeError("PostgreSQL's initdb is not installed (deploy/local/postgres.sh install)")
    return Path(initdb).parent


class PrivatePostgres:
    """A PostgreSQL of the test's own: ``start()`` (the first creates the cluster, role ``ebb`` and database
    ``ebb``), ``stop()`` (a fast shutdown), ``start()`` again on the same port and data."""

    def __init__(self, root: Path) -> None:
        self.bindir = _bindir()
        self.root = root
        self.data = root / "data"
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.as_pg = ["setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups", "--reset-env", "--"] \
            if os.getuid() == 0 else []

    @property
    def url(self) -> str:
        return f"postgresql+asyncpg://{USER}:{USER}@127.0.0.1:{self.port}/{DATABASE}"

    def _ready(self) -> bool:
        return subprocess.run([str(self.bindir / "pg_isready"), "-q", "-h", "127.0.0.1", "-p", str(self.port),
                               "-U", "postgres", "-d", "postgres"], check=False).returncode == 0

    def start(self, timeout: float = 60) -> None:
        first = not self.data.exists()
        if first:
            self.root.mkdir(parents=True, exist_ok=True)
            if self.as_pg:
                shutil.chown(self.root, "postgres", "postgres")
            subprocess.run([*self.as_pg, str(self.bindir / "initdb"), "-D", str(self.data), "-U", "postgres",
                            "--auth=trust", "--encoding=UTF8", "--locale=C.UTF-8"], check=True, capture_output=True)
            with (self.data / "postgresql.conf").open("a") as conf:
                conf.write(f"listen_addresses = '127.0.0.1'\nport = {self.port}\nunix_socket_directories = ''\n"
                           "fsync = off\nsynchronous_commit = off\nfull_page_writes = off\n")
            (self.data / "pg_hba.conf").write_text("host all all 127.0.0.1/32 trust\n")
        log = (self.root / "postgres.log").open("ab")
        self.process = subprocess.Popen([*self.as_pg, str(self.bindir / "postgres"), "-D", str(self.data)],
                                        stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while not self._ready():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"PostgreSQL did not start; see {self.root / 'postgres.log'}")
            time.sleep(0.2)
        if first:
            subprocess.run([str(self.bindir / "psql"), "-q", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-p",
                            str(self.port), "-U", "postgres", "-d", "postgres",
                            "-c", f"CREATE ROLE {USER} LOGIN PASSWORD '{USER}'",
                            "-c", f"CREATE DATABASE {DATABASE} OWNER {USER}"], check=True, capture_output=True)

    def stop(self, timeout: float = 30) -> None:
        """A fast shutdown (SIGINT): open connections are closed, the data is kept."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGINT)
        self.process.wait(timeout)

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)


def _kafka_home() -> Path:
    cache = Path(os.environ.get("EBB_CACHE", Path.home() / ".cache" / "ebb"))
    version = os.environ.get("EBB_KAFKA_VERSION", "4.1.2")
    home = cache / f"kafka-{version}"
    if not (home / ".complete").exists():
        raise RuntimeError(f"Kafka {version} is not installed in {home} (deploy/local/kafka.sh install)")
    return home


class PrivateKafka:
    """A Kafka broker of the test's own (KRaft, one node): ``start()`` (the first formats its log dir),
    ``stop()`` (SIGTERM: a controlled shutdown), ``start()`` again on the same ports and data."""

    def __init__(self, root: Path) -> None:
        self.home = _kafka_home()
        self.root = root
        self.port = free_port()
        self.controller_port = free_port()
        while self.controller_port == self.port:
            self.controller_port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _java(self) -> list[str]:
        return ["java", "-Xms128m", "-Xmx512m", "-XX:+UseG1GC", "-Djava.awt.headless=true",
                f"-Dlog4j2.configurationFile={self.home / 'log4j2.properties'}", f"-Dkafka.logs.dir={self.root}",
                "-cp", f"{self.home / 'libs'}/*"]

    def _ready(self, log: Path, since: int) -> bool:
        with socket.socket() as sock:
            sock.settimeout(0.5)
            if sock.connect_ex(("127.0.0.1", self.port)) != 0:
                return False
        with log.open("rb") as f:
            f.seek(since)
            return b"Kafka Server started" in f.read()

    def start(self, timeout: float = 120) -> None:
        properties = self.root / "server.properties"
        if not properties.exists():
            self.root.mkdir(parents=True, exist_ok=True)
            properties.write_text(
                "process.roles=broker,controller\nnode.id=1\n"
                f"controller.quorum.voters=1@127.0.0.1:{self.controller_port}\n"
                f"listeners=PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}\n"
                f"advertised.listeners=PLAINTEXT://127.0.0.1:{self.port}\n"
                "controller.listener.names=CONTROLLER\ninter.broker.listener.name=PLAINTEXT\n"
                "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT\n"
                f"log.dirs={self.root / 'data'}\nnum.partitions=1\ndefault.replication.factor=1\n"
                "offsets.topic.replication.factor=1\noffsets.topic.num.partitions=4\n"
                "transaction.state.log.replication.factor=1\ntransaction.state.log.min.isr=1\n"
                "share.coordinator.state.topic.replication.factor=1\nshare.coordinator.state.topic.min.isr=1\n"
                "group.initial.rebalance.delay.ms=0\nauto.create.topics.enable=true\n")
            cluster_id = kraft_cluster_id()
            subprocess.run([*self._java(), "kafka.tools.StorageTool", "format", "--cluster-id", cluster_id,
                            "--config", str(properties), "--ignore-formatted"], check=True, capture_output=True)
        log = self.root / "kafka.out"
        since = log.stat().st_size if log.exists() else 0
        with log.open("ab") as out:
            self.process = subprocess.Popen([*self._java(), "kafka.Kafka", str(properties)], stdout=out,
                                            stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while not self._ready(log, since):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"Kafka did not start; see {log}")
            time.sleep(0.3)

    def stop(self, timeout: float = 60) -> None:
        """SIGTERM (a controlled shutdown; SIGKILL after ``timeout``): the data is kept."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)


def _apiserver_pid(audit_log: Path) -> int:
    """The kube-apiserver writing ``audit_log`` (each control plane of the tests has its own)."""
    flag = f"--audit-log-path={audit_log}".encode()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            args = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if args and args[0].endswith(b"kube-apiserver") and flag in args:
            return int(proc.name)
    raise RuntimeError(f"no kube-apiserver writes {audit_log}")


def restart_apiserver(audit_log: Path, down_for: float = 5.0, timeout: float = 120.0) -> None:
    """Stop the kube-apiserver that writes ``audit_log`` (SIGTERM, its graceful shutdown), leave it down
    ``down_for`` seconds and start it again with the same arguments and log, detached as deploy/local starts it;
    its pid file (``deploy/local``'s ``pids/kube-apiserver.pid``) is updated. Returns once /readyz answers."""
    pid = _apiserver_pid(audit_log)
    args = [a.decode() for a in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") if a]
    log = Path(os.readlink(f"/proc/{pid}/fd/1"))
    port = next(a.split("=", 1)[1] for a in args if a.startswith("--secure-port="))
    pid_files = [p for parent in audit_log.parents[:3] for p in parent.glob("pids/kube-apiserver.pid")
                 if p.read_text().strip() == str(pid)]
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 60
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    if Path(f"/proc/{pid}").exists():
        os.kill(pid, signal.SIGKILL)
    time.sleep(down_for)
    with log.open("ab") as out:
        process = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   start_new_session=True)
    for pid_file in pid_files:
        pid_file.write_text(f"{process.pid}\n")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done = subprocess.run(["curl", "-ksf", "-o", "/dev/null", f"https://127.0.0.1:{port}/readyz"], check=False)
        if done.returncode == 0:
            return
        if process.poll() is not None:
            raise RuntimeError(f"kube-apiserver exited with {process.returncode} after its restart; see {log}")
        time.sleep(0.5)
    raise RuntimeError(f"kube-apiserver not ready {timeout:.0f}s after its restart; see {log}")
