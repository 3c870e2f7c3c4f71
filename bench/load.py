"""Load benchmark: synthetic watch events for a 2,000-node, 20,000-pod cluster through the cluster-watcher's
watch loop → a real Kafka → the real consolidation-planner (its composition root, SnapshotStore, engine and
PostgreSQL store) → approved commands on ``ebb.disruption.commands``.

A real kube-apiserver with 20,000 pods is too heavy for the benchmark machine, so the watch events are
synthetic: they enter at the watcher's list+watch loop (``ebb.adapters.kube.watch.KubeWatcher`` through its
``lister`` hook: an empty first list per kind, then one watch stream per kind whose chunks of JSON lines the
benchmark writes). From there everything is the production path: line splitting, ``KindState.event`` (trim,
digest), the watcher's ``Publisher`` on a ``KafkaBus``, Kafka, and in a second process the planner built by
``ebb_consolidation_planner.app.run`` (KafkaBus consumer, SnapshotStore, engine passes, PostgreSQL decisions
and budget ledger) with an always-leader instead of the Lease.

Measured:

- ingest: events/s from the first watch event handed to the watcher until the planner's SnapshotStore holds
  every object, and the watcher's publish rate on its own;
- steady state: nodes emptied (their pods' DELETED watch events) one at a time and in waves; the latency
  from the last pod's DELETED event entering the watcher to the approved DisruptionCommand read back from
  ``ebb.disruption.commands`` with a plain aiokafka consumer, and its parts (delete applied by the planner,
  Proposed event, command);
- the planner's pass durations and both processes' peak RSS;
- the planner's restart: the planner process stopped, one more node emptied while it is down, a new planner
  process started (it seeds its snapshot from the compacted ``ebb.cluster.objects`` and consumes from the end
  offsets taken before); the time from its start to its snapshot seeded, its first pass, that node's Proposed
  event and its command. Then the same after that process is killed (SIGKILL: its group membership and
  connections left behind, as a crash leaves them).

No executor runs: the benchmark stands in for it. Each approved command's decision is ended at once as rolled back,
with a hold on its nodes for the rest of the run, as an executor whose replacement never came would leave it. The
nodes stay where they are, held, and no pod is left "leaving" them: an approved command that no executor ever
carried out would keep its pods' room on other nodes for as long as the run (the nodes emptied next would be kept
for them), which no cluster with an executor sees.

Servers: those of ``.infra/env.json`` (``make infra-up``) when they answer, else Kafka and PostgreSQL started
by ``deploy/local/{kafka,postgres}.sh`` in a private ``EBB_INFRA_DIR`` and stopped afterwards. The run uses its
own topic prefix and cluster name, and removes its topics and store rows at the end.

Environment: ``EBB_BENCH_LOAD=nodes,pods,sequential,waves,wave_size`` shrinks the run (a smoke test, e.g.
``100,1000,1,1,3``); ``EBB_BENCH_LOAD_PLANNER_LOG=info`` the planner process's log level (warning unless set,
on its stderr, the end of which a failed step prints); ``EBB_BENCH_LOAD_PROFILE=FILE`` runs the planner process
under cProfile (its event loop's thread) and writes the statistics to FILE.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import hashlib
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.generators import REPO_ROOT, ZONES, CatalogType, load_catalog
from bench.measure import peak_rss_mib

Doc = dict[str, Any]

N_NODES = 2_000
N_PODS = 20_000  # one DaemonSet pod per node included
VALIDATION_DELAY = 1.0  # seconds; the planner's default is 15
DEBOUNCE = 1.0  # the planner's default
SEQUENTIAL = 3  # nodes emptied one at a time (the next once the previous one's command arrived)
WAVES = 3  # then waves of WAVE_SIZE nodes emptied at once
WAVE_SIZE = 16
SETTLED = 3  # passes on the settled cluster (the pass interval's, nothing changing) before any node is emptied
CHUNK = 100  # watch events per chunk of the synthetic stream during the ingest
WAIT = 120.0  # seconds to wait for any one step before giving up

#: (NodePool, instance family, share of the nodes): one on-demand family per pool, so every node is the
#: cheapest shape for its pods and consolidation finds nothing at steady state
POOLS = (("general", "m6a", 0.40), ("compute", "c6a", 0.25), ("memory", "r6a", 0.20), ("graviton", "m7g", 0.15))
SIZES = (("xlarge", 0.45), ("2xlarge", 0.40), ("4xlarge", 0.15))
NAMESPACES = ("checkout", "search", "payments", "catalog", "identity", "ledger")
DS_NAME, DS_NAMESPACE, DS_CPU_M, DS_MEM_MIB = "node-agent", "kube-system", 100, 128
HASH = "9121467853621373434"


def _log(message: str) -> None:
    print(f"[load {datetime.now(UTC):%H:%M:%S}] {message}", file=sys.stderr, flush=True)


# -- the synthetic cluster, as the API server sends it ----------------------------------------------------------


def _ts(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _uid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _managed(manager: str, operation: str, at: str, fields: Doc, subresource: str | None = None) -> Doc:
    entry: Doc = {"manager": manager, "operation": operation, "apiVersion": "v1", "time": at,
                  "fieldsType": "FieldsV1", "fieldsV1": fields}
    if subresource:
        entry["subresource"] = subresource
    return entry


@dataclass
class SyntheticCluster:
    """Raw API objects (with managedFields, status, ... as a real API server sends them) and which pods
    sit on which node."""

    nodepools: list[Doc]
    daemonset: Doc
    nodes: list[Doc]
    pods: list[Doc]
    pods_on: dict[str, list[Doc]] = field(default_factory=dict)
    pool_of: dict[str, str] = field(default_factory=dict)

    @property
    def objects(self) -> int:
        return len(self.nodepools) + 1 + len(self.nodes) + len(self.pods)


def nodepool(name: str, family: str, now: datetime, consolidate_after: str, rv: int) -> Doc:
    """A karpenter.sh/v1 NodePool limited to one on-demand instance family, budget nodes: 100%."""
    created = _ts(now - timedelta(days=120))
    return {
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
        "metadata": {
            "name": name, "uid": str(uuid.uuid5(uuid.NAMESPACE_DNS, f"nodepool/{name}")), "generation": 4,
            "resourceVersion": str(rv), "creationTimestamp": created,
            "annotations": {"karpenter.sh/nodepool-hash": HASH, "karpenter.sh/nodepool-hash-version": "v3",
                            "kubectl.kubernetes.io/last-applied-configuration": "{" + "\"x\": 1, " * 60 + "}"},
            "managedFields": [_managed("kubectl-client-side-apply", "Update", created,
                                       {"f:spec": {"f:disruption": {}, "f:template": {}}}),
                              _managed("karpenter", "Update", created, {"f:status": {}}, "status")],
        },
        "spec": {
            "template": {
                "metadata": {"labels": {"team": "platform"}},
                "spec": {
                    "requirements": [
                        {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": [family]},
                        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": list(ZONES)},
                        {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
                    ],
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                    "expireAfter": "720h",
                },
            },
            "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": consolidate_after,
                           "budgets": [{"nodes": "100%"}]},
        },
        "status": {"conditions": [{"type": c, "status": "True", "reason": c, "message": "", "observedGeneration": 4,
                                   "lastTransitionTime": created} for c in ("NodeClassReady", "Ready")],
                   "resources": {"cpu": "0", "memory": "0", "nodes": "0"}},
    }


def _daemonset(now: datetime) -> Doc:
    created = _ts(now - timedelta(days=200))
    return {
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": DS_NAME, "namespace": DS_NAMESPACE, "uid": _ds_uid(), "generation": 2,
                     "resourceVersion": "2", "creationTimestamp": created, "labels": {"k8s-app": DS_NAME},
                     "managedFields": [_managed("helm", "Update", created, {"f:spec": {}})]},
        "spec": {"selector": {"matchLabels": {"k8s-app": DS_NAME}},
                 "template": {"metadata": {"labels": {"k8s-app": DS_NAME}},
                              "spec": {"containers": [{"name": "agent", "image": "registry.example/agent:2.1.0",
                                                       "resources": {"requests": {"cpu": f"{DS_CPU_M}m",
                                                                                  "memory": f"{DS_MEM_MIB}Mi"}}}],
                                       "tolerations": [{"operator": "Exists"}],
                                       "priorityClassName": "system-node-critical"}},
                 "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}}},
        "status": {"currentNumberScheduled": N_NODES, "desiredNumberScheduled": N_NODES, "numberReady": N_NODES},
    }


def _ds_uid() -> str:
    return str(uuid.UUID(bytes=hashlib.sha256(f"daemonset/{DS_NAME}".encode()).digest()[:16], version=4))


def _node(name: str, ip: str, it: CatalogType, pool: str, zone: str, created: datetime, now: datetime,
          rng: random.Random) -> Doc:
    at = _ts(created)
    beat = _ts(now - timedelta(seconds=rng.randint(1, 40)))
    capacity = {"cpu": str(it.cpu_m // 1000), "ephemeral-storage": "83873772Ki", "hugepages-1Gi": "0",
                "hugepages-2Mi": "0", "memory": f"{it.mem_mib * 1024}Ki", "pods": str(it.pods)}
    allocatable = dict(capacity, cpu=f"{it.alloc_cpu_m}m", memory=f"{it.alloc_mem_mib * 1024}Ki",
                       **{"ephemeral-storage": "76224326324"})
    labels = {**{k: v for k, v in it.labels.items() if k.startswith("karpenter.k8s.aws/")},
              "karpenter.sh/nodepool": pool, "karpenter.sh/initialized": "true", "karpenter.sh/registered": "true",
              "karpenter.sh/capacity-type": "on-demand", "node.kubernetes.io/instance-type": it.name,
              "topology.kubernetes.io/zone": zone, "topology.kubernetes.io/region": "us-east-1",
              "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": it.arch,
              "beta.kubernetes.io/instance-type": it.name, "beta.kubernetes.io/arch": it.arch,
              "beta.kubernetes.io/os": "linux", "failure-domain.beta.kubernetes.io/zone": zone,
              "failure-domain.beta.kubernetes.io/region": "us-east-1", "team": "platform"}
    images = [{"names": [f"registry.example/image-{i}@sha256:{hashlib.sha256(f'{i}'.encode()).hexdigest()}",
                         f"registry.example/image-{i}:1.{i}.0"], "sizeBytes": 10_000_000 + 7919 * i}
              for i in range(12)]
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {
            "name": name, "uid": _uid(rng), "resourceVersion": "0", "creationTimestamp": at, "labels": labels,
            "annotations": {"karpenter.sh/nodepool-hash": HASH, "karpenter.sh/nodepool-hash-version": "v3",
                            "alpha.kubernetes.io/provided-node-ip": ip, "node.alpha.kubernetes.io/ttl": "0",
                            "volumes.kubernetes.io/controller-managed-attach-detach": "true"},
            "finalizers": ["karpenter.sh/termination"],
            "managedFields": [
                _managed("kubelet", "Update", at, {"f:metadata": {"f:annotations": {}, "f:labels": {}}}),
                _managed("karpenter", "Update", at, {"f:metadata": {"f:finalizers": {}, "f:labels": {}}}),
                _managed("kube-controller-manager", "Update", at, {"f:metadata": {"f:annotations": {}}}),
                _managed("kubelet", "Update", beat, {"f:status": {"f:conditions": {}, "f:images": {}}}, "status"),
            ],
        },
        "spec": {"providerID": f"aws:///{zone}/i-0{rng.getrandbits(64):016x}"},
        "status": {
            "addresses": [{"type": "InternalIP", "address": ip}, {"type": "InternalDNS", "address": name},
                          {"type": "Hostname", "address": name}],
            "capacity": capacity, "allocatable": allocatable,
            "conditions": [
                *({"type": kind, "status": "False", "reason": reason, "message": reason, "lastHeartbeatTime": beat,
                   "lastTransitionTime": at}
                  for kind, reason in (("MemoryPressure", "KubeletHasSufficientMemory"),
                                       ("DiskPressure", "KubeletHasNoDiskPressure"),
                                       ("PIDPressure", "KubeletHasSufficientPID"))),
                {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready",
                 "lastHeartbeatTime": beat, "lastTransitionTime": _ts(created + timedelta(seconds=40))},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "images": images,
            "nodeInfo": {"architecture": it.arch, "bootID": _uid(rng), "machineID": f"{rng.getrandbits(128):032x}",
                         "systemUUID": _uid(rng), "containerRuntimeVersion": "containerd://1.7.23",
                         "kernelVersion": "6.1.115-126.197.amzn2023", "kubeProxyVersion": "v1.31.2-eks-94953ac",
                         "kubeletVersion": "v1.31.2-eks-94953ac", "operatingSystem": "linux",
                         "osImage": "Amazon Linux 2023.6.20241111"},
        },
    }


def _pod(name: str, namespace: str, app: str, node: str, host_ip: str, pod_ip: str, cpu_m: int, mem_mib: int,
         started: datetime, owner: tuple[str, str, str], rng: random.Random) -> Doc:
    at = _ts(started)
    owner_kind, owner_name, owner_uid = owner
    daemon = owner_kind == "DaemonSet"
    labels = {"k8s-app": app, "controller-revision-hash": "6c9d8b7f4d"} if daemon else {
        "app.kubernetes.io/name": app, "pod-template-hash": owner_name.rsplit("-", 1)[-1]}
    container: Doc = {
        "name": "main", "image": f"registry.example/{namespace}/{app}:1.4.2",
        "ports": [{"containerPort": 8080, "name": "http", "protocol": "TCP"}],
        "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}},
                {"name": "LOG_LEVEL", "value": "info"}],
        "resources": {"requests": {"cpu": f"{cpu_m}m", "memory": f"{mem_mib}Mi"}, "limits": {"memory": f"{mem_mib}Mi"}},
        "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080, "scheme": "HTTP"}, "periodSeconds": 10},
        "volumeMounts": [{"name": "kube-api-access", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                          "readOnly": True}],
        "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
        "imagePullPolicy": "IfNotPresent",
    }
    spec: Doc = {
        "containers": [container], "nodeName": node, "dnsPolicy": "ClusterFirst", "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority", "priority": 2000001000 if daemon else 0,
        "restartPolicy": "Always", "schedulerName": "default-scheduler", "serviceAccountName": app,
        "securityContext": {}, "terminationGracePeriodSeconds": 30,
        "tolerations": [{"operator": "Exists"}] if daemon else [
            {"key": k, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
            for k in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")],
        "volumes": [{"name": "kube-api-access", "projected": {"defaultMode": 420, "sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}}]}}],
    }
    if daemon:
        spec["priorityClassName"] = "system-node-critical"
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}}}
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": name, "namespace": namespace, "uid": _uid(rng), "resourceVersion": "0",
            "generateName": name[:-5], "creationTimestamp": at, "labels": labels,
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": owner_kind, "name": owner_name, "uid": owner_uid,
                                 "controller": True, "blockOwnerDeletion": True}],
            "managedFields": [
                _managed("kube-controller-manager", "Update", at, {"f:metadata": {"f:generateName": {}, "f:labels": {},
                                                                                  "f:ownerReferences": {}},
                                                                   "f:spec": {"f:containers": {}}}),
                _managed("kubelet", "Update", at, {"f:status": {"f:conditions": {}, "f:containerStatuses": {}}},
                         "status"),
            ],
        },
        "spec": spec,
        "status": {
            "phase": "Running", "hostIP": host_ip, "hostIPs": [{"ip": host_ip}], "podIP": pod_ip,
            "podIPs": [{"ip": pod_ip}], "qosClass": "Burstable", "startTime": at,
            "conditions": [{"type": c, "status": "True", "lastProbeTime": None, "lastTransitionTime": at}
                           for c in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady",
                                     "PodScheduled")],
            "containerStatuses": [{"name": "main", "ready": True, "started": True, "restartCount": 0,
                                   "image": container["image"], "imageID": f"{container['image']}@sha256:{'ab' * 32}",
                                   "containerID": f"containerd://{rng.getrandbits(256):064x}",
                                   "state": {"running": {"startedAt": at}}, "lastState": {}}],
        },
    }


def synthetic_cluster(n_nodes: int = N_NODES, n_pods: int = N_PODS, *, now: datetime, seed: int = 11,
                      consolidate_after: str = "Never") -> SyntheticCluster:
    """``n_nodes`` initialized nodes of four NodePools (one on-demand family each, sizes xlarge to 4xlarge from
    the bundled catalog) carrying ``n_pods`` pods: one DaemonSet pod per node and workload pods that fill each
    node's allocatable CPU to within a few millicores, so no pod fits on another node and no cheaper node fits
    a node's pods (a cluster consolidation has converged on)."""
    rng = random.Random(seed)
    catalog = load_catalog()
    per_node = (n_pods - n_nodes) // n_nodes
    extra = (n_pods - n_nodes) - per_node * n_nodes
    pools = [nodepool(name, family, now, consolidate_after, 3 + i) for i, (name, family, _) in enumerate(POOLS)]
    cluster = SyntheticCluster(pools, _daemonset(now), [], [])
    owner_uids: dict[str, str] = {}
    for index in range(n_nodes):
        pool, family, _ = rng.choices(POOLS, weights=[p[2] for p in POOLS])[0]
        size = rng.choices([s for s, _ in SIZES], weights=[w for _, w in SIZES])[0]
        it = catalog[f"{family}.{size}"]
        ip = f"10.{(index >> 16) & 255}.{(index >> 8) & 255}.{index & 255}"
        name = f"ip-{ip.replace('.', '-')}.ec2.internal"
        created = now - timedelta(hours=rng.uniform(2, 20 * 24))
        cluster.nodes.append(_node(name, ip, it, pool, rng.choice(ZONES), created, now, rng))
        cluster.pool_of[name] = pool
        here: list[Doc] = []
        started = created + timedelta(seconds=60)
        here.append(_pod(f"{DS_NAME}-{index:05x}", DS_NAMESPACE, DS_NAME, name, ip, ip, DS_CPU_M, DS_MEM_MIB,
                         started, ("DaemonSet", DS_NAME, _ds_uid()), rng))
        count = per_node + (1 if index < extra else 0)
        cpu = (it.alloc_cpu_m - DS_CPU_M) // count
        mem = int((it.alloc_mem_mib - DS_MEM_MIB) * 0.7) // count
        for k in range(count):
            app = f"{pool}-{size}-svc{k}"
            rs = f"{app}-{hashlib.sha256(app.encode()).hexdigest()[:10]}"
            owner = ("ReplicaSet", rs, owner_uids.setdefault(rs, _uid(rng)))
            pod_ip = f"100.{(index >> 8) & 255}.{index & 255}.{k + 1}"
            here.append(_pod(f"{rs}-{index:05x}", NAMESPACES[k % len(NAMESPACES)], app, name, ip, pod_ip, cpu, mem,
                             started + timedelta(minutes=rng.uniform(1, 60)), owner, rng))
        cluster.pods.extend(here)
        cluster.pods_on[name] = here
    return cluster


