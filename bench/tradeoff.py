"""The trade-off picture (``python -m bench tradeoff``): node-hour cost against churn and against evictions, for many
settings of each side, in the calibrated back-test.

A user does not compare ebb with Karpenter at one setting each: each side has knobs that trade cost for churn, and
what matters is the best each side can do on the axes the user cares about. This module sweeps both sides' knobs on
the peer harness's traces and draws each side's Pareto frontier:

- **Karpenter** (``KARPENTER_GRID``): ``consolidationPolicy`` (``WhenEmptyOrUnderutilized``, ``Balanced``) x
  ``consolidateAfter`` x the budget, each a policy built from the back-test's built-in ``karpenter-default`` or
  ``karpenter-balanced`` (``karpenter_policy``: their DisruptionPolicy with the NodePool's other disruption settings,
  their engine options, so each runs at Karpenter's pace, ``karpenterPace``): ebb's simulation of Karpenter, which
  ``python -m bench calibrate`` checks against the real one.
- **ebb** (``EBB_GRID``): ``stabilizationWindow`` x ``minimumPriceImprovementPercent`` x ``demandWindow`` x
  ``minimumSavingPerEvictedPod`` (the eviction price of ``ebb.core.worth``) at ebb's other defaults, and the policy
  docs/policies.md recommends (``ebb_policy``): ebb's own engine, as its planner runs it.

Every point is one back-test of one setting on one trace and seed, set up as the calibration sets up the back-test of
a real run (``setup``, from ``bench.calibrate``'s pieces): the peer harness's trace (``bursty`` or ``diurnal``, the
``short`` size the calibration runs) converted to an ``ebb.sh/v1 Trace``, the starting cluster
``peer.starting_cluster`` plans for the peak as Ready Nodes of the NodePool, the cloud of the real runs (nodes Ready
30-90 s after launch plus KWOK's own, spot and on-demand, spot-to-spot on), the services created once the starting
cluster would be Ready, the policy's disruption held until the scale up is over (``held_until``), as the real run's
NodePool budget "0". Where the calibration takes these moments from a real run, the sweep takes them from the cloud:
the starting cluster Ready at the cloud's slowest start-up, the scale up over when the ReplicaSet controller has
created every pod (``calibrate.CREATION_RATE``) and they have run ``peer.UP_SETTLED`` seconds.

The figures of a point (``figures``) are the side by side's headline figures (``peer.headline``): node-hour cost of
the disruption phase (from the end of the scale up to the end: every setting's run is the same until then, its
cost the back-test of the scale up alone, ``prefix``), launches + disruptions over the whole trace (nodes launched,
the starting cluster's not counted, + nodes deleted), evictions, pods evicted more than once and pending pod-seconds
over the whole trace.

The goal (``goal_check``, issue 49's item 5, the side by side's ``peer.GOAL``): for every Karpenter setting on its
frontier, an ebb setting with a cost at most 2% higher, at most half the churn, no more evictions and no more pending
pod-seconds, on every seed of the trace.

Each point runs in a worker process (``JOBS`` at once) and its result is cached as JSON under the output directory,
keyed by everything the run depends on (``point_key``: the documents, the trace, the policy, the options and a hash
of ebb's code), so a second run of the sweep only draws and writes. ``--smoke`` runs a couple of settings a side on
one seed of a short trace (``SMOKE``) in well under a minute: a check that the machinery works; tests/benchmarks/
test_tradeoff_smoke.py runs it. The pure parts (the grid, the frontiers, the goal, the section) are unit-tested in
tests/benchmarks/test_tradeoff.py.

Environment: ``EBB_BENCH_TRADEOFF_SEEDS`` (``1,2,3``), ``EBB_BENCH_TRADEOFF_TRACES`` (``bursty,diurnal``),
``EBB_BENCH_TRADEOFF_SIZE`` (``short``), ``EBB_BENCH_TRADEOFF_JOBS`` (worker processes, 2),
``EBB_BENCH_TRADEOFF_OUT`` (the cache and the JSON, .artifacts/tradeoff), ``EBB_BENCH_TRADEOFF_FRESH=1`` (ignore the
cache), ``EBB_BENCH_TRADEOFF_TYPES`` (a JSON file of instance types as Karpenter's KWOK provider's
instance_types.json, instead of that file in the Go module cache: what the smoke's test gives where Go is absent).
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import itertools
import json
import math
import multiprocessing
import os
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from bench import calibrate, peer
from bench.generators import REPO_ROOT

if TYPE_CHECKING:
    from ebb_embedded.backtest import BacktestOptions, Policy

Doc = dict[str, Any]
SideName = Literal["karpenter", "ebb"]

SEEDS = (1, 2, 3)
SIZE = "short"
#: worker processes at once
JOBS = 2
#: the picture's file name (next to the page it is written for: docs/img/)
IMAGE = "tradeoff.png"
#: the axes of a point, in the goal's order, and what each is
AXES: tuple[tuple[str, str], ...] = (
    ("cost", "node-hour cost of the disruption phase ($)"),
    ("churn", "launches + disruptions over the whole trace"),
    ("evictions", "pod evictions"),
    ("pending", "pending pod-seconds"),
)
#: the goal against a Karpenter setting (``peer.GOAL``'s): ebb's figure at most this times Karpenter's, per axis
GOAL_LIMITS: Mapping[str, float] = {"cost": 1.02, "churn": 0.5, "evictions": 1.0, "pending": 1.0}


# -- the settings (pure) ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Setting:
    """One setting of one side: the DisruptionPolicy fields it sets (``spec``), a short name for tables and a title
    that says what it is."""

    side: SideName
    name: str
    spec: Mapping[str, Any]

    @property
    def title(self) -> str:
        return ", ".join(f"{k} {v}" for k, v in self.spec.items())


def _policy_name(consolidation_policy: str) -> str:
    return "Balanced" if consolidation_policy == "Balanced" else "WhenEmptyOrUnderutilized"


def karpenter_setting(consolidation_policy: str, consolidate_after: str, budget: str) -> Setting:
    short = "Bal" if consolidation_policy == "Balanced" else "WEoU"
    return Setting("karpenter", f"{short} {consolidate_after} {budget}",
                   {"consolidationPolicy": _policy_name(consolidation_policy), "consolidateAfter": consolidate_after,
                    "budget": budget})


#: Karpenter's knobs: consolidationPolicy x consolidateAfter x budget
KARPENTER_GRID: tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]] = (
    ("WhenEmptyOrUnderutilized", "Balanced"), ("0s", "30s", "1m", "2m", "5m"), ("10%", "100%"))
#: ebb's knobs: stabilizationWindow x minimumPriceImprovementPercent x demandWindow x minimumSavingPerEvictedPod
#: ("" is the setting left out: no window). The eviction price's values are ebb's default and ten times it (a replace
#: that moves 10 pods must then save $0.50/h): smaller ones changed no decision on these traces
EBB_GRID: tuple[tuple[str, ...], tuple[int, ...], tuple[str, ...], tuple[float, ...]] = (
    ("", "1m", "2m", "3m"), (0, 30), ("", "2m", "5m"), (0.005, 0.05))
#: ebb's defaults with a consolidateAfter (the knob Karpenter's middle of the frontier is made of)
EBB_CONSOLIDATE_AFTER = ("1m", "2m")
#: the policy docs/policies.md and docs/karpenter.md recommend (the peer's ``ebb-recommended`` side)
RECOMMENDED = peer.SIDES["ebb-recommended"]


def ebb_setting(stabilization_window: str, minimum_price_improvement: int, demand_window: str,
                minimum_saving_per_evicted_pod: float, *, consolidate_after: str = "0s", budget: str = "10%",
                name: str | None = None) -> Setting:
    spec: Doc = {"consolidateAfter": consolidate_after, "budget": budget}
    if stabilization_window:
        spec["stabilizationWindow"] = stabilization_window
    spec["minimumPriceImprovementPercent"] = minimum_price_improvement
    if demand_window:
        spec["demandWindow"] = demand_window
    spec["minimumSavingPerEvictedPod"] = minimum_saving_per_evicted_pod
    short = name or (f"sw {stabilization_window or '-'} mpi {minimum_price_improvement} "
                     f"dw {demand_window or '-'} $/ev {minimum_saving_per_evicted_pod:g}")
    return Setting("ebb", short, spec)


def karpenter_settings() -> list[Setting]:
    return [karpenter_setting(*values) for values in itertools.product(*KARPENTER_GRID)]


def ebb_settings() -> list[Setting]:
    """``EBB_GRID`` at ebb's other defaults (consolidateAfter 0s, budget 10%, WhenEmptyOrUnderutilized), ebb's
    defaults with Karpenter's own knob (``EBB_CONSOLIDATE_AFTER``), then the recommended policy."""
    grid = [ebb_setting(*values) for values in itertools.product(*EBB_GRID)]
    grid += [ebb_setting("", 0, "", 0.005, consolidate_after=after, name=f"consolidateAfter {after}")
             for after in EBB_CONSOLIDATE_AFTER]
    side = RECOMMENDED
    recommended = ebb_setting(side.stabilization_window or "", side.minimum_price_improvement_percent or 0,
                              side.demand_window or "", 0.005, consolidate_after=side.consolidate_after,
                              budget=side.budget, name="recommended")
    return [*grid, recommended]


