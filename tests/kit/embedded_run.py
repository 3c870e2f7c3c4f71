"""``ebb run --api-port`` in a subprocess (the embedded mode on the bundled example, in simulated time), its
``/metrics`` scraped: what the tests of the exported metrics, the dashboards and the alerts read, rather than a list
of names written by hand."""

from __future__ import annotations

import contextlib
import math
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

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
def embedded_run(*, speed: float = 120.0, duration: str = "2h") -> Iterator[EmbeddedRun]:
    """``ebb run`` on the bundled example with the decisions-api on a free port, stopped on exit."""
    port = free_port()
    process = subprocess.Popen([EBB, "run", "--speed", str(speed), "--duration", duration, "--api-port", str(port),
                                "--api-token", "metrics-test-token"], stdout=subprocess.DEVNULL,
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