# -- the synthetic API server: what the watcher's list/watch calls return -------------------------------------------


class _Content:
    def __init__(self, queue: asyncio.Queue[bytes]) -> None:
        self.queue = queue

    async def readany(self) -> bytes:
        return await self.queue.get()


class _Response:
    """What ``KubeWatcher`` reads of an aiohttp response: status, read(), content.readany(), release(), close()."""

    status = 200

    def __init__(self, body: bytes = b"", queue: asyncio.Queue[bytes] | None = None) -> None:
        self.body = body
        self.content = _Content(queue or asyncio.Queue())

    async def read(self) -> bytes:
        return self.body

    def release(self) -> None:
        pass

    def close(self) -> None:
        pass


class SyntheticApi:
    """Stands in for the kube-apiserver behind ``KubeWatcher.lister``: every kind lists empty at resourceVersion
    1, then its watch stream yields the chunks the benchmark sends (JSON watch events, one per line)."""

    def __init__(self) -> None:
        self.streams: dict[str, asyncio.Queue[bytes]] = {}
        self.watching: dict[str, asyncio.Event] = {}
        self.rv = 10

    def _stream(self, kind: str) -> asyncio.Queue[bytes]:
        self.watching.setdefault(kind, asyncio.Event())
        return self.streams.setdefault(kind, asyncio.Queue())

    def lister(self, spec: Any) -> Any:
        async def call(**kwargs: Any) -> _Response:
            if kwargs.get("watch"):
                stream = self._stream(spec.kind)
                self.watching[spec.kind].set()
                return _Response(queue=stream)
            return _Response(json.dumps({"kind": f"{spec.kind}List", "metadata": {"resourceVersion": "1"},
                                         "items": []}).encode())
        return call

    def encode(self, type_: str, obj: Doc) -> bytes:
        """One watch event line; the object gets the next resourceVersion."""
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        return json.dumps({"type": type_, "object": obj}, separators=(",", ":")).encode() + b"\n"

    def send(self, kind: str, chunk: bytes) -> None:
        self._stream(kind).put_nowait(chunk)


