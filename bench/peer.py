"""Side by side with the real Karpenter (``python -m bench peer``): one seeded workload trace on the local
control plane (kube-apiserver, kube-scheduler, KWOK) with Karpenter's KWOK provider launching the nodes, every side
once per seed, each run on a fresh control plane:

- ``karpenter-default`` and ``karpenter-balanced``: Karpenter alone, its own consolidation at its defaults
  (``WhenEmptyOrUnderutilized``, ``consolidateAfter`` 0s, budget 10%), then with ``consolidationPolicy: Balanced``:
  the sides ``python -m bench calibrate`` (bench/calibrate.py) compares with the back-test's built-in policies of the
  same names;
- ``ebb-default`` and ``ebb-recommended``: Karpenter with its voluntary disruption off (the NodePool's budgets
  ``nodes: "0"``; it still provisions for pending pods and terminates the NodeClaims someone deletes) and ebb's
  services as processes on Kafka and PostgreSQL: the cluster-watcher, the consolidation-planner and the
  termination-executor with its ``karpenter`` provider (replacements are NodeClaims, a retired node is drained and
  its NodeClaim deleted), with a DisruptionPolicy at ebb's defaults, then the one docs/karpenter.md recommends;
- ``karpenter-0s``, ``karpenter-30s`` and ``ebb``: budget 100%, for comparisons at other settings;
- ``shadow``: no side of the comparison but an adoption trial (docs/adopting.md's step 3): Karpenter at its defaults
  still disrupting, ebb beside it in shadow mode with the recommended policy and its decisions-api, ``ebb record``
  from the start of the disruption phase and ``ebb shadow report`` at the end (``ShadowTrial``); the ``hour`` size
  makes it a trial of an hour and more.

The cloud (``Cloud``): nodes Ready 30-90 s after they appear (KWOK's node Stage delayed by deploy/local/
kubernetes.sh), spot and on-demand offerings, spot-to-spot consolidation on (Karpenter's feature gate, ebb's
planner's setting). Every run of a seed starts its disruption phase from the same cluster: the NodeClaims of
``starting_cluster`` created and Ready before the services scale up, nobody's voluntary disruption on until every
pod runs; then the side's disruption starts (``run_trace``).

The runs go in rounds, one per seed (``schedule``), the runs of a round at once on separate control planes
(``run_sides`` says why), and the report (``render``) gives every headline figure as mean [min-max] over the seeds.

The trace (``make_trace``, the same seed on every side): Deployments of mixed requests, some with hostname
anti-affinity, some spread over zones, two PodDisruptionBudgets; scaled up to the peak, then down in steps;
then bursts of short jobs, the pattern of the reference article on Karpenter's node churn (jobs that need
whole nodes, gone after a short run, then the next burst). KWOK's pod stages on the local control plane
complete a Job's pods the moment they run, so a job here is a Deployment the driver deletes after its run
time: the same pods, the same resource demand, replaced by their ReplicaSet when evicted (as a Job's pods are
by the Job controller).

What is measured, and how (the pure half, ``Timeline`` and the functions under it, is unit-tested in
tests/benchmarks/test_bench_peer.py):

- every NodeClaim's life from its watch events: launched (first seen), deleting (deletionTimestamp), gone,
  priced at its instance type's price for its capacity type and zone in Karpenter's own instance types (the
  same file ebb's catalog is converted from); when its Ready condition came (the cloud's start-up time).
  Cost = Σ price * time alive (node-hours), the cost rate at a moment = Σ prices of the NodeClaims alive then;
- churn: NodeClaims launched (the starting cluster's apart) and deleted (counted when their deletion starts);
- pods: pending (no node) from first seen to bound or deleted; evicted when the API server marks them
  ``DisruptionTarget`` / ``EvictionByEvictionAPI`` (the Eviction API, which both Karpenter and ebb use), so one
  measure serves both sides. "Evicted more than once": an evicted pod's replacement (the next pod its
  ReplicaSet creates) inherits its lineage; a lineage evicted twice or more counts once;
- settled: no NodeClaim launched, deleting or gone, no eviction, no pending pod for ``QUIET`` seconds; the
  time to settle after a step is from the step to the last such activity before that quiet stretch;
- Karpenter's own counters from its /metrics (``karpenter_voluntary_disruption_decisions_total``,
  ``karpenter_nodeclaims_created_total``, ...), scraped at every phase boundary, and on the ebb side ebb's
  (``ebb_voluntary_disruption_decisions_total``, ``ebb_pods_eviction_requests_total``, ...);
- running cost (``RunningCost``): CPU-seconds and RSS of Karpenter's process, and on ebb's sides of ebb's
  services, Kafka and PostgreSQL (process trees, from /proc), sampled every 10 s while the trace plays.

Servers: each run gets its own control plane (deploy/local/kubernetes.sh in a private ``EBB_INFRA_DIR``:
a fresh etcd, so nothing of the previous run remains) and Karpenter (deploy/local/karpenter.sh); an ebb run
uses Kafka and PostgreSQL as ``bench.load`` finds or starts them.

``python -m bench peer --smoke`` (or ``EBB_BENCH_PEER=smoke``, which the flag sets for the sides' processes) runs
a tiny, short trace on one Karpenter side and one ebb side at once, each on its control plane (``SMOKE``,
``SMOKE_SIDES``): a check that the machinery works, in a few minutes; its figures mean nothing.
tests/integration/test_bench_peer_smoke.py runs it, so the harness cannot rot unnoticed.

A second trace, ``diurnal`` (``make_trace(kind="diurnal")``): the same services scaled smoothly down to a night and
back up over a compressed day, a few jobs at the night's low. ``SHORT`` is a shortened size (about ten minutes a
side) for runs that must fit many sides and seeds.

Environment: ``EBB_BENCH_PEER_SIDES=karpenter-default,ebb-default`` chooses the sides, ``EBB_BENCH_PEER_SEEDS=1,2,3``
the seeds, ``EBB_BENCH_PEER_TRACE`` (``bursty``, the default, or ``diurnal``) and ``EBB_BENCH_PEER_SIZE``
(``full``, the default, ``short``, ``smoke`` or ``hour``) the trace (``EBB_BENCH_PEER_SEED``: the seed of a single
run, as ``bench calibrate`` starts them), ``EBB_BENCH_PEER_AT_ONCE=1`` runs a round's runs one at a time,
``EBB_BENCH_PEER_NODE_READY=30-90`` the nodes' start-up time; ``EBB_BENCH_PEER_RESULTS=FILE`` writes every run's
result there as JSON (what the smoke's test reads).
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import json
import math
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from bench.generators import REPO_ROOT

Doc = dict[str, Any]

SEED = 1
NAMESPACE = "peer"
NODEPOOL = "default"
ZONES = ("test-zone-a", "test-zone-b", "test-zone-c", "test-zone-d")
#: the instance sizes the NodePool may launch (vCPUs; families c, s, m: 2, 4, 8 GiB per vCPU)
SIZES = ("2", "4", "8")
#: no activity this long: settled
QUIET = 30.0
KARPENTER_VERSION = "v1.14.1"
LABEL_INSTANCE_TYPE = "node.kubernetes.io/instance-type"
LABEL_CAPACITY_TYPE = "karpenter.sh/capacity-type"
LABEL_ZONE = "topology.kubernetes.io/zone"
#: the taint a kubelet registers its Node with, and the node lifecycle controller removes once it is Ready
TAINT_NOT_READY = "node.kubernetes.io/not-ready"
#: the taint a kubelet under an external cloud provider registers its Node with, which the cloud's controller removes
#: once it initialized the node: here the NodePool's startup taint, which KWOK removes once the Node is Ready
TAINT_UNINITIALIZED = "node.cloudprovider.kubernetes.io/uninitialized"
#: how the starting cluster's NodeClaims are named (then a number)
START_PREFIX = "start-"


def _log(message: str) -> None:
    print(f"[peer {datetime.now(UTC):%H:%M:%S}] {message}", file=sys.stderr, flush=True)


# -- the trace: what is applied when (pure, seeded) -----------------------------------------------------------------


Spread = Literal["none", "hostname", "zone"]


@dataclass(frozen=True)
class Service:
    """One long-running Deployment. ``spread``: ``hostname`` is a required pod anti-affinity on its own pods
    (one replica per node), ``zone`` a topology spread over zones (maxSkew 1, DoNotSchedule)."""

    name: str
    peak: int
    cpu_m: int
    mem_mib: int
    spread: Spread
    #: a PodDisruptionBudget's spec fields (maxUnavailable or minAvailable), or None
    pdb: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class Job:
    """A short job: ``replicas`` pods that each need a good part of a node, from ``start`` for ``seconds``."""

    name: str
    replicas: int
    cpu_m: int
    mem_mib: int
    start: float
    seconds: float


@dataclass(frozen=True)
class Phase:
    """A stretch of the trace: ``up`` (scale to the peak), ``down`` (a scale-down step), ``bursty`` (it ends
    ``Trace.tail`` seconds after the last job). Every side has the same fixed windows, so their figures compare."""

    name: str
    kind: Literal["up", "down", "bursty"]
    start: float
    end: float
    #: the services' replicas as a share of their peak during the phase
    share: float


@dataclass(frozen=True)
class Action:
    """One call the driver makes at ``at`` seconds: create or scale a service, create or delete a job."""

    at: float
    verb: Literal["create-service", "scale", "create-job", "delete-job"]
    name: str
    replicas: int = 0


@dataclass(frozen=True)
class Trace:
    seed: int
    services: tuple[Service, ...]
    jobs: tuple[Job, ...]
    phases: tuple[Phase, ...]
    #: the bursty phase lasts this long after the last job ends
    tail: float
    #: the scale up lasts at most this long
    up_cap: float = 600.0
    #: and at least this long
    up_least: float = 150.0
    #: which trace (`TRACE_KINDS`): ``bursty`` (down in steps, then bursts of jobs) or ``diurnal``
    kind: str = "bursty"

    def replicas(self, service: Service, share: float) -> int:
        return max(1, math.ceil(service.peak * share))

    def actions(self) -> list[Action]:
        """Every call of the trace, in time order (ties: services before jobs, creations before deletions)."""
        out: list[Action] = []
        for phase in self.phases:
            if phase.kind == "up":
                out += [Action(phase.start, "create-service", s.name, self.replicas(s, phase.share))
                        for s in self.services]
            elif phase.kind == "down":
                out += [Action(phase.start, "scale", s.name, self.replicas(s, phase.share)) for s in self.services]
        for job in self.jobs:
            out.append(Action(job.start, "create-job", job.name, job.replicas))
            out.append(Action(job.start + job.seconds, "delete-job", job.name))
        order = {"create-service": 0, "scale": 1, "create-job": 2, "delete-job": 3}
        return sorted(out, key=lambda a: (a.at, order[a.verb], a.name))

    def shifted(self, up_end: float) -> Trace:
        """The trace with the scale up ending at ``up_end`` instead (it lasts until every pod runs, which takes
        longer on a loaded machine) and everything after it moved by as much, so every later phase keeps its
        length on every side."""
        from dataclasses import replace

        offset = up_end - next(p.end for p in self.phases if p.kind == "up")
        phases = tuple(replace(p, end=p.end + offset) if p.kind == "up" else
                       replace(p, start=p.start + offset, end=p.end + offset) for p in self.phases)
        jobs = tuple(replace(j, start=j.start + offset) for j in self.jobs)
        return replace(self, phases=phases, jobs=jobs)

    @property
    def bursty(self) -> Phase:
        return next(p for p in self.phases if p.kind == "bursty")

    @property
    def last_job_end(self) -> float:
        return max((j.start + j.seconds for j in self.jobs), default=self.bursty.start)

    def peak_requests(self) -> tuple[int, int, int]:
        """(pods, CPU millicores, memory MiB) of the services at their peak."""
        return (sum(s.peak for s in self.services), sum(s.peak * s.cpu_m for s in self.services),
                sum(s.peak * s.mem_mib for s in self.services))


@dataclass(frozen=True)
class TraceSize:
    """How big and how long: ``scale`` multiplies the replicas, the rest are seconds and counts."""

    scale: float = 1.5
    #: the scale up lasts at least this long, and until every pod has been running for ``UP_SETTLED`` seconds
    up_seconds: float = 150.0
    #: but no longer than this
    up_cap: float = 600.0
    step_seconds: float = 240.0
    steps: tuple[float, ...] = (0.6, 0.35, 0.2)
    bursts: int = 5
    burst_period: float = 70.0
    jobs_per_burst: tuple[int, int] = (4, 7)
    job_seconds: tuple[float, float] = (25.0, 45.0)
    tail: float = 240.0
    #: the diurnal trace: the compressed day's steps (the services' share of their peak follows a day's load,
    #: ``diurnal_shares``), each ``diurnal_step_seconds`` long, and its lowest share (the night)
    diurnal_steps: int = 12
    diurnal_step_seconds: float = 90.0
    diurnal_low: float = 0.35


FULL = TraceSize()
#: the smoke's: a tenth of the pods (about 50), one step down to 30% long enough for Karpenter's and ebb's 10 s
#: pass and 15 s validation to start disrupting, one burst of two short jobs, and a tail long enough for a
#: disruption decided near the end to finish: a replace waits for its replacement's start-up (``SMOKE_CLOUD``, up
#: to 15 s) before it deletes anything, and a loaded machine stretches every step (with a 30 s tail, the real
#: Karpenter's one replace of a run here had launched but not yet deleted when the trace ended)
SMOKE = TraceSize(scale=0.1, up_seconds=20, up_cap=60, step_seconds=30, steps=(0.3,), bursts=1, burst_period=30,
                  jobs_per_burst=(2, 2), job_seconds=(10, 15), tail=85, diurnal_steps=3, diurnal_step_seconds=30)
#: the calibration's (``python -m bench calibrate``) and a repeated side by side's: about 40% of the pods, two
#: steps down of two minutes (long enough for several of Karpenter's 10 s passes and 15 s validations after
#: each), three bursts; a diurnal day of eight 50 s steps. About 10 minutes a side instead of 25-30, so that
#: 3 seeds x 2 traces and a repeat fit in an hour with two control planes at once
SHORT = TraceSize(scale=0.4, up_seconds=60, up_cap=300, step_seconds=120, steps=(0.5, 0.25), bursts=3,
                  burst_period=60, jobs_per_burst=(3, 5), job_seconds=(20, 40), tail=120, diurnal_steps=8,
                  diurnal_step_seconds=50, diurnal_low=0.35)
#: a shadow trial's (``EBB_BENCH_PEER_SIDES=shadow``): over an hour of real time at 60% of the full size's pods:
#: three steps down of nine minutes, then twelve bursts of two and a half minutes, a five-minute tail
HOUR = TraceSize(scale=0.6, up_seconds=120, up_cap=600, step_seconds=540, steps=(0.6, 0.35, 0.2), bursts=12,
                 burst_period=150, tail=300)
SIZES_BY_NAME = {"full": FULL, "short": SHORT, "smoke": SMOKE, "hour": HOUR}
#: the traces ``make_trace`` makes
TRACE_KINDS = ("bursty", "diurnal")


def diurnal_shares(steps: int, low: float) -> tuple[float, ...]:
    """A compressed day's load, one share of the peak per step: from the peak (the afternoon) down to ``low``
    (the night) and back up, a cosine, the last step one before the peak again (so the day ends still rising,
    as the next day's morning)."""
    return tuple(round(low + (1 - low) * (1 + math.cos(2 * math.pi * (n + 1) / (steps + 1))) / 2, 3)
                 for n in range(steps))


def make_trace(seed: int = SEED, size: TraceSize = FULL, kind: str = "bursty") -> Trace:
    """The workload trace: 16 services (4 with hostname anti-affinity, 4 spread over zones, 8 without either;
    PDBs on two), scaled to the peak, then

    - ``bursty``: down in ``size.steps``, then ``size.bursts`` bursts of jobs whose pods need half or nearly all
      of a 4- or 8-vCPU node;
    - ``diurnal``: a compressed day, the services scaled smoothly down to the night's ``size.diurnal_low`` of
      their peak and back up (``diurnal_shares``, a step every ``size.diurnal_step_seconds``), and one small
      burst of jobs at the night's low.

    The services are the same for a seed whatever the kind. Deterministic for a seed, size and kind."""
    if kind not in TRACE_KINDS:
        raise ValueError(f"unknown trace kind {kind!r} (known: {', '.join(TRACE_KINDS)})")
    rng = random.Random(seed)
    services: list[Service] = []
    for i in range(16):
        spread: Spread = "hostname" if i < 4 else "zone" if i < 8 else "none"
        if spread == "hostname":
            peak, cpu = rng.randint(14, 26), rng.choice((500, 1000, 1500))
            mem = rng.choice((512, 1024, 2048))
        elif spread == "zone":
            peak, cpu = rng.randint(24, 44), rng.choice((250, 500, 1000, 2000))
            mem = rng.choice((256, 512, 1024, 2048, 4096))
        else:
            peak, cpu = rng.randint(30, 64), rng.choice((250, 500, 750, 1000, 1500, 2000))
            mem = rng.choice((256, 512, 1024, 2048, 3072, 4096))
        pdb: Mapping[str, Any] | None = None
        if i == 4:
            pdb = {"maxUnavailable": 1}
        elif i == 9:
            pdb = {"minAvailable": "80%"}
        services.append(Service(f"svc-{i:02d}-{spread}", max(1, round(peak * size.scale)), cpu, mem, spread, pdb))
    phases = [Phase("scale up", "up", 0.0, size.up_seconds, 1.0)]  # extended at run time: Trace.shifted
    if kind == "diurnal":
        return _diurnal(seed, tuple(services), phases, size, rng)
    at = size.up_seconds
    for n, share in enumerate(size.steps, 1):
        phases.append(Phase(f"scale down {n} (to {share:.0%})", "down", at, at + size.step_seconds, share))
        at += size.step_seconds
    bursty_start = at
    jobs: list[Job] = []
    for b in range(size.bursts):
        start = bursty_start + b * size.burst_period
        for j in range(rng.randint(*size.jobs_per_burst)):
            cpu = rng.choice((3500, 3500, 7500))
            jobs.append(Job(f"job-{b}-{j}", rng.randint(1, 3), cpu, rng.choice((1024, 2048, 4096)), start,
                            round(rng.uniform(*size.job_seconds), 1)))
    last_end = max((j.start + j.seconds for j in jobs), default=bursty_start)
    phases.append(Phase(f"bursts of jobs ({size.bursts})", "bursty", bursty_start, last_end + size.tail,
                        size.steps[-1] if size.steps else 1.0))
    return Trace(seed, tuple(services), tuple(jobs), tuple(phases), size.tail, size.up_cap, size.up_seconds)


def _diurnal(seed: int, services: tuple[Service, ...], phases: list[Phase], size: TraceSize,
             rng: random.Random) -> Trace:
    """The diurnal trace after its scale up: a step per share of ``diurnal_shares`` (a phase of kind ``down``
    whether the share falls or rises: the services are scaled at its start), then one burst of two or three
    jobs at the night's low, and the tail."""
    shares = diurnal_shares(size.diurnal_steps, size.diurnal_low)
    at = size.up_seconds
    for n, share in enumerate(shares, 1):
        phases.append(Phase(f"day step {n} (to {share:.0%})", "down", at, at + size.diurnal_step_seconds, share))
        at += size.diurnal_step_seconds
    night = size.up_seconds + shares.index(min(shares)) * size.diurnal_step_seconds
    jobs = [Job(f"job-0-{j}", rng.randint(1, 2), rng.choice((3500, 7500)), rng.choice((1024, 2048, 4096)), night,
                round(rng.uniform(*size.job_seconds), 1)) for j in range(rng.randint(2, 3))]
    last_end = max(at, *(j.start + j.seconds for j in jobs))
    phases.append(Phase("end of the day", "bursty", at, last_end + size.tail, shares[-1]))
    return Trace(seed, services, tuple(jobs), tuple(phases), size.tail, size.up_cap, size.up_seconds, "diurnal")


# -- the objects the driver applies --------------------------------------------------------------------------------


def _pod_template(app: str, cpu_m: int, mem_mib: int, role: str, spread: Spread) -> Doc:
    spec: Doc = {
        "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "main", "image": "registry.example/app:1",
                        "resources": {"requests": {"cpu": f"{cpu_m}m", "memory": f"{mem_mib}Mi"}}}],
    }
    if spread == "hostname":
        spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": "kubernetes.io/hostname"}]}}
    elif spread == "zone":
        spec["topologySpreadConstraints"] = [{"maxSkew": 1, "topologyKey": LABEL_ZONE,
                                              "whenUnsatisfiable": "DoNotSchedule",
                                              "labelSelector": {"matchLabels": {"app": app}}}]
    return {"metadata": {"labels": {"app": app, "role": role}}, "spec": spec}