#: the settings the picture names: Karpenter's defaults, ebb's defaults (its DisruptionPolicy's: no window, no
#: price threshold, $0.005/h an eviction) and the recommended policy
NAMED = {"WEoU 0s 10%": "Karpenter's defaults", "Bal 0s 10%": "Karpenter, Balanced",
         "sw - mpi 0 dw - $/ev 0.005": "ebb's defaults", "recommended": "ebb, recommended policy"}


def karpenter_policy(setting: Setting) -> Policy:
    """A Karpenter setting as a back-test policy: the built-in ``karpenter-default`` (``karpenter-balanced`` for
    Balanced) with the setting's consolidateAfter and budget in its DisruptionPolicy, everything else as the
    built-in (Karpenter's rule of any saving for any eviction, its pace)."""
    from ebb_embedded.backtest import karpenter_balanced, karpenter_default

    base = karpenter_balanced() if setting.spec["consolidationPolicy"] == "Balanced" else karpenter_default()
    documents = tuple({**doc, "spec": {**doc["spec"], "consolidateAfter": setting.spec["consolidateAfter"],
                                       "budgets": [{"nodes": setting.spec["budget"]}]}}
                      if doc.get("kind") == "DisruptionPolicy" else doc for doc in base.documents)
    return replace(base, name=f"karpenter {setting.name}", source="bench tradeoff", documents=documents)