# -- servers ----------------------------------------------------------------------------------------------------------


def _tcp_open(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=2):
            return True
    except OSError:
        return False


def _read_env(infra_dir: Path) -> dict[str, str]:
    try:
        return {str(k): str(v) for k, v in json.loads((infra_dir / "env.json").read_text()).items()}
    except (OSError, ValueError):
        return {}


def _answer(env: Mapping[str, str]) -> tuple[str, str] | None:
    """(Kafka bootstrap, database URL) when both servers of ``env`` accept connections."""
    bootstrap, url, port = env.get("KAFKA_BOOTSTRAP", ""), env.get("DATABASE_URL", ""), env.get("PGPORT", "")
    host, _, kport = bootstrap.rpartition(":")
    if not (bootstrap and url and port.isdigit() and kport.isdigit()):
        return None
    if _tcp_open(host, int(kport)) and _tcp_open("127.0.0.1", int(port)):
        return bootstrap, url
    return None


@contextlib.contextmanager
def servers() -> Iterator[tuple[str, str, str]]:
    """(Kafka bootstrap, PostgreSQL URL, where they come from): the servers of ``.infra/env.json`` when they
    answer, else Kafka and PostgreSQL started with deploy/local/ in a private EBB_INFRA_DIR, stopped after."""
    shared = Path(os.environ.get("EBB_INFRA_DIR", REPO_ROOT / ".infra"))
    found = _answer(_read_env(shared))
    if found is not None:
        yield found[0], found[1], f"running servers of {shared}/env.json"
        return
    own = Path(tempfile.mkdtemp(prefix="ebb-bench-infra-"))
    env = {**os.environ, "EBB_INFRA_DIR": str(own)}
    scripts = [REPO_ROOT / "deploy" / "local" / f"{c}.sh" for c in ("kafka", "postgres")]
    _log(f"no servers answer under {shared}; starting Kafka and PostgreSQL in {own}")
    try:
        started = [subprocess.Popen([str(s), "start"], env=env, stdin=subprocess.DEVNULL, stdout=sys.stderr)
                   for s in scripts]
        if any(p.wait() != 0 for p in started):
            raise SystemExit(f"starting the servers failed; logs in {own}/logs")
        found = _answer(_read_env(own))
        if found is None:
            raise SystemExit(f"the servers started in {own} do not answer")
        yield found[0], found[1], "Kafka and PostgreSQL started by the benchmark (deploy/local/)"
    finally:
        for script in scripts:
            subprocess.run([str(script), "stop"], env=env, stdin=subprocess.DEVNULL, stdout=sys.stderr, check=False)
        with contextlib.suppress(OSError):
            # postgres.sh keeps the data directory outside EBB_INFRA_DIR when the postgres user cannot reach it
            # (removed by its next start there, which will not come): <tmp>/ebb-postgres.XXXXXX
            outside = Path((own / "postgres" / "datadir").read_text().strip())
            if outside.name.startswith("ebb-postgres."):
                shutil.rmtree(outside, ignore_errors=True)
        shutil.rmtree(own, ignore_errors=True)


# -- the planner process -------------------------------------------------------------------------------------------