def deployment(name: str, replicas: int, cpu_m: int, mem_mib: int, role: str, spread: Spread = "none") -> Doc:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"app": name, "role": role}},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": _pod_template(name, cpu_m, mem_mib, role, spread)}}


def service_objects(service: Service, replicas: int) -> list[Doc]:
    objects = [deployment(service.name, replicas, service.cpu_m, service.mem_mib, "service", service.spread)]
    if service.pdb is not None:
        objects.append({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                        "metadata": {"name": service.name, "namespace": NAMESPACE},
                        "spec": {**service.pdb, "selector": {"matchLabels": {"app": service.name}}}})
    return objects


def nodepool(consolidate_after: str, budget_nodes: str, consolidation_policy: str = "WhenEmptyOrUnderutilized",
             capacity_types: Sequence[str] = ("on-demand",), startup_taints: Sequence[Doc] = ()) -> Doc:
    """The one NodePool: amd64, linux, ``capacity_types`` (the cloud's: ``Cloud.capacity_types``), sizes ``SIZES``
    of every family, ``consolidation_policy``, ``consolidateAfter``, budgets ``budget_nodes`` and, when given, the
    template's ``startup_taints`` (``Cloud.startup_taints``)."""
    template: Doc = {
        "requirements": [
            {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
            {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
            {"key": LABEL_CAPACITY_TYPE, "operator": "In", "values": list(capacity_types)},
            {"key": "karpenter.kwok.sh/instance-cpu", "operator": "In", "values": list(SIZES)},
        ],
        "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"},
        "expireAfter": "Never",
    }
    if startup_taints:
        template["startupTaints"] = [dict(t) for t in startup_taints]
    return {
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": NODEPOOL},
        "spec": {
            "template": {"spec": template},
            "limits": {"cpu": 100000},
            "disruption": {"consolidationPolicy": consolidation_policy, "consolidateAfter": consolidate_after,
                           "budgets": [{"nodes": budget_nodes}]},
        },
    }


# -- prices: Karpenter's KWOK instance types ------------------------------------------------------------------------


def kwok_instance_types_path() -> Path:
    """Karpenter's KWOK provider's default instance types, in the Go module cache (Go where deploy/local/lib.sh
    finds it: on the PATH, else /usr/local/go/bin). A machine that has not built Karpenter yet
    (``deploy/local/karpenter.sh install``) downloads the module first (``go mod download``, a few seconds); where
    that fails, SystemExit says what to do."""
    go = shutil.which("go") or "/usr/local/go/bin/go"
    env = {**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=mod"}
    module = f"sigs.k8s.io/karpenter@{KARPENTER_VERSION}"
    inside = Path("kwok/cloudprovider/instance_types.json")
    try:
        gomodcache = subprocess.run([go, "env", "GOMODCACHE"], capture_output=True, text=True, check=True,
                                    env=env).stdout.strip()
        path = Path(gomodcache) / module / inside
        if path.is_file():
            return path
        # outside any Go module, from a fresh folder: the download needs no go.mod of ours
        with tempfile.TemporaryDirectory() as empty:
            done = subprocess.run([go, "mod", "download", "-json", module], capture_output=True, text=True,
                                  env=env, cwd=empty, check=False)
        found = json.loads(done.stdout or "{}")
        path = Path(str(found.get("Dir", ""))) / inside
        if done.returncode == 0 and found.get("Dir") and path.is_file():
            return path
        why = str(found.get("Error") or done.stderr.strip() or f"go mod download exited {done.returncode}")[-300:]
    except (OSError, subprocess.CalledProcessError, ValueError) as e:
        why = str(e)
    raise SystemExit(f"Karpenter's KWOK instance types ({module}, {inside}) are not in the Go module cache and "
                     f"could not be downloaded: {why}. Run deploy/local/karpenter.sh install (docs/infrastructure.md), "
                     "or put Go on the PATH with the Go module proxy reachable.")


def price_table(instance_types: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str, str], float]:
    """(instance type, capacity type, zone) → price per hour, from Karpenter's KWOK instance types."""
    table: dict[tuple[str, str, str], float] = {}
    for it in instance_types:
        for offering in it.get("offerings") or []:
            reqs = {r.get("key"): list(r.get("values") or []) for r in offering.get("Requirements") or []}
            for capacity in reqs.get(LABEL_CAPACITY_TYPE, []):
                for zone in reqs.get(LABEL_ZONE, []):
                    table[(str(it["name"]), str(capacity), str(zone))] = float(offering.get("Price", 0.0))
    return table


# -- the cloud: start-up time, capacity types (what the control plane and Karpenter are started with) ----------------


@dataclass(frozen=True)
class Cloud:
    """What the local cloud is like. KWOK's nodes are Ready about a second after they appear, which makes churn
    look free; a cloud's take 30-90 s (``node_ready``: KWOK's node Stage delayed, deploy/local/kubernetes.sh's
    EBB_KWOK_NODE_READY_SECONDS). A cloud sells spot next to on-demand (Karpenter's KWOK instance types have both
    at every zone, spot at 70% of the price; the NodePool allows ``capacity_types``), and spot nodes may replace
    spot nodes (``spot_to_spot``: Karpenter's feature gate SpotToSpotConsolidation, ebb's planner's
    SPOT_TO_SPOT)."""

    #: seconds from a Node's appearance to Ready, drawn uniformly in [low, high] per node (0, 0: at once)
    node_ready: tuple[int, int]
    capacity_types: tuple[str, ...]
    spot_to_spot: bool

    @property
    def startup_taints(self) -> tuple[Doc, ...]:
        """The NodePool's startup taints on a cloud whose nodes take time to be Ready: the taint a kubelet under an
        external cloud provider registers its Node with (``TAINT_UNINITIALIZED``). Karpenter's KWOK provider
        creates the Node itself, tainted only karpenter.sh/unregistered; its registration removes that one and adds
        the startup taints in the same patch, so a new Node is never untainted before it is Ready, and only KWOK
        removes this one, once the Node is Ready (its node-uninitialized Stage, deploy/local/kubernetes.sh). The
        not-ready taint would not do: the node lifecycle controller removes it from a Node with no Ready condition,
        which a loaded machine's KWOK gives a new Node seconds after Karpenter registered it, and kube-scheduler
        bound about half the pods that came while a node booted in that moment. Karpenter's simulations ignore
        startup taints on a node that is not initialized (and this one is among its known ephemeral taints)."""
        booting = {"key": TAINT_UNINITIALIZED, "value": "true", "effect": "NoSchedule"}
        return (booting,) if self.node_ready[1] > 0 else ()

    def env(self) -> dict[str, str]:
        """The control plane's and Karpenter's settings for this cloud (deploy/local/kubernetes.sh, karpenter.sh)."""
        low, high = self.node_ready
        out = {"EBB_KWOK_NODE_READY_SECONDS": f"{low}-{high}" if high > 0 else ""}
        out["KARPENTER_FEATURE_GATES"] = f"SpotToSpotConsolidation={str(self.spot_to_spot).lower()}"
        return out


#: a real run's cloud: 30-90 s to Ready, spot and on-demand, spot-to-spot consolidation on
CLOUD = Cloud(node_ready=(30, 90), capacity_types=("spot", "on-demand"), spot_to_spot=True)
#: the smoke's: the same machinery with a short start-up (its trace is a few minutes long)
SMOKE_CLOUD = Cloud(node_ready=(5, 15), capacity_types=("spot", "on-demand"), spot_to_spot=True)


# -- the starting cluster: the same NodeClaims on every side before the disruption phase (pure) ---------------------


@dataclass(frozen=True)
class StartNode:
    """A NodeClaim of the starting cluster, pinned to one instance type, capacity type and zone."""

    name: str
    instance_type: str
    capacity_type: str
    zone: str


def peak_pods(trace: Trace) -> list[Doc]:
    """The services' pods at their peak, as kubectl-shaped Pending pods of their Deployments' templates."""
    pods: list[Doc] = []
    for service in trace.services:
        template = deployment(service.name, service.peak, service.cpu_m, service.mem_mib, "service",
                              service.spread)["spec"]["template"]
        for i in range(service.peak):
            name = f"{service.name}-{i}"
            pods.append({"apiVersion": "v1", "kind": "Pod",
                         "metadata": {"name": name, "namespace": NAMESPACE, "uid": name,
                                      "labels": dict(template["metadata"]["labels"]),
                                      "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                                           "name": service.name, "uid": service.name,
                                                           "controller": True}]},
                         "spec": template["spec"], "status": {"phase": "Pending"}})
    return pods


def starting_cluster(trace: Trace, types: Sequence[Mapping[str, Any]], pool: Mapping[str, Any]) -> list[StartNode]:
    """The NodeClaims every side starts from: what a provisioner that plans like Karpenter's launches for the
    services' pods at their peak, all at once (ebb's simulation of Karpenter's provisioning,
    ``ebb.core.provisioning.launches``, on Karpenter's own KWOK instance types and the side's NodePool ``pool``),
    each pinned to its cheapest instance type; a node the simulation allows in several zones goes to them in turn.
    Deterministic for a trace, so every side and every repeat of a seed starts from the same NodeClaims; no side's
    provisioning luck is in its disruption phase's figures."""
    from ebb.adapters.catalog import catalog_from_kwok_instance_types
    from ebb.core.provisioning import launches
    from ebb.core.snapshot import parse_documents

    # the NodePool's spec only: read just after its creation, its Ready condition may not be True yet, and a NodePool
    # that is not Ready launches nothing (`NodePool.launches`); the plan is of the nodes Karpenter launches once it is
    spec_only = {key: value for key, value in pool.items() if key != "status"}
    snapshot = parse_documents([catalog_from_kwok_instance_types(types), spec_only, *peak_pods(trace)])
    plan = launches(snapshot, list(snapshot.pods))
    if plan.unschedulable:
        some = sorted(plan.unschedulable.items())[:3]
        raise ValueError(f"{len(plan.unschedulable)} of the peak's pods fit no node of the NodePool: {some}")
    nodes: list[StartNode] = []
    for n, new in enumerate(plan.launches):
        zones = sorted(new.zones)
        nodes.append(StartNode(f"{START_PREFIX}{n:03d}", new.instance_types[0], new.capacity_type,
                               zones[n % len(zones)]))
    return nodes


def start_nodeclaim(node: StartNode, pool: Mapping[str, Any], types: Sequence[Mapping[str, Any]]) -> Doc:
    """The NodeClaim of a starting node as ebb's executor writes a replacement (Karpenter launches it): the
    NodePool's template with the instance type, capacity type and zone pinned, and the type's allocatable as its
    resource requests (Karpenter's KWOK provider gives the Node the NodeClaim's requests as capacity)."""
    from ebb.adapters.catalog import catalog_from_kwok_instance_types
    from ebb.core.launch import allocatable_of, nodeclaim_object
    from ebb.core.snapshot import parse_documents

    snapshot = parse_documents([catalog_from_kwok_instance_types(
        [t for t in types if t.get("name") == node.instance_type])])
    instance_type = next(it for it in snapshot.instance_types if it.name == node.instance_type)
    return nodeclaim_object(node.name, nodepool=pool, instance_types=[node.instance_type],
                            capacity_type=node.capacity_type, zones=[node.zone], decision_id="bench-peer-start",
                            requests=allocatable_of(instance_type))


# -- the timeline: what happened when (pure; fed by the watch) ------------------------------------------------------


@dataclass
class NodeClaimLife:
    name: str
    launched: float
    price: float = 0.0
    instance_type: str = ""
    capacity_type: str = ""
    #: when its Ready condition was first seen True (the cloud's start-up time after ``launched``)
    ready: float | None = None
    deleting: float | None = None
    gone: float | None = None
    #: its Node's name (``status.nodeName``), once registered
    node: str = ""

    def alive_at(self, t: float) -> bool:
        return self.launched <= t and (self.gone is None or t < self.gone)


@dataclass
class PodLife:
    key: str
    owner: str
    lineage: str
    seen: float
    bound: float | None = None
    deleting: float | None = None
    gone: float | None = None
    evicted: float | None = None
    #: the Node it was bound to (``spec.nodeName``)
    node: str = ""
    #: when the API server bound it (its PodScheduled condition's transition; whole seconds), on ``t``'s scale
    scheduled: float | None = None

    @property
    def pending_until(self) -> float | None:
        """When the pod stopped waiting for a node (bound, deleting or gone); None while it still waits."""
        ends = [t for t in (self.bound, self.deleting, self.gone) if t is not None]
        return min(ends) if ends else None


