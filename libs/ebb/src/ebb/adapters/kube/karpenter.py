"""The ``karpenter`` provider: ebb next to a real Karpenter, which launches and terminates every machine
(``ebb.adapters.provider``; docs/architecture.md#decision-semantics).

ebb decides and drains; Karpenter owns the machines. So here:

- **a replacement** is a ``karpenter.sh/v1`` NodeClaim that ebb creates and Karpenter launches: built by
  ``ebb.core.launch.nodeclaim_object`` from the NodePool as Karpenter's provisioner would, with
  requirements pinning the instance types the simulation chose (cheapest first), the capacity type and the
  zones, and ``spec.resources.requests`` the first type's allocatable only when given a catalog that is
  Karpenter's own (e.g. ``catalog_from_kwok_instance_types``): requests above what Karpenter computes as
  allocatable would rule the chosen type out, and the bundled AWS catalog does not take off the VM memory
  overhead Karpenter does; without requests Karpenter launches the cheapest pinned type. It is named
  from the decision (``replacement_name``), so a resumed command finds the NodeClaim it created (a create
  answered 409 is one made before; its ``ebb.sh/decision-id`` annotation must be this decision's). It is
  ready when its ``Initialized`` condition is True (registered, Ready, startup taints gone); a NodeClaim that
  disappears meanwhile (Karpenter could not launch it) fails the launch.
- **the disruption taint** is ebb's own, ``ebb.sh/disrupted:NoSchedule``: Karpenter's disruption controller
  removes ``karpenter.sh/disrupted`` from every node that is not in its own queue, so that taint would be
  undone in the middle of ebb's drain.
- **retiring** a drained node deletes its NodeClaim (found through the Node's ``ownerReferences``, which
  Karpenter sets at registration, else by ``status.providerID`` or ``status.nodeName``: ``claim_of``) and then waits
  until the NodeClaim and the Node are gone: Karpenter deletes the Node, terminates the instance and removes
  its own finalizers. A node without a NodeClaim is not Karpenter's and cannot be retired here: the command
  fails for it before anything is done.
- **the instance is gone** when the Node is, or when the NodeClaim that owned it is.

ebb never adds or removes a ``karpenter.sh/`` taint or finalizer in this mode: the only Node patches sent are
the drainer's, adding and removing ``ebb.sh/disrupted``; NodeClaims are created and deleted, never patched.

The API calls are behind ``NodeClaimApi`` (``KubeNodeClaimApi`` on kubernetes-asyncio, fakes in tests) and
the drainer's ``NodeApi``. RBAC: ``get``, ``list``, ``watch``, ``create``, ``delete`` on
``nodeclaims.karpenter.sh`` and ``get`` on ``nodepools.karpenter.sh``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Protocol

from ebb.adapters.kube.launch import is_ready
from ebb.adapters.kube.node_api import NodeApi
from ebb.adapters.kube.paging import list_items, page_options
from ebb.adapters.provider import Launched, RetireError, grace_period_of
from ebb.contracts import Replacement
from ebb.core.launch import LaunchError, allocatable_of, nodeclaim_object
from ebb.core.model import ANNOTATION_DECISION_ID, TAINT_EBB_DISRUPTED, InstanceType, names_another_instance
from ebb.core.quantity import dollars

GROUP: Final = "karpenter.sh"
VERSION: Final = "v1"
#: ebb's own disruption taint, next to a real Karpenter
EBB_DISRUPTED_TAINT: Final[Mapping[str, str]] = {"key": TAINT_EBB_DISRUPTED, "effect": "NoSchedule"}


class NodeClaimApi(Protocol):
    """The few ``karpenter.sh/v1`` calls the provider makes; objects are kubectl-shaped dicts."""

    async def read_nodepool(self, name: str) -> dict[str, Any] | None:
        """The NodePool, or None when it does not exist."""
        ...

    async def read_nodeclaim(self, name: str) -> dict[str, Any] | None:
        """The NodeClaim, or None when it does not exist."""
        ...

    async def list_nodeclaims(self) -> list[dict[str, Any]]:
        ...

    async def create_nodeclaim(self, body: dict[str, Any]) -> bool:
        """Create it; False when one of that name exists (409)."""
        ...

    async def delete_nodeclaim(self, name: str) -> bool:
        """Delete it (Karpenter then drains, terminates and removes it); False when it did not exist."""
        ...


# -- reading NodeClaims and Nodes (pure) --------------------------------------------------------------------


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def nodeclaim_owner(node: Mapping[str, Any]) -> str | None:
    """The name of the NodeClaim that owns ``node`` (Karpenter adds the owner reference at registration)."""
    for entry in _mapping(node.get("metadata")).get("ownerReferences") or []:
        ref = _mapping(entry)
        if ref.get("kind") == "NodeClaim" and str(ref.get("apiVersion", "")).startswith(f"{GROUP}/"):
            return str(ref.get("name") or "") or None
    return None


def is_initialized(claim: Mapping[str, Any]) -> bool:
    """Whether Karpenter says the NodeClaim's node is initialized (``Initialized`` condition True)."""
    conditions = _mapping(claim.get("status")).get("conditions") or []
    return any(_mapping(c).get("type") == "Initialized" and _mapping(c).get("status") == "True" for c in conditions)