def ebb_policy(setting: Setting) -> Policy:
    """An ebb setting as a back-test policy: a DisruptionPolicy for every NodePool with the setting's fields (those
    it leaves out take the DisruptionPolicy's defaults), no engine options (ebb's own pace)."""
    from ebb_embedded.backtest import EVERY_NODEPOOL, Policy

    spec = {k: v for k, v in setting.spec.items() if k != "budget"}
    spec.update({"consolidationPolicy": "WhenEmptyOrUnderutilized", "budgets": [{"nodes": setting.spec["budget"]}]})
    doc = {"apiVersion": "ebb.sh/v1", "kind": "DisruptionPolicy", "metadata": {"name": EVERY_NODEPOOL},
           "spec": spec}
    return Policy(f"ebb {setting.name}", "bench tradeoff", (doc,))


def policy_of(setting: Setting) -> Policy:
    return karpenter_policy(setting) if setting.side == "karpenter" else ebb_policy(setting)


# -- the back-test of a trace (pure but for the instance types) -----------------------------------------------------


@dataclass(frozen=True)
class Setup:
    """What every setting's back-test of one trace and seed shares: the starting documents, the converted trace, when
    the scale up ends (the policies' disruption held until then) and the options."""

    kind: str
    seed: int
    documents: tuple[Doc, ...]
    trace: Doc
    up_end: float
    options: BacktestOptions


def setup(kind: str, seed: int, size: peer.TraceSize, types: Sequence[Mapping[str, Any]],
          cloud: peer.Cloud = peer.CLOUD) -> Setup:
    """The back-test of the peer's ``kind`` trace of ``seed`` as the calibration sets up that of a real run
    (``calibrate.simulation_of``), with the moments a real run records taken from the cloud instead: the starting
    cluster (``peer.starting_cluster`` on the NodePool of the cloud's capacity types) Ready at the cloud's slowest
    start-up (``calibrate.boot_seconds``), when the services are created; the scale up over once the ReplicaSet
    controller has created their pods and they ran ``peer.UP_SETTLED`` s (the real run's rule, ``peer.scaled_up``),
    never before the trace's own scale up ends; the run as long as the shifted trace."""
    trace = peer.make_trace(seed, size, kind)
    side = peer.SIDES["karpenter-default"]
    pool = peer.nodepool(side.consolidate_after, "0", side.consolidation_policy, cloud.capacity_types)
    nodes = peer.starting_cluster(trace, types, pool)
    low, high = calibrate.boot_seconds({"cloud": {"node_ready": list(cloud.node_ready)}})
    services_at = high if high is not None else low
    pods, _, _ = trace.peak_requests()
    up_end = max(trace.phases[0].end, services_at + math.ceil(pods / calibrate.CREATION_RATE) + peer.UP_SETTLED)
    shifted = trace.shifted(up_end)
    documents = calibrate.starting_documents(side, types, nodes, cloud.capacity_types)
    converted = calibrate.ebb_trace(shifted, services_at=services_at)
    from ebb_embedded.backtest import BacktestOptions

    options = BacktestOptions(start=calibrate.START, duration=timedelta(seconds=shifted.bursty.end), seed=seed,
                              boot_seconds=low, boot_seconds_max=high, spot_to_spot=cloud.spot_to_spot)
    return Setup(kind, seed, tuple(documents), converted, up_end, options)


def prefix(setup_: Setup) -> BacktestOptions:
    """The options of the back-test of the scale up alone (until the disruption starts): its cost is every
    setting's until then, which the disruption phase's cost leaves out."""
    return replace(setup_.options, duration=timedelta(seconds=setup_.up_end))


# -- a point's figures, the frontiers, the goal (pure) ---------------------------------------------------------------


def figures(summary: Mapping[str, Any], prefix_cost: float) -> Doc:
    """A back-test's headline figures (``peer.headline``'s): cost of the disruption phase (the whole run's less the
    scale up's, ``prefix_cost``) and of the whole run, churn (nodes launched, the starting ones not counted, + nodes
    deleted), evictions, pods evicted more than once, pending pod-seconds over the whole run, and the decisions by
    method."""
    return {"cost": round(float(summary["node_hours_cost"]) - prefix_cost, 4),
            "cost_whole": float(summary["node_hours_cost"]),
            "churn": int(summary["launches"]) + int(summary["nodes_disrupted"]),
            "launches": int(summary["launches"]), "deleted": int(summary["nodes_disrupted"]),
            "evictions": int(summary["evictions"]), "evicted_twice": int(summary["pods_evicted_more_than_once"]),
            "pending": float(summary["pending_pod_seconds"]), "decisions": dict(summary["disruptions"])}


def frontier(points: Sequence[tuple[float, float]]) -> list[int]:
    """The indices of the points no other point dominates (both figures lower is better: another point at most as
    high on both and lower on one), by the first figure then the second."""
    out = []
    for i, (x, y) in enumerate(points):
        if not any(u <= x and v <= y and (u < x or v < y) for u, v in points):
            out.append(i)
    return sorted(out, key=lambda i: (points[i], i))


@dataclass(frozen=True)
class Aggregate:
    """One setting on one trace over its seeds: each axis's mean, min and max, and the figures per seed."""

    setting: Setting
    trace: str
    per_seed: Mapping[int, Mapping[str, Any]]

    def mean(self, axis: str) -> float:
        values = [float(f[axis]) for f in self.per_seed.values()]
        return sum(values) / len(values)

    def low(self, axis: str) -> float:
        return min(float(f[axis]) for f in self.per_seed.values())

    def high(self, axis: str) -> float:
        return max(float(f[axis]) for f in self.per_seed.values())


