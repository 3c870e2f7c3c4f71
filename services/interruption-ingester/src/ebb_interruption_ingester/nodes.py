"""Instance id → node name. A node names its instance in ``spec.providerID`` (``aws:///<zone>/<id>``);
a NodeClaim in ``status.providerID`` with ``status.nodeName`` (known before the node registers)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from ebb.adapters.aws import instance_id_of_provider_id
from ebb.adapters.snapshot_store import SnapshotStore
from ebb.core.model import names_another_instance


class NodeLookup(Protocol):
    def node_for(self, instance_id: str) -> str | None:
        """The name of the node running on ``instance_id``; None when unknown."""
        ...


class MappingLookup:
    """A fixed instance id → node name mapping (tests, the embedded mode)."""

    def __init__(self, mapping: Mapping[str, str]) -> None:
        self.mapping = mapping

    def node_for(self, instance_id: str) -> str | None:
        return self.mapping.get(instance_id)


def index_objects(objects: list[tuple[str, dict[str, Any]]]) -> dict[str, str]:
    """instance id → node name from (key, object) pairs of Nodes and NodeClaims; a Node wins over a
    NodeClaim naming the same instance, and a NodeClaim whose ``status.nodeName`` is a Node running another
    instance (the name was used again) maps nothing (`ebb.core.model.names_another_instance`): its instance is not
    that node's, and an interruption of it must not drain the node (Karpenter pairs a NodeClaim with its Node by
    provider id)."""
    claims: list[tuple[str, str]] = []  # (provider id, node name) of each NodeClaim naming a node
    node_providers: dict[str, str] = {}  # node name -> its provider id
    for key, obj in objects:
        if key.startswith("Node/"):
            name = (obj.get("metadata") or {}).get("name")
            if isinstance(name, str) and name:
                node_providers[name] = str((obj.get("spec") or {}).get("providerID") or "")
        elif key.startswith("NodeClaim/"):
            status = obj.get("status") or {}
            name = status.get("nodeName")
            if isinstance(name, str) and name:
                claims.append((str(status.get("providerID") or ""), name))
    pairs = [(provider, name) for provider, name in claims
             if not names_another_instance(provider, node_providers.get(name, ""))]
    pairs += [(provider, name) for name, provider in node_providers.items()]  # last: a Node wins
    return {instance: name for provider, name in pairs if (instance := instance_id_of_provider_id(provider))}


class StoreLookup:
    """The lookup over a ``SnapshotStore`` fed from ``ebb.cluster.objects``; the index is rebuilt when
    the store has changed since the last lookup."""

    def __init__(self, store: SnapshotStore) -> None:
        self.store = store
        self._version = -1
        self._index: dict[str, str] = {}

    def node_for(self, instance_id: str) -> str | None:
        if self._version != self.store.version:
            pairs = []
            for key in list(self.store.keys()):
                if key.startswith(("Node/", "NodeClaim/")):
                    kind, namespace, name = key.split("/", 2)
                    obj = self.store.get(kind, namespace, name)
                    if obj is not None:
                        pairs.append((key, obj))
            self._index = index_objects(pairs)
            self._version = self.store.version
        return self._index.get(instance_id)
