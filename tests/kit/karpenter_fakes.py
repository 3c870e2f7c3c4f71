"""Test doubles for the ``karpenter`` provider, shared by the service and integration tests.

- ``AuditedNodeApi`` wraps any ``NodeApi`` and records every write ebb sends to Nodes (each patch with the
  Node before and after it, each delete); ``karpenter_writes`` lists those that add or remove a
  ``karpenter.sh/`` taint or finalizer, or delete a Node: none may exist in ``karpenter`` mode.
- ``FakeKarpenter`` is a ``NodeClaimApi`` over a fake API server's Nodes that behaves like Karpenter where ebb
  can see it: a NodeClaim it is given is launched (a Node owned by it, then ``Initialized``) after a number of
  reads, and a deleted NodeClaim takes its Node (and the Node's pods) away, then goes itself, after a number
  of reads. ``-1`` reads: never.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from ebb.adapters.kube.node_api import EvictionResult, NodeApi

KARPENTER_PREFIX = "karpenter.sh/"


def _karpenter_taints(node: dict[str, Any] | None) -> list[tuple[str, str]]:
    taints = ((node or {}).get("spec") or {}).get("taints") or []
    return sorted((str(t.get("key")), str(t.get("effect"))) for t in taints
                  if str(t.get("key", "")).startswith(KARPENTER_PREFIX))


def _karpenter_finalizers(node: dict[str, Any] | None) -> list[str]:
    return sorted(f for f in ((node or {}).get("metadata") or {}).get("finalizers") or []
                  if f.startswith(KARPENTER_PREFIX))


@dataclass
class Write:
    """One write to a Node: ``patch`` (with the patch and the Node before and after) or ``delete``."""

    verb: str
    node: str
    patch: list[dict[str, Any]] = field(default_factory=list)
    before: dict[str, Any] | None = None
    after: dict[str, Any] | None = None

    def touches_karpenter(self) -> bool:
        """Whether it deletes a Node or changes a ``karpenter.sh/`` taint or finalizer."""
        if self.verb == "delete":
            return True
        return (_karpenter_taints(self.before) != _karpenter_taints(self.after)
                or _karpenter_finalizers(self.before) != _karpenter_finalizers(self.after)
                or any("finalizers" in str(op.get("path", "")) for op in self.patch))


class AuditedNodeApi:
    """A ``NodeApi`` that records every write it passes on."""

    def __init__(self, inner: NodeApi) -> None:
        self.inner = inner
        self.writes: list[Write] = []

    def karpenter_writes(self) -> list[Write]:
        return [w for w in self.writes if w.touches_karpenter()]

    def taints_written(self) -> set[str]:
        """The taint keys ebb's patches added or removed."""
        keys: set[str] = set()
        for w in self.writes:
            before = {t.get("key") for t in ((w.before or {}).get("spec") or {}).get("taints") or []}
            after = {t.get("key") for t in ((w.after or {}).get("spec") or {}).get("taints") or []}
            keys |= {str(k) for k in before ^ after}
        return keys

    async def read_node(self, name: str) -> dict[str, Any] | None:
        return await self.inner.read_node(name)

    async def patch_node(self, name: str, patch: list[dict[str, Any]]) -> None:
        before = await self.inner.read_node(name)
        await self.inner.patch_node(name, patch)
        self.writes.append(Write("patch", name, copy.deepcopy(patch), before, await self.inner.read_node(name)))

    async def delete_node(self, name: str) -> bool:
        self.writes.append(Write("delete", name))
        return await self.inner.delete_node(name)

    async def list_pods(self, node: str) -> list[dict[str, Any]]:
        return await self.inner.list_pods(node)

    async def read_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        return await self.inner.read_pod(namespace, name)

    async def evict(self, namespace: str, name: str, *, uid: str = "",
                    dry_run: bool = False) -> tuple[EvictionResult, str]:
        return await self.inner.evict(namespace, name, uid=uid, dry_run=dry_run)

    async def delete_pod(self, namespace: str, name: str, grace_seconds: int) -> bool:
        return await self.inner.delete_pod(namespace, name, grace_seconds)