def aggregate(points: Iterable[Mapping[str, Any]], settings: Sequence[Setting], trace: str) -> list[Aggregate]:
    """Each setting's points on ``trace``, in ``settings``' order (a setting without a point is left out)."""
    by: dict[tuple[str, str], dict[int, Mapping[str, Any]]] = {}
    for p in points:
        if p["trace"] == trace:
            by.setdefault((p["side"], p["setting"]), {})[int(p["seed"])] = p["figures"]
    return [Aggregate(s, trace, dict(sorted(by[(s.side, s.name)].items()))) for s in settings
            if (s.side, s.name) in by]


#: the setting every point is measured against in the picture and the frontiers: Karpenter's defaults
BASELINE = "WEoU 0s 10%"


def relative(points: Sequence[Mapping[str, Any]], baseline: str = BASELINE) -> list[Doc]:
    """The points with each axis of ``AXES`` divided by the baseline setting's on the same trace and seed (a seed's
    draw makes its cluster larger or smaller, which moves every setting's figures alike; against the baseline of
    its own seed, the seeds' range is how differently a setting does, not how big the seed is). A baseline figure
    of 0 divides by 1; a trace and seed without the baseline keep their figures."""
    base = {(p["trace"], p["seed"]): p["figures"] for p in points if p["side"] == "karpenter"
            and p["setting"] == baseline}
    out = []
    for p in points:
        ref = base.get((p["trace"], p["seed"]))
        if ref is None:
            out.append(dict(p))
            continue
        f = dict(p["figures"])
        for axis, _ in AXES:
            f[axis] = float(f[axis]) / (float(ref[axis]) or 1.0)
        out.append({**p, "figures": f})
    return out


def side_frontier(aggregates: Sequence[Aggregate], axis: str) -> list[Aggregate]:
    """The settings on a side's frontier of cost against ``axis``, over their means, by cost."""
    indices = frontier([(a.mean("cost"), a.mean(axis)) for a in aggregates])
    return [aggregates[i] for i in indices]


def shortfall(ebb: Aggregate, karpenter: Aggregate) -> dict[str, tuple[float | None, float]]:
    """Per axis of ``GOAL_LIMITS``: ebb's figure over Karpenter's on the worst seed (None: Karpenter's is 0 and
    ebb's is not) and how far that is past the limit, relative to it (0 where the goal is met on every seed)."""
    out: dict[str, tuple[float | None, float]] = {}
    seeds = sorted(set(ebb.per_seed) & set(karpenter.per_seed))
    for axis, limit in GOAL_LIMITS.items():
        worst: float | None = 0.0
        past = 0.0
        for seed in seeds:
            mine, theirs = float(ebb.per_seed[seed][axis]), float(karpenter.per_seed[seed][axis])
            if theirs <= 0:
                ratio = None if mine > 0 else 1.0
                over = math.inf if mine > 0 else 0.0
            else:
                ratio = mine / theirs
                over = max(0.0, ratio / limit - 1.0) if ratio > limit + 1e-9 else 0.0
            if ratio is None or worst is None:
                worst = None
            else:
                worst = max(worst, ratio)
            past = max(past, over)
        out[axis] = (worst, past)
    return out


@dataclass(frozen=True)
class Match:
    """A Karpenter frontier setting on a trace, the ebb setting that comes closest to the goal against it, and the
    shortfall per axis (``shortfall``)."""

    trace: str
    karpenter: Aggregate
    ebb: Aggregate
    axes: Mapping[str, tuple[float | None, float]]
    #: the ebb setting with the least churn (worst seed's ratio) among those meeting every goal but churn, if any
    least_churn: Aggregate | None = None
    least_churn_ratio: float | None = None

    @property
    def met(self) -> bool:
        return all(past == 0.0 for _, past in self.axes.values())


def goal_check(karpenter: Sequence[Aggregate], ebb: Sequence[Aggregate]) -> list[Match]:
    """For each Karpenter setting on a frontier of the trace (cost against churn, or cost against evictions), the
    best ebb setting: one that meets the goal on every seed if any (the cheapest of those), else the one whose
    shortfalls past the limits add up least."""
    on_frontier: dict[str, Aggregate] = {}
    for axis in ("churn", "evictions"):
        for a in side_frontier(karpenter, axis):
            on_frontier.setdefault(a.setting.name, a)
    matches = []
    for k in sorted(on_frontier.values(), key=lambda a: a.mean("cost")):
        def score(e: Aggregate, k: Aggregate = k) -> tuple[float, float]:
            return sum(past for _, past in shortfall(e, k).values()), e.mean("cost")

        best = min(ebb, key=score)
        others = [(e, shortfall(e, k)) for e in ebb]
        rest = [(e, axes["churn"][0]) for e, axes in others
                if all(past == 0.0 for axis, (_, past) in axes.items() if axis != "churn")
                and axes["churn"][0] is not None]
        least, ratio = min(rest, key=lambda pair: (pair[1] or 0.0, pair[0].mean("cost"))) if rest else (None, None)
        matches.append(Match(k.trace, k, best, shortfall(best, k), least, ratio))
    return matches