def planner_process(config: Mapping[str, Any]) -> None:
    """``python -m bench _case load-planner CONFIG``: the consolidation-planner as ``app.run`` builds it (KafkaBus,
    DecisionStore on PostgreSQL, SnapshotStore, Planner), always the leader. Reports on stdout, one JSON per line:
    objects applied (count milestones, NodePools, tombstones), every pass, and at the end its peak RSS."""
    from ebb.adapters import logs
    from ebb.adapters.catalog import bundled_catalog
    from ebb_consolidation_planner import app
    from ebb_consolidation_planner.leadership import AlwaysLeader
    from ebb_consolidation_planner.planner import Planner
    from ebb_consolidation_planner.settings import Settings

    logs.configure(os.environ.get("EBB_BENCH_LOAD_PLANNER_LOG", "warning"))

    def emit(**values: Any) -> None:
        sys.stdout.write(json.dumps(values) + "\n")
        sys.stdout.flush()

    milestones = set(config["milestones"])
    planners: list[Planner] = []

    class CountingLeader:
        """The planner's ``AlwaysLeader``, counting how often it is asked: the planner's loop asks once per
        iteration."""

        fixed = False  # counted as a Lease would be

        def __init__(self) -> None:
            self.asked = 0
            self.always = AlwaysLeader()

        @property
        def is_leader(self) -> bool:
            self.asked += 1
            return self.always.is_leader

        async def run(self, stop: asyncio.Event) -> None:
            await self.always.run(stop)

    leader = CountingLeader()

    def ready(planner: Planner) -> None:
        """Wraps (on this instance only) the consumer's handler and the pass to time them."""
        planners.append(planner)
        if planner.objects.bundled_catalog is None:
            # app.run builds SnapshotStore() without a catalog: the snapshot would have no instance types
            planner.objects.bundled_catalog = bundled_catalog
        handle, plan_once = planner.handle, planner.plan_once
        evaluation = "ebb_voluntary_disruption_decision_evaluation_duration_seconds_sum"
        whole_pass = {"reason": "", "consolidation_type": ""}  # one observation per pass, every method

        async def timed_handle(delivery: Any) -> None:
            await handle(delivery)
            n = len(planner.objects)
            if n in milestones:
                milestones.discard(n)
                emit(event="count", n=n, t=time.time(), asked=leader.asked)
            message = delivery.message
            if getattr(message, "kind", "") == "NodePool":
                emit(event="nodepool", key=delivery.key, t=time.time())
            elif getattr(message, "deleted", False):
                emit(event="deleted", key=delivery.key, t=time.time())

        async def timed_plan_once() -> Any:
            before = planner.metrics.registry.get_sample_value(evaluation, whole_pass) or 0.0
            version, start, reused = planner.objects.version, time.time(), planner.passes_reused
            cpu = time.process_time()
            result = await plan_once()
            after = planner.metrics.registry.get_sample_value(evaluation, whole_pass) or 0.0
            emit(event="pass", start=start, end=time.time(), version=version, evaluation=after - before,
                 cpu=time.process_time() - cpu,
                 asked=leader.asked, reused=planner.passes_reused - reused,
                 commands=[[c.method, list(c.nodes)] for c in result.commands] if result else None,
                 proposed=planner.proposed)
            return result

        planner.handle = timed_handle  # type: ignore[method-assign]
        planner.plan_once = timed_plan_once  # type: ignore[method-assign]

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader()
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)

        async def wait_stop() -> None:
            await reader.readline()  # a line or EOF: stop
            stop.set()

        settings = Settings(kafka_bootstrap=config["bootstrap"], topic_prefix=config["prefix"],
                            group=f"bench-planner-{config['run']}", database_url=config["database_url"],
                            cluster=config["cluster"], debounce_seconds=config["debounce"],
                            validation_delay_seconds=config["validation_delay"], metrics_port=0)
        started = asyncio.Event()
        waiter = asyncio.create_task(wait_stop())
        runner = asyncio.create_task(app.run(settings, stop, leader=leader, started=started,
                                             planner_ready=ready))
        await asyncio.wait([asyncio.create_task(started.wait()), runner], return_when=asyncio.FIRST_COMPLETED)
        emit(event="started", t=time.time())
        await runner
        waiter.cancel()
        planner = planners[0]
        emit(event="final", peak_rss_mib=peak_rss_mib(), passes=planner.passes, proposed=planner.proposed,
             approved=planner.approved, rejected=planner.rejected)

    profile = os.environ.get("EBB_BENCH_LOAD_PROFILE", "")
    if not profile:
        asyncio.run(main())
        return
    import cProfile
    import pstats

    profiler = cProfile.Profile()
    profiler.runcall(asyncio.run, main())
    with open(profile, "w", encoding="utf-8") as out:
        stats = pstats.Stats(profiler, stream=out)
        stats.sort_stats("tottime").print_stats(30)
        stats.sort_stats("cumtime").print_stats(40)


class PlannerChild:
    """The planner process and what it reported."""

    def __init__(self) -> None:
        self.process: asyncio.subprocess.Process | None = None
        self.events: list[Doc] = []
        self.changed = asyncio.Event()
        self.reader: asyncio.Task[None] | None = None
        self.stderr = tempfile.TemporaryFile()  # noqa: SIM115 (closed in stop()/kill())

    async def start(self, config: Mapping[str, Any]) -> None:
        self.process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bench", "_case", "load-planner", json.dumps(config),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=self.stderr,
            env={**os.environ, "PYTHONHASHSEED": "0"}, limit=2**24)
        self.reader = asyncio.create_task(self._read())
        await self.wait_for(lambda e: e["event"] == "started", "the planner to start")

    async def _read(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        while line := await self.process.stdout.readline():
            with contextlib.suppress(ValueError):
                self.events.append(json.loads(line))
                self.changed.set()

    def failure(self) -> str:
        self.stderr.seek(0)
        return self.stderr.read().decode("utf-8", "replace")[-3000:]

    async def wait_for(self, probe: Any, what: str, within: float = WAIT) -> Doc:
        deadline = time.monotonic() + within
        seen = 0
        while True:
            for event in self.events[seen:]:
                if probe(event):
                    return event
            seen = len(self.events)
            if self.process is not None and self.process.returncode is not None:
                raise SystemExit(f"the planner process ended while waiting for {what}:\n{self.failure()}")
            left = deadline - time.monotonic()
            if left <= 0:
                raise SystemExit(f"timed out after {within:.0f}s waiting for {what}:\n{self.failure()}")
            self.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), min(left, 1.0))

    async def stop(self) -> Doc:
        assert self.process is not None and self.process.stdin is not None
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self.process.stdin.write(b"stop\n")
            await self.process.stdin.drain()
            self.process.stdin.close()
        final = await self.wait_for(lambda e: e["event"] == "final", "the planner to stop", within=60)
        await self.process.wait()
        if self.reader is not None:
            await self.reader
        return final

    def kill(self) -> None:
        if self.process is not None and self.process.returncode is None:
            self.process.kill()


# -- the run ----------------------------------------------------------------------------------------------------------


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def _summary(values: list[float]) -> Doc:
    nan = float("nan")
    return {"n": len(values), "p50": _pct(values, 50), "p99": _pct(values, 99),
            "max": max(values) if values else nan, "mean": statistics.fmean(values) if values else nan}


@dataclass(frozen=True)
class Size:
    nodes: int = N_NODES
    pods: int = N_PODS
    sequential: int = SEQUENTIAL
    waves: int = WAVES
    wave_size: int = WAVE_SIZE


def size_from_env() -> Size:
    """``EBB_BENCH_LOAD=nodes,pods,sequential,waves,wave_size`` shrinks the run (a smoke test); unset: the full
    size."""
    text = os.environ.get("EBB_BENCH_LOAD", "")
    if not text:
        return Size()
    return Size(*(int(v) for v in text.split(",")))


