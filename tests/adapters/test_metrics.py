"""``ebb.adapters.metrics``: the build's info metric once per registry, the consumer lag read from the in-memory
bus at the scrape, and the Summary with quantiles over a sliding window (Karpenter's termination durations)."""

from __future__ import annotations

import asyncio
import math

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

import ebb
from ebb.adapters.bus import InMemoryBus
from ebb.adapters.bus.base import Delivery
from ebb.adapters.metrics import (
    KARPENTER_QUANTILES,
    WindowedSummary,
    quantile,
    register_build_info,
    register_consumer_lag,
)
from ebb.contracts import TOPIC_DISRUPTION_EVENTS, DisruptionEvent
from tests.kit.builders import NOW


def test_the_build_info_is_registered_once_per_registry() -> None:
    registry = CollectorRegistry()
    register_build_info(registry)
    register_build_info(registry)  # a second service of the embedded mode on the same registry
    [family] = [f for f in text_string_to_metric_families(generate_latest(registry).decode())
                if f.name == "ebb_build_info"]
    [sample] = family.samples
    assert sample.value == 1 and sample.labels["version"] == ebb.__version__
    assert sample.labels["python"].count(".") == 2 and sample.labels["implementation"]


def test_quantiles_by_nearest_rank() -> None:
    ordered = [1.0, 2.0, 3.0, 4.0, 100.0]
    assert [quantile(ordered, q) for q in KARPENTER_QUANTILES] == [1.0, 3.0, 100.0, 100.0, 100.0]
    assert quantile([float(n) for n in range(1, 101)], 0.9) == 90.0
    assert math.isnan(quantile([], 0.5))


def test_the_summary_forgets_what_left_its_window_but_counts_everything() -> None:
    now = [0.0]
    registry = CollectorRegistry()
    summary = WindowedSummary("x_duration_seconds", "a duration", ["nodepool"], clock=lambda: now[0],
                              max_age=600.0, registry=registry)
    for value in (10.0, 20.0, 30.0):
        summary.observe({"nodepool": "a"}, value)
    summary.observe({"nodepool": "b"}, 5.0)

    def samples() -> dict[tuple[str, str, str], float]:
        [family] = text_string_to_metric_families(generate_latest(registry).decode())
        assert family.type == "summary"
        return {(s.name, s.labels["nodepool"], s.labels.get("quantile", "")): s.value for s in family.samples}

    first = samples()
    assert first[("x_duration_seconds", "a", "0.5")] == 20.0
    assert first[("x_duration_seconds", "a", "1")] == 30.0 and first[("x_duration_seconds", "a", "0")] == 10.0
    assert first[("x_duration_seconds_count", "a", "")] == 3 and first[("x_duration_seconds_sum", "a", "")] == 60
    now[0] = 300.0
    summary.observe({"nodepool": "a"}, 1000.0)
    now[0] = 650.0  # the first three are older than 600 s, the last is not
    later = samples()
    assert later[("x_duration_seconds", "a", "0")] == 1000.0 == later[("x_duration_seconds", "a", "0.5")]
    assert later[("x_duration_seconds_count", "a", "")] == 4 and later[("x_duration_seconds_sum", "a", "")] == 1060
    assert math.isnan(later[("x_duration_seconds", "b", "0.5")])  # nothing in its window: NaN, as Go's client
    assert later[("x_duration_seconds_count", "b", "")] == 1


async def test_the_consumer_lag_is_what_a_group_has_not_handled() -> None:
    bus = InMemoryBus()
    registry = CollectorRegistry()
    register_consumer_lag(registry, bus)
    register_consumer_lag(registry, bus)  # once per registry
    for n in range(3):
        await bus.publish(TOPIC_DISRUPTION_EVENTS, DisruptionEvent.step("d1", f"n{n}", "Proposed", "", NOW))
    handled = asyncio.Event()
    release = asyncio.Event()

    async def slow(delivery: Delivery) -> None:
        handled.set()
        await release.wait()

    stop = asyncio.Event()
    consuming = asyncio.create_task(bus.consume([TOPIC_DISRUPTION_EVENTS], "slow-group", slow, stop=stop))
    await handled.wait()

    def lag() -> float | None:
        return registry.get_sample_value("ebb_consumer_lag", {"group": "slow-group", "topic": TOPIC_DISRUPTION_EVENTS})

    assert lag() == 3  # the first is being handled, nothing is committed yet
    release.set()
    for _ in range(100):
        if lag() == 0:
            break
        await asyncio.sleep(0.01)
    assert lag() == 0
    stop.set()
    await consuming
    assert lag() is None  # the group stopped consuming: no series
