"""``ebb run --api-port`` in a subprocess (the embedded mode on the bundled example, in simulated time), its
``/metrics`` scraped: what the tests of the exported metrics, the dashboards and the alerts read, rather than a list
of names written by hand; and a real Prometheus (Debian's ``prometheus``) scraping it every second, for the queries
of the dashboards and rules (``prometheus_scraping``)."""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

EBB = str(Path(sys.executable).parent / "ebb")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class EmbeddedRun:
    """A running ``ebb run`` whose decisions-api serves ``/metrics`` at ``url``."""

    url: str
    process: subprocess.Popen[bytes]

    def scrape(self) -> str:
        with urllib.request.urlopen(f"{self.url}/metrics", timeout=10) as response:
            return str(response.read().decode())

    def scrape_until(self, ready: Callable[[dict[str, Metric]], bool], within: float = 120.0) -> dict[str, Metric]:
        """The families of the first scrape for which ``ready`` holds (polled every half second)."""
        deadline = time.monotonic() + within
        while True:
            assert self.process.poll() is None, "ebb run ended"
            with contextlib.suppress(OSError):
                families = families_of(self.scrape())
                if ready(families):
                    return families
            assert time.monotonic() < deadline, "the embedded run's /metrics never showed what the test waits for"
            time.sleep(0.5)


def families_of(text: str) -> dict[str, Metric]:
    """The metric families of a Prometheus text exposition, by family name."""
    return {family.name: family for family in text_string_to_metric_families(text)}


def has_samples(families: dict[str, Metric], name: str, *, real: bool = False) -> bool:
    """Whether the family ``name`` has a sample (``real``: one that is a number, not NaN)."""
    family = families.get(name)
    return family is not None and any(not (real and math.isnan(s.value)) for s in family.samples)


@contextlib.contextmanager
def embedded_run(*, speed: float = 120.0, duration: str = "2h", token: str = "metrics-test-token",
                 database: Path | None = None) -> Iterator[EmbeddedRun]:
    """``ebb run`` on the bundled example with the decisions-api on a free port (``token`` its bearer token;
    ``database``: the run's SQLite file), stopped on exit."""
    port = free_port()
    kept = ["--database", str(database)] if database is not None else []
    process = subprocess.Popen([EBB, "run", "--speed", str(speed), "--duration", duration, "--api-port", str(port),
                                "--api-token", token, *kept], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    try:
        yield EmbeddedRun(f"http://127.0.0.1:{port}", process)
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def prometheus_binary() -> str:
    """Debian's ``prometheus``; the test is skipped without it, except under ``CI=true`` (``.ci/run`` installs it),
    where it fails."""
    found = shutil.which("prometheus")
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail("prometheus is not installed (.ci/run installs Debian's prometheus)")
        pytest.skip("prometheus is not installed (apt-get install prometheus)")
    return found


def query(base: str, expression: str) -> list[Any]:
    """The series a Prometheus at ``base`` answers ``expression`` with now (an error fails the test)."""
    url = f"{base}/api/v1/query?{urllib.parse.urlencode({'query': expression})}"
    with urllib.request.urlopen(url, timeout=10) as response:
        answer = json.loads(response.read())
    assert answer["status"] == "success", answer
    result: list[Any] = answer["data"]["result"]
    return result


@contextlib.contextmanager
def prometheus_scraping(run: EmbeddedRun, directory: Path, *, scrapes: int = 15) -> Iterator[str]:
    """A Prometheus scraping ``run`` every second, its base URL given once it has ``scrapes`` samples of it."""
    port = free_port()
    (directory / "prometheus.yml").write_text(yaml.safe_dump({
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "scrape_configs": [{"job_name": "ebb", "static_configs": [{"targets": [run.url.removeprefix("http://")]}]}]}))
    process = subprocess.Popen([prometheus_binary(), f"--config.file={directory / 'prometheus.yml'}",
                                f"--storage.tsdb.path={directory / 'data'}", f"--web.listen-address=127.0.0.1:{port}"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30 + scrapes * 2
        while True:
            with contextlib.suppress(OSError):
                up = query(base, 'count_over_time(up{job="ebb"}[5m])')
                if up and float(up[0]["value"][1]) >= scrapes:
                    break
            assert process.poll() is None, "prometheus ended"
            assert time.monotonic() < deadline, "prometheus did not scrape the run"
            time.sleep(1)
        yield base
    finally:
        process.terminate()
        process.wait(timeout=30)
