"""What a test needs to drive the real Karpenter (its KWOK provider, deploy/local/karpenter.sh) on the test
session's Karpenter cluster: NodePools, pods that make it provision, its NodeClaims and Nodes, its metrics.

``KarpenterKit`` is one test's view (the ``karpenter`` fixture in conftest.py makes one per test). It owns
isolation: every object it makes carries the test's run id, in its name and in the label ``RUN_LABEL``; its
NodePools taint their nodes ``ebb.sh/karpenter-test=<run>:NoSchedule`` and only its pods (in its own
namespace, selecting one of its NodePools) tolerate that, so Karpenter never places one test's pods on
another test's nodes, and pods of other tests never make it provision. ``cleanup`` deletes the namespace,
the NodeClaims and the NodePools and waits until Karpenter has drained and removed the Nodes, so the next
test starts on an empty cluster.

Karpenter's metrics are process-wide counters (one Karpenter serves the whole session): compare a snapshot
taken before with one taken after (``Metrics.value``), and filter by ``nodepool`` where the metric has it.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException
from prometheus_client.parser import text_string_to_metric_families

from tests.kit.system import as_body
from tests.kit.waiting import eventually

KARPENTER = "karpenter.sh"
NODEPOOL_LABEL = "karpenter.sh/nodepool"
#: the KWOKNodeClass that deploy/local/karpenter.sh creates
KWOK_NODE_CLASS = {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"}
#: label on everything a test makes (value: its run id), and the taint key of its NodePools' nodes
RUN_LABEL = "ebb.sh/karpenter-test"


@dataclass(frozen=True)
class KarpenterCluster:
    """A Kubernetes control plane with Karpenter running on it (the ``karpenter_cluster`` fixture)."""

    kubeconfig: Path
    #: Karpenter's Prometheus endpoint, e.g. http://127.0.0.1:41235/metrics
    metrics_url: str
    #: its readiness probe (answers 200 when ready)
    health_url: str
    #: the API server's audit log (deploy/local/kubernetes.sh: writes to Nodes and NodeClaims, evictions);
    #: None on a control plane started before it had one
    audit_log: Path | None = None


@dataclass(frozen=True)
class Metrics:
    """One scrape of Karpenter's metrics endpoint."""

    samples: tuple[tuple[str, Mapping[str, str], float], ...]

    @classmethod
    def parse(cls, text: str) -> Metrics:
        return cls(tuple((s.name, dict(s.labels), float(s.value))
                         for family in text_string_to_metric_families(text) for s in family.samples))

    def value(self, name: str, **labels: str) -> float:
        """The sum of the samples of ``name`` (a sample name: counters end in ``_total``) whose labels
        include ``labels``; 0 when there is none (Karpenter exports a counter only once it counted)."""
        return sum(v for n, ls, v in self.samples if n == name and all(ls.get(k) == w for k, w in labels.items()))


