"""How close the back-test is to the real Karpenter (``python -m bench calibrate``).

``ebb backtest``'s built-in ``karpenter-default`` and ``karpenter-balanced`` are ebb's own engine playing
Karpenter's rules on a simulated cluster with a simulated provisioner. This module checks them against the real
Karpenter: the same seeded workload trace that ``bench.peer`` plays on a real kube-apiserver + KWOK with
Karpenter's KWOK provider is converted (``ebb_trace``, ``starting_documents``) into an ``ebb.sh/v1 Trace`` and
the cluster to start from (the peer's NodePool, Karpenter's KWOK instance types and prices as ebb's catalog),
replayed by the back-test with the matching built-in policy, and the figures compared (``compare``): node-hour
cost, launches, disruption decisions by reason, nodes deleted, evictions, pods evicted more than once, pending
pod-seconds. One seed is run twice on the real side, so the comparison knows how much the real Karpenter varies
on its own (``spreads``): a figure is close when within ``TOLERANCE`` of the real run's, or within what repeating
a real run moved it.

What is converted, and why it is the same workload: a peer service is a Deployment, whose pods a ReplicaSet makes
and remakes after an eviction; the back-test's ReplicaSet does the same (``scale`` events with the Deployment's
pod template: requests, hostname anti-affinity, zone spread); its PodDisruptionBudgets are created at the start;
a peer job is a Deployment created at its start and deleted at its end, here a ReplicaSet scaled up then deleted.
The scale up's length is the real run's (it lasts until every pod runs), so the conversion takes the trace as the
real run shifted it (``peer.Trace.shifted``) and the back-test runs as long as the real run did.

What is the same cluster and cloud: the real run starts from the NodeClaims ``peer.starting_cluster`` plans for the
peak, creates the services once they are Ready and keeps its NodePool's budget at "0" until every pod runs; the
back-test starts from those NodeClaims as Ready Nodes of the NodePool (``starting_nodes``, ``start_node``: planned
again, the same instance types, capacity types and zones), creates the services when the real run did
(``services_created``) and holds its policy's disruption until the real run's began (``held_until``). Its NodePool
offers the cloud's capacity types (spot and on-demand), spot-to-spot is as the real run had it, and a node boots in
a time drawn per node from the launch-to-Ready times the real run recorded (``real_boot_samples``, else the range
``real_boot`` gives). Both sides'
figures cover the whole run, from the starting NodeClaims' creation to the end: the starting cluster's cost is in
both, its NodeClaims are no launch on either (``real_figures``' ``launches_after_start``).

The pure parts (the conversion, the figures, the comparison, the table) are unit-tested in
tests/benchmarks/test_calibrate.py; ``run`` does the I/O: the real runs (each a ``python -m bench _case peer
SIDE`` process on a control plane of its own, ``PARALLEL`` at once), the back-tests, the JSON and the section of
docs/backtest.md between ``SECTION_START`` and ``SECTION_END``.

Environment: ``EBB_BENCH_CALIBRATE_SEEDS`` (default ``1,2,3``), ``EBB_BENCH_CALIBRATE_TRACES`` (``bursty,diurnal``),
``EBB_BENCH_CALIBRATE_SIDES`` (``karpenter-default``; ``karpenter-balanced`` too for Balanced),
``EBB_BENCH_PEER_SIZE`` (``short`` unless given), ``EBB_BENCH_CALIBRATE_PARALLEL`` (2),
``EBB_BENCH_CALIBRATE_REPEAT`` (the seeds run twice, comma-separated, default the first),
``EBB_BENCH_CALIBRATE_OUT`` (the JSON, default .artifacts/calibrate.json),
``EBB_BENCH_CALIBRATE_BOOT`` (``ready``, the default, or ``binding``: what the back-test's boot time is taken from,
``BOOT_BASES``), ``EBB_BENCH_CALIBRATE_BINDING`` (``scored``, the default, or ``first-fit``: how the back-test's
simulated kube-scheduler picks a node, ``ebb_embedded.cluster.BINDINGS``), ``EBB_BENCH_CALIBRATE_REUSE=FILE`` (take
the real runs from an earlier JSON and only run the back-tests again: what a change to the simulation needs), with
``EBB_BENCH_CALIBRATE_MORE=1`` (run the real runs the earlier JSONs lack, such as another seed's repeat, and keep
them all).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench import peer
from bench.generators import REPO_ROOT

if TYPE_CHECKING:
    from ebb_embedded.backtest import BacktestOptions, Policy

Doc = dict[str, Any]

#: a back-test figure within this share of the real run's is close
TOLERANCE = 0.10
#: how many real runs go at once, each on a control plane of its own
PARALLEL = 2
#: when the back-test starts (any moment: the trace is relative to it)
START = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)
#: how long a KWOK node takes from its NodeClaim to Ready on the local control plane when the peer run gives no
#: start-up delay of its own (docs: about 0.15 s to launch, Ready 1.4 s later)
KWOK_READY_SECONDS = 2.0
SECTION_START = "<!-- bench:calibration -->"
SECTION_END = "<!-- /bench:calibration -->"
#: the figures compared, in the table's order: (key, what it is)
FIGURES: tuple[tuple[str, str], ...] = (
    ("cost", "node-hours cost ($)"),
    ("launches", "NodeClaims launched"),
    ("deleted", "NodeClaims deleted"),
    ("decisions", "disruption decisions"),
    ("emptiness", "- emptiness"),
    ("single", "- single-node consolidation"),
    ("multi", "- multi-node consolidation"),
    ("evictions", "evictions"),
    ("evicted_twice", "pods evicted more than once"),
    ("pending", "pending pod-seconds"),
)


# -- the conversion (pure) -------------------------------------------------------------------------------------------


def _workload(name: str) -> Doc:
    return {"kind": "ReplicaSet", "name": name, "namespace": peer.NAMESPACE}


def _template(deployment: Mapping[str, Any]) -> Doc:
    template = deployment["spec"]["template"]
    return {"labels": dict(template["metadata"]["labels"]), "spec": template["spec"]}


#: how many pods a second kube-controller-manager's ReplicaSet controller creates (its client's default
#: ``--kube-api-qps``): 200 pods take it 10 s, which keeps Karpenter's first batch open to its 10 s maximum
CREATION_RATE = 20.0


def ebb_trace(trace: peer.Trace, creation_rate: float | None = CREATION_RATE, services_at: float = 0.0) -> Doc:
    """The ``ebb.sh/v1 Trace`` of what the peer driver applies for ``trace`` (as the real run shifted it): each
    Deployment's ReplicaSet scaled with the Deployment's pod template at the times the driver creates or scales it,
    the PodDisruptionBudgets created with their services, each job's ReplicaSet scaled up at its start and deleted
    at its end. Events at the same moment keep the driver's order (``peer.Trace.actions``).

    ``creation_rate``: the pods the calls of one moment add appear at that many a second, in that order, as the
    ReplicaSet controller creates them (a scale up in steps of a second); None: all at once, the driver's calls
    as they are. ``services_at``: when the driver created the services (and their PodDisruptionBudgets): once the
    starting cluster was Ready (``services_created``), not at the trace's 0."""
    services = {s.name: s for s in trace.services}
    jobs = {j.name: j for j in trace.jobs}
    events: list[Doc] = []
    have: dict[str, int] = {}
    #: the moment of the calls being converted, and how many pods they added so far (``creation_rate``)
    moment, added = -1.0, 0

    def grow(at: float, name: str, replicas: int, template: Doc | None) -> None:
        nonlocal moment, added
        if at != moment:
            moment, added = at, 0
        start = have.get(name, 0)
        have[name] = replicas
        if creation_rate is None or replicas <= start:
            events.append({"at": at, "scale": {"workload": _workload(name), "replicas": replicas,
                                               **({"template": template} if template else {})}})
            return
        for count in range(start + 1, replicas + 1):
            second = math.floor(added / creation_rate)
            added += 1
            last = count == replicas or math.floor(added / creation_rate) != second
            if last:
                events.append({"at": round(at + second, 3), "scale": {
                    "workload": _workload(name), "replicas": count, **({"template": template} if template else {})}})

    for call in trace.actions():
        action = replace(call, at=max(call.at, services_at)) if call.verb == "create-service" else call
        if action.verb == "create-service":
            objects = peer.service_objects(services[action.name], action.replicas)
            deployment = next(o for o in objects if o["kind"] == "Deployment")
            pdbs = [o for o in objects if o["kind"] == "PodDisruptionBudget"]
            if pdbs:
                events.append({"at": action.at, "create": {"objects": pdbs}})
            grow(action.at, action.name, action.replicas, _template(deployment))
        elif action.verb == "scale":
            grow(action.at, action.name, action.replicas, None)
        elif action.verb == "create-job":
            job = jobs[action.name]
            deployment = peer.deployment(job.name, job.replicas, job.cpu_m, job.mem_mib, "job")
            grow(action.at, action.name, job.replicas, _template(deployment))
        else:
            have.pop(action.name, None)
            events.append({"at": action.at, "delete": {"workload": _workload(action.name)}})
    events.sort(key=lambda e: e["at"])  # stable: the calls of one moment keep their order
    return {"apiVersion": "ebb.sh/v1", "kind": "Trace", "name": f"peer-{trace.kind}-seed{trace.seed}",
            "description": "bench.peer's trace, converted by bench.calibrate", "events": events}