# -- the section and the picture -------------------------------------------------------------------------------------


def _money(value: float) -> str:
    return f"${value:,.3f}"


def _count(value: float) -> str:
    return f"{value:,.0f}"


FORMATS: Mapping[str, Callable[[float], str]] = {"cost": _money, "churn": _count, "evictions": _count,
                                                 "pending": _count}


def _mean_range(a: Aggregate, axis: str) -> str:
    fmt = FORMATS[axis]
    if len(a.per_seed) == 1:
        return fmt(a.mean(axis))
    return f"{fmt(a.mean(axis))} [{fmt(a.low(axis))}-{fmt(a.high(axis))}]"


def _ratio_cell(axis: str, ratio: float | None, past: float) -> str:
    text = "∞" if ratio is None else f"{ratio:.2f}x"
    return f"{text} ✓" if past == 0.0 else f"**{text} ✗** ({'+∞' if math.isinf(past) else f'+{past:.0%}'} past)"


def _label(setting: Setting) -> str:
    named = NAMED.get(setting.name)
    return f"{setting.name} ({named})" if named else setting.name


def frontier_settings(points: Sequence[Mapping[str, Any]], settings: Sequence[Setting],
                      trace: str) -> dict[str, list[str]]:
    """Per setting of ``settings`` on a frontier of ``trace``, which (``churn``, ``evictions``): over the means of
    the points relative to Karpenter's defaults (``relative``), as the picture draws them."""
    on: dict[str, list[str]] = {}
    for axis in ("churn", "evictions"):
        for a in side_frontier(aggregate(relative(points), settings, trace), axis):
            on.setdefault(a.setting.name, []).append(axis)
    return on


def goal_matches(points: Sequence[Mapping[str, Any]], settings: Sequence[Setting], trace: str) -> list[Match]:
    """``goal_check`` on ``trace``: Karpenter's frontier as the picture draws it, the ratios per seed (the same
    whether relative or not)."""
    rel = relative(points)
    return goal_check(aggregate(rel, [s for s in settings if s.side == "karpenter"], trace),
                      aggregate(rel, [s for s in settings if s.side == "ebb"], trace))


def render(points: Sequence[Mapping[str, Any]], settings: Sequence[Setting], meta: Mapping[str, Any],
           image: str = f"img/{IMAGE}") -> list[str]:
    """The results section: how the sweep ran, the picture, each side's frontier settings per trace, and the goal
    check table."""
    karpenter = [s for s in settings if s.side == "karpenter"]
    ebb = [s for s in settings if s.side == "ebb"]
    seeds = ", ".join(map(str, meta["seeds"]))
    lines = [f"### Trade-off: cost against churn and evictions ({len(karpenter)} Karpenter and {len(ebb)} ebb "
             f"settings, seeds {seeds}, {' and '.join(meta['traces'])}, size `{meta['size']}`)", "",
             f"{meta['points']} back-tests ({meta['cached']} from the cache), {meta['jobs']} worker processes, "
             f"{meta['minutes']:.1f} minutes ({meta['run_minutes']:.1f} minutes of back-tests run now). Run afresh, "
             f"the back-tests take {meta['cpu_minutes']:.1f} CPU-minutes and took "
             f"{meta['worker_minutes'] / max(1, meta['jobs']):.0f} minutes of wall time in {meta['jobs']} processes "
             f"when they ran (the machine shared with other work then: the CPU-minutes are the figure to compare).",
             "",
             f"![Node-hour cost against churn and against evictions, each relative to Karpenter's defaults on the "
             f"same seed: one marker per setting (the mean of seeds {seeds}, bars the range), each side's Pareto "
             f"frontier a line]({image})", ""]
    all_matches: list[Match] = []
    rel = relative(points)
    for trace in meta["traces"]:
        lines += [f"**{trace}: the frontiers** (each figure's mean [min-max] over the seeds, and in parentheses the "
                  f"mean ÷ Karpenter's defaults on the same seed; a setting on either frontier)", "",
                  "| side | setting | cost | churn | evictions | pending pod-s | on the frontier of |",
                  "|---|---|---|---|---|---|---|"]
        for side, group in (("Karpenter", karpenter), ("ebb", ebb)):
            on = frontier_settings(points, group, trace)
            ratios = {a.setting.name: a for a in aggregate(rel, group, trace)}
            for a in sorted((a for a in aggregate(points, group, trace) if a.setting.name in on),
                            key=lambda a: ratios[a.setting.name].mean("cost")):
                lines.append(f"| {side} | {_label(a.setting)} | " + " | ".join(
                    f"{_mean_range(a, axis)} ({ratios[a.setting.name].mean(axis):.2f})" for axis, _ in AXES)
                    + f" | {' and '.join(on[a.setting.name])} |")
        lines.append("")
        all_matches += goal_matches(points, settings, trace)
    met = sum(1 for m in all_matches if m.met)
    lines += ["**The goal, per Karpenter frontier setting**: the ebb setting closest to it; each cell the worst "
              "seed's ebb ÷ Karpenter against the goal's limit (cost ≤ 1.02x, churn ≤ 0.5x, evictions ≤ 1x, "
              "pending ≤ 1x), ✗ and how far past the limit where missed. The last column: of the ebb settings that "
              "meet every goal but churn on every seed, the one with the least churn, and its worst seed's churn "
              "÷ Karpenter's.", "",
              "| trace | Karpenter setting | best ebb setting | cost | churn | evictions | pending pod-s | met | "
              "least churn at no higher cost |", "|---|---|---|---|---|---|---|---|---|"]
    for m in all_matches:
        least = ("none" if m.least_churn is None or m.least_churn_ratio is None
                 else f"{_label(m.least_churn.setting)}: {m.least_churn_ratio:.2f}x")
        lines.append(f"| {m.trace} | {_label(m.karpenter.setting)} | {_label(m.ebb.setting)} | "
                     + " | ".join(_ratio_cell(axis, *m.axes[axis]) for axis, _ in AXES)
                     + f" | {'yes' if m.met else 'no'} | {least} |")
    lines += ["", f"Met against {met} of {len(all_matches)} Karpenter frontier settings on every seed.", ""]
    return lines


