"""Micro-benchmark of the cluster-watcher's per-event path, without servers: watch event lines in, Kafka records
(key, value, headers) handed to the producer out. CPU microseconds per event (``time.process_time``), so it
measures the code and not the machine's other jobs (the wall rate of a 2-core machine shared with test runs says
little).

The path is the production one: the synthetic cluster of ``bench.load`` (2,000 nodes, 20,000 pods; smaller with
``--nodes``/``--pods``) as ADDED watch events, ``CHUNK`` lines per stream read, read by ``KubeWatcher._watch`` from
``bench.load``'s synthetic API (line splitting, JSON decoding, ``KindState.batch``: trim and digest), the
watcher's ``Publisher`` and ``KafkaBus.publish_many`` (the CloudEvent encoding) on a producer that acknowledges
every send at once instead of a broker.

``python -m bench.watcher_path [--nodes N] [--pods N] [--repeat R] [--profile FILE]``: prints a JSON line (CPU
µs/event of the best of ``R`` runs, events, records, MiB of record values); ``--profile`` writes the cProfile
statistics of one more run to FILE and prints the largest cumulative and own times.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import logging
import pstats
import sys
import time
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from bench.load import CHUNK, SyntheticApi, synthetic_cluster

KINDS = ("NodePool", "Node", "Pod")


class _Acknowledged:
    """What ``KafkaBus.publish_many`` uses of an aiokafka producer: ``send`` returning a future, resolved at once."""

    def __init__(self) -> None:
        self.records = 0
        self.value_bytes = 0

    async def send(self, topic: str, *, value: bytes | None, key: bytes | None,
                   headers: Sequence[tuple[str, bytes]]) -> asyncio.Future[None]:
        self.records += 1
        self.value_bytes += len(value or b"")
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        future.set_result(None)
        return future


def _bus(producer: _Acknowledged) -> Any:
    from ebb.adapters.bus import KafkaBus

    class NoBroker(KafkaBus):
        async def ensure_topics(self, topics: Iterable[str]) -> None:
            return None

        async def _connected(self) -> Any:
            return producer

    return NoBroker("unused:9092", source="/ebb/cluster-watcher", client_id="ebb-cluster-watcher",
                    clock=lambda: datetime.now(UTC))


def _streams(nodes: int, pods: int) -> tuple[dict[str, list[bytes]], int]:
    """The watch stream chunks per kind (``CHUNK`` events each) and the number of events."""
    cluster = synthetic_cluster(nodes, pods, now=datetime.now(UTC))
    api = SyntheticApi()
    objects = {"NodePool": cluster.nodepools, "Node": cluster.nodes, "Pod": cluster.pods}
    chunks: dict[str, list[bytes]] = {}
    events = 0
    for kind in KINDS:
        lines = [api.encode("ADDED", obj) for obj in objects[kind]]
        events += len(lines)
        chunks[kind] = [b"".join(lines[i:i + CHUNK]) for i in range(0, len(lines), CHUNK)]
    return chunks, events


async def _one_run(chunks: dict[str, list[bytes]]) -> tuple[float, _Acknowledged]:
    """CPU seconds of one pass of every chunk through a fresh watcher (nothing published before)."""
    from ebb_cluster_watcher.app import build_watcher
    from ebb_cluster_watcher.settings import Settings

    producer = _Acknowledged()
    api = SyntheticApi()
    watcher, _ = build_watcher(Settings(kinds=KINDS), None, _bus(producer))
    watcher.lister = api.lister
    stop = asyncio.Event()
    for kind in KINDS:
        for chunk in chunks[kind]:
            api.send(kind, chunk)
        api.send(kind, b"")  # the end of the stream: _watch returns
    specs = {spec.kind: spec for spec in watcher.kinds}
    began = time.process_time()
    for kind in KINDS:
        state = watcher.states[kind]
        state.resource_version = "1"
        await watcher._watch(specs[kind], state, stop)
    return time.process_time() - began, producer


def measure(nodes: int, pods: int, repeat: int, profile: str = "") -> dict[str, Any]:
    import structlog

    # the service logs at info (``ebb.adapters.service.serve``): the publisher's debug line is not written
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.INFO))
    chunks, events = _streams(nodes, pods)
    runs: list[float] = []
    producer = _Acknowledged()
    for _ in range(repeat):
        seconds, producer = asyncio.run(_one_run(chunks))
        runs.append(seconds)
    result: dict[str, Any] = {
        "events": events, "records": producer.records, "value_mib": round(producer.value_bytes / 2**20, 1),
        "cpu_us_per_event": round(min(runs) / events * 1e6, 1),
        "runs_cpu_us_per_event": [round(s / events * 1e6, 1) for s in runs],
        "events_per_cpu_second": round(events / min(runs)),
    }
    if profile:
        profiler = cProfile.Profile()
        profiler.enable()
        asyncio.run(_one_run(chunks))
        profiler.disable()
        profiler.dump_stats(profile)
        stats = pstats.Stats(profile, stream=sys.stderr)
        stats.sort_stats("cumulative").print_stats(35)
        stats.sort_stats("tottime").print_stats(25)
    return result


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.watcher_path", description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=2_000)
    parser.add_argument("--pods", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--profile", default="", help="write one more run's cProfile statistics to this file")
    args = parser.parse_args(argv)
    print(json.dumps(measure(args.nodes, args.pods, args.repeat, args.profile)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