def karpenter_node(name: str, claim: str, *, taints: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A Node as Karpenter registers it: owned by its NodeClaim, with Karpenter's termination finalizer."""
    return {"metadata": {"name": name, "resourceVersion": "1", "finalizers": ["karpenter.sh/termination"],
                         "labels": {"karpenter.sh/nodepool": "default", "kubernetes.io/hostname": claim},
                         "ownerReferences": [{"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "name": claim,
                                              "uid": f"uid-{claim}"}]},
            "spec": {"providerID": f"kwok://{name}", "taints": list(taints or [])}}


def karpenter_claim(name: str, node: str) -> dict[str, Any]:
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": name, "labels": {"karpenter.sh/nodepool": "default"},
                         "finalizers": ["karpenter.sh/termination"]},
            "status": {"nodeName": node, "providerID": f"kwok://{node}",
                       "conditions": [{"type": "Initialized", "status": "True"}]}}


class FakeKarpenter:
    """NodeClaims and NodePools, and Karpenter's part in them, over ``api``'s ``nodes`` and ``pods`` dicts (the
    fake API server of tests/kit/executor.py)."""

    def __init__(self, api: Any, *, boot_reads: int = 2, terminate_reads: int = 2) -> None:
        self.api = api
        self.nodepools: dict[str, dict[str, Any]] = {}
        self.claims: dict[str, dict[str, Any]] = {}
        #: reads of a new NodeClaim before it is launched and Initialized (-1: never)
        self.boot_reads = boot_reads
        #: reads of a deleted NodeClaim before its Node and then itself are gone (-1: never)
        self.terminate_reads = terminate_reads
        self._reads: dict[str, int] = {}
        #: (verb, name) of every create and delete ebb sent
        self.calls: list[tuple[str, str]] = []
        #: called after every create (a test's crash)
        self.after_create: Any = None
        #: called after a read of a NodeClaim not launched yet (a test's crash while a replacement boots)
        self.while_booting: Any = None

    def add_claim(self, name: str, node: str, *, taints: list[dict[str, Any]] | None = None) -> None:
        """A NodeClaim Karpenter launched earlier, with its Node."""
        self.claims[name] = karpenter_claim(name, node)
        self.api.nodes[node] = karpenter_node(node, claim=name, taints=taints)

    def _advance(self, name: str) -> None:
        claim = self.claims.get(name)
        if claim is None:
            return
        self._reads[name] = self._reads.get(name, 0) + 1
        reads = self._reads[name]
        if claim["metadata"].get("deletionTimestamp"):
            if self.terminate_reads < 0 or reads < self.terminate_reads:
                return
            node = (claim.get("status") or {}).get("nodeName")
            if node and node in self.api.nodes:  # Karpenter deletes the Node, then the NodeClaim goes
                del self.api.nodes[node]
                for ref in [r for r, p in self.api.pods.items() if p["spec"]["nodeName"] == node]:
                    del self.api.pods[ref]
                return
            del self.claims[name]
            return
        if (claim.get("status") or {}).get("nodeName") or self.boot_reads < 0 or reads < self.boot_reads:
            return
        node = f"{name}-node"
        self.api.nodes[node] = karpenter_node(node, claim=name)
        claim["status"] = {"nodeName": node, "providerID": f"kwok://{node}",
                           "conditions": [{"type": "Launched", "status": "True"},
                                          {"type": "Initialized", "status": "True"}]}

    async def read_nodepool(self, name: str) -> dict[str, Any] | None:
        pool = self.nodepools.get(name)
        return copy.deepcopy(pool) if pool is not None else None

    async def read_nodeclaim(self, name: str) -> dict[str, Any] | None:
        self._advance(name)
        claim = self.claims.get(name)
        if claim is not None and not (claim.get("status") or {}).get("nodeName") and self.while_booting is not None:
            self.while_booting()
        return copy.deepcopy(claim) if claim is not None else None

    async def list_nodeclaims(self) -> list[dict[str, Any]]:
        for name in list(self.claims):
            self._advance(name)
        return [copy.deepcopy(c) for c in self.claims.values()]

    async def create_nodeclaim(self, body: dict[str, Any]) -> bool:
        name = body["metadata"]["name"]
        self.calls.append(("create", name))
        if name in self.claims:
            return False
        self.claims[name] = copy.deepcopy(body)
        if self.after_create is not None:
            self.after_create()
        return True

    async def delete_nodeclaim(self, name: str) -> bool:
        self.calls.append(("delete", name))
        claim = self.claims.get(name)
        if claim is None:
            return False
        claim["metadata"]["deletionTimestamp"] = "now"
        self._reads[name] = 0
        return True

    def created(self) -> list[str]:
        return [name for verb, name in self.calls if verb == "create"]
