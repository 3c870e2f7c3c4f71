"""Workload traces: what happens to a cluster's workload over time, for ``ebb run --trace`` and ``ebb backtest``.

A trace is a list of timestamped events (seconds after the run's start): ``scale`` a workload (a ReplicaSet,
StatefulSet or Job: its pods are created from a template or deleted, Pending ones first, then the newest),
``create`` objects (pods, NodePools, PDBs, ...: created, or replaced when they exist), ``patch`` one object
(a JSON merge patch, e.g. a NodePool change), ``delete`` one object or every pod of a workload (a finished
Job), ``depart`` one recorded pod (or the pod its controller made in its place after a disruption of the
replay) and ``interrupt`` nodes (the cloud's notice, then the node's end). ``Trace`` is the file format
(``ebb.sh/v1 Trace``, YAML or JSON; ``trace_schema()`` is its JSON schema, in docs/backtest.md).

A trace recorded from a live cluster (``ebb record``, ``ebb.core.recording``) also carries where it started:
its ``start`` time, its ``duration``, the ``cluster`` at the start (the back-test's starting state when no
other is given), and what the recorded cluster's own provisioner and disrupter did (``observed``: node
launches and removals, who made them and why), which a replay does not apply: under each policy the
disruptions are the policy's, and ``observed`` is what to compare them with.

The built-in traces (``builtin_trace``) are generated from the cluster the run starts with, a duration and a
seed, so they are deterministic: ``batch-bursts`` (short Jobs arriving in bursts, the churn Karpenter users
report), ``diurnal`` (the ReplicaSets scaled with the time of day), ``rollout`` (a rolling deploy of the
largest ReplicaSet), ``drift`` (a NodePool change that drifts its nodes), ``spot-interruptions`` (a spot
node interrupted now and then). On an empty cluster each but the last first creates a ``web`` ReplicaSet to
have something to scale. Traces run together as one (``combined``).

Pure: values in, values out (the embedded mode applies the events: ``ebb_embedded.workload``).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ebb.core.quantity import parse_duration

WorkloadKind = Literal["ReplicaSet", "StatefulSet", "Job"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class Workload(_Model):
    """The owner of a set of pods (its controller)."""

    kind: WorkloadKind = "ReplicaSet"
    name: str = Field(min_length=1)
    namespace: str = "default"


class PodTemplate(_Model):
    """The pods a workload creates: labels and a pod spec (as in a Deployment's template); or just requests."""

    labels: dict[str, str] = Field(default_factory=dict)
    cpu: str | None = Field(default=None, description="A shorthand for one container requesting this much CPU.")
    memory: str | None = Field(default=None, description="... and this much memory.")
    spec: dict[str, Any] | None = Field(default=None, description="A full Pod spec (overrides cpu and memory).")


class Scale(_Model):
    workload: Workload
    replicas: int = Field(ge=0)
    template: PodTemplate | None = Field(
        default=None, description="The pods to create; default: a copy of one of the workload's pods.")


class Create(_Model):
    objects: list[dict[str, Any]] = Field(min_length=1, description="kubectl-shaped objects, created or replaced.")


class Patch(_Model):
    kind: str
    name: str
    namespace: str = ""
    merge: dict[str, Any] = Field(description="A JSON merge patch (RFC 7386).")


class Delete(_Model):
    kind: str | None = None
    name: str | None = None
    namespace: str = ""
    workload: Workload | None = Field(default=None, description="Every pod of this workload (e.g. a finished Job).")

    @model_validator(mode="after")
    def _one_target(self) -> Delete:
        if (self.workload is None) == (self.kind is None or self.name is None):
            raise ValueError("delete needs either kind and name, or workload")
        return self


def _seconds(value: Any) -> Any:
    """A duration like 90s, 15m or 2h as seconds; numbers as they are."""
    if isinstance(value, str):
        seconds = parse_duration(value)
        if seconds is None:
            raise ValueError(f"{value!r} is not a duration like 90s, 15m or 2h")
        return seconds
    return value


#: how long the cloud gives a spot instance after its interruption notice (AWS: two minutes)
SPOT_NOTICE_SECONDS = 120.0


class Interrupt(_Model):
    """The cloud interrupts nodes: ebb hears of it at once (as the interruption-ingester would tell it), and the
    cloud takes each node away ``notice`` later if it is still there, its pods with it (their controllers make
    them again, Pending). A ``rebalance`` recommendation takes nothing away."""

    node: str | None = Field(default=None, min_length=1, description="The node; default: ``nodes`` of them, picked "
                             "at random (from the run's seed) among the Ready nodes that match.")
    nodes: int = Field(default=1, ge=1, description="How many nodes to pick when ``node`` is not given.")
    capacity_type: Literal["spot", "on-demand", "reserved"] | None = Field(
        default="spot", alias="capacityType", description="Pick among nodes of this capacity type; null: any.")
    nodepool: str | None = Field(default=None, description="Pick among this NodePool's nodes; default: any.")
    kind: Literal["spot-interruption", "scheduled-change", "rebalance"] = "spot-interruption"
    notice: float = Field(default=SPOT_NOTICE_SECONDS, gt=0, description="Seconds (or 90s, 15m, 2h) from the notice "
                          "to the node's end.")

    @field_validator("notice", mode="before")
    @classmethod
    def _notice(cls, value: Any) -> Any:
        return _seconds(value)


class Depart(_Model):
    """A recorded pod departs (its workload deleted it, or it finished): the pod of this name, or, when the
    replay's disruptions evicted it and its controller made it again under another name, the pod made in its
    place (the same replica)."""

    namespace: str = "default"
    name: str = Field(min_length=1)


class TraceEvent(_Model):
    at: float = Field(ge=0, description="Seconds after the start, or a duration like 90s, 15m, 2h.")
    scale: Scale | None = None
    create: Create | None = None
    patch: Patch | None = None
    delete: Delete | None = None
    depart: Depart | None = None
    interrupt: Interrupt | None = None

    @field_validator("at", mode="before")
    @classmethod
    def _duration(cls, value: Any) -> Any:
        return _seconds(value)

    @model_validator(mode="after")
    def _one_action(self) -> TraceEvent:
        actions = (self.scale, self.create, self.patch, self.delete, self.depart, self.interrupt)
        if sum(x is not None for x in actions) != 1:
            raise ValueError("an event has exactly one of scale, create, patch, delete, depart, interrupt")
        return self


NodeChangeKind = Literal["launched", "removed"]


class NodeChange(_Model):
    """A node launched or removed in a recorded cluster, by its own provisioner or disrupter (not replayed)."""

    at: float = Field(ge=0, description="Seconds after the recording's start.")
    node: str = Field(min_length=1)
    change: NodeChangeKind
    by: str = Field(default="unknown", description="Who made the change: karpenter, ebb, or unknown (a person, "
                    "the cloud, another controller).")
    reason: str = Field(default="", description="Why: for a launch, provisioning (pending pods) or a "
                        "disruption's replacement; for a removal, the disruption's reason (Underutilized, Empty, "
                        "Drifted, Expired, Interrupted, ...) or deleted.")
    detail: str = Field(default="", description="What the NodeClaim's conditions or the Events said.")
    nodepool: str = ""
    instance_type: str = Field(default="", alias="instanceType")
    capacity_type: str = Field(default="", alias="capacityType")


class Trace(_Model):
    """An ``ebb.sh/v1 Trace``: a workload's changes over time."""

    api_version: Literal["ebb.sh/v1"] = Field(default="ebb.sh/v1", alias="apiVersion")
    kind: Literal["Trace"] = "Trace"
    name: str = Field(min_length=1)
    description: str = ""
    events: list[TraceEvent] = Field(default_factory=list)
    start: datetime | None = Field(default=None, description="A recorded trace: when the recording began.")
    duration: float | None = Field(default=None, ge=0, description="A recorded trace: seconds recorded.")
    cluster: list[dict[str, Any]] | None = Field(
        default=None, description="A recorded trace: the cluster's objects at the start (kubectl-shaped), the "
        "back-test's starting state when no other is given.")
    observed: list[NodeChange] = Field(
        default_factory=list, description="A recorded trace: the node launches and removals the recorded cluster's "
        "provisioner and disrupter made. Not replayed: under each policy the disruptions are the policy's.")

    def ordered(self) -> list[TraceEvent]:
        """The events by time (those at the same time in file order)."""
        return sorted(self.events, key=lambda e: e.at)


def trace_schema() -> dict[str, Any]:
    """The JSON schema of a trace file."""
    return Trace.model_json_schema(by_alias=True)


# -- built-in traces ---------------------------------------------------------------------------------------

BASE_WORKLOAD = Workload(kind="ReplicaSet", name="web", namespace="default")
BASE_TEMPLATE = PodTemplate(labels={"app": "web"}, cpu="500m", memory="1Gi")
BASE_REPLICAS = 40


def _owner(pod: Mapping[str, Any]) -> tuple[str, str, str] | None:
    meta = pod.get("metadata") or {}
    for ref in meta.get("ownerReferences") or []:
        if ref.get("controller") and ref.get("kind") in ("ReplicaSet", "StatefulSet"):
            return str(ref["kind"]), str(meta.get("namespace") or "default"), str(ref.get("name"))
    return None


def replica_sets(documents: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str, str], int]:
    """(kind, namespace, name) -> pods, of the ReplicaSets and StatefulSets owning pods in ``documents``."""
    counts: dict[tuple[str, str, str], int] = {}
    for doc in documents:
        if doc.get("kind") == "Pod" and (owner := _owner(doc)) is not None:
            counts[owner] = counts.get(owner, 0) + 1
    return dict(sorted(counts.items()))