def claim_of(claims: list[dict[str, Any]], node: str, provider_id: str = "") -> dict[str, Any] | None:
    """The NodeClaim of Node ``node`` whose ``spec.providerID`` is ``provider_id``, paired as Karpenter pairs them
    (and as ``ebb.core.model.claim_for`` does): the one with that ``status.providerID``; else the one whose
    ``status.nodeName`` is ``node``, unless it has another instance's provider id (the name was used before: deleting
    that NodeClaim would retire another instance, not this node)."""
    if provider_id:
        for claim in claims:
            if _mapping(claim.get("status")).get("providerID") == provider_id:
                return claim
    for claim in claims:
        status = _mapping(claim.get("status"))
        if status.get("nodeName") == node and not names_another_instance(str(status.get("providerID") or ""),
                                                                          provider_id):
            return claim
    return None


def _name(obj: Mapping[str, Any]) -> str:
    return str(_mapping(obj.get("metadata")).get("name") or "")


def no_claim(node: str) -> str:
    return (f"node {node} has no NodeClaim: with the karpenter provider ebb retires a node by deleting its "
            f"NodeClaim (Karpenter terminates the instance) and never deletes a Node itself")


class KarpenterProvider:
    """Replacements are NodeClaims Karpenter launches; a node is retired by deleting its NodeClaim."""

    name: Final = "karpenter"
    disruption_taint: Mapping[str, str] = EBB_DISRUPTED_TAINT
    launches: Final = True

    def __init__(self, nodes: NodeApi, claims: NodeClaimApi,
                 catalog: Mapping[str, InstanceType] | None = None) -> None:
        self.nodes = nodes
        self.claims = claims
        #: instance types by name, as Karpenter sees them: a replacement's requests are its first type's
        #: allocatable when known here (none: no requests)
        self.catalog = catalog or {}
        #: node -> the NodeClaim ``retire`` deleted for it
        self._retiring: dict[str, str] = {}

    # -- replacements

    def _requests(self, replacement: Replacement) -> dict[str, str]:
        it = self.catalog.get(replacement.instance_types[0])
        return allocatable_of(it) if it is not None else {}

    async def launch(self, name: str, replacement: Replacement, *, decision_id: str) -> Launched:
        pool = await self.claims.read_nodepool(replacement.node_pool)
        if pool is None:
            raise LaunchError(f"NodePool {replacement.node_pool} does not exist")
        body = nodeclaim_object(name, nodepool=pool, instance_types=replacement.instance_types,
                                capacity_type=replacement.capacity_type, zones=replacement.zones,
                                decision_id=decision_id, requests=self._requests(replacement),
                                chosen=replacement.labels)
        if not await self.claims.create_nodeclaim(body):  # created before: a command resumed after a crash
            existing = await self.claims.read_nodeclaim(name)
            owner = _mapping(_mapping((existing or {}).get("metadata")).get("annotations")).get(ANNOTATION_DECISION_ID)
            if existing is not None and owner != decision_id:
                raise LaunchError(f"NodeClaim {name} exists and was not created for decision {decision_id}")
        types = ", ".join(replacement.instance_types)
        return Launched(name, f"NodeClaim of {types} ({replacement.capacity_type}) in {', '.join(replacement.zones)}; "
                              f"{replacement.instance_types[0]} at ${dollars(replacement.price)}/h")

    async def ready(self, name: str) -> bool:
        claim = await self.claims.read_nodeclaim(name)
        if claim is None:
            raise LaunchError(f"NodeClaim {name} is gone: Karpenter could not launch it")
        if _mapping(claim.get("metadata")).get("deletionTimestamp"):
            raise LaunchError(f"NodeClaim {name} is being deleted")
        return is_initialized(claim)

    async def delete_replacement(self, name: str) -> None:
        await self.claims.delete_nodeclaim(name)

    # -- retiring

    async def _claim(self, node: str, obj: Mapping[str, Any] | None) -> dict[str, Any] | None:
        """The NodeClaim of ``node`` (None: it has none, or its owner is gone)."""
        owner = nodeclaim_owner(obj) if obj is not None else None
        if owner is not None:
            return await self.claims.read_nodeclaim(owner)
        provider_id = str(_mapping((obj or {}).get("spec")).get("providerID") or "")
        return claim_of(await self.claims.list_nodeclaims(), node, provider_id)

    async def cannot_retire(self, node: str) -> str | None:
        obj = await self.nodes.read_node(node)
        if obj is None or nodeclaim_owner(obj) is not None or await self._claim(node, obj) is not None:
            return None
        return no_claim(node)

    async def retire(self, node: str) -> str | None:
        obj = await self.nodes.read_node(node)
        claim = await self._claim(node, obj)
        if claim is None:
            if obj is None or nodeclaim_owner(obj) is not None:
                return None  # gone already, or its NodeClaim is (Karpenter removes the Node)
            raise RetireError(no_claim(node))
        name = _name(claim)
        self._retiring[node] = name
        await self.claims.delete_nodeclaim(name)
        return f"NodeClaim {name} deleted: node and instance gone"

    async def retired(self, node: str) -> bool:
        name = self._retiring.get(node)
        if name is None:  # asked before a restart: find it by the node's name
            claim_gone = claim_of(await self.claims.list_nodeclaims(), node) is None
        else:
            claim_gone = await self.claims.read_nodeclaim(name) is None
        return claim_gone and await self.nodes.read_node(node) is None

    async def termination_grace_period(self, node: str) -> float | None:
        """Karpenter's: the NodeClaim's ``spec.terminationGracePeriod`` (copied from its NodePool at launch)."""
        claim = await self._claim(node, await self.nodes.read_node(node))
        if claim is None:
            return None
        return grace_period_of(claim.get("spec"), f"NodeClaim {_name(claim)}")

    async def instance_gone(self, node: str) -> bool:
        """The Node is gone, or its NodeClaim is (ebb's sign that the instance is: it has no cloud API) while
        the Node is not Ready. Karpenter's termination finalizes at once only a NotReady node whose instance
        is gone: a Ready kubelet is still running its pods, so they are drained."""
        obj = await self.nodes.read_node(node)
        if obj is None:
            return True
        owner = nodeclaim_owner(obj)
        return owner is not None and not is_ready(obj) and await self.claims.read_nodeclaim(owner) is None