def real_cloud(result: Mapping[str, Any]) -> peer.Cloud:
    """The cloud a real run ran on (its result's ``cloud``: start-up range, capacity types, spot-to-spot); for a
    result of the harness before it had one, the local control plane as it was then: nodes Ready at once (KWOK's
    own second), on-demand only, no spot-to-spot."""
    cloud = result.get("cloud")
    if not isinstance(cloud, Mapping):
        return peer.Cloud(node_ready=(0, 0), capacity_types=("on-demand",), spot_to_spot=False)
    low, high = (int(v) for v in cloud.get("node_ready") or (0, 0))
    return peer.Cloud(node_ready=(low, high), capacity_types=tuple(cloud.get("capacity_types") or ("on-demand",)),
                      spot_to_spot=bool(cloud.get("spot_to_spot", False)))


def starting_nodes(result: Mapping[str, Any], side: peer.Side,
                   types: Sequence[Mapping[str, Any]]) -> list[peer.StartNode]:
    """The NodeClaims a real run started from (``peer.starting_cluster``: deterministic for a trace and a NodePool,
    so planned again here exactly as the harness planned them, on the NodePool it created: the side's, with the
    cloud's capacity types). No node for a run without a starting cluster (no ``start`` in its result: the harness
    before it had one). ValueError when the plan does not have as many NodeClaims as the run recorded: the back-test
    would not start from the same cluster."""
    start = result.get("start")
    if not isinstance(start, Mapping):
        return []
    pool = peer.nodepool(side.consolidate_after, "0", side.consolidation_policy, real_cloud(result).capacity_types)
    nodes = peer.starting_cluster(real_trace(result), types, pool)
    if len(nodes) != int(start["nodeclaims"]):
        raise ValueError(f"the starting cluster planned again has {len(nodes)} NodeClaims, the real run "
                         f"started from {start['nodeclaims']}")
    return nodes