def _controller(obj: Mapping[str, Any]) -> str:
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return str(ref.get("uid") or ref.get("name") or "")
    return ""


def _evicted(obj: Mapping[str, Any]) -> bool:
    return any(c.get("type") == "DisruptionTarget" and c.get("status") == "True"
               and c.get("reason") == "EvictionByEvictionAPI"
               for c in (obj.get("status") or {}).get("conditions") or [])


@dataclass
class Timeline:
    """NodeClaim and pod lives, evictions and pod lineages, from watch events (``t``: seconds since the trace
    started). ``prices``: (instance type, capacity type, zone) → $/h."""

    prices: Mapping[tuple[str, str, str], float]
    nodeclaims: dict[str, NodeClaimLife] = field(default_factory=dict)
    pods: dict[str, PodLife] = field(default_factory=dict)
    #: (t, pod key, lineage) of every eviction
    evictions: list[tuple[float, str, str]] = field(default_factory=list)
    #: lineage → evictions
    moves: dict[str, int] = field(default_factory=dict)
    #: ReplicaSet → lineages of its evicted pods not yet replaced (oldest first)
    _debts: dict[str, deque[str]] = field(default_factory=dict)
    #: Node → when it turned Ready (its Ready condition's transition, when first seen Ready without the taint
    #: node.kubernetes.io/not-ready; whole seconds), on ``t``'s scale
    node_ready: dict[str, float] = field(default_factory=dict)
    #: the wall-clock time (epoch seconds) of ``t`` = 0: the objects' own timestamps are put on ``t``'s scale
    wall_start: float = 0.0

    def _at(self, stamp: Any) -> float | None:
        """An object's RFC 3339 timestamp on ``t``'s scale; None when there is none."""
        if not isinstance(stamp, str) or not self.wall_start:
            return None
        try:
            return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() - self.wall_start
        except ValueError:
            return None

    def node(self, t: float, name: str, obj: Mapping[str, Any] | None) -> None:
        if obj is None or name in self.node_ready:
            return
        ready = next((c for c in (obj.get("status") or {}).get("conditions") or []
                      if c.get("type") == "Ready" and c.get("status") == "True"), None)
        tainted = any(taint.get("key") in (TAINT_NOT_READY, TAINT_UNINITIALIZED)
                      for taint in (obj.get("spec") or {}).get("taints") or [])
        if ready is not None and not tainted:
            at = self._at(ready.get("lastTransitionTime"))
            self.node_ready[name] = t if at is None else min(t, at)

    def nodeclaim(self, t: float, name: str, obj: Mapping[str, Any] | None) -> None:
        life = self.nodeclaims.get(name)
        if obj is None:
            if life is not None and life.gone is None:
                life.gone = t
                life.deleting = life.deleting if life.deleting is not None else t
            return
        if life is None or life.gone is not None:
            life = self.nodeclaims[name] = NodeClaimLife(name, t)
        labels = (obj.get("metadata") or {}).get("labels") or {}
        it = labels.get(LABEL_INSTANCE_TYPE)
        if it and not life.price:
            life.instance_type = str(it)
            life.capacity_type = str(labels.get(LABEL_CAPACITY_TYPE, "on-demand"))
            life.price = self.prices.get((str(it), life.capacity_type, str(labels.get(LABEL_ZONE, ""))), 0.0)
        if life.ready is None and any(c.get("type") == "Ready" and c.get("status") == "True"
                                      for c in (obj.get("status") or {}).get("conditions") or []):
            life.ready = t
        if not life.node:
            life.node = str((obj.get("status") or {}).get("nodeName") or "")
        if (obj.get("metadata") or {}).get("deletionTimestamp") and life.deleting is None:
            life.deleting = t

    def pod(self, t: float, key: str, obj: Mapping[str, Any] | None) -> None:
        life = self.pods.get(key)
        if obj is None:
            if life is not None and life.gone is None:
                life.gone = t
            return
        if life is None or life.gone is not None:
            owner = _controller(obj)
            debts = self._debts.get(owner)
            lineage = debts.popleft() if debts else key
            life = self.pods[key] = PodLife(key, owner, lineage, t)
        if (obj.get("spec") or {}).get("nodeName") and life.bound is None:
            life.bound = t
            life.node = str(obj["spec"]["nodeName"])
            scheduled = next((c for c in (obj.get("status") or {}).get("conditions") or []
                              if c.get("type") == "PodScheduled" and c.get("status") == "True"), None)
            at = self._at(scheduled.get("lastTransitionTime")) if scheduled is not None else None
            life.scheduled = t if at is None else min(t, at)
        if (obj.get("metadata") or {}).get("deletionTimestamp") and life.deleting is None:
            life.deleting = t
        if life.evicted is None and _evicted(obj):
            life.evicted = t
            self.evictions.append((t, key, life.lineage))
            self.moves[life.lineage] = self.moves.get(life.lineage, 0) + 1
            if life.owner:
                self._debts.setdefault(life.owner, deque()).append(life.lineage)


def cost(lives: Iterable[NodeClaimLife], start: float, end: float) -> float:
    """Dollars spent on NodeClaims between ``start`` and ``end`` (price per hour * hours alive in it)."""
    total = 0.0
    for life in lives:
        alive_end = end if life.gone is None else min(end, life.gone)
        overlap = alive_end - max(start, life.launched)
        if overlap > 0:
            total += life.price * overlap / 3600
    return total


def rate_at(lives: Iterable[NodeClaimLife], t: float) -> float:
    """$/h of the NodeClaims alive at ``t``."""
    return sum(life.price for life in lives if life.alive_at(t))


def alive_at(lives: Iterable[NodeClaimLife], t: float) -> int:
    return sum(1 for life in lives if life.alive_at(t))


def churn(lives: Iterable[NodeClaimLife], start: float, end: float) -> tuple[int, int]:
    """(launched, deleted) in [start, end): a deletion counts when it starts."""
    launched = deleted = 0
    for life in lives:
        launched += start <= life.launched < end
        deleted += life.deleting is not None and start <= life.deleting < end
    return launched, deleted


def activity(timeline: Timeline) -> list[float]:
    """Sorted moments at which the cluster's capacity or placement changed: NodeClaims launched, deleting, gone;
    evictions; pods starting or ending a wait for a node."""
    times: list[float] = []
    for nc in timeline.nodeclaims.values():
        times += [t for t in (nc.launched, nc.deleting, nc.gone) if t is not None]
    times += [t for t, _, _ in timeline.evictions]
    for pod in timeline.pods.values():
        until = pod.pending_until
        if until is None or until > pod.seen:
            times.append(pod.seen)
            if until is not None:
                times.append(until)
    return sorted(times)


def pending_at(pods: Iterable[PodLife], t: float) -> int:
    """Pods waiting for a node at ``t``."""
    count = 0
    for pod in pods:
        until = pod.pending_until
        count += pod.seen <= t and (until is None or t < until)
    return count


def settled(times: Sequence[float], pods: Iterable[PodLife], start: float, end: float,
            quiet: float = QUIET) -> float | None:
    """When the cluster settled in [start, end]: the last activity in it (``start`` when none), provided nothing
    happens for ``quiet`` seconds after it before ``end`` and no pod waits for a node then. None: it did not."""
    i = bisect.bisect_left(times, end)
    last = times[i - 1] if i > 0 and times[i - 1] >= start else start
    if end - last < quiet or pending_at(pods, last) or pending_at(pods, end):
        return None
    return last


def converged(lives: Iterable[NodeClaimLife], start: float, end: float, tolerance: float = 0.05) -> float:
    """When the cost rate first came within ``tolerance`` of the way from its value at ``start`` to its value at the
    end of [start, end] (at least a cent an hour): how fast a side got most of the way. Unlike ``settled`` it is
    not moved by a trickle of small replacements at the end, nor by a replacement's brief overlap with the node it
    replaces."""
    lives = list(lives)
    final = rate_at(lives, end - 1e-9)
    band = max(tolerance * abs(rate_at(lives, start) - final), 0.01)
    changes = sorted({t for life in lives for t in (life.launched, life.gone) if t is not None and start < t < end})
    return next((t for t in [start, *changes] if abs(rate_at(lives, t) - final) <= band), end)


def pending_seconds(pods: Iterable[PodLife], start: float, end: float) -> tuple[float, float]:
    """(pod-seconds spent waiting for a node in [start, end], the longest single wait of a pod that started
    waiting in it)."""
    total = longest = 0.0
    for pod in pods:
        until = pod.pending_until
        stop = end if until is None else min(until, end)
        overlap = stop - max(pod.seen, start)
        if overlap > 0:
            total += overlap
        if start <= pod.seen < end:
            longest = max(longest, (end if until is None else until) - pod.seen)
    return total, longest


#: how much earlier than its Node's Ready a pod may be bound to it and still count as bound once it was Ready: the
#: times are the objects' own, in whole seconds, or when the run's watch saw them where an object gave none, and the
#: Node and pod streams may lag each other by seconds on a loaded machine
BINDING_SLACK = 5.0


def bindings_before_ready(timeline: Timeline, slack: float = BINDING_SLACK) -> Doc:
    """Whether pods waited for their node's start-up, as on a cloud: of the pods bound to a Node whose Ready the
    run saw (Ready and without the not-ready taint), how many came while their node was still booting
    (``booting``: they could have been bound early), how many the API server bound more than ``slack`` seconds
    before it (``early``; 0 when the taint kept them off every booting node), and the earliest binding relative to
    the Ready (seconds; negative: before). The objects' own timestamps, not when the run's watches saw them: the
    Node and pod streams may lag each other by seconds on a loaded machine."""
    ready = timeline.node_ready
    bound = [pod for pod in timeline.pods.values() if pod.scheduled is not None and pod.node in ready]
    leads = [pod.scheduled - ready[pod.node] for pod in bound if pod.scheduled is not None]
    return {"pods": len(leads), "booting": sum(1 for pod in bound if pod.seen < ready[pod.node]),
            "early": sum(1 for d in leads if d < -slack),
            "earliest": round(min(leads), 1) if leads else None}