#: where the picture puts a named setting's label (points): Balanced's and the defaults' are close, so one left below
LABEL_OFFSETS: Mapping[str, tuple[int, int]] = {"Bal 0s 10%": (-118, -16)}
#: colours and markers of the sides in the picture
STYLE: Mapping[str, Mapping[str, str]] = {"karpenter": {"color": "#d95f02", "marker": "o", "label": "Karpenter"},
                                          "ebb": {"color": "#1b6ca8", "marker": "^", "label": "ebb"}}


def draw(points: Sequence[Mapping[str, Any]], settings: Sequence[Setting], meta: Mapping[str, Any],
         path: Path) -> None:
    """The picture: a row per trace, cost against churn and against evictions; per setting a marker at its mean
    over the seeds with bars for their range, each side's frontier a line, the named settings labelled."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = relative(points)
    traces = list(meta["traces"])
    fig, axes = plt.subplots(len(traces), 2, figsize=(14, 5.6 * len(traces) + 1.2), squeeze=False)
    seeds = ", ".join(map(str, meta["seeds"]))
    for row, trace in enumerate(traces):
        for col, (axis, figure) in enumerate((("churn", "launches + disruptions over the whole trace (nodes)"),
                                              ("evictions", "pod evictions over the whole trace (pods)"))):
            what = f"{figure},\n÷ Karpenter's defaults' on the same seed (1 = as many)"
            ax = axes[row][col]
            for side in ("karpenter", "ebb"):
                style = STYLE[side]
                aggs = aggregate(points, [s for s in settings if s.side == side], trace)
                xs = [a.mean(axis) for a in aggs]
                ys = [a.mean("cost") for a in aggs]
                xerr = [[a.mean(axis) - a.low(axis) for a in aggs], [a.high(axis) - a.mean(axis) for a in aggs]]
                yerr = [[a.mean("cost") - a.low("cost") for a in aggs], [a.high("cost") - a.mean("cost") for a in aggs]]
                ax.errorbar(xs, ys, xerr=xerr, yerr=yerr, fmt="none", ecolor=style["color"], alpha=0.22, lw=0.8)
                ax.scatter(xs, ys, c=style["color"], marker=style["marker"], s=34, alpha=0.8, edgecolors="white",
                           linewidths=0.5, label=f"{style['label']}: a setting (mean of seeds {seeds}; bars: range)")
                front = sorted(side_frontier(aggs, axis), key=lambda a: (a.mean(axis), a.mean("cost")))
                ax.plot([a.mean(axis) for a in front], [a.mean("cost") for a in front], color=style["color"], lw=2.2,
                        drawstyle="steps-post", label=f"{style['label']}: Pareto frontier (lower left is better)")
                for a in aggs:
                    if a.setting.name in NAMED:
                        ax.scatter([a.mean(axis)], [a.mean("cost")], marker="*", s=260, c=style["color"],
                                   edgecolors="black", linewidths=0.8, zorder=5)
                        ax.annotate(NAMED[a.setting.name], (a.mean(axis), a.mean("cost")),
                                    xytext=LABEL_OFFSETS.get(a.setting.name, (8, 6)),
                                    textcoords="offset points", fontsize=8.5, zorder=6,
                                    arrowprops={"arrowstyle": "-", "color": style["color"], "lw": 0.8},
                                    bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": style["color"],
                                          "alpha": 0.85})
            bottom, top = ax.get_ylim()
            ax.fill_between([0.0, GOAL_LIMITS[axis]], bottom, GOAL_LIMITS["cost"], color="#1b9e77", alpha=0.10,
                            lw=0, label="the goal against Karpenter's defaults (cost ≤ 1.02x, churn ≤ 0.5x, "
                                        "evictions ≤ 1x)")
            ax.set_ylim(bottom, top)
            ax.set_xlim(left=0.0)
            ax.set_xlabel(what)
            ax.set_ylabel("node-hour cost of the disruption phase ($),\n÷ Karpenter's defaults' on the same seed")
            ax.axhline(1.0, color="grey", lw=0.8, ls=":")
            ax.axvline(1.0, color="grey", lw=0.8, ls=":")
            ax.set_title(f"{trace} trace: cost against {'churn' if axis == 'churn' else 'evictions'}")
            ax.grid(True, alpha=0.3)
    handles, labels = axes[0][0].get_legend_handles_labels()
    handles, labels = handles[:4] + handles[5:], labels[:4] + labels[5:]  # the churn panel's goal: said once
    evictions_goal = axes[0][1].get_legend_handles_labels()
    handles.append(evictions_goal[0][-1])
    labels.append("the goal's box against Karpenter's defaults: cost ≤ 1.02x, churn ≤ 0.5x (left), evictions "
                  "≤ 1x (right)")
    from matplotlib.lines import Line2D

    handles.append(Line2D([], [], marker="*", color="grey", markeredgecolor="black", markersize=14, ls="none"))
    labels.append("a named setting (Karpenter's defaults, Balanced; ebb's defaults, recommended)")
    fig.legend(handles, labels, loc="lower center", ncol=2, fontsize=9, frameon=False)
    n_k = sum(1 for s in settings if s.side == "karpenter")
    n_e = sum(1 for s in settings if s.side == "ebb")
    fig.suptitle(f"ebb against Karpenter in the calibrated back-test: {n_k} Karpenter settings (consolidationPolicy "
                 f"x consolidateAfter x budget, ebb's simulation of Karpenter)\nand {n_e} ebb settings "
                 f"(stabilizationWindow x minimumPriceImprovement x demandWindow x eviction price); the peer "
                 f"harness's traces, size {meta['size']}, seeds {seeds}\nevery figure ÷ Karpenter's defaults' on the "
                 f"same trace and seed; lower and further left is better", fontsize=11.5)
    fig.tight_layout(rect=(0, 0.1, 1, 0.93))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


# -- the sweep (I/O) -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sweep:
    """What a sweep runs: the settings, the traces, the seeds, the size, the cloud."""

    settings: tuple[Setting, ...]
    traces: tuple[str, ...]
    seeds: tuple[int, ...]
    size: str
    cloud: peer.Cloud = peer.CLOUD


#: the smoke: two settings a side, one seed of the bursty trace at the peer smoke's size and cloud
SMOKE = Sweep((karpenter_setting("WhenEmptyOrUnderutilized", "0s", "10%"),
               karpenter_setting("Balanced", "30s", "100%"),
               ebb_setting("", 0, "", 0.005), ebb_setting("1m", 20, "", 0.02)),
              ("bursty",), (1,), "smoke", peer.SMOKE_CLOUD)


def full_sweep() -> Sweep:
    def env(name: str, default: str) -> list[str]:
        return [v.strip() for v in os.environ.get(name, default).split(",") if v.strip()]

    return Sweep((*karpenter_settings(), *ebb_settings()),
                 tuple(env("EBB_BENCH_TRADEOFF_TRACES", ",".join(peer.TRACE_KINDS))),
                 tuple(int(s) for s in env("EBB_BENCH_TRADEOFF_SEEDS", ",".join(map(str, SEEDS)))),
                 os.environ.get("EBB_BENCH_TRADEOFF_SIZE", SIZE))


def code_fingerprint(root: Path = REPO_ROOT) -> str:
    """A hash of ebb's code a back-test runs (the library and the services), so a cached point of other code is
    not taken."""
    digest = hashlib.sha256()
    for path in sorted([*root.glob("libs/ebb/src/**/*.py"), *root.glob("services/*/src/**/*.py")]):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _options_doc(options: BacktestOptions) -> Doc:
    return {"start": options.start.isoformat(), "duration": options.duration.total_seconds(), "seed": options.seed,
            "boot": [options.boot_seconds, options.boot_seconds_max], "spot_to_spot": options.spot_to_spot}


def point_key(setup_: Setup, policy: Policy, options: BacktestOptions, code: str) -> str:
    """The cache key of a back-test: everything its result depends on."""
    text = json.dumps({"documents": setup_.documents, "trace": setup_.trace, "policy": [
        list(policy.documents), dict(policy.engine_options or {})], "options": _options_doc(options), "code": code},
        sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _worker_start() -> None:
    from ebb.adapters.logs import configure

    configure("error")


def _run(documents: Sequence[Doc], trace: Doc, policy: Policy, options: BacktestOptions) -> Doc:
    """One back-test in a worker process: its summary, and how long it took (wall and CPU)."""
    from ebb.core.traces import Trace
    from ebb_embedded.backtest import run_policy

    wall, cpu = time.perf_counter(), time.process_time()
    summary: Doc = run_policy(documents, Trace.model_validate(trace), policy, options)["summary"]
    return {"summary": summary, "seconds": time.perf_counter() - wall, "cpu_seconds": time.process_time() - cpu}


def _log(message: str) -> None:
    print(f"[tradeoff] {message}", file=sys.stderr, flush=True)


def run_sweep(sweep: Sweep, out: Path, jobs: int = JOBS, fresh: bool = False,
              types: Sequence[Mapping[str, Any]] | None = None) -> tuple[list[Doc], Doc]:
    """Every (setting, trace, seed) back-test of ``sweep``, and each (trace, seed, side)'s scale up alone, from the
    cache under ``out/points`` or run in ``jobs`` worker processes (and cached); the points (side, setting, trace,
    seed, figures) and the run's meta (how many, how long)."""
    started = time.monotonic()
    if types is None:
        types = json.loads(peer.kwok_instance_types_path().read_text())
    size = peer.SIZES_BY_NAME[sweep.size]
    code = code_fingerprint()
    cache = out / "points"
    cache.mkdir(parents=True, exist_ok=True)
    setups = {(kind, seed): setup(kind, seed, size, types, sweep.cloud) for kind in sweep.traces
              for seed in sweep.seeds}
    sides: dict[SideName, Setting] = {}
    for s in sweep.settings:
        sides.setdefault(s.side, s)
    #: key → (documents, trace, policy, options): the back-tests to have
    wanted: dict[str, tuple[tuple[Doc, ...], Doc, Policy, BacktestOptions]] = {}
    point_keys: list[tuple[Setting, str, int, str, str]] = []
    for (kind, seed), su in setups.items():
        prefixes = {}
        for side, first in sides.items():
            policy = calibrate.held_until(policy_of(first), su.up_end)
            options = prefix(su)
            key = point_key(su, policy, options, code)
            wanted[key] = (su.documents, su.trace, policy, options)
            prefixes[side] = key
        for s in sweep.settings:
            policy = calibrate.held_until(policy_of(s), su.up_end)
            key = point_key(su, policy, su.options, code)
            wanted[key] = (su.documents, su.trace, policy, su.options)
            point_keys.append((s, kind, seed, key, prefixes[s.side]))
    results: dict[str, Doc] = {}
    for key in wanted:
        path = cache / f"{key}.json"
        if not fresh and path.exists():
            results[key] = json.loads(path.read_text())
    todo = [key for key in wanted if key not in results]
    cached = len(results)
    _log(f"{len(wanted)} back-tests, {cached} from the cache, {len(todo)} to run in {jobs} processes")
    run_started = time.monotonic()
    if todo:
        context = multiprocessing.get_context("spawn")
        with concurrent.futures.ProcessPoolExecutor(max(1, jobs), mp_context=context,
                                                    initializer=_worker_start) as pool:
            futures = {pool.submit(_run, *wanted[key]): key for key in todo}
            for n, future in enumerate(concurrent.futures.as_completed(futures), 1):
                key = futures[future]
                results[key] = future.result()
                (cache / f"{key}.json").write_text(json.dumps(results[key]))
                if n % 10 == 0 or n == len(todo):
                    _log(f"{n}/{len(todo)} run, {time.monotonic() - run_started:.0f} s")
    points = []
    for s, kind, seed, key, prefix_key in point_keys:
        result = results[key]
        prefix_cost = float(results[prefix_key]["summary"]["node_hours_cost"])
        points.append({"side": s.side, "setting": s.name, "spec": dict(s.spec), "trace": kind, "seed": seed,
                       "figures": figures(result["summary"], prefix_cost), "seconds": result["seconds"],
                       "cpu_seconds": result["cpu_seconds"]})
    meta = {"seeds": list(sweep.seeds), "traces": list(sweep.traces), "size": sweep.size, "jobs": jobs,
            "points": len(wanted), "cached": cached, "minutes": (time.monotonic() - started) / 60,
            "run_minutes": (time.monotonic() - run_started) / 60 if todo else 0.0,
            "cpu_minutes": sum(float(r["cpu_seconds"]) for r in results.values()) / 60,
            "worker_minutes": sum(float(r["seconds"]) for r in results.values()) / 60,
            "up_end": {f"{k}/{s}": su.up_end for (k, s), su in setups.items()}}
    return points, meta