async def _run(bootstrap: str, database_url: str, size: Size) -> Doc:
    from aiokafka import AIOKafkaConsumer
    from aiokafka.admin import AIOKafkaAdminClient

    from ebb.adapters.bus import KafkaBus
    from ebb.adapters.store.decision_store import DecisionStore
    from ebb.adapters.store.migrate import upgrade_async
    from ebb.contracts import (
        TOPIC_CLUSTER_OBJECTS,
        TOPIC_DISRUPTION_COMMANDS,
        TOPIC_DISRUPTION_EVENTS,
        DisruptionCommand,
        DisruptionEvent,
        from_kafka,
    )
    from ebb.core.decision import State
    from ebb_cluster_watcher.app import build_watcher, seed_from_topic
    from ebb_cluster_watcher.settings import Settings

    run = uuid.uuid4().hex[:8]
    prefix, cluster = f"bench-load-{run}.", f"bench-load-{run}"
    now = datetime.now(UTC)
    began = time.monotonic()
    _log(f"generating {size.nodes:,} nodes and {size.pods:,} pods (raw API objects)")
    synthetic = synthetic_cluster(size.nodes, size.pods, now=now)
    api = SyntheticApi()
    lines: dict[str, list[bytes]] = {
        "NodePool": [api.encode("ADDED", p) for p in synthetic.nodepools],
        "Node": [api.encode("ADDED", n) for n in synthetic.nodes],
        "Pod": [api.encode("ADDED", p) for p in synthetic.pods],
    }
    ds_line = api.encode("ADDED", synthetic.daemonset)
    total = synthetic.objects
    event_bytes = sum(len(x) for v in lines.values() for x in v) + len(ds_line)
    _log(f"{total:,} watch events, {event_bytes / 2**20:.0f} MiB of JSON, in {time.monotonic() - began:.1f}s")

    await upgrade_async(database_url)
    # the executor's part (the module's docstring), its applied commands recorded under the run's cluster name
    stand_in = DecisionStore.from_url(database_url, cluster, consumer=cluster)
    child = PlannerChild()
    children: list[PlannerChild] = []  # planner processes started after ``child`` (the restart)
    commands: dict[str, tuple[float, float]] = {}  # node -> (received, Kafka timestamp)
    proposed: dict[str, float] = {}
    command_list: list[tuple[float, list[str]]] = []
    decisions: set[str] = set()
    ended: list[bool] = []  # per command, whether the stand-in executor ended its decision
    consumer_stop = asyncio.Event()
    stop = asyncio.Event()
    tasks: list[asyncio.Task[Any]] = []
    consumer: Any = None
    result: Doc = {"nodes": size.nodes, "pods": size.pods, "events": total, "event_mib": event_bytes / 2**20,
                   "validation_delay": VALIDATION_DELAY, "debounce": DEBOUNCE, "consolidate_after": "0s"}
    async with KafkaBus(bootstrap, prefix=prefix, source="/ebb/cluster-watcher",
                        client_id="ebb-cluster-watcher") as bus:
        try:
            await bus.ensure_topics([TOPIC_CLUSTER_OBJECTS, TOPIC_DISRUPTION_COMMANDS, TOPIC_DISRUPTION_EVENTS])
            # no consumer group: every partition, from the start, no coordinator and no rebalance
            reading = AIOKafkaConsumer(prefix + TOPIC_DISRUPTION_COMMANDS, prefix + TOPIC_DISRUPTION_EVENTS,
                                        bootstrap_servers=bootstrap, group_id=None, auto_offset_reset="earliest",
                                        enable_auto_commit=False)
            await reading.start()
            consumer = reading

            async def read_commands() -> None:
                while not consumer_stop.is_set():
                    batch = await reading.getmany(timeout_ms=100)
                    received = time.time()
                    for records in batch.values():
                        for record in records:
                            topic = record.topic.removeprefix(prefix)
                            message = from_kafka(topic, record.key, record.value, record.headers)
                            if isinstance(message, DisruptionCommand):
                                if message.decision_id in decisions:
                                    continue
                                decisions.add(message.decision_id)
                                command_list.append((received, list(message.nodes)))
                                for node in message.nodes:
                                    commands.setdefault(node, (received, record.timestamp / 1000))
                                at = datetime.now(UTC)
                                await stand_in.start(message, at)
                                ended.append(await stand_in.finish(message, State.ROLLED_BACK, at, hold_for=3600.0,
                                                                   why="the load benchmark has no executor"))
                            elif isinstance(message, DisruptionEvent) and message.phase == "Proposed":
                                proposed.setdefault(message.node, received)

            reader = asyncio.create_task(read_commands())
            tasks.append(reader)
            settings = Settings(kafka_bootstrap=bootstrap, topic_prefix=prefix, kinds=("Node", "Pod", "DaemonSet",
                                                                                      "NodePool"))
            watcher, publisher = build_watcher(settings, None, bus)
            watcher.lister = api.lister
            await seed_from_topic(watcher, bus)
            watch_task = asyncio.create_task(watcher.run(stop))
            tasks.append(watch_task)
            for kind in ("Node", "Pod", "DaemonSet", "NodePool"):
                api._stream(kind)
                await asyncio.wait_for(api.watching[kind].wait(), WAIT)

            config = {"bootstrap": bootstrap, "prefix": prefix, "run": run, "database_url": database_url,
                      "cluster": cluster, "debounce": DEBOUNCE, "validation_delay": VALIDATION_DELAY,
                      "milestones": [1, *range(1000, total, 1000), total]}
            _log("starting the planner process")
            await child.start(config)
            # warm-up: one object end to end, so the ingest below does not time group joins and topic metadata
            api.send("DaemonSet", ds_line)
            await child.wait_for(lambda e: e["event"] == "count" and e["n"] == 1, "the warm-up object")

            # (a) ingest
            _log(f"ingest: {total - 1:,} watch events → watcher → Kafka → planner")
            first = time.time()
            for kind in ("NodePool", "Node", "Pod"):
                chunk = lines[kind]
                for i in range(0, len(chunk), CHUNK):
                    api.send(kind, b"".join(chunk[i:i + CHUNK]))

            async def published_all() -> float:
                while publisher.published < total:  # noqa: ASYNC110 (the publisher has no event to wait on)
                    await asyncio.sleep(0.005)
                return time.time()

            progress = asyncio.create_task(_progress(publisher, child, total))
            tasks.append(progress)
            watcher_done = await asyncio.wait_for(published_all(), 900)
            applied = await child.wait_for(lambda e: e["event"] == "count" and e["n"] == total,
                                           "the planner to apply every object", within=900)
            progress.cancel()
            ingest = applied["t"] - first
            result["ingest"] = {"events": total - 1, "seconds": ingest, "events_per_second": (total - 1) / ingest,
                                "watcher_seconds": watcher_done - first,
                                "watcher_events_per_second": (total - 1) / (watcher_done - first)}
            _log(f"ingest: {(total - 1) / ingest:,.0f} events/s end to end ({ingest:.1f}s); watcher alone "
                 f"{(total - 1) / (watcher_done - first):,.0f} events/s")
            ingest_passes = [e for e in child.events if e["event"] == "pass" and e["start"] <= applied["t"]]
            warm = next(e for e in child.events if e["event"] == "count" and e["n"] == 1)
            result["ingest"]["planner_loop_iterations"] = applied["asked"] - warm["asked"]
            result["ingest"]["planner_loop_per_second"] = (applied["asked"] - warm["asked"]) / ingest

            # steady state: consolidateAfter Never → 0s; wait for a full pass that saw it
            pools_sent = time.time()
            api.send("NodePool", b"".join(api.encode("MODIFIED", nodepool(name, family, now, "0s", 0))
                                          for name, family, _ in POOLS))
            def pools_applied(_event: Doc) -> bool:
                return sum(1 for e in child.events if e["event"] == "nodepool" and e["t"] > pools_sent) >= len(POOLS)

            await child.wait_for(pools_applied, "the NodePools' change")
            seen = max(e["t"] for e in child.events if e["event"] == "nodepool")
            steady = await child.wait_for(lambda e: e["event"] == "pass" and e["start"] > seen,
                                          "a steady-state pass", within=WAIT)
            result["steady_commands"] = steady["commands"]
            _log(f"steady state: pass {steady['end'] - steady['start']:.2f}s, commands {steady['commands']}")

            # settled: the next passes (the pass interval's), nothing changing in the cluster or the store
            def settled_passes() -> list[Doc]:
                return [e for e in child.events if e["event"] == "pass" and e["start"] > steady["end"]][:SETTLED]

            await child.wait_for(lambda _e: len(settled_passes()) >= SETTLED, "the settled passes",
                                 within=WAIT + SETTLED * 10)
            settled = settled_passes()
            result["settled"] = {"passes": _summary([e["end"] - e["start"] for e in settled]),
                                 "reused": sum(e.get("reused", 0) for e in settled)}
            _log(f"settled: {SETTLED} passes, p50 {result['settled']['passes']['p50']:.3f}s, "
                 f"{result['settled']['reused']} answered from the last one")

            # (b) nodes made empty
            sequential, waves, wave_size = size.sequential, size.waves, size.wave_size
            *victims, restart_node, kill_node = _victims(synthetic, sequential + waves * wave_size + 2,
                                                         steady["commands"] or [])
            emptied: dict[str, float] = {}

            def empty(node: str) -> None:
                for pod in synthetic.pods_on[node][1:]:  # the DaemonSet pod stays
                    api.send("Pod", api.encode("DELETED", pod))
                emptied[node] = time.time()

            timeouts: list[Doc] = []  # steps whose nodes got no command within WAIT: recorded, the run goes on

            async def command_for(nodes: list[str], step: str) -> bool:
                deadline = time.monotonic() + WAIT
                while not all(n in commands for n in nodes):
                    if time.monotonic() > deadline:
                        missing = [n for n in nodes if n not in commands]
                        diagnosis = _diagnosis(child, nodes)
                        _log(f"  {step}: no command within {WAIT:.0f}s for {len(missing)} of {len(nodes)} nodes; "
                             f"{diagnosis}")
                        timeouts.append({"step": step, "missing": missing, "diagnosis": diagnosis})
                        return False
                    await asyncio.sleep(0.005)
                return True

            _log(f"latency: {sequential} nodes emptied one at a time, then {waves} waves of {wave_size}")
            for i, node in enumerate(victims[:sequential]):
                empty(node)
                if await command_for([node], f"node {i + 1}/{sequential}"):
                    _log(f"  node {i + 1}/{sequential}: {commands[node][0] - emptied[node]:.2f}s")
            rest = victims[sequential:]
            for w in range(waves):
                wave = rest[w * wave_size:(w + 1) * wave_size]
                for node in wave:
                    empty(node)
                if await command_for(wave, f"wave {w + 1}/{waves}"):
                    worst = max(commands[n][0] - emptied[n] for n in wave)
                    _log(f"  wave {w + 1}/{waves}: slowest {worst:.2f}s")
            result["timeouts"] = timeouts
            deleted_at = {e["key"].split("/")[1] + "/" + e["key"].split("/")[2]: e["t"]
                          for e in child.events if e["event"] == "deleted"}

            def applied_at(node: str) -> float:
                return float(max(deleted_at[f"{p['metadata']['namespace']}/{p['metadata']['name']}"]
                                 for p in synthetic.pods_on[node][1:]))

            def latencies(nodes: list[str]) -> Doc:
                """Over the nodes that got a command (a timed-out step's others are in ``timeouts``)."""
                nodes = [n for n in nodes if n in commands]
                return {"total": _summary([commands[n][0] - emptied[n] for n in nodes]),
                        "kafka_timestamp": _summary([commands[n][1] - emptied[n] for n in nodes]),
                        "to_planner": _summary([applied_at(n) - emptied[n] for n in nodes]),
                        "to_proposed": _summary([proposed[n] - emptied[n] for n in nodes if n in proposed]),
                        "proposed_to_command": _summary([commands[n][0] - proposed[n] for n in nodes
                                                         if n in proposed])}

            result["latency_sequential"] = latencies(victims[:sequential])
            result["sequential"], result["waves"], result["wave_size"] = sequential, waves, wave_size
            result["latency_waves"] = latencies(rest)
            result["latency_all"] = latencies(victims)
            result["commands"] = len(command_list)
            result["nodes_per_command"] = _summary([float(len(n)) for _, n in command_list])
            steady_passes = [e for e in child.events if e["event"] == "pass" and e["start"] > seen]
            result["passes"] = {
                "ingest": _summary([e["end"] - e["start"] for e in ingest_passes]),
                "steady": _summary([e["end"] - e["start"] for e in steady_passes]),
                "steady_evaluation": _summary([e["evaluation"] for e in steady_passes]),
                "steady_cpu": _summary([e.get("cpu", float("nan")) for e in steady_passes]),
            }
            result["watcher_peak_rss_mib"] = peak_rss_mib()
            final = await child.stop()
            result["planner"] = final

            # (c) the planner's restart, a node emptied while it was down: after a graceful stop (above: the
            # process asked to stop), then after a SIGKILL of the restarted process (its consumer group member
            # and its Kafka connections left behind as a crash leaves them)
            async def restart(node: str, how: str) -> tuple[PlannerChild, Doc]:
                _log(f"restart ({how}): a node emptied while the planner is down, a new planner process started")
                expected = publisher.published + len(synthetic.pods_on[node]) - 1
                empty(node)
                until = time.monotonic() + WAIT
                while publisher.published < expected:
                    if time.monotonic() > until:
                        raise SystemExit(f"the watcher did not publish {node}'s pods' deletions")
                    await asyncio.sleep(0.005)
                restarted = PlannerChild()
                children.append(restarted)
                launched = time.time()
                await restarted.start(config)
                seeded = next(e for e in restarted.events if e["event"] == "started")
                first_pass = await restarted.wait_for(lambda e: e["event"] == "pass", "the restarted planner's pass")
                deadline = time.monotonic() + WAIT  # a missing command is reported (nan), not fatal
                while (node not in proposed or node not in commands) and time.monotonic() < deadline:  # noqa: ASYNC110
                    await asyncio.sleep(0.01)
                nan = float("nan")
                figures = {"objects": total, "node": node, "how": how,
                           "to_seeded": seeded["t"] - launched,
                           "to_first_pass": first_pass["end"] - launched,
                           "to_proposed": proposed.get(node, nan + launched) - launched,
                           "to_command": commands.get(node, (nan + launched, 0.0))[0] - launched}
                _log(f"restart ({how}): " + "seeded {to_seeded:.1f}s, first pass {to_first_pass:.1f}s, Proposed "
                     "{to_proposed:.1f}s, command {to_command:.1f}s after the new process started".format(**figures))
                return restarted, figures

            restarted, result["restart"] = await restart(restart_node, "graceful stop")
            assert restarted.process is not None
            restarted.kill()  # SIGKILL
            await restarted.process.wait()
            restarted, result["restart_kill"] = await restart(kill_node, "SIGKILL")
            result["planner_restarted"] = await restarted.stop()
            stop.set()
            await watch_task

            result["watcher"] = {"published": publisher.published, "tombstones": publisher.tombstones}
            consumer_stop.set()
            await reader
            # every command read, the restarted planners' included, and each ended by the reader before the next
            result["stand_in"] = {"commands": len(decisions), "ended": sum(ended)}
            _log("Kafka round trips: a bare producer awaiting each send, a consumer committing each record")
            result["kafka"] = await kafka_round_trips(bootstrap, f"{prefix}probe")
        finally:
            stop.set()
            consumer_stop.set()
            child.kill()
            for other in children:
                other.kill()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            if consumer is not None:
                await consumer.stop()  # before the topics go, or its metadata requests create them again
            await stand_in.close()
            await _clean(bootstrap, prefix, database_url, cluster, AIOKafkaAdminClient)
    result["seconds"] = time.monotonic() - began
    return result


