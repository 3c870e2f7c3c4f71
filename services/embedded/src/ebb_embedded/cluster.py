"""The simulated cluster of the embedded mode: the API server, kube-scheduler and controllers, in memory.

It holds kubectl-shaped objects (Nodes, Pods, PDBs, DaemonSets, claims, volumes, StorageClasses, CSINodes,
Namespaces, NodePools, NodeClaims, catalogs, as read from a snapshot file: `KINDS`) and stands in for everything the
distributed mode reads from Kubernetes:

- **the cluster-watcher**: every change is published on ``ebb.cluster.objects`` as the watcher would
  (trimmed with ``ebb.adapters.kube.trim``, keyed ``kind/namespace/name``, a tombstone on delete);
- **the API server** for the termination-executor: it implements the drainer's ``NodeApi`` (JSON patches
  with ``test`` guards on resourceVersion, node delete with finalizers, policy/v1 Evictions that PDBs
  refuse with 429 exactly when the disruption controller would: ``disruptionsAllowed`` from the healthy
  pods the PDB selects, computed by the engine's own ``pdb_allowed``) and the planner's ``set_drifted``
  (the ebb.sh/drifted annotation);
- **the controllers**: an evicted pod owned by a ReplicaSet, StatefulSet, Job or other controller comes
  back as a new Pending pod (a StatefulSet pod under the same name), a DaemonSet pod does not; a deleted node's
  pods, NodeClaim and CSINode (named after it, owned by it) go with it;
- **the cloud**: the executor's ``Launcher``, behind the ``simulated`` provider
  (``ebb.adapters.kube.node_provider.NodeProvider``). A replacement becomes a Node built like a launched one
  (``ebb.adapters.kube.launch.replacement_node``), Ready and initialized ``boot_time(name)`` of simulated
  time after its launch (``boot_seconds``; with ``boot_seconds_max`` a cloud's spread, a time drawn per
  node between the two; with ``boot_samples`` one of a cloud's measured start-up times; drawn from the run's
  seed and the node's name), when the DaemonSets' pods start on it. It gets no CSINode: the CSI drivers it would
  register, and how many volumes each could attach, are not known; it gets the zone labels of the zonal CSI drivers
  the cluster's nodes carry (`csi_zone_labels`);
- **the volume controllers** (`ebb_embedded.volumes`): an ephemeral volume's claim is made with its pod and goes with
  it, a claim that names no class gets the default one, and a claim is bound to a volume the provisioner makes, at
  once for an Immediate class, on the zone of its first pod's node for a WaitForFirstConsumer one;
- **Karpenter's NodePool hash controller**: a NodePool whose ``spec.template`` changes after the start (a
  trace's ``patch`` or ``create``) gets a new ``karpenter.sh/nodepool-hash`` (`template_hash_input`: the
  fields Karpenter hashes), so the nodes launched before it drift as under Karpenter. A template seen before
  gets its hash back, as Karpenter's hash of the same template is the same value; a change that sets the
  annotation itself keeps the value it sets;
- **kube-scheduler**: Pending pods are bound with ebb's own scheduling simulator (``ebb.core.simulator``,
  existing nodes only, no launches), so the cluster never holds a placement the engine would call
  invalid. A pod that fits nowhere stays Pending.

Objects are parsed into the core's model once per change, as the planner's are: the objects are mirrored
into a ``SnapshotStore`` (``ebb.adapters.snapshot_store``), whose cache kube-scheduler's snapshot, the
Eviction API's PDB checks and the disruption controller's counts read.

Times come from the injected clock (simulated time, ``ebb.adapters.clock``); the one wait, kube-scheduler's
delay, is measured on it. Nothing here reads the wall clock.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import pickle
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

import jsonpatch

from ebb.adapters.bus import Bus
from ebb.adapters.clock import Clock, clock_of, until_any
from ebb.adapters.kube.launch import catalog_types, is_ready, replacement_node
from ebb.adapters.kube.node_api import Conflict, EvictionResult, KubeError
from ebb.adapters.kube.trim import trim
from ebb.adapters.snapshot_store import SnapshotStore
from ebb.contracts import TOPIC_CLUSTER_OBJECTS, ClusterObject, Replacement
from ebb.core.cluster import pdb_allowed
from ebb.core.findings import ANNOTATION_DRIFTED
from ebb.core.labels import selector_matches
from ebb.core.launch import LaunchError, LaunchSpec
from ebb.core.model import (
    ANNOTATION_NODEPOOL_HASH,
    LABEL_INITIALIZED,
    LABEL_ZONE,
    InstanceType,
    Interned,
    Pod,
    PodDisruptionBudget,
    Snapshot,
)
from ebb.core.simulator import Scheduler
from ebb.core.simulator.binding import bind
from ebb.core.simulator.constraints import csi_zone_labels, csi_zone_value
from ebb.core.snapshot import ParsedObject, SnapshotError
from ebb_embedded import volumes


def _copied(obj: Any) -> Any:
    """A copy of an object as the API server hands out: its own, sharing nothing with the one held. Through pickle, not
    `copy.deepcopy`: two to three times quicker for these trees of dicts, lists and scalars, which every read and
    write of a node or a pod copies."""
    return pickle.loads(pickle.dumps(obj, pickle.HIGHEST_PROTOCOL))


#: the kinds the cluster-watcher publishes (and so the simulated cluster keeps)
KINDS = ("Node", "Pod", "PodDisruptionBudget", "DaemonSet", "PersistentVolumeClaim", "PersistentVolume", "StorageClass",
         "CSINode", "Namespace", "NodePool", "NodeClaim", "DisruptionPolicy", "InstanceTypeCatalog", "Hold")
RECREATING_OWNERS = ("ReplicaSet", "StatefulSet", "Job", "ReplicationController")
NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
#: how the simulated kube-scheduler picks a node for a Pending pod: ``scored``, as kube-scheduler's default profile
#: (`ebb.core.simulator.binding`); ``first-fit``, the first node in the snapshot's order that takes it, pods largest
#: first (Karpenter's simulation's order and choice)
BINDINGS = ("scored", "first-fit")


#: fields of a NodePool's ``spec.template.spec`` that Karpenter leaves out of its hash (``hash:"ignore"``):
#: requirements drift on their own (a node's labels no longer satisfy them), resources are never set by users
_UNHASHED_TEMPLATE_FIELDS = ("requirements", "resources")
#: the API server's default of ``spec.template.spec.expireAfter`` (the CRD's), the same to the hash as none
_DEFAULT_EXPIRE_AFTER = "720h"


def template_hash_input(nodepool: Mapping[str, Any]) -> str:
    """What Karpenter's ``NodePool.Hash()`` covers, as canonical JSON: ``spec.template`` (its metadata, taints,
    startup taints, nodeClassRef, expireAfter, terminationGracePeriod) without requirements and resources, zero
    values left out and lists compared as sets (hashstructure's ``IgnoreZeroValue`` and ``SlicesAsSets``). Two
    templates give the same string exactly when Karpenter gives them the same hash (up to its hash function)."""
    template = dict((nodepool.get("spec") or {}).get("template") or {})
    spec = {k: v for k, v in (template.get("spec") or {}).items() if k not in _UNHASHED_TEMPLATE_FIELDS}
    if spec.get("expireAfter") == _DEFAULT_EXPIRE_AFTER:
        del spec["expireAfter"]
    template["spec"] = spec
    return json.dumps(_canonical(template), sort_keys=True, separators=(",", ":"))


def _canonical(value: Any) -> Any:
    """``value`` with zero values (None, "", 0, False, empty maps and lists) left out of maps and lists sorted."""
    if isinstance(value, Mapping):
        kept = {str(k): _canonical(v) for k, v in value.items()}
        return {k: v for k, v in kept.items() if v not in (None, "", 0, False, {}, [])}
    if isinstance(value, list | tuple):
        return sorted((_canonical(v) for v in value), key=lambda v: json.dumps(v, sort_keys=True))
    return value


def _rfc3339(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _meta(obj: Mapping[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _pending(pod: Mapping[str, Any]) -> bool:
    """Not bound and not running (a pod kube-scheduler still has to place)."""
    unbound = not (pod.get("spec") or {}).get("nodeName")
    return unbound and (pod.get("status") or {}).get("phase", "Pending") == "Pending"


class SimulatedCluster:
    """The objects of one simulated cluster, published on the bus as they change."""

    def __init__(
        self,
        documents: Iterable[Mapping[str, Any]],
        bus: Bus,
        clock: Clock | Callable[[], datetime],
        *,
        bundled_catalog: Callable[[], Iterable[Any]] | None = None,
        seed: int = 0,
        boot_seconds: float = 60.0,
        boot_seconds_max: float | None = None,
        boot_samples: Sequence[float] = (),
        binding: str = "scored",
    ) -> None:
        if binding not in BINDINGS:
            raise ValueError(f"binding {binding!r}: want one of {', '.join(BINDINGS)}")
        self.bus = bus
        self.clock = clock_of(clock)
        self.bundled_catalog = bundled_catalog
        self._random = random.Random(seed)
        self._seed = seed
        #: how kube-scheduler picks a node (`BINDINGS`), its own random source for ties (the run's others draw the
        #: same whatever it draws) and where its last node search stopped
        self.binding = binding
        self._binding_random = random.Random(f"{seed}/kube-scheduler")
        self._binding_start = 0
        self._resource_version = 1
        #: kind/namespace/name -> the object
        self.objects: dict[str, dict[str, Any]] = {}
        #: node name -> keys of the pods bound to it
        self._pods_on: dict[str, set[str]] = {}
        #: kind -> the keys of its objects, in the order of ``objects`` (a dict as an ordered set), so a look at
        #: one kind (the PDBs of an eviction, the Nodes) does not go over every pod
        self._kinds: dict[str, dict[str, None]] = {}
        #: namespace -> the keys of its pods (a dict as an ordered set): a PDB's pods without a look at every pod
        self._pods_in: dict[str, dict[str, None]] = {}
        #: the keys of the Pending pods (`_pending`), kept as objects change: the run's status counts them often
        self._pending_keys: set[str] = set()
        #: each key's place in the order of ``objects`` (a number that only grows: a key put again after its removal
        #: goes last, as in the dict)
        self._places: dict[str, int] = {}
        self._next_place = 0
        self.evictions = 0
        self.evictions_refused = 0
        self.pods_recreated = 0
        self.pods_bound = 0
        self.nodes_deleted = 0
        #: simulated seconds from a launch to the node being Ready: ``boot_seconds``, or drawn per node between it
        #: and ``boot_seconds_max`` (`boot_time`)
        self.boot_seconds = boot_seconds
        self.boot_seconds_max = boot_seconds_max
        #: when given, the start-up times a cloud was measured to take: each node's is one of them, drawn (`boot_time`)
        self.boot_samples = tuple(sorted(boot_samples))
        #: launched node -> (launch time, hourly price)
        self.launched: dict[str, tuple[datetime, float]] = {}
        self._catalog: dict[str, InstanceType] | None = None
        #: set when a pod became Pending (kube-scheduler's queue is not empty)
        self.pods_waiting = asyncio.Event()
        #: the objects parsed, each once per change (the same objects as ``objects``)
        self._parse_cache = SnapshotStore(bundled_catalog)
        #: each held object handed out since it was stored, pickled (`_handed`), by its key
        self._pickled: dict[str, tuple[dict[str, Any], bytes]] = {}
        #: what each PDB allows, as of the resourceVersion it was found at (every store and removal moves it): found
        #: once per change (a drain asks it for every pod of its node, dry runs first, with nothing changed between)
        self._allowed: tuple[int, dict[str, int]] = (-1, {})
        #: Karpenter's NodePool hash of each template seen (`template_hash_input` -> karpenter.sh/nodepool-hash)
        self._template_hashes: dict[str, str] = {}
        for doc in documents:
            kind = doc.get("kind")
            if kind in KINDS:
                key = self._store(_copied(dict(doc)))
                if kind == "NodePool":
                    self._remember_hash(self.objects[key])

    # -- object store -------------------------------------------------------------------------------------

    @staticmethod
    def key_of(kind: str, namespace: str, name: str) -> str:
        return f"{kind}/{namespace}/{name}"

    def _key(self, obj: Mapping[str, Any]) -> str:
        meta = _meta(obj)
        return self.key_of(str(obj.get("kind")), str(meta.get("namespace") or ""), str(meta.get("name")))

    def _store(self, obj: dict[str, Any]) -> str:
        meta = obj.setdefault("metadata", {})
        self._resource_version += 1
        meta["resourceVersion"] = str(self._resource_version)
        key = self._key(obj)
        old = self.objects.get(key)
        if obj.get("kind") == "Pod":
            if old is not None:
                self._unindex(key, old)
            node = (obj.get("spec") or {}).get("nodeName")
            if node:
                self._pods_on.setdefault(node, set()).add(key)
            if _pending(obj):
                self._pending_keys.add(key)
            else:
                self._pending_keys.discard(key)
            self._pods_in.setdefault(str(meta.get("namespace") or ""), {})[key] = None
        if old is None:  # a new key goes last in ``objects``: its place there
            self._places[key] = self._next_place
            self._next_place += 1
        self.objects[key] = obj
        self._kinds.setdefault(str(obj.get("kind")), {})[key] = None
        self._parse_cache.put(key, obj)
        return key

    def _unindex(self, key: str, pod: Mapping[str, Any]) -> None:
        node = (pod.get("spec") or {}).get("nodeName")
        if node and node in self._pods_on:
            self._pods_on[node].discard(key)

    async def _publish(self, key: str) -> None:
        kind, namespace, name = key.split("/", 2)
        obj = self.objects.get(key)
        if obj is None:
            self._resource_version += 1
            message = ClusterObject(kind=kind, namespace=namespace, name=name,
                                    resource_version=str(self._resource_version), object=None)
        else:
            message = ClusterObject(kind=kind, namespace=namespace, name=name,
                                    resource_version=str(_meta(obj)["resourceVersion"]), object=trim(obj))
        await self.bus.publish(TOPIC_CLUSTER_OBJECTS, message)

    async def _put(self, obj: dict[str, Any]) -> None:
        kind = obj.get("kind")
        if kind == "NodePool":
            obj = self._hashed(obj)
        # (a pod's claims matter only to a pod with volumes: most have none, and pods are most of the writes)
        new = (kind == "PersistentVolumeClaim" or (kind == "Pod" and bool((obj.get("spec") or {}).get("volumes")))) \
            and self._key(obj) not in self.objects
        if new and kind == "PersistentVolumeClaim":  # the DefaultStorageClass admission plugin
            obj = volumes.admitted(obj, self.of_kind("StorageClass")) or obj
        await self._publish(self._store(obj))
        if not new:
            return
        if kind == "Pod":  # the ephemeral volume controller: the claims of the pod's ephemeral volumes
            for claim in volumes.ephemeral_claims(obj):
                if self._key(claim) not in self.objects:
                    await self._put(claim)
        else:
            await self._provide(obj)

    def _class_of(self, claim: Mapping[str, Any]) -> dict[str, Any] | None:
        name = (claim.get("spec") or {}).get("storageClassName")
        return self.objects.get(self.key_of("StorageClass", "", str(name))) if name else None

    async def _provide(self, claim: Mapping[str, Any], node: Mapping[str, Any] | None = None) -> None:
        """The external provisioner: a volume for the unbound ``claim``, made at once for an Immediate class, or on
        ``node``'s topology when the claim's first pod was bound there for a WaitForFirstConsumer one."""
        storage_class = self._class_of(claim)
        if volumes.waits_for_consumer(storage_class) != (node is not None):
            return
        zones = sorted({z for n in self.nodes() if (z := (_meta(n).get("labels") or {}).get(LABEL_ZONE))})
        made = volumes.provision(claim, storage_class, node=node, zones=zones, serial=self._resource_version)
        if made is not None:
            volume, bound = made
            await self._put(volume)
            await self._put(bound)

    async def _bind_claims(self, pod: Mapping[str, Any], node_name: str) -> None:
        """kube-scheduler's volume binding of a pod it bound to ``node_name``: its unbound WaitForFirstConsumer
        claims provisioned on that node."""
        node = self.objects.get(self.key_of("Node", "", node_name))
        namespace = str(_meta(pod).get("namespace") or "default")
        for name in volumes.claim_names(pod):
            claim = self.objects.get(self.key_of("PersistentVolumeClaim", namespace, name))
            if node is not None and claim is not None and not (claim.get("spec") or {}).get("volumeName"):
                await self._provide(claim, node)

    async def _collect_claims(self, pod: Mapping[str, Any]) -> None:
        """The garbage collector of a pod removed: the claims of its ephemeral volumes (it owns them), and the
        volumes made for them whose reclaim policy is Delete."""
        namespace = str(_meta(pod).get("namespace") or "default")
        for name in volumes.claim_names(pod):
            claim = self.objects.get(self.key_of("PersistentVolumeClaim", namespace, name))
            if claim is None or not volumes.owned_by(claim, pod):
                continue
            await self._remove(self._key(claim))
            volume_name = (claim.get("spec") or {}).get("volumeName")
            volume = self.objects.get(self.key_of("PersistentVolume", "", str(volume_name))) if volume_name else None
            if volume is not None and (volume.get("spec") or {}).get("persistentVolumeReclaimPolicy") == "Delete":
                await self._remove(self._key(volume))

    def _remember_hash(self, nodepool: Mapping[str, Any]) -> None:
        given = (_meta(nodepool).get("annotations") or {}).get(ANNOTATION_NODEPOOL_HASH)
        if given:
            self._template_hashes[template_hash_input(nodepool)] = str(given)

    def _hashed(self, nodepool: dict[str, Any]) -> dict[str, Any]:
        """Karpenter's NodePool hash controller on a NodePool about to be stored: a template changed (or new) gets
        the hash of that template, the one it had when seen before, else a new one made from it. A change that
        sets the annotation itself keeps it (the built-in ``drift`` trace, a trace that names its own)."""
        before = self.objects.get(self._key(nodepool))
        annotations = _meta(nodepool).get("annotations") or {}
        given = annotations.get(ANNOTATION_NODEPOOL_HASH)
        previous = (_meta(before).get("annotations") or {}).get(ANNOTATION_NODEPOOL_HASH) if before else None
        hashed = template_hash_input(nodepool)
        if given and given != previous:
            self._template_hashes[hashed] = str(given)
            return nodepool
        if before is not None and template_hash_input(before) == hashed:
            value = previous  # the same template: the same hash (put back if the change dropped it)
        else:
            value = self._template_hashes.setdefault(hashed, "ebb-" + hashlib.sha256(hashed.encode()).hexdigest()[:16])
        if not value or value == given:
            return nodepool
        return {**nodepool, "metadata": {**_meta(nodepool), "annotations": {**annotations,
                                                                              ANNOTATION_NODEPOOL_HASH: value}}}

    async def _remove(self, key: str) -> None:
        obj = self.objects.pop(key, None)
        if obj is None:
            return
        self._kinds.get(str(obj.get("kind")), {}).pop(key, None)
        self._places.pop(key, None)
        self._parse_cache.remove(key)
        self._pickled.pop(key, None)
        if obj.get("kind") == "Pod":
            self._unindex(key, obj)
            self._pending_keys.discard(key)
            self._pods_in.get(str(_meta(obj).get("namespace") or ""), {}).pop(key, None)
        elif obj.get("kind") == "Node":
            self._pods_on.pop(str(_meta(obj).get("name")), None)
        await self._publish(key)
        if obj.get("kind") == "Pod" and (obj.get("spec") or {}).get("volumes"):
            await self._collect_claims(obj)

    async def publish_all(self) -> int:
        """Publish every object (the watcher's initial list); returns how many."""
        for key in sorted(self.objects):
            await self._publish(key)
        return len(self.objects)

    def documents(self) -> list[dict[str, Any]]:
        return list(self.objects.values())

    def snapshot(self) -> Snapshot:
        """The snapshot of the objects held, in their order: ``parse_documents`` of `documents`, from the objects
        parsed once per change (kube-scheduler's next look parses none of them again)."""
        return self._parse_cache.snapshot_of(self.objects)

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        """The objects of ``kind``, in the order of ``objects``."""
        return [self.objects[k] for k in self._kinds.get(kind, ())]

    def nodes(self) -> list[dict[str, Any]]:
        return self.of_kind("Node")

    def node_names(self) -> list[str]:
        return [str(_meta(o).get("name")) for o in self.of_kind("Node")]

    def pending_pods(self) -> list[dict[str, Any]]:
        """The Pending pods, in the order of ``objects``."""
        if not self._pending_keys:
            return []
        # the few pending ones put in order by their places, not found among every pod
        return [self.objects[k] for k in sorted(self._pending_keys, key=self._places.__getitem__)]

    def pending_count(self) -> int:
        return len(self._pending_keys)

    def parsed_as_held(self, key: str, obj: Mapping[str, Any]) -> ParsedObject | None:
        """This cluster's parse of the object under ``key`` when it holds the version ``obj`` is (the same
        ``resourceVersion``: one counter numbers every change of every object here), else None; None too when that
        version is invalid (the asker parses it and says why). ``obj`` may be trimmed (``ebb.cluster.objects``): the
        parser reads nothing trimming removes. For the planner's store (``SnapshotStore.parsed_elsewhere``), so an
        object is parsed once for both."""
        held = self.objects.get(key)
        if held is None or _meta(held).get("resourceVersion") != _meta(obj).get("resourceVersion"):
            return None
        try:
            return self._parse_cache.parsed(key)
        except SnapshotError:
            return None

    def census(self) -> tuple[set[str], int, int]:
        """The names of the nodes, the number of pods and of Pending pods."""
        return set(self.node_names()), len(self._kinds.get("Pod", ())), len(self._pending_keys)

    # -- NodeApi (the termination-executor's drainer) -------------------------------------------------------

    def _handed(self, key: str) -> dict[str, Any] | None:
        """A copy of the object held under ``key`` as the API server hands one out (`_copied`: its own, sharing
        nothing), None when none is: unpickled from the pickle made the first time it was handed out since it was
        stored (a held object is never changed in place, `_store`). The drainer lists a node's pods several times."""
        obj = self.objects.get(key)
        if obj is None:
            return None
        made = self._pickled.get(key)
        if made is None or made[0] is not obj:
            made = self._pickled[key] = (obj, pickle.dumps(obj, pickle.HIGHEST_PROTOCOL))
        handed: dict[str, Any] = pickle.loads(made[1])
        return handed

    async def read_node(self, name: str) -> dict[str, Any] | None:
        return self._handed(self.key_of("Node", "", name))

    async def patch_node(self, name: str, patch: list[dict[str, Any]]) -> None:
        key = self.key_of("Node", "", name)
        node = self.objects.get(key)
        if node is None:
            raise KubeError(404, f'nodes "{name}" not found')
        try:
            patched = jsonpatch.apply_patch(node, patch, in_place=False)
        except jsonpatch.JsonPatchTestFailed as e:
            raise Conflict(409, f"the object has been modified: {e}") from e
        except jsonpatch.JsonPatchException as e:
            raise KubeError(422, str(e)) from e
        if _meta(patched).get("deletionTimestamp") and not _meta(patched).get("finalizers"):
            await self._delete_node_now(key)
            return
        await self._put(patched)

    async def delete_node(self, name: str) -> bool:
        key = self.key_of("Node", "", name)
        node = self.objects.get(key)
        if node is None:
            return False
        if _meta(node).get("finalizers"):
            if not _meta(node).get("deletionTimestamp"):
                marked = _copied(node)
                marked["metadata"]["deletionTimestamp"] = _rfc3339(self.clock())
                await self._put(marked)
            return True
        await self._delete_node_now(key)
        return True

    async def _delete_node_now(self, key: str) -> None:
        name = key.split("/", 2)[2]
        for pod_key in sorted(self._pods_on.get(name, ())):
            await self._remove(pod_key)  # the pod garbage collector: pods of a deleted node go with it
        for claim_key in [k for k in self._kinds.get("NodeClaim", ())
                          if (self.objects[k].get("status") or {}).get("nodeName") == name]:
            await self._remove(claim_key)
        await self._remove(self.key_of("CSINode", "", name))  # the garbage collector: a CSINode is owned by its Node
        await self._remove(key)
        self.nodes_deleted += 1

    async def list_pods(self, node: str) -> list[dict[str, Any]]:
        return [pod for k in sorted(self._pods_on.get(node, ())) if (pod := self._handed(k)) is not None]

    async def read_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self._handed(self.key_of("Pod", namespace, name))

    async def evict(self, namespace: str, name: str, *, uid: str = "",
                    dry_run: bool = False) -> tuple[EvictionResult, str]:
        key = self.key_of("Pod", namespace, name)
        pod = self.objects.get(key)
        if pod is None:
            return "gone", f'pods "{name}" not found'
        if uid and (pod.get("metadata") or {}).get("uid") != uid:
            return "gone", f"Precondition failed: UID in precondition: {uid}"
        parsed: Pod = self._parse_cache.parsed(key).value
        pdbs = self._pdbs_of(parsed)
        if len(pdbs) > 1:
            if not dry_run:
                self.evictions_refused += 1
            return "refused", "This pod has more than one PodDisruptionBudget, which the eviction subresource " \
                              "does not support."
        if pdbs and parsed.ready and parsed.phase == "Running" and self._disruptions_allowed(pdbs[0]) <= 0:
            if not dry_run:
                self.evictions_refused += 1
            return "blocked", "Cannot evict pod as it would violate the pod's disruption budget."
        if dry_run:
            return "evicted", "dry run"
        self.evictions += 1
        await self._remove(key)
        await self._recreate(pod)
        return "evicted", ""

    async def delete_pod(self, namespace: str, name: str, grace_seconds: int) -> bool:
        """A pod deleted at its node's terminationGracePeriod deadline (no PDB asked): gone at once, recreated
        by its controller as an evicted one is (simulated time has no grace to wait out)."""
        key = self.key_of("Pod", namespace, name)
        pod = self.objects.get(key)
        if pod is None:
            return False
        await self._remove(key)
        await self._recreate(pod)
        return True

    async def read_nodepool(self, name: str) -> dict[str, Any] | None:
        """The NodePool ``name`` (its terminationGracePeriod, for the ``simulated`` provider), None when absent."""
        pool = self.objects.get(self.key_of("NodePool", "", name))
        return _copied(pool) if pool is not None else None

    # -- the Launcher (the termination-executor's cloud) ------------------------------------------------------

    def catalog(self) -> dict[str, InstanceType]:
        if self._catalog is None:
            docs = self.of_kind("InstanceTypeCatalog")
            if not docs and self.bundled_catalog is not None:
                docs = list(self.bundled_catalog())
            self._catalog = catalog_types(docs)
        return self._catalog

    async def launch(self, name: str, replacement: Replacement, *, decision_id: str = "") -> LaunchSpec:
        pool = self.objects.get(self.key_of("NodePool", "", replacement.node_pool))
        if pool is None:
            raise LaunchError(f"NodePool {replacement.node_pool} does not exist")
        spec, node = replacement_node(name, replacement, pool, self.catalog(), self.clock(), decision_id=decision_id)
        if self.key_of("Node", "", name) not in self.objects:
            await self._put(node)
            self.launched[name] = (self.clock(), spec.price)
        return spec

    async def ready(self, name: str) -> bool:
        node = self.objects.get(self.key_of("Node", "", name))
        if node is None:
            return False
        if is_ready(node):
            return True
        launched_at = self.launched.get(name, (self.clock(), 0.0))[0]
        # a microsecond's tolerance: the clock's datetimes have no finer resolution than that
        if (self.clock() - launched_at).total_seconds() < self.boot_time(name) - 1e-6:
            return False
        booted = _copied(node)
        now = _rfc3339(self.clock())
        booted["status"]["conditions"] = [{"type": "Ready", "status": "True", "lastTransitionTime": now}]
        labels = booted["metadata"]["labels"]
        labels[LABEL_INITIALIZED] = "true"
        zone = labels.get(LABEL_ZONE)
        if zone:  # the zonal CSI drivers' node plugins the cluster's nodes run register there too
            for key, values in csi_zone_labels(_meta(n).get("labels") or {} for n in self.nodes()):
                value = csi_zone_value(values, zone)
                if value is not None:
                    labels.setdefault(key, value)
        await self._put(booted)
        await self._start_daemonsets(booted)
        return True

    async def delete(self, name: str) -> None:
        await self.delete_node(name)

    def boot_time(self, name: str) -> float:
        """Simulated seconds from the launch of node ``name`` to Ready: ``boot_seconds``; with ``boot_seconds_max`` a
        time drawn uniformly between the two; with ``boot_samples`` one of those measured times, each as likely. The
        draw is the same for a seed and a name in every run (a cloud's start-up time varies by node; the draw does
        not consume the cluster's own random stream, so a run with a spread differs from one without only by the
        boot times)."""
        draw = random.Random(f"{self._seed}/{name}").random()
        if self.boot_samples:
            return self.boot_samples[min(int(draw * len(self.boot_samples)), len(self.boot_samples) - 1)]
        if self.boot_seconds_max is None or self.boot_seconds_max <= self.boot_seconds:
            return self.boot_seconds
        return round(self.boot_seconds + draw * (self.boot_seconds_max - self.boot_seconds), 3)  # whole milliseconds

    async def _start_daemonsets(self, node: Mapping[str, Any]) -> None:
        """The DaemonSet controller: one pod of every DaemonSet whose nodeSelector the node matches."""
        labels = _meta(node).get("labels") or {}
        for ds in self.of_kind("DaemonSet"):
            template = (ds.get("spec") or {}).get("template") or {}
            pod_spec = _copied(template.get("spec") or {})
            if any(labels.get(k) != v for k, v in (pod_spec.get("nodeSelector") or {}).items()):
                continue
            meta = _meta(ds)
            now = _rfc3339(self.clock())
            pod_spec["nodeName"] = _meta(node)["name"]
            await self._put({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {
                    "name": f"{meta.get('name')}-" + "".join(self._random.choice(NAME_ALPHABET) for _ in range(5)),
                    "namespace": meta.get("namespace") or "default",
                    "labels": dict((template.get("metadata") or {}).get("labels") or {}),
                    "uid": f"{self._random.getrandbits(128):032x}", "creationTimestamp": now,
                    "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": meta.get("name"),
                                         "uid": meta.get("uid", ""), "controller": True}]},
                "spec": pod_spec,
                "status": {"phase": "Running", "startTime": now,
                           "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": now}]},
            })

    # -- the planner's annotator (ebb_consolidation_planner.annotator.NodeAnnotator) ----------------------------

    async def set_drifted(self, node: str, reason: str | None) -> None:
        current = self.objects.get(self.key_of("Node", "", node))
        if current is None:
            return
        annotations = dict(_meta(current).get("annotations") or {})
        if annotations.get(ANNOTATION_DRIFTED) == reason or (reason is None and ANNOTATION_DRIFTED not in annotations):
            return
        updated = _copied(current)
        if reason is None:
            annotations.pop(ANNOTATION_DRIFTED, None)
        else:
            annotations[ANNOTATION_DRIFTED] = reason
        updated["metadata"]["annotations"] = annotations
        await self._put(updated)

    # -- controllers and scheduler --------------------------------------------------------------------------

    def _pdbs_of(self, pod: Pod) -> list[PodDisruptionBudget]:
        """The PDBs that select ``pod`` (policy/v1, as for the Eviction API: a null selector selects no pod, an empty
        one every pod of the namespace)."""
        pdbs = [self._parse_cache.parsed(k).value for k in self._kinds.get("PodDisruptionBudget", ())]
        return [pdb for pdb in pdbs if pdb.namespace == pod.namespace
                and pdb.selector is not None and selector_matches(pdb.selector, pod.labels)]

    def _disruptions_allowed(self, pdb: PodDisruptionBudget) -> int:
        """What the disruption controller would write into the PDB's status now (the engine's ``pdb_allowed``
        over the pods the PDB selects), found once per change of the objects."""
        version, known = self._allowed
        if version != self._resource_version:
            known = {}
            self._allowed = (self._resource_version, known)
        key = f"{pdb.namespace}/{pdb.name}"
        allowed = known.get(key)
        if allowed is None:
            allowed = known[key] = self._count_allowed(pdb)
        return allowed

    def _count_allowed(self, pdb: PodDisruptionBudget) -> int:
        selector = pdb.selector
        if selector is None:  # selects no pod
            return pdb_allowed(pdb, []).allowed
        pods = (self._parse_cache.parsed(k).value for k in self._pods_in.get(pdb.namespace, ()))  # no other parsed
        matches: dict[Interned, bool] = {}  # the selector matched once per class of pods (their labels)
        selected = []
        for p in pods:
            hit = matches.get(p.class_key)
            if hit is None:
                hit = matches[p.class_key] = selector_matches(selector, p.labels)
            if hit:
                selected.append(p)
        return pdb_allowed(pdb, [p for p in selected if not p.is_terminal]).allowed

    async def _recreate(self, pod: Mapping[str, Any]) -> None:
        meta = _meta(pod)
        owners = meta.get("ownerReferences") or []
        owner = next((o for o in owners if o.get("controller")), owners[0] if owners else None)
        if owner is None or owner.get("kind") not in RECREATING_OWNERS:
            return  # a bare pod or a DaemonSet pod: nothing brings it back on another node
        new = _copied(dict(pod))
        new_meta = new["metadata"]
        if owner.get("kind") != "StatefulSet":
            base = meta.get("generateName") or f"{owner.get('name', meta.get('name'))}-"
            new_meta["name"] = base + "".join(self._random.choice(NAME_ALPHABET) for _ in range(5))
        now = _rfc3339(self.clock())
        new_meta["uid"] = f"{self._random.getrandbits(128):032x}"
        new_meta["creationTimestamp"] = now
        for field in ("deletionTimestamp", "resourceVersion"):
            new_meta.pop(field, None)
        new.setdefault("spec", {}).pop("nodeName", None)
        new["status"] = {"phase": "Pending"}
        await self._put(new)
        self.pods_recreated += 1
        self.pods_waiting.set()

    async def run_scheduler(self, stop: asyncio.Event, *, delay: float) -> None:
        """kube-scheduler's loop: ``delay`` seconds (of the clock) after pods became Pending, bind those that fit."""
        while not stop.is_set():
            await until_any(self.pods_waiting, stop)
            if stop.is_set():
                return
            await self.clock.sleep(delay)  # evictions come in bursts: bind them together
            self.pods_waiting.clear()
            await self.schedule_pending()

    async def schedule_pending(self) -> int:
        """Bind the Pending pods that fit on an existing node (kube-scheduler); returns how many."""
        pending = self.pending_pods()
        if not pending:
            return 0
        snapshot = self.snapshot()  # in the objects' order, as kube-scheduler lists
        waiting = [p for p in snapshot.pods if p.node_name is None and p.phase == "Pending"]
        if not waiting:
            return 0
        if self.binding == "scored":
            placed, self._binding_start = bind(snapshot, waiting, self._binding_random, self._binding_start)
        else:
            scheduler = Scheduler(snapshot, extra_pods=waiting, kube_scheduler=True)
            state = scheduler.new_state()
            failures, _ = state.place_all(waiting, max_new=0, explain=False)
            # the waiting pods are the only ones the simulation placed (no new node: every bin is a node)
            placed = {key: state.bin_name(b) for key, b in state.placed.items() if key not in failures}
        now = _rfc3339(self.clock())
        for pod_key, node in sorted(placed.items()):
            namespace, name = pod_key.split("/", 1)
            current = self.objects.get(self.key_of("Pod", namespace, name))
            if current is None:
                continue
            # a new object sharing what did not change (no object is edited in place once held, but for the
            # metadata's resourceVersion, which `_store` sets: the metadata is a copy)
            bound = {**current, "metadata": dict(current["metadata"]), "spec": {**current["spec"], "nodeName": node},
                     "status": {"phase": "Running", "startTime": now,
                                "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": now}]}}
            await self._put(bound)
            if bound["spec"].get("volumes"):
                await self._bind_claims(bound, node)
        self.pods_bound += len(placed)
        return len(placed)