def start_node(node: peer.StartNode, pool: Mapping[str, Any], types: Sequence[Mapping[str, Any]]) -> Doc:
    """A starting NodeClaim as the back-test's Node: the NodePool's (``karpenter.sh/nodepool`` and its labels), its
    instance type, capacity type and zone, the type's capacity and allocatable from ebb's catalog of Karpenter's
    KWOK types (as the back-test's own launches), Ready and initialized (the real run's services come once all its
    starting NodeClaims are Ready, ``services_created``)."""
    from ebb.adapters.catalog import catalog_from_kwok_instance_types
    from ebb.core.launch import LaunchSpec, node_object
    from ebb.core.quantity import fmt_time
    from ebb.core.snapshot import parse_documents

    snapshot = parse_documents([catalog_from_kwok_instance_types(
        [t for t in types if t.get("name") == node.instance_type]), dict(pool)])
    instance_type = next(it for it in snapshot.instance_types if it.name == node.instance_type)
    price = next((o.price for o in instance_type.offerings
                  if o.capacity_type == node.capacity_type and o.zone == node.zone), 0.0)
    spec = LaunchSpec(node.name, peer.NODEPOOL, node.instance_type, node.capacity_type, node.zone, price)
    doc = node_object(spec, pool=snapshot.nodepools[0], instance_type=instance_type, now=START, initialized=True)
    doc["status"]["conditions"] = [{"type": "Ready", "status": "True", "lastTransitionTime": fmt_time(START)}]
    return doc


def starting_documents(side: peer.Side, types: Sequence[Mapping[str, Any]], nodes: Sequence[peer.StartNode] = (),
                       capacity_types: Sequence[str] = peer.CLOUD.capacity_types) -> list[Doc]:
    """The cluster the back-test starts from, the real run's at its start: the side's NodePool (as the peer run
    creates it, offering ``capacity_types``, the cloud's), Karpenter's KWOK instance types as ebb's catalog
    (``ebb_objects`` does the same for ebb's side of the peer run) and the starting cluster's NodeClaims
    (``starting_nodes``) as Nodes of the NodePool (``start_node``)."""
    from ebb.adapters.catalog import catalog_from_kwok_instance_types

    pool = peer.nodepool(side.consolidate_after, side.budget_nodes, side.consolidation_policy, tuple(capacity_types))
    return [pool, catalog_from_kwok_instance_types(types), *(start_node(n, pool, types) for n in nodes)]


def real_trace(result: Mapping[str, Any]) -> peer.Trace:
    """The trace a real run played: its seed, kind and size, shifted to where its scale up ended."""
    t = result["trace"]
    size = peer.SIZES_BY_NAME[result.get("size", "full")]
    return peer.make_trace(int(t["seed"]), size, str(t.get("kind", "bursty"))).shifted(disruption_start(result))


def disruption_start(result: Mapping[str, Any]) -> float:
    """When a real run's disruption began: the end of its scale up (its recorded first phase), when the harness set
    the NodePool's budget from "0" to the side's."""
    return float(result["trace"]["phases"][0][2])


def services_created(result: Mapping[str, Any]) -> float:
    """When a real run created its services: once its starting NodeClaims were all Ready (``start.ready_after``);
    at its start without a starting cluster."""
    start = result.get("start")
    return float(start.get("ready_after") or 0.0) if isinstance(start, Mapping) else 0.0


def held_until(policy: Policy, seconds: float) -> Policy:
    """``policy`` with its voluntary disruption held for the back-test's first ``seconds``: a budget ``nodes: "0"``
    on every DisruptionPolicy, scheduled at ``START`` for that long (rounded up to the second), as the real run's
    NodePool had budget "0" until every pod ran."""
    hold = {"nodes": "0", "schedule": f"{START.minute} {START.hour} * * *", "duration": f"{math.ceil(seconds)}s"}
    documents = tuple({**doc, "spec": {**doc["spec"], "budgets": [*(doc["spec"].get("budgets") or []), hold]}}
                      if doc.get("kind") == "DisruptionPolicy" else doc for doc in policy.documents)
    return replace(policy, documents=documents)


def boot_seconds(result: Mapping[str, Any]) -> tuple[float, float | None]:
    """The back-test's boot time for a real run from how its cloud was set up, as ``(boot_seconds,
    boot_seconds_max)``: the start-up range its KWOK nodes were given (``cloud.node_ready``) plus KWOK's own
    second or two, a time drawn per node in it; from a result of the older harness, the mean of its
    ``node_startup_seconds`` plus KWOK's own; else KWOK's own alone."""
    cloud = result.get("cloud")
    if isinstance(cloud, Mapping) and cloud.get("node_ready"):
        low, high = (float(v) for v in cloud["node_ready"])
        return KWOK_READY_SECONDS + low, (KWOK_READY_SECONDS + high if high > low else None)
    startup = result.get("node_startup_seconds")
    if isinstance(startup, Sequence) and not isinstance(startup, str) and startup:
        return KWOK_READY_SECONDS + sum(float(v) for v in startup) / len(startup), None
    if isinstance(startup, int | float):
        return KWOK_READY_SECONDS + float(startup), None
    return KWOK_READY_SECONDS, None


def recorded_boot(result: Mapping[str, Any]) -> tuple[float, float | None] | None:
    """The launch-to-Ready times a real run recorded (``cloud.ready_seconds``: min and max over its NodeClaims,
    the cloud's delay with KWOK's own and the machine's load in it) as ``(boot_seconds, boot_seconds_max)``; None
    when it recorded none."""
    cloud = result.get("cloud")
    seen = cloud.get("ready_seconds") if isinstance(cloud, Mapping) else None
    if not isinstance(seen, Mapping) or not seen.get("count") or seen.get("min") is None or seen.get("max") is None:
        return None
    low, high = round(float(seen["min"]), 1), round(float(seen["max"]), 1)
    return low, (high if high > low else None)


#: how many NodeClaims launched during the trace it takes for their launch-to-Ready times to be the boot range
LAUNCHED_BOOT_LEAST = 3


def launched_boots(timeline: Mapping[str, Any]) -> tuple[float, ...]:
    """The launch-to-Ready times of the NodeClaims the real run launched during its trace (its timeline), sorted,
    to the tenth of a second. The starting cluster's are left out: the back-test starts those Ready, and they were all
    launched at once, which stretched their start-up on the local control plane (the node lifecycle controller
    taints a NotReady node at a rate per zone, and KWOK computes a delay again at every change of the Node)."""
    return tuple(sorted(round(float(n["ready"]) - float(n["launched"]), 1) for n in timeline.get("nodeclaims") or []
                        if n.get("ready") is not None and not str(n.get("name", "")).startswith(peer.START_PREFIX)))