def _nodes(documents: Sequence[Mapping[str, Any]]) -> int:
    return sum(1 for d in documents if d.get("kind") == "Node")


def _base(documents: Sequence[Mapping[str, Any]]) -> tuple[list[TraceEvent], dict[tuple[str, str, str], int]]:
    """The workloads to scale; on a cluster without any, a ``web`` ReplicaSet created at the start."""
    workloads = replica_sets(documents)
    if workloads:
        return [], workloads
    event = TraceEvent(at=0, scale=Scale(workload=BASE_WORKLOAD, replicas=BASE_REPLICAS, template=BASE_TEMPLATE))
    return [event], {("ReplicaSet", "default", "web"): BASE_REPLICAS}


def batch_bursts(documents: Sequence[Mapping[str, Any]], *, start: datetime, duration: float, seed: int,
                 every: float = 1800.0) -> Trace:
    """Bursts of short Jobs every ``every`` seconds (± 10%): 2-5 Jobs a burst, each 4-16 pods of 1-4 CPU,
    running 10-30 minutes (one Job in twenty: 2 hours); their pods are deleted when the Job ends. The bursts'
    size grows with the cluster (a tenth of its nodes' worth of pods per Job, at least 4)."""
    del start
    rng = random.Random(seed)
    events, _ = _base(documents)
    per_job = max(4, _nodes(documents) // 10)
    at, burst = 60.0, 0
    while at < duration:
        for job in range(rng.randint(2, 5)):
            name = f"burst-{burst}-{job}"
            workload = Workload(kind="Job", name=name, namespace="batch")
            cpu = rng.choice(("1", "2", "3", "4"))
            template = PodTemplate(labels={"job-name": name}, cpu=cpu, memory=f"{int(cpu) * 2}Gi")
            events.append(TraceEvent(at=at, scale=Scale(workload=workload, replicas=rng.randint(per_job,
                                                                                             per_job * 4),
                                                        template=template)))
            runtime = 7200.0 if rng.random() < 0.05 else rng.uniform(600.0, 1800.0)
            events.append(TraceEvent(at=at + runtime, delete=Delete(workload=workload)))
        burst += 1
        at += every * rng.uniform(0.9, 1.1)
    return Trace(name="batch-bursts", description=f"Job bursts every {every / 60:g} minutes (seed {seed})",
                 events=[e for e in events if e.at < duration])


def diurnal(documents: Sequence[Mapping[str, Any]], *, start: datetime, duration: float, seed: int,
            every: float = 900.0) -> Trace:
    """Every ``every`` seconds, each ReplicaSet scaled to its size at the start times the day's load
    (0.4 at 04:00 UTC, 1.0 at 16:00, a sine in between) over the load at the start, ± 5%."""
    rng = random.Random(seed)
    events, workloads = _base(documents)

    def load(t: float) -> float:
        hour = (start.hour + start.minute / 60 + t / 3600) % 24
        return 0.7 + 0.3 * math.sin(2 * math.pi * (hour - 10) / 24)

    at = every
    while at < duration:
        for (kind, namespace, name), replicas in workloads.items():
            size = round(replicas * load(at) / load(0) * rng.uniform(0.95, 1.05))
            events.append(TraceEvent(at=at, scale=Scale(
                workload=Workload(kind=kind, name=name, namespace=namespace),  # type: ignore[arg-type]
                replicas=max(1, size))))
        at += every
    return Trace(name="diurnal", description=f"ReplicaSets following the time of day (seed {seed})", events=events)


def rollout(documents: Sequence[Mapping[str, Any]], *, start: datetime, duration: float, seed: int,
            at: float = 600.0, step: float = 120.0) -> Trace:
    """A rolling deploy of the largest ReplicaSet at ``at``: a new ReplicaSet (``NAME-v2``, same pods) grows by
    a quarter of the replicas every ``step`` seconds while the old one shrinks by as much (maxSurge 25%)."""
    del start, seed
    events, workloads = _base(documents)
    (kind, namespace, name), replicas = max(workloads.items(), key=lambda kv: (kv[1], kv[0]))
    old = Workload(kind=kind, name=name, namespace=namespace)  # type: ignore[arg-type]
    new = Workload(kind=kind, name=f"{name}-v2", namespace=namespace)  # type: ignore[arg-type]
    surge = max(1, math.ceil(replicas / 4))
    moved = 0
    template = BASE_TEMPLATE if events else None
    while moved < replicas:
        moved = min(replicas, moved + surge)
        events.append(TraceEvent(at=at, scale=Scale(workload=new, replicas=moved, template=template)))
        events.append(TraceEvent(at=at + step / 2, scale=Scale(workload=old, replicas=replicas - moved)))
        at += step
    return Trace(name="rollout", description=f"a rolling deploy of {namespace}/{name} ({replicas} pods)",
                 events=[e for e in events if e.at < duration])


def drift(documents: Sequence[Mapping[str, Any]], *, start: datetime, duration: float, seed: int) -> Trace:
    """At a quarter of the run, every NodePool's template changes (a label): Karpenter computes a new hash,
    so every node it launched before is drifted."""
    del start
    events, _ = _base(documents)
    at = min(duration / 4, 1800.0)
    for doc in documents:
        if doc.get("kind") != "NodePool":
            continue
        name = str((doc.get("metadata") or {}).get("name"))
        events.append(TraceEvent(at=at, patch=Patch(kind="NodePool", name=name, merge={
            "metadata": {"annotations": {"karpenter.sh/nodepool-hash": f"trace-drift-{seed}"}},
            "spec": {"template": {"metadata": {"labels": {"ebb.sh/trace-revision": "2"}}}}})))
    return Trace(name="drift", description="every NodePool's template changes", events=events)


def spot_interruptions(documents: Sequence[Mapping[str, Any]], *, start: datetime, duration: float, seed: int,
                       every: float = 3600.0) -> Trace:
    """A spot node interrupted now and then: at random times, ``every`` seconds apart on average (a Poisson
    process), one Ready spot node picked at random gets the cloud's two-minute notice. Meant to be run with
    another trace (``--trace batch-bursts --trace spot-interruptions``); it adds no workload of its own."""
    del documents, start
    rng = random.Random(seed)
    events: list[TraceEvent] = []
    at = rng.expovariate(1.0 / every)
    while at < duration:
        events.append(TraceEvent(at=round(at, 3), interrupt=Interrupt()))
        at += rng.expovariate(1.0 / every)
    return Trace(name="spot-interruptions", description=f"a spot node interrupted every {every / 60:g} minutes on "
                 f"average (seed {seed})", events=events)


BUILTIN: dict[str, Callable[..., Trace]] = {
    "batch-bursts": batch_bursts,
    "diurnal": diurnal,
    "rollout": rollout,
    "drift": drift,
    "spot-interruptions": spot_interruptions,
}


def combined(traces: Sequence[Trace]) -> Trace:
    """The traces as one: their events together (at the same time, in the order of ``traces``), named after all
    of them (``batch-bursts+spot-interruptions``)."""
    if len(traces) == 1:
        return traces[0]
    return Trace(name="+".join(t.name for t in traces), description="; ".join(t.description for t in traces if
                                                                              t.description),
                 events=[event for trace in traces for event in trace.events])


#: the built-in traces that take a period (``NAME@PERIOD``, e.g. ``spot-interruptions@30m``): their ``every``
PERIODIC = ("batch-bursts", "diurnal", "spot-interruptions")


def builtin_trace(name: str, documents: Sequence[Mapping[str, Any]], *, start: datetime, duration: float,
                  seed: int, every: float | None = None) -> Trace:
    """The built-in trace ``name`` for a run of ``duration`` seconds from ``start`` on ``documents``; ``every``
    (seconds) changes the period of one of `PERIODIC` (ValueError for another)."""
    if name not in BUILTIN:
        raise KeyError(name)
    if every is None:
        return BUILTIN[name](documents, start=start, duration=duration, seed=seed)
    if name not in PERIODIC:
        raise ValueError(f"{name} takes no period (those that do: {', '.join(PERIODIC)})")
    if every <= 0:
        raise ValueError(f"the period of {name} must be positive")
    return BUILTIN[name](documents, start=start, duration=duration, seed=seed, every=every)


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: ``patch`` applied to ``target`` (neither is changed)."""
    if not isinstance(patch, Mapping):
        return patch
    out = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def pod_spec(template: PodTemplate) -> dict[str, Any]:
    """The pod spec a template describes."""
    if template.spec is not None:
        return dict(template.spec)
    requests = {k: v for k, v in (("cpu", template.cpu), ("memory", template.memory)) if v is not None}
    return {"containers": [{"name": "main", "image": "registry.example/app:1",
                            "resources": {"requests": requests}}]}