def nodeclaim_figures(timeline: Timeline, starting: Iterable[str] = ()) -> Doc:
    """The cloud as the side saw it: seconds from a NodeClaim's launch to its Ready (min, median, max, count), and
    the NodeClaims launched by capacity type, the starting cluster's (``starting``) apart from the rest."""
    waits = sorted(life.ready - life.launched for life in timeline.nodeclaims.values() if life.ready is not None)
    first = set(starting)
    by_capacity: dict[str, dict[str, int]] = {"start": {}, "after": {}}
    for name, life in timeline.nodeclaims.items():
        group = by_capacity["start" if name in first else "after"]
        kind = life.capacity_type or "unknown"
        group[kind] = group.get(kind, 0) + 1
    return {"ready_seconds": {"min": waits[0] if waits else None, "median": waits[len(waits) // 2] if waits else None,
                              "max": waits[-1] if waits else None, "count": len(waits)},
            "launched_by_capacity_type": by_capacity, "bound_after_ready": bindings_before_ready(timeline)}


def evictions_in(timeline: Timeline, start: float, end: float) -> int:
    return sum(1 for t, _, _ in timeline.evictions if start <= t < end)


def evicted_more_than_once(timeline: Timeline) -> int:
    """Pod lineages (a pod and the replacements its evictions caused) evicted twice or more."""
    return sum(1 for n in timeline.moves.values() if n >= 2)


def phase_figures(timeline: Timeline, start: float, end: float, quiet: float = QUIET) -> Doc:
    """A phase's figures: cost, churn, evictions, pending time, when it settled and the cost rate then."""
    lives = list(timeline.nodeclaims.values())
    pods = list(timeline.pods.values())
    at = settled(activity(timeline), pods, start, end, quiet)
    launched, deleted = churn(lives, start, end)
    waiting, longest = pending_seconds(pods, start, end)
    return {
        "start": start, "end": end, "cost": cost(lives, start, end), "launched": launched, "deleted": deleted,
        "evictions": evictions_in(timeline, start, end), "pending_pod_seconds": waiting,
        "longest_pending": longest, "settled_after": None if at is None else at - start,
        "rate_settled": rate_at(lives, at) if at is not None else None, "rate_end": rate_at(lives, end - 1e-9),
        "rate_start": rate_at(lives, start), "converged_after": converged(lives, start, end) - start,
        "nodeclaims_end": alive_at(lives, end - 1e-9),
        "peak_nodeclaims": max((alive_at(lives, nc.launched) for nc in lives if start <= nc.launched < end),
                               default=alive_at(lives, start)),
    }


# -- Karpenter's own account of its disruption (pure) ----------------------------------------------------------------


#: the reasons of the Events Karpenter publishes on what its disruption considered and left (sigs.k8s.io/karpenter
#: ``pkg/events/reason.go``): a node kept out of the candidates and why (``DisruptionBlocked``: nominated for a
#: pending pod, a PDB, not initialized, ...), a command its validation refused (``ConsolidationRejected``: budget,
#: scheduling or churn), a node its consolidation could not move (``Unconsolidatable``), and the provisioner's
#: nomination of a node for a pending pod or one leaving a deleting node (``Nominated``, on the pod)
KARPENTER_EVENT_REASONS = ("DisruptionBlocked", "ConsolidationRejected", "Unconsolidatable", "Nominated")


def _wall(value: str) -> float:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def karpenter_events(items: Iterable[Mapping[str, Any]], wall_start: float) -> list[Doc]:
    """The Events (the API's JSON) of ``KARPENTER_EVENT_REASONS``, each as the run's record: when (seconds from
    ``wall_start``, the run's start on the wall clock; the last time for an Event counted more than once, whole
    seconds as the API keeps them), the reason, the object (kind and name), how many times and the message; in time
    order."""
    out: list[Doc] = []
    for event in items:
        if event.get("reason") not in KARPENTER_EVENT_REASONS:
            continue
        at = (event.get("lastTimestamp") or event.get("eventTime") or event.get("firstTimestamp")
              or (event.get("metadata") or {}).get("creationTimestamp"))
        if not at:
            continue
        involved = event.get("involvedObject") or {}
        out.append({"t": round(_wall(str(at)) - wall_start, 3), "reason": event["reason"],
                    "kind": involved.get("kind", ""), "name": involved.get("name", ""),
                    "count": int(event.get("count") or 1), "message": str(event.get("message") or "")})
    return sorted(out, key=lambda e: (e["t"], e["reason"], e["name"]))


#: Karpenter's consolidation types (its metrics' ``consolidation_type`` label) by the reason a command names
_COMMAND_TYPES = {"Empty": "empty", "Underutilized": "consolidation"}


def karpenter_commands(lines: Iterable[str], wall_start: float) -> list[Doc]:
    """The commands Karpenter's disruption started, from its JSON log (``disrupting node(s)``, logged at info): when
    (seconds from ``wall_start``), the reason (``Empty``, ``Underutilized``, ``Drifted``, ...), the consolidation
    type as its metrics label it (``empty``; ``multi`` for an Underutilized command of two nodes or more, the
    smallest multi-node consolidation makes, ``single`` for one; "" for another reason), the NodeClaims, how many
    replacements and how many pods it moves."""
    out: list[Doc] = []
    for line in lines:
        if '"disrupting node(s)"' not in line:
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if entry.get("message") != "disrupting node(s)" or "time" not in entry:
            continue
        reason = str(entry.get("command", "")).split("/", 1)[0]
        nodes = [str((n.get("NodeClaim") or {}).get("name", "")) for n in entry.get("disrupted-nodes") or []]
        kind = _COMMAND_TYPES.get(reason, "")
        if kind == "consolidation":
            kind = "multi" if len(nodes) > 1 else "single"
        out.append({"t": round(_wall(entry["time"]) - wall_start, 3), "reason": reason, "type": kind,
                    "nodeclaims": nodes, "replacements": int(entry.get("replacement-node-count") or 0),
                    "pods": int(entry.get("pod-count") or 0)})
    return out


def karpenter_probes(commands: Sequence[Mapping[str, Any]], events: Sequence[Mapping[str, Any]],
                     after: float = 0.0) -> Doc:
    """What Karpenter's disruption did and refused from ``after`` (seconds of the run) on: the commands it started
    by consolidation type, with the nodes of each multi-node one; the commands its validation refused by type and
    reason, one per refusal (a multi-node refusal is an Event on each of its nodes, at one moment, naming how many
    nodes: "(part of N-node consolidation)"), with the multi-node ones' sizes; and why nodes were kept out of the
    candidates (``DisruptionBlocked``, by the message's first words, each Event once however often it was
    counted: Karpenter publishes it at most once a minute a node)."""
    started: dict[str, int] = {}
    sizes: list[int] = []
    for command in commands:
        if command["t"] >= after:
            started[command["type"] or command["reason"]] = started.get(command["type"] or command["reason"], 0) + 1
            if command["type"] == "multi":
                sizes.append(len(command["nodeclaims"]))
    refused: dict[str, int] = {}
    refused_sizes: list[int] = []
    last: dict[tuple[int, str], float] = {}  # (size, reason) -> when a multi-node refusal's Events were last seen
    blocked: dict[str, int] = {}
    for event in events:
        if event["t"] < after or event["kind"] != "Node":
            continue
        if event["reason"] == "ConsolidationRejected":
            found = re.search(r"\(part of (\d+)-node consolidation\), reason: (\w+)", event["message"])
            why = found.group(2) if found else event["message"].rsplit("reason: ", 1)[-1].split(" ", 1)[0]
            size = int(found.group(1)) if found else 1
            if size > 1:  # one refusal's Events come together (whole seconds: within two of the first)
                before, last[(size, why)] = last.get((size, why)), event["t"]
                if before is not None and event["t"] - before <= 2.0:
                    continue
            kind = "multi" if size > 1 else "single"
            refused[f"{kind}/{why}"] = refused.get(f"{kind}/{why}", 0) + 1
            if size > 1:
                refused_sizes.append(size)
        elif event["reason"] == "DisruptionBlocked":
            words = " ".join(event["message"].split()[:3])
            blocked[words] = blocked.get(words, 0) + 1
    return {"started": dict(sorted(started.items())), "multi_sizes": sizes, "refused": dict(sorted(refused.items())),
            "refused_multi_sizes": refused_sizes, "blocked": dict(sorted(blocked.items()))}


# -- metrics ---------------------------------------------------------------------------------------------------------


#: Karpenter's counters read for its side, and ebb's for the ebb side. Of Karpenter's, how often each method looked
#: (its evaluations, by consolidation type), the failed validations (each failure counting the command's candidates;
#: a refusal by the scheduling simulation is not counted) and the multi-node search's timeouts say how often a look
#: found no command or a command it computed was not run
KARPENTER_METRICS = ("karpenter_voluntary_disruption_decisions_total", "karpenter_nodeclaims_created_total",
                     "karpenter_nodeclaims_terminated_total", "karpenter_nodeclaims_disrupted_total",
                     "karpenter_pods_eviction_requests_total",
                     "karpenter_voluntary_disruption_decision_evaluation_duration_seconds_count",
                     "karpenter_voluntary_disruption_failed_validations_total",
                     "karpenter_voluntary_disruption_consolidation_timeouts_total")
EBB_METRICS = ("ebb_voluntary_disruption_decisions_total", "ebb_disruption_commands_total",
               "ebb_pods_eviction_requests_total", "ebb_nodeclaims_disrupted_total")


def counters(text: str, names: Iterable[str]) -> dict[str, float]:
    """``name{label="v",...}`` → value for the samples of ``names`` in a Prometheus text exposition."""
    from prometheus_client.parser import text_string_to_metric_families

    wanted = set(names)
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in wanted:
                labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
                out[f"{sample.name}{{{labels}}}"] = float(sample.value)
    return out


def counter_delta(before: Mapping[str, float], after: Mapping[str, float]) -> dict[str, float]:
    """What each counter rose by (a counter first seen in ``after`` counts from zero); zero rises left out."""
    return {k: v - before.get(k, 0.0) for k, v in sorted(after.items()) if v - before.get(k, 0.0) > 0}


def counter_sum(values: Mapping[str, float], name: str, **labels: str) -> float:
    """The sum of ``name``'s samples whose labels include ``labels``."""
    total = 0.0
    for key, value in values.items():
        metric, _, rest = key.partition("{")
        if metric == name and all(f'{k}="{v}"' in rest for k, v in labels.items()):
            total += value
    return total


# -- running cost: CPU-seconds and RSS of a side's processes, from /proc ---------------------------------------------


def stat_fields(stat: str) -> list[str]:
    """The fields of a /proc/PID/stat line after the command name (which may hold spaces and parentheses): the
    first is the state (field 3 of proc(5))."""
    return stat[stat.rindex(")") + 2:].split()


def cpu_seconds(stat: str, ticks: int) -> float:
    """CPU-seconds of a process from its /proc/PID/stat: user and system time, its own and its waited-for
    children's (utime, stime, cutime, cstime; proc(5) fields 14-17), in ``ticks`` per second."""
    fields = stat_fields(stat)
    return sum(int(v) for v in fields[11:15]) / ticks


def parent_pid(stat: str) -> int:
    """The parent's PID from /proc/PID/stat (field 4)."""
    return int(stat_fields(stat)[1])


def rss_bytes(status: str) -> int:
    """Resident memory from /proc/PID/status (``VmRSS``, kB); 0 for a process without one (a zombie)."""
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def tree(roots: Iterable[int], parents: Mapping[int, int]) -> set[int]:
    """``roots`` and every process descending from them, from a PID → parent PID table."""
    children: dict[int, list[int]] = {}
    for pid, parent in parents.items():
        children.setdefault(parent, []).append(pid)
    found: set[int] = set()
    todo = [r for r in roots if r in parents]
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo += children.get(pid, [])
    return found


def listening_inodes(table: str, port: int) -> set[str]:
    """The socket inodes listening (state 0A) on ``port`` in a /proc/net/tcp or tcp6 table."""
    inodes: set[str] = set()
    for line in table.splitlines()[1:]:
        fields = line.split()
        if len(fields) > 9 and fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
            inodes.add(fields[9])
    return inodes


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def parents_now() -> dict[int, int]:
    """PID → parent PID of every process (/proc)."""
    out: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (stat := _read(f"/proc/{entry}/stat")):
            with contextlib.suppress(ValueError, IndexError):
                out[int(entry)] = parent_pid(stat)
    return out


def pid_listening(port: int) -> int | None:
    """The process that listens on TCP ``port`` (its socket's inode among its open files), or None."""
    inodes = listening_inodes(_read("/proc/net/tcp"), port) | listening_inodes(_read("/proc/net/tcp6"), port)
    if not inodes:
        return None
    wanted = {f"socket:[{i}]" for i in inodes}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{entry}/fd"):
                with contextlib.suppress(OSError):
                    if os.readlink(f"/proc/{entry}/fd/{fd}") in wanted:
                        return int(entry)
    return None


@dataclass
class RunningCost:
    """CPU-seconds and RSS of groups of processes (each a set of root PIDs and their descendants), sampled: the
    CPU used between the first sample and the last, the RSS summed over a group at each sample (its peak and
    mean). What a user pays to run a side's disrupter and what it needs (ebb's services, Kafka, PostgreSQL;
    Karpenter)."""

    roots: dict[str, list[int]]
    ticks: int = field(default_factory=lambda: os.sysconf("SC_CLK_TCK"))
    first: dict[str, float] = field(default_factory=dict)
    #: per group: the CPU-seconds of each process last seen (a process that ends keeps its last value)
    cpu: dict[str, dict[int, float]] = field(default_factory=dict)
    rss: dict[str, list[int]] = field(default_factory=dict)

    def sample(self) -> None:
        parents = parents_now()
        for group, roots in self.roots.items():
            seen = self.cpu.setdefault(group, {})
            total_rss = 0
            for pid in tree(roots, parents):
                stat = _read(f"/proc/{pid}/stat")
                if stat:
                    with contextlib.suppress(ValueError, IndexError):
                        seen[pid] = cpu_seconds(stat, self.ticks)
                total_rss += rss_bytes(_read(f"/proc/{pid}/status"))
            self.first.setdefault(group, sum(seen.values()))
            self.rss.setdefault(group, []).append(total_rss)

    def figures(self) -> dict[str, Doc]:
        """Per group: CPU-seconds used since the first sample, peak and mean RSS in MiB, samples."""
        out: dict[str, Doc] = {}
        for group in self.roots:
            rss = self.rss.get(group) or [0]
            out[group] = {"cpu_seconds": sum(self.cpu.get(group, {}).values()) - self.first.get(group, 0.0),
                          "rss_peak_mib": max(rss) / 2**20, "rss_mean_mib": sum(rss) / len(rss) / 2**20,
                          "samples": len(self.rss.get(group) or []), "pids": sorted(self.roots[group])}
        return out


# -- the run (I/O) ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Side:
    """One side of the comparison: the disruption settings (Karpenter's NodePool's, or on an ebb side its
    DisruptionPolicy's) and whether ebb runs."""

    key: str
    title: str
    consolidate_after: str
    ebb: bool
    #: the ebb side's DisruptionPolicy stabilizationWindow: consolidation pauses while a node is younger
    stabilization_window: str | None = None
    #: the ebb side's DisruptionPolicy minimumPriceImprovementPercent: a replacement must be that much cheaper
    minimum_price_improvement_percent: int | None = None
    #: the disruption budget (``nodes``) of Karpenter's NodePool, or of the ebb side's DisruptionPolicy
    budget: str = "100%"
    #: consolidationPolicy (Karpenter's NodePool, or the ebb side's DisruptionPolicy)
    consolidation_policy: str = "WhenEmptyOrUnderutilized"
    #: the ebb side's DisruptionPolicy demandWindow
    demand_window: str | None = None
    #: the ebb side's DisruptionPolicy minimumSavingPerEvictedPod ($/h an evicted pod; ebb's default when None)
    minimum_saving_per_evicted_pod: float | None = None
    #: the back-test's built-in policy that simulates this side (``python -m bench calibrate``), if any
    backtest_policy: str | None = None
    #: a shadow side: Karpenter keeps disrupting with the NodePool of the side named ``karpenter``, and ebb runs
    #: beside it in shadow mode with this side's DisruptionPolicy (and the decisions-api, ``ebb record`` and, at the
    #: end, ``ebb shadow report``: ``shadow_report``)
    shadow: bool = False
    karpenter: str | None = None

    @property
    def nodepool_side(self) -> Side:
        """The side whose settings Karpenter's NodePool has: a shadow side's ``karpenter`` side, else itself."""
        return SIDES[self.karpenter] if self.shadow and self.karpenter else self

    @property
    def budget_nodes(self) -> str:
        """The NodePool's budget in the disruption phase: ebb's sides keep Karpenter's voluntary disruption off,
        a shadow side keeps its Karpenter side's."""
        if self.shadow:
            return self.nodepool_side.budget
        return "0" if self.ebb else self.budget


SIDES: dict[str, Side] = {s.key: s for s in (
    Side("karpenter-default", "Karpenter at its defaults (WhenEmptyOrUnderutilized, consolidateAfter 0s, budget 10%)",
         "0s", ebb=False, budget="10%", backtest_policy="karpenter-default"),
    Side("karpenter-balanced", "Karpenter, consolidationPolicy Balanced (consolidateAfter 0s, budget 10%)", "0s",
         ebb=False, budget="10%", consolidation_policy="Balanced", backtest_policy="karpenter-balanced"),
    Side("ebb-default", "Karpenter (disruption off) + ebb at its defaults (WhenEmptyOrUnderutilized, "
         "consolidateAfter 0s, budget 10%)", "0s", ebb=True, budget="10%"),
    # docs/karpenter.md's DisruptionPolicy (docs/policies.md's), without its weekday-hours and expiry budgets
    Side("ebb-recommended", "Karpenter (disruption off) + ebb, the recommended policy (consolidateAfter 5m, "
         "stabilizationWindow 10m, minimumPriceImprovementPercent 30, demandWindow 35m, budget 20%)", "5m",
         ebb=True, stabilization_window="10m", minimum_price_improvement_percent=30, demand_window="35m",
         budget="20%"),
    Side("karpenter-0s", "Karpenter alone, consolidateAfter 0s, budget 100%", "0s", ebb=False),
    # the far end of Karpenter's frontiers in the trade-off sweep: its own way to fewer evictions (bench/tradeoff.py)
    Side("karpenter-5m", "Karpenter, consolidateAfter 5m (WhenEmptyOrUnderutilized, budget 10%)", "5m", ebb=False,
         budget="10%"),
    Side("karpenter-30s", "Karpenter alone, consolidateAfter 30s, budget 100%", "30s", ebb=False),
    Side("ebb", "Karpenter (disruption off) + ebb, stabilizationWindow 2m, budget 100%", "0s", ebb=True,
         stabilization_window="2m"),
    Side("ebb-nowindow", "Karpenter (disruption off) + ebb, no stabilizationWindow, budget 100%", "0s", ebb=True),
    # the middle of ebb's frontier in the trade-off sweep: Karpenter's cost, fewer evictions (bench/tradeoff.py)
    Side("ebb-evictions", "Karpenter (disruption off) + ebb at its defaults with an eviction price of $0.05/h "
         "(minimumSavingPerEvictedPod 0.05; consolidateAfter 0s, budget 10%)", "0s", ebb=True, budget="10%",
         minimum_saving_per_evicted_pod=0.05),
    Side("ebb-min10", "Karpenter (disruption off) + ebb, stabilizationWindow 2m, minimumPriceImprovementPercent 10, "
         "budget 100%", "0s", ebb=True, stabilization_window="2m", minimum_price_improvement_percent=10),
    # step 3 of docs/adopting.md: Karpenter at its defaults still disrupting, ebb beside it watching only, with the
    # recommended policy a team would trial
    Side("shadow", "Karpenter at its defaults (disrupting) + ebb in shadow mode beside it, the recommended policy "
         "(consolidateAfter 5m, stabilizationWindow 10m, minimumPriceImprovementPercent 30, demandWindow 35m, "
         "budget 20%)", "5m", ebb=True, stabilization_window="10m", minimum_price_improvement_percent=30,
         demand_window="35m", budget="20%", shadow=True, karpenter="karpenter-default"),
)}
#: what ``python -m bench peer`` runs unless EBB_BENCH_PEER_SIDES says otherwise: Karpenter at its defaults and
#: Balanced, ebb at its defaults and with the recommended policy
DEFAULT_SIDES = ("karpenter-default", "karpenter-balanced", "ebb-default", "ebb-recommended")
#: and ``--smoke``: a side of each kind, the ebb side without the stabilizationWindow (2 minutes would hold back
#: every disruption of the smoke's short trace, and the smoke checks that disruptions happen)
SMOKE_SIDES = ("karpenter-0s", "ebb-nowindow")


def is_smoke() -> bool:
    """Whether this is a smoke run (``--smoke``, which sets ``EBB_BENCH_PEER=smoke`` for the sides' processes)."""
    return os.environ.get("EBB_BENCH_PEER", "") == "smoke"


def size_from_env() -> TraceSize:
    """The smoke's size, else ``EBB_BENCH_PEER_SIZE`` (``full``, the default, ``short``, ``smoke`` or ``hour``)."""
    if is_smoke():
        return SMOKE
    name = os.environ.get("EBB_BENCH_PEER_SIZE", "full")
    if name not in SIZES_BY_NAME:
        raise SystemExit(f"EBB_BENCH_PEER_SIZE: unknown size {name!r} (known: {', '.join(SIZES_BY_NAME)})")
    return SIZES_BY_NAME[name]


def trace_from_env(seed: int | None = None) -> Trace:
    """The trace a side plays: of ``seed``, else ``EBB_BENCH_PEER_SEED`` (default ``SEED``), ``EBB_BENCH_PEER_TRACE``
    (a kind of ``TRACE_KINDS``, default ``bursty``) at ``size_from_env``'s size."""
    kind = os.environ.get("EBB_BENCH_PEER_TRACE", "bursty")
    if kind not in TRACE_KINDS:
        raise SystemExit(f"EBB_BENCH_PEER_TRACE: unknown trace {kind!r} (known: {', '.join(TRACE_KINDS)})")
    if seed is None:
        seed = int(os.environ.get("EBB_BENCH_PEER_SEED", str(SEED)))
    return make_trace(seed, size_from_env(), kind)


def cloud_from_env() -> Cloud:
    """``CLOUD`` (a smoke: ``SMOKE_CLOUD``), its start-up time replaced by EBB_BENCH_PEER_NODE_READY (``MIN-MAX``
    seconds; ``0-0``: at once, as KWOK alone)."""
    from dataclasses import replace

    cloud = SMOKE_CLOUD if is_smoke() else CLOUD
    raw = os.environ.get("EBB_BENCH_PEER_NODE_READY", "")
    if not raw:
        return cloud
    low, _, high = raw.partition("-")
    try:
        bounds = (int(low), int(high or low))
    except ValueError as exc:
        raise SystemExit(f"EBB_BENCH_PEER_NODE_READY={raw!r}: want MIN-MAX seconds, e.g. 30-90") from exc
    if bounds[0] < 0 or bounds[1] < bounds[0]:
        raise SystemExit(f"EBB_BENCH_PEER_NODE_READY={raw!r}: want 0 <= MIN <= MAX")
    return replace(cloud, node_ready=bounds)


#: the seeds of a real run (each side runs once per seed), unless EBB_BENCH_PEER_SEEDS says otherwise
DEFAULT_SEEDS = (1, 2, 3)


def seeds_from_env() -> list[int]:
    """EBB_BENCH_PEER_SEEDS (``1,2,3``); a smoke: one seed."""
    default = (SEED,) if is_smoke() else DEFAULT_SEEDS
    raw = os.environ.get("EBB_BENCH_PEER_SEEDS", ",".join(map(str, default)))
    try:
        seeds = [int(v) for v in raw.split(",") if v.strip()]
    except ValueError as exc:
        raise SystemExit(f"EBB_BENCH_PEER_SEEDS={raw!r}: want seeds, e.g. 1,2,3") from exc
    if not seeds or len(set(seeds)) != len(seeds):
        raise SystemExit(f"EBB_BENCH_PEER_SEEDS={raw!r}: want distinct seeds, e.g. 1,2,3")
    return seeds


def schedule(sides: Sequence[str], seeds: Sequence[int]) -> list[list[tuple[int, str]]]:
    """The run's rounds: one per seed, each side once in it, the order of the sides turned by one each round
    (A B C, B C A, C A B, ...): run one at a time, every side runs once in every stretch of the run, and none is
    always first or last (the machine's load drifts over the run; the first run of a round also pays for
    the caches a later one finds warm)."""
    rounds: list[list[tuple[int, str]]] = []
    for n, seed in enumerate(seeds):
        turn = n % len(sides) if sides else 0
        rounds.append([(seed, side) for side in [*sides[turn:], *sides[:turn]]])
    return rounds


def at_once_from_env(sides: int) -> int:
    """How many runs of a round run at once (EBB_BENCH_PEER_AT_ONCE): by default all of them, each on its own
    control plane (see ``run_sides``)."""
    raw = os.environ.get("EBB_BENCH_PEER_AT_ONCE", "")
    try:
        value = int(raw) if raw else sides
    except ValueError as exc:
        raise SystemExit(f"EBB_BENCH_PEER_AT_ONCE={raw!r}: want a number") from exc
    return max(1, min(value, sides))


def sides_from_env() -> list[str]:
    default = SMOKE_SIDES if is_smoke() else DEFAULT_SIDES
    chosen = [s.strip() for s in os.environ.get("EBB_BENCH_PEER_SIDES", ",".join(default)).split(",")
              if s.strip()]
    unknown = [s for s in chosen if s not in SIDES]
    if unknown:
        raise SystemExit(f"EBB_BENCH_PEER_SIDES: unknown side(s) {unknown} (known: {', '.join(SIDES)})")
    return chosen


def run_sides(child: Callable[[list[str]], Doc]) -> list[Doc]:
    """Every chosen side once per seed (``schedule``: a round per seed), each run in a process of its own (``child``
    runs ``python -m bench _case peer SIDE@SEED`` and returns its result) on a control plane of its own. The runs of
    a round run at once (EBB_BENCH_PEER_AT_ONCE, default: all): every side of a seed then sees the same machine at
    the same moment (what else runs on it, which drifts over an hour), and four sides by three seeds fit the
    two-hour budget with a trace long enough to mean something; one at a time (EBB_BENCH_PEER_AT_ONCE=1) the rounds
    interleave the sides, A B C D, B C D A, .... A smoke is one round of two sides at once.
    ``EBB_BENCH_PEER_RESULTS=FILE``: the results are also written there, as JSON (after every round)."""
    sides = sides_from_env()
    rounds = schedule(sides, seeds_from_env())
    at_once = at_once_from_env(len(sides))
    results: list[Doc] = []
    for n, runs in enumerate(rounds, 1):
        _log(f"round {n} of {len(rounds)}: " + ", ".join(f"{side} (seed {seed})" for seed, side in runs)
             + (" at once" if at_once > 1 else " one after another"))
        with ThreadPoolExecutor(at_once) as pool:
            results += pool.map(lambda run: child(["peer", f"{run[1]}@{run[0]}"]), runs)
        if out := os.environ.get("EBB_BENCH_PEER_RESULTS", ""):
            Path(out).write_text(json.dumps(results, indent=1))
    return results


def _read_env(infra_dir: Path) -> dict[str, str]:
    try:
        return {str(k): str(v) for k, v in json.loads((infra_dir / "env.json").read_text()).items()}
    except (OSError, ValueError):
        return {}


@contextlib.contextmanager
def control_plane(log_to: Path, cloud: Cloud) -> Iterator[dict[str, str]]:
    """A fresh local control plane with Karpenter (deploy/local/kubernetes.sh and karpenter.sh in a private
    EBB_INFRA_DIR: an empty etcd), KWOK's nodes and Karpenter's feature gates as ``cloud`` says; its settings
    (KUBECONFIG, KARPENTER_METRICS_URL, KARPENTER_PID, ...). Stopped after, by PID."""
    own = Path(tempfile.mkdtemp(prefix="ebb-bench-peer-infra-"))
    env = {**os.environ, "EBB_INFRA_DIR": str(own), **cloud.env()}
    scripts = [REPO_ROOT / "deploy" / "local" / f"{c}.sh" for c in ("kubernetes", "karpenter")]
    try:
        with log_to.open("ab") as log:
            for script in scripts:
                if subprocess.run([str(script), "start"], env=env, stdin=subprocess.DEVNULL, stdout=log,
                                  stderr=log, check=False).returncode != 0:
                    raise SystemExit(f"{script.name} start failed; see {log_to} and {own}/logs")
        yield _read_env(own)
    finally:
        with log_to.open("ab") as log:
            for script in reversed(scripts):
                subprocess.run([str(script), "stop"], env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                               check=False)
        logs = own / "logs"
        if logs.is_dir():
            shutil.copytree(logs, log_to.parent / "infra-logs", dirs_exist_ok=True)
        shutil.rmtree(own, ignore_errors=True)


class Recorder:
    """Feeds the Timeline from a list+watch of NodeClaims, Nodes and pods (ebb's own KubeWatcher: relists on 410 and
    reports what vanished meanwhile)."""

    def __init__(self, timeline: Timeline, loop: asyncio.AbstractEventLoop) -> None:
        self.timeline = timeline
        self.loop = loop
        self.t0 = loop.time()
        timeline.wall_start = time.time()
        self.changes = 0

    def now(self) -> float:
        return self.loop.time() - self.t0

    async def sink(self, changes: Sequence[Any]) -> None:
        """The KubeWatcher's sink: the changes of one read of a watch stream (or one batch of a list)."""
        t = self.now()
        for change in changes:
            self.changes += 1
            if change.kind == "NodeClaim":
                self.timeline.nodeclaim(t, change.name, change.object)
            elif change.kind == "Node":
                self.timeline.node(t, change.name, change.object)
            elif change.kind == "Pod" and change.namespace == NAMESPACE:
                self.timeline.pod(t, f"{change.namespace}/{change.name}", change.object)


class Driver:
    """Applies the trace's actions through the API."""

    def __init__(self, api: Any, trace: Trace) -> None:
        from kubernetes_asyncio import client

        # typed Any: the client takes kubectl-shaped dicts as bodies, its stubs want its model classes
        self.apps: Any = client.AppsV1Api(api)
        self.policy: Any = client.PolicyV1Api(api)
        self.core: Any = client.CoreV1Api(api)
        self.services = {s.name: s for s in trace.services}
        self.jobs = {j.name: j for j in trace.jobs}
        self.errors: list[str] = []

    async def namespace(self) -> None:
        await self.core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})

    async def apply(self, action: Action) -> None:
        from kubernetes_asyncio.client.exceptions import ApiException

        try:
            if action.verb == "create-service":
                for obj in service_objects(self.services[action.name], action.replicas):
                    if obj["kind"] == "Deployment":
                        await self.apps.create_namespaced_deployment(NAMESPACE, obj)
                    else:
                        await self.policy.create_namespaced_pod_disruption_budget(NAMESPACE, obj)
            elif action.verb == "scale":
                await self.apps.patch_namespaced_deployment_scale(action.name, NAMESPACE,
                                                                  {"spec": {"replicas": action.replicas}})
            elif action.verb == "create-job":
                job = self.jobs[action.name]
                await self.apps.create_namespaced_deployment(
                    NAMESPACE, deployment(job.name, job.replicas, job.cpu_m, job.mem_mib, "job"))
            else:
                await self.apps.delete_namespaced_deployment(action.name, NAMESPACE,
                                                             propagation_policy="Background")
        except ApiException as e:  # recorded, and the run goes on: one failed call must not end it
            self.errors.append(f"{action.verb} {action.name}: HTTP {e.status} {e.reason}")


