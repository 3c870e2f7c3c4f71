"""Servers a test can stop and start again with the same data, for the server-restart tests (and the chaos run):
the session's shared servers (``deploy/local/``) always start fresh, and stopping them would disturb the other
tests. ``PrivatePostgres``: Debian's PostgreSQL binaries on a free port and a data dir of its own, run as the
``postgres`` user when the tests run as root, as ``deploy/local/postgres.sh`` does."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

USER = "ebb"
DATABASE = "ebb"


def _bindir() -> Path:
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parts[-3]), reverse=True)
    if found:
        return found[0].parent
    initdb = shutil.which("initdb")
    if initdb is None:
        raise RuntimeError("PostgreSQL's initdb is not installed (deploy/local/postgres.sh install)")
    return Path(initdb).parent


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class PrivatePostgres:
    """A PostgreSQL of the test's own: ``start()`` (the first creates the cluster, role ``ebb`` and database
    ``ebb``), ``stop()`` (a fast shutdown), ``start()`` again on the same port and data."""

    def __init__(self, root: Path) -> None:
        self.bindir = _bindir()
        self.root = root
        self.data = root / "data"
        self.port = _free_port()
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