async def kafka_round_trips(bootstrap: str, topic: str, count: int = 200) -> Doc:
    """Milliseconds per record of a bare aiokafka producer awaiting each send (acks=all, idempotent, as the
    KafkaBus does) and of a consumer committing after each record (as the KafkaBus does), on ``topic``."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True)
    await producer.start()
    try:
        await producer.send_and_wait(topic, b"warm-up", key=b"k")
        start = time.perf_counter()
        for i in range(count):
            await producer.send_and_wait(topic, b"x" * 2000, key=str(i).encode())
        send_ms = (time.perf_counter() - start) / count * 1000
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=f"{topic}-probe",
                                enable_auto_commit=False, auto_offset_reset="earliest")
    await consumer.start()
    try:
        done, began = 0, 0.0
        deadline = time.monotonic() + WAIT
        while done < count + 1 and time.monotonic() < deadline:
            for partition, records in (await consumer.getmany(timeout_ms=500)).items():
                for record in records:
                    if done == 1:
                        began = time.perf_counter()  # the first commit also finds the coordinator
                    await consumer.commit({partition: record.offset + 1})
                    done += 1
        commit_ms = (time.perf_counter() - began) / max(1, done - 1) * 1000
    finally:
        await consumer.stop()
    return {"send_ms": send_ms, "commit_ms": commit_ms, "records": count}


async def _progress(publisher: Any, child: PlannerChild, total: int) -> None:
    while True:
        await asyncio.sleep(5)
        passes = sum(1 for e in child.events if e["event"] == "pass")
        applied = max((e["n"] for e in child.events if e["event"] == "count"), default=0)
        _log(f"  watcher published {publisher.published:,}/{total:,}; planner applied {applied:,}+, "
             f"{passes} passes so far")


def _diagnosis(child: PlannerChild, nodes: list[str]) -> str:
    """What the planner did since ``nodes`` were emptied: the pod deletions it applied, its passes and what they
    commanded (for a step that timed out)."""
    # the nodes were emptied after the last event before their first deletion: count from the first deletion on
    deleted = [e for e in child.events if e["event"] == "deleted"]
    passes = [e for e in child.events if e["event"] == "pass"]
    since = deleted[-1]["t"] if deleted else 0.0
    after = [e for e in passes if e["start"] >= since]
    named = [[method, sorted(set(ns) & set(nodes))] for e in after for method, ns in (e["commands"] or [])
             if set(ns) & set(nodes)]
    return (f"the planner applied {len(deleted)} deletions in all (last at {since:.1f}); {len(after)} passes "
            f"since the last, {sum(len(e['commands'] or []) for e in after)} commands in them, "
            f"{len(named)} naming these nodes (first: {named[:2]}); proposed in all "
            f"{after[-1]['proposed'] if after else 'n/a'}")


def _victims(cluster: SyntheticCluster, count: int, steady: list[Any]) -> list[str]:
    """Nodes to empty, spread over the pools, none named in a steady-state command."""
    busy = {n for _, nodes in steady for n in nodes}
    by_pool: dict[str, list[str]] = {}
    for node in cluster.nodes:
        name = node["metadata"]["name"]
        if name not in busy:
            by_pool.setdefault(cluster.pool_of[name], []).append(name)
    rng = random.Random(5)
    for names in by_pool.values():
        rng.shuffle(names)
    out: list[str] = []
    while len(out) < count and any(by_pool.values()):
        for names in by_pool.values():
            if names and len(out) < count:
                out.append(names.pop())
    return out


async def _clean(bootstrap: str, prefix: str, database_url: str, cluster: str, admin_class: Any) -> None:
    """Remove this run's topics and store rows (the stand-in executor's applied commands are under the consumer name
    ``cluster``)."""
    from sqlalchemy import text
    from sqlalchemy.ext.asyncio import create_async_engine

    from ebb.adapters.store.migrate import async_url

    with contextlib.suppress(Exception):
        admin = admin_class(bootstrap_servers=bootstrap)
        await admin.start()
        try:
            topics = [t for t in await admin.list_topics() if t.startswith(prefix)]
            if topics:
                await admin.delete_topics(topics)
        finally:
            await admin.close()
    with contextlib.suppress(Exception):
        engine = create_async_engine(async_url(database_url))
        try:
            async with engine.begin() as connection:
                decisions = "SELECT id FROM decisions WHERE cluster = :c"
                await connection.execute(text(f"DELETE FROM decision_events WHERE decision_id IN ({decisions})"),
                                         {"c": cluster})
                await connection.execute(text("DELETE FROM budget_ledger WHERE cluster = :c"), {"c": cluster})
                await connection.execute(text("DELETE FROM decisions WHERE cluster = :c"), {"c": cluster})
                await connection.execute(text("DELETE FROM holds WHERE cluster = :c"), {"c": cluster})
                await connection.execute(text("DELETE FROM outbox WHERE cluster = :c"), {"c": cluster})
                await connection.execute(text("DELETE FROM processed_messages WHERE consumer = :c"), {"c": cluster})
        finally:
            await engine.dispose()


def case_load() -> Doc:
    """``python -m bench _case load``: the whole load benchmark (this process is the watcher)."""
    machine_load = os.getloadavg()
    with servers() as (bootstrap, database_url, origin):
        _log(f"servers: {origin} (Kafka {bootstrap})")
        result = asyncio.run(_run(bootstrap, database_url, size_from_env()))
    result["servers"] = origin
    result["load_average_before"] = machine_load[0]
    result["load_average_after"] = os.getloadavg()[0]
    result["code"] = _code_version()
    return result


async def _watcher_only(bootstrap: str, size: Size, producer_options: Mapping[str, Any]) -> Doc:
    """The watcher alone: every synthetic watch event through ``KubeWatcher`` and the ``Publisher`` on a
    ``KafkaBus`` until Kafka acknowledged the last record; no planner. Wall seconds and this process's CPU
    seconds (the watcher and aiokafka; the events were generated before)."""
    from aiokafka.admin import AIOKafkaAdminClient

    from ebb.adapters.bus import KafkaBus
    from ebb.contracts import TOPIC_CLUSTER_OBJECTS
    from ebb_cluster_watcher.app import build_watcher
    from ebb_cluster_watcher.settings import Settings

    prefix = f"bench-watcher-{uuid.uuid4().hex[:8]}."
    synthetic = synthetic_cluster(size.nodes, size.pods, now=datetime.now(UTC))
    api = SyntheticApi()
    lines = {"NodePool": [api.encode("ADDED", p) for p in synthetic.nodepools],
             "Node": [api.encode("ADDED", n) for n in synthetic.nodes],
             "Pod": [api.encode("ADDED", p) for p in synthetic.pods]}
    ds_line = api.encode("ADDED", synthetic.daemonset)
    total = synthetic.objects
    bus = KafkaBus(bootstrap, prefix=prefix, source="/ebb/cluster-watcher", client_id="ebb-cluster-watcher")
    if producer_options:  # an experiment with the producer's settings: KafkaBus.start with these added
        bus.client_options = {**bus.client_options}
        original_start = bus.start

        async def start_with_options() -> None:
            saved, bus.client_options = bus.client_options, {**bus.client_options, **producer_options}
            try:
                await original_start()
            finally:
                bus.client_options = saved
        bus.start = start_with_options  # type: ignore[method-assign]
    stop = asyncio.Event()
    try:
        await bus.start()
        await bus.ensure_topics([TOPIC_CLUSTER_OBJECTS])
        watcher, publisher = build_watcher(Settings(kafka_bootstrap=bootstrap, topic_prefix=prefix,
                                                    kinds=("Node", "Pod", "DaemonSet", "NodePool")), None, bus)
        watcher.lister = api.lister
        task = asyncio.create_task(watcher.run(stop))
        for kind in ("Node", "Pod", "DaemonSet", "NodePool"):
            api._stream(kind)
            await asyncio.wait_for(api.watching[kind].wait(), WAIT)
        api.send("DaemonSet", ds_line)  # warm-up: the producer's connection and the topic's metadata
        while publisher.published < 1:  # noqa: ASYNC110 (the publisher has no event to wait on)
            await asyncio.sleep(0.005)
        load_before = os.getloadavg()[0]
        cpu, wall = time.process_time(), time.monotonic()
        for kind in ("NodePool", "Node", "Pod"):
            chunk = lines[kind]
            for i in range(0, len(chunk), CHUNK):
                api.send(kind, b"".join(chunk[i:i + CHUNK]))
        while publisher.published < total:  # noqa: ASYNC110
            await asyncio.sleep(0.005)
        wall, cpu = time.monotonic() - wall, time.process_time() - cpu
        stop.set()
        await task
    finally:
        await bus.close()
        with contextlib.suppress(Exception):
            admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
            await admin.start()
            try:
                await admin.delete_topics([t for t in await admin.list_topics() if t.startswith(prefix)])
            finally:
                await admin.close()
    events = total - 1
    return {"events": events, "seconds": wall, "events_per_second": events / wall, "cpu_seconds": cpu,
            "cpu_us_per_event": cpu / events * 1e6, "events_per_cpu_second": events / cpu,
            "load_average_before": load_before, "load_average_after": os.getloadavg()[0],
            "producer_options": dict(producer_options)}


def case_watcher(runs: int = 3) -> Doc:
    """``python -m bench _case watcher``: the watcher alone into a real Kafka (``_watcher_only``), ``runs`` times.
    ``EBB_BENCH_WATCHER_PRODUCER`` (JSON) adds aiokafka producer settings, e.g. ``{"max_batch_size": 262144}``."""
    import logging

    import structlog

    # as the service (``ebb.adapters.service.serve``, log level info): the publisher's debug line is not written
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.INFO))
    options = json.loads(os.environ.get("EBB_BENCH_WATCHER_PRODUCER", "") or "{}")
    with servers() as (bootstrap, _, origin):
        _log(f"servers: {origin} (Kafka {bootstrap})")
        results = []
        for _ in range(runs):
            results.append(asyncio.run(_watcher_only(bootstrap, size_from_env(), options)))
            _log(f"watcher alone: {results[-1]['events_per_second']:,.0f} events/s, "
                 f"{results[-1]['cpu_us_per_event']:.0f} CPU us/event")
    return {"runs": results, "servers": origin, "code": _code_version()}


def render_watcher(r: Doc) -> list[str]:
    lines = [f"The watcher alone into Kafka ({r['runs'][0]['events']:,} watch events, {r['servers']}; measured code: "
             f"{r['code']}):", "", "| run | wall s | events/s | CPU s | CPU us/event | load average before/after |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {i + 1} | {x['seconds']:.1f} | {x['events_per_second']:,.0f} | {x['cpu_seconds']:.1f} | "
              f"{x['cpu_us_per_event']:.0f} | {x['load_average_before']:.1f} / {x['load_average_after']:.1f} |"
              for i, x in enumerate(r["runs"])]
    return [*lines, ""]


def _code_version() -> str:
    """Whether the watcher's, planner's or library's files differed from the checkout's commit when measured. The
    commit itself is the results page's own (its git history), so the page does not name it."""
    out = subprocess.run(["git", "status", "--porcelain", "--", "services/cluster-watcher",
                          "services/consolidation-planner", "libs/ebb/src"], cwd=REPO_ROOT, capture_output=True,
                         text=True, check=False)
    return "the checkout, with uncommitted changes to the measured code" if out.stdout.strip() else "the checkout"