#: the scale up is over when every pod has been running (none pending) this long
UP_SETTLED = 15.0


def running(pods: Iterable[PodLife], t: float) -> int:
    """Pods bound to a node and not being deleted at ``t``."""
    return sum(1 for p in pods if p.bound is not None and p.bound <= t
               and (p.deleting is None or t < p.deleting) and (p.gone is None or t < p.gone))


async def scaled_up(timeline: Timeline, recorder: Recorder, pods: int, least: float, most: float) -> float:
    """When the scale up is over: at least ``least`` seconds in, once ``pods`` pods run and none has waited for
    a node for ``UP_SETTLED`` seconds; at ``most`` seconds at the latest."""
    calm_since: float | None = None
    while (now := recorder.now()) < most:
        lives = list(timeline.pods.values())
        calm = running(lives, now) >= pods and pending_at(lives, now) == 0
        calm_since = (calm_since if calm_since is not None else now) if calm else None
        if now >= least and calm_since is not None and now - calm_since >= UP_SETTLED:
            return now
        await asyncio.sleep(1)
    return most


async def scrape(url: str, names: Iterable[str]) -> dict[str, float]:
    import httpx

    try:
        async with httpx.AsyncClient(timeout=5) as http:
            response = await http.get(url)
            response.raise_for_status()
    except httpx.HTTPError:
        return {}
    return counters(response.text, names)


async def list_events(api: Any) -> list[Doc]:
    """Every Event of the cluster as the API's JSON (what was published over the run: an Event lives an hour); none
    when the list fails, which must not fail the run."""
    from kubernetes_asyncio import client

    try:
        core: Any = client.CoreV1Api(api)
        response = await core.list_event_for_all_namespaces(_preload_content=False)  # the JSON as it came
        items = json.loads(await response.read()).get("items") or []
    except Exception as e:  # the figures do not need them
        _log(f"listing the Events failed: {e!r}")
        return []
    return [item for item in items if isinstance(item, dict)]


PLURALS = {"NodePool": "nodepools", "InstanceTypeCatalog": "instancetypecatalogs",
           "DisruptionPolicy": "disruptionpolicies"}


async def create_object(api: Any, obj: Doc) -> None:
    """Create a cluster-scoped custom object (NodePool, InstanceTypeCatalog, ...)."""
    from kubernetes_asyncio import client

    group, _, version = obj["apiVersion"].partition("/")
    plural = PLURALS[obj["kind"]]
    await client.CustomObjectsApi(api).create_cluster_custom_object(group, version, plural, obj)


async def started(timeline: Timeline, recorder: Recorder, names: Iterable[str], most: float) -> float:
    """When every NodeClaim of ``names`` is Ready (``most`` seconds in at the latest)."""
    wanted = set(names)
    while (now := recorder.now()) < most:
        lives = [timeline.nodeclaims.get(name) for name in wanted]
        if all(life is not None and life.ready is not None for life in lives):
            return now
        await asyncio.sleep(1)
    return most


async def run_trace(side: Side, trace: Trace, cloud: Cloud, kubeconfig: str,
                    metrics: Mapping[str, tuple[str, tuple[str, ...]]], prices: Mapping[tuple[str, str, str], float],
                    types: Sequence[Mapping[str, Any]], out_dir: Path, before_trace: Any = None,
                    start_disruption: Any = None, running: RunningCost | None = None) -> Doc:
    """Apply the NodePool (its voluntary disruption off: budgets ``nodes: "0"``), create the starting cluster's
    NodeClaims (``starting_cluster``) and wait until they are Ready, scale the services up to the peak, then start
    the side's disruption (``start_disruption``, an async callable: ebb's DisruptionPolicy; by default the
    NodePool's budgets set to the side's) and play the rest of the trace, record, wait for the cluster to settle
    after the last job; the raw timeline (``out_dir/timeline.json``) and the figures. ``metrics``: name → (URL,
    counter names) scraped at every phase boundary. ``before_trace``: an async callable run once the NodePool
    exists (ebb's services). ``running``: the processes whose CPU and memory are sampled while the trace plays."""
    from kubernetes_asyncio import client, config

    from ebb.adapters.kube.kinds import NODE, NODECLAIM, POD
    from ebb.adapters.kube.watch import KubeWatcher

    configuration = client.Configuration()
    await config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
    async with client.ApiClient(configuration) as api:
        custom: Any = client.CustomObjectsApi(api)
        karpenter = side.nodepool_side
        await create_object(api, nodepool(karpenter.consolidate_after, "0", karpenter.consolidation_policy,
                                          cloud.capacity_types, cloud.startup_taints))
        pool = await custom.get_cluster_custom_object("karpenter.sh", "v1", "nodepools", NODEPOOL)
        start = starting_cluster(trace, types, pool)
        driver = Driver(api, trace)
        await driver.namespace()
        if before_trace is not None:
            await before_trace(api)
        loop = asyncio.get_running_loop()
        timeline = Timeline(prices)
        stop = asyncio.Event()
        recorder = Recorder(timeline, loop)
        watcher = KubeWatcher(api, (NODECLAIM, NODE, POD), recorder.sink, watch_timeout=120)
        watching = asyncio.create_task(watcher.run(stop))
        await asyncio.wait_for(asyncio.gather(*(e.wait() for e in watcher.synced.values())), 60)
        scrapes: list[tuple[str, float, dict[str, dict[str, float]]]] = []

        async def scrape_all(label: str) -> None:
            got = await asyncio.gather(*(scrape(url, names) for url, names in metrics.values()))
            scrapes.append((label, recorder.now(), dict(zip(metrics, got, strict=True))))

        await scrape_all("start")
        recorder.t0 = loop.time()
        wall_start = time.time()

        load: list[tuple[float, float]] = []

        async def sample_load() -> None:
            while not stop.is_set():
                load.append((recorder.now(), os.getloadavg()[0]))
                if running is not None:
                    await asyncio.to_thread(running.sample)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), 10)

        sampling = asyncio.create_task(sample_load())
        try:
            for node in start:
                await custom.create_cluster_custom_object("karpenter.sh", "v1", "nodeclaims",
                                                          start_nodeclaim(node, pool, types))
            ready_at = await started(timeline, recorder, [n.name for n in start], cloud.node_ready[1] + 180.0)
            _log(f"{side.key} t={recorder.now():6.1f}s: the starting cluster's {len(start)} NodeClaims are Ready; "
                 "the services scale up")
            await asyncio.gather(*(driver.apply(a) for a in trace.actions() if a.verb == "create-service"))
            peak_pods, _, _ = trace.peak_requests()
            up_end = await scaled_up(timeline, recorder, peak_pods, max(trace.phases[0].end, ready_at),
                                     ready_at + trace.up_cap)
            if start_disruption is not None:
                await start_disruption(api)
            if start_disruption is None or side.shadow:  # Karpenter's own disruption, as the side has it
                await custom.patch_cluster_custom_object(  # a JSON patch: the client sends a list as one
                    "karpenter.sh", "v1", "nodepools", NODEPOOL,
                    [{"op": "replace", "path": "/spec/disruption/budgets", "value": [{"nodes": side.budget_nodes}]}])
            _log(f"{side.key} t={recorder.now():6.1f}s: scaled up ({peak_pods} pods running), NodeClaims "
                 f"{alive_at(timeline.nodeclaims.values(), recorder.now())}; disruption on, the trace goes on")
            trace = trace.shifted(up_end)
            boundaries = sorted({p.start for p in trace.phases})
            actions = [a for a in trace.actions() if a.verb != "create-service"]
            for at in sorted({a.at for a in actions} | set(boundaries)):
                delay = at - recorder.now()
                if delay > 0:
                    await asyncio.sleep(delay)
                if at in boundaries and at > 0:
                    await scrape_all(next(p.name for p in trace.phases if p.start == at))
                batch = [a for a in actions if a.at == at]
                if batch:
                    _log(f"{side.key} t={recorder.now():6.1f}s: " + ", ".join(sorted({a.verb for a in batch}))
                         + f" ({len(batch)}); NodeClaims {alive_at(timeline.nodeclaims.values(), recorder.now())},"
                         f" pending pods {pending_at(timeline.pods.values(), recorder.now())}")
                    await asyncio.gather(*(driver.apply(a) for a in batch))
            end = trace.bursty.end
            await asyncio.sleep(max(0.0, end - recorder.now()))
            if watching.done():
                watching.result()  # what ended the watch early
            await scrape_all("end")
            events = await list_events(api)
            (out_dir / "events.json").write_text(json.dumps(events))
        finally:
            stop.set()
            await asyncio.gather(watching, sampling, return_exceptions=True)
    figures: list[Doc] = []
    for n, phase in enumerate(trace.phases):
        f = phase_figures(timeline, phase.start, phase.end)
        if phase.kind == "bursty":  # settled and converged after the last job ended
            after = phase_figures(timeline, trace.last_job_end, phase.end)
            f.update({k: after[k] for k in ("settled_after", "rate_settled", "converged_after")})
        before = scrapes[n][2] if n < len(scrapes) else {}
        after = scrapes[n + 1][2] if n + 1 < len(scrapes) else {}
        f["counters"] = {name: counter_delta(before.get(name, {}), after.get(name, {})) for name in metrics}
        figures.append({"name": phase.name, "kind": phase.kind, **f})
    whole = phase_figures(timeline, 0.0, end)
    after_up = phase_figures(timeline, trace.phases[1].start, end)
    whole["counters"] = {name: counter_delta(scrapes[0][2].get(name, {}), scrapes[-1][2].get(name, {}))
                         for name in metrics}
    (out_dir / "timeline.json").write_text(json.dumps({
        "nodeclaims": [asdict(n) for n in timeline.nodeclaims.values()],
        "pods": [asdict(p) for p in timeline.pods.values()], "evictions": timeline.evictions,
        "node_ready": timeline.node_ready,
        "scrapes": scrapes, "load": load, "errors": driver.errors}, indent=1))
    return {"side": side.key, "title": side.title, "seed": trace.seed, "phases": figures, "whole": whole,
            "after_up": after_up, "end": end, "trace": describe(trace), "wall_start": wall_start,
            "karpenter_events": karpenter_events(events, wall_start),
            "up_capped": trace.phases[0].end >= ready_at + trace.up_cap,
            "start": {"nodeclaims": len(start), "ready_after": ready_at,
                      "cost_rate": sum(prices.get((n.instance_type, n.capacity_type, n.zone), 0.0) for n in start)},
            "cloud": {**asdict(cloud), **nodeclaim_figures(timeline, {n.name for n in start})},
            "launches_after_start": sum(1 for name in timeline.nodeclaims if name not in {n.name for n in start}),
            "running_cost": running.figures() if running is not None else {},
            "evicted_more_than_once": evicted_more_than_once(timeline), "evictions": len(timeline.evictions),
            "pods_seen": len(timeline.pods), "watch_changes": recorder.changes, "api_errors": driver.errors,
            "load_average": {"max": max((v for _, v in load), default=0.0),
                             "mean": sum(v for _, v in load) / len(load) if load else 0.0}}