# -- kubernetes-asyncio ------------------------------------------------------------------------------------------


class KubeNodeClaimApi:
    """``NodeClaimApi`` on a kubernetes-asyncio ``ApiClient`` (``CustomObjectsApi``, ``karpenter.sh/v1``)."""

    def __init__(self, api_client: Any) -> None:
        from kubernetes_asyncio import client

        self.custom: Any = client.CustomObjectsApi(api_client)

    async def _get(self, plural: str, name: str) -> dict[str, Any] | None:
        from kubernetes_asyncio.client.exceptions import ApiException

        try:
            obj = await self.custom.get_cluster_custom_object(GROUP, VERSION, plural, name)
        except ApiException as e:
            if e.status == 404:
                return None
            raise
        return dict(obj)

    async def read_nodepool(self, name: str) -> dict[str, Any] | None:
        return await self._get("nodepools", name)

    async def read_nodeclaim(self, name: str) -> dict[str, Any] | None:
        return await self._get("nodeclaims", name)

    async def list_nodeclaims(self) -> list[dict[str, Any]]:
        async def page(token: str | None) -> Mapping[str, Any]:
            body: Mapping[str, Any] = await self.custom.list_cluster_custom_object(GROUP, VERSION, "nodeclaims",
                                                                                   **page_options(token))
            return body

        return await list_items(page)

    async def create_nodeclaim(self, body: dict[str, Any]) -> bool:
        from kubernetes_asyncio.client.exceptions import ApiException

        try:
            await self.custom.create_cluster_custom_object(GROUP, VERSION, "nodeclaims", body)
        except ApiException as e:
            if e.status == 409:
                return False
            raise
        return True

    async def delete_nodeclaim(self, name: str) -> bool:
        from kubernetes_asyncio.client.exceptions import ApiException

        try:
            await self.custom.delete_cluster_custom_object(GROUP, VERSION, "nodeclaims", name)
        except ApiException as e:
            if e.status == 404:
                return False
            raise
        return True