def render(r: Doc) -> list[str]:
    """The markdown section of ``docs/benchmarks.md`` for one run."""
    ingest, passes, planner = r["ingest"], r["passes"], r["planner"]

    def row(name: str, s: Doc) -> str:
        return f"| {name} | {s['n']} | {s['p50']:.2f} | {s['p99']:.2f} | {s['max']:.2f} |"

    return [f"### Load: watcher → Kafka → planner ({r['nodes']:,} nodes, {r['pods']:,} pods)", "",
             f"Servers: {r['servers']}; measured code: {r.get('code', '?')}; load average (1 min) "
             f"{r['load_average_before']:.1f} before the run and {r.get('load_average_after', float('nan')):.1f} "
             f"after; whole run {r['seconds']:.0f} s.", "",
             "| figure | value |", "|---|---|",
             f"| watch events (ADDED; {r['event_mib']:.0f} MiB of API JSON) | {ingest['events']:,} |",
             f"| ingest, first event into the watcher → all applied in the planner's SnapshotStore | "
             f"{ingest['seconds']:.1f} s, **{ingest['events_per_second']:,.0f} events/s** |",
             f"| the watcher alone (first event → last record acknowledged by Kafka) | "
             f"{ingest['watcher_seconds']:.1f} s, {ingest['watcher_events_per_second']:,.0f} events/s |",
             f"| planner passes during the ingest (wall, each) | {passes['ingest']['n']} passes, p50 "
             f"{passes['ingest']['p50']:.2f} s, max {passes['ingest']['max']:.2f} s |",
             f"| iterations of the planner's loop (`Planner.run`) during the ingest; idle it ticks 5/s | "
             f"{ingest.get('planner_loop_iterations', 0):,} ({ingest.get('planner_loop_per_second', 0):,.0f}/s) |",
             f"| commands at steady state (before any node was emptied) | {r['steady_commands']} |",
             f"| planner pass at steady state, `plan_once` wall (p50 / max) | {passes['steady']['p50']:.2f} s / "
             f"{passes['steady']['max']:.2f} s ({passes['steady']['n']} passes) |",
             "| of which snapshot + engine (`ebb_voluntary_disruption_decision_evaluation_duration_seconds`, "
             "p50 / max) | "
             f"{passes['steady_evaluation']['p50']:.2f} s / {passes['steady_evaluation']['max']:.2f} s |",
             *([f"| the planner process's CPU time during the pass (p50 / max; with whatever else its event loop ran "
                f"meanwhile: applying the objects that arrived) | {passes['steady_cpu']['p50']:.2f} s / "
                f"{passes['steady_cpu']['max']:.2f} s |"] if "steady_cpu" in passes else []),
             *([f"| planner pass on the settled cluster (the pass interval's, nothing changed since the pass before), "
                f"`plan_once` wall (p50 / max; answered from the last pass) | {r['settled']['passes']['p50']:.3f} s / "
                f"{r['settled']['passes']['max']:.3f} s ({r['settled']['reused']} of {r['settled']['passes']['n']}) |"]
               if "settled" in r else []),
             f"| approved commands / nodes per command (mean, max) | {r['commands']} / "
             f"{r['nodes_per_command']['mean']:.1f}, {r['nodes_per_command']['max']:.0f} |",
             f"| planner: passes, proposed, approved, rejected | {planner['passes']}, {planner['proposed']}, "
             f"{planner['approved']}, {planner['rejected']} |",
             f"| peak RSS: planner process | {planner['peak_rss_mib']:.0f} MiB |",
             f"| Kafka round trips on these servers ({r['kafka']['records']} records): a producer awaiting each "
             f"send (acks=all), a consumer committing each record | {r['kafka']['send_ms']:.1f} ms, "
             f"{r['kafka']['commit_ms']:.1f} ms |",
             f"| peak RSS: watcher process (holds the synthetic events too) | {r['watcher_peak_rss_mib']:.0f} MiB |",
             "",
             f"Node emptied → approved command read from `ebb.disruption.commands`, seconds (validation delay "
             f"{r['validation_delay']:g} s, debounce {r['debounce']:g} s, consolidateAfter {r['consolidate_after']}):",
             "", "| nodes | n | p50 | p99 | max |", "|---|---|---|---|---|",
             row("one at a time", r["latency_sequential"]["total"]),
             row(f"waves of {r['wave_size']}", r["latency_waves"]["total"]),
             row("all", r["latency_all"]["total"]), "",
             "Where the time goes (all nodes), seconds from the last pod's DELETED event entering the watcher:", "",
             "| step | n | p50 | p99 | max |", "|---|---|---|---|---|",
             row("delete applied in the planner's SnapshotStore", r["latency_all"]["to_planner"]),
             row("Proposed event read back", r["latency_all"]["to_proposed"]),
             row("command's Kafka timestamp (planner's send)", r["latency_all"]["kafka_timestamp"]),
             row("command read back", r["latency_all"]["total"]),
             row("(Proposed → command)", r["latency_all"]["proposed_to_command"]), "",
             *(f"**No command within {WAIT:.0f} s** ({t['step']}, {len(t['missing'])} nodes): {t['diagnosis']}."
               for t in r.get("timeouts", [])), *([""] if r.get("timeouts") else []), *render_restarts(r)]