def launched_boot(timeline: Mapping[str, Any]) -> tuple[float, float | None] | None:
    """The range of ``launched_boots`` as ``(boot_seconds, boot_seconds_max)``; None when fewer than
    ``LAUNCHED_BOOT_LEAST`` NodeClaims launched during the trace recorded a Ready."""
    waits = launched_boots(timeline)
    if len(waits) < LAUNCHED_BOOT_LEAST:
        return None
    low, high = waits[0], waits[-1]
    return low, (high if high > low else None)


def measured_boot(timeline: Mapping[str, Any]) -> float | None:
    """How long the real run's new nodes took (its ``timeline.json``): the median launch-to-Ready time of its
    NodeClaims where the timeline recorded their Ready; else, from an older timeline, how long they took to take
    pods (``measured_binding``). None when neither is there."""
    claims = timeline.get("nodeclaims") or []
    readies = sorted(float(n["ready"]) - float(n["launched"]) for n in claims if n.get("ready") is not None)
    if readies:
        return round(readies[len(readies) // 2], 1)
    return measured_binding(timeline)


def measured_binding(timeline: Mapping[str, Any]) -> float | None:
    """How long the real run's new nodes took to take pods (its ``timeline.json``): for each pod that waited for
    a node, from the first NodeClaim launched after the pod appeared to the pod's binding; the median. It is the
    launch, the node's start-up and kube-scheduler's binding, on the machine as loaded as it was (tens of seconds
    on a busy 2-core machine, KWOK's own 1-2 s idle). None when no pod waited for a launch. On the harness's cloud
    it was far shorter than the launch-to-Ready time while kube-scheduler could bind pods to a KWOK Node before its
    delayed Ready, which the not-ready taint now prevents (deploy/local/kubernetes.sh); for runs of that harness
    ``EBB_BENCH_CALIBRATE_BOOT=binding`` takes this one."""
    launches = sorted(float(n["launched"]) for n in timeline.get("nodeclaims") or [])
    waits: list[float] = []
    for pod in timeline.get("pods") or []:
        bound = pod.get("bound")
        if bound is None:
            continue
        after = next((t for t in launches if t >= float(pod["seen"])), None)
        if after is not None and after < float(bound):
            waits.append(float(bound) - after)
    if not waits:
        return None
    waits.sort()
    return round(waits[len(waits) // 2], 1)


# -- the figures (pure) ----------------------------------------------------------------------------------------------


def _by_method(method: str) -> str:
    """A disruption decision's kind: ``emptiness``, ``single`` or ``multi`` (consolidation), or its own name."""
    if "empt" in method:
        return "emptiness"
    if "single" in method:
        return "single"
    if "multi" in method:
        return "multi"
    return method


def real_figures(result: Mapping[str, Any]) -> Doc:
    """A real Karpenter run's figures over the whole run (``bench.peer``'s result, ``whole``: from the starting
    cluster's NodeClaims' creation to the end, the back-test's window): the cost with the starting cluster's, the
    NodeClaims launched after it (``launches_after_start``: the back-test's starting Nodes are no launch either),
    its decisions by kind from ``karpenter_voluntary_disruption_decisions_total`` (reason ``empty``: emptiness;
    ``underutilized``: by its ``consolidation_type``)."""
    whole = result["whole"]
    decisions: dict[str, float] = {}
    for key, value in (whole.get("counters") or {}).get("karpenter", {}).items():
        metric, _, rest = key.partition("{")
        if metric != "karpenter_voluntary_disruption_decisions_total":
            continue
        labels = dict(part.split("=", 1) for part in rest.rstrip("}").split(",") if "=" in part)
        labels = {k: v.strip('"') for k, v in labels.items()}
        reason, kind = labels.get("reason", ""), labels.get("consolidation_type", "")
        name = "emptiness" if reason == "empty" else kind if kind in ("single", "multi") else reason or "other"
        decisions[name] = decisions.get(name, 0) + value
    launches = result.get("launches_after_start", whole["launched"])
    return _figures(whole["cost"], launches, whole["deleted"], decisions, result["evictions"],
                    result["evicted_more_than_once"], whole["pending_pod_seconds"])


def backtest_figures(summary: Mapping[str, Any]) -> Doc:
    """A back-test run's figures (its ``summary``, over the whole run: the starting Nodes' cost from the start,
    launches without them)."""
    decisions: dict[str, float] = {}
    for method, n in summary["disruptions"].items():
        decisions[_by_method(method)] = decisions.get(_by_method(method), 0) + n
    return _figures(summary["node_hours_cost"], summary["launches"], summary["nodes_disrupted"], decisions,
                    summary["evictions"], summary["pods_evicted_more_than_once"], summary["pending_pod_seconds"])


def _figures(cost: float, launches: float, deleted: float, decisions: Mapping[str, float], evictions: float,
             evicted_twice: float, pending: float) -> Doc:
    return {"cost": round(float(cost), 4), "launches": launches, "deleted": deleted,
            "decisions": sum(decisions.values()), "emptiness": decisions.get("emptiness", 0),
            "single": decisions.get("single", 0), "multi": decisions.get("multi", 0),
            "other_decisions": {k: v for k, v in decisions.items() if k not in ("emptiness", "single", "multi")},
            "evictions": evictions, "evicted_twice": evicted_twice, "pending": round(float(pending), 1)}


def relative(value: float, reference: float) -> float | None:
    """``value`` against ``reference`` as a ratio (None when the reference is 0 and the value is not; 1 when both
    are)."""
    if reference == 0:
        return 1.0 if value == 0 else None
    return value / reference


def spreads(repeats: Sequence[Sequence[Mapping[str, Any]]]) -> dict[str, float]:
    """Per figure, how much the real runs of one seed moved: the largest (max - min) / mean over each group of
    repeated runs' figures (0 when a group's mean is 0)."""
    out: dict[str, float] = {}
    for group in repeats:
        if len(group) < 2:
            continue
        for key, _ in FIGURES:
            values = [float(f[key]) for f in group]
            mean = sum(values) / len(values)
            spread = (max(values) - min(values)) / mean if mean else 0.0
            out[key] = max(out.get(key, 0.0), spread)
    return out


@dataclass(frozen=True)
class Row:
    """One figure of one (trace, seed, side): the real run's and the back-test's, their ratio, and the verdict."""

    trace: str
    seed: int
    side: str
    figure: str
    real: float
    backtest: float
    ratio: float | None
    #: ``within 10%``, ``within the real spread (N%)`` or ``off``
    verdict: str


def compare(trace: str, seed: int, side: str, real: Mapping[str, Any], backtest: Mapping[str, Any],
            spread: Mapping[str, float], tolerance: float = TOLERANCE) -> list[Row]:
    """Each of ``FIGURES``: close when the back-test's is within ``tolerance`` of the real run's, or within the
    real runs' own spread for that figure (``spreads``); off otherwise. Two zeros are close; a zero against a
    non-zero is off unless the spread allows it."""
    rows: list[Row] = []
    for key, _ in FIGURES:
        r, b = float(real[key]), float(backtest[key])
        ratio = relative(b, r)
        off_by = abs(ratio - 1) if ratio is not None else float("inf")
        if off_by <= tolerance + 1e-9:
            verdict = f"within {tolerance:.0%}"
        elif off_by <= spread.get(key, 0.0) + 1e-9:
            verdict = f"within the real spread ({spread[key]:.0%})"
        else:
            verdict = "off"
        rows.append(Row(trace, seed, side, key, r, b, ratio, verdict))
    return rows


#: the gaps between two commands the cadence counts (`cadence`): Karpenter's loop looking again right after a command
#: and finding one (its 15 s validation and a second), and waiting out its 10 s poll first
CADENCE_BANDS: tuple[tuple[float, float], ...] = ((14.0, 17.0), (24.0, 27.0))


def cadence(runs: Iterable[Sequence[float]]) -> list[float]:
    """How far apart a side's commands come (pure): over every run's command moments (seconds), the count of gaps
    between two commands one after the other, then the share of them in each of ``CADENCE_BANDS``."""
    gaps = [b - a for moments in runs for a, b in pairwise(sorted(moments))]
    return [float(len(gaps)), *(sum(1 for g in gaps if low <= g <= high) / len(gaps) if gaps else 0.0
                                for low, high in CADENCE_BANDS)]


#: the real runs of one (trace, side, seed), their figures (``real_figures``) in the order they ran
Repeats = Mapping[tuple[str, str, int], Sequence[Mapping[str, Any]]]


def among(value: float, runs: Sequence[float], tolerance: float = TOLERANCE) -> bool:
    """Whether ``value`` lands among the real runs ``runs``: within ``tolerance`` of their range (from the lowest
    less ``tolerance`` to the highest plus it)."""
    return min(runs) * (1 - tolerance) - 1e-9 <= value <= max(runs) * (1 + tolerance) + 1e-9


def by_figure(rows: Sequence[Row], repeats: Repeats, tolerance: float = TOLERANCE) -> list[str]:
    """The tables summed up per figure (pure): how many cells are close, the back-test's ratios to the real run
    (lowest-highest), how many land among the seed's real runs (`among`; of the cells whose seed ran more than once)
    and how many of those seeds' real runs are within ``tolerance`` of each other (the second against the first):
    what the prose of docs/backtest.md reads instead of counting the tables by hand."""
    names = dict(FIGURES)
    lines = ["**By figure**, over the tables above: cells close; the back-test ÷ the real run, lowest-highest; "
             f"the back-test within {tolerance:.0%} of the range of the seed's real runs; the seed's real runs "
             f"within {tolerance:.0%} of each other.", "",
             "| figure | close | back-test ÷ real | among the real runs | real runs alike |", "|---|---|---|---|---|"]
    totals = [0, 0, 0, 0, 0]
    for key, _ in FIGURES:
        group = [r for r in rows if r.figure == key]
        close = sum(1 for r in group if r.verdict != "off")
        ratios = [r.ratio for r in group if r.ratio is not None]
        repeated = [(r, [float(f[key]) for f in repeats.get((r.trace, r.side, r.seed), ())]) for r in group]
        repeated = [(r, runs) for r, runs in repeated if len(runs) > 1]
        landed = sum(1 for r, runs in repeated if among(r.backtest, runs, tolerance))
        alike = 0
        for _, runs in repeated:
            ratio = relative(runs[1], runs[0])
            alike += ratio is not None and abs(ratio - 1) <= tolerance + 1e-9
        span = f"{min(ratios):.2f}-{max(ratios):.2f}" if ratios else "-"
        lines.append(f"| {names[key].lstrip('- ')} | {close} of {len(group)} | {span} | {landed} of {len(repeated)} "
                     f"| {alike} of {len(repeated)} |")
        for i, n in enumerate((close, len(group), landed, len(repeated), alike)):
            totals[i] += n
    lines.append(f"| all | {totals[0]} of {totals[1]} | | {totals[2]} of {totals[3]} | {totals[4]} of {totals[3]} |")
    return lines


def _cell(key: str, value: float) -> str:
    if key == "cost":
        return f"${value:,.3f}"
    return f"{value:,.0f}"


def _early_lines(early: Sequence[Sequence[Any]]) -> list[str]:
    """The sentence on the real runs in which kube-scheduler bound pods to a node before it was Ready (``early``:
    [side, trace, seed, run, pods bound early, pods bound to a node whose Ready was seen]); none when there were
    none."""
    bad = [e for e in early if e[4]]
    if not bad:
        return []
    each = "; ".join(f"{e[1]} seed {e[2]} {e[0]}{' (again)' if e[3] else ''}: {e[4]} of {e[5]}" for e in bad)
    return ["", f"Pods bound to a node before it was Ready (the not-ready taint missed them) in {len(bad)} of the "
            f"{len(early)} real runs: {each}."]


def _cadence_lines(found: Mapping[str, Sequence[float]] | None) -> list[str]:
    """The sentence on how far apart each side's commands come (``cadence``); none from an older JSON."""
    if not found or "real" not in found or "backtest" not in found:
        return []
    (low_a, high_a), (low_b, high_b) = CADENCE_BANDS
    real, sim = found["real"], found["backtest"]
    return ["", f"Cadence: of the {real[0]:.0f} gaps between two commands one after the other in the real runs, "
            f"{real[1]:.0%} are {low_a:.0f}-{high_a:.0f} s and {real[2]:.0%} {low_b:.0f}-{high_b:.0f} s; of the "
            f"back-test's {sim[0]:.0f}, {sim[1]:.0%} and {sim[2]:.0%}."]


def _repeated(repeat: int | Sequence[int]) -> str:
    """The seeds run twice, as the method's words say them (an older JSON names one seed)."""
    seeds = [repeat] if isinstance(repeat, int) else list(repeat)
    if len(seeds) == 1:
        return f"seed {seeds[0]}"
    return "seeds " + ", ".join(map(str, seeds[:-1])) + f" and {seeds[-1]} each"


def render(rows: Sequence[Row], spread: Mapping[str, Mapping[str, float]], meta: Mapping[str, Any],
           repeats: Repeats | None = None) -> list[str]:
    """The section of docs/backtest.md: how it was run, a table per (trace, side) with the seeds side by side
    (real / back-test / ratio and a mark where it is off), the real spread of the trace (``spread``: trace → figure
    → spread) and the count of figures close; with ``repeats`` (every real run's figures), the tables summed up
    per figure (`by_figure`)."""
    low = min(float(b[0]) for b in meta["boots"])
    high = max(float(b[1] if b[1] is not None else b[0]) for b in meta["boots"])
    booting = ("each node taking pods after the launch-to-binding time measured" if meta.get("boot") == "binding"
               else "each node Ready after a time drawn from the launch-to-Ready times recorded")
    binding = ("its pods bound to the first node that takes them" if meta.get("binding") == "first-fit"
               else "its pods bound where kube-scheduler's default scoring puts them")
    lines = [f"Real runs: Karpenter {peer.KARPENTER_VERSION}'s KWOK provider on the local control plane, trace size "
             f"`{meta['size']}` ({meta['describe']}), seeds {', '.join(map(str, meta['seeds']))}, "
             f"{meta['parallel']} control planes at once; {_repeated(meta['repeat'])} run twice on each trace for the "
             "real spread (the largest of their two runs' ranges over their mean, per figure and trace, which the "
             "table's sides share; the cells compare the first run). "
             f"Back-test: `ebb backtest`'s built-in policy of the same name from the real run's starting cluster, "
             f"its disruption held until the real run's began, spot and on-demand with spot-to-spot as the real "
             f"cloud, {booting} in the real run it replays ({low:.0f}-{high:.0f} s), {binding}. Both sides' "
             "figures cover the whole run, the starting cluster's cost included, its NodeClaims not counted as "
             "launches. "
             f"{meta['runs']} real runs, {meta['minutes']:.0f} minutes on {meta['machine']}"
             + (f", load average {meta['load']:.0f} on average over the runs" if meta.get("load") else "") + ".",
             *_early_lines(meta.get("early") or []), *_cadence_lines(meta.get("cadence")), "",
             "Each cell: real / back-test (back-test ÷ real); **bold** where the back-test is off by more than "
             f"{TOLERANCE:.0%} and more than the real runs' own spread.", ""]
    groups: dict[tuple[str, str], list[Row]] = {}
    for row in rows:
        groups.setdefault((row.trace, row.side), []).append(row)
    names = dict(FIGURES)
    for (trace, side), group in groups.items():
        seeds = sorted({r.seed for r in group})
        lines += [f"**{trace}, {side}**", "", "| figure | " + " | ".join(f"seed {s}" for s in seeds)
                  + " | real spread |", "|---|" + "---|" * (len(seeds) + 1)]
        for key, _ in FIGURES:
            cells = []
            for seed in seeds:
                row = next(r for r in group if r.seed == seed and r.figure == key)
                ratio = "-" if row.ratio is None else f"{row.ratio:.2f}"
                cell = f"{_cell(key, row.real)} / {_cell(key, row.backtest)} ({ratio})"
                cells.append(f"**{cell}**" if row.verdict == "off" else cell)
            lines.append(f"| {names[key]} | " + " | ".join(cells) + f" | {spread.get(trace, {}).get(key, 0.0):.0%} |")
        close = sum(1 for r in group if r.verdict != "off")
        lines += ["", f"{close} of {len(group)} figures close.", ""]
    if repeats is not None:
        lines += [*by_figure(rows, repeats), ""]
    return lines


def write_section(doc: str, lines: Sequence[str]) -> str:
    """``doc`` with ``lines`` between ``SECTION_START`` and ``SECTION_END`` and nothing else changed; a page without
    the markers gets them, and a "How close the back-test is to Karpenter" section, at its end."""
    block = SECTION_START + "\n\n" + "\n".join(lines).strip("\n") + "\n\n" + SECTION_END
    head, start, rest = doc.partition(SECTION_START)
    if not start:
        return doc.rstrip("\n") + "\n\n## How close the back-test is to Karpenter\n\n" + block + "\n"
    _, end, tail = rest.partition(SECTION_END)
    return head + block + (tail if end else "\n")


# -- the runs (I/O) --------------------------------------------------------------------------------------------------


def _env_list(name: str, default: str) -> list[str]:
    return [v.strip() for v in os.environ.get(name, default).split(",") if v.strip()]


#: what the back-test's boot time is taken from (``EBB_BENCH_CALIBRATE_BOOT``): ``ready``, the launch-to-Ready
#: times the real run recorded; ``binding``, how long its pods took to be bound to a new node (``measured_binding``)
BOOT_BASES = ("ready", "binding")


def _timeline(result: Mapping[str, Any]) -> Mapping[str, Any] | None:
    try:
        value: Mapping[str, Any] = json.loads((Path(result["out_dir"]) / "timeline.json").read_text())
    except (KeyError, OSError, ValueError):
        return None
    return value


def real_boot(result: Mapping[str, Any], basis: str = "ready") -> tuple[float, float | None]:
    """The back-test's boot time for a real run, ``(boot_seconds, boot_seconds_max)``: the range of launch-to-Ready
    times of the NodeClaims it launched during its trace (``launched_boot``), else of all it recorded
    (``recorded_boot``), else the median its timeline gives (``measured_boot``), else the range its cloud was set
    up with (``boot_seconds``). ``basis`` ``binding``: the launch-to-binding median of its timeline
    (``measured_binding``) first."""
    if basis not in BOOT_BASES:
        raise SystemExit(f"EBB_BENCH_CALIBRATE_BOOT={basis!r}: want one of {', '.join(BOOT_BASES)}")
    timeline = _timeline(result)
    if basis == "binding" and timeline is not None and (bound := measured_binding(timeline)) is not None:
        return bound, None
    launched = launched_boot(timeline) if timeline is not None else None
    if launched is not None:
        return launched
    recorded = recorded_boot(result)
    if recorded is not None:
        return recorded
    measured = measured_boot(timeline) if timeline is not None else None
    return (measured, None) if measured is not None else boot_seconds(result)


def real_boot_samples(result: Mapping[str, Any], basis: str = "ready") -> tuple[float, ...]:
    """The start-up times the back-test of a real run draws its nodes' from: on ``basis`` ``ready``, the launch-to-Ready
    times of the NodeClaims the real run launched during its trace (``launched_boots``), when at least
    ``LAUNCHED_BOOT_LEAST`` recorded one; else none, and ``real_boot``'s range is drawn from uniformly. The measured
    times, not their range: on the loaded machine a run's start-ups are mostly 35-95 s with one or two of 120-180 s,
    and a uniform draw over the range made the slow ones as likely as the rest (a mean start-up half as long again
    as the real run's, and pending pod-seconds up to twice its)."""
    timeline = _timeline(result) if basis == "ready" else None
    waits = launched_boots(timeline) if timeline is not None else ()
    return waits if len(waits) >= LAUNCHED_BOOT_LEAST else ()


def run_real(side: str, kind: str, seed: int, size: str) -> Doc:
    """One real run: ``python -m bench _case peer SIDE`` with the trace's seed, kind and size in its environment."""
    env = {**os.environ, "PYTHONHASHSEED": "0", "EBB_BENCH_PEER_SEED": str(seed), "EBB_BENCH_PEER_TRACE": kind,
           "EBB_BENCH_PEER_SIZE": size}
    env.pop("EBB_BENCH_PEER", None)
    out = subprocess.run([sys.executable, "-m", "bench", "_case", "peer", side], stdout=subprocess.PIPE, text=True,
                         check=False, env=env, cwd=REPO_ROOT)
    if out.returncode != 0:
        raise SystemExit(f"the real run {side} {kind} seed {seed} failed (exit {out.returncode})")
    value: Doc = json.loads(out.stdout.strip().splitlines()[-1])
    return value


def run_real_jobs(jobs: Sequence[tuple[str, str, int, int]], size: str, parallel: int,
                  out: Path) -> dict[tuple[str, str, int, int], Doc]:
    """The real runs, ``parallel`` at once; each result is written to ``out`` as soon as it is in (the JSON
    ``EBB_BENCH_CALIBRATE_REUSE`` reads, so a calibration stopped half-way keeps what it measured), and a run that
    fails is reported and left out rather than ending the others."""
    started = time.monotonic()
    real: dict[tuple[str, str, int, int], Doc] = {}
    out.parent.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(max(1, parallel)) as pool:
        futures = {pool.submit(run_real, job[0], job[1], job[2], size): job for job in jobs}
        for future in as_completed(futures):
            job = futures[future]
            try:
                real[job] = future.result()
            except (SystemExit, Exception) as e:  # one failed run must not lose the others
                print(f"calibrate: {' '.join(map(str, job))}: {e}", file=sys.stderr)
                continue
            minutes = (time.monotonic() - started) / 60
            print(f"calibrate: real run {' '.join(map(str, job))} done ({len(real)} of {len(jobs)}, "
                  f"{minutes:.0f} min)", file=sys.stderr)
            out.write_text(json.dumps({"meta": {"minutes": minutes},
                                       "real": [{"job": list(j), "result": r} for j, r in real.items()]}, indent=1))
    return real


def simulation_of(result: Mapping[str, Any], side: peer.Side, types: Sequence[Mapping[str, Any]],
                  boot: str = "ready", binding: str = "scored") -> tuple[list[Doc], Doc, Policy, BacktestOptions]:
    """What the back-test of a real run runs (pure): the starting documents (the side's NodePool with the cloud's
    capacity types, the catalog, the starting cluster's Nodes), the trace converted (the services created when the
    real run created them, the rest shifted to where its scale up ended), the side's built-in policy held until
    then (``held_until``, the real run's budget "0"), and the options: as long as the real run lasted, its seed,
    its cloud's boot times (``real_boot`` on ``boot``) and spot-to-spot; ``binding``, how its simulated
    kube-scheduler picks a node (kube-scheduler's default scoring unless told)."""
    from ebb_embedded.backtest import BUILTIN_POLICIES, BacktestOptions

    cloud = real_cloud(result)
    nodes = starting_nodes(result, side, types)
    documents = starting_documents(side, types, nodes, cloud.capacity_types)
    trace = ebb_trace(real_trace(result), services_at=services_created(result))
    policy = BUILTIN_POLICIES[side.backtest_policy or "karpenter-default"]()
    if isinstance(result.get("start"), Mapping):
        policy = held_until(policy, disruption_start(result))
    low, high = real_boot(result, boot)
    options = BacktestOptions(start=START, duration=timedelta(seconds=float(result["end"])),
                              seed=int(result["trace"]["seed"]), boot_seconds=low, boot_seconds_max=high,
                              boot_samples=real_boot_samples(result, boot), spot_to_spot=cloud.spot_to_spot,
                              binding=binding)
    return documents, trace, policy, options


def run_simulated(result: Mapping[str, Any], side: peer.Side, types: Sequence[Mapping[str, Any]],
                  boot: str = "ready", binding: str = "scored") -> tuple[Doc, list[float]]:
    """The back-test of a real run (``simulation_of``): the policy's summary, and the moments of its disrupting
    decisions in seconds from the start (every one of them: ``top_decisions`` set past what a run makes)."""
    from ebb.adapters.logs import configure
    from ebb.core.traces import Trace
    from ebb_embedded.backtest import run_policy

    configure("error")  # the services' logs: errors only, on stderr (as `ebb backtest` by default)
    documents, trace, policy, options = simulation_of(result, side, types, boot, binding)
    run = run_policy(documents, Trace.model_validate(trace), policy, replace(options, top_decisions=100_000))
    moments = sorted((datetime.fromisoformat(str(d["at"]).replace("Z", "+00:00")) - START).total_seconds()
                     for d in run["decisions"])
    summary: Doc = run["summary"]
    return summary, moments


def run() -> list[str]:
    """The calibration: the real runs (``PARALLEL`` at once), their back-tests, the comparison; the section's
    lines. The JSON goes to ``EBB_BENCH_CALIBRATE_OUT``."""
    import platform

    seeds = [int(s) for s in _env_list("EBB_BENCH_CALIBRATE_SEEDS", "1,2,3")]
    kinds = _env_list("EBB_BENCH_CALIBRATE_TRACES", ",".join(peer.TRACE_KINDS))
    sides = _env_list("EBB_BENCH_CALIBRATE_SIDES", "karpenter-default")
    size = os.environ.get("EBB_BENCH_PEER_SIZE", "short")
    parallel = int(os.environ.get("EBB_BENCH_CALIBRATE_PARALLEL", str(PARALLEL)))
    repeat = [int(s) for s in _env_list("EBB_BENCH_CALIBRATE_REPEAT", str(seeds[0]))]
    boot = os.environ.get("EBB_BENCH_CALIBRATE_BOOT", "ready")
    binding = os.environ.get("EBB_BENCH_CALIBRATE_BINDING", "scored")
    out = Path(os.environ.get("EBB_BENCH_CALIBRATE_OUT", str(REPO_ROOT / ".artifacts" / "calibrate.json")))
    started = time.monotonic()
    jobs = [(side, kind, seed, n) for kind in kinds for seed in seeds for side in sides
            for n in range(2 if seed in repeat else 1)]
    reuse = os.environ.get("EBB_BENCH_CALIBRATE_REUSE", "")
    if reuse:  # one or more earlier JSONs (comma-separated); the jobs none of them ran are left out
        real = {tuple(r["job"]): r["result"] for path in reuse.split(",") if path.strip()
                for r in json.loads(Path(path.strip()).read_text())["real"]}
        minutes = sum(float(json.loads(Path(path.strip()).read_text()).get("meta", {}).get("minutes", 0.0))
                      for path in reuse.split(",") if path.strip())
        missing = [job for job in jobs if job not in real]
        if missing and os.environ.get("EBB_BENCH_CALIBRATE_MORE") == "1":
            real |= run_real_jobs(missing, size, parallel, out)
            minutes += (time.monotonic() - started) / 60
        jobs = [job for job in jobs if job in real]
    else:
        real = run_real_jobs(jobs, size, parallel, out)
        jobs = [job for job in jobs if job in real]
        if not real:
            raise SystemExit("calibrate: no real run finished")
        minutes = (time.monotonic() - started) / 60
    types = json.loads(peer.kwok_instance_types_path().read_text())
    figures = {job: real_figures(result) for job, result in real.items()}
    # every real run's figures by (trace, side, seed), in the order they ran: the real spread and `by_figure` read them
    repeats: dict[tuple[str, str, int], list[Doc]] = {}
    for side_key, kind, seed, n in sorted(figures):
        repeats.setdefault((kind, side_key, seed), []).append(figures[(side_key, kind, seed, n)])
    spread = {kind: spreads([repeats.get((kind, side, seed), []) for side in sides for seed in seeds])
              for kind in kinds}
    rows: list[Row] = []
    simulated: list[Doc] = []
    for side_key, kind, seed, n in jobs:
        if n:
            continue
        result = real[(side_key, kind, seed, n)]
        summary, moments = run_simulated(result, peer.SIDES[side_key], types, boot, binding)
        simulated.append({"job": [side_key, kind, seed], "summary": summary, "commands": moments})
        rows += compare(kind, seed, side_key, figures[(side_key, kind, seed, n)], backtest_figures(summary),
                        spread[kind])
    first = next(iter(real.values()))
    meta = {"size": size, "seeds": seeds, "parallel": parallel, "repeat": repeat, "runs": len(real),
            "minutes": minutes, "boots": sorted(real_boot(r, boot) for r in real.values()), "boot": boot,
            "binding": binding,
            "machine": f"{os.cpu_count()} cores ({platform.machine()})",
            "load": sum(float((r.get("load_average") or {}).get("mean") or 0.0) for r in real.values()) / len(real),
            "early": [[*job, int(bound.get("early") or 0), int(bound.get("pods") or 0)]
                      for job, r in real.items()
                      if isinstance(bound := (r.get("cloud") or {}).get("bound_after_ready"), Mapping)],
            "describe": f"{first['trace']['peak_pods']} pods at the peak",
            "cadence": {"real": cadence([float(c["t"]) for c in r.get("karpenter_commands") or []]
                                        for r in real.values()),
                        "backtest": cadence(s["commands"] for s in simulated)}}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"meta": meta, "spread": spread,
                               "real": [{"job": list(j), "result": r} for j, r in real.items()],
                               "simulated": simulated, "rows": [r.__dict__ for r in rows]}, indent=1))
    print(f"calibrate: {len(real)} real runs in {minutes:.0f} min; JSON in {out}", file=sys.stderr)
    return render(rows, spread, meta, repeats)