def nodepool_body(name: str, run: str, *, budgets: Sequence[Mapping[str, Any]] = ({"nodes": "100%"},),
                  consolidation_policy: str = "WhenEmptyOrUnderutilized", consolidate_after: str = "0s",
                  instance_types: Sequence[str] | None = None, capacity_types: Sequence[str] = ("on-demand",),
                  limits_cpu: int = 1000, expire_after: str = "Never",
                  startup_taints: Sequence[Mapping[str, str]] = (),
                  labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    """A karpenter.sh/v1 NodePool of KWOK nodes (amd64, linux; on-demand unless told: otherwise Karpenter
    picks the cheapest offering, spot and arm64) whose nodes are tainted for ``run``'s pods only. A large CPU
    limit: in-flight NodeClaims count at the largest candidate type, so a small one fails bursts.
    ``startup_taints``: the template's startupTaints (Karpenter calls a NodeClaim Initialized only once they
    are gone from its Node, and nothing on KWOK removes them: a test does); ``labels``: more template labels."""
    requirements: list[dict[str, Any]] = [
        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
        {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": list(capacity_types)},
    ]
    if instance_types:
        requirements.append({"key": "node.kubernetes.io/instance-type", "operator": "In",
                             "values": list(instance_types)})
    return {
        "apiVersion": f"{KARPENTER}/v1", "kind": "NodePool",
        "metadata": {"name": name, "labels": {RUN_LABEL: run}},
        "spec": {
            "template": {
                "metadata": {"labels": {RUN_LABEL: run, **(labels or {})}},
                "spec": {"requirements": requirements, "nodeClassRef": dict(KWOK_NODE_CLASS),
                         "expireAfter": expire_after,
                         "taints": [{"key": RUN_LABEL, "value": run, "effect": "NoSchedule"}],
                         **({"startupTaints": [dict(t) for t in startup_taints]} if startup_taints else {})},
            },
            "limits": {"cpu": limits_cpu},
            "disruption": {"consolidationPolicy": consolidation_policy, "consolidateAfter": consolidate_after,
                           "budgets": [dict(b) for b in budgets]},
        },
    }


def is_ready(obj: Mapping[str, Any]) -> bool:
    """The object's status has condition Ready=True (NodeClaim, NodePool, Node)."""
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


class KarpenterKit:
    """One test's NodePools, namespace and pods on the Karpenter cluster, and the waits on what Karpenter does
    with them. Make it with the ``karpenter`` fixture (which calls ``setup`` and ``cleanup``)."""

    def __init__(self, cluster: KarpenterCluster, api: client.ApiClient, run: str | None = None) -> None:
        self.cluster = cluster
        self.api = api
        self.run = run or uuid.uuid4().hex[:8]
        #: every pod the kit makes lives here; deleted by cleanup
        self.namespace = f"karpenter-test-{self.run}"
        self.core = client.CoreV1Api(api)
        self.custom = client.CustomObjectsApi(api)
        self.nodepools: list[str] = []

    # ------------------------------------------------------------------ life cycle

    async def setup(self) -> None:
        """The namespace, with its ``default`` ServiceAccount (pods are refused until the controller-manager
        made it)."""
        await self.core.create_namespace(as_body(client.V1Namespace, {
            "metadata": {"name": self.namespace, "labels": {RUN_LABEL: self.run}}}))

        async def service_account() -> bool:
            try:
                await self.core.read_namespaced_service_account("default", self.namespace)
            except ApiException as error:
                if error.status == 404:
                    return False
                raise
            return True

        await eventually(f"the default ServiceAccount of {self.namespace}", service_account, within=30)

    async def cleanup(self, within: float = 90) -> None:
        """Delete the test's pods, NodeClaims and NodePools; wait until their Nodes and NodeClaims are gone."""
        with contextlib.suppress(ApiException):
            await self.core.delete_collection_namespaced_pod(self.namespace, grace_period_seconds=0)
        with contextlib.suppress(ApiException):
            await self.core.delete_namespace(self.namespace)
        for pool in self.nodepools:
            for claim in await self.nodeclaims(pool):
                await self.delete_nodeclaim(claim["metadata"]["name"])
            with contextlib.suppress(ApiException):
                await self.custom.delete_cluster_custom_object(KARPENTER, "v1", "nodepools", pool)

        async def nothing_left() -> bool:
            for pool in self.nodepools:
                if await self.nodeclaims(pool) or await self.nodes(pool):
                    return False
            return True

        await eventually(f"the NodeClaims and Nodes of {', '.join(self.nodepools) or 'no NodePool'} gone",
                         nothing_left, within=within, interval=0.5)

    # ------------------------------------------------------------------ NodePools

    async def create_nodepool(self, suffix: str = "pool", **settings: Any) -> str:
        """Create a NodePool named ``<suffix>-<run>`` (``settings``: the keywords of ``nodepool_body``:
        budgets, consolidation_policy, consolidate_after, instance_types, ...), wait until it is Ready, and
        return its name."""
        name = f"{suffix}-{self.run}"
        await self.custom.create_cluster_custom_object(KARPENTER, "v1", "nodepools",
                                                       nodepool_body(name, self.run, **settings))
        self.nodepools.append(name)

        async def ready() -> bool:
            pool = await self.custom.get_cluster_custom_object(KARPENTER, "v1", "nodepools", name)
            return is_ready(pool)

        await eventually(f"NodePool {name} Ready", ready, within=30)
        return name

    # ------------------------------------------------------------------ pods

    def pod_body(self, name: str, nodepool: str, *, cpu: str = "1", memory: str = "256Mi") -> dict[str, Any]:
        """A pod that only ``nodepool``'s nodes take (node selector, and the toleration of its taint). It also
        tolerates Karpenter's ``karpenter.sh/unregistered:NoExecute``, which a new node carries until Karpenter
        registers its NodeClaim: kube-scheduler binds the pods it nominated the moment the taint goes, and the
        taint-eviction-controller, whose node cache can still hold the taint then, deleted such a pod at once
        (``TaintManagerEviction`` 11 ms after the bind, 18 ms after Karpenter's "registered nodeclaim", in a CI run
        of 2026-11-28: the flake this provider test had shown before), a race of the two controllers' caches
        that has nothing to do with what these tests check."""
        return {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": self.namespace, "labels": {RUN_LABEL: self.run}},
            "spec": {
                "nodeSelector": {NODEPOOL_LABEL: nodepool},
                "tolerations": [{"key": RUN_LABEL, "operator": "Equal", "value": self.run, "effect": "NoSchedule"},
                                {"key": "karpenter.sh/unregistered", "operator": "Exists", "effect": "NoExecute"}],
                "terminationGracePeriodSeconds": 0,
                "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10",
                                "resources": {"requests": {"cpu": cpu, "memory": memory}}}],
            },
        }

    async def create_pods(self, nodepool: str, count: int = 1, *, cpu: str = "1", memory: str = "256Mi",
                          prefix: str = "pod") -> list[str]:
        """Create ``count`` pending pods for ``nodepool``; return their names."""
        names = [f"{prefix}-{i}" for i in range(count)]
        for name in names:
            await self.core.create_namespaced_pod(self.namespace, as_body(
                client.V1Pod, self.pod_body(name, nodepool, cpu=cpu, memory=memory)))
        return names

    async def create_deployment(self, name: str, nodepool: str, replicas: int, *, cpu: str = "1",
                                memory: str = "256Mi") -> None:
        """A Deployment of ``replicas`` pods like ``pod_body``'s (label ``app=<name>``): an evicted pod comes
        back, as workloads do, and needs a node again."""
        template = self.pod_body(name, nodepool, cpu=cpu, memory=memory)
        template["metadata"] = {"labels": {RUN_LABEL: self.run, "app": name}}
        await client.AppsV1Api(self.api).create_namespaced_deployment(self.namespace, as_body(client.V1Deployment, {
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": self.namespace, "labels": {RUN_LABEL: self.run}},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": template["metadata"], "spec": template["spec"]}},
        }))

    async def scale_deployment(self, name: str, replicas: int) -> None:
        await client.AppsV1Api(self.api).patch_namespaced_deployment_scale(name, self.namespace,
                                                                           {"spec": {"replicas": replicas}})

    async def running_pods(self, app: str) -> dict[str, str]:
        """The Running pods of Deployment ``app`` that are not being deleted: pod name → node name."""
        pods = await self.core.list_namespaced_pod(self.namespace, label_selector=f"app={app}")
        return {p.metadata.name: p.spec.node_name for p in pods.items
                if p.status.phase == "Running" and p.spec.node_name and p.metadata.deletion_timestamp is None}

    async def delete_pods(self, names: Iterable[str]) -> None:
        for name in names:
            await self.core.delete_namespaced_pod(name, self.namespace, grace_period_seconds=0)

    async def wait_for_pods_running(self, names: Sequence[str], within: float = 60) -> dict[str, str]:
        """Wait until every pod of ``names`` is Running on a node; return pod name → node name."""

        async def running() -> dict[str, str] | None:
            pods = await self.core.list_namespaced_pod(self.namespace, label_selector=f"{RUN_LABEL}={self.run}")
            placed = {p.metadata.name: p.spec.node_name for p in pods.items
                      if p.status.phase == "Running" and p.spec.node_name}
            return placed if set(names) <= placed.keys() else None

        try:
            placed: dict[str, str] = await eventually(f"pods {', '.join(names)} Running", running, within=within)
        except AssertionError as timeout:
            raise AssertionError(f"{timeout}\n{await self.diagnose(names)}") from None
        return {name: placed[name] for name in names}

    async def diagnose(self, pods: Sequence[str]) -> str:
        """What a failed wait on ``pods`` needs to be understood without the servers: each pod's phase, node,
        nominated node and conditions; the namespace's Events; the test's Nodes with their taints and Ready
        condition; and the kube-scheduler's and KWOK's log lines that name a pod (the logs sit next to the
        audit log: deploy/local/lib.sh's ``logs/``)."""
        lines = ["pods:"]
        listed = await self.core.list_namespaced_pod(self.namespace)
        for pod in listed.items:
            if pod.metadata.name not in pods:
                continue
            status = pod.status
            conditions = "; ".join(f"{c.type}={c.status} {c.reason or ''} {c.message or ''}".strip()
                                   for c in status.conditions or [])
            lines.append(f"  {pod.metadata.name}: phase {status.phase}, node {pod.spec.node_name}, nominated "
                         f"{status.nominated_node_name}, conditions [{conditions}]")
        lines.append("events:")
        events = await self.core.list_namespaced_event(self.namespace)
        for event in events.items[-30:]:
            lines.append(f"  {event.involved_object.kind}/{event.involved_object.name} {event.reason} "
                         f"x{event.count} ({event.source.component if event.source else ''}): {event.message}")
        lines.append("nodes:")
        for pool in self.nodepools:
            for node in await self.nodes(pool):
                ready = [f"{c.status} {c.reason}" for c in node.status.conditions or [] if c.type == "Ready"]
                taints = [f"{t.key}={t.value or ''}:{t.effect}" for t in node.spec.taints or []]
                lines.append(f"  {node.metadata.name}: Ready {ready}, unschedulable {node.spec.unschedulable}, "
                             f"taints {taints}, allocatable {node.status.allocatable}")
        logs = self.cluster.audit_log.parent.parent / "logs" if self.cluster.audit_log else None
        for component in ("kube-scheduler", "kwok"):
            log = logs / f"{component}.log" if logs else None
            if log is None or not log.is_file():
                continue
            with log.open(errors="replace") as text:
                mentions = [line.rstrip() for line in text if any(f"{self.namespace}/{pod}" in line
                                                                    or f'"{pod}"' in line for pod in pods)]
            lines.append(f"{component} log ({log}), last lines naming the pods:")
            lines.extend(f"  {line[:400]}" for line in mentions[-20:])
        return "\n".join(lines)

    async def wait_for_pods_gone(self, names: Iterable[str], within: float = 60) -> None:
        wanted = set(names)

        async def gone() -> bool:
            pods = await self.core.list_namespaced_pod(self.namespace)
            return not wanted & {p.metadata.name for p in pods.items}

        await eventually(f"pods {', '.join(sorted(wanted))} gone", gone, within=within)

    # ------------------------------------------------------------------ NodeClaims and Nodes

    async def nodeclaims(self, nodepool: str) -> list[dict[str, Any]]:
        """``nodepool``'s NodeClaims as Karpenter stores them (dicts)."""
        listed = await self.custom.list_cluster_custom_object(KARPENTER, "v1", "nodeclaims",
                                                              label_selector=f"{NODEPOOL_LABEL}={nodepool}")
        return list(listed["items"])

    async def nodeclaim(self, name: str) -> dict[str, Any] | None:
        try:
            found: dict[str, Any] = await self.custom.get_cluster_custom_object(KARPENTER, "v1", "nodeclaims", name)
        except ApiException as error:
            if error.status == 404:
                return None
            raise
        return found

    async def wait_for_nodeclaims(self, nodepool: str, count: int, within: float = 60) -> list[dict[str, Any]]:
        """Wait until ``nodepool`` has exactly ``count`` NodeClaims, each Ready with its Node registered;
        return them."""

        async def ready() -> list[dict[str, Any]] | None:
            claims = await self.nodeclaims(nodepool)
            done = len(claims) == count and all(is_ready(c) and (c.get("status") or {}).get("nodeName")
                                                for c in claims)
            return claims if done else None

        claims: list[dict[str, Any]] = await eventually(f"{count} Ready NodeClaim(s) of {nodepool}", ready,
                                                        within=within)
        return claims

    async def delete_nodeclaim(self, name: str) -> None:
        """Ask Karpenter to remove a NodeClaim (it drains and deletes the Node, then the NodeClaim)."""
        with contextlib.suppress(ApiException):
            await self.custom.delete_cluster_custom_object(KARPENTER, "v1", "nodeclaims", name)

    async def nodes(self, nodepool: str) -> list[client.V1Node]:
        return list((await self.core.list_node(label_selector=f"{NODEPOOL_LABEL}={nodepool}")).items)

    async def node(self, name: str) -> client.V1Node | None:
        try:
            return await self.core.read_node(name)
        except ApiException as error:
            if error.status == 404:
                return None
            raise

    async def wait_until_gone(self, *, nodeclaims: Iterable[str] = (), nodes: Iterable[str] = (),
                              within: float = 60) -> None:
        """Wait until the named NodeClaims and Nodes no longer exist."""
        claim_names, node_names = list(nodeclaims), list(nodes)

        async def gone() -> bool:
            for name in claim_names:
                if await self.nodeclaim(name) is not None:
                    return False
            for name in node_names:
                if await self.node(name) is not None:
                    return False
            return True

        await eventually(f"NodeClaims {claim_names} and Nodes {node_names} gone", gone, within=within,
                         interval=0.25)

    # ------------------------------------------------------------------ metrics

    async def metrics(self) -> Metrics:
        async with httpx.AsyncClient(timeout=10) as http:
            response = await http.get(self.cluster.metrics_url)
            response.raise_for_status()
            return Metrics.parse(response.text)
