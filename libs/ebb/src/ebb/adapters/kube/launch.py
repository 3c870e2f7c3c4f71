"""Launching replacement nodes: termination launches a command's replacements and waits until they are ready
before it drains anything (docs/architecture.md#decision-semantics).

Where ebb creates replacement Nodes itself (the ``kwok`` and ``simulated`` providers,
``ebb.adapters.kube.node_provider``; next to a real Karpenter a replacement is a NodeClaim instead,
``ebb.adapters.kube.karpenter``), the termination-executor launches a command's replacements through the
small ``Launcher`` protocol before it drains anything: ``launch`` creates the node (idempotently: the name is
derived from the decision, so a launch repeated after a crash finds its node), ``ready`` says whether it is
Ready (and marks it ``karpenter.sh/initialized``, as Karpenter does once a node is ready), ``delete`` removes it
on rollback.

``replacement_node`` turns a wire ``Replacement`` and its NodePool object into the Node to create (the pure
``ebb.core.launch`` decides the type, zone, labels, taints and capacity). Two launchers exist:

- ``KwokLauncher``: the node is a KWOK node (annotation ``kwok.x-k8s.io/node: fake``); the KWOK controller
  makes it Ready. It is the cloud of the local and test clusters. Its nodes carry ebb's finalizer
  ``ebb.sh/termination``, so `kubectl delete node` on one takes ebb's graceful termination.
- the embedded mode's simulated cluster (``ebb_embedded.cluster``), Ready after a simulated boot time.

A real cloud (EC2 ``RunInstances`` with a kubelet that registers the node) is not built yet.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, Final, Protocol

from ebb.contracts import Replacement
from ebb.core.launch import LaunchError, LaunchSpec, launch_spec, node_object
from ebb.core.model import ANNOTATION_DECISION_ID, LABEL_INITIALIZED, InstanceType, NodePool
from ebb.core.snapshot import SnapshotError, parse_catalog, parse_object

KWOK_ANNOTATION: Final = "kwok.x-k8s.io/node"
#: the finalizer on the Nodes ebb launches where no Karpenter runs: deleting such a Node waits for ebb's graceful
#: termination (``ebb_termination_executor.finalizer``); never Karpenter's ``karpenter.sh/termination``
EBB_TERMINATION_FINALIZER: Final = "ebb.sh/termination"
NODEPOOL_GROUPS: Final = ("karpenter.sh", "ebb.sh")


class Launcher(Protocol):
    async def launch(self, name: str, replacement: Replacement, *, decision_id: str = "") -> LaunchSpec:
        """Create the node ``name`` for ``replacement`` (nothing when it exists), annotated with the decision that
        launches it (``ebb.sh/decision-id``; none for a provisioner's launch); LaunchError when it cannot."""
        ...

    async def ready(self, name: str) -> bool:
        """Whether the node is Ready (then also marked initialized); False while it boots or is gone."""
        ...

    async def delete(self, name: str) -> None:
        """Remove a launched node (rollback); nothing when it is gone."""
        ...


def catalog_types(documents: Iterable[Any]) -> dict[str, InstanceType]:
    """Instance types by name from catalog documents (e.g. ``ebb.adapters.catalog.bundled_catalog()``)."""
    return {it.name: it for item in parse_catalog(documents) for it in item.value}


def parse_nodepool(raw: Mapping[str, Any]) -> NodePool:
    try:
        parsed = parse_object(raw)
    except SnapshotError as e:
        raise LaunchError(f"the NodePool is invalid: {e}") from e
    if parsed.kind != "NodePool":
        raise LaunchError(f"{parsed.ref} is not a NodePool")
    pool: NodePool = parsed.value
    return pool


def replacement_node(name: str, replacement: Replacement, nodepool: Mapping[str, Any],
                     catalog: Mapping[str, InstanceType], now: datetime, *,
                     extra_annotations: Mapping[str, str] | None = None,
                     decision_id: str = "") -> tuple[LaunchSpec, dict[str, Any]]:
    """The launch spec and the Node object of ``replacement`` from its NodePool object; a replacement of a decision
    carries its id (``ebb.sh/decision-id``, as ebb's NodeClaims do), which tells the planner it was launched for a
    disruption, not for pending pods."""
    pool = parse_nodepool(nodepool)
    spec = launch_spec(name, nodepool=pool.name, instance_types=replacement.instance_types,
                       capacity_type=replacement.capacity_type, zones=replacement.zones, catalog=catalog)
    node = node_object(spec, pool=pool, instance_type=catalog[spec.instance_type], now=now,
                       chosen=replacement.labels)
    if extra_annotations:
        node["metadata"]["annotations"].update(extra_annotations)
    if decision_id:
        node["metadata"]["annotations"][ANNOTATION_DECISION_ID] = decision_id
    return spec, node


def is_ready(node: Mapping[str, Any]) -> bool:
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


class KwokLauncher:
    """Replacements as KWOK nodes, through kubernetes-asyncio."""

    def __init__(self, api_client: Any, catalog: Mapping[str, InstanceType], clock: Any) -> None:
        from kubernetes_asyncio import client

        self.core: Any = client.CoreV1Api(api_client)
        self.custom: Any = client.CustomObjectsApi(api_client)
        self.api_client = api_client
        self.catalog = catalog
        self.clock = clock

    async def _nodepool(self, name: str) -> dict[str, Any]:
        from kubernetes_asyncio.client.exceptions import ApiException

        for group in NODEPOOL_GROUPS:
            try:
                obj: dict[str, Any] = await self.custom.get_cluster_custom_object(group, "v1", "nodepools", name)
            except ApiException as e:
                if e.status == 404:
                    continue
                raise
            return obj
        raise LaunchError(f"NodePool {name} does not exist")

    async def launch(self, name: str, replacement: Replacement, *, decision_id: str = "") -> LaunchSpec:
        from kubernetes_asyncio.client.exceptions import ApiException

        spec, node = replacement_node(name, replacement, await self._nodepool(replacement.node_pool), self.catalog,
                                      self.clock(), extra_annotations={KWOK_ANNOTATION: "fake"},
                                      decision_id=decision_id)
        node["metadata"].pop("creationTimestamp", None)  # the API server sets it
        # ebb's own finalizer: `kubectl delete node` then waits for ebb's graceful termination (taint, drain,
        # finalizer removed), as Karpenter's karpenter.sh/termination does for its nodes
        node["metadata"]["finalizers"] = [EBB_TERMINATION_FINALIZER]
        try:
            await self.core.create_node(node)
        except ApiException as e:
            if e.status != 409:  # 409: launched before (a retry after a crash)
                raise
        return spec

    async def ready(self, name: str) -> bool:
        from kubernetes_asyncio.client.exceptions import ApiException

        try:
            node = self.api_client.sanitize_for_serialization(await self.core.read_node(name))
        except ApiException as e:
            if e.status == 404:
                return False
            raise
        if not is_ready(node):
            return False
        if (node.get("metadata", {}).get("labels") or {}).get(LABEL_INITIALIZED) != "true":
            await self.core.patch_node(name, {"metadata": {"labels": {LABEL_INITIALIZED: "true"}}},
                                       _content_type="application/merge-patch+json")
        return True

    async def delete(self, name: str) -> None:
        """Delete the node and remove ebb's finalizer at once: a replacement rolled back never took work (its
        decision drained nothing onto it), so there is nothing for the graceful path to do."""
        from kubernetes_asyncio.client.exceptions import ApiException

        try:
            await self.core.delete_node(name)
            node = self.api_client.sanitize_for_serialization(await self.core.read_node(name))
            finalizers = list((node.get("metadata") or {}).get("finalizers") or [])
            if EBB_TERMINATION_FINALIZER in finalizers:
                kept = [f for f in finalizers if f != EBB_TERMINATION_FINALIZER]
                await self.core.patch_node(name, {"metadata": {"finalizers": kept or None,
                                                               "resourceVersion": node["metadata"]["resourceVersion"]}},
                                           _content_type="application/merge-patch+json")
        except ApiException as e:
            if e.status != 404:
                raise