def render_restarts(r: Doc) -> list[str]:
    """The planner's restarts (a node emptied while it was down): seconds from the new process's start."""
    restarts = [x for x in (r.get("restart"), r.get("restart_kill")) if x]
    if not restarts:
        return []
    lines = [f"The planner's restart, {restarts[0]['objects']:,} objects on the topic, seconds after the new process "
             "started:", "", "| restart after | snapshot seeded | first pass | the node's Proposed | its command |",
             "|---|---|---|---|---|"]
    lines += [f"| {x['how']} | {x['to_seeded']:.1f} | {x['to_first_pass']:.1f} | {x['to_proposed']:.1f} | "
              f"{x['to_command']:.1f} |" for x in restarts]
    return [*lines, ""]


# -- where a steady-state pass spends its time (in-process, cProfile) ---------------------------------------------


#: the functions whose cumulative time the profile reports: (label, file suffix, function name)
PROFILED = (
    ("watcher: trim + digest (KindState.event)", "adapters/kube/reflector.py", "event"),
    ("watcher: digest again after the publish (KindState.record)", "adapters/kube/reflector.py", "record"),
    ("watcher: the wire message (Publisher's to_message)", "ebb_cluster_watcher/publisher.py", "to_message"),
    ("planner: SnapshotStore.snapshot (parse_documents of every object)", "adapters/snapshot_store.py", "snapshot"),
    ("planner: ClusterView.build", "core/cluster.py", "build"),
    ("planner: run_pass", "core/engine.py", "run_pass"),
    ("— of which emptiness", "core/methods/emptiness.py", "run"),
    ("— of which multi-node consolidation", "core/methods/multi_node.py", "run"),
    ("— of which single-node consolidation", "core/methods/single_node.py", "run"),
    ("— of which Scheduler.place_all (simulations)", "core/simulator/scheduler.py", "place_all"),
)


def case_profile(size: Size | None = None) -> Doc:
    """``python -m bench _case load-profile``: the same synthetic cluster through the watcher's per-event code
    (trim, digest, wire message) and one steady-state planning step (the snapshot from the SnapshotStore, the
    cluster view, the engine pass) in one process under cProfile: cumulative seconds of the functions above."""
    import cProfile
    import pstats

    from ebb.adapters.catalog import bundled_catalog
    from ebb.adapters.kube.kinds import KINDS
    from ebb.adapters.kube.reflector import KindState
    from ebb.adapters.snapshot_store import SnapshotStore
    from ebb.core.cluster import ClusterView
    from ebb.core.engine import run_pass
    from ebb.core.methods.base import EngineOptions
    from ebb_cluster_watcher.publisher import to_message

    size = size or size_from_env()
    now = datetime.now(UTC)
    cluster = synthetic_cluster(size.nodes, size.pods, now=now, consolidate_after="0s")
    store = SnapshotStore(bundled_catalog=bundled_catalog)
    states = {kind: KindState(KINDS[kind]) for kind in ("NodePool", "DaemonSet", "Node", "Pod")}
    events = [("NodePool", o) for o in cluster.nodepools] + [("DaemonSet", cluster.daemonset)]
    events += [("Node", o) for o in cluster.nodes] + [("Pod", o) for o in cluster.pods]
    for _, obj in events:
        obj["metadata"]["resourceVersion"] = "100"
    # the cycle collector's collections, timed apart: one lands inside whichever function allocates at that moment
    # (a full one over the ingested objects takes about half a second), which cProfile then charges for it
    collecting: list[float] = []
    collected = [0.0, 0.0]  # seconds in all collections, in full (generation 2) ones

    def collector(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collecting.append(time.perf_counter())
        elif collecting:
            spent = time.perf_counter() - collecting.pop()
            collected[0] += spent
            collected[1] += spent if info.get("generation") == 2 else 0.0

    profiler = cProfile.Profile()
    gc.callbacks.append(collector)
    profiler.enable()
    try:
        for kind, obj in events:
            change = states[kind].event("ADDED", obj)
            if change is not None:
                store.apply(to_message(change))
                states[kind].record(change)
        snapshot = store.snapshot()
        view = ClusterView.build(snapshot, now)
        result = run_pass(view, EngineOptions())
    finally:
        profiler.disable()
        gc.callbacks.remove(collector)
    stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    cumulative: dict[str, float] = {}
    for label, suffix, name in PROFILED:
        cumulative[label] = sum(v[3] for (path, _, function), v in stats.items()
                                if path.endswith(suffix) and function == name)
    own = sorted(((v[2], f"{Path(path).name}:{line} {function}") for (path, line, function), v in stats.items()),
                 reverse=True)[:8]
    return {"nodes": size.nodes, "pods": size.pods, "events": len(events), "cumulative": cumulative,
            "own": [[seconds, where] for seconds, where in own], "commands": len(result.commands),
            "collector_seconds": round(collected[0], 3), "full_collection_seconds": round(collected[1], 3),
            "peak_rss_mib": peak_rss_mib()}


def render_profile(r: Doc) -> list[str]:
    lines = [f"Where the time goes, in one process under cProfile (so slower than above): the {r['events']:,} "
             "objects through the watcher's per-event code, then one steady-state planning step "
             f"({r['commands']} commands). Cumulative seconds:", "", "| function | s |", "|---|---|"]
    lines += [f"| {label} | {seconds:.2f} |" for label, seconds in r["cumulative"].items()]
    lines += ["", "Largest own times: " + "; ".join(f"{where} {seconds:.2f} s" for seconds, where in r["own"]) + "."]
    if "collector_seconds" in r:
        lines += ["", f"Python's cycle collector ran {r['collector_seconds']:.2f} s of this, "
                      f"{r['full_collection_seconds']:.2f} s of it in full collections, charged above to whichever "
                      "function was allocating when one started (the planner keeps them out of its passes by freezing "
                      "what it holds after each one, `ebb.adapters.heap`; this step, made in one go, does not)."]
    lines.append("")
    return lines