def case_peer(run: str) -> Doc:
    """``python -m bench _case peer SIDE[@SEED]``: one side on the trace of a seed (``SEED`` unless given), on a
    fresh control plane with Karpenter."""
    side_key, _, seed = run.partition("@")
    side = SIDES[side_key]
    size = size_from_env()
    cloud = cloud_from_env()
    trace = trace_from_env(int(seed) if seed else None)
    out_dir = Path(tempfile.mkdtemp(prefix=f"ebb-bench-peer-{side.key}-{trace.seed}-"))
    types = json.loads(kwok_instance_types_path().read_text())
    prices = price_table(types)
    with exclusive(os.environ.get("EBB_BENCH_LOCK", "")):
        load_before = os.getloadavg()[0]
        started = time.monotonic()
        _log(f"{side.key}: logs and the raw timeline in {out_dir}")
        result = _run_side(side, trace, cloud, prices, types, out_dir)
    log = out_dir / "infra-logs" / "karpenter.log"  # copied there once the control plane stopped
    if log.is_file() and "wall_start" in result:
        result["karpenter_commands"] = karpenter_commands(log.read_text(errors="replace").splitlines(),
                                                          float(result["wall_start"]))
        phases = result.get("phases") or []
        result["karpenter_probes"] = karpenter_probes(result["karpenter_commands"], result.get("karpenter_events", []),
                                                      float(phases[1]["start"]) if len(phases) > 1 else 0.0)
    result.update({"seconds": time.monotonic() - started, "load_average_before": load_before,
                   "load_average_after": os.getloadavg()[0], "out_dir": str(out_dir), "code": _code_version(),
                   "smoke": size is SMOKE,
                   "size": next((name for name, known in SIZES_BY_NAME.items() if known is size), "full")})
    result.setdefault("trace", describe(trace))
    (out_dir / "result.json").write_text(json.dumps(result, indent=1))  # kept, should a later side fail
    return result


