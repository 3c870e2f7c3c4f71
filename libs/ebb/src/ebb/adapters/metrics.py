"""What every ebb process tells Prometheus beside its own service's metrics, and the metric kinds
``prometheus_client`` lacks.

- ``ebb_build_info{version,python,implementation}``: 1, with the running build in its labels (the ``_info``
  convention), so a dashboard shows which version runs and an upgrade is seen as a change of series. Every service
  registers it on its registry (``register_build_info``); in the embedded mode the services share one registry,
  which then has it once.
- ``ebb_consumer_lag{group,topic}`` (``ConsumerLag``): the records of a topic a consumer group of this process has
  not handled yet, as the bus last saw them (``consumer_lags()`` of ``KafkaBus`` and ``InMemoryBus``). Kafka's
  exporters give the same per group from the broker; this one needs no exporter and covers the in-memory bus.
- ``WindowedSummary``: a Summary with quantiles over a sliding window, as Go's client computes them (Karpenter's
  ``karpenter_nodes_termination_duration_seconds`` and its dashboards read ``{quantile="0.5"}`` and the like):
  Python's client has Summaries without quantiles only. The window is ``max_age`` seconds of the given clock
  (client_golang's default: 10 minutes); a quantile with no observation in the window is NaN, as in Go.
  ``scrape_monotonic`` times it with a service's clock from the thread that serves ``/metrics`` too.
"""

from __future__ import annotations

import math
import platform
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Protocol

from prometheus_client import CollectorRegistry, Info
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

#: Karpenter's summary objectives (sigs.k8s.io/karpenter pkg/metrics SummaryObjectives)
KARPENTER_QUANTILES = (0.0, 0.5, 0.9, 0.99, 1.0)

#: client_golang's DefMaxAge: how long an observation counts towards a summary's quantiles
DEFAULT_MAX_AGE = 600.0


def build_labels() -> dict[str, str]:
    """The running build: ebb's version and the Python running it."""
    from ebb import __version__

    return {"version": __version__, "python": platform.python_version(),
            "implementation": platform.python_implementation()}


def register_build_info(registry: CollectorRegistry) -> None:
    """``ebb_build_info`` on ``registry``, once (the embedded mode's services share one registry)."""
    info = Info("ebb_build", "The running build of ebb: its version and the Python that runs it (always 1).",
                registry=None)
    info.info(build_labels())
    _register_once(registry, info)


class LagSource(Protocol):
    """A bus that reports its consumer groups' lag: ``(group, topic) -> records not handled yet``."""

    def consumer_lags(self) -> Mapping[tuple[str, str], int]: ...


class ConsumerLag(Collector):
    """``ebb_consumer_lag{group,topic}`` read from ``bus`` at each scrape (nothing when the bus does not report
    lag)."""

    def __init__(self, bus: object) -> None:
        self.bus = bus

    def _family(self) -> GaugeMetricFamily:
        return GaugeMetricFamily("ebb_consumer_lag", "Records of a topic that a consumer group of this process has "
                                 "not handled yet, as of its last fetch. Labeled by group and topic.",
                                 labels=["group", "topic"])

    def describe(self) -> Iterable[Metric]:
        return [self._family()]

    def collect(self) -> Iterable[Metric]:
        family = self._family()
        lags = getattr(self.bus, "consumer_lags", None)
        if callable(lags):
            for (group, topic), lag in sorted(lags().items()):
                family.add_metric([group, topic], float(lag))
        return [family]


def register_consumer_lag(registry: CollectorRegistry, bus: object) -> None:
    """``ebb_consumer_lag`` of ``bus`` on ``registry``, once per registry (the embedded mode's services share the
    registry and the bus)."""
    _register_once(registry, ConsumerLag(bus))


def _register_once(registry: CollectorRegistry, collector: Collector) -> None:
    """Register ``collector`` unless a collector of its names is registered already."""
    try:
        registry.register(collector)
    except ValueError as e:  # prometheus_client's "Duplicated timeseries": there is one
        if "Duplicated" not in str(e):
            raise


class MonotonicClock(Protocol):
    def monotonic(self) -> float: ...


def scrape_monotonic(clock: MonotonicClock) -> Callable[[], float]:
    """``clock.monotonic`` (the event loop's time), and off the loop (the health server's thread scraping) the
    system's monotonic time, which is what the system clock's loop time is; a simulated clock is scraped on its loop
    (the embedded mode's API)."""

    def monotonic() -> float:
        try:
            return clock.monotonic()
        except RuntimeError:  # no running event loop in this thread
            return time.monotonic()

    return monotonic


def quantile(ordered: Sequence[float], q: float) -> float:
    """The ``q`` quantile of the sorted ``ordered`` by nearest rank (0: the smallest, 1: the largest); NaN for
    none."""
    if not ordered:
        return math.nan
    rank = math.ceil(q * len(ordered)) - 1
    return ordered[min(max(rank, 0), len(ordered) - 1)]


class WindowedSummary(Collector):
    """A Summary with quantiles: ``name{labels,quantile}`` over the observations of the last ``max_age`` seconds of
    ``clock`` (a monotonic clock in seconds), ``name_sum`` and ``name_count`` over all. Thread-safe: observed on the
    event loop, collected by the scraping thread."""

    def __init__(self, name: str, documentation: str, labelnames: Sequence[str], *, clock: Callable[[], float],
                 quantiles: Sequence[float] = KARPENTER_QUANTILES, max_age: float = DEFAULT_MAX_AGE,
                 registry: CollectorRegistry | None = None) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = tuple(labelnames)
        self.clock = clock
        self.quantiles = tuple(quantiles)
        self.max_age = max_age
        self._lock = threading.Lock()
        #: label values -> (observations in the window as (at, value), count, sum)
        self._series: dict[tuple[str, ...], tuple[deque[tuple[float, float]], list[float]]] = {}
        if registry is not None:
            registry.register(self)

    def observe(self, labels: Mapping[str, str], value: float) -> None:
        key = tuple(str(labels[name]) for name in self.labelnames)
        now = self.clock()
        with self._lock:
            window, totals = self._series.setdefault(key, (deque(), [0.0, 0.0]))
            window.append((now, value))
            totals[0] += 1
            totals[1] += value
            self._expire(window, now)

    def _expire(self, window: deque[tuple[float, float]], now: float) -> None:
        while window and window[0][0] <= now - self.max_age:
            window.popleft()

    def _empty(self) -> Metric:
        return Metric(self.name, self.documentation, "summary")

    def describe(self) -> Iterable[Metric]:
        return [self._empty()]

    def collect(self) -> Iterable[Metric]:
        metric = self._empty()
        now = self.clock()
        with self._lock:
            series = [(key, sorted(v for _, v in self._expired(window, now)), count, total)
                      for key, (window, (count, total)) in sorted(self._series.items())]
        for key, ordered, count, total in series:
            labels = dict(zip(self.labelnames, key, strict=True))
            for q in self.quantiles:
                metric.add_sample(self.name, {**labels, "quantile": _float_label(q)}, quantile(ordered, q))
            metric.add_sample(f"{self.name}_count", labels, count)
            metric.add_sample(f"{self.name}_sum", labels, total)
        return [metric]

    def _expired(self, window: deque[tuple[float, float]], now: float) -> deque[tuple[float, float]]:
        self._expire(window, now)
        return window


def _float_label(value: float) -> str:
    """A quantile as Go's client writes it in the label (``0``, ``0.5``, ``1``)."""
    return f"{value:g}"