def out_dir() -> Path:
    return Path(os.environ.get("EBB_BENCH_TRADEOFF_OUT", str(REPO_ROOT / ".artifacts" / "tradeoff")))


def run(image: Path, smoke: bool = False, image_ref: str = f"img/{IMAGE}") -> list[str]:
    """The sweep (``SMOKE`` or ``full_sweep``), its JSON (``out_dir``/tradeoff.json, or tradeoff-smoke.json), the
    picture at ``image``; the results section's lines."""
    sweep = SMOKE if smoke else full_sweep()
    out = out_dir()
    jobs = int(os.environ.get("EBB_BENCH_TRADEOFF_JOBS", str(JOBS)))
    fresh = os.environ.get("EBB_BENCH_TRADEOFF_FRESH", "") == "1"
    types_file = os.environ.get("EBB_BENCH_TRADEOFF_TYPES", "")
    types = json.loads(Path(types_file).read_text()) if types_file else None
    points, meta = run_sweep(sweep, out, jobs=jobs, fresh=fresh, types=types)
    draw(points, sweep.settings, meta, image)
    lines = render(points, sweep.settings, meta, image_ref)
    frontiers = {trace: {side: {axis: [name for name, axes in frontier_settings(
        points, [s for s in sweep.settings if s.side == side], trace).items() if axis in axes]
        for axis in ("churn", "evictions")} for side in ("karpenter", "ebb")} for trace in sweep.traces}
    matches = [m for trace in sweep.traces for m in goal_matches(points, sweep.settings, trace)]
    (out / ("tradeoff-smoke.json" if smoke else "tradeoff.json")).write_text(json.dumps({
        "meta": meta, "settings": [{"side": s.side, "name": s.name, "spec": dict(s.spec)} for s in sweep.settings],
        "points": points, "frontiers": frontiers, "image": str(image),
        "goal": [{"trace": m.trace, "karpenter": m.karpenter.setting.name, "ebb": m.ebb.setting.name, "met": m.met,
                  "least_churn": None if m.least_churn is None else m.least_churn.setting.name,
                  "least_churn_ratio": m.least_churn_ratio,
                  "axes": {axis: {"worst_ratio": r, "past": None if math.isinf(p) else p}
                           for axis, (r, p) in m.axes.items()}} for m in matches]}, indent=1))
    _log(f"{meta['points']} back-tests in {meta['minutes']:.1f} min; JSON in {out}, the picture in {image}")
    return lines