@contextlib.contextmanager
def exclusive(path: str) -> Iterator[None]:
    """Hold a shared flock on ``path`` (none when empty): EBB_BENCH_LOCK=/tmp/ebb-integration.lock keeps each run
    from running while the integration tests do (they hold it exclusively, ``flock FILE pytest ...``; they would
    share the two cores), without holding it between runs; a round's runs hold it together."""
    if not path:
        yield
        return
    import fcntl

    with open(path, "a") as lock:
        _log(f"waiting for {path}")
        fcntl.flock(lock, fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _run_side(side: Side, trace: Trace, cloud: Cloud, prices: Mapping[tuple[str, str, str], float],
              types: Sequence[Mapping[str, Any]], out_dir: Path) -> Doc:
    """The side on its control plane; the ebb side's servers and store (``ebb_backend``) are made ready meanwhile, in
    a thread: a minute less of each ebb side. Both are stopped after, the servers last."""
    with contextlib.ExitStack() as for_servers:
        starting: Future[EbbBackend] | None = None
        if side.ebb:
            pool = ThreadPoolExecutor(1, thread_name_prefix="ebb-backend")
            starting = pool.submit(ebb_backend, for_servers, out_dir)
            pool.shutdown(wait=False)
        try:
            with control_plane(out_dir / "infra.log", cloud) as env:
                metrics = {"karpenter": (env["KARPENTER_METRICS_URL"], KARPENTER_METRICS)}
                running = RunningCost({"Karpenter": [int(env["KARPENTER_PID"])] if env.get("KARPENTER_PID") else []})
                if starting is not None:
                    return run_ebb_side(side, trace, cloud, env, starting.result(), metrics, prices, types, out_dir,
                                        running)
                return asyncio.run(run_trace(side, trace, cloud, env["KUBECONFIG"], metrics, prices, types, out_dir,
                                             running=running))
        finally:
            if starting is not None:
                wait([starting])  # what it started is entered in for_servers, and stopped on leaving it


def describe(trace: Trace) -> Doc:
    pods, cpu_m, mem_mib = trace.peak_requests()
    spreads = {kind: sum(1 for s in trace.services if s.spread == kind) for kind in ("hostname", "zone", "none")}
    return {"seed": trace.seed, "services": len(trace.services), "spreads": spreads,
            "pdbs": sum(1 for s in trace.services if s.pdb is not None), "peak_pods": pods,
            "peak_cpu": cpu_m / 1000, "peak_memory_gib": mem_mib / 1024, "jobs": len(trace.jobs),
            "job_pods": sum(j.replicas for j in trace.jobs),
            "phases": [(p.name, p.start, p.end) for p in trace.phases], "tail": trace.tail,
            "up_least": trace.up_least, "up_cap": trace.up_cap, "kind": trace.kind}


def _git(*args: str) -> str:
    out = subprocess.run(["git", *args], cwd=REPO_ROOT, capture_output=True, text=True, check=False)
    return out.stdout.strip()


def _code_version() -> str:
    """Whether the harness (bench/peer.py) differed from the checkout's commit. The commit itself is the results
    page's own (its git history) and the side's log's, so the page does not name it."""
    dirty = _git("status", "--porcelain", "--", "bench/peer.py")
    return "the checkout, bench/peer.py with uncommitted changes" if dirty else "the checkout"


def committed_code(into: Path) -> tuple[str, str]:
    """(commit, PYTHONPATH): ebb's library, services and CRDs as committed at HEAD, unpacked into ``into`` with
    ``git archive``, so the ebb side measures one commit whatever is being edited in the working tree meanwhile."""
    commit = _git("rev-parse", "--short", "HEAD")
    archive = subprocess.run(["git", "archive", commit, "libs/ebb/src", "services", "deploy/kubernetes/crds"],
                             cwd=REPO_ROOT, capture_output=True, check=True).stdout
    extract_archive(archive, into)
    paths = [into / "libs" / "ebb" / "src", *sorted(into.glob("services/*/src"))]
    return commit, os.pathsep.join(map(str, paths))


class UnsafeArchive(ValueError):
    """A member of an archive that would land outside the directory it is unpacked into, or is no plain file,
    directory or link inside it."""


def extract_archive(archive: bytes, into: Path, *, with_data_filter: bool | None = None) -> None:
    """Unpack a tar ``archive`` into ``into`` as tarfile's ``data`` filter would. The filter (``extractall(filter=
    "data")``) came in Python 3.11.4, and the project's virtualenv may be built on an older 3.11 (Debian 12's is
    3.11.2), whose ``extractall`` takes no ``filter`` at all: there every member goes through ``checked_member``
    first. ``with_data_filter``: whether to use tarfile's filter (default: where it exists)."""
    import io
    import tarfile

    if with_data_filter is None:
        with_data_filter = hasattr(tarfile, "data_filter")
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        if with_data_filter:
            tar.extractall(into, filter="data")
        else:
            tar.extractall(into, members=[checked_member(m, into) for m in tar.getmembers()])


def checked_member(member: Any, into: Path) -> Any:
    """``member`` (a ``tarfile.TarInfo``) as the ``data`` filter lets it through, or ``UnsafeArchive``: no absolute
    name, nothing outside ``into`` (``..``), no link to outside ``into`` or absolute, no device or FIFO; the copy
    returned is owned by whoever unpacks it (no chown to the archive's owner) and has no set-id bits or write
    permission for others (files readable and writable by their owner)."""
    import copy
    import stat

    dest = os.path.realpath(into)
    name = member.name
    if os.path.isabs(name):
        raise UnsafeArchive(f"{name!r}: an absolute path")
    target = os.path.realpath(os.path.join(dest, name))
    if os.path.commonpath([dest, target]) != dest:
        raise UnsafeArchive(f"{name!r}: outside {into}")
    if not (member.isreg() or member.isdir() or member.issym() or member.islnk()):
        raise UnsafeArchive(f"{name!r}: a device, FIFO or other special file")
    if member.issym() or member.islnk():
        link = member.linkname
        if os.path.isabs(link):
            raise UnsafeArchive(f"{name!r}: a link to the absolute path {link!r}")
        # a symlink's target is relative to its own directory, a hard link's to the archive's root
        base = os.path.dirname(target) if member.issym() else dest
        if os.path.commonpath([dest, os.path.realpath(os.path.join(base, link))]) != dest:
            raise UnsafeArchive(f"{name!r}: a link to {link!r}, outside {into}")
    checked = copy.copy(member)
    checked.uid, checked.gid, checked.uname, checked.gname = os.getuid(), os.getgid(), "", ""
    mode = member.mode & 0o755  # no set-id, sticky or write for group and others
    if member.isreg():
        mode |= stat.S_IRUSR | stat.S_IWUSR
        mode = mode if mode & stat.S_IXUSR else mode & ~(stat.S_IXGRP | stat.S_IXOTH)
    checked.mode = mode
    return checked


# -- the ebb side ---------------------------------------------------------------------------------------------------


#: service → python module, and what it logs once it runs
EBB_SERVICES = {"cluster-watcher": "ebb_cluster_watcher", "consolidation-planner": "ebb_consolidation_planner",
                "termination-executor": "ebb_termination_executor", "decisions-api": "ebb_decisions_api"}
#: the log line that says a service has started, where it is not "<service> starting"
STARTED = {"decisions-api": "decisions-api started"}
#: the services only a shadow side runs (its report reads the decisions-api)
SHADOW_ONLY = frozenset({"decisions-api"})


def services_run(side: Side) -> list[str]:
    """The ebb services a side runs, in ``EBB_SERVICES``' order."""
    return [name for name in EBB_SERVICES if side.shadow or name not in SHADOW_ONLY]


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class EbbServices:
    """ebb's services as ``python -m`` processes with their logs in ``log_dir`` (stdout and stderr)."""

    env: dict[str, dict[str, str]]
    log_dir: Path
    processes: dict[str, asyncio.subprocess.Process] = field(default_factory=dict)

    async def start(self) -> None:
        """The services ``env`` has settings for (``EBB_SERVICES``' order), each until its log says it started."""
        names = [name for name in EBB_SERVICES if name in self.env]
        for name in names:
            with (self.log_dir / f"{name}.log").open("wb") as log:
                self.processes[name] = await asyncio.create_subprocess_exec(
                    sys.executable, "-m", EBB_SERVICES[name], env={**os.environ, **self.env[name]},
                    stdin=asyncio.subprocess.DEVNULL, stdout=log, stderr=asyncio.subprocess.STDOUT)
        deadline = time.monotonic() + 120
        for name in names:
            started_line = STARTED.get(name, f"{name} starting")
            while started_line not in (self.log_dir / f"{name}.log").read_text(errors="replace"):
                self.check()
                if time.monotonic() > deadline:
                    raise SystemExit(f"{name} did not start in 120 s; see {self.log_dir}/{name}.log")
                await asyncio.sleep(0.5)

    def check(self) -> None:
        for name, process in self.processes.items():
            if process.returncode is not None:
                raise SystemExit(f"{name} exited with {process.returncode}; see {self.log_dir}/{name}.log")

    async def stop(self) -> dict[str, int | None]:
        for process in self.processes.values():
            if process.returncode is None:
                process.send_signal(signal.SIGTERM)
        codes: dict[str, int | None] = {}
        for name, process in self.processes.items():
            try:
                codes[name] = await asyncio.wait_for(process.wait(), 30)
            except TimeoutError:
                process.kill()
                codes[name] = await process.wait()
        return codes


def _ebb_command() -> str:
    """The ``ebb`` command of the interpreter running the bench (the project's .venv)."""
    return str(Path(sys.executable).with_name("ebb"))


@dataclass
class ShadowTrial:
    """A shadow side's adoption trial, as docs/adopting.md has a team run it: ``ebb record --live`` from the start of
    the disruption phase (the cluster at its peak, every pod running: ``record``), then ``ebb shadow report`` over
    the run (from ebb's services' start) with the recording and ebb's policy (``report``): its words in
    ``out_dir/shadow-report.txt``, its JSON in ``shadow-report.json``, its page in ``shadow.html``, the recording
    in ``recorded.yaml``."""

    out_dir: Path
    kubeconfig: str
    api: str
    token: str
    pythonpath: str
    policy: Doc
    recorder: asyncio.subprocess.Process | None = None
    #: when ebb's services started (epoch seconds): the report's period starts a minute before
    started: float = field(default_factory=time.time)

    def _env(self) -> dict[str, str]:
        return {**os.environ, "PYTHONPATH": self.pythonpath, "KUBECONFIG": self.kubeconfig}

    async def record(self) -> None:
        with (self.out_dir / "record.log").open("wb") as log:
            self.recorder = await asyncio.create_subprocess_exec(
                _ebb_command(), "record", "--live", "--kubeconfig", self.kubeconfig,
                "--duration", "24h", "--save-every", "1m", "-o", str(self.out_dir / "recorded.yaml"),
                env=self._env(), stdin=asyncio.subprocess.DEVNULL, stdout=log, stderr=asyncio.subprocess.STDOUT)

    async def stop(self) -> int | None:
        """Stop the recording (SIGTERM: it writes what it recorded and exits)."""
        if self.recorder is None or self.recorder.returncode is not None:
            return None if self.recorder is None else self.recorder.returncode
        self.recorder.send_signal(signal.SIGTERM)
        try:
            return await asyncio.wait_for(self.recorder.wait(), 120)
        except TimeoutError:
            self.recorder.kill()
            return await self.recorder.wait()

    async def report(self, seconds: float) -> Doc:
        """``ebb shadow report`` over the run (from when ebb's services started), the recording and ebb's policy
        given, run once (its back-test of the recording is the long part): the JSON (``-o json``) and the page
        (``--report``), and its words rendered from that JSON as the command renders them."""
        from ebb_cli.shadow_report import render

        code = await self.stop()
        policy = self.out_dir / "ebb-policy.json"
        policy.write_text(json.dumps(self.policy, indent=1))
        since = f"{math.ceil(time.time() - self.started) + 60}s"  # the whole run, and the minute before it
        args = ["shadow", "report", "--since", since, "--api", self.api, "--token", self.token,
                "--trace", str(self.out_dir / "recorded.yaml"), "--policy", str(policy),
                "--report", str(self.out_dir / "shadow.html"), "-o", "json"]
        outputs: Doc = {"record_exit": code, "since": since, "trace_seconds": seconds}
        done = await asyncio.create_subprocess_exec(_ebb_command(), *args, env=self._env(),
                                                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await done.communicate()
        (self.out_dir / "shadow-report.json").write_bytes(out)
        if done.returncode != 0:
            _log(f"ebb shadow report exited {done.returncode}: {err.decode(errors='replace')[-2000:]}")
            outputs["shadow-report.json"] = {"exit": done.returncode, "stderr": err.decode(errors="replace")[-4000:]}
            return outputs
        outputs["report"] = json.loads(out)
        (self.out_dir / "shadow-report.txt").write_text("".join(f"{line}\n" for line in render(outputs["report"])),
                                                        encoding="utf-8")
        _log(f"the shadow report: {self.out_dir / 'shadow-report.txt'}, {self.out_dir / 'shadow.html'}")
        return outputs


def _port(address: str) -> int:
    """The TCP port of ``host:port`` or of a URL (``postgresql://user@host:port/db``)."""
    from urllib.parse import urlsplit

    if "://" in address:
        return urlsplit(address).port or 0
    return int(address.split(",", maxsplit=1)[0].rsplit(":", 1)[1])


def ebb_env(kubeconfig: str, bootstrap: str, database_url: str, run: str, ports: Mapping[str, int], *,
            spot_to_spot: bool = False, mode: str = "enforce", token: str = "") -> dict[str, dict[str, str]]:
    """Each service's EBB_<SERVICE>_* settings: the defaults a user would run with (pass interval 10 s,
    debounce 1 s, validation delay 15 s as Karpenter's), the ``karpenter`` provider, this run's topics and
    cluster name, metrics on ``ports``; ``spot_to_spot``: the planner may replace spot nodes by spot nodes;
    ``mode``: the planner's and the executor's (``shadow`` on a shadow side). With a ``decisions-api`` port in
    ``ports`` the decisions-api too, on that port with bearer ``token``."""
    common = {"KAFKA_BOOTSTRAP": bootstrap, "TOPIC_PREFIX": f"peer{run}.", "KUBECONFIG": kubeconfig,
              "LOG_LEVEL": "info"}
    db = {"DATABASE_URL": database_url, "CLUSTER": f"peer-{run}"}
    per = {
        "cluster-watcher": {**common},
        "consolidation-planner": {**common, **db, "GROUP": f"peer-{run}-planner", "LEASE_NAME": f"ebb-peer-{run}",
                                  "LEASE_NAMESPACE": "default", "PROVIDER": "karpenter",
                                  "SPOT_TO_SPOT": str(spot_to_spot).lower(),
                                  "METRICS_PORT": str(ports["consolidation-planner"]), "METRICS_ADDRESS": "127.0.0.1"},
        "termination-executor": {**common, **db, "GROUP": f"peer-{run}-executor", "PROVIDER": "karpenter",
                                 "METRICS_PORT": str(ports["termination-executor"]), "METRICS_ADDRESS": "127.0.0.1"},
    }
    if mode != "enforce":
        per["consolidation-planner"]["MODE"] = per["termination-executor"]["MODE"] = mode
    if "decisions-api" in ports:
        per["decisions-api"] = {**common, **db, "GROUP": f"peer-{run}-api", "PROVIDER": "karpenter",
                                "HOST": "127.0.0.1", "PORT": str(ports["decisions-api"]), "TOKEN": token,
                                "SPOT_TO_SPOT": str(spot_to_spot).lower()}
        per["decisions-api"].pop("KUBECONFIG")
    return {name: {"EBB_" + name.upper().replace("-", "_") + "_" + k: v for k, v in values.items()}
            for name, values in per.items()}


def ebb_objects(side: Side, types: Sequence[Mapping[str, Any]]) -> list[Doc]:
    """What ebb reads next to the NodePool: the InstanceTypeCatalog of Karpenter's own instance types (every
    offering, spot and on-demand) and the DisruptionPolicy ebb acts on (Karpenter's NodePool has budgets
    ``nodes: "0"``; ``disruption_policy``). A run creates the policy only when the disruption phase starts."""
    from ebb.adapters.catalog import catalog_from_kwok_instance_types

    return [catalog_from_kwok_instance_types(types), disruption_policy(side)]


def disruption_policy(side: Side) -> Doc:
    """The ebb side's DisruptionPolicy: the side's consolidationPolicy, consolidateAfter, budget,
    stabilizationWindow, minimumPriceImprovementPercent, demandWindow and minimumSavingPerEvictedPod; no expiry."""
    spec: Doc = {"consolidationPolicy": side.consolidation_policy, "consolidateAfter": side.consolidate_after,
                 "expireAfter": "Never", "budgets": [{"nodes": side.budget}]}
    if side.stabilization_window:
        spec["stabilizationWindow"] = side.stabilization_window
    if side.minimum_price_improvement_percent is not None:
        spec["minimumPriceImprovementPercent"] = side.minimum_price_improvement_percent
    if side.demand_window:
        spec["demandWindow"] = side.demand_window
    if side.minimum_saving_per_evicted_pod is not None:
        spec["minimumSavingPerEvictedPod"] = side.minimum_saving_per_evicted_pod
    return {"apiVersion": "ebb.sh/v1", "kind": "DisruptionPolicy", "metadata": {"name": NODEPOOL}, "spec": spec}


@dataclass(frozen=True)
class EbbBackend:
    """What the ebb side runs on besides its control plane: Kafka, PostgreSQL (its store migrated) and ebb's code."""

    bootstrap: str
    database_url: str
    #: where the servers come from
    origin: str
    #: ebb's code: the commit, where it is unpacked, and the PYTHONPATH of its library and services
    commit: str
    code: Path
    pythonpath: str


def ebb_backend(stack: contextlib.ExitStack[Any], out_dir: Path) -> EbbBackend:
    """Ebb's code as committed at HEAD unpacked into ``out_dir/code`` (``committed_code``), Kafka and PostgreSQL as
    ``bench.load`` finds or starts them (entered in ``stack``, which stops them), the store migrated: all that needs
    no control plane, so it is made ready while the control plane starts."""
    from bench.load import servers

    code = out_dir / "code"
    commit, pythonpath = committed_code(code)
    bootstrap, database_url, origin = stack.enter_context(servers())
    migrating = subprocess.run(
        [sys.executable, "-c", "import asyncio, sys; from ebb.adapters.store.migrate import upgrade_async; "
         "asyncio.run(upgrade_async(sys.argv[1]))", database_url], env={**os.environ, "PYTHONPATH": pythonpath},
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False)
    if migrating.returncode != 0:
        raise SystemExit(f"migrating the store failed: {migrating.stdout.decode(errors='replace')[-2000:]}")
    return EbbBackend(bootstrap, database_url, origin, commit, code, pythonpath)


def run_ebb_side(side: Side, trace: Trace, cloud: Cloud, env: Mapping[str, str], backend: EbbBackend,
                 metrics: Mapping[str, tuple[str, tuple[str, ...]]], prices: Mapping[tuple[str, str, str], float],
                 types: Sequence[Mapping[str, Any]], out_dir: Path, running: RunningCost | None = None) -> Doc:
    """The ebb side on its ``backend``: ebb's CRDs and catalog, the three services, then the trace; its
    DisruptionPolicy when the disruption phase starts. ``running`` gets ebb's services, Kafka and PostgreSQL."""
    from bench.load import _clean

    kubeconfig = env["KUBECONFIG"]
    run = uuid.uuid4().hex[:8]
    ports = {"consolidation-planner": _free_port(), "termination-executor": _free_port()}
    token = uuid.uuid4().hex
    if "decisions-api" in services_run(side):
        ports["decisions-api"] = _free_port()
    bootstrap, database_url, origin = backend.bootstrap, backend.database_url, backend.origin
    commit, code, pythonpath = backend.commit, backend.code, backend.pythonpath
    crds = sorted((code / "deploy" / "kubernetes" / "crds").glob("ebb.sh_*.yaml"))
    _log(f"ebb: servers {origin}; topics peer{run}.*, cluster peer-{run}; ebb's code of {commit} in {code}")
    envs = ebb_env(kubeconfig, bootstrap, database_url, run, ports, spot_to_spot=cloud.spot_to_spot,
                   mode="shadow" if side.shadow else "enforce", token=token)
    for values in envs.values():
        values["PYTHONPATH"] = pythonpath
    services = EbbServices(envs, out_dir)
    shadow = ShadowTrial(out_dir, kubeconfig, f"http://127.0.0.1:{ports['decisions-api']}", token, pythonpath,
                         disruption_policy(side)) if side.shadow else None

    async def before_trace(api: Any) -> None:
        applying = await asyncio.create_subprocess_exec(
            sys.executable, str(REPO_ROOT / "deploy" / "local" / "kube_apply.py"), "--kubeconfig", kubeconfig,
            *map(str, crds), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        output, _ = await applying.communicate()
        if applying.returncode != 0:
            raise SystemExit(f"applying ebb's CRDs failed: {output.decode(errors='replace')[-2000:]}")
        catalog, _ = ebb_objects(side, types)
        await create_object(api, catalog)
        await services.start()
        if running is not None:
            running.roots["ebb's services"] = [p.pid for p in services.processes.values()]
            running.roots["Kafka"] = [pid for pid in [pid_listening(_port(bootstrap))] if pid is not None]
            running.roots["PostgreSQL"] = [pid for pid in [pid_listening(_port(database_url))] if pid is not None]

    async def start_disruption(api: Any) -> None:
        await create_object(api, disruption_policy(side))
        if shadow is not None:  # the recording starts from the cluster at its peak, every pod running
            await shadow.record()

    async def main() -> Doc:
        from aiokafka.admin import AIOKafkaAdminClient

        all_metrics = {**metrics, **{name: (f"http://127.0.0.1:{port}/metrics", EBB_METRICS)
                                     for name, port in ports.items()}}
        try:
            result = await run_trace(side, trace, cloud, kubeconfig, all_metrics, prices, types, out_dir,
                                     before_trace, start_disruption, running)
            services.check()
            if shadow is not None:
                result["shadow_report"] = await shadow.report(result["end"])
        finally:
            if shadow is not None:
                await shadow.stop()
            codes = await services.stop()
            await _clean(bootstrap, f"peer{run}.", database_url, f"peer-{run}", AIOKafkaAdminClient)
        result["ebb_exit_codes"] = codes
        result["servers"] = origin
        result["ebb_code"] = commit
        return result

    return asyncio.run(main())


# -- the report ------------------------------------------------------------------------------------------------------


def _money(value: float | None, per_hour: bool = False) -> str:
    if value is None:
        return "n/a"
    return f"${value:,.2f}/h" if per_hour else f"${value:,.2f}"


def _settle(f: Mapping[str, Any], window: float | None = None) -> str:
    """A phase's settle cell; ``window``: how long it had to settle (default: the whole phase)."""
    converged = f"; 95% of the way after {f['converged_after']:.0f} s"
    if f["settled_after"] is None:
        window = f["end"] - f["start"] if window is None else window
        return (f"not settled in {window:.0f} s: {_money(f['rate_end'], True)} and "
                f"{f['nodeclaims_end']} NodeClaims at its end{converged}")
    return f"{f['settled_after']:.0f} s, {_money(f['rate_settled'], True)}{converged}"


def _counts(values: Mapping[str, float], name: str, label: str) -> str:
    """``name``'s rises summed by ``label``: "12 (delete 9, replace 3)"."""
    by: dict[str, float] = {}
    for key, value in values.items():
        metric, _, rest = key.partition("{")
        if metric != name:
            continue
        found = next((part.split("=", 1)[1].strip('"}') for part in rest.split(",")
                      if part.startswith(f"{label}=")), "")
        by[found] = by.get(found, 0.0) + value
    if not by:
        return "0"
    total = sum(by.values())
    parts = ", ".join(f"{k or '-'} {v:.0f}" for k, v in sorted(by.items()))
    return f"{total:.0f} ({parts})"


def goal(ebb: Mapping[str, Any], peer: Mapping[str, Any]) -> list[tuple[str, str, str, bool]]:
    """The issue's goal against one Karpenter side: (what, ebb, Karpenter, met) for the settled cost and the time
    to settle after each scale-down step and after the last job, and churn on the bursty part (at most half)."""
    rows: list[tuple[str, str, str, bool]] = []
    for mine, theirs in zip(ebb["phases"], peer["phases"], strict=True):
        if mine["kind"] not in ("down", "bursty"):
            continue
        mine_rate = mine["rate_settled"] if mine["rate_settled"] is not None else mine["rate_end"]
        theirs_rate = theirs["rate_settled"] if theirs["rate_settled"] is not None else theirs["rate_end"]
        rows.append((f"{mine['name']}: cost when settled", _money(mine_rate, True), _money(theirs_rate, True),
                     mine_rate <= theirs_rate + 1e-9))
        mine_t, theirs_t = mine["settled_after"], theirs["settled_after"]
        if mine_t is None and theirs_t is None:  # neither settled: which came to stay near its end cost first
            rows.append((f"{mine['name']}: time to settle (neither did: time to 95% of the way)",
                         f"{mine['converged_after']:.0f} s", f"{theirs['converged_after']:.0f} s",
                         mine["converged_after"] <= theirs["converged_after"]))
        else:
            rows.append((f"{mine['name']}: time to settle",
                         "not settled" if mine_t is None else f"{mine_t:.0f} s",
                         "not settled" if theirs_t is None else f"{theirs_t:.0f} s",
                         mine_t is not None and (theirs_t is None or mine_t <= theirs_t)))
    mine_b = next(p for p in ebb["phases"] if p["kind"] == "bursty")
    theirs_b = next(p for p in peer["phases"] if p["kind"] == "bursty")
    mine_churn = mine_b["launched"] + mine_b["deleted"]
    theirs_churn = theirs_b["launched"] + theirs_b["deleted"]
    rows.append(("bursty part: churn (launched + deleted), at most half", str(mine_churn), str(theirs_churn),
                 2 * mine_churn <= theirs_churn))
    return rows


def unsettled_seconds(result: Mapping[str, Any]) -> float:
    """Time to settle, over the disruption phase: the seconds from each scale-down step, and from the last job's
    end, to the cluster settled, summed; a phase that did not settle counts its whole window."""
    total = 0.0
    for phase in result["phases"]:
        if phase["kind"] == "down":
            window = phase["end"] - phase["start"]
        elif phase["kind"] == "bursty":
            window = result["trace"]["tail"]
        else:
            continue
        total += window if phase["settled_after"] is None else phase["settled_after"]
    return total


def headline(result: Mapping[str, Any]) -> dict[str, float]:
    """A run's headline figures (``HEADLINE``'s keys): all of them lower is better."""
    running = result.get("running_cost") or {}
    launches = result.get("launches_after_start", result["whole"]["launched"])
    return {
        "cost": result["after_up"]["cost"],
        "cost_whole": result["whole"]["cost"],
        "churn": launches + result["whole"]["deleted"],
        "evictions": result["evictions"],
        "evicted_twice": result["evicted_more_than_once"],
        "pending": result["whole"]["pending_pod_seconds"],
        "pending_after_up": sum(p["pending_pod_seconds"] for p in result["phases"] if p["kind"] != "up"),
        "unsettled": unsettled_seconds(result),
        "cpu_seconds": sum(g["cpu_seconds"] for g in running.values()),
        "rss_peak_mib": sum(g["rss_peak_mib"] for g in running.values()),
    }


#: the headline figures: key, what it is, how a value is written
HEADLINE: tuple[tuple[str, str, Callable[[float], str]], ...] = (
    ("cost", "**node-hour cost, the disruption phase** (from the first scale-down step to the end; the same length "
     "and the same starting cluster on every side)", lambda v: f"${v:,.2f}"),
    ("cost_whole", "node-hour cost, whole run (with the scale up)", lambda v: f"${v:,.2f}"),
    ("churn", "**launches + disruptions, whole trace** (NodeClaims launched, the starting cluster's not counted, "
     "+ NodeClaims deleted)", lambda v: f"{v:,.0f}"),
    ("evictions", "**pod evictions** (Eviction API)", lambda v: f"{v:,.0f}"),
    ("evicted_twice", "**pods evicted more than once**", lambda v: f"{v:,.0f}"),
    ("pending", "**pending pod-seconds, whole trace**", lambda v: f"{v:,.0f}"),
    ("pending_after_up", "pending pod-seconds, the disruption phase", lambda v: f"{v:,.0f}"),
    ("unsettled", "**time to settle**: seconds from each scale-down step and from the last job to settled, summed "
     "(a phase that did not settle counts whole)", lambda v: f"{v:,.0f} s"),
    ("cpu_seconds", "**running cost: CPU-seconds** of the disrupter and what it needs while the trace plays "
     "(Karpenter; on ebb's sides also ebb's services, Kafka, PostgreSQL)", lambda v: f"{v:,.0f}"),
    ("rss_peak_mib", "**running cost: peak RSS** of the same, MiB (each group's peak, summed)", lambda v: f"{v:,.0f}"),
)


def spread(values: Sequence[float]) -> tuple[float, float, float]:
    """(mean, min, max) of the repeats of one figure."""
    if not values:
        raise ValueError("no values")
    return sum(values) / len(values), min(values), max(values)


def mean_range(values: Sequence[float], fmt: Callable[[float], str]) -> str:
    """``mean [min-max]`` (one value: just it)."""
    mean, lo, hi = spread(values)
    return fmt(mean) if len(values) == 1 else f"{fmt(mean)} [{fmt(lo)}-{fmt(hi)}]"


def by_side(results: Sequence[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    """The runs of each side, in the order the sides first appear, each side's by seed."""
    out: dict[str, list[Mapping[str, Any]]] = {}
    for r in results:
        out.setdefault(r["side"], []).append(r)
    return {side: sorted(runs, key=lambda r: r.get("seed", SEED)) for side, runs in out.items()}


def summary(results: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, tuple[float, float, float]]]:
    """Side → headline figure → (mean, min, max) over its runs."""
    return {side: {key: spread([headline(r)[key] for r in runs]) for key, _, _ in HEADLINE}
            for side, runs in by_side(results).items()}


#: the issue's goal for ebb against a Karpenter setting, on every seed: (key, what, met(ebb, karpenter))
GOAL: tuple[tuple[str, str, Callable[[float, float], bool]], ...] = (
    ("cost", "node-hour cost no higher (within 2%)", lambda mine, theirs: mine <= theirs * 1.02 + 1e-9),
    ("churn", "at most half the launches + disruptions", lambda mine, theirs: 2 * mine <= theirs),
    ("evictions", "no more evictions", lambda mine, theirs: mine <= theirs),
    ("pending", "no more pending pod-seconds", lambda mine, theirs: mine <= theirs + 1e-9),
)


def headline_goal(ebb: Sequence[Mapping[str, Any]], peer: Sequence[Mapping[str, Any]]) -> list[
        tuple[str, str, str, int, int]]:
    """The goal against one Karpenter side, seed by seed (the runs of the seeds both sides ran): (what, ebb's mean
    [range], Karpenter's, the seeds where it is met, the seeds compared)."""
    theirs_by_seed = {r.get("seed", SEED): headline(r) for r in peer}
    pairs = [(headline(r), theirs_by_seed[r.get("seed", SEED)]) for r in ebb if r.get("seed", SEED) in theirs_by_seed]
    rows: list[tuple[str, str, str, int, int]] = []
    fmt = {key: f for key, _, f in HEADLINE}
    for key, what, met in GOAL:
        if not pairs:
            break
        rows.append((what, mean_range([m[key] for m, _ in pairs], fmt[key]),
                     mean_range([t[key] for _, t in pairs], fmt[key]),
                     sum(1 for m, t in pairs if met(m[key], t[key])), len(pairs)))
    return rows


def render(results: Sequence[Mapping[str, Any]]) -> list[str]:
    """The "Side by side with Karpenter" section of docs/benchmarks.md: every side's headline figures as mean
    [min-max] over its seeds, the goal against each Karpenter side seed by seed, then each seed's runs in detail."""
    sides = by_side(results)
    seeds = sorted({r.get("seed", SEED) for r in results})
    lines = [f"### Side by side with Karpenter (seeds {', '.join(map(str, seeds))}: mean [min-max])", ""]
    if any(r.get("smoke") for r in results):
        lines += ["**A smoke run (`--smoke`): a tiny trace, its figures mean nothing.**", ""]
    lines += conditions(results)
    titles = [runs[0]["title"] for runs in sides.values()]
    lines += ["| figure | " + " | ".join(titles) + " |", "|---|" + "---|" * len(sides)]
    for key, label, fmt in HEADLINE:
        lines.append(f"| {label} | " + " | ".join(mean_range([headline(r)[key] for r in runs], fmt)
                                                   for runs in sides.values()) + " |")
    groups = sorted({g for r in results for g in r.get("running_cost") or {}})
    for group in groups:
        lines.append(f"| running cost: {group}, CPU-seconds; peak RSS MiB | " + " | ".join(
            "-" if not all(group in (r.get("running_cost") or {}) for r in runs) else
            mean_range([r["running_cost"][group]["cpu_seconds"] for r in runs], lambda v: f"{v:,.0f}") + "; "
            + mean_range([r["running_cost"][group]["rss_peak_mib"] for r in runs], lambda v: f"{v:,.0f}")
            for runs in sides.values()) + " |")
    lines.append("| wall time of a run; load average (1 min), mean of the runs' means | " + " | ".join(
        f"{mean_range([r['seconds'] for r in runs], lambda v: f'{v:,.0f} s')}; "
        f"{sum(r['load_average']['mean'] for r in runs) / len(runs):.1f}" for runs in sides.values()) + " |")
    lines.append("")
    ebb_sides = [runs for runs in sides.values() if runs[0]["side"] in SIDES and SIDES[runs[0]["side"]].ebb]
    peer_sides = [runs for runs in sides.values() if runs not in ebb_sides]
    for mine in ebb_sides:
        for theirs in peer_sides:
            rows = headline_goal(mine, theirs)
            if not rows:
                continue
            lines += [f"The goal, {mine[0]['title']} against {theirs[0]['title']}, seed by seed:", "",
                      "| goal | ebb | Karpenter | met on |", "|---|---|---|---|"]
            lines += [f"| {what} | {m} | {k} | {'' if n == total else '**'}{n} of {total} seeds"
                      f"{'' if n == total else '**'} |" for what, m, k, n, total in rows]
            lines.append("")
    for seed in seeds:
        lines += render_seed([r for r in results if r.get("seed", SEED) == seed])
    return lines


def conditions(results: Sequence[Mapping[str, Any]]) -> list[str]:
    """What the runs had in common: the cloud (start-up time asked and seen, capacity types launched), the
    starting cluster, how the runs were scheduled."""
    cloud = results[0].get("cloud")
    if not cloud:
        return []
    low, high = cloud["node_ready"]
    waits = [r["cloud"]["ready_seconds"] for r in results if r["cloud"]["ready_seconds"]["count"]]
    seen = (f"seen {min(w['min'] for w in waits):.0f}-{max(w['max'] for w in waits):.0f} s from launch to Ready, "
            f"median {sorted(w['median'] for w in waits)[len(waits) // 2]:.0f} s" if waits else "none seen Ready")
    launched: dict[str, int] = {}
    for r in results:
        for kind, n in r["cloud"]["launched_by_capacity_type"]["after"].items():
            launched[kind] = launched.get(kind, 0) + n
    starts = sorted({(r["start"]["nodeclaims"], round(r["start"]["cost_rate"], 2), r.get("seed", SEED))
                     for r in results if "start" in r}, key=lambda v: v[2])
    return [f"Cloud: KWOK nodes Ready {low}-{high} s after they appear ({seen}); the NodePool offers "
            f"{' and '.join(cloud['capacity_types'])} (Karpenter's KWOK prices: spot 70% of on-demand), "
            f"spot-to-spot consolidation {'on' if cloud['spot_to_spot'] else 'off'} on both sides; NodeClaims "
            "launched after the starting cluster, by capacity type, all runs: "
            + (", ".join(f"{kind} {n}" for kind, n in sorted(launched.items())) or "none") + ". Starting cluster "
            "(the same NodeClaims on every side of a seed, Ready before the services scale up, voluntary disruption "
            "off until every pod runs): " + "; ".join(f"seed {seed}: {n} NodeClaims, ${rate:,.2f}/h"
                                                       for n, rate, seed in starts) + ".", ""]


def render_seed(results: Sequence[Mapping[str, Any]]) -> list[str]:
    """One seed's runs in detail, a column per side."""
    first = results[0]
    t = first["trace"]
    titles = [r["title"] for r in results]
    lines = [f"#### Seed {t['seed']}", ""]
    up_end = t["phases"][0][2]
    phases = ", ".join(f"{name} at +{start - up_end:.0f} s" for name, start, _ in t["phases"][1:])
    lines += [f"Trace: {t['services']} Deployments ({t['spreads']['hostname']} with hostname anti-affinity, "
              f"{t['spreads']['zone']} spread over 4 zones, {t['pdbs']} with a PodDisruptionBudget), at the peak "
              f"{t['peak_pods']} pods requesting {t['peak_cpu']:.0f} vCPU and {t['peak_memory_gib']:.0f} GiB; "
              f"{t['jobs']} jobs ({t['job_pods']} pods of 3.5 or 7.5 vCPU). The scale up lasts until every pod "
              f"runs (at least {t['up_least']:.0f} s, at most {t['up_cap']:.0f} s); from its end: "
              f"{phases}, ending {t['tail']:.0f} s after the last job. Settled: nothing launched, deleted, evicted "
              f"or pending for {QUIET:.0f} s to the end of the phase. Harness (bench/peer.py): {first['code']}"
              + "".join(f"; {r['title']}: ebb's library and services as committed at the checkout's HEAD"
                        for r in results if r.get("ebb_code")) + ".", ""]
    lines += ["| figure | " + " | ".join(titles) + " |", "|---|" + "---|" * len(results)]

    def row(name: str, cell: Any) -> None:
        lines.append(f"| {name} | " + " | ".join(str(cell(r)) for r in results) + " |")

    def phase(r: Mapping[str, Any], kind: str, n: int = 0) -> Mapping[str, Any]:
        found: Mapping[str, Any] = [p for p in r["phases"] if p["kind"] == kind][n]
        return found

    row("**node-hours cost from the first scale-down step to the end** (the same length on every side)",
        lambda r: f"**{_money(r['after_up']['cost'])}**")
    row("node-hours cost, whole run (with the scale up, whose length varies)", lambda r: _money(r["whole"]["cost"]))
    row("peak NodeClaims", lambda r: r["whole"]["peak_nodeclaims"])
    row("scale up (the starting cluster, then Karpenter's provisioning for any pod it left pending): every pod "
        "running after, NodeClaims and cost then",
        lambda r: f"{phase(r, 'up')['end']:.0f} s{' (the cap)' if r.get('up_capped') else ''}, "
                  f"{phase(r, 'up')['nodeclaims_end']}, {_money(phase(r, 'up')['rate_end'], True)}")
    downs = [p for p in first["phases"] if p["kind"] == "down"]
    for n, p in enumerate(downs):
        row(f"{p['name']}: settled after, cost then", lambda r, n=n: _settle(phase(r, "down", n)))
    row("bursty part: cost", lambda r: _money(phase(r, "bursty")["cost"]))
    row("bursty part: settled after the last job ended, cost then",
        lambda r: _settle(phase(r, "bursty"), r["trace"]["tail"]))
    row("**bursty part: churn, NodeClaims launched + deleted**",
        lambda r: f"**{phase(r, 'bursty')['launched'] + phase(r, 'bursty')['deleted']}** "
                  f"({phase(r, 'bursty')['launched']} + {phase(r, 'bursty')['deleted']})")
    row("NodeClaims launched / deleted, whole trace (launched: with the starting cluster's)",
        lambda r: f"{r['whole']['launched']} / {r['whole']['deleted']}")
    row("NodeClaims from launch to Ready: min / median / max seconds",
        lambda r: "-" if not r.get("cloud") or not r["cloud"]["ready_seconds"]["count"] else
        "{min:.0f} / {median:.0f} / {max:.0f}".format(**r["cloud"]["ready_seconds"]))
    row("NodeClaims launched after the starting cluster, by capacity type",
        lambda r: ", ".join(f"{k} {n}" for k, n in sorted(r["cloud"]["launched_by_capacity_type"]["after"].items()))
        or "none"
        if r.get("cloud") else "-")
    row("pod evictions (Eviction API): whole trace (scale-down steps, bursty part)",
        lambda r: f"{r['evictions']} ({sum(p['evictions'] for p in r['phases'] if p['kind'] == 'down')}, "
                  f"{phase(r, 'bursty')['evictions']})")
    row("pods evicted more than once", lambda r: r["evicted_more_than_once"])
    row("pending pod time: pod-seconds, longest wait",
        lambda r: f"{r['whole']['pending_pod_seconds']:,.0f}, {r['whole']['longest_pending']:.0f} s")
    row("of which after the scale up (the steps and the bursts)",
        lambda r: f"{sum(p['pending_pod_seconds'] for p in r['phases'] if p['kind'] != 'up'):,.0f}, "
                  f"{max(p['longest_pending'] for p in r['phases'] if p['kind'] != 'up'):.0f} s")
    karpenter = "karpenter"
    row("Karpenter: `karpenter_voluntary_disruption_decisions_total` (by decision)",
        lambda r: _counts(r["whole"]["counters"].get(karpenter, {}),
                          "karpenter_voluntary_disruption_decisions_total", "decision"))
    row("Karpenter: `karpenter_nodeclaims_created_total` (by reason)",
        lambda r: _counts(r["whole"]["counters"].get(karpenter, {}), "karpenter_nodeclaims_created_total", "reason"))
    row("Karpenter: `karpenter_nodeclaims_terminated_total`",
        lambda r: _counts(r["whole"]["counters"].get(karpenter, {}), "karpenter_nodeclaims_terminated_total",
                          "nodepool"))
    row("Karpenter: `karpenter_pods_eviction_requests_total` (by code)",
        lambda r: _counts(r["whole"]["counters"].get(karpenter, {}), "karpenter_pods_eviction_requests_total",
                          "code"))
    row("ebb: `ebb_voluntary_disruption_decisions_total` (by decision)",
        lambda r: _counts(r["whole"]["counters"].get("consolidation-planner", {}),
                          "ebb_voluntary_disruption_decisions_total", "decision")
        if "consolidation-planner" in r["whole"]["counters"] else "-")
    row("ebb: `ebb_pods_eviction_requests_total` (by code)",
        lambda r: _counts(r["whole"]["counters"].get("termination-executor", {}), "ebb_pods_eviction_requests_total",
                          "code") if "termination-executor" in r["whole"]["counters"] else "-")
    row("wall time of the side; load average (1 min) mean / max",
        lambda r: f"{r['seconds']:.0f} s; {r['load_average']['mean']:.1f} / {r['load_average']['max']:.1f}")
    row("API calls of the trace that failed", lambda r: len(r["api_errors"]))
    lines.append("")
    ebbs = [r for r in results if r["side"] in SIDES and SIDES[r["side"]].ebb]
    for ebb in ebbs:
        for peer in (r for r in results if r not in ebbs):
            lines += [f"Step by step, {ebb['title']} and {peer['title']}:", "",
                      "| goal | ebb | Karpenter | met |", "|---|---|---|---|"]
            lines += [f"| {what} | {mine} | {theirs} | {'yes' if met else '**no**'} |"
                      for what, mine, theirs, met in goal(ebb, peer)]
            lines.append("")
    return lines
